"""The broker side of the collector: consume, batch, write, then ack, retry or park.

One ``BlockingConnection`` per collector, driven by its own loop (``process_data_events`` with a
short time limit), so batching, stopping and reconnecting are plain code on one thread:

1. deliveries are buffered until ``batch_size`` events or ``batch_timeout_ms`` have passed;
2. each message is decoded; poison messages (and bad events of a batch message) are parked in
   the dead-letter queue at once, with a reason;
3. the good events go to the store through
   :meth:`LineageCollectorService.handle_lineage_events`, the one path every event takes (one
   ``write_batch``; composite: every store at once; it waits for all of them and raises if any
   failed), awaited on an event loop the consumer keeps for its lifetime (which runs nothing
   else, so the write runs on it: no thread switch per batch);
4. on success everything is acked with one ``multiple`` ack. On a transient failure each message
   is republished to the retry queue of its attempt (delays grow) or, after ``max_attempts``,
   parked; on a permanent failure the batch is split so that only the events the store refuses
   are parked. Retry and park publishes are confirmed by the broker before the original is acked,
   so a crash at any point redelivers rather than loses; stores are idempotent, so a redelivery
   leaves one copy.

Prefetched but unacked messages go back to the queue when a connection drops, which is also what
lets several collectors share one queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import pika
import pika.exceptions

from lineage_sdk.collector.decode import PoisonMessage, decode_message
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.metrics import CollectorMetrics
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.settings import CollectorConfig
from lineage_sdk.collector.store import LineageRecord
from lineage_sdk.collector.topology import (
    ATTEMPT_HEADER,
    BROKER_HEADERS,
    Topology,
    attempts_so_far,
)
from lineage_sdk.config.amqp import AmqpConnectionConfig
from lineage_sdk.config.redaction import redact
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import StoreError
from lineage_sdk.models.constants import JSON_CONTENT_TYPE
from lineage_sdk.models.json_exact import dumps_exact
from lineage_sdk.transport import amqp, unrouted

__all__ = ["ConsumerStalled", "LineageCollector", "connection_parameters"]

_T = TypeVar("_T")
_log = logging.getLogger("lineage_sdk.collector")
_MAX_ERROR_CHARS = 1000
_CONNECTION_ERRORS = (pika.exceptions.AMQPError, OSError)
# A consumer that holds nothing and has received nothing while its queue had ready messages for
# this long is taken to be stuck, and the collector reconnects (see _Watchdog).
_STALL_S = 2.0
_STALL_CHECK_S = 0.5


class ConsumerStalled(pika.exceptions.AMQPError):  # type: ignore[misc]
    """The queue holds ready messages but none reach this consumer: reconnect."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "consumer stalled"


class _Watchdog:
    """Notices a consumer the broker has stopped feeding, which reconnecting cures.

    RabbitMQ 3.10: a channel that first uses a quorum queue while the queue elects a new leader
    (its leader's node has just died, and our reconnect was quick) stays bound to the dead leader
    for its whole life: its consumer gets nothing and its publishes are nacked, while a channel
    opened after the election is fine (measured on a 3-node cluster; docs/deployment.md). A
    healthy consumer that holds nothing is sent a queue's ready messages at once, so ready
    messages for ``_STALL_S`` with nothing delivered and nothing held mean a stuck channel.
    """

    def __init__(self, connection: Any, queue: str) -> None:
        self._probe = connection.channel()
        self._queue = queue
        self._idle_since = time.monotonic()
        self._ready_since: float | None = None
        self._next_check = self._idle_since + _STALL_CHECK_S

    def delivered(self) -> None:
        """Something arrived or a batch was just written: the consumer is being fed."""
        self._idle_since = time.monotonic()
        self._ready_since = None

    def check(self) -> None:
        """Call while nothing is held; raises ConsumerStalled for a stuck consumer."""
        now = time.monotonic()
        if now < self._next_check:
            return
        self._next_check = now + _STALL_CHECK_S
        if now - self._idle_since < _STALL_S:
            return
        ok = self._probe.queue_declare(self._queue, passive=True)
        ready = int(ok.method.message_count)
        if not ready:
            self._ready_since = None
            return
        if self._ready_since is None:
            self._ready_since = now
        elif now - self._ready_since >= _STALL_S:
            raise ConsumerStalled(
                f"queue {self._queue!r} has had {ready} ready message(s) for"
                f" {now - self._ready_since:.1f}s and none reached this consumer (a quorum queue"
                " leader changed as the channel opened?)"
            )


def connection_parameters(config: LineageConfig, *, role: str = "collector") -> pika.URLParameters:
    """pika parameters for the first broker address of ``[lineage.rabbitmq]`` (one-shot commands:
    ``check``, ``dlq``, ``topology migrate``)."""
    return broker_addresses(config, role=role)[0][0]


def broker_addresses(
    config: LineageConfig, *, role: str = "collector"
) -> list[tuple[pika.URLParameters, str]]:
    """pika parameters for every broker address (URL, heartbeat, connection name, TLS), in
    order, each with its URL for a log line."""
    rmq = config.section("rabbitmq", AmqpConnectionConfig)
    name = rmq.connection_name or f"lineage-{role}/{socket.gethostname()}/{os.getpid()}"
    addresses = amqp.connection_parameter_list(rmq, name=name, product="lineage-sdk")
    for params, _url in addresses:
        params.blocked_connection_timeout = max(rmq.publish_timeout_ms / 1000, 1.0)
        params.socket_timeout = 10
    return addresses


@dataclass(slots=True)
class _Delivery:
    tag: int
    properties: pika.BasicProperties
    body: bytes
    exchange: str
    routing_key: str
    records: list[LineageRecord] | None = None
    positions: list[int] | None = None  # each record's index in the message's batch


class LineageCollector:
    """Consumes the main queue until :meth:`stop`; see the module docstring for the algorithm.

    ``run()`` blocks (call it on the main thread or any thread); ``stop()`` may be called from a
    signal handler or another thread.
    """

    def __init__(
        self,
        config: LineageConfig,
        manager: LineageManager | None = None,
        *,
        metrics: CollectorMetrics | None = None,
        consumer_tag_prefix: str = "lineage-collector",
    ) -> None:
        self.config = config
        self.settings = config.section("collector", CollectorConfig)
        self.amqp = config.section("rabbitmq", AmqpConnectionConfig)
        self.topology = Topology.from_config(config)
        self.manager = manager or LineageManager(config)
        self.metrics = metrics or CollectorMetrics()
        self.service = LineageCollectorService(self.manager, self.metrics)
        self._addresses = broker_addresses(config)
        self._address = 0  # the one tried next; each failure moves on to the next, round robin
        self._stop = threading.Event()
        self._connected = False
        self._stores_open = False
        self._alive = False
        self._pending: list[_Delivery] = []
        self._pending_events = 0
        self._first_at = 0.0
        self._retry_names = tuple(r.name for r in self.topology.retry_queues)
        self._tag_prefix = consumer_tag_prefix
        self._broker_state = amqp.ConnectionStateLog(_log, self._addresses[0][1])
        self._runner: asyncio.Runner | None = None  # the service's loop, while run() runs
        self._watchdog: _Watchdog | None = None

    # -- state for the health endpoint ----------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self._connected and self._stores_open and not self._stop.is_set()

    @property
    def alive(self) -> bool:
        return self._alive

    def stop(self) -> None:
        """Ask the loop to finish the batch in flight, ack it, close and return."""
        self._stop.set()

    # -- main loop --------------------------------------------------------------------------------

    def run(self) -> None:
        """Open the stores, then consume, reconnecting with backoff, until stop()."""
        self._alive = True
        runner = self._runner = asyncio.Runner()
        try:
            self._open_stores()
            if self._stop.is_set():
                return
            delay = self.amqp.reconnect_initial_ms / 1000
            max_delay = self.amqp.reconnect_max_ms / 1000
            while not self._stop.is_set():
                try:
                    self._session()
                    delay = self.amqp.reconnect_initial_ms / 1000
                except _CONNECTION_ERRORS as exc:
                    self._connected = False
                    self.metrics.connected.set(0)
                    if self._stop.is_set():
                        break
                    self.metrics.reconnects.inc()
                    wait = random.uniform(delay / 2, delay)  # noqa: S311 - jitter, not crypto
                    cause = (
                        str(exc)
                        if isinstance(exc, ConsumerStalled)
                        else amqp.describe_failure(exc, self._params)[0]
                    )
                    self._broker_state.failed(cause, wait)
                    self._next_address()
                    self._stop.wait(wait)
                    delay = min(delay * 2, max_delay)
        finally:
            self._connected = False
            self._stores_open = False
            # The service closes the manager; the manager again in case it was connected by
            # whoever built it but the service never connected (stopped before opening).
            try:
                self._await(self.service.close())
                self._await(self.manager.close())
            finally:
                runner.close()
                self._runner = None
                self._alive = False

    @property
    def _params(self) -> pika.URLParameters:
        return self._addresses[self._address][0]

    def _next_address(self) -> None:
        """Fail over: the next attempt goes to the next broker address (a no-op with one)."""
        self._address = (self._address + 1) % len(self._addresses)
        self._broker_state.url = self._addresses[self._address][1]

    def _open_stores(self) -> None:
        delay = 0.5
        while not self._stop.is_set():
            try:
                self._await(self.service.connect())
                self._stores_open = True
                return
            except StoreError as exc:
                _log.warning("cannot open stores (%s); retrying in %.1fs", exc, delay)
                self._stop.wait(delay)
                delay = min(delay * 2, 30.0)

    def _session(self) -> None:
        connection = pika.BlockingConnection(self._params)
        try:
            channel = connection.channel()
            self.topology.declare(channel)
            unrouted.release_unrouted(connection, self.topology.exchange)  # now that we are bound
            channel.basic_qos(prefetch_count=self.settings.prefetch)
            publisher = connection.channel()
            publisher.confirm_delivery()
            self._pending = []
            self._pending_events = 0
            tag = channel.basic_consume(
                self.topology.queue,
                self._on_message,
                consumer_tag=f"{self._tag_prefix}-{os.getpid()}-{random.getrandbits(32):08x}",
            )
            watchdog = self._watchdog = _Watchdog(connection, self.topology.queue)
            self._connected = True
            self.metrics.connected.set(1)
            self._broker_state.connected()
            _log.info(
                "consuming %s (exchange %s, binding %s)",
                self.topology.queue,
                self.topology.exchange,
                self.topology.binding_key,
            )
            batch_size = self.settings.batch_size
            batch_timeout = self.settings.batch_timeout_ms / 1000
            while not self._stop.is_set():
                if self._pending:
                    left = self._first_at + batch_timeout - time.monotonic()
                    connection.process_data_events(time_limit=max(0.0, left))
                else:
                    connection.process_data_events(time_limit=0.2)
                    if not self._pending:
                        watchdog.check()
                if self._pending and (
                    self._pending_events >= batch_size
                    or time.monotonic() - self._first_at >= batch_timeout
                ):
                    self._flush(channel, publisher)
                    watchdog.delivered()
            # Graceful stop: no new deliveries; finish and ack what we hold. Deliveries pika
            # received but did not hand to us are rejected back to the queue by basic_cancel.
            channel.basic_cancel(tag)
            if self._pending:
                self._flush(channel, publisher)
            self._connected = False
            self.metrics.connected.set(0)
            connection.close()
        finally:
            self._connected = False
            if connection.is_open:
                with contextlib.suppress(*_CONNECTION_ERRORS):
                    connection.close()

    def _on_message(
        self, channel: Any, method: Any, properties: pika.BasicProperties, body: bytes
    ) -> None:
        if not self._pending:
            self._first_at = time.monotonic()
            if self._watchdog is not None:
                self._watchdog.delivered()
        self._pending.append(
            _Delivery(method.delivery_tag, properties, body, method.exchange, method.routing_key)
        )
        # A batch message counts its events towards batch_size; estimate cheaply from the type.
        ctype = properties.content_type or ""
        self._pending_events += body.count(b'"eventTime"') if "batch" in ctype else 1
        self.metrics.messages_consumed.inc()

    def _await(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        """Run one of the service's coroutines on the consumer's loop (from the run() thread)."""
        assert self._runner is not None, "only while run() runs"
        return self._runner.run(coroutine)

    # -- one batch --------------------------------------------------------------------------------

    def _flush(self, channel: Any, publisher: Any) -> None:
        deliveries, self._pending, self._pending_events = self._pending, [], 0
        good: list[_Delivery] = []
        for d in deliveries:
            props = d.properties
            try:
                decoded = decode_message(
                    d.body,
                    props.content_type,
                    content_encoding=props.content_encoding,
                    max_bytes=self.settings.max_message_bytes,
                )
            except PoisonMessage as exc:
                self._park(publisher, d, d.body, props, reason=exc.reason, error=exc.detail)
                continue
            for bad in decoded.rejected:
                self._park(
                    publisher,
                    d,
                    bad.body,
                    _json_props(props),
                    reason=bad.reason,
                    error=bad.detail,
                    batch_index=bad.index,
                )
            if decoded.records:
                d.records = decoded.records
                d.positions = decoded.positions
                good.append(d)
        records = [r for d in good for r in (d.records or ())]
        if records:
            self.metrics.events_consumed.inc(len(records))
            try:
                self._await(self.service.handle_lineage_events(records, off_loop=False))
            except StoreError as exc:
                self._on_store_failure(publisher, good, exc)
        channel.basic_ack(delivery_tag=deliveries[-1].tag, multiple=True)

    def _on_store_failure(self, publisher: Any, good: list[_Delivery], exc: StoreError) -> None:
        _log.warning("store write of %d messages failed: %s", len(good), exc)
        if not exc.permanent:
            for d in good:
                self._retry_or_park(publisher, d, exc)
            return
        # Permanent: find the events the store refuses; write the others.
        for d in good:
            records = d.records or []
            refused: list[tuple[int, LineageRecord, StoreError]] = []  # with batch positions
            transient: StoreError | None = None
            positions = d.positions or list(range(len(records)))
            for index, record in zip(positions, records, strict=True):
                try:
                    self._await(self.service.handle_lineage_events([record], off_loop=False))
                except StoreError as write_error:
                    if not write_error.permanent:
                        transient = write_error
                        break
                    refused.append((index, record, write_error))
            if transient is not None:
                self._retry_or_park(publisher, d, transient)
            elif len(refused) == len(records) and len(records) == 1:
                self._park(
                    publisher,
                    d,
                    d.body,
                    d.properties,
                    reason="store_rejected",
                    error=str(refused[0][2]),
                    store=refused[0][2].store,
                    attempts=attempts_so_far(d.properties.headers, self._retry_names) + 1,
                )
            else:
                for index, record, refusal in refused:
                    self._park(
                        publisher,
                        d,
                        dumps_exact(record.event),
                        _json_props(d.properties),
                        reason="store_rejected",
                        error=str(refusal),
                        store=refusal.store,
                        attempts=attempts_so_far(d.properties.headers, self._retry_names) + 1,
                        batch_index=index,
                    )

    def _retry_or_park(self, publisher: Any, d: _Delivery, exc: StoreError) -> None:
        attempt = attempts_so_far(d.properties.headers, self._retry_names) + 1
        if attempt >= self.settings.max_attempts:
            self._park(
                publisher,
                d,
                d.body,
                d.properties,
                reason="retries_exhausted",
                error=str(exc),
                store=exc.store,
                attempts=attempt,
            )
            return
        retry = self.topology.retry_queue_for(attempt)
        headers = _republished_headers(d.properties)
        headers[ATTEMPT_HEADER] = attempt
        headers["x-lineage-last-error"] = _clip(str(exc))
        headers["x-lineage-store"] = exc.store
        headers.setdefault("x-lineage-original-exchange", d.exchange)
        headers.setdefault("x-lineage-original-routing-key", d.routing_key)
        publisher.basic_publish(
            exchange="",
            routing_key=retry.name,
            body=d.body,
            properties=amqp.persistent_copy(d.properties, headers),
            mandatory=True,
        )
        self.metrics.messages_retried.inc()

    def _park(
        self,
        publisher: Any,
        d: _Delivery,
        body: bytes,
        props: pika.BasicProperties,
        *,
        reason: str,
        error: str,
        store: str = "",
        attempts: int | None = None,
        batch_index: int | None = None,
    ) -> None:
        headers = _republished_headers(props)
        headers.update(
            {
                "x-lineage-reason": reason,
                "x-lineage-error": _clip(error),
                "x-lineage-store": store,
                "x-lineage-attempts": attempts
                if attempts is not None
                else attempts_so_far(props.headers, self._retry_names),
                "x-lineage-parked-at": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "x-lineage-source-queue": self.topology.queue,
            }
        )
        headers.setdefault("x-lineage-original-exchange", d.exchange)
        headers.setdefault("x-lineage-original-routing-key", d.routing_key)
        if batch_index is not None:
            headers["x-lineage-batch-index"] = batch_index
        headers.pop("x-lineage-last-error", None)
        publisher.basic_publish(
            exchange="",
            routing_key=self.topology.dead_letter_queue,
            body=body,
            properties=amqp.persistent_copy(props, headers),
            mandatory=True,
        )
        self.metrics.dead_lettered.labels(reason).inc()
        _log.warning(
            "parked a message in %s: %s: %s",
            self.topology.dead_letter_queue,
            reason,
            _clip(error, 300),
        )


def _clip(text: str, limit: int = _MAX_ERROR_CHARS) -> str:
    text = redact(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _republished_headers(props: pika.BasicProperties) -> dict[str, Any]:
    """A copy of the headers without those the broker sets on delivery."""
    headers = dict(props.headers or {})
    for key in BROKER_HEADERS:
        headers.pop(key, None)
    return headers


def _json_props(props: pika.BasicProperties) -> pika.BasicProperties:
    """Properties for one event cut out of a batch message: plain JSON, uncompressed."""
    return pika.BasicProperties(
        content_type=JSON_CONTENT_TYPE,
        headers=dict(props.headers or {}),
        delivery_mode=2,
        app_id=props.app_id,
    )
