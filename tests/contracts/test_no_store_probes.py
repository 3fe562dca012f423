"""The API asks the engine; it never probes a store for what it can do (issue 31).

Every query store is an :class:`~lineage_sdk.collector.engine.Engine` over a backend, so which
read works is never decided in the callers: ``collector/api/`` has no ``hasattr``, no
``getattr`` and no ``isinstance(..., SomethingProtocol)``. The one ``getattr`` allowed is the
package's lazy attribute loader (``__getattr__`` of ``api/__init__.py``, a module, not a store).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import lineage_sdk.collector.api as api_package
from lineage_sdk.collector.api import access
from lineage_sdk.collector.engine import Engine

API = Path(api_package.__file__).parent


def _probes(path: Path, root: Path = API.parent) -> list[str]:
    """``hasattr``/``getattr`` calls and ``isinstance`` calls naming a ``*Protocol``, each as
    ``file:line`` (a module-level ``__getattr__``'s own body excepted)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    allowed: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            allowed.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        name = node.func.id
        probe = name in {"hasattr", "getattr"} or (
            name == "isinstance"
            and len(node.args) == 2
            and any(
                isinstance(n, ast.Name) and n.id.endswith("Protocol")
                for n in ast.walk(node.args[1])
            )
        )
        if probe and node.lineno not in allowed:
            found.append(f"{path.relative_to(root)}:{node.lineno} {name}")
    return sorted(found)


def test_the_api_never_probes_a_store() -> None:
    files = sorted(API.rglob("*.py"))
    assert len(files) > 20  # the whole package is read, routes included
    assert [p for f in files for p in _probes(f)] == []


def test_the_probe_finder_finds_probes(tmp_path: Path) -> None:
    """The check above can fail: each kind of probe is found, the lazy loader is not."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def __getattr__(name):\n"
        "    return getattr(module, name)\n"
        "def read(store):\n"
        "    if hasattr(store, 'child_runs'):\n"
        "        return getattr(store, 'job_events_up_to', None)\n"
        "    return isinstance(store, (int, LineageHistoryProtocol))\n",
        encoding="utf-8",
    )
    assert _probes(sample, tmp_path) == [
        "sample.py:4 hasattr",
        "sample.py:5 getattr",
        "sample.py:6 isinstance",
    ]


def test_every_engine_read_is_filtered_or_closed_for_a_restricted_key() -> None:
    """Fail-closed: each public read of the engine is one a key's sight filters, one it hands
    out as it is, or one that raises; a read added to the engine later is closed until someone
    writes its filter."""
    reads = {n for n, v in vars(Engine).items() if callable(v) and not n.startswith("_")}
    assert {"lineage", "events_of_run", "child_runs", "latest_runs", "runs_of_job"} <= (
        access.FILTERED
    )
    for name in reads - access.FILTERED - access.PASS_THROUGH:
        assert vars(access.Sight)[name].__name__ == name
        with pytest.raises(access.ClosedAttribute, match=repr(name)):
            vars(access.Sight)[name]()
    assert {"delete_events", "count_raw_events", "stored_event_ids"} <= reads - access.FILTERED
