"""Turning one validated event into a :class:`LineageRecord`, once, on the collector.

Every store needs the same few facts (ids, job, parent, datasets, a real timestamp); extracting
them here means each store neither parses nor interprets the event again. The input is the event
as plain JSON data (validated beforehand by :func:`lineage_sdk.models.codec.check_ingest_event`),
so unknown facets pass through untouched in ``record.event``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, Literal

from lineage_sdk.collector.store import DatasetRef, EventKind, LineageRecord
from lineage_sdk.collector.symlinks import canonical
from lineage_sdk.exceptions import InvalidEventError

#: The content identity of an event (the stores key on it): :func:`lineage_sdk.models.event_id`,
#: one definition for the SDK and every path into the stores. It is not the AMQP
#: ``message_id``, which names a RunEvent by run id, event type and time (docs/architecture.md).
from lineage_sdk.models.codec import event_id as compute_event_id
from lineage_sdk.models.run_state import TERMINAL_STATES, StateKey

__all__ = [
    "EPOCH",
    "MICROSECOND",
    "TERMINAL_STATES",
    "build_record",
    "compute_event_id",
    "format_time",
    "from_micros",
    "json_object",
    "micros",
    "parse_event_time",
    "parse_time",
    "state_rank",
    "state_rank_time",
    "utc",
]

#: The resolution of every stored time: the step from a time to the next one a store tells
#: apart (an exclusive bound one step on is an inclusive one).
MICROSECOND = timedelta(microseconds=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc(value: datetime) -> datetime:
    """``value`` in UTC (a naive time taken as UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def micros(value: datetime) -> int:
    """A time as integer microseconds since the epoch: exact to the microsecond every stored
    time holds, ordered as the times are, and a number where a server's index orders numbers
    but not texts (a BSON date keeps milliseconds; FalkorDB's text ranges, stores/falkordb.py)."""
    return (utc(value) - EPOCH) // MICROSECOND


def from_micros(us: int) -> datetime:
    """The UTC time :func:`micros` gave ``us`` for."""
    return EPOCH + timedelta(microseconds=us)


def format_time(value: datetime) -> str:
    """Fixed-width UTC text that sorts like the instant it names (naive values are taken as UTC):
    what stores keep a time as where a server has no exact temporal type (microseconds, any
    year), so that a text comparison or a ``$max`` orders times."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    v = value.astimezone(UTC)
    return (
        f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}"
        f".{v.microsecond:06d}Z"
    )


def parse_time(value: str | None) -> datetime | None:
    """The instant :func:`format_time` wrote (None for None or empty text)."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def state_rank(key: StateKey) -> str:
    """A run state's ``state_key`` as text that sorts like the tuple: a one-digit rank,
    fixed-width time, state names that differ in their first letter among equal ranks, then
    the event id; so a store keeps a run's state with a ``max``."""
    rank, when, state, event_id = key
    return f"{rank}|{format_time(when)}|{state}|{event_id}"


def state_rank_time(rank: object) -> datetime | None:
    """The time inside a :func:`state_rank` text: the winning state event's time."""
    if not isinstance(rank, str):
        return None
    parts = rank.split("|")
    return parse_time(parts[1]) if len(parts) > 1 else None


def parse_event_time(value: Any) -> datetime:
    """``eventTime`` as an aware datetime (UTC when the text has no offset).

    Raises :class:`InvalidEventError` when the value is not an ISO-8601 date-time.
    """
    if not isinstance(value, str) or not value:
        raise InvalidEventError(f"eventTime must be an ISO-8601 date-time string, got {value!r}")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidEventError(f"eventTime is not an ISO-8601 date-time: {value[:80]!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


_NO_OBJECT: Mapping[str, Any] = MappingProxyType({})


def json_object(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a JSON object (a dict, or any mapping), else an empty, read-only one:
    how a read goes down nested facets without a check at every level. The exact type tests
    come first (decoded JSON is a plain dict, an absent member None): ``isinstance(...,
    Mapping)`` goes through the ABC machinery, a third of the watch's noticing CPU when it did."""
    if type(value) is dict:
        return value
    if value is None:
        return _NO_OBJECT
    return value if isinstance(value, Mapping) else _NO_OBJECT


def _map(value: Any) -> Mapping[str, Any] | None:
    """``value`` if it is a JSON object (a dict, or any mapping), else None.

    The ``type(...) is dict`` test first: decoded JSON is always a plain dict, and the abstract
    ``Mapping`` check costs ten times as much on the collector's hot path.
    """
    if type(value) is dict or isinstance(value, Mapping):
        return value
    return None


def _kind(event: Mapping[str, Any]) -> EventKind:
    if _map(event.get("run")) is not None:
        return "run"
    if _map(event.get("dataset")) is not None:
        return "dataset"
    if _map(event.get("job")) is not None:
        return "job"
    raise InvalidEventError("event has none of run, job or dataset")


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _datasets(value: Any, role: Literal["input", "output"]) -> tuple[DatasetRef, ...]:
    if not isinstance(value, list) or not value:
        return ()
    refs: list[DatasetRef] = []
    for item in value:
        if _map(item) is None:
            continue
        namespace, name = item.get("namespace"), item.get("name")
        if not isinstance(namespace, str) or not isinstance(name, str):
            continue
        facets = _map(item.get("facets"))
        namespace, name = canonical(namespace, name, facets)  # symlinks: one name per dataset
        refs.append(DatasetRef(namespace, name, dict(facets) if facets else {}, role))
    return tuple(refs)


def build_record(event: Mapping[str, Any], *, event_id: str | None = None) -> LineageRecord:
    """Extract the facts stores index on from a validated event (RunEvent, DatasetEvent, JobEvent).

    ``event_id`` may be passed when already known (computed otherwise). A DatasetEvent's dataset
    is given as the record's single output: it is the dataset the event is about, and stores
    register it like any written dataset (there is no run, so no run edges follow).
    """
    data = event if type(event) is dict else dict(event)
    kind = _kind(data)
    raw_time = data.get("eventTime")
    event_time = parse_event_time(raw_time)
    run = _map(data.get("run")) if kind == "run" else None
    job = _map(data.get("job"))
    run_id = _str_or_none(run.get("runId")) if run is not None else None
    parent_run_id = parent_ns = parent_name = root_run_id = None
    if run is not None:
        facets = _map(run.get("facets"))
        parent = _map(facets.get("parent")) if facets else None
        if parent is not None:
            prun, pjob = _map(parent.get("run")), _map(parent.get("job"))
            root = _map(parent.get("root"))
            if prun is not None:
                parent_run_id = _str_or_none(prun.get("runId"))
            if pjob is not None:
                parent_ns = _str_or_none(pjob.get("namespace"))
                parent_name = _str_or_none(pjob.get("name"))
            root_run = _map(root.get("run")) if root is not None else None
            if root_run is not None:
                root_run_id = _str_or_none(root_run.get("runId"))
    if kind == "dataset":
        inputs: tuple[DatasetRef, ...] = ()
        outputs = _datasets([data["dataset"]], "output")
    else:
        inputs = _datasets(data.get("inputs"), "input")
        outputs = _datasets(data.get("outputs"), "output")
    event_type = data.get("eventType")
    return LineageRecord(
        event_id=event_id or compute_event_id(data),
        event=data,
        kind=kind,
        event_type=event_type if isinstance(event_type, str) else None,
        event_time=event_time,
        event_time_raw=str(raw_time),
        run_id=run_id,
        job_namespace=_str_or_none(job.get("namespace")) if job else None,
        job_name=_str_or_none(job.get("name")) if job else None,
        parent_run_id=parent_run_id,
        parent_job_namespace=parent_ns,
        parent_job_name=parent_name,
        root_run_id=root_run_id,
        inputs=inputs,
        outputs=outputs,
        producer=str(data.get("producer", "")),
    )
