"""Benchmark of the aio-pika instrumentation (issue 15): cost per consumed message.

A queue on the real broker (127.0.0.1:5672, or $LINEAGE_BENCH_AMQP_URL) is pre-filled with
messages that carry lineage headers, as an instrumented producer would send them; then a
``queue.consume`` callback consumes and acks them. The same consume-and-ack loop is timed
uninstrumented, in ``per_message`` mode and in ``streaming`` mode, rounds interleaved in one run,
and the medians are reported as ratios to the uninstrumented cost (these machines are noisy; only
same-run ratios mean anything). Events are built and serialized by the pipeline's worker and
dropped by a no-op exporter, as in bench_instrumentation.py (the pika twin of this benchmark).

Target: streaming <= 1.3x the uninstrumented cost; per_message is reported. Run:
``python bench/bench_aio_pika.py`` (``--messages`` and ``--rounds`` make it shorter or steadier).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any

import aio_pika
from _bench_common import (
    AMQP_URL,
    BODY,
    configure_noop,
    consume_arguments,
    lineage_headers,
    report_consume_costs,
)

import lineage_sdk
from lineage_instrumentation.aio_pika import AioPikaInstrumentor
from lineage_sdk.sdk.suppression import suppress_instrumentation

PREFETCH = 200


async def prefill(channel: Any, queue: Any, count: int) -> None:
    """Publish ``count`` messages with lineage headers, outside the instrumentation."""
    headers = lineage_headers()
    with suppress_instrumentation():
        for _ in range(count):
            message = aio_pika.Message(BODY, headers=headers, content_type="application/json")
            await channel.default_exchange.publish(message, routing_key=queue.name)
    # every message is in the queue before timing starts (publisher confirms are on)


async def consume_all(queue: Any, count: int) -> float:
    """Seconds per message to consume and ack ``count`` messages with a callback."""
    seen = 0
    done = asyncio.Event()

    async def on_message(message: Any) -> None:
        nonlocal seen
        await message.ack()
        seen += 1
        if seen >= count:
            done.set()

    start = time.perf_counter()
    tag = await queue.consume(on_message)
    await asyncio.wait_for(done.wait(), 300)
    elapsed = time.perf_counter() - start
    await queue.cancel(tag)
    assert seen == count
    return elapsed / count


async def run(args: argparse.Namespace) -> dict[str, list[float]]:
    instrumentor = AioPikaInstrumentor()
    variants = ("uninstrumented", "per_message", "streaming")
    results: dict[str, list[float]] = {v: [] for v in variants}
    connection = await aio_pika.connect(AMQP_URL)
    channel = await connection.channel()
    await channel.set_qos(prefetch_count=PREFETCH)
    queue = await channel.declare_queue(f"bench.aio.{uuid.uuid4().hex[:10]}")
    try:
        await prefill(channel, queue, 500)  # warm-up: connections, caches, the worker thread
        await consume_all(queue, 500)
        for _ in range(args.rounds):
            for variant in variants:
                await prefill(channel, queue, args.messages)
                if variant != "uninstrumented":
                    instrumentor.instrument(mode=variant, streaming_interval_ms=1000)
                try:
                    results[variant].append(await consume_all(queue, args.messages))
                finally:
                    instrumentor.uninstrument()
                lineage_sdk.force_flush(30.0)
    finally:
        try:
            await queue.delete(if_unused=False, if_empty=False)
            await connection.close()
        except Exception as exc:  # the broker went away: report, don't mask
            print(f"cleanup failed ({exc!r}); queue {queue.name} may be left behind")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = consume_arguments(__doc__.splitlines()[0], argv)
    exporter = configure_noop()
    try:
        results = asyncio.run(run(args))
    finally:
        lineage_sdk.shutdown(10.0)

    return report_consume_costs(
        results, args, f"aio-pika queue.consume, prefetch {PREFETCH}", exporter
    )


if __name__ == "__main__":
    raise SystemExit(main())
