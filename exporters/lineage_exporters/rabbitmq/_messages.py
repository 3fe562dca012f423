"""Turning encoded events into AMQP messages: routing keys, headers and batch bodies.

Kept free of pika and of I/O so the rules that consumers depend on (the routing-key scheme and
the batch format, documented in docs/rabbitmq-exporter.md) are pure functions, tested alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lineage_sdk.models.constants import (
    BATCH_CONTENT_TYPE,
    HEADER_EVENT_COUNT,
    HEADER_EVENT_IDS,
    HEADER_EVENT_TYPE,
    HEADER_PRODUCER,
    HEADER_SCHEMA_URL,
    JSON_CONTENT_TYPE,
)
from lineage_sdk.sdk.export import EncodedEvent

__all__ = [
    "BATCH_CONTENT_TYPE",
    "HEADER_EVENT_COUNT",
    "HEADER_EVENT_IDS",
    "HEADER_EVENT_TYPE",
    "HEADER_PRODUCER",
    "HEADER_SCHEMA_URL",
    "JSON_CONTENT_TYPE",
    "MAX_BATCH_BODY_BYTES",
    "MIXED",
    "OutboundMessage",
    "batch_message_id",
    "build_messages",
    "routing_key",
    "sanitize_word",
]

MIXED = "MIXED"
# The collector refuses messages over 4 MiB by default; a batch closes well before that.
MAX_BATCH_BODY_BYTES = 1 << 20
_MAX_KEY_BYTES = 255  # AMQP short string
_ESCAPES = str.maketrans({"%": "%25", ".": "%2E", "*": "%2A", "#": "%23"})


@dataclass(slots=True)
class OutboundMessage:
    """One AMQP message, ready to publish or to write to the spool.

    ``segment`` is the spool segment the message was read back from (None if it never touched
    the disk); the segment file is deleted once every message read from it is confirmed.
    """

    routing_key: str
    message_id: str
    content_type: str
    event_type: str
    schema_url: str
    producer: str
    event_count: int
    event_ids: str | None
    body: bytes
    segment: tuple[int, int] | None = None

    def amqp_headers(self) -> dict[str, str | int]:
        """The headers that let consumers route and count without parsing the body."""
        headers: dict[str, str | int] = {
            HEADER_EVENT_TYPE: self.event_type,
            HEADER_SCHEMA_URL: self.schema_url,
            HEADER_PRODUCER: self.producer,
            HEADER_EVENT_COUNT: self.event_count,
        }
        if self.event_ids is not None:
            headers[HEADER_EVENT_IDS] = self.event_ids
        return headers


def sanitize_word(part: str) -> str:
    """Percent-encode the characters that would change a topic routing key's word structure.

    ``.`` separates words and ``*``/``#`` are wildcards in binding keys, so a job called
    ``etl.daily`` becomes the single word ``etl%2Edaily``; ``%`` itself is escaped so the
    mapping is reversible (``urllib.parse.unquote`` recovers the original).
    """
    return part.translate(_ESCAPES)


def _shorten(word: str, budget: int) -> str:
    """Cut ``word`` to ``budget`` UTF-8 bytes, keeping it unique with a hash suffix."""
    raw = word.encode()
    if len(raw) <= budget:
        return word
    digest = "~" + hashlib.sha256(raw).hexdigest()[:16]
    keep = raw[: max(budget - len(digest), 0)].decode(errors="ignore")
    return keep + digest


def routing_key(job_namespace: str, job_name: str, event_type: str) -> str:
    """``<namespace>.<name>.<eventType>``, each word sanitized, at most 255 bytes in total."""
    words = [sanitize_word(job_namespace), sanitize_word(job_name), sanitize_word(event_type)]
    key = ".".join(words)
    if len(key.encode()) <= _MAX_KEY_BYTES:
        return key
    # Too long for AMQP: keep the event type whole, share the rest between namespace and name.
    kind = _shorten(words[2], 32)
    budget = _MAX_KEY_BYTES - len(kind.encode()) - 2
    ns = _shorten(words[0], budget // 2)
    name = _shorten(words[1], budget - len(ns.encode()))
    return f"{ns}.{name}.{kind}"


def batch_message_id(event_ids: Iterable[str]) -> str:
    """The id of a batch: a hash of its events' ids in order, so a replayed batch keeps its id."""
    return "batch-" + hashlib.sha256(",".join(event_ids).encode()).hexdigest()[:32]


def _common(values: Sequence[str]) -> str:
    """The shared value, or the distinct values in first-seen order, space-separated."""
    first = values[0]
    if all(v == first for v in values):
        return first
    return " ".join(dict.fromkeys(values))


class _KeyCache:
    """Routing keys of recent jobs; the same few jobs publish again and again."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._keys: dict[tuple[str, str, str], str] = {}

    def get(self, event: EncodedEvent) -> str:
        k = (event.job_namespace, event.job_name, event.event_type)
        key = self._keys.get(k)
        if key is None:
            if len(self._keys) >= self._size:
                self._keys.clear()
            key = self._keys[k] = routing_key(*k)
        return key


_KEYS = _KeyCache()


def _single(event: EncodedEvent) -> OutboundMessage:
    return OutboundMessage(
        routing_key=_KEYS.get(event),
        message_id=event.event_id,
        content_type=JSON_CONTENT_TYPE,
        event_type=event.event_type,
        schema_url=event.schema_url,
        producer=event.producer,
        event_count=1,
        event_ids=None,
        body=event.payload,
    )


def _batch(events: Sequence[EncodedEvent]) -> OutboundMessage:
    if len(events) == 1:
        return _single(events[0])
    types = [e.event_type for e in events]
    kind = types[0] if all(t == types[0] for t in types) else MIXED
    first = events[0]
    ids = [e.event_id for e in events]
    return OutboundMessage(
        routing_key=routing_key(first.job_namespace, first.job_name, kind),
        message_id=batch_message_id(ids),
        content_type=BATCH_CONTENT_TYPE,
        event_type=kind,
        schema_url=_common([e.schema_url for e in events]),
        producer=_common([e.producer for e in events]),
        event_count=len(events),
        event_ids=",".join(ids),
        body=b"[" + b",".join(e.payload for e in events) + b"]",
    )


def build_messages(batch: Sequence[EncodedEvent], events_per_message: int) -> list[OutboundMessage]:
    """One message per event, or (batch mode) per run of up to ``events_per_message`` events.

    Batch mode groups the events of one job together (keeping each job's order), so a batch's
    routing key names its job; its third word is the shared event type or ``MIXED``.
    """
    if events_per_message <= 1:
        return [_single(e) for e in batch]
    groups: dict[tuple[str, str], list[EncodedEvent]] = {}
    for event in batch:
        groups.setdefault((event.job_namespace, event.job_name), []).append(event)
    out: list[OutboundMessage] = []
    for events in groups.values():
        chunk: list[EncodedEvent] = []
        size = 2
        for event in events:
            grow = len(event.payload) + 1
            if chunk and (len(chunk) >= events_per_message or size + grow > MAX_BATCH_BODY_BYTES):
                out.append(_batch(chunk))
                chunk, size = [], 2
            chunk.append(event)
            size += grow
        if chunk:
            out.append(_batch(chunk))
    return out
