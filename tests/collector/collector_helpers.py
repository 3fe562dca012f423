"""Event factories and broker helpers shared by the collector tests."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pika
from vhosts import session_vhost

from lineage_sdk.collector.consumer import LineageCollector
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.topology import Topology
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.transport.unrouted import declare_event_exchange, holding_queue, unrouted_exchange

RABBIT_URL = session_vhost().url  # this process's private vhost, never the shared "/"
PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/tests"
RUN_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
PARENT_FACET_SCHEMA = (
    "https://openlineage.io/spec/facets/1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet"
)
BATCH_CONTENT_TYPE = "application/vnd.lineage-sdk.batch+json"
_BASE_TIME = datetime(2025, 1, 1, tzinfo=UTC)


def run_event(
    *,
    job: str = "job",
    namespace: str = "tests",
    event_type: str = "COMPLETE",
    run_id: str | None = None,
    inputs: Sequence[tuple[str, str]] = (),
    outputs: Sequence[tuple[str, str]] = (),
    parent: tuple[str, str, str] | None = None,
    seconds: float = 0.0,
    extra_run_facets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A valid OpenLineage 2-0-2 RunEvent; ``parent`` is (run_id, namespace, name)."""
    facets: dict[str, Any] = dict(extra_run_facets or {})
    if parent is not None:
        facets["parent"] = {
            "_producer": PRODUCER,
            "_schemaURL": PARENT_FACET_SCHEMA,
            "run": {"runId": parent[0]},
            "job": {"namespace": parent[1], "name": parent[2]},
        }
    return {
        "eventType": event_type,
        "eventTime": (_BASE_TIME + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z"),
        "run": {"runId": run_id or str(uuid.uuid4()), "facets": facets},
        "job": {"namespace": namespace, "name": job, "facets": {}},
        "inputs": [{"namespace": ns, "name": n, "facets": {}} for ns, n in inputs],
        "outputs": [{"namespace": ns, "name": n, "facets": {}} for ns, n in outputs],
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT_SCHEMA,
    }


def many_events(count: int, *, prefix: str = "job") -> list[dict[str, Any]]:
    """``count`` distinct events: START/COMPLETE pairs over a few jobs and datasets."""
    events = []
    for i in range(count):
        run = str(uuid.UUID(int=i // 2 + 1, version=4))
        events.append(
            run_event(
                job=f"{prefix}{i % 17}",
                run_id=run,
                event_type="START" if i % 2 == 0 else "COMPLETE",
                inputs=[("db", f"in{i % 13}")],
                outputs=[("db", f"out{i % 11}")],
                seconds=i,
            )
        )
    return events


def event_id(event: dict[str, Any]) -> str:
    from lineage_sdk.models import event_id as model_event_id

    return model_event_id(event)


def connect() -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.URLParameters(RABBIT_URL))


def publish(
    exchange: str,
    messages: Iterable[bytes | tuple[bytes, pika.BasicProperties]],
    *,
    routing_key: str = "tests.job.COMPLETE",
) -> int:
    """Publish with confirms (fast: BlockingChannel waits per message, fine for tests)."""
    conn = connect()
    try:
        ch = conn.channel()
        declare_event_exchange(ch, exchange)
        ch.confirm_delivery()
        n = 0
        for item in messages:
            body, props = (
                item
                if isinstance(item, tuple)
                else (item, pika.BasicProperties(content_type="application/json", delivery_mode=2))
            )
            ch.basic_publish(exchange, routing_key, body, props, mandatory=True)
            n += 1
        return n
    finally:
        conn.close()


def publish_fast(
    exchange: str,
    bodies: Sequence[bytes],
    *,
    content_type: str = "application/json",
    routing_key: str = "tests.job.COMPLETE",
) -> None:
    """Publish many messages fast and return once the broker confirmed every one.

    Confirms matter: a quorum queue takes a message from the publishing channel asynchronously,
    and messages still in flight when that channel closes are lost (seen: 10,000 published,
    fewer queued). aio-pika keeps up to 500 publishes in flight on one confirming channel."""
    conn = connect()
    try:
        declare_event_exchange(conn.channel(), exchange)
    finally:
        conn.close()
    asyncio.run(_publish_confirmed(exchange, bodies, content_type, routing_key))


async def _publish_confirmed(
    exchange: str, bodies: Sequence[bytes], content_type: str, routing_key: str
) -> None:
    import aio_pika

    connection = await aio_pika.connect(RABBIT_URL)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        target = await channel.get_exchange(exchange, ensure=False)
        for start in range(0, len(bodies), 500):
            await asyncio.gather(
                *(
                    target.publish(
                        aio_pika.Message(
                            body,
                            content_type=content_type,
                            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                        ),
                        routing_key,
                    )
                    for body in bodies[start : start + 500]
                )
            )


def json_props(**kwargs: Any) -> pika.BasicProperties:
    kwargs.setdefault("content_type", "application/json")
    return pika.BasicProperties(delivery_mode=2, **kwargs)


def dumps(event: Any) -> bytes:
    return orjson.dumps(event, option=orjson.OPT_SORT_KEYS)


def delete_queues(channel: Any, topology: Topology) -> None:
    """Remove a collector's queues, and its topic's holding queue for the unrouted with the
    alternate exchange feeding it (tests use a topic of their own; the topic exchange itself is
    left to the caller, since producers share it)."""
    retries = (r.name for r in topology.retry_queues)
    for name in (topology.queue, *retries, topology.dead_letter_queue):
        channel.queue_delete(queue=name)
    channel.queue_delete(queue=holding_queue(topology.exchange))
    channel.exchange_delete(exchange=unrouted_exchange(topology.exchange))


def queue_depth(queue: str) -> int:
    conn = connect()
    try:
        return int(conn.channel().queue_declare(queue, passive=True).method.message_count)
    finally:
        conn.close()


def drain(queue: str, limit: int = 10_000) -> list[tuple[pika.BasicProperties, bytes]]:
    """Take (and ack) every message of ``queue``."""
    out = []
    conn = connect()
    try:
        ch = conn.channel()
        while len(out) < limit:
            method, props, body = ch.basic_get(queue, auto_ack=True)
            if method is None:
                break
            out.append((props, body))
    finally:
        conn.close()
    return out


def wait_until(
    predicate: Callable[[], bool],
    timeout: float = 30.0,
    interval: float = 0.05,
    message: str = "condition",
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


@contextlib.contextmanager
def running(
    config: LineageConfig, manager: LineageManager | None = None
) -> Iterator[LineageCollector]:
    """A collector consuming on a thread; stopped (graceful) on exit."""
    collector = LineageCollector(config, manager)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            collector.run()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, name="test-collector", daemon=True)
    thread.start()
    wait_until(lambda: collector.ready or bool(errors), 20, message="collector ready")
    try:
        yield collector
    finally:
        collector.stop()
        thread.join(30)
        assert not thread.is_alive(), "collector did not stop"
    if errors:
        raise errors[0]
