"""What static lineage costs a lineage read: ``queries.lineage`` (the store's walk, then one
``static_events`` query for the answer's jobs to mark declared edges) against the same walk
without the marks, interleaved in one run on one SQLite store (the engine over the sql
backend, as ``store.type: sql`` opens it).

The graph is ``bench_api``'s (20 layers of 100 jobs), with one JobEvent per job declaring its
inputs and outputs. Run: ``python bench/bench_static.py --events 40000``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from bench_api import LAYERS, PRODUCER, WIDTH, _dataset, events

from lineage_sdk.collector.api import marquez, queries
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.stores.sql_backend import SqlBackend

JOB_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent"


def job_events() -> list[dict[str, Any]]:
    out = []
    for job in range(LAYERS * WIDTH):
        layer, index = divmod(job, WIDTH)
        out.append(
            {
                "eventTime": "2024-12-31T00:00:00Z",
                "job": {"namespace": "bench", "name": f"job.l{layer:02d}.j{index:03d}"},
                "inputs": [_dataset(layer, index), _dataset(layer, index + 1)],
                "outputs": [_dataset(layer + 1, index)],
                "producer": PRODUCER,
                "schemaURL": JOB_EVENT,
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=40_000, help="run events in the graph")
    parser.add_argument("--queries", type=int, default=50, help="timed queries per kind")
    parser.add_argument("--depth", type=int, default=10)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        store = EngineStore(SqlBackend(f"sqlite:///{folder}/bench.db"))
        store.open()
        batch: list[Any] = []
        for event in [*events(args.events), *job_events()]:
            batch.append(build_record(event))
            if len(batch) == 1000:
                store.write_batch(batch)
                batch = []
        store.write_batch(batch)
        node = f"dataset:bench.db:layer{LAYERS // 2:02d}.table{WIDTH // 2:03d}"

        def plain() -> None:
            marquez.lineage_graph(store.lineage(node, depth=args.depth))

        def marked() -> None:
            queries.lineage(store, node, depth=args.depth)

        body = queries.lineage(store, node, depth=args.depth)
        marks = sum(bool(e.get("declared")) for n in body["graph"] for e in n["inEdges"])
        times: dict[str, list[float]] = {"plain": [], "marked": []}
        for _ in range(args.queries):
            for name, fn in (("plain", plain), ("marked", marked)):
                start = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - start) * 1000)
        store.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"nodes {len(body['graph'])}, declared edges {marks}, depth {args.depth}")
    for name, values in times.items():
        p95 = sorted(values)[int(0.95 * (len(values) - 1))]
        print(f"{name:7} median {med[name]:.1f} ms  p95 {p95:.1f} ms")
    print(f"marked / plain (median): {med['marked'] / med['plain']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
