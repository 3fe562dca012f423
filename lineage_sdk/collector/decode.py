"""Turning a broker message into validated records, or into a reason it can never succeed.

A message that can never be stored (bad bytes, wrong content type, not an event, too big) must
not be retried: it is a *poison* message and goes to the dead-letter queue at once with a reason.
A batch message may hold good and bad events side by side: the good ones are stored and each bad
one is parked on its own, so one bad event never costs its neighbours.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from lineage_sdk.collector.records import build_record, compute_event_id
from lineage_sdk.collector.store import LineageRecord
from lineage_sdk.exceptions import InvalidEventError
from lineage_sdk.models.codec import MAX_DEPTH, check_ingest_event, content_id, to_json
from lineage_sdk.models.constants import BATCH_CONTENT_TYPE, JSON_CONTENT_TYPE
from lineage_sdk.models.json_exact import dumps_exact, may_have_rounded, may_hold_big_int

__all__ = [
    "BATCH_CONTENT_TYPE",
    "JSON_CONTENT_TYPE",
    "MAX_NESTING_DEPTH",
    "DecodedMessage",
    "PoisonMessage",
    "RejectedEvent",
    "decode_message",
    "validate_event",
]

_ACCEPTED_TYPES = frozenset({JSON_CONTENT_TYPE, BATCH_CONTENT_TYPE, "text/json", ""})
_IDENTITY_ENCODINGS = frozenset({"", "identity", "utf-8", "utf8"})
# Real OpenLineage events nest ~10 levels (schema fields of structs of structs a little more);
# anything this deep is an attack or a bug, and walking it costs the collector's time.
MAX_NESTING_DEPTH = MAX_DEPTH
_CONTAINERS = (dict, list)  # the only container types orjson produces
_TOO_DEEP = f"JSON nests deeper than {MAX_NESTING_DEPTH} levels"


class PoisonMessage(Exception):
    """A message (or one event in it) that can never be stored; ``reason`` is a short code."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}")


@dataclass(frozen=True, slots=True)
class RejectedEvent:
    """One bad event of a batch message: its position, its JSON bytes and why it was refused."""

    index: int
    body: bytes
    reason: str
    detail: str


@dataclass(slots=True)
class DecodedMessage:
    """The good events of a message, and the refused ones with their reasons.

    ``positions[i]`` is the index in the batch of ``records[i]`` (0 for a single event), so an
    event parked later by a store still names its place in the message it came in.
    """

    records: list[LineageRecord] = field(default_factory=list)
    rejected: list[RejectedEvent] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)


def _too_deep(data: Any) -> bool:
    """True if parsed JSON ``data`` nests objects and arrays deeper than MAX_NESTING_DEPTH.

    Walks the tree one level at a time (no recursion), looking only at containers: after orjson
    has parsed the message this costs a fraction of walking its bytes in Python.
    """
    level: list[Any] = [data] if type(data) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_NESTING_DEPTH:
            return True
        deeper: list[Any] = []
        for node in level:
            values = node.values() if type(node) is dict else node
            deeper += [value for value in values if type(value) in _CONTAINERS]
        level = deeper
    return False


def validate_event(
    data: Any, body: bytes | None = None, canonical: bytes | None = None
) -> LineageRecord:
    """Validate one event (parsed JSON) and build its record; raises PoisonMessage if invalid.

    Validation is :func:`lineage_sdk.models.codec.check_ingest_event`: what the stores need, with
    every ``format: uri`` an annotation (issue 14: Spark's ``dataSource.uri`` ``file`` is
    accepted, as Marquez accepts it), decided by a plain-Python check instead of building
    pydantic models (the collector's hot path), with a reason naming the field for a refusal.
    The event is stored exactly as it came.
    ``body``, when given, says that the message it came from was already checked for NUL bytes
    and nesting depth (as :func:`decode_message` does), so the tree walk is skipped.
    ``canonical``, when given, is the event's
    :func:`~lineage_sdk.models.codec.to_json`, already written.
    """
    if not isinstance(data, dict):
        raise PoisonMessage("not_an_event", f"expected a JSON object, got {type(data).__name__}")
    try:
        check_ingest_event(data, tree_checked=body is not None)
        event_id = compute_event_id(data) if canonical is None else content_id(canonical)
        return build_record(data, event_id=event_id)
    except InvalidEventError as exc:
        raise PoisonMessage("invalid_event", str(exc)) from None
    except (ValueError, TypeError) as exc:  # a validator that raised something unexpected
        raise PoisonMessage("invalid_event", str(exc)[:500]) from None


class _Exactly:
    """A message's body read by the standard library's parser, at most once, for the rare event
    in which orjson may have read an integer beyond 64 bits as a float: ``json`` keeps every
    integer exact and reads everything else as orjson does (orjson accepted the body first, so
    its errors and limits stand). Each step is taken once per message, not per event."""

    __slots__ = ("_body", "_data", "_digits")

    def __init__(self, body: bytes) -> None:
        self._body = body
        self._digits: bool | None = None  # None: not looked at yet
        self._data: Any = None

    def differs(self) -> bool:
        """True when the body may hold an integer beyond 64 bits (a run of 19 digits)."""
        if self._digits is None:
            self._digits = may_hold_big_int(self._body)
            if self._digits:
                self._data = json.loads(self._body)
        return self._digits

    def item(self, index: int | None) -> Any:
        """The message (``index`` None) or its batch item ``index``, read exactly (only after
        :meth:`differs` said True)."""
        return self._data if index is None else self._data[index]


def _validated(
    item: Any, index: int | None, body: bytes, exactly: _Exactly | None
) -> LineageRecord:
    """:func:`validate_event` of one event of a message, every integer kept exact.

    orjson writes a float of 1e16 or more with an exponent (``1.8446744073709552e+19``), and
    reads each integer beyond 64 bits as such a float: so only an event whose content-id text
    (written anyway) holds ``e+`` may have lost one (:func:`may_have_rounded`), and only then is
    the body looked at for a run of 19 digits and, if it has one, read again exactly (and the
    event validated as sent: ``2**64`` is an integer wherever the spec asks for one)."""
    if type(item) is not dict:
        return validate_event(item, body)  # not an event: refused
    canonical = to_json(item)
    if may_have_rounded(canonical):
        exactly = exactly or _Exactly(body)  # a single event's message: made only now
        if exactly.differs():
            item = exactly.item(index)
            canonical = to_json(item)
    return validate_event(item, body, canonical)


def _decompress(body: bytes, encoding: str, max_bytes: int) -> bytes:
    if encoding not in ("gzip", "deflate"):
        raise PoisonMessage(
            "unsupported_encoding", f"content encoding {encoding!r} is not supported"
        )
    wbits = 31 if encoding == "gzip" else 15
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise PoisonMessage("undecodable", f"{encoding} body does not decompress: {exc}") from None
    if len(out) > max_bytes or inflater.unconsumed_tail:
        raise PoisonMessage("too_large", f"decompressed body exceeds the {max_bytes}-byte cap")
    return out


def decode_message(
    body: bytes,
    content_type: str | None,
    *,
    content_encoding: str | None = None,
    max_bytes: int = 4 << 20,
) -> DecodedMessage:
    """Decode a single-event (``application/json``) or batch message into records.

    Raises :class:`PoisonMessage` when the whole message is unusable; bad events inside a batch
    come back in ``rejected`` instead. A message without a content type is accepted when its body
    is JSON (many OpenLineage producers leave it unset).
    """
    if len(body) > max_bytes:
        raise PoisonMessage(
            "too_large", f"message of {len(body)} bytes exceeds the {max_bytes}-byte cap"
        )
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media not in _ACCEPTED_TYPES:
        raise PoisonMessage(
            "wrong_content_type",
            f"content type {content_type!r} is not {JSON_CONTENT_TYPE} or {BATCH_CONTENT_TYPE}",
        )
    encoding = (content_encoding or "").strip().lower()
    if encoding not in _IDENTITY_ENCODINGS:
        body = _decompress(body, encoding, max_bytes)
    if not body.strip():
        raise PoisonMessage("undecodable", "message body is empty")
    if b"\x00" in body or b"\\u0000" in body:
        raise PoisonMessage("nul_byte", "message contains a NUL byte")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):  # orjson's own limit (1024 levels), far past ours
            raise PoisonMessage("too_deep", _TOO_DEEP) from None
        raise PoisonMessage("undecodable", f"body is not UTF-8 JSON: {exc}") from None
    # A message with fewer brackets than the limit cannot nest past it: skip the walk.
    if body.count(b"[") + body.count(b"{") > MAX_NESTING_DEPTH and _too_deep(data):
        raise PoisonMessage("too_deep", _TOO_DEEP)
    if media == BATCH_CONTENT_TYPE and not isinstance(data, list):
        raise PoisonMessage("not_a_batch", f"a {BATCH_CONTENT_TYPE} body must be a JSON array")
    if not isinstance(data, list):
        if not isinstance(data, dict):
            raise PoisonMessage(
                "not_an_event", f"JSON {type(data).__name__} is not an event object"
            )
        return DecodedMessage(records=[_validated(data, None, body, None)], positions=[0])
    if not data:
        raise PoisonMessage("not_a_batch", "batch message holds no events")
    decoded = DecodedMessage()
    exactly = _Exactly(body)  # one for the batch: the body is looked at and read once
    for index, item in enumerate(data):
        try:
            # body: its checks (NUL bytes, depth) cover every item
            decoded.records.append(_validated(item, index, body, exactly))
            decoded.positions.append(index)
        except PoisonMessage as exc:
            sent = exactly.item(index) if exactly.differs() else item
            decoded.rejected.append(RejectedEvent(index, dumps_exact(sent), exc.reason, exc.detail))
    return decoded
