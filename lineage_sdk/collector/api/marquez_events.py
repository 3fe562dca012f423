"""Marquez's richer shapes (datasets with fields, versions, facets, sources, tags), folded from raw
OpenLineage events.

The stores hand back raw events (:class:`~lineage_sdk.collector.store.LineageHistoryProtocol`) and
every rule lives here, so the sql, document and graph stores answer alike. The rules follow what
Marquez derives from the same events:

- a **dataset version** is made by each run that writes the dataset (a dataset only ever read has
  one version, from the first run that read it); its id is a UUID derived from the dataset and the
  run, so it is stable across calls and stores;
- a **job version** is the job's identity with its inputs, outputs and source location: runs
  that agree on those share a version (Marquez's rule), id again a derived UUID;
- **fields** come from the latest ``schema`` facet, **facets** are merged oldest first so the latest
  value of each facet wins;
- a **source** is a dataset namespace (OpenLineage's naming spec makes the namespace the data
  source), ``connectionUrl`` the namespace itself;
- **tags** are the two Marquez creates at start-up (tags are only ever added through Marquez's
  write API, which this collector does not offer).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from lineage_sdk.collector.api.marquez import iso, run_from_events
from lineage_sdk.collector.records import parse_event_time
from lineage_sdk.collector.store import names_dataset
from lineage_sdk.exceptions import InvalidEventError

__all__ = [
    "DEFAULT_TAGS",
    "OWNER",
    "dataset_from_events",
    "dataset_versions",
    "facets_of_run",
    "job_details",
    "job_version_id",
    "job_versions",
    "namespace_data",
    "source_data",
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


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _time(event: Mapping[str, Any]) -> datetime | None:
    try:
        return parse_event_time(event.get("eventTime"))
    except InvalidEventError:
        return None


def _run_id(event: Mapping[str, Any]) -> str | None:
    run_id = _map(event.get("run")).get("runId")
    return run_id if isinstance(run_id, str) else None


def _derived_id(*parts: str) -> str:
    return str(uuid.uuid5(_VERSIONS, "\x1f".join(parts)))


def namespace_data(name: str) -> dict[str, Any]:
    """A Marquez ``Namespace`` as Marquez makes one from OpenLineage events."""
    return {"name": name, "ownerName": OWNER}


def source_data(namespace: str) -> dict[str, Any]:
    """A Marquez ``Source`` for a dataset namespace; ``type`` is its URI scheme, upper case."""
    scheme, sep, _ = namespace.partition("://")
    kind = scheme.upper() if sep and scheme else "DEFAULT"
    return {"type": kind, "name": namespace, "connectionUrl": namespace}


# ------------------------------------------------------------------------------------- datasets


def _dataset_entries(
    event: Mapping[str, Any], namespace: str, name: str
) -> list[Mapping[str, Any]]:
    """The dataset's entries in one event, with the role each plays."""
    out: list[Mapping[str, Any]] = []
    for key in ("inputs", "outputs"):
        items = event.get(key)
        for item in items if isinstance(items, list) else ():
            item = _map(item)
            if item.get("namespace") == namespace and item.get("name") == name:
                out.append(item)
    single = _map(event.get("dataset"))
    if single.get("namespace") == namespace and single.get("name") == name:
        out.append(single)
    return out


def _writes(event: Mapping[str, Any], namespace: str, name: str) -> bool:
    items = event.get("outputs")
    return any(
        _map(i).get("namespace") == namespace and _map(i).get("name") == name
        for i in (items if isinstance(items, list) else ())
    )


def _merged_facets(
    events: Iterable[Mapping[str, Any]], namespace: str, name: str
) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    for event in events:
        for entry in _dataset_entries(event, namespace, name):
            facets.update(_map(entry.get("facets")))
    return facets


def _tag_names(facets: Mapping[str, Any], field: str | None = None) -> list[str]:
    """Tag names from an OpenLineage ``tags`` facet (``[{key, value, field?}]``)."""
    tags = _map(facets.get("tags")).get("tags")
    names = {
        str(t["key"])
        for t in (tags if isinstance(tags, list) else ())
        if isinstance(t, Mapping) and "key" in t and t.get("field") == field
    }
    return sorted(names)


def _fields(facets: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Marquez ``fields`` from a ``schema`` facet (nested fields are left to the facet)."""
    out: list[dict[str, Any]] = []
    items = _map(facets.get("schema")).get("fields")
    for item in items if isinstance(items, list) else ():
        item = _map(item)
        if not isinstance(item.get("name"), str):
            continue
        field: dict[str, Any] = {"name": item["name"]}
        if isinstance(item.get("type"), str):
            field["type"] = item["type"]
        field["tags"] = _tag_names(facets, item["name"])
        if isinstance(item.get("description"), str):
            field["description"] = item["description"]
        out.append(field)
    return out


def _description(facets: Mapping[str, Any]) -> str | None:
    text = _map(facets.get("documentation")).get("description")
    return text if isinstance(text, str) else None


def _version_runs(events: Sequence[Mapping[str, Any]], namespace: str, name: str) -> list[str]:
    """Run ids that made a version of the dataset, oldest first."""
    writers: list[str] = []
    first_reader: str | None = None
    for event in events:
        run_id = _run_id(event)
        if run_id is None or not names_dataset(event, namespace, name):
            continue
        if _writes(event, namespace, name):
            if run_id not in writers:
                writers.append(run_id)
        elif first_reader is None:
            first_reader = run_id
    if writers:
        return writers
    return [first_reader] if first_reader else []


def _dataset_version_id(namespace: str, name: str, run_id: str) -> str:
    return _derived_id("dataset", namespace, name, run_id)


def dataset_from_events(
    namespace: str, name: str, events: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """A Marquez ``Dataset``: identity, fields, facets, times, source and current version.

    ``events`` are the events of the runs that touched the dataset, in event-time order."""
    own = [e for e in events if names_dataset(e, namespace, name)]
    facets = _merged_facets(own, namespace, name)
    data: dict[str, Any] = {
        "id": {"namespace": namespace, "name": name},
        "type": "DB_TABLE",
        "name": name,
        "physicalName": name,
        "namespace": namespace,
        "sourceName": namespace,
        "fields": _fields(facets),
        "tags": _tag_names(facets),
        "facets": facets,
        "deleted": False,
    }
    times = [t for t in (_time(e) for e in own) if t is not None]
    if times:
        data["createdAt"] = iso(min(times))
        data["updatedAt"] = iso(max(times))
    modified = [
        t
        for e in own
        if e.get("eventType") == "COMPLETE" and _writes(e, namespace, name)
        for t in [_time(e)]
        if t is not None
    ]
    if modified:
        data["lastModifiedAt"] = iso(max(modified))
    lifecycle = _map(facets.get("lifecycleStateChange")).get("lifecycleStateChange")
    if isinstance(lifecycle, str):
        data["lastLifecycleState"] = lifecycle
    description = _description(facets)
    if description is not None:
        data["description"] = description
    runs = _version_runs(events, namespace, name)
    if runs:
        data["currentVersion"] = _dataset_version_id(namespace, name, runs[-1])
    return data


def dataset_versions(
    namespace: str, name: str, events: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Marquez ``DatasetVersion`` objects, newest first (see the module's rules)."""
    by_run: dict[str, list[Mapping[str, Any]]] = {}
    for event in events:
        run_id = _run_id(event)
        if run_id is not None:
            by_run.setdefault(run_id, []).append(event)
    versions: list[dict[str, Any]] = []
    for run_id in _version_runs(events, namespace, name):
        run_events = by_run[run_id]
        own = [e for e in run_events if names_dataset(e, namespace, name)]
        facets = _merged_facets(own, namespace, name)
        version = _dataset_version_id(namespace, name, run_id)
        times = [t for t in (_time(e) for e in own) if t is not None]
        created = iso(min(times)) if times else None
        item: dict[str, Any] = {
            "id": {"namespace": namespace, "name": name, "version": version},
            "type": "DB_TABLE",
            "name": name,
            "physicalName": name,
            "createdAt": created,
            "version": version,
            "namespace": namespace,
            "sourceName": namespace,
            "fields": _fields(facets),
            "description": _description(facets) or "",
            "createdByRun": run_from_events(run_id, run_events),
            "facets": facets,
        }
        versions.append(item)
    versions.reverse()
    return versions


# ----------------------------------------------------------------------------------------- jobs


def _job_facets(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    for event in events:
        facets.update(_map(_map(event.get("job")).get("facets")))
    return facets


def _io(events: Iterable[Mapping[str, Any]], key: str) -> list[dict[str, str]]:
    pairs: set[tuple[str, str]] = set()
    for event in events:
        items = event.get(key)
        for item in items if isinstance(items, list) else ():
            item = _map(item)
            ns, nm = item.get("namespace"), item.get("name")
            if isinstance(ns, str) and isinstance(nm, str):
                pairs.add((ns, nm))
    return [{"namespace": ns, "name": nm} for ns, nm in sorted(pairs)]


def _location(facets: Mapping[str, Any]) -> str | None:
    url = _map(facets.get("sourceCodeLocation")).get("url")
    return url if isinstance(url, str) else None


def job_version_id(namespace: str, name: str, run_events: Sequence[Mapping[str, Any]]) -> str:
    """The version a run's events give its job: identity, inputs, outputs and location."""
    parts = [namespace, name]
    for key in ("inputs", "outputs"):
        parts.append(";".join(f"{d['namespace']}:{d['name']}" for d in _io(run_events, key)))
    parts.append(_location(_job_facets(run_events)) or "")
    return _derived_id("job", *parts)


def _runs(events: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    by_run: dict[str, list[Mapping[str, Any]]] = {}
    for event in events:
        run_id = _run_id(event)
        if run_id is not None:
            by_run.setdefault(run_id, []).append(event)
    return by_run


def job_details(namespace: str, name: str, events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a job's own events add to a Marquez ``Job``: type, times, facets, location,
    description and current version (empty when the job has no run events)."""
    if not events:
        return {}
    facets = _job_facets(events)
    processing = _map(facets.get("jobType")).get("processingType")
    details: dict[str, Any] = {
        "type": _JOB_TYPES.get(str(processing).upper(), "BATCH"),
        "simpleName": name.rsplit(".", 1)[-1],
        "facets": facets,
    }
    times = [t for t in (_time(e) for e in events) if t is not None]
    if times:
        details["createdAt"] = iso(min(times))
        details["updatedAt"] = iso(max(times))
    location = _location(facets)
    if location is not None:
        details["location"] = location
    description = _description(facets)
    if description is not None:
        details["description"] = description
    by_run = _runs(events)
    latest = events[-1]
    latest_run = _run_id(latest)
    if latest_run is not None:
        details["currentVersion"] = job_version_id(namespace, name, by_run[latest_run])
    return details


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
        facets = _job_facets(all_events)
        item: dict[str, Any] = {
            "id": {"namespace": namespace, "name": name, "version": version},
            "name": name,
            "version": version,
            "createdAt": iso(created) if times else None,
            "namespace": namespace,
            "inputs": _io(all_events, "inputs"),
            "outputs": _io(all_events, "outputs"),
            "latestRun": run_from_events(latest_id, latest_events),
            "facets": facets,
        }
        location = _location(facets)
        if location is not None:
            item["location"] = location
        versions.append((created, item))
    versions.sort(key=lambda v: (v[0], v[1]["version"]), reverse=True)
    return [item for _, item in versions]


def _neg(text: str) -> tuple[int, ...]:
    """A key that sorts strings in reverse, for "least run id wins" inside a max()."""
    return tuple(-ord(c) for c in text)


def facets_of_run(run_id: str, events: Sequence[Mapping[str, Any]], kind: str) -> dict[str, Any]:
    """Marquez's ``FacetsResult``: a run's run facets or job facets, latest value of each."""
    facets: dict[str, Any] = {}
    for event in events:
        section = _map(event.get("run" if kind == "run" else "job"))
        facets.update(_map(section.get("facets")))
    return {"runId": run_id, "facets": facets}
