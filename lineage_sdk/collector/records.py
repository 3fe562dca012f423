"""Turning one validated event into a :class:`LineageRecord`, once, on the collector.

Every store needs the same few facts (ids, job, parent, datasets, a real timestamp); extracting
them here means each store neither parses nor interprets the event again. The input is the event
as plain JSON data (validated beforehand by :func:`lineage_sdk.models.parse_event`), so unknown
facets pass through untouched in ``record.event``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

from lineage_sdk.collector.store import DatasetRef, EventKind, LineageRecord
from lineage_sdk.exceptions import InvalidEventError

__all__ = ["TERMINAL_STATES", "build_record", "compute_event_id", "parse_event_time"]

# Run states after which nothing else is expected; they outrank START/RUNNING whatever the order.
TERMINAL_STATES = frozenset({"COMPLETE", "FAIL", "ABORT"})


def compute_event_id(event: Mapping[str, Any]) -> str:
    """The content identity of an event: first 32 hex chars of sha256 over sorted-key JSON.

    The same definition as :func:`lineage_sdk.models.event_id` and the SDK's ``encode_event``,
    so the id the exporter put in ``message_id`` and the id a store keys on agree.
    """
    return hashlib.sha256(orjson.dumps(event, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


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


def _kind(event: Mapping[str, Any]) -> EventKind:
    if isinstance(event.get("run"), Mapping):
        return "run"
    if isinstance(event.get("dataset"), Mapping):
        return "dataset"
    if isinstance(event.get("job"), Mapping):
        return "job"
    raise InvalidEventError("event has none of run, job or dataset")


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _datasets(value: Any, role: Literal["input", "output"]) -> tuple[DatasetRef, ...]:
    if not isinstance(value, list):
        return ()
    refs: list[DatasetRef] = []
    for item in value:
        if not isinstance(item, Mapping):
            continue
        namespace, name = item.get("namespace"), item.get("name")
        if not isinstance(namespace, str) or not isinstance(name, str):
            continue
        facets = item.get("facets")
        refs.append(
            DatasetRef(namespace, name, dict(facets) if isinstance(facets, Mapping) else {}, role)
        )
    return tuple(refs)


def build_record(event: Mapping[str, Any], *, event_id: str | None = None) -> LineageRecord:
    """Extract the facts stores index on from a validated event (RunEvent, DatasetEvent, JobEvent).

    ``event_id`` may be passed when already known (computed otherwise). A DatasetEvent's dataset
    is given as the record's single output: it is the dataset the event is about, and stores
    register it like any written dataset (there is no run, so no run edges follow).
    """
    data = event if isinstance(event, dict) else dict(event)
    kind = _kind(data)
    raw_time = data.get("eventTime")
    event_time = parse_event_time(raw_time)
    run = data.get("run") if kind == "run" else None
    job = data.get("job") if isinstance(data.get("job"), Mapping) else None
    run_id = _str_or_none(run.get("runId")) if isinstance(run, Mapping) else None
    parent_run_id = parent_ns = parent_name = root_run_id = None
    if isinstance(run, Mapping):
        facets = run.get("facets")
        parent = facets.get("parent") if isinstance(facets, Mapping) else None
        if isinstance(parent, Mapping):
            prun, pjob, root = parent.get("run"), parent.get("job"), parent.get("root")
            if isinstance(prun, Mapping):
                parent_run_id = _str_or_none(prun.get("runId"))
            if isinstance(pjob, Mapping):
                parent_ns = _str_or_none(pjob.get("namespace"))
                parent_name = _str_or_none(pjob.get("name"))
            if isinstance(root, Mapping) and isinstance(root.get("run"), Mapping):
                root_run_id = _str_or_none(root["run"].get("runId"))
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
