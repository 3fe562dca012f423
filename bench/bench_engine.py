"""The engine against the store it replaces, same events, same run (issue 31's ratio targets).

    python bench/bench_engine.py [--stores sqlite,postgres] [--events 100000] [--queries 200]
                                 [--write-events 20000] [--rounds 3] [--skip-write] [--json PATH]

For each store kind, two stores of the same server hold the same events: the old store
(``SqlStore``, ``Neo4jLineageStore``) and ``EngineStore`` over the new backend (``SqlBackend`` with
its own tables, ``GraphBackend`` on its own graph).

* **reads**: the ``bench_million`` graph shape at ``--events`` events (20 layers, each job run 5
  times, schema and column lineage on every output), loaded once into both with ``write_batch``
  in batches of 1,000. Then the store-object reads of ``bench_million``'s query phase, from the
  same random roots: lineage at depth 10 (``node_limit`` 1,000), the same with ``asOf`` (the
  API's query function, no HTTP), column lineage at depth 5. Old and new answer the same root
  one after the other, so both see the same machine; p50 / p95 / p99 ms and the ratio new / old.
* **writes**: ``--write-events`` events of the same shape written with ``write_batch`` (batches
  of 200) into an empty store, old and new alternating for ``--rounds`` rounds; events/s each and
  the ratio of the medians.

``sqlite`` is a file in a temporary folder; ``graph`` a graph on a FalkorDB started here (its
Redis protocol); ``postgres`` a database of the bench's own on 127.0.0.1:5432, created and
dropped, with ``VACUUM ANALYZE`` after the load (the shared server runs without autovacuum; a
deployment's would do it). The bench runs with ``tune_gc``, as ``serve`` and ``run`` do (at
CPython's default thresholds the engine's writes spent a third of their time collecting).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from _bench_common import load_average, postgres_database
from bench_million import JOB_NS, NS, RUN_SPAN, T0, Graph, generate
from servers import FalkorDBRespRunner, FalkorDBServer

from lineage_sdk.collector.api import queries
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.startup import tune_gc
from lineage_sdk.collector.store import LineageRecord
from lineage_sdk.collector.stores.graph import Neo4jLineageStore
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.sql import SqlStore
from lineage_sdk.collector.stores.sql_backend import SqlBackend

NODE_LIMIT = 1000
FIELDS = ("id", "key", "value", "updated_at")


def _records(events: int, seed: int) -> list[LineageRecord]:
    return [build_record(e) for e in generate(Graph(events, seed))]


class Kinds:
    """Where each kind's old and new store live: SQLite files, PostgreSQL databases of the
    bench's own, graphs on one FalkorDB started here (through its Redis protocol)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.falkor: FalkorDBServer | None = None

    @contextlib.contextmanager
    def pair(self, kind: str, label: str, *, only: str | None = None) -> Iterator[dict[str, Any]]:
        """``{"old": store, "new": store}`` of ``kind`` (or just ``only``), open and empty."""
        stores: dict[str, Any] = {}
        cleanups: list[Callable[[], None]] = []
        with contextlib.ExitStack() as stack:
            if kind == "sqlite":
                url = f"sqlite:///{self.folder}/{label}.db"
            elif kind == "postgres":
                url = stack.enter_context(postgres_database(f"lineage_bench_engine_{label}"))
            elif kind == "graph":
                url = ""
            else:
                raise SystemExit(f"unknown store kind {kind!r}: sqlite, postgres or graph")
            for which in ("old", "new"):
                if only not in (None, which):
                    continue
                if kind == "graph":
                    runner = self.graph_runner(f"{label}_{which}")
                    cleanups.append(runner.drop)
                    stores[which] = (
                        Neo4jLineageStore(runner=runner)
                        if which == "old"
                        else EngineStore(GraphBackend(runner=runner))
                    )
                else:
                    stores[which] = (
                        SqlStore(url)
                        if which == "old"
                        else EngineStore(SqlBackend(url, table_prefix="engine_"))
                    )
                stores[which].open()
                cleanups.append(stores[which].close)
            try:
                yield stores
            finally:
                for cleanup in reversed(cleanups):
                    cleanup()

    def graph_runner(self, name: str) -> FalkorDBRespRunner:
        if self.falkor is None:
            self.falkor = FalkorDBServer(persistent=False)
            self.falkor.start()
        runner = FalkorDBRespRunner("127.0.0.1", self.falkor.redis_port, name, timeout_s=3600)
        runner.drop()
        return runner

    def analyze(self, store: Any) -> None:
        """PostgreSQL: ``VACUUM ANALYZE`` after a bulk load (see the module docstring)."""
        engine = getattr(store, "engine", None)
        if engine is not None and engine.dialect.name == "postgresql":
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(sa.text("VACUUM ANALYZE"))

    def close(self) -> None:
        if self.falkor is not None:
            self.falkor.stop()


def _fill(store: Any, records: list[LineageRecord], batch: int) -> float:
    started = time.perf_counter()
    for i in range(0, len(records), batch):
        store.write_batch(records[i : i + batch])
    return time.perf_counter() - started


def _percentiles(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)

    def at(q: float) -> float:
        return round(s[min(int(q * len(s)), len(s) - 1)], 1)

    return {"p50": round(statistics.median(s), 1), "p95": at(0.95), "p99": at(0.99)}


def _plan(graph: Graph, seed: int, count: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    plan = []
    for i in range(count):
        layer = rng.randint(8, 12)
        if rng.random() < 0.5:
            node = f"job:{JOB_NS}:{graph.job(layer, rng.randrange(graph.jobs_per_layer))}"
        else:
            node = f"dataset:{NS}:{graph.dataset(layer, rng.randrange(graph.datasets_per_layer))}"
        ds = graph.dataset(layer, rng.randrange(graph.datasets_per_layer))
        plan.append(
            {
                "node": node,
                "direction": ("upstream", "downstream", "both")[i % 3],
                "as_of": T0 + timedelta(seconds=rng.uniform(0, 5 * RUN_SPAN.total_seconds())),
                "field": f"datasetField:{NS}:{ds}:{rng.choice(FIELDS)}",
            }
        )
    return plan


READS: dict[str, Callable[[Any, dict[str, Any]], Any]] = {
    "lineage": lambda s, p: s.lineage(
        p["node"], direction=p["direction"], depth=10, node_limit=NODE_LIMIT
    ),
    "asof": lambda s, p: queries.lineage(
        s, p["node"], direction=p["direction"], depth=10, as_of=p["as_of"], node_limit=NODE_LIMIT
    ),
    "columns": lambda s, p: s.column_lineage(p["field"], depth=5, node_limit=NODE_LIMIT),
}


def reads(kind: str, args: argparse.Namespace, kinds: Kinds) -> dict[str, Any]:
    graph = Graph(args.events, args.seed)
    records = _records(args.events, args.seed)
    figures: dict[str, Any] = {}
    with kinds.pair(kind, "reads") as stores:
        figures["load_s"] = {
            label: round(_fill(store, records, 1000), 1) for label, store in stores.items()
        }
        del records
        kinds.analyze(stores["old"])
        gc.collect()
        plan = _plan(graph, args.seed, args.queries + 1)
        for what, call in READS.items():
            times: dict[str, list[float]] = {"old": [], "new": []}
            for i, params in enumerate(plan):
                for label in ("old", "new") if i % 2 else ("new", "old"):
                    t0 = time.perf_counter()
                    with contextlib.suppress(queries.NotFound):
                        call(stores[label], params)
                    if i:  # the first (cold) read apart
                        times[label].append((time.perf_counter() - t0) * 1000)
            fig: dict[str, Any] = {label: _percentiles(s) for label, s in times.items()}
            for q in ("p50", "p95"):
                fig[f"ratio_{q}"] = round(fig["new"][q] / fig["old"][q], 2)
            figures[what] = fig
            print(f"  {kind} {what}: {fig} load {load_average()}", flush=True)
    return figures


def writes(kind: str, args: argparse.Namespace, kinds: Kinds) -> dict[str, Any]:
    records = _records(args.write_events, args.seed + 1)
    rates: dict[str, list[float]] = {"old": [], "new": []}
    for round_ in range(args.rounds):
        for label in ("old", "new") if round_ % 2 == 0 else ("new", "old"):
            with kinds.pair(kind, f"w{round_}{label}", only=label) as stores:
                seconds = _fill(stores[label], records, 200)
            rates[label].append(len(records) / seconds)
            print(f"  {kind} write {label}: {len(records) / seconds:,.0f} events/s", flush=True)
    old, new = statistics.median(rates["old"]), statistics.median(rates["new"])
    return {"old_per_s": round(old), "new_per_s": round(new), "ratio": round(new / old, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--write-events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-write", action="store_true")
    parser.add_argument("--skip-read", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    tune_gc()
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        kinds = Kinds(Path(tmp))
        try:
            for kind in args.stores.split(","):
                print(f"== {kind} (load {load_average()})", flush=True)
                results[kind] = {}
                if not args.skip_read:
                    results[kind]["reads"] = reads(kind, args, kinds)
                if not args.skip_write:
                    results[kind]["writes"] = writes(kind, args, kinds)
                    print(f"  {kind} writes: {results[kind]['writes']}", flush=True)
        finally:
            kinds.close()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
