"""Collector throughput: events/s from a pre-filled queue into the sql (SQLite) and logging stores,
against raw pika consume-and-ack (prefetch 100) of the same messages, in the same run.

    python bench/bench_collector.py [--events 20000] [--rounds 3] [--queue-type quorum|classic]
                                    [--json PATH]

Targets (issue 4): sql >= 0.5x raw, logging >= 0.8x raw. The raw consumer reads a queue of the
same type as the collector's (``--queue-type``, default quorum, the collector's default; see
bench_queue_types.py for quorum against classic). Uses a vhost of its own on the broker at
127.0.0.1:5672 (or $LINEAGE_BENCH_AMQP_URL), with unique queue names, and deletes both afterwards. Take figures only on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pika
from _bench_common import AMQP_URL

from lineage_sdk.collector.consumer import LineageCollector
from lineage_sdk.collector.topology import Topology
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.transport.unrouted import holding_queue, unrouted_exchange

URL = AMQP_URL  # a vhost of the run's own (_bench_common)
PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/bench"


def make_events(n: int) -> list[bytes]:
    """SDK-shaped RunEvents (~1 KB): START/COMPLETE pairs with inputs, outputs and facets, both
    events of a run naming its job and datasets, as a producer's do (until 2026-12-07 they named
    the jobs and datasets of their own positions, so a run's two events named two jobs: two run
    rows and mentions a run for the engine; docs/design/engine.md section 18)."""
    out = []
    for i in range(n):
        run = i // 2
        run_id = str(uuid.UUID(int=run + 1, version=4))
        event = {
            "eventType": "START" if i % 2 == 0 else "COMPLETE",
            "eventTime": f"2025-01-01T00:{(i // 60) % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z",
            "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {
                "runId": run_id,
                "facets": {
                    "processing_engine": {
                        "_producer": PRODUCER,
                        "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/"
                        "ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet",
                        "name": "lineage-sdk",
                        "version": "0.1.0",
                        "openlineageAdapterVersion": "1.0",
                    },
                },
            },
            "job": {
                "namespace": "bench",
                "name": f"pipeline.step{run % 50}",
                "facets": {
                    "jobType": {
                        "_producer": PRODUCER,
                        "_schemaURL": "https://openlineage.io/spec/facets/2-0-3/JobTypeJobFacet.json"
                        "#/$defs/JobTypeJobFacet",
                        "processingType": "BATCH",
                        "integration": "LINEAGE_SDK",
                        "jobType": "TASK",
                    },
                },
            },
            "inputs": [
                {"namespace": "postgres://db:5432", "name": f"public.src{run % 40}", "facets": {}}
            ],
            "outputs": [
                {"namespace": "postgres://db:5432", "name": f"public.dst{run % 40}", "facets": {}}
            ],
        }
        out.append(orjson.dumps(event, option=orjson.OPT_SORT_KEYS))
    return out


def prefill(exchange: str | None, queue: str, bodies: list[bytes]) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    ch = conn.channel()
    props = pika.BasicProperties(content_type="application/json", delivery_mode=2)
    for body in bodies:
        ch.basic_publish(exchange or "", queue if exchange is None else "bench.key", body, props)
    deadline = time.monotonic() + 60
    while ch.queue_declare(queue, passive=True).method.message_count < len(bodies):
        if time.monotonic() > deadline:
            raise RuntimeError("broker did not take the messages in time")
        time.sleep(0.05)
    conn.close()


def raw_pika(bodies: list[bytes], queue_type: str = "quorum") -> float:
    """Raw consume-and-ack of the same messages, prefetch 100; returns messages/s."""
    queue = f"bench.raw.{uuid.uuid4().hex[:8]}"
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": queue_type})
    try:
        prefill(None, queue, bodies)
        ch.basic_qos(prefetch_count=100)
        remaining = len(bodies)

        def on_message(channel, method, _props, _body) -> None:
            nonlocal remaining
            channel.basic_ack(method.delivery_tag)
            remaining -= 1
            if remaining == 0:
                channel.stop_consuming()

        ch.basic_consume(queue, on_message)
        start = time.perf_counter()
        ch.start_consuming()
        return len(bodies) / (time.perf_counter() - start)
    finally:
        ch.queue_delete(queue)
        conn.close()


def collector_rate(
    bodies: list[bytes], store: dict, workdir: Path, queue_type: str = "quorum"
) -> float:
    topic = f"bench.lineage.{uuid.uuid4().hex[:8]}"
    config = LineageConfig.model_validate(
        {
            "collector_topic": topic,
            "rabbitmq": {"url": URL},
            "store": store,
            "collector": {"retry_delays_ms": [1000], "queue_type": queue_type},
        }
    )
    topo = Topology.from_config(config)
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    ch = conn.channel()
    try:
        topo.declare(ch)
        prefill(topic, topo.queue, bodies)
        collector = LineageCollector(config)
        collector.manager.connect_sync()  # open stores before timing (the SQLite file, its tables)
        thread = threading.Thread(target=collector.run, daemon=True)
        start = time.perf_counter()
        thread.start()
        stored = collector.metrics.events_stored
        name = collector.manager.stores[0].name
        while stored.labels(name)._value.get() < len(bodies):
            if not thread.is_alive():
                raise RuntimeError("collector stopped")
            time.sleep(0.002)
        elapsed = time.perf_counter() - start
        collector.stop()
        thread.join(30)
        return len(bodies) / elapsed
    finally:
        delete_queues(ch, topo)
        ch.exchange_delete(topic)
        conn.close()


def delete_queues(channel: Any, topology: Topology) -> None:
    """Remove a collector's queues and its topic's holding queue for the unrouted with the
    alternate exchange feeding it (the bench's topic is its own)."""
    retries = (r.name for r in topology.retry_queues)
    for name in (topology.queue, *retries, topology.dead_letter_queue):
        channel.queue_delete(queue=name)
    channel.queue_delete(queue=holding_queue(topology.exchange))
    channel.exchange_delete(exchange=unrouted_exchange(topology.exchange))


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queue-type", choices=("quorum", "classic"), default="quorum")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    bodies = make_events(args.events)
    qtype = args.queue_type
    events_log = logging.getLogger("bench.lineage.events")
    events_log.propagate = False
    rounds: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        handler = logging.FileHandler(workdir / "events.jsonl")
        events_log.addHandler(handler)
        events_log.setLevel(logging.INFO)
        print(
            f"{args.events} messages of ~{sum(map(len, bodies)) // len(bodies)} bytes, "
            f"{args.rounds} round(s), {qtype} queues; each ratio is against the mean of the raw runs just "
            "before and after it (the machine's load drifts)"
        )
        raw_before = raw_pika(bodies, qtype)
        for round_no in range(1, args.rounds + 1):
            sql = collector_rate(
                bodies,
                {"backend": "sql", "sql": {"url": f"sqlite:///{workdir}/bench-{round_no}.db"}},
                workdir,
                qtype,
            )
            raw_mid = raw_pika(bodies, qtype)
            log = collector_rate(
                bodies,
                {"backend": "logging", "logging": {"logger_name": "bench.lineage.events"}},
                workdir,
                qtype,
            )
            raw_after = raw_pika(bodies, qtype)
            figures = {
                "raw_before": raw_before,
                "sql": sql,
                "raw_mid": raw_mid,
                "logging": log,
                "raw_after": raw_after,
                "sql_ratio": sql / ((raw_before + raw_mid) / 2),
                "logging_ratio": log / ((raw_mid + raw_after) / 2),
            }
            rounds.append(figures)
            print(
                f"round {round_no}: raw pika consume+ack (prefetch 100): "
                f"{raw_before:8.0f} / {raw_mid:8.0f} / {raw_after:8.0f} msg/s"
            )
            print(
                f"round {round_no}: collector -> sql (SQLite):          {sql:8.0f} events/s"
                f"  = {figures['sql_ratio']:.2f}x raw (target >= 0.50x)"
            )
            print(
                f"round {round_no}: collector -> logging:               {log:8.0f} events/s"
                f"  = {figures['logging_ratio']:.2f}x raw (target >= 0.80x)"
            )
            raw_before = raw_after
        handler.close()
    sql_ratios = [r["sql_ratio"] for r in rounds]
    log_ratios = [r["logging_ratio"] for r in rounds]
    summary = {
        "events": args.events,
        "queue_type": qtype,
        "rounds": rounds,
        "sql_ratio_median": _median(sql_ratios),
        "sql_ratio_min": min(sql_ratios),
        "sql_ratio_max": max(sql_ratios),
        "logging_ratio_median": _median(log_ratios),
        "logging_ratio_min": min(log_ratios),
        "logging_ratio_max": max(log_ratios),
        "targets": {"sql": 0.5, "logging": 0.8},
    }
    print(
        f"sql/raw:     median {summary['sql_ratio_median']:.2f}x "
        f"(range {min(sql_ratios):.2f}-{max(sql_ratios):.2f}, target >= 0.50x)"
    )
    print(
        f"logging/raw: median {summary['logging_ratio_median']:.2f}x "
        f"(range {min(log_ratios):.2f}-{max(log_ratios):.2f}, target >= 0.80x)"
    )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
