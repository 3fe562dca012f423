"""The parking lot: list, replay and purge what the collector dead-lettered.

Replay sends each parked message to the collector's main queue through the default exchange (so
other consumers of the topic do not see it twice), with the park and retry headers removed so it
gets a fresh set of attempts. Each republish is confirmed before the parked copy is acked: an
interrupted replay duplicates at worst, and the stores are idempotent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pika

from lineage_sdk.collector.consumer import connection_parameters
from lineage_sdk.collector.topology import ATTEMPT_HEADER, BROKER_HEADERS, Topology
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.transport.amqp import persistent_copy

__all__ = ["DeadLetterQueue", "ParkedMessage"]

_DROP_ON_REPLAY = (
    "x-death",
    "x-first-death-exchange",
    "x-first-death-queue",
    "x-first-death-reason",
    "x-last-death-exchange",
    "x-last-death-queue",
    "x-last-death-reason",
    ATTEMPT_HEADER,
    *BROKER_HEADERS,
)


@dataclass(frozen=True, slots=True)
class ParkedMessage:
    body: bytes
    content_type: str | None
    message_id: str | None
    headers: dict[str, Any]

    @property
    def reason(self) -> str:
        """Why it was parked: the collector's reason, else the broker's (``delivery_limit`` when
        a quorum queue gave up on a message delivered too often)."""
        own = self.headers.get("x-lineage-reason")
        if own is not None:
            return _text(own)
        deaths = self.headers.get("x-death")
        if isinstance(deaths, list) and deaths and isinstance(deaths[0], dict):
            return _text(deaths[0].get("reason", ""))
        return ""

    @property
    def error(self) -> str:
        return _text(self.headers.get("x-lineage-error", ""))

    @property
    def store(self) -> str:
        return _text(self.headers.get("x-lineage-store", ""))

    @property
    def attempts(self) -> int:
        value = self.headers.get("x-lineage-attempts", 0)
        return value if isinstance(value, int) else 0


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class DeadLetterQueue:
    """Operations on the configured parking-lot queue (declares the topology first)."""

    def __init__(self, config: LineageConfig) -> None:
        self.config = config
        self.topology = Topology.from_config(config)
        self._params = connection_parameters(config, role="collector-dlq")

    @contextmanager
    def _channel(self) -> Iterator[Any]:
        connection = pika.BlockingConnection(self._params)
        try:
            channel = connection.channel()
            self.topology.declare(channel)
            yield channel
        finally:
            if connection.is_open:
                connection.close()

    def count(self) -> int:
        with self._channel() as channel:
            ok = channel.queue_declare(queue=self.topology.dead_letter_queue, passive=True)
            return int(ok.method.message_count)

    def list(self, limit: int = 50) -> list[ParkedMessage]:
        """Peek at up to ``limit`` parked messages; they stay in the queue."""
        out: list[ParkedMessage] = []
        with self._channel() as channel:
            while len(out) < limit:
                method, props, body = channel.basic_get(
                    self.topology.dead_letter_queue, auto_ack=False
                )
                if method is None:
                    break
                out.append(
                    ParkedMessage(
                        body, props.content_type, props.message_id, dict(props.headers or {})
                    )
                )
            # Closing the channel without acking returns every peeked message to the queue.
        return out

    def replay(
        self,
        limit: int | None = None,
        *,
        reason: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Move parked messages back to the main queue; returns how many were replayed.

        Only the messages present when the replay starts are considered (a message parked again
        meanwhile is not replayed twice). ``reason`` replays only messages parked for it; the
        others are left in the queue. ``progress(done, total)`` is called after each message.
        """
        replayed = 0
        with self._channel() as channel:
            channel.confirm_delivery()
            ok = channel.queue_declare(queue=self.topology.dead_letter_queue, passive=True)
            total = int(ok.method.message_count)
            if limit is not None:
                total = min(total, limit)
            skipped: list[int] = []
            seen = 0
            while seen < total:
                method, props, body = channel.basic_get(
                    self.topology.dead_letter_queue, auto_ack=False
                )
                if method is None:
                    break
                seen += 1
                headers = dict(props.headers or {})
                parked = ParkedMessage(body, props.content_type, props.message_id, headers)
                if reason is not None and parked.reason != reason:
                    skipped.append(method.delivery_tag)
                    continue
                for key in list(headers):
                    if key.startswith("x-lineage-") or key in _DROP_ON_REPLAY:
                        headers.pop(key)
                headers["x-lineage-replayed"] = True
                channel.basic_publish(
                    exchange="",
                    routing_key=self.topology.queue,
                    body=body,
                    mandatory=True,
                    properties=persistent_copy(props, headers),
                )
                channel.basic_ack(method.delivery_tag)
                replayed += 1
                if progress is not None:
                    progress(seen, total)
            for tag in skipped:
                channel.basic_nack(tag, requeue=True)
        return replayed

    def purge(self) -> int:
        """Delete every parked message; returns how many there were."""
        with self._channel() as channel:
            ok = channel.queue_purge(self.topology.dead_letter_queue)
            return int(ok.method.message_count)
