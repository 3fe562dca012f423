"""What history costs a lineage read: ``queries.lineage`` plain (the engine's indexed walk)
against ``asOf`` half-way through the events and ``runId`` of one run, interleaved in one run
on one SQLite store (the engine over the sql backend, as ``store.type: sql`` opens it).

``asOf`` is timed three ways on the same file: the engine's own dated walk (``lineage_as_of``:
the edges first seen by then); the fold of the walked jobs' events
(:mod:`lineage_sdk.collector.api.history`) read with ``job_events_up_to`` (the time bound on
the backend's ``(job, event_time)`` index); and, as the baseline, the same fold reading every
event of the jobs and filtering by time afterwards. The last two are store objects over the same
file without ``lineage_as_of`` (and without ``job_events_up_to``); all three must answer alike.

The graph is ``bench_api``'s (20 layers of 100 jobs). Run:
``python bench/bench_history.py --events 20000``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from bench_api import LAYERS, T0, WIDTH, events

from lineage_sdk.collector.api import queries
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.stores.sql_backend import SqlBackend


class _Folded(EngineStore):
    """No dated walk: ``asOf`` is folded from the jobs' events, read up to the time on the
    backend's (job, time) index."""

    lineage_as_of = None  # type: ignore[assignment]


class _ReadThenFilter(_Folded):
    """The baseline: no ``job_events_up_to`` either, so the fold reads all of a job's events."""

    job_events_up_to = None  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000, help="run events in the graph")
    parser.add_argument("--queries", type=int, default=10, help="timed queries per kind")
    parser.add_argument("--depth", type=int, default=10)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/bench.db"
        store = EngineStore(SqlBackend(url))
        store.open()
        batch: list[Any] = []
        times_seen = []
        run_id = ""
        for event in events(args.events):
            record = build_record(event)
            times_seen.append(record.event_time)
            run_id = run_id or str(record.run_id)
            batch.append(record)
            if len(batch) == 1000:
                store.write_batch(batch)
                batch = []
        store.write_batch(batch)
        folded = _Folded(SqlBackend(url))
        baseline = _ReadThenFilter(SqlBackend(url))
        folded.open()
        baseline.open()
        middle = sorted(times_seen)[len(times_seen) // 2]
        node = f"dataset:bench.db:layer{LAYERS // 2:02d}.table{WIDTH // 2:03d}"
        first_job = "job:bench:job.l00.j000"
        asks: dict[str, Callable[[], dict[str, Any]]] = {
            "plain": lambda: queries.lineage(store, node, depth=args.depth),
            "asOf": lambda: queries.lineage(store, node, depth=args.depth, as_of=middle),
            "asOf-f": lambda: queries.lineage(folded, node, depth=args.depth, as_of=middle),
            "asOf-0": lambda: queries.lineage(baseline, node, depth=args.depth, as_of=middle),
            "runId": lambda: queries.lineage(store, first_job, depth=args.depth, run_id=run_id),
        }
        sizes = {name: len(ask()["graph"]) for name, ask in asks.items()}
        assert asks["asOf-f"]() == asks["asOf-0"](), "the bounded read must answer the same"
        assert asks["asOf"]() == asks["asOf-f"](), "the dated walk must answer as the fold"
        times: dict[str, list[float]] = {name: [] for name in asks}
        for _ in range(args.queries):
            for name, ask in asks.items():
                start = time.perf_counter()
                ask()
                times[name].append((time.perf_counter() - start) * 1000)
        store.close()
        folded.close()
        baseline.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    span = (middle - T0) / timedelta(seconds=1)
    print(f"events {args.events}, depth {args.depth}, asOf {span:.0f}s after the first event")
    for name, values in times.items():
        p95 = sorted(values)[int(0.95 * (len(values) - 1))]
        print(f"{name:6} nodes {sizes[name]:5}  median {med[name]:8.1f} ms  p95 {p95:8.1f} ms")
    for name in ("asOf", "asOf-f", "asOf-0", "runId"):
        print(f"{name} / plain (median): {med[name] / med['plain']:.1f}")
    print(
        f"asOf-0 (read, then filter) / asOf-f (bounded read) (median): "
        f"{med['asOf-0'] / med['asOf-f']:.2f}\n"
        f"asOf-f (fold) / asOf (dated walk) (median): {med['asOf-f'] / med['asOf']:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
