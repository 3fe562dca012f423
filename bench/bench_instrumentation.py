"""Benchmark of the pika instrumentation (issue 6): cost per consumed message.

A queue on the real broker (127.0.0.1:5672, or $LINEAGE_BENCH_AMQP_URL) is pre-filled with
messages that carry lineage headers, as an instrumented producer would send them; then a
``BlockingChannel.basic_consume`` callback consumes and acks them. The same consume-and-ack loop
is timed uninstrumented, in ``per_message`` mode and in ``streaming`` mode, rounds interleaved in
one run, and the medians are reported as ratios to the uninstrumented cost (these machines are
noisy; only same-run ratios mean anything). Events are built and serialized by the pipeline's
worker and dropped by a no-op exporter, as in bench_sdk.py.

Target: streaming <= 1.3x the uninstrumented cost. Run: ``python bench/bench_instrumentation.py``
(about a minute; ``--messages`` and ``--rounds`` make it shorter or steadier).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

import pika
import pika.exceptions
from _bench_common import (
    AMQP_URL,
    BODY,
    configure_noop,
    consume_arguments,
    lineage_headers,
    report_consume_costs,
)

import lineage_sdk
from lineage_instrumentation.pika import PikaInstrumentor
from lineage_sdk.sdk.suppression import suppress_instrumentation


def prefill(channel: Any, queue: str, count: int) -> None:
    """Publish ``count`` messages with lineage headers, outside the instrumentation."""
    headers = lineage_headers()
    props = pika.BasicProperties(headers=headers, content_type="application/json")
    with suppress_instrumentation():
        for _ in range(count):
            channel.basic_publish("", queue, BODY, props)
        # a round trip, so every message is in the queue before timing starts
        channel.queue_declare(queue, passive=True)


def consume_all(channel: Any, queue: str, count: int) -> float:
    """Seconds per message to consume and ack ``count`` messages with a callback."""
    seen = 0

    def on_message(ch: Any, method: Any, _properties: Any, _body: bytes) -> None:
        nonlocal seen
        ch.basic_ack(method.delivery_tag)
        seen += 1
        if seen >= count:
            ch.stop_consuming()

    start = time.perf_counter()
    channel.basic_consume(queue, on_message)
    channel.start_consuming()
    elapsed = time.perf_counter() - start
    assert seen == count
    return elapsed / count


def main(argv: Sequence[str] | None = None) -> int:
    args = consume_arguments(__doc__.splitlines()[0], argv)
    exporter = configure_noop()
    instrumentor = PikaInstrumentor()
    connection = pika.BlockingConnection(pika.URLParameters(AMQP_URL))
    channel = connection.channel()
    channel.basic_qos(prefetch_count=200)
    queue = f"bench.instr.{uuid.uuid4().hex[:10]}"
    channel.queue_declare(queue, auto_delete=False)
    variants = ("uninstrumented", "per_message", "streaming")
    results: dict[str, list[float]] = {v: [] for v in variants}
    try:
        # warm-up: connections, caches, the worker thread
        prefill(channel, queue, 500)
        consume_all(channel, queue, 500)
        for _ in range(args.rounds):
            for variant in variants:
                prefill(channel, queue, args.messages)
                if variant != "uninstrumented":
                    instrumentor.instrument(mode=variant, streaming_interval_ms=1000)
                try:
                    results[variant].append(consume_all(channel, queue, args.messages))
                finally:
                    instrumentor.uninstrument()
                lineage_sdk.force_flush(30.0)
    finally:
        try:
            channel.queue_delete(queue)
            connection.close()
        except pika.exceptions.AMQPError as exc:  # the broker went away: report, don't mask
            print(f"cleanup failed ({exc!r}); queue {queue} may be left behind")
        lineage_sdk.shutdown(10.0)

    return report_consume_costs(
        results, args, "BlockingChannel.basic_consume, prefetch 200", exporter
    )


if __name__ == "__main__":
    raise SystemExit(main())
