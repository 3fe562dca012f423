"""What an event states of a dataset, as one small row, so a dataset's reads fold rows, not events.

A dataset's Marquez object and versions depend on every event that names it: its facets are
each facet's latest value, its times the least and greatest event time, its versions a fold in
event order (:mod:`lineage_sdk.collector.api.marquez_events` gives the rules). Folding the events
themselves reads and parses every event of every run that touched the dataset: 10,000 events of
about 4 KB for a dataset written by 5,000 runs, 1.0 s of reads and parsing before the fold.

So each event that names a dataset (a run event among its inputs or outputs, a DatasetEvent as
its dataset; not a JobEvent, which the dataset's reads never fold) makes one *statement* of it,
an entry of a mention's ``detail`` (:class:`~lineage_sdk.collector.backend.MentionRow`): whether
the event writes the dataset and completes its run, its run, the version key it gives the
dataset, the names of the facets its entries carry and the other names it gives it. A read
folds the statements in event order and reads only the events that carry each facet's latest
value (:func:`carriers`).

**Packed by run.** A run's lifecycle events (START and its end: COMPLETE, FAIL, ABORT) put
their statements of a dataset in the run's mentions of it (role ``input``, ``output``; a
DatasetEvent in its ``dataset`` mention), whose ``detail`` is the set of their entries (merged
by union) and which are renewed with the run: a statement costs no row of its own, and a backend
writes it where it writes the run's mention of the dataset anyway. Every other run event
(RUNNING, untyped) states apart, in a ``stated`` mention sourced by the event, so a long run's
heartbeats never grow one row; ``delete`` takes those with their event. A dataset's reads take
the entries of all these mentions (a START that reads and writes a dataset puts one entry in
both mentions: the set holds it once).

A job's reads fold its events the same way (its facets, parent, times, and the version each run
gives it from its inputs, outputs and location), so each event of a job (a run event, or a
JobEvent, flagged ``j``: a job's object folds them, its versions do not) states it too
(:class:`JobStatement`), in a ``stated`` mention of the job: one of (run, job) for a START or
end, one of (event, job) for any other event.

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
from lineage_sdk.collector.records import format_time, json_object
from lineage_sdk.collector.store import LineageRecord
from lineage_sdk.collector.symlinks import entry_name

__all__ = [
    "FINGERPRINT",
    "PACKED_TYPES",
    "JobStatement",
    "StatedVersion",
    "Statement",
    "carriers",
    "entry_key",
    "event_key",
    "event_order",
    "job_order",
    "job_statements",
    "latest_location",
    "stated_timeline",
    "statements",
    "statements_of",
    "version_facet",
]

#: The prefix of a fingerprinted ``schema`` key (see the module docstring).
FINGERPRINT = "fields:"
#: The event types whose statements a run packs in one mention a node (see the module).
PACKED_TYPES = frozenset({"START", "COMPLETE", "FAIL", "ABORT"})


def _head(rec: LineageRecord) -> list[Any]:
    """What every entry of an event begins with: the event, its time (``format_time``'s text,
    which ``datetime.fromisoformat`` reads back in a fifth of a ``timedelta`` sum) and run."""
    return [rec.event_id, format_time(rec.event_time), rec.run_id or None]


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


def statements_of(
    rec: LineageRecord, aliases: Mapping[Key, Key]
) -> tuple[dict[Key, str], str | None]:
    """Each dataset the event names, with its statement encoded (an entry of a ``stated``
    mention's ``detail``); none for a JobEvent. ``aliases``: the event's other names (derive's).
    The key is :func:`event_key`'s: the first of its written (or DatasetEvent) entries, else of
    its read ones, that gives one. And the statement it makes of its job (None without one)."""
    head = _head(rec)
    if rec.kind == "job":
        return {}, _job_statement(rec, head)
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
    out: dict[Key, str] = {}
    for dataset, (flags, key, facets) in found.items():
        other = sorted(a for a, node in aliases.items() if node == dataset) if aliases else []
        out[dataset] = orjson.dumps([*head, flags, key, facets, other]).decode()
    return out, _job_statement(rec, head)


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


def statements(rows: Iterable[MentionRow], until: datetime | None = None) -> list[Statement]:
    """The statements a dataset's mentions hold, those before ``until`` only."""
    return _decoded(Statement, rows, until)


def _decoded(cls: Any, rows: Iterable[MentionRow], until: datetime | None) -> list[Any]:
    """Each entry of the rows once (an entry may be in two mentions: see the module)."""
    out = []
    for text in {text for row in rows for text in row.detail or ()}:
        event_id, at, *rest = orjson.loads(text)
        when = datetime.fromisoformat(at)
        if until is None or when < until:
            out.append(cls._make((when, event_id, *rest)))
    return out


def _job_statement(rec: LineageRecord, head: list[Any]) -> str | None:
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
    return orjson.dumps([*head, flags, list(facets), parent, inputs, outputs, location]).decode()


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


def job_statements(rows: Iterable[MentionRow], until: datetime | None = None) -> list[JobStatement]:
    """The statements a job's mentions hold, those before ``until`` only."""
    return _decoded(JobStatement, rows, until)


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
