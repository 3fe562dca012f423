"""Config tests run in an empty working directory so a stray ./lineage.toml cannot leak in."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from http_recorder import server  # noqa: F401 - a fixture, found by its name


@pytest.fixture(autouse=True, scope="module")
def _empty_cwd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    # Module scope so hypothesis tests (which refuse function-scoped fixtures) are covered too.
    workdir = tmp_path_factory.mktemp("cwd")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(workdir)
        yield workdir


@pytest.fixture
def write_toml(tmp_path: Path):
    """Write TOML text to a fresh file and return its path."""

    def write(text: str, name: str = "lineage.toml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write
