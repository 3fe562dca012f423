"""Decoding untrusted events, encoding models, and the content id of an event.

:func:`parse_event` is what the collector runs on every message body from the broker, so it
defends against hostile input cheaply (NUL bytes, nesting bombs, non-object JSON) before pydantic
sees it, decodes once with orjson and validates the resulting dict once, and turns every failure
into one :class:`~lineage_sdk.exceptions.InvalidEventError` with a short reason naming the field.
:func:`check_event` gives the same verdict and reason for an already decoded event without
building a model (see :mod:`lineage_sdk.models.fast`). :func:`check_ingest_event` is the
collector's rule (issue 14, "accept what Marquez accepts"): ``format: uri`` is an annotation,
names must be non-empty, and everything else as :func:`check_event`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from lineage_sdk.exceptions import InvalidEventError
from lineage_sdk.models._base import INGEST_CONTEXT, TOLERANT_CONTEXT
from lineage_sdk.models.constants import PARENT_FACET_KEY
from lineage_sdk.models.events import DatasetEvent, EventType, JobEvent, LineageEvent, RunEvent
from lineage_sdk.models.fast import is_acceptable_event, is_valid_event
from lineage_sdk.models.json_exact import dumps_exact, may_hold_big_int

__all__ = [
    "MAX_DEPTH",
    "AnyEvent",
    "check_event",
    "check_ingest_event",
    "content_id",
    "event_id",
    "event_kind",
    "parse_event",
    "to_dict",
    "to_json",
]

#: Deepest nesting of objects and arrays accepted (a real event nests about 10 levels).
MAX_DEPTH = 64
#: How many validation problems one error message lists before "and N more".
_MAX_REASONS = 3

AnyEvent = RunEvent | DatasetEvent | JobEvent


def event_kind(event: Mapping[str, Any]) -> type[RunEvent] | type[DatasetEvent] | type[JobEvent]:
    """The event class for a decoded event, by the spec's rule (``run`` → RunEvent, ...).

    A RunEvent has ``run``; a DatasetEvent has ``dataset`` (and no ``run``); a JobEvent has
    ``job`` without ``run``.
    """
    if "run" in event:
        return RunEvent
    if "dataset" in event:
        return DatasetEvent
    if "job" in event:
        return JobEvent
    raise InvalidEventError("not an OpenLineage event: it has none of run, dataset or job")


def parse_event(data: bytes | bytearray | memoryview | str | Mapping[str, Any]) -> AnyEvent:
    """Decode and validate one event from JSON bytes, a JSON string or an already decoded mapping.

    Tolerant where the spec's producers differ (an offset-less timestamp is read as UTC, unknown
    keys and facets are kept), strict where a consumer would break (ids, times, URIs, types).
    Raises :class:`InvalidEventError` with a reason such as ``run.runId: not a UUID: 'abc'``.
    """
    if isinstance(data, bytes | bytearray | memoryview | str):
        obj = _decode(data)
    elif isinstance(data, Mapping):
        _check_tree(data)
        obj = data if isinstance(data, dict) else dict(data)
    else:
        kind = type(data).__name__
        raise InvalidEventError(f"not an event: expected JSON bytes, str or a mapping, got {kind}")
    return _validate(obj, TOLERANT_CONTEXT)


def _validate(obj: dict[str, Any], context: dict[str, Any]) -> AnyEvent:
    model = event_kind(obj)
    if "schemaURL" not in obj:  # required by the spec; the model's default is for building only
        raise InvalidEventError("schemaURL: required")
    try:
        return model.model_validate(obj, context=context, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise InvalidEventError(_reason(exc)) from None


def check_event(data: Mapping[str, Any], *, tree_checked: bool = False) -> None:
    """Validate a decoded event exactly as :func:`parse_event` does, without building a model.

    For consumers that only need a verdict (the collector): the fast plain-Python check of
    :mod:`lineage_sdk.models.fast` decides for valid events; anything it does not accept goes
    through :func:`parse_event`, which raises :class:`InvalidEventError` with the same reason as
    ever (or accepts, should the fast check ever be stricter than the models). Pass
    ``tree_checked=True`` when NUL bytes and nesting depth were already ruled out on the raw
    bytes, as the collector does.
    """
    if not isinstance(data, Mapping):
        parse_event(data)  # JSON text, or the error parse_event gives for anything else
        return
    if not tree_checked:
        _check_tree(data)
    if not is_valid_event(data):
        parse_event(data)


def check_ingest_event(data: Any, *, tree_checked: bool = False) -> None:
    """Raise :class:`InvalidEventError` unless the collector should store ``data`` (decoded JSON).

    What the stores need, and the event's shape as the models read it, with every ``format: uri``
    an annotation (JSON Schema's default): ``producer``, ``schemaURL``, facets' ``_producer`` /
    ``_schemaURL`` and ``dataSource.uri`` need only be strings, so the ``file`` and
    ``bigquery`` namespaces of OpenLineage's Spark integration are accepted, as Marquez accepts
    them. Still checked: ``eventType`` from the enum, ``eventTime`` a date-time (offset-less is
    read as UTC, as :func:`parse_event` does), run ids (the event's and its parent's) UUIDs, job
    and dataset namespaces and names non-empty strings. The event itself is not changed.
    The fast check of :mod:`lineage_sdk.models.fast` decides; the models (with
    :data:`~lineage_sdk.models._base.INGEST_CONTEXT`) give the reason for a refusal, naming the
    field (``run.runId: not a UUID: 'x'``). ``tree_checked`` as for :func:`check_event`.
    """
    if not isinstance(data, Mapping):
        parse_event(data)  # JSON text, or the error parse_event gives for anything else
        return
    if not tree_checked:
        _check_tree(data)
    if is_acceptable_event(data):
        return
    _validate(data if isinstance(data, dict) else dict(data), INGEST_CONTEXT)
    reason = _empty_name(data)
    if reason is not None:
        raise InvalidEventError(reason)


def _empty_name(event: Mapping[str, Any]) -> str | None:
    """``<where>: must not be empty`` for the first job or dataset with an empty namespace or name.

    Only asked once the models accepted the event, so every object on the way has its shape.
    Parent facets are followed as the fast check follows them (``parent.run.facets`` may hold a
    parent again).
    """
    named: list[tuple[str, Any]] = [("job", event.get("job")), ("dataset", event.get("dataset"))]
    for role in ("inputs", "outputs"):
        named += [(f"{role}[{i}]", item) for i, item in enumerate(event.get(role) or ())]
    runs: list[tuple[str, Any]] = [("run", event.get("run"))]
    while runs:
        where, run = runs.pop(0)
        parent = _facet(run, PARENT_FACET_KEY)
        if parent is None:
            continue
        where = f"{where}.facets.{PARENT_FACET_KEY}"
        named.append((f"{where}.job", parent.get("job")))
        runs.append((f"{where}.run", parent.get("run")))
        root = parent.get("root")
        if isinstance(root, Mapping):
            named.append((f"{where}.root.job", root.get("job")))
            runs.append((f"{where}.root.run", root.get("run")))
    for where, item in named:
        if isinstance(item, Mapping):
            for key in ("namespace", "name"):
                if item.get(key) == "":
                    return f"{where}.{key}: must not be empty"
    return None


def _facet(run: Any, key: str) -> Mapping[str, Any] | None:
    facets = run.get("facets") if isinstance(run, Mapping) else None
    facet = facets.get(key) if isinstance(facets, Mapping) else None
    return facet if isinstance(facet, Mapping) else None


def to_dict(event: LineageEvent) -> dict[str, Any]:
    """The event as a JSON-ready dict, spelled as on the wire, with exactly the keys it was given.

    Lossless for parsed events: unknown keys and facets come back unchanged. Times come back in
    RFC 3339 with an offset (``Z`` for UTC), and run ids in lowercase canonical form.
    """
    return event.model_dump(mode="json", by_alias=True, exclude_unset=True)


def to_json(event: LineageEvent | Mapping[str, Any]) -> bytes:
    """Sorted-key JSON bytes: the wire form (equal events give equal bytes, hence equal ids)."""
    data = to_dict(event) if isinstance(event, LineageEvent) else _as_dict(event)
    return dumps_exact(data, option=orjson.OPT_SORT_KEYS)  # integers beyond 64 bits too


def event_id(event: LineageEvent | Mapping[str, Any]) -> str:
    """The content id of an event: 32 hex chars = the first 128 bits of SHA-256.

    Defined as ``sha256(orjson.dumps(event, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]`` over
    the event *as a JSON mapping* (an integer beyond 64 bits, which orjson refuses, written as
    its decimal text: :func:`~lineage_sdk.models.json_exact.dumps_exact`). The SDK's payload
    bytes are that serialization, and decoding and re-encoding orjson's own output is
    byte-stable, so ``event_id(orjson.loads(payload))`` is the hash of the payload as sent
    (``loads_exact`` when it holds such an integer). It is not the AMQP ``message_id``
    (``EncodedEvent.event_id``, which names a RunEvent by run id, event type and time); the
    stores key on this content id. Key order does not matter. Compute it on the decoded
    mapping, not on a model: a model normalises times (``.001Z`` becomes ``.001000Z``), which
    changes the bytes. A model is accepted for events built in Python, and hashed via
    :func:`to_dict`.
    """
    return content_id(to_json(event))


def content_id(wire: bytes) -> str:
    """The content id of the event whose :func:`to_json` is ``wire`` (for a caller that wrote
    those bytes already)."""
    return hashlib.sha256(wire).hexdigest()[:32]


# ---------------------------------------------------------------------------------------------


def _as_dict(event: Mapping[str, Any]) -> dict[str, Any]:
    return event if isinstance(event, dict) else dict(event)


def _decode(raw: bytes | bytearray | memoryview | str) -> dict[str, Any]:
    """orjson-decode ``raw`` after cheap checks; precise checks only when the cheap ones can't tell.

    ``{`` + ``[`` counts bound the nesting depth from above (brackets inside strings only make
    the bound looser), so a typical event skips the depth walk entirely.
    """
    if isinstance(raw, str):
        has_nul = "\x00" in raw
        maybe_escaped_nul = "\\u0000" in raw
        brackets = raw.count("{") + raw.count("[")
    else:
        if not isinstance(raw, bytes):
            raw = bytes(raw)
        has_nul = b"\x00" in raw
        maybe_escaped_nul = b"\\u0000" in raw
        brackets = raw.count(b"{") + raw.count(b"[")
    if has_nul:
        raise InvalidEventError("contains NUL bytes")
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc) or "recursion" in str(exc):
            raise InvalidEventError(f"nesting deeper than {MAX_DEPTH} levels") from None
        raise InvalidEventError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise InvalidEventError(f"not a JSON object: got {_json_type(obj)}")
    if brackets > MAX_DEPTH or maybe_escaped_nul:
        _check_tree(obj)
    if may_hold_big_int(raw):  # orjson read an integer beyond 64 bits as a float: read it exactly
        exact: dict[str, Any] = json.loads(raw)
        return exact
    return obj


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def _check_tree(root: Mapping[str, Any]) -> None:
    """Reject nesting deeper than :data:`MAX_DEPTH` and NUL characters, without recursion."""
    stack: list[tuple[Any, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidEventError(f"nesting deeper than {MAX_DEPTH} levels")
        if isinstance(node, Mapping):
            for key, value in node.items():
                if isinstance(key, str) and "\x00" in key:
                    raise InvalidEventError("contains NUL bytes")
                if isinstance(value, str):
                    if "\x00" in value:
                        raise InvalidEventError("contains NUL bytes")
                elif isinstance(value, Mapping | list | tuple):
                    stack.append((value, depth + 1))
        elif isinstance(node, list | tuple):
            for value in node:
                if isinstance(value, str):
                    if "\x00" in value:
                        raise InvalidEventError("contains NUL bytes")
                elif isinstance(value, Mapping | list | tuple):
                    stack.append((value, depth + 1))


_EVENT_TYPES = ", ".join(member.value for member in EventType)


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


_TYPE_MESSAGES = {
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "dict_type": "must be an object",
    "list_type": "must be an array",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_from_float": "must be an integer",
    "bool_type": "must be a boolean",
    "missing": "required",
}


def _message(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind == "value_error":
        return error["msg"].removeprefix("Value error, ")
    if kind == "enum":
        return f"must be one of {_EVENT_TYPES}, got {_short(error.get('input'))}"
    if kind == "string_pattern_mismatch":
        pattern = (error.get("ctx") or {}).get("pattern", "")
        return f"must match {pattern}, got {_short(error.get('input'))}"
    fixed = _TYPE_MESSAGES.get(kind)
    if fixed is not None:
        if kind == "missing":
            return fixed
        return f"{fixed}, got {_short(error.get('input'))}"
    return f"{error['msg']}, got {_short(error.get('input'))}"


def _reason(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    parts = []
    for error in errors[:_MAX_REASONS]:
        where = _location(error["loc"])
        message = _message(error)
        parts.append(f"{where}: {message}" if where else message)
    if len(errors) > _MAX_REASONS:
        parts.append(f"and {len(errors) - _MAX_REASONS} more")
    return "; ".join(parts)
