"""What an event states of a dataset, as one small row, so a dataset's reads fold rows, not events.

A dataset's Marquez object and versions depend on every event that names it: its facets are
each facet's latest value, its times the least and greatest event time, its versions a fold in
event order (:mod:`lineage_sdk.collector.api.marquez_events` gives the rules). Folding the events
themselves reads and parses every event of every run that touched the dataset: 10,000 events of
about 4 KB for a dataset written by 5,000 runs, 1.0 s of reads and parsing before the fold.

So each event that names a dataset (a run event among its inputs or outputs, a DatasetEvent as
its dataset; not a JobEvent, which the dataset's reads never fold) gets one ``stated`` mention
of it (:class:`~lineage_sdk.collector.backend.MentionRow`, sourced by the event, so it goes with
the event on ``delete`` and needs no re-derivation), whose ``detail`` holds what the fold needs:
whether the event writes the dataset and completes its run, its run, the version key it gives
the dataset, the names of the facets its entries carry and the other names it gives it. A read
folds those rows in event order and reads only the events that carry each facet's latest value
(:func:`carriers`).

A job's reads fold its events the same way (its facets, parent, times, and the version each run
gives it from its inputs, outputs and location), so each event of a job (a run event, or a
JobEvent, flagged ``j``: a job's object folds them, its versions do not) states it too
(:class:`JobStatement`).

A version key from a ``schema`` facet is a hash of its fields as :func:`entry_key` writes them
(``json.dumps``, 20 us for ten fields); a statement holds a fingerprint made by orjson instead
(2.7 us), equal exactly when the fields are, which :meth:`Engine.dataset_statements
<lineage_sdk.collector.engine.Engine.dataset_statements>` maps to the key by reading one event
per fingerprint, and :func:`stated_timeline` names versions by.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import orjson

from lineage_sdk.collector.backend import Key, MentionRow
from lineage_sdk.collector.records import json_object
from lineage_sdk.collector.store import LineageRecord
from lineage_sdk.collector.symlinks import entry_name

__all__ = [
    "FINGERPRINT",
    "JobStatement",
    "StatedVersion",
    "Statement",
    "carriers",
    "entry_key",
    "event_key",
    "event_order",
    "job_order",
    "job_statement",
    "job_statement_of",
    "latest_location",
    "stated_timeline",
    "statement_of",
    "statements_of",
    "version_facet",
]

#: The prefix of a fingerprinted ``schema`` key (see the module docstring).
FINGERPRINT = "fields:"


def version_facet(facets: Mapping[str, Any]) -> str | None:
    """The ``datasetVersion`` of an entry's ``version`` facet."""
    value = json_object(facets.get("version")).get("datasetVersion")
    return value if isinstance(value, str) and value else None


def _schema_key(fields: list[Any]) -> str:
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return f"schema:{hashlib.sha256(text.encode()).hexdigest()[:32]}"


def _fingerprint(fields: list[Any]) -> str:
    """A schema's fields as a statement keys them (see the module docstring)."""
    try:
        text = orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer beyond 64 bits: the key itself
        return _schema_key(fields)
    return FINGERPRINT + hashlib.sha256(text).hexdigest()[:32]


def _facets_key(facets: Mapping[str, Any], fields_key: Callable[[list[Any]], str]) -> str | None:
    """An entry's ``version`` facet, else its schema's fields as ``fields_key`` keys them."""
    version = version_facet(facets)
    if version is not None:
        return f"version:{version}"
    fields = json_object(facets.get("schema")).get("fields")
    return fields_key(fields) if isinstance(fields, list) and fields else None


def entry_key(entry: Mapping[str, Any]) -> str | None:
    """The content key of one dataset entry: its ``version`` facet, else its schema's hash."""
    return _facets_key(json_object(entry.get("facets")), _schema_key)


def event_key(event: Mapping[str, Any], namespace: str, name: str) -> str | None:
    """The key an event gives the dataset: what it wrote, else its DatasetEvent, else its read."""
    for section in ("outputs", "dataset", "inputs"):
        items = event.get(section)
        for item in items if isinstance(items, list) else [items]:
            item = json_object(item)
            if entry_name(item) == (namespace, name):
                key = entry_key(item)
                if key is not None:
                    return key
    return None


def statements_of(rec: LineageRecord, aliases: Mapping[Key, Key]) -> dict[Key, str]:
    """Each dataset the event names, with its statement encoded (a ``stated`` mention's
    ``detail``); none for a JobEvent. ``aliases``: the event's other names (derive's). The key
    is :func:`event_key`'s: the first of its written (or DatasetEvent) entries, else of its
    read ones, that gives one."""
    if rec.kind == "job":
        return {}
    done = "c" if rec.event_type == "COMPLETE" else ""
    found: dict[Key, list[Any]] = {}  # [flags, key, facet names]
    for refs, flags in (
        (rec.outputs, ("w" if rec.kind == "run" else "") + done),
        (rec.inputs, done),
    ):
        for ref in refs:
            stated = found.get((ref.namespace, ref.name))
            if stated is None:
                found[(ref.namespace, ref.name)] = [
                    flags,
                    _facets_key(ref.facets, _fingerprint),
                    list(ref.facets),
                ]
                continue
            if stated[1] is None:
                stated[1] = _facets_key(ref.facets, _fingerprint)
            stated[2] += [f for f in ref.facets if f not in stated[2]]
    run_id = rec.run_id or None
    out: dict[Key, str] = {}
    for dataset, (flags, key, facets) in found.items():
        other = sorted(a for a, node in aliases.items() if node == dataset) if aliases else []
        out[dataset] = orjson.dumps([run_id, flags, key, facets, other]).decode()
    return out


class Statement(NamedTuple):
    """What one event states of a dataset (see the module docstring). A tuple: a dataset's
    reads decode thousands (made by ``_make`` in C, a third of a dataclass's cost)."""

    at: datetime
    event_id: str
    run_id: str | None
    #: ``w``: the event writes the dataset (names it among its outputs); ``c``: it is a COMPLETE.
    flags: str
    key: str | None
    facets: list[str]
    #: The other names the event gives the dataset, as ``[namespace, name]`` pairs.
    aliases: list[list[str]]

    @property
    def writes(self) -> bool:
        return "w" in self.flags

    @property
    def completes(self) -> bool:
        return "c" in self.flags

    @property
    def describes(self) -> bool:
        """Whether it sets the dataset's current version: a write or a DatasetEvent."""
        return self.run_id is None or "w" in self.flags


def statement_of(row: MentionRow) -> Statement:
    """A ``stated`` mention decoded."""
    return Statement._make((row.first_seen, row.source_id, *orjson.loads(row.detail or "[]")))


def job_statement_of(rec: LineageRecord) -> str | None:
    """The statement an event makes of its own job, encoded; None without a job."""
    if rec.job_namespace is None or rec.job_name is None:
        return None
    job = rec.event.get("job")
    facets = json_object(job.get("facets") if isinstance(job, Mapping) else None)
    location = None
    if "sourceCodeLocation" in facets:
        url = json_object(facets["sourceCodeLocation"]).get("url")
        location = [url if isinstance(url, str) else None]
    parent = None
    if rec.parent_job_namespace and rec.parent_job_name:
        parent = [rec.parent_job_namespace, rec.parent_job_name]
    inputs = sorted({(r.namespace, r.name) for r in rec.inputs})
    outputs = sorted({(r.namespace, r.name) for r in rec.outputs})
    flags = "j" if rec.kind == "job" else ""
    detail = [rec.run_id or None, flags, list(facets), parent, inputs, outputs, location]
    return orjson.dumps(detail).decode()


class JobStatement(NamedTuple):
    """What one event states of its own job (see the module docstring)."""

    at: datetime
    event_id: str
    run_id: str | None
    #: ``j``: a JobEvent.
    flags: str
    facets: list[str]
    #: The job its ``parent`` run facet names, ``[namespace, name]``.
    parent: list[str] | None
    inputs: list[list[str]]
    outputs: list[list[str]]
    #: ``[url]`` (url None when not text) when its job facets hold ``sourceCodeLocation``.
    location: list[str | None] | None

    @property
    def static(self) -> bool:
        return "j" in self.flags


def job_statement(row: MentionRow) -> JobStatement:
    """A ``stated`` mention of a job decoded."""
    return JobStatement._make((row.first_seen, row.source_id, *orjson.loads(row.detail or "[]")))


def job_order(s: JobStatement) -> tuple[datetime, bool, str]:
    """The order a job's object folds its events in: by time, its run events before its
    JobEvents at one time (``marquez_events.merge_events``), then by event id."""
    return (s.at, s.static, s.event_id)


@dataclass(slots=True)
class StatedVersion:
    """One content version of a dataset and the statements that belong to it, oldest first."""

    key: str
    statements: list[Statement]


def stated_timeline(
    statements: Iterable[Statement], keys: Mapping[str, str]
) -> tuple[list[StatedVersion], str | None]:
    """A dataset's versions (oldest first) and its current version's key, from its statements
    in event order, by the rules of ``marquez_events`` (its ``_timeline``): an event belongs to
    the version its key names, or, without one, to the current version (the unkeyed version
    when there is none yet); the current version is that of the latest write or DatasetEvent,
    of the latest read while there is neither. ``keys``: the version key of each fingerprint
    (one to one, so the fold is the same on either)."""
    versions: dict[str, StatedVersion] = {}
    current: str | None = None
    settled = False
    for s in statements:
        key = s.key if s.key is not None else (current or "")
        version = versions.get(key)
        if version is None:
            version = versions[key] = StatedVersion(keys.get(key, key), [])
        version.statements.append(s)
        if s.describes or not settled:
            current, settled = key, settled or s.describes
    return list(versions.values()), None if current is None else keys.get(current, current)


def carriers(statements: Sequence[Statement | JobStatement]) -> list[str]:
    """The events that carry each facet's latest value among ``statements`` (in event order),
    in that order: merging their entries oldest first gives the facets merging every
    statement's event would, as each facet's last writer is among them."""
    latest: dict[str, int] = {}
    for i, s in enumerate(statements):
        for facet in s.facets:
            latest[facet] = i
    return [statements[i].event_id for i in sorted(set(latest.values()))]


def latest_location(statements: Iterable[JobStatement]) -> str | None:
    """The ``sourceCodeLocation`` url the merged job facets of these statements' events hold."""
    found = None
    for s in statements:
        if s.location is not None:
            found = s.location[0]
    return found


def event_order(s: Statement) -> tuple[datetime, bool, str]:
    """The order a dataset's reads fold its events in: by time, its runs' events before its
    DatasetEvents at one time (``marquez_events.merge_events``), then by event id."""
    return (s.at, s.run_id is None, s.event_id)
