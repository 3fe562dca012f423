"""The suite imports test modules by basename (pytest's prepend mode): names must be unique."""

from __future__ import annotations

from collections import Counter
from pathlib import Path


def test_python_module_basenames_under_tests_are_unique():
    tests = Path(__file__).resolve().parents[1]
    names = Counter(
        p.name for p in tests.rglob("*.py") if p.name not in ("conftest.py", "__init__.py")
    )
    assert [name for name, count in names.items() if count > 1] == []
