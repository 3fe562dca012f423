"""Retention of 10% of the events (issue 16, item 5), SQLite and PostgreSQL.

    python bench/bench_retention.py [--events 100000] [--backends sqlite,postgres] [--json PATH]

The store is the engine over the sql backend (``EngineStore(SqlBackend(url))``, what
``store.type: sql`` opens). For each backend, in one run, on the events of ``bench_portability`` (START/COMPLETE pairs over
2,000 jobs in 20 layers, ~1 KB each, one event per millisecond):

1. the store is filled with ``--events`` events (``write_batch``, batches of 1,000);
2. the writer's baseline: a ``write_batch`` loop of new events (later times, new runs), alone;
3. retention of the oldest 10% (``purge_older_than``, batches of 1,000) in a thread, while the
   same ``write_batch`` loop writes more new events until the retention ends;
4. the writer's baseline again, alone (so the baseline brackets the run: the mean of 2 and 4);
5. for reference, retention of the next 10% with no writer.

Reported: events/s removed by retention, the writer's events/s alongside it against its rate
alone (the ratio is what retention costs a collector writing at full speed), and a check that the
store holds exactly the events it should and that a second retention removes nothing.
PostgreSQL runs in a database created here and dropped after (127.0.0.1:5432, as the tests).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from _bench_common import postgres_database
from bench_portability import START, events

from lineage_sdk.collector.decode import JSON_CONTENT_TYPE, decode_message
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.retention import purge_older_than
from lineage_sdk.collector.store import LineageRecord
from lineage_sdk.collector.stores.sql_backend import SqlBackend

BATCH = 1000
AGE = timedelta(days=1)


def records(lines: Iterator[bytes]) -> Iterator[LineageRecord]:
    for line in lines:
        yield decode_message(line, JSON_CONTENT_TYPE).records[0]


def take(source: Iterator[LineageRecord], n: int) -> list[LineageRecord]:
    out = []
    for rec in source:
        out.append(rec)
        if len(out) >= n:
            break
    return out


def write_loop(
    store: EngineStore, batches: Iterator[list[LineageRecord]], until: Any
) -> tuple[int, float]:
    """Write batches until ``until()`` is true or they run out: (events written, seconds)."""
    written = 0
    started = time.perf_counter()
    for batch in batches:
        store.write_batch(batch)
        written += len(batch)
        if until():
            break
    return written, time.perf_counter() - started


def rate(label: str, n: int, seconds: float) -> float:
    value = n / seconds if seconds else float("inf")
    print(f"  {label:<44} {n:>9,} events  {seconds:8.2f} s  {value:>10,.0f} events/s", flush=True)
    return value


def bench_backend(name: str, store: EngineStore, n: int) -> dict[str, Any]:
    print(f"\n{name}: {n:,} events, retention of the oldest {n // 10:,}", flush=True)
    store.open()
    try:
        # The fill, then a reserve of new events for the writers (as much again as the fill).
        source = records(events(3 * n))
        started = time.perf_counter()
        for _ in range(n // BATCH):
            store.write_batch(take(source, BATCH))
        rate("fill (write_batch)", n, time.perf_counter() - started)
        reserve = iter(lambda: take(source, BATCH), [])
        baseline = max(n // 10, BATCH)  # events each baseline writes

        # Events are one millisecond apart from START: the cutoff leaves the oldest 10% before it.
        cutoff = START + timedelta(milliseconds=n // 10)
        run = retention_alongside(store, reserve, cutoff, baseline)
        before, during, after = run.before, run.during, run.after
        removed = {"events": run.removed, "seconds": run.seconds}
        base_rate = (before[0] + after[0]) / (before[1] + after[1])
        rate("writer alone (before)", *before)
        rate("writer alone (after)", *after)
        removed_rate = rate("retention: removed", removed["events"], removed["seconds"])
        during_rate = rate("writer alongside retention", *during)
        if run.writer_ran_out:
            print("  (the writer ran out of events before the retention ended)")
        expected = n - n // 10 + before[0] + during[0] + after[0]
        assert removed["events"] == n // 10, removed
        assert store.count_events() == expected, (store.count_events(), expected)
        again = purge_older_than([store], AGE, now=cutoff + AGE)
        assert again.removed[store.name] == 0
        # Retention with no writer, for reference: the next 10% of the fill.
        t0 = time.perf_counter()
        later = START + timedelta(milliseconds=2 * (n // 10))
        alone_report = purge_older_than([store], AGE, now=later + AGE, batch_size=BATCH)
        alone_rate = rate(
            "retention alone (the next 10%)",
            alone_report.removed[store.name],
            time.perf_counter() - t0,
        )
        assert alone_report.removed[store.name] == n // 10
        print(f"  writer alongside / alone = {during_rate / base_rate:.2f}", flush=True)
        return {
            "events": n,
            "removed": removed["events"],
            "removed_per_s": removed_rate,
            "removed_alone_per_s": alone_rate,
            "writer_alone_per_s": base_rate,
            "writer_alongside_per_s": during_rate,
            "alongside_over_alone": during_rate / base_rate,
        }
    finally:
        store.close()


@dataclass
class Alongside:
    """One retention with a writer alongside: ``(events, seconds)`` of the writer alone before,
    alongside and alone after, and what the retention removed in how many seconds."""

    before: tuple[int, float]
    during: tuple[int, float]
    after: tuple[int, float]
    removed: int
    seconds: float
    writer_ran_out: bool


def retention_alongside(
    store: EngineStore, reserve: Iterator[list[LineageRecord]], until: datetime, baseline: int
) -> Alongside:
    """The writer alone (``baseline`` events), then the events before ``until`` removed in a
    thread while the writer goes on until the retention ends, then the writer alone again."""
    before = _alone(store, reserve, baseline)
    done = threading.Event()
    removed: dict[str, Any] = {}

    def retention() -> None:
        t0 = time.perf_counter()
        report = purge_older_than([store], AGE, now=until + AGE, batch_size=BATCH)
        removed["events"] = report.removed[store.name]
        removed["seconds"] = time.perf_counter() - t0
        done.set()

    thread = threading.Thread(target=retention)
    thread.start()
    during = write_loop(store, reserve, done.is_set)
    ran_out = not done.is_set()
    thread.join()
    after = _alone(store, reserve, baseline)
    return Alongside(before, during, after, removed["events"], removed["seconds"], ran_out)


def _alone(store: EngineStore, reserve: Iterator[list[LineageRecord]], n: int) -> tuple[int, float]:
    written = 0
    started = time.perf_counter()
    for batch in reserve:
        store.write_batch(batch)
        written += len(batch)
        if written >= n:
            break
    return written, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.events < 10 * BATCH:
        sys.exit(f"--events must be at least {10 * BATCH}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # finally blocks drop the database
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="lineage-bench-retention-") as tmp:
        for backend in args.backends.split(","):
            if backend == "sqlite":
                results["sqlite"] = bench_backend(
                    "sqlite", EngineStore(SqlBackend(f"sqlite:///{tmp}/retention.db")), args.events
                )
            elif backend == "postgres":
                with postgres_database("lineage_portbench") as url:
                    results["postgres"] = bench_backend(
                        "postgres", EngineStore(SqlBackend(url)), args.events
                    )
            else:
                sys.exit(f"unknown backend {backend!r}: sqlite or postgres")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
