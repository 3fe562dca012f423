"""Quorum queues against classic ones: publishing into the collector's queue and the collector
consuming it, with ratios from the same run.

    python bench/bench_queue_types.py [--events 20000] [--confirmed 2000] [--rounds 4] [--json PATH]

Per round and per queue type (alternating which goes first, with a pause between runs: the
broker's cleanup of the previous run's queues slows whatever runs next):

- publish: ``--events`` persistent messages streamed to the topic exchange, until the broker
  counts them all in the collector's main queue (a quorum queue counts a message once a majority
  has written it);
- publish confirmed: ``--confirmed`` messages, each waiting for its publisher confirm (what the
  collector does for every retry and park, and the exporter per batch): the latency of one write;
- consume: the collector (logging store) draining the ``--events`` messages, events/s.

Uses the broker on 127.0.0.1:5672 (one node here: a cluster replicates quorum writes to a majority
and is slower still) with unique names, deleted afterwards. Take figures on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import pika
from bench_collector import URL, collector_rate, delete_queues, make_events

from lineage_sdk.collector.topology import Topology
from lineage_sdk.config.schema import LineageConfig

TYPES = ("quorum", "classic")


def _topology(queue_type: str) -> Topology:
    topic = f"bench.qtypes.{uuid.uuid4().hex[:8]}"
    config = LineageConfig.model_validate(
        {
            "collector_topic": topic,
            "rabbitmq": {"url": URL},
            "collector": {"retry_delays_ms": [1000], "queue_type": queue_type},
        }
    )
    return Topology.from_config(config)


def publish_rate(bodies: list[bytes], queue_type: str) -> float:
    """Messages/s streamed to the exchange until all are counted in the main queue."""
    topo = _topology(queue_type)
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    ch = conn.channel()
    try:
        topo.declare(ch)
        props = pika.BasicProperties(content_type="application/json", delivery_mode=2)
        start = time.perf_counter()
        for body in bodies:
            ch.basic_publish(topo.exchange, "bench.key", body, props)
        while ch.queue_declare(topo.queue, passive=True).method.message_count < len(bodies):
            time.sleep(0.002)
        return len(bodies) / (time.perf_counter() - start)
    finally:
        delete_queues(ch, topo)
        ch.exchange_delete(topo.exchange)
        conn.close()


def confirmed_rate(bodies: list[bytes], queue_type: str) -> float:
    """Messages/s when each publish waits for its confirm."""
    topo = _topology(queue_type)
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    ch = conn.channel()
    try:
        topo.declare(ch)
        ch.confirm_delivery()
        props = pika.BasicProperties(content_type="application/json", delivery_mode=2)
        start = time.perf_counter()
        for body in bodies:
            ch.basic_publish(topo.exchange, "bench.key", body, props, mandatory=True)
        return len(bodies) / (time.perf_counter() - start)
    finally:
        delete_queues(ch, topo)
        ch.exchange_delete(topo.exchange)
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--confirmed", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=4, help="even: each type goes first as often")
    parser.add_argument(
        "--settle", type=float, default=2.0, help="seconds between runs (queue deletion settles)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    bodies = make_events(args.events)
    events_log = logging.getLogger("bench.lineage.events")
    events_log.propagate = False
    store = {"backend": "logging", "logging": {"logger_name": "bench.lineage.events"}}
    rounds: list[dict[str, float]] = []
    print(
        f"{args.events} messages of ~{sum(map(len, bodies)) // len(bodies)} bytes "
        f"({args.confirmed} for confirmed publishing), {args.rounds} round(s)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        handler = logging.FileHandler(workdir / "events.jsonl")
        events_log.addHandler(handler)
        events_log.setLevel(logging.INFO)
        for round_no in range(1, args.rounds + 1):
            order = TYPES if round_no % 2 else TYPES[::-1]
            figures: dict[str, float] = {}
            for qtype in order:
                time.sleep(args.settle)
                figures[f"{qtype}_publish"] = publish_rate(bodies, qtype)
                time.sleep(args.settle)
                figures[f"{qtype}_confirmed"] = confirmed_rate(bodies[: args.confirmed], qtype)
                time.sleep(args.settle)
                figures[f"{qtype}_consume"] = collector_rate(bodies, store, workdir, qtype)
            for kind in ("publish", "confirmed", "consume"):
                figures[f"{kind}_ratio"] = figures[f"quorum_{kind}"] / figures[f"classic_{kind}"]
            rounds.append(figures)
            for kind, label in (
                ("publish", "publish (streamed)  msg/s"),
                ("confirmed", "publish (confirmed) msg/s"),
                ("consume", "collector consume   ev/s "),
            ):
                print(
                    f"round {round_no}: {label}: quorum {figures[f'quorum_{kind}']:8.0f}"
                    f"  classic {figures[f'classic_{kind}']:8.0f}"
                    f"  = {figures[f'{kind}_ratio']:.2f}x"
                )
        handler.close()
    summary: dict[str, object] = {"events": args.events, "rounds": rounds}
    for kind in ("publish", "confirmed", "consume"):
        ratios = [r[f"{kind}_ratio"] for r in rounds]
        summary[f"{kind}_ratio_median"] = statistics.median(ratios)
        print(
            f"quorum/classic {kind:9}: median {statistics.median(ratios):.2f}x "
            f"(range {min(ratios):.2f}-{max(ratios):.2f})"
        )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
