"""The Marquez-compatible reads: every GET of Marquez's openapi.yml an event store can answer
(lineage, namespaces, jobs and their versions, runs and their facets, datasets and their versions,
sources, tags, the event log, search, a run's upstream lineage), plus a run's raw events.

Answers come in Marquez's shapes (see ``marquez``); lists are paged by the query store, and
``totalCount`` is the size of the whole answer, not of the page.

Each route takes the request's :class:`~lineage_sdk.collector.api.access.Grant` and asks the store
through the key's view (:func:`~lineage_sdk.collector.api.access.visible`), which holds only what
the key may read: a hidden thing is not there, so it answers as an unknown one by the same code,
with no special case here. Lineage is pruned at unreadable nodes (``queries``), and every answer
goes through :func:`~lineage_sdk.collector.api.access.scrub`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, Query, Response
from fastapi import Path as PathParam

from lineage_sdk.collector.api import marquez, marquez_events, queries
from lineage_sdk.collector.api.access import Grant, scrub, visible
from lineage_sdk.collector.api.dependencies import (
    NodeLimit,
    ReadGrant,
    State,
    answer,
    read_auth,
)
from lineage_sdk.collector.api.errors import ApiError, error_responses
from lineage_sdk.collector.api.history import (
    HistoryUnsupported,
    events_up_to,
    history_job,
    of_dataset,
    of_job,
    parse_instant,
)
from lineage_sdk.collector.api.responses import JSONBody
from lineage_sdk.collector.api.schemas import (
    DatasetList,
    DatasetModel,
    DatasetVersionList,
    DatasetVersionModel,
    FacetsResultModel,
    JobList,
    JobModel,
    JobVersionList,
    JobVersionModel,
    LineageEventList,
    LineageGraphModel,
    NamespaceList,
    NamespaceModel,
    RunList,
    RunModel,
    SearchResultList,
    SourceList,
    SourceModel,
    TagList,
    UpstreamRunLineageModel,
)
from lineage_sdk.collector.api.state import ApiState
from lineage_sdk.collector.records import compute_event_id, parse_event_time
from lineage_sdk.collector.store import (
    DEFAULT_NODE_LIMIT,
    DatasetNamespacesProtocol,
    LineageCatalogProtocol,
    LineageHistoryProtocol,
    NodeType,
    Page,
    names_dataset,
    node_id,
)
from lineage_sdk.exceptions import InvalidEventError

__all__ = ["router"]

_UUID_PATTERN = r"^[0-9A-Fa-f]{8}(-?[0-9A-Fa-f]{4}){3}-?[0-9A-Fa-f]{12}$"

# Parameter types shared by the routes (module level: FastAPI resolves them by name).
Limit = Annotated[int, Query(ge=1, le=1000, description="Most results to return.")]
Offset = Annotated[int, Query(ge=0, le=100_000, description="Results to skip.")]
RunId = Annotated[
    str,
    PathParam(
        min_length=1,
        max_length=64,
        pattern=_UUID_PATTERN,
        description="The run's UUID.",
    ),
]

router = APIRouter(dependencies=read_auth)


Before = Annotated[
    str | None,
    Query(description="Only events before this time (RFC 3339, or YYYY-MM-DD).", max_length=64),
]
After = Annotated[
    str | None,
    Query(
        description="Only events at or after this time (RFC 3339, or YYYY-MM-DD).", max_length=64
    ),
]
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


def _catalog(state: ApiState, grant: Grant) -> LineageCatalogProtocol:
    """The query store as ``grant`` sees it."""
    return visible(state.catalog(), grant)


def _history(state: ApiState, grant: Grant) -> LineageHistoryProtocol:
    """The query store as a history store (the sql, document and graph stores are), as
    ``grant`` sees it."""
    store = _catalog(state, grant)
    if not isinstance(store, LineageHistoryProtocol):
        raise ApiError(
            501,
            "not_supported",
            f"the query store {state.query_name!r} keeps no event history to answer this",
        )
    return store


def _both(store: LineageHistoryProtocol) -> LineageCatalogProtocol:
    """A history store as the catalog it also is (``_history`` answers the query store)."""
    return cast(LineageCatalogProtocol, store)


def _instant(value: str | None, name: str) -> datetime | None:
    """A query parameter's time: RFC 3339 (an offset or Z; none means UTC) or a plain date."""
    if value is None or not value.strip():
        return None
    try:
        return parse_instant(value, name)
    except ValueError as exc:
        raise ApiError(422, "invalid_parameter", str(exc)[:300]) from None


def _ascending(value: str | None) -> bool:
    direction = (value or "desc").strip().lower()
    if direction not in ("asc", "desc"):
        raise ApiError(
            422, "invalid_parameter", f"sortDirection must be asc or desc, got {value!r}"
        )
    return direction == "asc"


def _paged(items: list[Any], limit: int, offset: int) -> Page[Any]:
    return Page(items[offset : offset + limit], len(items))


def _dataset_namespaces(store: LineageCatalogProtocol) -> list[str]:
    """Every namespace holding a dataset: Marquez's sources (see marquez_events). A catalog
    without the one read is asked for one dataset of each namespace."""
    if isinstance(store, DatasetNamespacesProtocol):
        return store.dataset_namespaces()
    return [ns for ns in store.namespaces() if store.datasets(ns, limit=1)]


def _reply(data: Any, grant: Grant, status_code: int = 200) -> Response:
    """The answer as ``grant`` may see it."""
    return JSONBody(scrub(data, grant), status_code=status_code)


def _dataset_events(
    state: ApiState, namespace: str, dataset: str, grant: Grant
) -> list[dict[str, Any]]:
    """The events of the runs that touched a dataset (of readable jobs: a version written by a
    hidden job is not shown); 404 when it is not recorded (or hidden)."""
    store = _history(state, grant)
    events = answer(lambda: queries.dataset_events(store, namespace, dataset))
    if not events and not answer(
        lambda: queries.exists(_both(store), "DATASET", namespace, dataset)
    ):
        raise ApiError(404, "not_found", "no dataset is recorded under this name")
    return events


def _job_events(state: ApiState, namespace: str, job: str, grant: Grant) -> list[dict[str, Any]]:
    store = _history(state, grant)
    events = answer(lambda: store.events_of_job(namespace, job))
    if not events and not answer(lambda: queries.exists(_both(store), "JOB", namespace, job)):
        raise ApiError(404, "not_found", "no job is recorded under this name")
    return events


def _run_events(state: ApiState, run_id: str, grant: Grant) -> list[dict[str, Any]]:
    """A run's events; 404 when it has none the key may read."""
    store = _catalog(state, grant)
    return answer(lambda: queries.run_events(store, run_id))


def _scope_events(
    state: ApiState,
    grant: Grant,
    kind: NodeType,
    namespace: str,
    name: str,
    *,
    as_of: datetime | None,
    run_id: str,
) -> list[dict[str, Any]]:
    """The events of run ``run_id``'s scope (its own, its parents' and its children's, up to
    ``as_of``) the key may read that describe the job (its run events) or the dataset (the events
    of the runs that named it); 404 naming the run when there are none (a job or dataset of a
    hidden namespace is named by none)."""
    what = "job" if kind == "JOB" else "dataset"
    history = _history(state, grant)
    scope = answer(lambda: queries.run_scope(history, run_id, as_of=as_of))
    pick = of_job if kind == "JOB" else of_dataset
    events = pick(scope, namespace, name) if grant.may_read(namespace) else []
    if events:
        return events
    when = "" if as_of is None else f" up to {as_of.isoformat()}"
    raise ApiError(
        404,
        "not_found",
        f"run {run_id!r}, its parent and child runs name no {what} {namespace}:{name}{when}"[:300],
    )


def _job_history(
    state: ApiState,
    grant: Grant,
    namespace: str,
    job: str,
    as_of: datetime | None,
    run_id: str | None,
) -> list[dict[str, Any]]:
    """A job's run events for its versions: all of them, those up to ``as_of`` (bounded on the
    store's index), or those of run ``run_id``'s scope; 404 when none."""
    if run_id is not None:
        return _scope_events(state, grant, "JOB", namespace, job, as_of=as_of, run_id=run_id)
    if as_of is None:
        return _job_events(state, namespace, job, grant)
    history = _history(state, grant)
    events = answer(lambda: queries.job_events_up_to(history, namespace, job, as_of, static=False))
    if not events:
        raise ApiError(
            404, "not_found", f"no job is recorded under this name up to {as_of.isoformat()}"
        )
    return events


def _dataset_history(
    state: ApiState,
    grant: Grant,
    namespace: str,
    dataset: str,
    as_of: datetime | None,
    run_id: str | None,
) -> list[dict[str, Any]]:
    """:func:`_dataset_events`, up to ``as_of`` and/or of run ``run_id``'s scope; 404 when none."""
    if run_id is not None:
        return _scope_events(
            state, grant, "DATASET", namespace, dataset, as_of=as_of, run_id=run_id
        )
    events = _dataset_events(state, namespace, dataset, grant)
    if as_of is not None:
        events = events_up_to(events, as_of)
        if not events:
            raise ApiError(
                404,
                "not_found",
                f"no dataset is recorded under this name up to {as_of.isoformat()}",
            )
    return events


@router.get(
    "/api/v1/lineage",
    response_model=LineageGraphModel,
    tags=["Lineage"],
    summary="The lineage graph around a job or dataset (Marquez's getLineage)",
    responses=error_responses(400, 401, 404, 422, 501, 503),
)
def get_lineage(
    state: State,
    nodeId: Annotated[
        str,
        Query(
            min_length=1,
            max_length=20_000,
            description="dataset:<namespace>:<name> or job:<namespace>:<name>",
        ),
    ],
    grant: ReadGrant,
    depth: Annotated[int, Query(ge=0, le=100, description="Job hops from the node.")] = 20,
    direction: Annotated[
        Literal["both", "upstream", "downstream"],
        Query(description="lineage-sdk extension; Marquez always answers both."),
    ] = "both",
    asOf: Annotated[
        str | None,
        Query(
            max_length=64,
            description="lineage-sdk extension: the graph as the events up to this time "
            "(inclusive; RFC 3339, or YYYY-MM-DD for that day's start) describe it.",
        ),
    ] = None,
    runId: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=64,
            description="lineage-sdk extension: the graph of this run's events, its parent "
            "runs' and its child runs' (walked from nodeId).",
        ),
    ] = None,
    nodeLimit: NodeLimit = DEFAULT_NODE_LIMIT,
) -> Response:
    try:
        queries.parse_node(nodeId)
    except ValueError as exc:
        raise ApiError(400, "invalid_node_id", str(exc)[:300]) from None
    as_of = _instant(asOf, "asOf")
    store = _catalog(state, grant)
    readable = None if grant.reads_all else grant.may_read
    try:
        graph = answer(
            lambda: queries.lineage(
                store,
                nodeId,
                direction=direction,
                depth=depth,
                readable=readable,
                as_of=as_of,
                run_id=runId,
                node_limit=nodeLimit,
            )
        )
    except HistoryUnsupported as exc:
        raise ApiError(501, "not_supported", str(exc)[:300]) from None
    return _reply(graph, grant)


@router.get(
    "/api/v1/namespaces",
    response_model=NamespaceList,
    tags=["Namespaces"],
    summary="Namespaces of the recorded jobs and datasets",
    responses=error_responses(401, 503),
)
def get_namespaces(
    state: State, grant: ReadGrant, limit: Limit = 100, offset: Offset = 0
) -> Response:
    store = _catalog(state, grant)
    names = answer(lambda: store.namespaces(limit=limit, offset=offset))
    return JSONBody({"namespaces": [marquez_events.namespace_data(n) for n in names]})


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
    store = _catalog(state, grant)
    jobs = answer(lambda: store.jobs(namespace, limit=limit, offset=offset))
    body = [marquez.job_from_summary(j) for j in jobs]
    return _reply({"jobs": body, "totalCount": jobs.total}, grant)


@router.get(
    "/api/v1/namespaces/{namespace:path}/jobs/{job:path}/runs",
    response_model=RunList,
    tags=["Jobs"],
    summary="Runs of a job, most recent first, with state and duration",
    responses=error_responses(401, 503),
)
def get_runs(
    state: State,
    grant: ReadGrant,
    namespace: str,
    job: str,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    store = _catalog(state, grant)
    found = answer(lambda: queries.runs(store, namespace, job, limit=limit, offset=offset))
    return JSONBody({"runs": found, "totalCount": found.total})


# Registered before /jobs/{job:path}: {job:path} would otherwise swallow '/runs', '/versions'.
@router.get(
    "/api/v1/namespaces/{namespace:path}/jobs/{job:path}/versions/{version}",
    response_model=JobVersionModel,
    tags=["Jobs"],
    summary="One version of a job (its inputs, outputs and location, shared by its runs)",
    responses=error_responses(401, 404, 422, 501, 503),
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
    events = _job_history(state, grant, namespace, job, _instant(asOf, "asOf"), runId)
    for item in marquez_events.job_versions(namespace, job, events):
        if item["version"] == version.lower():
            return _reply(item, grant)
    raise ApiError(404, "not_found", "the job has no version with this id")


@router.get(
    "/api/v1/namespaces/{namespace:path}/jobs/{job:path}/versions",
    response_model=JobVersionList,
    tags=["Jobs"],
    summary="Versions of a job, newest first",
    responses=error_responses(401, 404, 422, 501, 503),
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
    events = _job_history(state, grant, namespace, job, _instant(asOf, "asOf"), runId)
    page = _paged(marquez_events.job_versions(namespace, job, events), limit, offset)
    return _reply({"versions": page, "totalCount": page.total}, grant)


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
    store = _catalog(state, grant)
    pairs = answer(lambda: store.datasets(namespace, limit=limit, offset=offset))
    body = [marquez.dataset_data(ns, nm) for ns, nm in pairs]
    return JSONBody({"datasets": body, "totalCount": pairs.total})


@router.get(
    "/api/v1/namespaces/{namespace:path}/datasets/{dataset:path}/versions/{version}",
    response_model=DatasetVersionModel,
    tags=["Datasets"],
    summary="One version of a dataset (made by the run that wrote it)",
    responses=error_responses(401, 404, 422, 501, 503),
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
    events = _dataset_history(state, grant, namespace, dataset, _instant(asOf, "asOf"), runId)
    for item in marquez_events.dataset_versions(namespace, dataset, events):
        if item["version"] == version.lower():
            return _reply(item, grant)
    raise ApiError(404, "not_found", "the dataset has no version with this id")


@router.get(
    "/api/v1/namespaces/{namespace:path}/datasets/{dataset:path}/versions",
    response_model=DatasetVersionList,
    tags=["Datasets"],
    summary="Versions of a dataset, newest first",
    responses=error_responses(401, 404, 422, 501, 503),
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
    events = _dataset_history(state, grant, namespace, dataset, _instant(asOf, "asOf"), runId)
    page = _paged(marquez_events.dataset_versions(namespace, dataset, events), limit, offset)
    return _reply({"versions": page, "totalCount": page.total}, grant)


@router.get(
    "/api/v1/namespaces/{namespace:path}/datasets/{dataset:path}",
    response_model=DatasetModel,
    tags=["Datasets"],
    summary="One dataset with its fields (from the schema facet), facets and current version",
    responses=error_responses(401, 404, 422, 501, 503),
)
def get_dataset(
    state: State,
    grant: ReadGrant,
    namespace: str,
    dataset: str,
    asOf: AsOf = None,
    runId: ScopeRun = None,
) -> Response:
    events = _dataset_history(state, grant, namespace, dataset, _instant(asOf, "asOf"), runId)
    return _reply(marquez_events.dataset_from_events(namespace, dataset, events), grant)


@router.get(
    "/api/v1/namespaces/{namespace:path}/jobs/{job:path}",
    response_model=JobModel,
    tags=["Jobs"],
    summary="One job with its latest runs and its inputs and outputs",
    responses=error_responses(401, 404, 422, 501, 503),
)
def get_job(
    state: State,
    grant: ReadGrant,
    namespace: str,
    job: str,
    asOf: AsOf = None,
    runId: ScopeRun = None,
) -> Response:
    as_of = _instant(asOf, "asOf")
    if runId is not None:
        scoped = _scope_events(state, grant, "JOB", namespace, job, as_of=as_of, run_id=runId)
        found = history_job(scoped, namespace, job, as_of)
        if found is None:  # pragma: no cover - _scope_events answered 404 already
            raise ApiError(404, "not_found", "no job is recorded under this name")
        return _reply(found, grant)
    if as_of is not None:
        history = _history(state, grant)
        events = answer(lambda: queries.job_events_up_to(history, namespace, job, as_of))
        past = history_job(events, namespace, job, as_of)
        if past is None:
            raise ApiError(
                404, "not_found", f"no job is recorded under this name up to {as_of.isoformat()}"
            )
        return _reply(past, grant)
    store = _catalog(state, grant)
    runs = answer(lambda: store.runs_of_job(namespace, job, limit=10))
    graph = answer(lambda: store.lineage(node_id("JOB", namespace, job), depth=0))
    root = graph.nodes.get(graph.root)
    isolated = root is None or not (root.in_edges or root.out_edges)
    known = runs or not isolated or answer(lambda: queries.exists(store, "JOB", namespace, job))
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
    if isinstance(store, LineageHistoryProtocol):
        events = answer(lambda: queries.job_events(store, namespace, job))
        data.update(marquez_events.job_details(namespace, job, events))
    return _reply(data, grant)


# Last of the namespace routes: {namespace:path} would otherwise swallow '/jobs' and '/datasets'.
@router.get(
    "/api/v1/namespaces/{namespace:path}",
    response_model=NamespaceModel,
    tags=["Namespaces"],
    summary="One namespace",
    responses=error_responses(401, 404, 503),
)
def get_namespace(state: State, grant: ReadGrant, namespace: str) -> Response:
    store = _catalog(state, grant)
    names = answer(lambda: store.namespaces())
    if namespace not in names:
        raise ApiError(404, "not_found", "no job or dataset is recorded in this namespace")
    return JSONBody(marquez_events.namespace_data(namespace))


@router.get(
    "/api/v1/jobs/runs/{id}",
    response_model=RunModel,
    tags=["Jobs"],
    summary="One run, its state folded from its events",
    responses=error_responses(401, 404, 503),
)
def get_run(state: State, grant: ReadGrant, id: RunId) -> Response:
    events = _run_events(state, id, grant)
    run = marquez.run_from_events(id, events)
    job_version = marquez_events.run_job_version(events)
    if job_version is not None:
        run["jobVersion"] = job_version
    return _reply(run, grant)


@router.get(
    "/api/v1/jobs/runs/{id}/facets",
    response_model=FacetsResultModel,
    tags=["Jobs"],
    summary="A run's run facets or job facets (the latest value of each)",
    responses=error_responses(401, 404, 422, 503),
)
def get_run_facets(
    state: State,
    grant: ReadGrant,
    id: RunId,
    type: Annotated[str, Query(description="run or job (case-insensitive).", max_length=8)] = "run",
) -> Response:
    kind = type.strip().lower()
    if kind not in ("run", "job"):
        raise ApiError(422, "invalid_parameter", f"type must be run or job, got {type!r}")
    events = _run_events(state, id, grant)
    run_id = marquez.run_from_events(id, events)["id"]
    return _reply(marquez_events.facets_of_run(run_id, events, kind), grant)


@router.get(
    "/api/v1/jobs/runs/{id}/events",
    response_model=LineageEventList,
    tags=["Jobs"],
    summary="The raw OpenLineage events of a run, in event-time order (lineage-sdk)",
    responses=error_responses(401, 404, 503),
)
def get_run_events(state: State, grant: ReadGrant, id: RunId) -> Response:
    events = _run_events(state, id, grant)
    return _reply({"events": events, "totalCount": len(events)}, grant)


@router.get(
    "/api/v1/sources",
    response_model=SourceList,
    tags=["Sources"],
    summary="Sources: the namespaces holding datasets",
    responses=error_responses(401, 503),
)
def get_sources(state: State, grant: ReadGrant, limit: Limit = 100, offset: Offset = 0) -> Response:
    store = _catalog(state, grant)
    names = answer(lambda: _dataset_namespaces(store))
    page = _paged(names, limit, offset)
    return JSONBody({"sources": [marquez_events.source_data(n) for n in page]})


@router.get(
    "/api/v1/sources/{source:path}",
    response_model=SourceModel,
    tags=["Sources"],
    summary="One source (a namespace holding datasets)",
    responses=error_responses(401, 404, 503),
)
def get_source(state: State, grant: ReadGrant, source: str) -> Response:
    store = _catalog(state, grant)
    found = answer(lambda: store.datasets(source, limit=1))
    if not found:
        raise ApiError(404, "not_found", "no dataset is recorded in a namespace of this name")
    return JSONBody(marquez_events.source_data(source))


@router.get(
    "/api/v1/tags",
    response_model=TagList,
    tags=["Tags"],
    summary="Tags: the ones Marquez creates at start-up",
    responses=error_responses(401),
)
def get_tags(limit: Limit = 100, offset: Offset = 0) -> Response:
    tags = [dict(t) for t in marquez_events.DEFAULT_TAGS]
    return JSONBody({"tags": tags[offset : offset + limit]})


def _event_log(
    state: ApiState,
    grant: Grant,
    *,
    namespace: str | None,
    before: str | None,
    after: str | None,
    sort: str | None,
    limit: int,
    offset: int,
) -> Response:
    store = _history(state, grant)
    since, until, ascending = _instant(after, "after"), _instant(before, "before"), _ascending(sort)

    def ask(ns: str | None, size: int, skip: int) -> Page[dict[str, Any]]:
        return store.lineage_events(
            before=until, after=since, namespace=ns, ascending=ascending, limit=size, offset=skip
        )

    if grant.reads_all or namespace is not None:
        page = answer(lambda: ask(namespace, limit, offset))
        return _reply({"events": page, "totalCount": page.total}, grant)
    # A key that reads some namespaces: the log of each (one query each, up to the page's
    # end), merged in the store's order (event time, then event id).
    readable = list(answer(lambda: _both(store).namespaces()))
    merged: list[tuple[datetime, str, dict[str, Any]]] = []
    total = 0
    for ns in readable:
        part = answer(lambda ns=ns: ask(ns, offset + limit, 0))  # type: ignore[misc]
        total += part.total
        for event in part:
            when = _event_time(event) or datetime.min.replace(tzinfo=UTC)
            merged.append((when, compute_event_id(event), event))
    merged.sort(key=lambda item: item[:2], reverse=not ascending)
    events = [event for _, _, event in merged[offset : offset + limit]]
    return _reply({"events": events, "totalCount": total}, grant)


SortDirection = Annotated[
    str | None, Query(description="asc or desc (the default), by event time.", max_length=8)
]


@router.get(
    "/api/v1/events/lineage",
    response_model=LineageEventList,
    tags=["Events"],
    summary="The received OpenLineage events, newest first (Marquez's getLineageEvents)",
    responses=error_responses(401, 422, 501, 503),
)
@router.get(
    "/api/v1/events",
    response_model=LineageEventList,
    tags=["Events"],
    summary="The event log, as marquez-python's list_events() asks for it",
    responses=error_responses(401, 422, 501, 503),
)
def get_lineage_events(
    state: State,
    grant: ReadGrant,
    before: Before = None,
    after: After = None,
    sortDirection: SortDirection = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    return _event_log(
        state,
        grant,
        namespace=None,
        before=before,
        after=after,
        sort=sortDirection,
        limit=limit,
        offset=offset,
    )


@router.get(
    "/api/v1/events/{namespace:path}",
    response_model=LineageEventList,
    tags=["Events"],
    summary="The run events of one namespace's jobs (marquez-python's list_events(namespace))",
    responses=error_responses(401, 422, 501, 503),
)
def get_namespace_events(
    state: State,
    grant: ReadGrant,
    namespace: str,
    before: Before = None,
    after: After = None,
    sortDirection: SortDirection = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    return _event_log(
        state,
        grant,
        namespace=namespace,
        before=before,
        after=after,
        sort=sortDirection,
        limit=limit,
        offset=offset,
    )


def _search_pattern(q: str) -> tuple[str, re.Pattern[str]]:
    """Marquez's ``q``: case-insensitive "contains", where ``%`` matches any text and ``_`` one
    character. Returns the longest literal piece (what the store is asked for) and the full
    pattern (what each hit must match)."""
    pieces = re.split(r"[%_]", q)
    literal = max(pieces, key=len)
    body = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in q)
    return literal, re.compile(body, re.IGNORECASE | re.DOTALL)


def _event_time(event: dict[str, Any]) -> datetime | None:
    try:
        return parse_event_time(event.get("eventTime"))
    except InvalidEventError:
        return None


def _updated_at(
    state: ApiState, grant: Grant, kind: NodeType, namespace: str, name: str
) -> datetime | None:
    store = _history(state, grant)
    events = (
        store.events_of_job(namespace, name)
        if kind == "JOB"
        else [
            e for e in store.events_of_dataset(namespace, name) if names_dataset(e, namespace, name)
        ]
    )
    times = [t for t in (_event_time(e) for e in events) if t is not None]
    return max(times) if times else None


@router.get(
    "/api/v1/search",
    response_model=SearchResultList,
    tags=["Search"],
    summary="Jobs and datasets whose name matches the text (case-insensitive; % and _ wildcards)",
    responses=error_responses(401, 422, 503),
)
def search(
    state: State,
    grant: ReadGrant,
    q: Annotated[str, Query(min_length=1, max_length=1000, description="Text to find.")],
    filter: Annotated[
        str | None, Query(description="dataset or job (case-insensitive).", max_length=16)
    ] = None,
    sort: Annotated[
        str | None, Query(description="name (the default) or updated_at.", max_length=16)
    ] = None,
    namespace: Annotated[
        str | None, Query(description="Only this namespace.", max_length=1024)
    ] = None,
    before: Annotated[
        str | None, Query(description="Only updated before this date (YYYY-MM-DD).", max_length=64)
    ] = None,
    after: Annotated[
        str | None, Query(description="Only updated after this date (YYYY-MM-DD).", max_length=64)
    ] = None,
    limit: Limit = 10,
) -> Response:
    kind = (filter or "").strip().upper() or None
    if kind not in (None, "DATASET", "JOB"):
        raise ApiError(422, "invalid_parameter", f"filter must be dataset or job, got {filter!r}")
    order = (sort or "name").strip().lower()
    if order not in ("name", "updated_at", "updatedat"):
        raise ApiError(422, "invalid_parameter", f"sort must be name or updated_at, got {sort!r}")
    since, until = _instant(after, "after"), _instant(before, "before")
    literal, pattern = _search_pattern(q)
    store = _catalog(state, grant)
    hits = answer(lambda: store.search(literal, limit=100_000))
    found = sorted(
        {
            (t, ns, nm)
            for t, ns, nm in hits
            if pattern.search(nm)
            and (kind is None or t == kind)
            and (namespace is None or ns == namespace)
        },
        key=lambda h: (h[2], h[1], h[0]),
    )
    timed = order != "name" or since is not None or until is not None
    updated: dict[tuple[NodeType, str, str], datetime | None] = {}
    if timed:
        for hit in found:
            updated[hit] = answer(lambda hit=hit: _updated_at(state, grant, *hit))  # type: ignore[misc]

        def within(hit: tuple[NodeType, str, str]) -> bool:
            when = updated[hit]
            if since is None and until is None:
                return True
            return (
                when is not None
                and (since is None or when >= since)
                and (until is None or when < until)
            )

        found = [h for h in found if within(h)]
        if order != "name":
            found.sort(key=lambda h: updated[h] or datetime.min.replace(tzinfo=UTC), reverse=True)
    body = marquez.search_results(found[:limit])
    if timed:
        for result, hit in zip(body["results"], found[:limit], strict=True):
            if updated.get(hit) is not None:
                result["updatedAt"] = marquez.iso(updated[hit])  # type: ignore[arg-type]
    return _reply(body, grant)


@router.get(
    "/api/v1/runlineage/upstream",
    response_model=UpstreamRunLineageModel,
    tags=["Lineage"],
    summary="A run and the runs that produced the dataset versions it read, recursively "
    "(Marquez's getRunLineageUpstream)",
    responses=error_responses(401, 404, 501, 503),
)
def get_run_lineage_upstream(
    state: State,
    grant: ReadGrant,
    runId: Annotated[
        str,
        Query(min_length=1, max_length=64, pattern=_UUID_PATTERN, description="The run's UUID."),
    ],
    depth: Annotated[
        int, Query(ge=0, le=100, description="Producer hops from the run (0: the run alone).")
    ] = 20,
    nodeLimit: NodeLimit = DEFAULT_NODE_LIMIT,
) -> Response:
    history = _history(state, grant)
    events = _run_events(state, runId, grant)

    def readable_writers(namespace: str, name: str) -> list[dict[str, Any]]:
        # A producer in a hidden namespace is not named, and the walk does not pass through it.
        return queries.dataset_events(history, namespace, name)

    return _reply(
        answer(
            lambda: marquez_events.upstream_run_lineage(
                events, readable_writers, depth=depth, node_limit=nodeLimit
            )
        ),
        grant,
    )
