"""What the document store's adjacency documents (``<collection>_adjacency``) save a lineage walk:
the API's lineage query (the walk, the cut, each job's latest run; no HTTP, no JSON) over them,
against, as the baseline, the same query walking the edges collection (what a database whose
adjacency is not derived yet still reads), interleaved root by root in one process on one
SecantusDB server, with the answers asserted equal. Plain lineage and ``asOf``, depth 10.

It reads the database bench_million loaded (``--data``, the first 200,000 events are enough):
run ``bench_million --phases generate,load --stores document --load-limit 200000`` once, then
``python bench/bench_document_walk.py``. Its ``open`` derives the adjacency documents if the
load ran on code from before them (the time is printed).

First, what they cost the writes: ``write_batch`` of ``--write-events`` events whose every edge is
new (a job's first run: the worst case, later runs restate known edges and skip both writes), in
batches of 200, alternated between a store that keeps the adjacency and one that does not, on an
in-memory SecantusDB of its own.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from _bench_common import load_average
from bench_million import Graph, Stores, _percentiles, query_plan
from servers import secantus_server

from lineage_sdk.collector.api import queries
from lineage_sdk.collector.api.history import parse_instant
from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.stores.document import DocumentLineageStore

PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/bench"
SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


class _WithoutAdjacency(DocumentLineageStore):
    """The write baseline: the code before the adjacency documents."""

    def _upsert_adjacency(self, found: Any) -> None:
        return None


def _new_edges(batch: int, size: int) -> list[dict[str, Any]]:
    """``size`` COMPLETE events of new jobs, two new inputs and one new output each."""

    def event(i: int) -> dict[str, Any]:
        job = f"b{batch}_j{i}"
        return {
            "eventType": "COMPLETE",
            "eventTime": f"2025-01-01T00:{batch % 60:02d}:{i % 60:02d}.{i:06d}Z",
            "run": {"runId": f"0190c000-0000-7000-8000-{batch:06d}{i:06d}", "facets": {}},
            "job": {"namespace": "bench.write", "name": job, "facets": {}},
            "inputs": [
                {"namespace": "bench.write", "name": f"{job}_in{k}", "facets": {}} for k in (0, 1)
            ],
            "outputs": [{"namespace": "bench.write", "name": f"{job}_out", "facets": {}}],
            "producer": PRODUCER,
            "schemaURL": SCHEMA,
        }

    return [event(i) for i in range(size)]


def writes(total: int) -> None:
    with secantus_server() as server:
        config = ConnectionConfig(uri=server.uri, database="bench", timeout_ms=600_000)
        stores = {
            "adjacency": DocumentLineageStore(config, collection_name="with"),
            "edges only": _WithoutAdjacency(config, collection_name="without"),
        }
        for store in stores.values():
            store.open()
        took = dict.fromkeys(stores, 0.0)
        for batch in range(total // 200):
            order = list(stores) if batch % 2 else list(reversed(stores))
            for name in order:
                records = [build_record(e) for e in _new_edges(batch, 200)]
                t0 = time.perf_counter()
                stores[name].write_batch(records)
                took[name] += time.perf_counter() - t0
        rates = {name: total / seconds for name, seconds in took.items()}
        print(f"writes, {total} events each, every edge new (load average {load_average()}):")
        for name, rate in rates.items():
            print(f"  {name}: {rate:.0f} events/s")
        print(f"  ratio adjacency / edges only: {rates['adjacency'] / rates['edges only']:.2f}x")
        for store in stores.values():
            store.close()


def _figures(samples: list[float]) -> str:
    """bench_million's percentiles, as one line."""
    p = _percentiles(samples)
    return f"p50 {p['p50_ms']} / p95 {p['p95_ms']} / p99 {p['p99_ms']} ms"


def _ask(store: Any, kind: str, params: dict[str, Any], node_limit: int) -> Any:
    """``walk``: the store's walk alone; ``lineage``, ``asof``: the API's query (the walk, the
    cut, each job's latest run), None for a node unknown by then."""
    node, direction = params["nodeId"], params["direction"]
    if kind == "walk":
        graph = store.lineage(node, direction=direction, depth=10, node_limit=node_limit)
        edges = {(e.origin, e.destination) for n in graph.nodes.values() for e in n.out_edges}
        return sorted(graph.nodes), sorted(edges), graph.truncated
    as_of = parse_instant(params["asOf"]) if kind == "asof" else None
    try:
        return queries.lineage(
            store, node, direction=direction, depth=10, as_of=as_of, node_limit=node_limit
        )
    except queries.NotFound:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/work/bench-data"))
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--queries", type=int, default=100, help="roots of each kind")
    parser.add_argument("--node-limit", type=int, default=1000)
    parser.add_argument("--write-events", type=int, default=4000, help="0: no write A/B")
    parser.add_argument(
        "--rederive", action="store_true", help="drop the adjacency first: time its derivation"
    )
    args = parser.parse_args()
    if args.write_events:
        writes(args.write_events)
    stores = Stores(args.data, args.events)
    try:
        if args.rederive:  # a database from before the adjacency: drop it, open derives it
            store = stores.open("document")
            store.adjacency.drop()
            store.close()
        started = time.perf_counter()
        store = stores.open("document")
        took = time.perf_counter() - started
        print(f"store opened in {took:.1f} s (adjacency derived: {args.rederive})", flush=True)
        if not store._adjacency_is_ready():
            raise SystemExit("the adjacency documents are not derived: nothing to compare")
        print(f"load average {load_average()}", flush=True)
        plan = query_plan(Graph(args.events, args.seed), args.seed)
        use = {"adjacency": True}
        store._adjacency_is_ready = lambda: use["adjacency"]  # the switch between the two walks
        for kind in ("walk", "lineage", "asof"):
            asks = [p for k, p in plan if k == ("asof" if kind == "asof" else "lineage")]
            asks = asks[: args.queries + 1]
            times: dict[str, list[float]] = {"adjacency": [], "edges": []}
            for n, params in enumerate(asks):
                answers: dict[str, Any] = {}
                order = ("adjacency", "edges") if n % 2 else ("edges", "adjacency")
                for way in order:
                    use["adjacency"] = way == "adjacency"
                    t0 = time.perf_counter()
                    answers[way] = _ask(store, kind, params, args.node_limit)
                    if n:  # the first root of each kind warms both up
                        times[way].append((time.perf_counter() - t0) * 1000)
                assert answers["adjacency"] == answers["edges"], params
            ratio = statistics.median(times["adjacency"]) / statistics.median(times["edges"])
            print(f"{kind} d10 (n={len(times['edges'])}, interleaved, answers equal):")
            print(f"  adjacency: {_figures(times['adjacency'])}")
            print(f"  edges:     {_figures(times['edges'])}")
            print(f"  median ratio adjacency / edges: {ratio:.2f}x", flush=True)
    finally:
        stores.close(drop_pg=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
