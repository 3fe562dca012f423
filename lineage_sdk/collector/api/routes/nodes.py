"""The job and dataset reads: a namespace's jobs and datasets, one job or dataset, its versions
and one version, each of the last three also as of a time (``asOf``) or as a run's scope sees it
(``runId``), both lineage-sdk extensions.

A job's reads and a dataset's differ only in what a :class:`_Kind` says: which events describe
it, how they fold into Marquez's shapes (``marquez_events``), and what an error calls it. So one
body answers each read for both kinds (:func:`_node`, :func:`_version_list`, :func:`_version`), and
each route below is its declaration: path, parameters and documentation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi import Path as PathParam

from lineage_sdk.collector.api import marquez, marquez_events, queries
from lineage_sdk.collector.api.access import Grant
from lineage_sdk.collector.api.dependencies import ReadGrant, State, answer, read_auth
from lineage_sdk.collector.api.errors import ApiError, error_responses
from lineage_sdk.collector.api.history import events_up_to, history_job, of_dataset, of_job
from lineage_sdk.collector.api.routes.common import (
    Limit,
    Offset,
    catalog,
    instant,
    paged,
    reply,
)
from lineage_sdk.collector.api.schemas import (
    DatasetList,
    DatasetModel,
    DatasetVersionList,
    DatasetVersionModel,
    JobList,
    JobModel,
    JobVersionList,
    JobVersionModel,
)
from lineage_sdk.collector.api.state import ApiState
from lineage_sdk.collector.engine import Engine
from lineage_sdk.collector.store import NodeType, node_id
from lineage_sdk.collector.symlinks import other_names

__all__ = [
    "get_dataset",
    "get_dataset_version",
    "get_dataset_versions",
    "get_datasets",
    "get_job",
    "get_job_version",
    "get_job_versions",
    "get_jobs",
    "router",
]

router = APIRouter(dependencies=read_auth)

Version = Annotated[str, PathParam(min_length=1, max_length=64, description="A version's UUID.")]
# History (issue 16) on the job and dataset reads and their versions: lineage-sdk extensions.
AsOf = Annotated[
    str | None,
    Query(
        max_length=64,
        description="lineage-sdk extension: as the events up to this time (inclusive; RFC 3339, "
        "or YYYY-MM-DD for that day's start) describe it; 404 when nothing was recorded then.",
    ),
]
ScopeRun = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=64,
        description="lineage-sdk extension: as the events of this run, its parent runs and its "
        "child runs describe it (with asOf: those up to that time); 404 naming the run when "
        "they do not name the job or dataset.",
    ),
]

_Events = list[dict[str, Any]]
_Read = Callable[[Engine, str, str], _Events]
_ReadUpTo = Callable[[Engine, str, str, datetime], _Events]


@dataclass(frozen=True)
class _Kind:
    """What a job's reads and a dataset's differ by."""

    type: NodeType
    #: What errors call it.
    what: str
    #: Every event behind its versions: 404 when there are none and it is not recorded at all.
    events: _Read
    #: Those up to a time, bounded on the store's index (no 404 but "nothing by then"); None:
    #: ``events``, filtered by time.
    events_up_to: _ReadUpTo | None
    #: The events behind its Marquez object up to a time, when they are not ``events_up_to``'s.
    node_events_up_to: _ReadUpTo | None
    #: Its events among those of a run's scope (its own, its parents', its children's).
    in_scope: Callable[[Iterable[Mapping[str, Any]], str, str], _Events]
    #: Its Marquez versions, newest first, from its events.
    versions: Callable[[str, str, Sequence[Mapping[str, Any]]], _Events]
    #: Its Marquez object as its events (up to a time) describe it; None before the first.
    fold: Callable[[str, str, _Events, datetime | None], dict[str, Any] | None]
    #: Its Marquez object today when it is not the fold of its events; 404 when unknown.
    present: Callable[[ApiState, Grant, str, str], dict[str, Any]] | None


def _present_job(state: ApiState, grant: Grant, namespace: str, job: str) -> dict[str, Any]:
    """A job today: its latest runs and its edges from the engine's summaries, and what its
    events add (type, facets, location, current version)."""
    store = catalog(state, grant)
    runs = answer(lambda: store.runs_of_job(namespace, job, limit=10))
    graph = answer(lambda: store.lineage(node_id("JOB", namespace, job), depth=0))
    root = graph.nodes.get(graph.root)
    isolated = root is None or not (root.in_edges or root.out_edges)
    known = runs or not isolated or answer(lambda: store.has_node("JOB", namespace, job))
    if not known:
        raise ApiError(404, "not_found", "no job is recorded under this name")
    inputs = sorted(
        (graph.nodes[e.origin].namespace, graph.nodes[e.origin].name)
        for e in (root.in_edges if root else [])
    )
    outputs = sorted(
        (graph.nodes[e.destination].namespace, graph.nodes[e.destination].name)
        for e in (root.out_edges if root else [])
    )
    latest = [marquez.run_from_summary(r) for r in runs]
    data = marquez.job_data(
        namespace,
        job,
        latest_run=latest[0] if latest else None,
        latest_runs=latest,
        inputs=inputs,
        outputs=outputs,
    )
    if _by_statements(grant, None):
        data.update(answer(lambda: queries.job_details(store, namespace, job)))
        return data
    events = answer(lambda: queries.job_events(store, namespace, job))
    data.update(marquez_events.job_details(namespace, job, events))
    return data


# A job's versions are those of its runs (its run events); its object also folds its JobEvents.
_JOB = _Kind(
    type="JOB",
    what="job",
    events=lambda store, namespace, name: store.events_of_job(namespace, name),
    events_up_to=lambda store, namespace, name, as_of: queries.job_events_up_to(
        store, namespace, name, as_of, static=False
    ),
    node_events_up_to=queries.job_events_up_to,
    in_scope=of_job,
    versions=marquez_events.job_versions,
    fold=lambda namespace, name, events, as_of: history_job(events, namespace, name, as_of),
    present=_present_job,
)
# A dataset's reads all fold the events of the runs that touched it and its DatasetEvents.
_DATASET = _Kind(
    type="DATASET",
    what="dataset",
    events=queries.dataset_events,
    events_up_to=None,
    node_events_up_to=None,
    in_scope=of_dataset,
    versions=marquez_events.dataset_versions,
    fold=lambda namespace, name, events, _as_of: marquez_events.dataset_from_events(
        namespace, name, events
    ),
    present=None,
)


def _unknown(kind: _Kind, as_of: datetime | None) -> str:
    """The 404 of a job or dataset with no events (up to ``as_of``): one text for both kinds."""
    when = "" if as_of is None else f" up to {as_of.isoformat()}"
    return f"no {kind.what} is recorded under this name{when}"


def _scope_events(
    kind: _Kind,
    state: ApiState,
    grant: Grant,
    namespace: str,
    name: str,
    *,
    as_of: datetime | None,
    run_id: str,
) -> _Events:
    """The events of run ``run_id``'s scope (its own, its parents' and its children's, up to
    ``as_of``) the key may read that describe the job (its run events) or the dataset (the events
    of the runs that named it); 404 naming the run when there are none (a job or dataset of a
    hidden namespace is named by none)."""
    store = catalog(state, grant)
    scope = answer(lambda: queries.run_scope(store, run_id, as_of=as_of))
    events = kind.in_scope(scope, namespace, name) if grant.may_read(namespace) else []
    if events:
        return events
    when = "" if as_of is None else f" up to {as_of.isoformat()}"
    named = f"{kind.what} {namespace}:{name}{when}"
    raise ApiError(
        404, "not_found", f"run {run_id!r}, its parent and child runs name no {named}"[:300]
    )


def _events(
    kind: _Kind,
    state: ApiState,
    grant: Grant,
    namespace: str,
    name: str,
    as_of: datetime | None,
    run_id: str | None,
    up_to: _ReadUpTo | None,
) -> _Events:
    """The events that describe the job or dataset: those of run ``run_id``'s scope, else its
    own; up to ``as_of`` (read by ``up_to`` on the store's index when given, else read in full
    and filtered). 404 when there are none."""
    if run_id is not None:
        return _scope_events(kind, state, grant, namespace, name, as_of=as_of, run_id=run_id)
    store = catalog(state, grant)
    if as_of is not None and up_to is not None:
        events = answer(lambda: up_to(store, namespace, name, as_of))
    else:
        events = answer(lambda: kind.events(store, namespace, name))
        if not events and not answer(lambda: store.has_node(kind.type, namespace, name)):
            raise ApiError(404, "not_found", _unknown(kind, None))
        if as_of is not None:
            events = events_up_to(events, as_of)
    if as_of is not None and not events:
        raise ApiError(404, "not_found", _unknown(kind, as_of))
    return events


def _node(
    kind: _Kind,
    state: ApiState,
    grant: Grant,
    namespace: str,
    name: str,
    asOf: str | None,
    runId: str | None,
) -> Response:
    """``GET .../jobs/{job}`` and ``.../datasets/{dataset}`` (a dataset by any of its names,
    answered as its node, with its ``otherNames``: a lineage-sdk extension)."""
    as_of = instant(asOf, "asOf")
    if kind.present is not None and as_of is None and runId is None:
        return reply(kind.present(state, grant, namespace, name), grant)
    namespace, name = _named(kind, state, grant, namespace, name)
    stated = _stated(kind, state, grant, namespace, name, as_of, runId)
    if stated is not None:
        store = catalog(state, grant)
        return reply(answer(lambda: queries.dataset_object(store, stated)), grant)
    up_to = kind.node_events_up_to or kind.events_up_to
    events = _events(kind, state, grant, namespace, name, as_of, runId, up_to)
    found = kind.fold(namespace, name, events, as_of)
    if found is None:  # not expected: _events answers 404 rather than no events up to as_of
        raise ApiError(404, "not_found", _unknown(kind, as_of))
    named = other_names(events, (namespace, name)) if kind.type == "DATASET" else []
    aliases = [a for a in named if grant.may_read(a[0])]  # no trace of a hidden one: no []
    if aliases:
        found["otherNames"] = [{"namespace": ns, "name": nm} for ns, nm in aliases]
    return reply(found, grant)


def _by_statements(grant: Grant, run_id: str | None) -> bool:
    """Whether a job's or dataset's reads fold its statements
    (:mod:`~lineage_sdk.collector.engine.statements`) rather than its events: not for a run's
    scope, nor for a key that reads some namespaces only (its sight filters events by their
    filing namespace, which statements do not carry)."""
    return run_id is None and grant.reads_all


def _stated(
    kind: _Kind,
    state: ApiState,
    grant: Grant,
    namespace: str,
    name: str,
    as_of: datetime | None,
    run_id: str | None,
) -> queries.StatedDataset | None:
    """A dataset's statements when its object is read from them (:func:`_by_statements`);
    None (fold its events) otherwise, for a job, or for a dataset without statements."""
    if kind.type != "DATASET" or not _by_statements(grant, run_id):
        return None
    store = catalog(state, grant)
    return answer(lambda: queries.stated_dataset(store, namespace, name, as_of))


def _stated_versions(
    kind: _Kind,
    state: ApiState,
    grant: Grant,
    namespace: str,
    name: str,
    asOf: str | None,
    run_id: str | None,
) -> queries.StatedVersions | None:
    """A job's or dataset's versions from its statements (:func:`_by_statements`); None: fold
    its events."""
    if not _by_statements(grant, run_id):
        return None
    as_of = instant(asOf, "asOf")
    namespace, name = _named(kind, state, grant, namespace, name)
    store = catalog(state, grant)
    return answer(lambda: queries.stated_versions(store, kind.type, namespace, name, as_of))


def _named(
    kind: _Kind, state: ApiState, grant: Grant, namespace: str, name: str
) -> tuple[str, str]:
    """A dataset's name resolved to its node's (every name of a dataset finds it); a job's as
    asked."""
    if kind.type != "DATASET":
        return namespace, name
    store = catalog(state, grant)
    return answer(lambda: store.dataset_name(namespace, name))


def _all_versions(
    kind: _Kind,
    state: ApiState,
    grant: Grant,
    namespace: str,
    name: str,
    asOf: str | None,
    runId: str | None,
) -> _Events:
    """Its Marquez versions, newest first, as of ``asOf`` or run ``runId``'s scope."""
    as_of = instant(asOf, "asOf")
    namespace, name = _named(kind, state, grant, namespace, name)
    events = _events(kind, state, grant, namespace, name, as_of, runId, kind.events_up_to)
    return kind.versions(namespace, name, events)


def _version_list(
    kind: _Kind,
    state: ApiState,
    grant: Grant,
    namespace: str,
    name: str,
    limit: int,
    offset: int,
    asOf: str | None,
    runId: str | None,
) -> Response:
    """``GET .../versions``: one page of them, newest first."""
    stated = _stated_versions(kind, state, grant, namespace, name, asOf, runId)
    if stated is not None:  # only the page's versions are made
        at = list(range(offset, min(offset + limit, len(stated.ids))))
        found = answer(lambda: stated.render(at))
        return reply({"versions": found, "totalCount": len(stated.ids)}, grant)
    page = paged(_all_versions(kind, state, grant, namespace, name, asOf, runId), limit, offset)
    return reply({"versions": page, "totalCount": page.total}, grant)


def _version(
    kind: _Kind,
    state: ApiState,
    grant: Grant,
    namespace: str,
    name: str,
    version: str,
    asOf: str | None,
    runId: str | None,
) -> Response:
    """``GET .../versions/{version}``."""
    stated = _stated_versions(kind, state, grant, namespace, name, asOf, runId)
    if stated is not None:  # only the version asked for is made
        at = [i for i, found in enumerate(stated.ids) if found == version.lower()]
        if at:
            return reply(answer(lambda: stated.render(at))[0], grant)
        raise ApiError(404, "not_found", f"the {kind.what} has no version with this id")
    for item in _all_versions(kind, state, grant, namespace, name, asOf, runId):
        if item["version"] == version.lower():
            return reply(item, grant)
    raise ApiError(404, "not_found", f"the {kind.what} has no version with this id")


@router.get(
    "/api/v1/namespaces/{namespace:path}/jobs",
    response_model=JobList,
    tags=["Jobs"],
    summary="Jobs of a namespace, each with its latest run and state",
    responses=error_responses(401, 503),
)
def get_jobs(
    state: State,
    grant: ReadGrant,
    namespace: Annotated[str, PathParam(description="URL-encoded namespace.")],
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    store = catalog(state, grant)
    jobs = answer(lambda: store.jobs(namespace, limit=limit, offset=offset))
    keys = [(j.namespace, j.name) for j in jobs]
    latest = {k: j.latest_run.run_id for j, k in zip(jobs, keys, strict=True) if j.latest_run}
    fold = marquez_events.NodeFold(answer(lambda: store.node_facts(keys, [], latest)))
    body = [
        {**marquez.job_from_summary(j), **fold.job(*k, full=True)}
        for j, k in zip(jobs, keys, strict=True)
    ]
    return reply({"jobs": body, "totalCount": jobs.total}, grant)


# Served before /jobs/{job:path} (READ_ORDER in routes/__init__.py): {job:path} would otherwise
# swallow '/runs' and '/versions'.
@router.get(
    "/api/v1/namespaces/{namespace:path}/jobs/{job:path}/versions/{version}",
    response_model=JobVersionModel,
    tags=["Jobs"],
    summary="One version of a job (its inputs, outputs and location, shared by its runs)",
    responses=error_responses(401, 404, 422, 503),
)
def get_job_version(
    state: State,
    grant: ReadGrant,
    namespace: str,
    job: str,
    version: Version,
    asOf: AsOf = None,
    runId: ScopeRun = None,
) -> Response:
    return _version(_JOB, state, grant, namespace, job, version, asOf, runId)


@router.get(
    "/api/v1/namespaces/{namespace:path}/jobs/{job:path}/versions",
    response_model=JobVersionList,
    tags=["Jobs"],
    summary="Versions of a job, newest first",
    responses=error_responses(401, 404, 422, 503),
)
def get_job_versions(
    state: State,
    grant: ReadGrant,
    namespace: str,
    job: str,
    limit: Limit = 100,
    offset: Offset = 0,
    asOf: AsOf = None,
    runId: ScopeRun = None,
) -> Response:
    return _version_list(_JOB, state, grant, namespace, job, limit, offset, asOf, runId)


@router.get(
    "/api/v1/namespaces/{namespace:path}/datasets",
    response_model=DatasetList,
    tags=["Datasets"],
    summary="Datasets of a namespace",
    responses=error_responses(401, 503),
)
def get_datasets(
    state: State, grant: ReadGrant, namespace: str, limit: Limit = 100, offset: Offset = 0
) -> Response:
    store = catalog(state, grant)
    pairs = answer(lambda: store.datasets(namespace, limit=limit, offset=offset))
    fold = marquez_events.NodeFold(answer(lambda: store.node_facts([], pairs)))
    body = [{**marquez.dataset_data(*key), **fold.dataset(*key)} for key in pairs]
    return reply({"datasets": body, "totalCount": pairs.total}, grant)


@router.get(
    "/api/v1/namespaces/{namespace:path}/datasets/{dataset:path}/versions/{version}",
    response_model=DatasetVersionModel,
    tags=["Datasets"],
    summary="One version of a dataset (made by the run that wrote it)",
    responses=error_responses(401, 404, 422, 503),
)
def get_dataset_version(
    state: State,
    grant: ReadGrant,
    namespace: str,
    dataset: str,
    version: Version,
    asOf: AsOf = None,
    runId: ScopeRun = None,
) -> Response:
    return _version(_DATASET, state, grant, namespace, dataset, version, asOf, runId)


@router.get(
    "/api/v1/namespaces/{namespace:path}/datasets/{dataset:path}/versions",
    response_model=DatasetVersionList,
    tags=["Datasets"],
    summary="Versions of a dataset, newest first",
    responses=error_responses(401, 404, 422, 503),
)
def get_dataset_versions(
    state: State,
    grant: ReadGrant,
    namespace: str,
    dataset: str,
    limit: Limit = 100,
    offset: Offset = 0,
    asOf: AsOf = None,
    runId: ScopeRun = None,
) -> Response:
    return _version_list(_DATASET, state, grant, namespace, dataset, limit, offset, asOf, runId)


@router.get(
    "/api/v1/namespaces/{namespace:path}/datasets/{dataset:path}",
    response_model=DatasetModel,
    tags=["Datasets"],
    summary="One dataset with its fields (from the schema facet), facets and current version",
    responses=error_responses(401, 404, 422, 503),
)
def get_dataset(
    state: State,
    grant: ReadGrant,
    namespace: str,
    dataset: str,
    asOf: AsOf = None,
    runId: ScopeRun = None,
) -> Response:
    return _node(_DATASET, state, grant, namespace, dataset, asOf, runId)


@router.get(
    "/api/v1/namespaces/{namespace:path}/jobs/{job:path}",
    response_model=JobModel,
    tags=["Jobs"],
    summary="One job with its latest runs and its inputs and outputs",
    responses=error_responses(401, 404, 422, 503),
)
def get_job(
    state: State,
    grant: ReadGrant,
    namespace: str,
    job: str,
    asOf: AsOf = None,
    runId: ScopeRun = None,
) -> Response:
    return _node(_JOB, state, grant, namespace, job, asOf, runId)
