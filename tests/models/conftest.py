"""Fixtures for the model tests: the spec's example documents and the conformance helper."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# tests/conformance.py is a helper module, not a package member: make it importable however
# pytest was started (rootdir, tests/, or a single file) and whatever the import mode.
# The same for the helpers next to this file (_model_helpers.py).
for _folder in (Path(__file__).resolve().parents[1], Path(__file__).resolve().parent):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

import conformance  # noqa: E402


@pytest.fixture(scope="session")
def examples_dir() -> Path:
    path: Path = conformance.shared_dir() / "openlineage-spec" / "examples"
    assert path.is_dir(), f"spec examples not found at {path}"
    return path
