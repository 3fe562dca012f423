"""One side of ``bench_engine.py``: a process that holds stores of one source tree and times the
writes and reads its parent asks for, so the parent can set a baseline revision's stores (a git
worktree, loaded through ``PYTHONPATH``) against the current tree's in the same run.

Started by ``bench_engine.py`` as ``python bench/_engine_worker.py`` with ``BENCH_TREE`` the
root of the tree to load (``PYTHONPATH`` names it first, so ``lineage_sdk`` is that tree's). It
reads one JSON request a line on stdin and writes one JSON answer a line on the stdout it was
given; whatever the code under test prints goes to stderr. The harness (this file, the event
file, the order of the calls) is the same for both sides; only the code under test differs. Each
call is timed here, in the process doing the work, so the pipe costs neither side anything.

Requests (``op``): ``open`` a store (``kind`` sqlite/postgres/graph, ``store`` "old" for the
store the engine replaced, loaded by name from the tree, or "engine" for ``EngineStore`` over
the tree's backend; ``label``, ``url``, ``table_prefix``, ``redis_port``, ``graph``); ``fill``
it from an NDJSON file of events (each batch built with the tree's ``build_record`` first, not
timed, then its ``write_batch``, timed: the events, wall and process CPU seconds); ``read``
(``what`` lineage, asof or columns, with the root's parameters: wall ms, a NotFound answer
included); ``close``; ``exit``.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import itertools
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

TREE = Path(os.environ["BENCH_TREE"]).resolve()
sys.path.insert(0, str(TREE / "tests"))  # servers.py of the same tree (its FalkorDB runner)

import lineage_sdk  # noqa: E402
from lineage_sdk.collector.api import queries  # noqa: E402
from lineage_sdk.collector.records import build_record  # noqa: E402
from lineage_sdk.collector.startup import tune_gc  # noqa: E402

NODE_LIMIT = 1000

#: The stores the engine replaced, by kind: (module, class), imported from the tree by name (a
#: baseline revision has them; the current tree has not).
_OLD = {
    "sqlite": ("lineage_sdk.collector.stores.sql", "SqlStore"),
    "postgres": ("lineage_sdk.collector.stores.sql", "SqlStore"),
    "graph": ("lineage_sdk.collector.stores.graph", "Neo4jLineageStore"),
}


def _make(request: dict[str, Any]) -> Any:
    kind, which = request["kind"], request["store"]
    runner = None
    if kind == "graph":
        from servers import FalkorDBRespRunner

        runner = FalkorDBRespRunner(
            "127.0.0.1", request["redis_port"], request["graph"], timeout_s=3600
        )
        runner.drop()
    if which == "old":
        module, name = _OLD[kind]
        cls = getattr(importlib.import_module(module), name)
        if runner is not None:
            return cls(runner=runner), runner
        return cls(request["url"], table_prefix=request["table_prefix"]), None
    if which != "engine":
        raise SystemExit(f"unknown store {which!r}: old or engine")
    engine_store = importlib.import_module("lineage_sdk.collector.engine").EngineStore
    if runner is not None:
        backend_cls = importlib.import_module(
            "lineage_sdk.collector.stores.graph_backend"
        ).GraphBackend
        return engine_store(backend_cls(runner=runner)), runner
    backend_cls = importlib.import_module("lineage_sdk.collector.stores.sql_backend").SqlBackend
    backend = backend_cls(request["url"], table_prefix=request["table_prefix"])
    return engine_store(backend), None


def _fill(store: Any, path: str, batch: int) -> dict[str, float]:
    """Write the file's events in batches of ``batch``; only ``write_batch`` is timed (each
    batch's records are built first, so memory stays flat at a million events)."""
    events, wall, cpu = 0, 0.0, 0.0
    gc.collect()
    with open(path, "rb") as fh:
        while lines := list(itertools.islice(fh, batch)):
            records = [build_record(orjson.loads(line)) for line in lines]
            w, c = time.perf_counter(), time.process_time()
            store.write_batch(records)
            wall += time.perf_counter() - w
            cpu += time.process_time() - c
            events += len(records)
    gc.collect()
    return {"events": events, "seconds": wall, "cpu_s": cpu}


def _read(store: Any, what: str, p: dict[str, Any]) -> float:
    if what == "lineage":

        def call() -> Any:
            return store.lineage(
                p["node"], direction=p["direction"], depth=10, node_limit=NODE_LIMIT
            )

    elif what == "asof":
        as_of = datetime.fromisoformat(p["as_of"])

        def call() -> Any:
            return queries.lineage(
                store,
                p["node"],
                direction=p["direction"],
                depth=10,
                as_of=as_of,
                node_limit=NODE_LIMIT,
            )

    elif what == "columns":

        def call() -> Any:
            return store.column_lineage(p["field"], depth=5, node_limit=NODE_LIMIT)

    else:
        raise SystemExit(f"unknown read {what!r}")
    t0 = time.perf_counter()
    with contextlib.suppress(queries.NotFound):
        call()
    return (time.perf_counter() - t0) * 1000


def main() -> int:
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the code under test prints to stderr; stdout is the answers' pipe
    loaded = Path(lineage_sdk.__file__).resolve()
    if not loaded.is_relative_to(TREE):
        raise SystemExit(f"lineage_sdk loaded from {loaded}, not from {TREE}")
    tune_gc()  # as ``serve`` and ``run`` do
    stores: dict[str, tuple[Any, Any]] = {}
    for line in sys.stdin.buffer:
        request = orjson.loads(line)
        op = request["op"]
        answer: dict[str, Any] = {}
        if op == "open":
            store, runner = _make(request)
            store.open()
            stores[request["label"]] = (store, runner)
        elif op == "fill":
            answer = _fill(stores[request["label"]][0], request["path"], request["batch"])
        elif op == "read":
            store = stores[request["label"]][0]
            answer = {"ms": _read(store, request["what"], request["params"])}
        elif op == "close":
            store, runner = stores.pop(request["label"])
            store.close()
            if runner is not None:
                runner.drop()
        elif op == "exit":
            break
        else:
            raise SystemExit(f"unknown op {op!r}")
        answers.write(orjson.dumps(answer) + b"\n")
        answers.flush()
    for store, runner in stores.values():
        store.close()
        if runner is not None:
            runner.drop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
