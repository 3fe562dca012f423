"""Marquez's richer shapes (datasets with fields, versions, facets, sources, tags), folded from raw
OpenLineage events.

The engine hands back raw events (:meth:`~lineage_sdk.collector.engine.Engine.events_of_dataset`
and its siblings) and every rule lives here, so every backend answers alike. A job's and a
dataset's own reads (the object and its versions) fold their statements instead
(:mod:`lineage_sdk.collector.engine.statements`: a small row per event, and the few events that
carry each facet's latest value), by the same rules through the same builders;
``tests/stores_nosql/test_stated_reads.py`` holds the two folds equal. The rules follow what
Marquez derives from the same events:

- a **dataset version** is keyed on content, never on the run: the ``datasetVersion`` of the
  dataset's ``version`` facet when an event gives one, else a hash of its ``schema`` facet's
  fields, else nothing. Every event naming the dataset (run inputs and outputs, DatasetEvents)
  belongs to the version its own key names, or, without a key, to the current version (the
  unkeyed version when there is none yet): a dataset with neither facet has one version. The
  current version is the one of the latest write or DatasetEvent (of the latest read while there
  is neither): reading an older version does not make it current. A write's key wins over a
  read's in one event. Its id is a UUID derived from the dataset and the key, so it is stable
  across calls, stores and arrival order;
- a **job version** is the job's identity with its inputs, outputs and source location: runs
  that agree on those share a version (Marquez's rule), id again a derived UUID;
- **fields** come from the latest ``schema`` facet, **facets** are merged oldest first so the latest
  value of each facet wins;
- a **source** is what the ``dataSource`` facets of the datasets' entries name (Marquez's
  ``OpenLineageDao``): one per name, ``connectionUrl`` the ``uri`` of the latest entry naming it,
  and ``default`` (no URI) for the entries without the facet; each typed ``POSTGRESQL``, as
  Marquez types every source it makes of an event (``getSourceType``). A dataset's
  ``sourceName`` is the latest ``dataSource`` facet it was sent with, else ``default`` (Marquez
  keeps the first source it saw a dataset with; the latest is what the producer says now);
- **tags** are the two Marquez creates at start-up (tags are only ever added through Marquez's
  write API, which this collector does not offer);
- a run's **upstream lineage** reads each input at the version made by the latest run that wrote
  the dataset and completed at or before the run started (or, when the input carries a
  ``version`` facet, by the writer whose output carried that version), and walks on through
  those producing runs; the version id is the one the dataset's versions read serves (an input's
  own ``version`` facet names its version even when no known run wrote it).
"""

from __future__ import annotations

import functools
import heapq
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lineage_sdk.collector.api.marquez import iso, run_from_events
from lineage_sdk.collector.engine.derive import DEFAULT_SOURCE
from lineage_sdk.collector.engine.reads import NodeFacts, SourceUse
from lineage_sdk.collector.engine.statements import (
    JobStatement,
    StatedVersion,
    Statement,
    event_key,
    latest_location,
    stated_timeline,
    version_facet,
)
from lineage_sdk.collector.records import compute_event_id, json_object, parse_event_time
from lineage_sdk.collector.store import (
    DEFAULT_NODE_LIMIT,
    NodeType,
    check_node_limit,
    names_dataset,
    nearest_first,
    walk_full,
)
from lineage_sdk.collector.symlinks import entry_name
from lineage_sdk.collector.watch.causes import breaking_changes, stated_schemas
from lineage_sdk.exceptions import InvalidEventError

__all__ = [
    "DEFAULT_TAGS",
    "OWNER",
    "NodeFold",
    "StatedJobVersion",
    "dataset_from_events",
    "dataset_from_statements",
    "dataset_versions",
    "facets_of_run",
    "job_details",
    "job_from_statements",
    "job_type",
    "job_version_from_statements",
    "job_version_id",
    "job_versions",
    "merge_events",
    "namespace_data",
    "parent_fields",
    "parent_job",
    "run_job_version",
    "sources_data",
    "stated_creator",
    "stated_job_versions",
    "stated_source",
    "stated_version_id",
    "stated_versions",
    "upstream_run_lineage",
    "version_from_statements",
    "version_order",
]

#: Marquez's owner of namespaces created from OpenLineage events.
OWNER = "anonymous"
#: The tags Marquez creates at start-up (its default ``tags`` configuration).
DEFAULT_TAGS: tuple[dict[str, str], ...] = (
    {"name": "PII", "description": "Personally identifiable information"},
    {"name": "SENSITIVE", "description": "Contains sensitive information"},
)
_VERSIONS = uuid.UUID("6f1c8c0e-4d1e-4c55-9a57-4c1d6b0f3a21")  # namespace of derived version ids
_NEVER = datetime.min.replace(tzinfo=UTC)
_JOB_TYPES = {"STREAMING": "STREAM", "STREAM": "STREAM", "BATCH": "BATCH", "SERVICE": "SERVICE"}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _time(event: Mapping[str, Any]) -> datetime | None:
    try:
        return parse_event_time(event.get("eventTime"))
    except InvalidEventError:
        return None


def _run_id(event: Mapping[str, Any]) -> str | None:
    run_id = json_object(event.get("run")).get("runId")
    return run_id if isinstance(run_id, str) else None


def _derived_id(*parts: str) -> str:
    return str(uuid.uuid5(_VERSIONS, "\x1f".join(parts)))


def namespace_data(name: str) -> dict[str, Any]:
    """A Marquez ``Namespace`` as Marquez makes one from OpenLineage events."""
    return {"name": name, "ownerName": OWNER}


def sources_data(uses: Iterable[SourceUse]) -> list[dict[str, Any]]:
    """Marquez ``Source`` objects, by name, from how the datasets name them (see the rules)."""
    merged: dict[str, list[Any]] = {}
    for use in uses:
        latest = (use.last_seen, use.uri)  # ties: the greatest URI, so every store agrees
        span = merged.setdefault(use.name, [use.first_seen, use.last_seen, latest])
        span[0], span[1] = min(span[0], use.first_seen), max(span[1], use.last_seen)
        span[2] = max(span[2], latest)
    return [
        {
            "type": "POSTGRESQL",
            "name": name,
            "createdAt": iso(first),
            "updatedAt": iso(last),
            "connectionUrl": uri,
        }
        for name, (first, last, (_, uri)) in sorted(merged.items())
    ]


def _source_name(facets: Mapping[str, Any]) -> str:
    """A dataset's ``sourceName``: its latest ``dataSource`` facet's name, else ``default``."""
    name = json_object(facets.get("dataSource")).get("name")
    return name if isinstance(name, str) and name else DEFAULT_SOURCE


# ------------------------------------------------------------------------------------- datasets


def _dataset_entries(
    event: Mapping[str, Any], namespace: str, name: str
) -> list[Mapping[str, Any]]:
    """The dataset's entries in one event, with the role each plays."""
    out: list[Mapping[str, Any]] = []
    for key in ("inputs", "outputs"):
        items = event.get(key)
        for item in items if isinstance(items, list) else ():
            item = json_object(item)
            if entry_name(item) == (namespace, name):
                out.append(item)
    single = json_object(event.get("dataset"))
    if entry_name(single) == (namespace, name):
        out.append(single)
    return out


def _writes(event: Mapping[str, Any], namespace: str, name: str) -> bool:
    items = event.get("outputs")
    return any(
        entry_name(i) == (namespace, name) for i in (items if isinstance(items, list) else ())
    )


def _merged_facets(
    events: Iterable[Mapping[str, Any]], namespace: str, name: str
) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    for event in events:
        for entry in _dataset_entries(event, namespace, name):
            facets.update(json_object(entry.get("facets")))
    return facets


def _tags_by_field(facets: Mapping[str, Any]) -> dict[Any, list[str]]:
    """Tag names from an OpenLineage ``tags`` facet (``[{key, value, field?}]``), by the field
    they tag (None: the dataset), read in one pass for every field."""
    tags = json_object(facets.get("tags")).get("tags")
    found: dict[Any, set[str]] = {}
    for t in tags if isinstance(tags, list) else ():
        field = t.get("field") if isinstance(t, Mapping) and "key" in t else 0
        if field is None or isinstance(field, str):  # a field of another type tags nothing
            found.setdefault(field, set()).add(str(t["key"]))
    return {field: sorted(names) for field, names in found.items()}


def _tag_names(facets: Mapping[str, Any]) -> list[str]:
    """The dataset's own tag names (those of no field)."""
    return _tags_by_field(facets).get(None, [])


def _fields(
    facets: Mapping[str, Any], tags: Mapping[Any, list[str]] | None = None
) -> list[dict[str, Any]]:
    """Marquez ``fields`` from a ``schema`` facet (nested fields are left to the facet);
    ``tags``: the facets' ``_tags_by_field`` when the caller has it already."""
    out: list[dict[str, Any]] = []
    items = json_object(facets.get("schema")).get("fields")
    if tags is None:
        tags = _tags_by_field(facets) if items else {}
    for item in items if isinstance(items, list) else ():
        get = json_object(item).get
        name, kind, description = get("name"), get("type"), get("description")
        if not isinstance(name, str):
            continue
        field: dict[str, Any] = {"name": name}
        if isinstance(kind, str):
            field["type"] = kind
        field["tags"] = tags.get(name, [])
        if isinstance(description, str):
            field["description"] = description
        out.append(field)
    return out


def _description(facets: Mapping[str, Any]) -> str | None:
    text = json_object(facets.get("documentation")).get("description")
    return text if isinstance(text, str) else None


def _dataset_version_id(namespace: str, name: str, key: str) -> str:
    return _derived_id("dataset", namespace, name, key)


@dataclass
class _Version:
    """One content version of a dataset and the events that belong to it, oldest first."""

    id: str
    events: list[Mapping[str, Any]]


@dataclass
class _Timeline:
    """A dataset's versions folded from its events (see the module's rules)."""

    versions: list[_Version]  # oldest first
    current: str | None  # the current version (see the module's rules)
    written: dict[str, str]  # run id -> the version of its latest write
    named: dict[str, str]  # run id -> the version of its latest event naming the dataset


def _timeline(events: Iterable[Mapping[str, Any]], namespace: str, name: str) -> _Timeline:
    versions: dict[str, _Version] = {}
    current_key: str | None = None
    settled = False  # a write or a DatasetEvent has set the current version
    written: dict[str, str] = {}
    named: dict[str, str] = {}
    for event in events:
        if not names_dataset(event, namespace, name):
            continue
        key = event_key(event, namespace, name)
        if key is None:
            key = current_key or ""
        version = versions.get(key)
        if version is None:
            version = versions[key] = _Version(_dataset_version_id(namespace, name, key), [])
        version.events.append(event)
        run_id = _run_id(event)
        describes = run_id is None or _writes(event, namespace, name)
        if describes or not settled:
            current_key, settled = key, settled or describes
        if run_id is not None:
            named[run_id] = version.id
            if _writes(event, namespace, name):
                written[run_id] = version.id
    current = None if current_key is None else versions[current_key].id
    return _Timeline(list(versions.values()), current, written, named)


def merge_events(*sources: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Events of several reads (each in event-time order) as one list in event-time order; equal
    times keep the order of ``sources``. Used to add a dataset's DatasetEvents to its run events."""
    return list(heapq.merge(*sources, key=lambda e: _time(e) or _NEVER))


def dataset_from_events(
    namespace: str, name: str, events: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """A Marquez ``Dataset``: identity, fields, facets, times, source and current version.

    ``events`` are the events of the runs that touched the dataset, in event-time order."""
    own = [e for e in events if names_dataset(e, namespace, name)]
    times = [t for t in (_time(e) for e in own) if t is not None]
    modified = [
        t
        for e in own
        if e.get("eventType") == "COMPLETE" and _writes(e, namespace, name)
        for t in [_time(e)]
        if t is not None
    ]
    return _dataset_data(
        namespace,
        name,
        _merged_facets(own, namespace, name),
        (min(times), max(times)) if times else None,
        max(modified) if modified else None,
        _timeline(events, namespace, name).current,
    )


def dataset_from_statements(
    namespace: str,
    name: str,
    statements: Sequence[Statement],
    keys: Mapping[str, str],
    carried: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """:func:`dataset_from_events`'s answer from the dataset's statements (in event order, not
    empty), the version key of each fingerprint among them, and ``carried``, the events of
    their facets' latest carriers (:func:`~lineage_sdk.collector.engine.statements.carriers`),
    in order."""
    modified = [s.at for s in statements if s.completes and s.writes]
    _, current = stated_timeline(statements, keys)
    return _dataset_data(
        namespace,
        name,
        _merged_facets(carried, namespace, name),
        (statements[0].at, max(s.at for s in statements)),
        max(modified) if modified else None,
        None if current is None else _dataset_version_id(namespace, name, current),
    )


def _dataset_data(
    namespace: str,
    name: str,
    facets: dict[str, Any],
    times: tuple[datetime, datetime] | None,
    modified: datetime | None,
    current: str | None,
) -> dict[str, Any]:
    """A Marquez ``Dataset`` from what its events say of it, however they were read."""
    data: dict[str, Any] = {
        "id": {"namespace": namespace, "name": name},
        "type": "DB_TABLE",
        "name": name,
        "physicalName": name,
        "namespace": namespace,
        "sourceName": _source_name(facets),
        "fields": _fields(facets),
        "tags": _tag_names(facets),
        "facets": facets,
        "deleted": False,
    }
    if times is not None:
        data["createdAt"], data["updatedAt"] = iso(times[0]), iso(times[1])
    if modified is not None:
        data["lastModifiedAt"] = iso(modified)
    lifecycle = json_object(facets.get("lifecycleStateChange")).get("lifecycleStateChange")
    if isinstance(lifecycle, str):
        data["lastLifecycleState"] = lifecycle
    description = _description(facets)
    if description is not None:
        data["description"] = description
    if current is not None:
        data["currentVersion"] = current
    return data


def dataset_versions(
    namespace: str, name: str, events: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Marquez ``DatasetVersion`` objects, newest first (see the module's rules).

    ``createdByRun`` is the first run that wrote the version, else the first run that named it
    (null for a version only DatasetEvents describe)."""
    by_run = _runs(events)
    source = _source_name(_merged_facets(events, namespace, name))
    versions: list[dict[str, Any]] = []
    for found in _timeline(events, namespace, name).versions:
        times = [t for t in (_time(e) for e in found.events) if t is not None]
        runs = [r for r in map(_run_id, found.events) if r is not None]
        writers = [_run_id(e) for e in found.events if _writes(e, namespace, name)]
        creator = next((r for r in writers if r is not None), runs[0] if runs else None)
        facets = _merged_facets(found.events, namespace, name)
        created = min(times) if times else None
        run = None if creator is None else run_from_events(creator, by_run[creator])
        versions.append(_version_data(namespace, name, found.id, created, facets, source, run))
    versions.reverse()
    return versions


def stated_versions(
    statements: Sequence[Statement], keys: Mapping[str, str]
) -> list[StatedVersion]:
    """The dataset's versions from its statements (in event order), newest first."""
    found, _ = stated_timeline(statements, keys)
    found.reverse()
    return found


def stated_version_id(namespace: str, name: str, version: StatedVersion) -> str:
    """The id of a version made of statements."""
    return _dataset_version_id(namespace, name, version.key)


def stated_creator(version: StatedVersion) -> str | None:
    """The run that made a version: its first writer, else the first run that named it."""
    return next(
        (s.run_id for s in version.statements if s.writes and s.run_id is not None),
        next((s.run_id for s in version.statements if s.run_id is not None), None),
    )


def version_from_statements(
    namespace: str,
    name: str,
    version: StatedVersion,
    source: str,
    carried: Sequence[Mapping[str, Any]],
    runs: Mapping[str, Sequence[Mapping[str, Any]]],
) -> dict[str, Any]:
    """One :func:`dataset_versions` object from a version's statements; ``carried`` the events
    of its facets' latest carriers in order, ``runs`` its creator's events
    (:func:`stated_creator`), ``source`` the dataset's ``sourceName``."""
    creator = stated_creator(version)
    return _version_data(
        namespace,
        name,
        stated_version_id(namespace, name, version),
        version.statements[0].at,
        _merged_facets(carried, namespace, name),
        source,
        None if creator is None else run_from_events(creator, runs[creator]),
    )


def stated_source(carried: Sequence[Mapping[str, Any]], namespace: str, name: str) -> str:
    """The dataset's ``sourceName`` from the events of its statements' latest carriers."""
    return _source_name(_merged_facets(carried, namespace, name))


def _version_data(
    namespace: str,
    name: str,
    version: str,
    created: datetime | None,
    facets: dict[str, Any],
    source: str,
    run: dict[str, Any] | None,
) -> dict[str, Any]:
    """A Marquez ``DatasetVersion``, however its events were read."""
    item: dict[str, Any] = {
        "id": {"namespace": namespace, "name": name, "version": version},
        "type": "DB_TABLE",
        "name": name,
        "physicalName": name,
        "createdAt": iso(created) if created is not None else None,
        "version": version,
        "namespace": namespace,
        "sourceName": source,
        "fields": _fields(facets),
        "description": _description(facets) or "",
        "facets": facets,
    }
    if run is not None:
        item["createdByRun"] = run
    return item


# ----------------------------------------------------------------------------------------- jobs


def _job_facets(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    for event in events:
        facets.update(json_object(json_object(event.get("job")).get("facets")))
    return facets


def _io(events: Iterable[Mapping[str, Any]], key: str) -> list[dict[str, str]]:
    pairs: set[tuple[str, str]] = set()
    for event in events:
        items = event.get(key)
        for item in items if isinstance(items, list) else ():
            resolved = entry_name(item)
            if resolved is not None:
                pairs.add(resolved)
    return [{"namespace": ns, "name": nm} for ns, nm in sorted(pairs)]


def _location(facets: Mapping[str, Any]) -> str | None:
    url = json_object(facets.get("sourceCodeLocation")).get("url")
    return url if isinstance(url, str) else None


def job_version_id(namespace: str, name: str, run_events: Sequence[Mapping[str, Any]]) -> str:
    """The version a run's events give its job: identity, inputs, outputs and location."""
    inputs, outputs = _io(run_events, "inputs"), _io(run_events, "outputs")
    return _job_version(namespace, name, inputs, outputs, _location(_job_facets(run_events)))


def _job_version(
    namespace: str,
    name: str,
    inputs: Sequence[Mapping[str, str]],
    outputs: Sequence[Mapping[str, str]],
    location: str | None,
) -> str:
    parts = [namespace, name]
    for found in (inputs, outputs):
        parts.append(";".join(f"{d['namespace']}:{d['name']}" for d in found))
    parts.append(location or "")
    return _derived_id("job", *parts)


def _runs(events: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    by_run: dict[str, list[Mapping[str, Any]]] = {}
    for event in events:
        run_id = _run_id(event)
        if run_id is not None:
            by_run.setdefault(run_id, []).append(event)
    return by_run


def job_type(facets: Mapping[str, Any]) -> str:
    """Marquez's job ``type``, from the ``jobType`` facet's ``processingType`` (BATCH without)."""
    processing = json_object(facets.get("jobType")).get("processingType")
    return _JOB_TYPES.get(str(processing).upper(), "BATCH")


def parent_job(events: Iterable[Mapping[str, Any]]) -> tuple[str, str] | None:
    """The job the latest ``parent`` run facet among ``events`` (in event-time order) names."""
    found: tuple[str, str] | None = None
    for event in events:
        facets = json_object(json_object(event.get("run")).get("facets"))
        job = json_object(json_object(facets.get("parent")).get("job"))
        ns, name = job.get("namespace"), job.get("name")
        if isinstance(ns, str) and isinstance(name, str) and ns and name:
            found = (ns, name)
    return found


def parent_fields(name: str, events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Marquez's ``simpleName``, ``parentJobName`` and ``parentJobUuid`` of a job, from the
    ``parent`` facet of its events (for an Airflow task, its DAG): the simple name is the name
    without the parent's name and a dot before it (``OpenLineageDao.buildJobFromEvent``), the
    whole name when it has no parent or does not start so; the parent's UUID is derived from
    its namespace and name, the same in every answer and store."""
    return _parent_fields(name, parent_job(events))


def _parent_fields(name: str, parent: tuple[str, str] | None) -> dict[str, Any]:
    if parent is None:
        return {"simpleName": name}
    prefix = parent[1] + "."
    simple = name[len(prefix) :] if name.startswith(prefix) and len(name) > len(prefix) else name
    return {"simpleName": simple, "parentJobName": parent[1], "parentJobUuid": _job_uuid(*parent)}


@functools.lru_cache(maxsize=4096)
def _job_uuid(namespace: str, name: str) -> str:
    """A parent job's derived UUID, remembered: a graph's jobs share a few parents (their DAGs),
    and a ``uuid5`` costs more than the rest of a job's parent fields."""
    return _derived_id("job", namespace, name)


def job_details(namespace: str, name: str, events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a job's own events add to a Marquez ``Job``: type, simple name and parent, times,
    facets, location, description and current version (empty when the job has no events).
    JobEvents (static lineage) add facets and times; the current version comes from the latest
    run event."""
    if not events:
        return {}
    times = [t for t in (_time(e) for e in events) if t is not None]
    by_run = _runs(events)
    latest_run = next((r for r in map(_run_id, reversed(events)) if r is not None), None)
    return _job_details(
        _job_facets(events),
        parent_fields(name, events),
        (min(times), max(times)) if times else None,
        None if latest_run is None else job_version_id(namespace, name, by_run[latest_run]),
    )


def job_from_statements(
    namespace: str,
    name: str,
    statements: Sequence[JobStatement],
    carried: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """:func:`job_details` from the job's statements (in the order its object folds them, not
    empty) and ``carried``, the events of their job facets' latest carriers, in order."""
    parent = next((s.parent for s in reversed(statements) if s.parent is not None), None)
    latest = next((s.run_id for s in reversed(statements) if s.run_id is not None), None)
    current = None
    if latest is not None:
        current = _stated_job_version(
            namespace, name, [s for s in statements if s.run_id == latest]
        )
    return _job_details(
        _job_facets(carried),
        _parent_fields(name, None if parent is None else (parent[0], parent[1])),
        (min(s.at for s in statements), max(s.at for s in statements)),
        current,
    )


def _job_details(
    facets: dict[str, Any],
    parent: dict[str, Any],
    times: tuple[datetime, datetime] | None,
    current: str | None,
) -> dict[str, Any]:
    details: dict[str, Any] = {"type": job_type(facets), **parent}
    details["facets"] = facets
    if times is not None:
        details["createdAt"], details["updatedAt"] = iso(times[0]), iso(times[1])
    location = _location(facets)
    if location is not None:
        details["location"] = location
    description = _description(facets)
    if description is not None:
        details["description"] = description
    if current is not None:
        details["currentVersion"] = current
    return details


def _named_pairs(pairs: Iterable[Sequence[str]]) -> list[dict[str, str]]:
    return [{"namespace": ns, "name": nm} for ns, nm in sorted({(p[0], p[1]) for p in pairs})]


def _stated_job_version(namespace: str, name: str, run: Sequence[JobStatement]) -> str:
    """:func:`job_version_id` of one run from its statements."""
    inputs = _named_pairs(p for s in run for p in s.inputs)
    outputs = _named_pairs(p for s in run for p in s.outputs)
    return _job_version(namespace, name, inputs, outputs, latest_location(run))


@dataclass
class StatedJobVersion:
    """One version of a job and its runs' statements, each run's in event order, the runs in
    the order of their first events (as :func:`job_versions` groups them)."""

    id: str
    created: datetime
    runs: list[tuple[str, list[JobStatement]]]
    #: The run with the latest event (ties: the least run id).
    latest: str


def stated_job_versions(
    namespace: str, name: str, statements: Sequence[JobStatement]
) -> list[StatedJobVersion]:
    """The job's versions from the statements of its run events (in event order), newest first,
    as :func:`job_versions` orders them."""
    by_run: dict[str, list[JobStatement]] = {}
    for s in statements:
        if s.run_id is not None:
            by_run.setdefault(s.run_id, []).append(s)
    groups: dict[str, list[tuple[str, list[JobStatement]]]] = {}
    ids: dict[tuple[Any, ...], str] = {}  # thousands of runs, few versions: each id made once
    for run_id, run in by_run.items():
        inputs = frozenset((p[0], p[1]) for s in run for p in s.inputs)
        outputs = frozenset((p[0], p[1]) for s in run for p in s.outputs)
        what = (inputs, outputs, latest_location(run))
        version = ids.get(what)
        if version is None:
            version = ids[what] = _stated_job_version(namespace, name, run)
        groups.setdefault(version, []).append((run_id, run))
    found = [
        StatedJobVersion(version, min(s.at for _, run in runs for s in run), runs, _latest(runs))
        for version, runs in groups.items()
    ]
    found.sort(key=lambda v: (v.created, v.id), reverse=True)
    return found


def _latest(runs: Sequence[tuple[str, Sequence[JobStatement]]]) -> str:
    """The run with the latest event (ties: the least run id)."""
    best: tuple[datetime, str] | None = None
    for run_id, run in runs:
        last = max(s.at for s in run)
        if best is None or last > best[0] or (last == best[0] and run_id < best[1]):
            best = (last, run_id)
    assert best is not None
    return best[1]


def job_version_from_statements(
    namespace: str,
    name: str,
    version: StatedJobVersion,
    carried: Sequence[Mapping[str, Any]],
    latest: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """One :func:`job_versions` object from a version's statements; ``carried`` the events of
    its job facets' latest carriers (in the order of :func:`version_order`), ``latest`` its
    latest run's events."""
    facets = _job_facets(carried)
    run = version.runs[0][1]
    return _job_version_data(
        namespace,
        name,
        version.id,
        version.created,
        _named_pairs(p for s in run for p in s.inputs),
        _named_pairs(p for s in run for p in s.outputs),
        run_from_events(version.latest, latest),
        facets,
    )


def version_order(version: StatedJobVersion) -> list[JobStatement]:
    """A version's statements in the order :func:`job_versions` folds their events: run by
    run."""
    return [s for _, run in version.runs for s in run]


def job_versions(
    namespace: str, name: str, events: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Marquez ``JobVersion`` objects, newest first: runs grouped by the version they gave."""
    groups: dict[str, list[tuple[str, list[Mapping[str, Any]]]]] = {}
    for run_id, run_events in _runs(events).items():
        groups.setdefault(job_version_id(namespace, name, run_events), []).append(
            (run_id, run_events)
        )
    versions: list[tuple[datetime, dict[str, Any]]] = []
    for version, runs in groups.items():
        all_events = [e for _, run_events in runs for e in run_events]
        times = [t for t in (_time(e) for e in all_events) if t is not None]
        created = min(times) if times else _NEVER
        # The group's latest run: the one with the latest event (ties: least run id).
        latest_id, latest_events = max(
            runs, key=lambda r: (max(_time(e) or _NEVER for e in r[1]), _neg(r[0]))
        )
        item = _job_version_data(
            namespace,
            name,
            version,
            created if times else None,
            _io(all_events, "inputs"),
            _io(all_events, "outputs"),
            run_from_events(latest_id, latest_events),
            _job_facets(all_events),
        )
        versions.append((created, item))
    versions.sort(key=lambda v: (v[0], v[1]["version"]), reverse=True)
    return [item for _, item in versions]


def _job_version_data(
    namespace: str,
    name: str,
    version: str,
    created: datetime | None,
    inputs: list[dict[str, str]],
    outputs: list[dict[str, str]],
    latest_run: dict[str, Any],
    facets: dict[str, Any],
) -> dict[str, Any]:
    """A Marquez ``JobVersion``, however its events were read."""
    item: dict[str, Any] = {
        "id": {"namespace": namespace, "name": name, "version": version},
        "name": name,
        "version": version,
        "createdAt": iso(created) if created is not None else None,
        "namespace": namespace,
        "inputs": inputs,
        "outputs": outputs,
        "latestRun": latest_run,
        "facets": facets,
    }
    location = _location(facets)
    if location is not None:
        item["location"] = location
    return item


def _neg(text: str) -> tuple[int, ...]:
    """A key that sorts strings in reverse, for "least run id wins" inside a max()."""
    return tuple(-ord(c) for c in text)


def facets_of_run(run_id: str, events: Sequence[Mapping[str, Any]], kind: str) -> dict[str, Any]:
    """Marquez's ``FacetsResult``: a run's run facets or job facets, latest value of each."""
    facets: dict[str, Any] = {}
    for event in events:
        section = json_object(event.get("run" if kind == "run" else "job"))
        facets.update(json_object(section.get("facets")))
    return {"runId": run_id, "facets": facets}


def _job_of(event: Mapping[str, Any]) -> tuple[Any, Any]:
    """The (namespace, name) an event's own job is sent under (not checked to be text)."""
    job = json_object(event.get("job"))
    return (job.get("namespace"), job.get("name"))


def run_job_version(run_events: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
    """``{namespace, name, version}`` of the job a run's events name (None if they name none)."""
    job = next((json_object(e.get("job")) for e in run_events if json_object(e.get("job"))), None)
    if job is None:
        return None
    ns, name = job.get("namespace"), job.get("name")
    if not isinstance(ns, str) or not isinstance(name, str):
        return None
    own = [e for e in run_events if _job_of(e) == (ns, name)]
    return {"namespace": ns, "name": name, "version": job_version_id(ns, name, own)}


# ---------------------------------------------------------------- nodes of lineage and lists


class NodeFold:
    """Marquez's ``JobData`` and ``DatasetData`` fields of many jobs and datasets (lineage
    nodes, a page of a list), folded from one :class:`~lineage_sdk.collector.engine.reads.
    NodeFacts`, so a graph of a thousand nodes costs the engine's few batched reads, not a read
    of each node's history.

    A job's are its latest run's: type, parent and simple name, location and description from
    that run's events, inputs and outputs from its edges, times from its node row. A dataset's
    are what the latest runs of its writers (and of the jobs asked beside it) say of it, folded
    oldest first (its DatasetEvents when no job writes it): fields, source, tags, description,
    lifecycle state, and when a write among them completed, ``lastModifiedAt``. The
    single-job and single-dataset reads fold every statement instead
    (``job_from_statements``, ``dataset_from_statements``)."""

    def __init__(self, facts: NodeFacts) -> None:
        self.facts = facts
        every = [e for found in (*facts.events.values(), *facts.static.values()) for e in found]
        timed = sorted(((_time(e) or _NEVER, i) for i, e in enumerate(every)))
        # Each dataset's entries, oldest first: their facets, and the time of a completed write.
        self._entries: dict[tuple[str, str], list[tuple[Mapping[str, Any], datetime | None]]] = {}
        for at, i in timed:
            event = every[i]
            done = event.get("eventType") == "COMPLETE"
            for section in ("inputs", "outputs", "dataset"):
                value = event.get(section)
                if value is None:
                    continue  # no entry (an entry of None names no dataset)
                wrote = at if done and section == "outputs" else None
                for entry in value if isinstance(value, list) else (value,):
                    facets = json_object(json_object(entry).get("facets"))
                    if not facets and wrote is None:
                        continue  # adds nothing to any dataset: its name is not worked out
                    key = entry_name(entry)
                    if key is not None:
                        self._entries.setdefault(key, []).append((facets, wrote))
        self._stamps: dict[datetime, str] = {}  # many nodes share a time: each written once
        self._broke = None if facts.earlier is None else _schema_broke(facts)

    def _iso(self, at: datetime) -> str:
        stamp = self._stamps.get(at)
        if stamp is None:
            stamp = self._stamps[at] = iso(at)
        return stamp

    def _times(self, kind: NodeType, key: tuple[str, str], data: dict[str, Any]) -> None:
        span = self.facts.times.get((kind, key))
        if span is not None:
            data["createdAt"], data["updatedAt"] = self._iso(span[0]), self._iso(span[1])

    def job(self, namespace: str, name: str, *, full: bool = False) -> dict[str, Any]:
        """``JobData``'s fields of the job beside its identity and latest run; ``full`` adds
        a ``Job``'s facets and current version (a list's answer)."""
        key = (namespace, name)
        run = self.facts.latest.get(key)
        events = [
            e
            for e in (self.facts.events.get(run, []) if run is not None else [])
            if _job_of(e) == key
        ]
        facets = _job_facets(events)
        data: dict[str, Any] = {"type": job_type(facets), **parent_fields(name, events)}
        self._times("JOB", key, data)
        for io, side in (("in", "inputs"), ("out", "outputs")):
            data[side] = [
                {"namespace": ns, "name": nm} for ns, nm in self.facts.sides.get((key, io), [])
            ]
        location, description = _location(facets), _description(facets)
        if location is not None:
            data["location"] = location
        if description is not None:
            data["description"] = description
        if full:
            data["facets"] = facets
            if events:
                data["currentVersion"] = job_version_id(namespace, name, events)
        return data

    def dataset(self, namespace: str, name: str) -> dict[str, Any]:
        """``DatasetData``'s fields of the dataset beside its identity (see the class)."""
        key = (namespace, name)
        entries = self._entries.get(key, [])
        # One entry's facets are only read here: used as they are, several merged (later win).
        facets: Mapping[str, Any] = (
            entries[0][0] if len(entries) == 1 else {k: v for f, _ in entries for k, v in f.items()}
        )
        data: dict[str, Any] = {"type": "DB_TABLE", "physicalName": name}
        self._times("DATASET", key, data)
        data["sourceName"] = _source_name(facets)
        tags = _tags_by_field(facets)
        data["fields"] = _fields(facets, tags)
        data["tags"] = tags.get(None, [])
        written = [at for _, at in entries if at is not None and at is not _NEVER]
        if written:
            data["lastModifiedAt"] = self._iso(max(written))
        description = _description(facets)
        if description is not None:
            data["description"] = description
        lifecycle = json_object(facets.get("lifecycleStateChange")).get("lifecycleStateChange")
        if isinstance(lifecycle, str):
            data["lastLifecycleState"] = lifecycle
        if _quality_failed(facets.get("dataQualityAssertions")):
            data["qualityFailed"] = True
        if self._broke is not None and key in self._broke:
            data["schemaBreaking"] = True
        return data


def _quality_failed(facet: Any) -> bool:
    """Whether a ``dataQualityAssertions`` facet holds an assertion with ``success: false``."""
    assertions = json_object(facet).get("assertions")
    return isinstance(assertions, list) and any(
        json_object(a).get("success") is False for a in assertions
    )


def _schema_broke(facts: NodeFacts) -> set[tuple[str, str]]:
    """The datasets whose last schema change broke, by what ``facts`` read with ``schemas``:
    the ``schema`` facets stated of each (its writers' outputs in their two latest runs, its
    DatasetEvents) in (event time, event id) order; the last statement that differs from the
    one before it is the last change, and it broke when it removed a field or changed a field's
    type (:func:`~lineage_sdk.collector.watch.causes.breaking_changes`, as the alerts decide).
    A change older than the two latest runs of every writer is not seen."""
    found: dict[tuple[str, str], list[tuple[datetime, int, dict[str, str | None]]]] = {}
    events: list[Mapping[str, Any]] = []
    sources = (facts.events, facts.earlier or {}, facts.static, facts.stated)
    for event in (e for source in sources for run in source.values() for e in run):
        for dataset, fields in stated_schemas(event):
            found.setdefault(dataset, []).append((_time(event) or _NEVER, len(events), fields))
            events.append(event)
    ids: dict[int, str] = {}  # computed only for a dataset with statements of equal time

    def event_id(i: int) -> str:
        if i not in ids:
            ids[i] = compute_event_id(events[i])
        return ids[i]

    broke: set[tuple[str, str]] = set()
    for dataset, stated in found.items():
        times = [at for at, _, _ in stated]
        if len(set(times)) < len(times):
            stated.sort(key=lambda s: (s[0], event_id(s[1])))
        else:
            stated.sort(key=lambda s: s[0])
        last: dict[str, str | None] | None = None
        breaking = False
        for _, _, fields in stated:
            if last is not None and fields != last:
                breaking = bool(breaking_changes(last, fields))
            last = fields
        if breaking:
            broke.add(dataset)
    return broke


# ------------------------------------------------------------------------ run lineage (upstream)


@dataclass(frozen=True)
class _FoldedRun:
    """What upstream run lineage needs of one run, folded once from its events."""

    run_id: str
    events: Sequence[Mapping[str, Any]]
    run: dict[str, Any]  # Marquez's Run (run_from_events)
    job: dict[str, str] | None
    start: datetime | None  # its START, else its first event
    completed_at: datetime | None  # when it COMPLETED (None unless its state is COMPLETED)


def _fold_run(run_id: str, events: Sequence[Mapping[str, Any]]) -> _FoldedRun:
    run = run_from_events(run_id, events)
    times = [t for t in (_time(e) for e in events) if t is not None]
    started = run.get("startedAt")
    start = datetime.fromisoformat(started) if started else (min(times) if times else None)
    ended = run.get("endedAt")
    completed = datetime.fromisoformat(ended) if ended and run["state"] == "COMPLETED" else None
    return _FoldedRun(run_id, events, run, run_job_version(events), start, completed)


def _dataset_version_facet(entry: Mapping[str, Any]) -> str | None:
    """The ``datasetVersion`` of an input's or output's ``version`` facet."""
    return version_facet(json_object(entry.get("facets")))


def _run_inputs(events: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str | None]:
    """A run's inputs, sorted, each with the latest ``version`` facet its events gave it."""
    found: dict[tuple[str, str], str | None] = {}
    for event in events:
        items = event.get("inputs")
        for item in items if isinstance(items, list) else ():
            item = json_object(item)
            resolved = entry_name(item)
            if resolved is not None:
                found[resolved] = _dataset_version_facet(item) or found.get(resolved)
    return dict(sorted(found.items()))


def _carries_version(
    events: Iterable[Mapping[str, Any]], namespace: str, name: str, version: str
) -> bool:
    """Whether the run wrote the dataset with that ``version`` facet."""
    for event in events:
        items = event.get("outputs")
        for item in items if isinstance(items, list) else ():
            item = json_object(item)
            same = entry_name(item) == (namespace, name)
            if same and _dataset_version_facet(item) == version:
                return True
    return False


def _producer(
    consumer: _FoldedRun,
    namespace: str,
    name: str,
    wanted: str | None,
    writers: Sequence[_FoldedRun],
) -> _FoldedRun | None:
    """The run whose version of the dataset ``consumer`` read (see the module's rules)."""
    if wanted is not None:
        matches = [w for w in writers if _carries_version(w.events, namespace, name, wanted)]
        # Completed writers before the others, then the latest; ties: the least run id.
        return max(
            matches,
            key=lambda w: (
                w.completed_at is not None,
                w.completed_at or w.start or _NEVER,
                _neg(w.run_id),
            ),
            default=None,
        )
    if consumer.start is None:
        return None
    start = consumer.start
    done = [w for w in writers if w.completed_at is not None and w.completed_at <= start]
    return max(done, key=lambda w: (w.completed_at or _NEVER, _neg(w.run_id)), default=None)


class _UpstreamWalk:
    """Folds runs and datasets once per request: the same run or dataset is met many times."""

    def __init__(self, dataset_events: Callable[[str, str], Sequence[Mapping[str, Any]]]) -> None:
        self._dataset_events = dataset_events
        self._runs: dict[str, _FoldedRun] = {}
        self._datasets: dict[tuple[str, str], tuple[list[_FoldedRun], _Timeline]] = {}

    def fold(self, run_id: str, events: Sequence[Mapping[str, Any]]) -> _FoldedRun:
        if run_id not in self._runs:
            self._runs[run_id] = _fold_run(run_id, events)
        return self._runs[run_id]

    def dataset(self, namespace: str, name: str) -> tuple[list[_FoldedRun], _Timeline]:
        """The runs that wrote the dataset, and its versions."""
        key = (namespace, name)
        if key not in self._datasets:
            events = self._dataset_events(namespace, name)
            by_run = _runs(events)
            writers = [
                self.fold(r, by_run[r])
                for r in by_run
                if any(_writes(e, namespace, name) for e in by_run[r])
            ]
            self._datasets[key] = (writers, _timeline(events, namespace, name))
        return self._datasets[key]

    def inputs(self, consumer: _FoldedRun) -> list[tuple[dict[str, Any], _FoldedRun | None]]:
        """Marquez's ``inputs`` of a run, each with the run that produced the version read."""
        out: list[tuple[dict[str, Any], _FoldedRun | None]] = []
        for (ns, nm), wanted in _run_inputs(consumer.events).items():
            writers, timeline = self.dataset(ns, nm)
            others = [w for w in writers if w.run_id != consumer.run_id]
            producer = _producer(consumer, ns, nm, wanted, others)
            item: dict[str, Any] = {"namespace": ns, "name": nm}
            version: str | None = None
            if wanted is not None:  # the input's own version facet names what it read
                version = _dataset_version_id(ns, nm, f"version:{wanted}")
            elif producer is not None:
                version = timeline.written.get(producer.run_id)
            elif not writers:
                version = timeline.named.get(consumer.run_id)
            if version is not None:
                item["version"] = version
            if producer is not None:
                item["producedByRunId"] = producer.run_id
            out.append((item, producer))
        return out


def _upstream_run(folded: _FoldedRun, inputs: list[dict[str, Any]]) -> dict[str, Any]:
    run: dict[str, Any] = {"id": folded.run_id}
    for key, marquez_key in (("start", "startedAt"), ("end", "endedAt")):
        if marquez_key in folded.run:
            run[key] = folded.run[marquez_key]
    run["status"] = folded.run["state"]
    item: dict[str, Any] = {}
    if folded.job is not None:
        item["job"] = folded.job
    item["run"] = run
    item["inputs"] = inputs
    return item


def upstream_run_lineage(
    run_events: Sequence[Mapping[str, Any]],
    dataset_events: Callable[[str, str], Sequence[Mapping[str, Any]]],
    *,
    depth: int = 20,
    node_limit: int = DEFAULT_NODE_LIMIT,
) -> dict[str, Any]:
    """Marquez's ``UpstreamRunLineage`` of the run whose (non-empty) events are ``run_events``.

    At most ``node_limit`` runs, nearest first (by producer hops, ties by run id; the walk stops
    early), ``truncated`` saying whether runs were left out (a lineage-sdk extension).

    ``dataset_events`` is the store's ``events_of_dataset``. Runs up to ``depth`` producer hops
    away are listed (as Marquez: 0 is the run alone), each once, the run first, then in
    topological order: a run after every listed run that read what it wrote (ties: fewer hops,
    then job name, namespace and run id). Every listed run shows all its inputs, each with the
    dataset version it read and ``producedByRunId`` when the producing run is known."""
    check_node_limit(node_limit)
    run_id = next((r for r in map(_run_id, run_events) if r is not None), None)
    if run_id is None:
        return {"runs": [], "truncated": False, "nodeLimit": node_limit}
    walk = _UpstreamWalk(dataset_events)
    root = walk.fold(run_id, run_events)
    hops: dict[str, int] = {run_id: 0}
    folded: dict[str, _FoldedRun] = {run_id: root}
    listed: dict[str, dict[str, Any]] = {}
    producers: dict[str, set[str]] = {}
    level = [root]
    closing = False
    while level:
        reached: list[_FoldedRun] = []
        for current in level:
            pairs = walk.inputs(current)
            listed[current.run_id] = _upstream_run(current, [item for item, _ in pairs])
            producers[current.run_id] = {p.run_id for _, p in pairs if p is not None}
            for _, producer in pairs:
                if closing or producer is None or producer.run_id in hops:
                    continue
                if hops[current.run_id] >= depth:
                    continue
                hops[producer.run_id] = hops[current.run_id] + 1
                folded[producer.run_id] = producer
                reached.append(producer)
        if closing:
            break
        # Past node_limit runs, the runs just found are listed (their inputs read) and the
        # walk stops: every run within the cut's distance is known, with its producers.
        closing = walk_full(len(hops), node_limit)
        level = reached
    among = {r: [p for p in sorted(ps) if p in hops] for r, ps in producers.items()}
    kept = set(nearest_first([run_id], [among], node_limit))
    order = _topological(run_id, {r: h for r, h in hops.items() if r in kept}, folded, producers)
    return {
        "runs": [listed[r] for r in order],
        "truncated": len(kept) < len(hops),
        "nodeLimit": node_limit,
    }


def _topological(
    root: str,
    hops: Mapping[str, int],
    folded: Mapping[str, _FoldedRun],
    producers: Mapping[str, set[str]],
) -> list[str]:
    """Kahn's order over consumer -> producer edges among the listed runs, the root first.

    A cycle (possible only through ``version`` facets) is broken at its least-key run."""

    def key(run_id: str) -> tuple[int, str, str, str]:
        job = folded[run_id].job or {}
        return (hops[run_id], job.get("name", ""), job.get("namespace", ""), run_id)

    waiting = {r: 0 for r in hops}
    for consumer in hops:
        for producer in producers.get(consumer, ()):
            if producer in waiting and producer != root:
                waiting[producer] += 1
    order: list[str] = []
    ready = [key(root)]
    done: set[str] = set()
    while len(order) < len(hops):
        if not ready:  # a cycle: take its least run
            ready = [min(key(r) for r in hops if r not in done)]
        run_id = heapq.heappop(ready)[3]
        if run_id in done:
            continue
        done.add(run_id)
        order.append(run_id)
        for producer in sorted(producers.get(run_id, ())):
            if producer in waiting and producer not in done:
                waiting[producer] -= 1
                if waiting[producer] <= 0:
                    heapq.heappush(ready, key(producer))
    return order
