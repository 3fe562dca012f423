"""Benchmark of the collector's HTTP API (issue 7): ingest over HTTP, and lineage query latency.

1. **Ingest.** ``--http-events`` events POSTed to ``/api/v1/lineage/batch`` in batches of
   ``--batch`` from ``--clients`` threads, against the real API (uvicorn on loopback) writing
   to the SQL store (SQLite in a temporary folder). Reported as events/s, with single-event
   ``POST /api/v1/lineage`` requests/s alongside. Target: >= 2,000 events/s with batching.
2. **Lineage latency.** The rest of a ``--events``-event graph (default 100,000 events: START and
   COMPLETE of 50,000 runs of 2,000 jobs in 20 layers) is written straight through the service,
   then ``GET /api/v1/lineage?depth=10`` is timed end to end (HTTP + JSON) and
   ``store.lineage(depth=10)`` alone, upstream from the last layer and both ways from the middle.
   Target: < 100 ms per query.
3. **Ingest against its baseline** (issue 14). The liberal ingest check (``check_ingest_event``:
   URIs are annotations) must not cost throughput. The same batches go, alternately, into a
   fresh store through the real check and through the strict pre-issue-14 check
   (``check_event``), ``--rounds`` times each; the ratio of the medians is reported
   (target >= 1.0 within noise).

Run: ``python bench/bench_api.py`` (under 3 minutes here); ``--events 5000`` for a smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson

from lineage_sdk.collector import decode
from lineage_sdk.collector.api import ApiServer, create_app
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.models.codec import check_event, check_ingest_event

PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/bench"
SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
LAYERS, WIDTH = 20, 100  # 2,000 jobs; job (l, j) reads d[l][j], d[l][j+1] and writes d[l+1][j]
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _dataset(layer: int, index: int) -> dict[str, Any]:
    return {
        "namespace": "bench.db",
        "name": f"layer{layer:02d}.table{index % WIDTH:03d}",
        "facets": {},
    }


def events(total: int) -> Iterator[dict[str, Any]]:
    """START + COMPLETE per run, round-robin over the jobs, so every job runs total/4000 times."""
    runs = total // 2
    for n in range(runs):
        job = n % (LAYERS * WIDTH)
        layer, index = divmod(job, WIDTH)
        run_id = str(uuid.UUID(int=n + 1, version=4))
        inputs = [_dataset(layer, index), _dataset(layer, index + 1)]
        outputs = [_dataset(layer + 1, index)]
        for k, event_type in enumerate(("START", "COMPLETE")):
            yield {
                "eventType": event_type,
                "eventTime": (T0 + timedelta(seconds=2 * n + k)).isoformat().replace("+00:00", "Z"),
                "run": {"runId": run_id, "facets": {}},
                "job": {
                    "namespace": "bench",
                    "name": f"job.l{layer:02d}.j{index:03d}",
                    "facets": {},
                },
                "inputs": inputs,
                "outputs": outputs,
                "producer": PRODUCER,
                "schemaURL": SCHEMA,
            }


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def ingest_batches(url: str, bodies: list[bytes], clients: int) -> float:
    """POST pre-encoded batch bodies from ``clients`` threads; returns elapsed seconds."""
    queue = list(reversed(bodies))
    lock = threading.Lock()
    errors: list[str] = []

    def worker() -> None:
        with httpx.Client(
            base_url=url, timeout=120, headers={"Content-Type": "application/json"}
        ) as client:
            while True:
                with lock:
                    if not queue:
                        return
                    body = queue.pop()
                response = client.post("/api/v1/lineage/batch", content=body)
                if response.status_code != 200 or response.json()["status"] != "success":
                    errors.append(f"{response.status_code}: {response.text[:200]}")
                    return

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise SystemExit(f"ingest failed: {errors[0]}")
    return elapsed


def ingest_single(url: str, bodies: list[bytes]) -> float:
    with httpx.Client(
        base_url=url, timeout=60, headers={"Content-Type": "application/json"}
    ) as client:
        start = time.perf_counter()
        for body in bodies:
            response = client.post("/api/v1/lineage", content=body)
            if response.status_code != 201:
                raise SystemExit(f"single ingest failed: {response.status_code} {response.text}")
        return time.perf_counter() - start


def ingest_rate(folder: str, name: str, bodies: list[bytes], events: int, clients: int) -> float:
    """Events/s of one ingest of ``bodies`` into a fresh SQLite store named ``name``."""
    config = LineageConfig.model_validate(
        {"store": {"backend": "sql", "sql": {"url": f"sqlite:///{folder}/{name}.db"}}}
    )
    manager = LineageManager(config)
    manager.connect_sync()
    try:
        with ApiServer(create_app(manager, max_body_bytes=64 << 20)) as server:
            return events / ingest_batches(server.url, bodies, clients)
    finally:
        manager.close_sync()


def ingest_against_strict(
    folder: str, bodies: list[bytes], events: int, clients: int, rounds: int
) -> dict[str, Any]:
    """Median events/s through the real ingest check and through the strict check, alternated."""
    rates: dict[str, list[float]] = {"ingest_check": [], "strict_check": []}
    try:
        for index in range(rounds):
            for kind, check in (
                ("strict_check", check_event),
                ("ingest_check", check_ingest_event),
            ):
                decode.check_ingest_event = check  # type: ignore[assignment]
                rates[kind].append(ingest_rate(folder, f"{kind}{index}", bodies, events, clients))
    finally:
        decode.check_ingest_event = check_ingest_event  # type: ignore[assignment]
    medians = {kind: statistics.median(values) for kind, values in rates.items()}
    return {
        "events": events,
        "rounds": rounds,
        "events_per_s": {kind: round(value) for kind, value in medians.items()},
        "ratio_ingest_to_strict": round(medians["ingest_check"] / medians["strict_check"], 3),
    }


def latencies_ms(fn: Callable[[int], Any], count: int) -> dict[str, float]:
    for i in range(min(5, count)):  # warm-up: connections, statement cache
        fn(i)
    samples = []
    for i in range(count):
        start = time.perf_counter()
        fn(i)
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 2),
        "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 2),
        "max_ms": round(samples[-1], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000, help="events in the graph")
    parser.add_argument(
        "--http-events",
        type=int,
        default=20_000,
        help="of those, how many are ingested over HTTP (timed)",
    )
    parser.add_argument("--batch", type=int, default=500, help="events per batch request")
    parser.add_argument("--clients", type=int, default=2, help="concurrent HTTP clients")
    parser.add_argument("--single", type=int, default=500, help="single-event POSTs (timed)")
    parser.add_argument("--queries", type=int, default=100, help="timed queries per kind")
    parser.add_argument("--rounds", type=int, default=3, help="alternated ingest-vs-strict rounds")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)

    all_events = list(events(args.events))
    http_part = all_events[: args.http_events]
    single_part = all_events[args.http_events : args.http_events + args.single]
    rest = all_events[args.http_events + args.single :]
    results: dict[str, Any] = {"events_in_graph": len(all_events)}

    with tempfile.TemporaryDirectory(prefix="bench-api-") as folder:
        bodies = [orjson.dumps(chunk) for chunk in _chunks(http_part, args.batch)]
        versus = ingest_against_strict(folder, bodies, len(http_part), args.clients, args.rounds)
        results["ingest_vs_strict"] = versus
        print(
            f"ingest check vs strict check (median of {args.rounds}, same run): "
            f"{versus['events_per_s']} events/s, ratio {versus['ratio_ingest_to_strict']}"
        )
        config = LineageConfig.model_validate(
            {"store": {"backend": "sql", "sql": {"url": f"sqlite:///{folder}/bench.db"}}}
        )
        manager = LineageManager(config)
        manager.connect_sync()
        try:
            store = manager.get_store()
            with ApiServer(create_app(manager, max_body_bytes=64 << 20)) as server:
                elapsed = ingest_batches(server.url, bodies, args.clients)
                results["ingest_batch"] = {
                    "events": len(http_part),
                    "batch": args.batch,
                    "clients": args.clients,
                    "seconds": round(elapsed, 2),
                    "events_per_s": round(len(http_part) / elapsed),
                }
                print(
                    f"ingest, batches of {args.batch} x {args.clients} clients: "
                    f"{len(http_part) / elapsed:,.0f} events/s ({len(http_part)} events)"
                )
                singles = [orjson.dumps(e) for e in single_part]
                if singles:
                    elapsed = ingest_single(server.url, singles)
                    results["ingest_single"] = {
                        "events": len(singles),
                        "requests_per_s": round(len(singles) / elapsed),
                    }
                    print(f"ingest, one event per request: {len(singles) / elapsed:,.0f} req/s")

                # The rest of the graph straight through the service (same store path).
                started = time.perf_counter()
                service = LineageCollectorService(manager)
                for chunk in _chunks(rest, 2000):
                    asyncio.run(service.handle_lineage_events(chunk))
                count = store.count_events()  # type: ignore[attr-defined]
                print(
                    f"graph filled: {count:,} events in the store "
                    f"({time.perf_counter() - started:.1f} s direct)"
                )
                results["events_stored"] = count

                last = LAYERS  # the datasets the last layer of jobs writes
                mid = LAYERS // 2
                roots_up = [f"dataset:bench.db:layer{last:02d}.table{i:03d}" for i in range(WIDTH)]
                roots_both = [f"dataset:bench.db:layer{mid:02d}.table{i:03d}" for i in range(WIDTH)]
                sizes = {
                    "upstream": len(
                        store.lineage(
                            roots_up[0],
                            direction="upstream",  # type: ignore[attr-defined]
                            depth=10,
                        ).nodes
                    ),
                    "both": len(
                        store.lineage(
                            roots_both[0],
                            direction="both",  # type: ignore[attr-defined]
                            depth=10,
                        ).nodes
                    ),
                }
                with httpx.Client(base_url=server.url, timeout=60) as client:
                    for kind, roots in (("upstream", roots_up), ("both", roots_both)):

                        def http_query(i: int, roots: list[str] = roots, kind: str = kind) -> None:
                            response = client.get(
                                "/api/v1/lineage",
                                params={
                                    "nodeId": roots[i % len(roots)],
                                    "depth": 10,
                                    "direction": kind,
                                },
                            )
                            response.raise_for_status()

                        def store_query(i: int, roots: list[str] = roots, kind: str = kind) -> None:
                            store.lineage(
                                roots[i % len(roots)],
                                direction=kind,  # type: ignore[attr-defined]
                                depth=10,
                            )

                        results[f"lineage_{kind}_depth10_http"] = latencies_ms(
                            http_query, args.queries
                        )
                        results[f"lineage_{kind}_depth10_store"] = latencies_ms(
                            store_query, args.queries
                        )
                        results[f"lineage_{kind}_depth10_http"]["nodes"] = sizes[kind]
                        print(
                            f"lineage {kind:8} depth 10 ({sizes[kind]} nodes): HTTP "
                            f"{results[f'lineage_{kind}_depth10_http']}, store "
                            f"{results[f'lineage_{kind}_depth10_store']}"
                        )
        finally:
            manager.close_sync()

    ok_ingest = results["ingest_batch"]["events_per_s"] >= 2000
    ok_query = all(
        results[f"lineage_{k}_depth10_http"]["p95_ms"] < 100 for k in ("upstream", "both")
    )
    results["targets"] = {
        "ingest_2000_events_per_s": ok_ingest,
        "query_p95_under_100ms": ok_query,
        "ingest_not_slower_than_strict": results["ingest_vs_strict"]["ratio_ingest_to_strict"]
        >= 0.95,  # the noise on these machines; the figures are printed above
    }
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
