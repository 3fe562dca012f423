"""The Marquez-compatible reads: every GET of Marquez's openapi.yml an event store can answer
(lineage, namespaces, jobs and their versions, runs and their facets, datasets and their versions,
sources, tags, the event log, search, a run's upstream lineage), plus a run's raw events.

Answers come in Marquez's shapes (see ``marquez``); lists are paged by the query store, and
``totalCount`` is the size of the whole answer, not of the page.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response
from fastapi import Path as PathParam

from lineage_sdk.collector.api import marquez, marquez_events, queries
from lineage_sdk.collector.api.dependencies import State, answer, read_auth
from lineage_sdk.collector.api.errors import ApiError, error_responses
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
from lineage_sdk.collector.records import parse_event_time
from lineage_sdk.collector.store import (
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


def _history(state: ApiState) -> LineageHistoryProtocol:
    """The query store as a history store (the sql, document and graph stores are)."""
    store = state.catalog()
    if not isinstance(store, LineageHistoryProtocol):
        raise ApiError(
            501,
            "not_supported",
            f"the query store {state.query_name!r} keeps no event history to answer this",
        )
    return store


def _instant(value: str | None, name: str) -> datetime | None:
    """A query parameter's time: RFC 3339 (an offset or Z; none means UTC) or a plain date."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        if len(text) == 10:
            return datetime.combine(date.fromisoformat(text), datetime.min.time(), tzinfo=UTC)
        parsed = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise ApiError(
            422, "invalid_parameter", f"{name} must be an RFC 3339 time or YYYY-MM-DD, got {text!r}"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


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
    """Every namespace holding a dataset: Marquez's sources (see marquez_events)."""
    found: set[str] = set()
    offset = 0
    while True:
        page = store.datasets(None, limit=1000, offset=offset)
        found.update(ns for ns, _ in page)
        offset += len(page)
        if not page or offset >= page.total:
            return sorted(found)


def _dataset_events(state: ApiState, namespace: str, dataset: str) -> list[dict[str, Any]]:
    """The events of the runs that touched a dataset; 404 when it is not recorded at all."""
    store = _history(state)
    events = answer(lambda: store.events_of_dataset(namespace, dataset))
    if not events and not answer(
        lambda: queries.exists(state.catalog(), "DATASET", namespace, dataset)
    ):
        raise ApiError(404, "not_found", "no dataset is recorded under this name")
    return events


def _job_events(state: ApiState, namespace: str, job: str) -> list[dict[str, Any]]:
    store = _history(state)
    events = answer(lambda: store.events_of_job(namespace, job))
    if not events and not answer(lambda: queries.exists(state.catalog(), "JOB", namespace, job)):
        raise ApiError(404, "not_found", "no job is recorded under this name")
    return events


@router.get(
    "/api/v1/lineage",
    response_model=LineageGraphModel,
    tags=["Lineage"],
    summary="The lineage graph around a job or dataset (Marquez's getLineage)",
    responses=error_responses(400, 401, 404, 503),
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
    depth: Annotated[int, Query(ge=0, le=100, description="Job hops from the node.")] = 20,
    direction: Annotated[
        Literal["both", "upstream", "downstream"],
        Query(description="lineage-sdk extension; Marquez always answers both."),
    ] = "both",
) -> Response:
    try:
        queries.parse_node(nodeId)
    except ValueError as exc:
        raise ApiError(400, "invalid_node_id", str(exc)[:300]) from None
    store = state.catalog()
    return JSONBody(
        answer(lambda: queries.lineage(store, nodeId, direction=direction, depth=depth))
    )


@router.get(
    "/api/v1/namespaces",
    response_model=NamespaceList,
    tags=["Namespaces"],
    summary="Namespaces of the recorded jobs and datasets",
    responses=error_responses(401, 503),
)
def get_namespaces(state: State, limit: Limit = 100, offset: Offset = 0) -> Response:
    store = state.catalog()
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
    namespace: Annotated[str, PathParam(description="URL-encoded namespace.")],
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    store = state.catalog()
    jobs = answer(lambda: store.jobs(namespace, limit=limit, offset=offset))
    body = [marquez.job_from_summary(j) for j in jobs]
    return JSONBody({"jobs": body, "totalCount": jobs.total})


@router.get(
    "/api/v1/namespaces/{namespace:path}/jobs/{job:path}/runs",
    response_model=RunList,
    tags=["Jobs"],
    summary="Runs of a job, most recent first, with state and duration",
    responses=error_responses(401, 503),
)
def get_runs(
    state: State, namespace: str, job: str, limit: Limit = 100, offset: Offset = 0
) -> Response:
    store = state.catalog()
    found = answer(lambda: queries.runs(store, namespace, job, limit=limit, offset=offset))
    return JSONBody({"runs": found, "totalCount": found.total})


# Registered before /jobs/{job:path}: {job:path} would otherwise swallow '/runs', '/versions'.
@router.get(
    "/api/v1/namespaces/{namespace:path}/jobs/{job:path}/versions/{version}",
    response_model=JobVersionModel,
    tags=["Jobs"],
    summary="One version of a job (its inputs, outputs and location, shared by its runs)",
    responses=error_responses(401, 404, 501, 503),
)
def get_job_version(state: State, namespace: str, job: str, version: Version) -> Response:
    events = _job_events(state, namespace, job)
    for item in marquez_events.job_versions(namespace, job, events):
        if item["version"] == version.lower():
            return JSONBody(item)
    raise ApiError(404, "not_found", "the job has no version with this id")


@router.get(
    "/api/v1/namespaces/{namespace:path}/jobs/{job:path}/versions",
    response_model=JobVersionList,
    tags=["Jobs"],
    summary="Versions of a job, newest first",
    responses=error_responses(401, 404, 501, 503),
)
def get_job_versions(
    state: State, namespace: str, job: str, limit: Limit = 100, offset: Offset = 0
) -> Response:
    events = _job_events(state, namespace, job)
    page = _paged(marquez_events.job_versions(namespace, job, events), limit, offset)
    return JSONBody({"versions": page, "totalCount": page.total})


@router.get(
    "/api/v1/namespaces/{namespace:path}/datasets",
    response_model=DatasetList,
    tags=["Datasets"],
    summary="Datasets of a namespace",
    responses=error_responses(401, 503),
)
def get_datasets(state: State, namespace: str, limit: Limit = 100, offset: Offset = 0) -> Response:
    store = state.catalog()
    pairs = answer(lambda: store.datasets(namespace, limit=limit, offset=offset))
    body = [marquez.dataset_data(ns, nm) for ns, nm in pairs]
    return JSONBody({"datasets": body, "totalCount": pairs.total})


@router.get(
    "/api/v1/namespaces/{namespace:path}/datasets/{dataset:path}/versions/{version}",
    response_model=DatasetVersionModel,
    tags=["Datasets"],
    summary="One version of a dataset (made by the run that wrote it)",
    responses=error_responses(401, 404, 501, 503),
)
def get_dataset_version(state: State, namespace: str, dataset: str, version: Version) -> Response:
    events = _dataset_events(state, namespace, dataset)
    for item in marquez_events.dataset_versions(namespace, dataset, events):
        if item["version"] == version.lower():
            return JSONBody(item)
    raise ApiError(404, "not_found", "the dataset has no version with this id")


@router.get(
    "/api/v1/namespaces/{namespace:path}/datasets/{dataset:path}/versions",
    response_model=DatasetVersionList,
    tags=["Datasets"],
    summary="Versions of a dataset, newest first",
    responses=error_responses(401, 404, 501, 503),
)
def get_dataset_versions(
    state: State, namespace: str, dataset: str, limit: Limit = 100, offset: Offset = 0
) -> Response:
    events = _dataset_events(state, namespace, dataset)
    page = _paged(marquez_events.dataset_versions(namespace, dataset, events), limit, offset)
    return JSONBody({"versions": page, "totalCount": page.total})


@router.get(
    "/api/v1/namespaces/{namespace:path}/datasets/{dataset:path}",
    response_model=DatasetModel,
    tags=["Datasets"],
    summary="One dataset with its fields (from the schema facet), facets and current version",
    responses=error_responses(401, 404, 501, 503),
)
def get_dataset(state: State, namespace: str, dataset: str) -> Response:
    events = _dataset_events(state, namespace, dataset)
    return JSONBody(marquez_events.dataset_from_events(namespace, dataset, events))


@router.get(
    "/api/v1/namespaces/{namespace:path}/jobs/{job:path}",
    response_model=JobModel,
    tags=["Jobs"],
    summary="One job with its latest runs and its inputs and outputs",
    responses=error_responses(401, 404, 503),
)
def get_job(state: State, namespace: str, job: str) -> Response:
    store = state.catalog()
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
        events = answer(lambda: store.events_of_job(namespace, job))
        data.update(marquez_events.job_details(namespace, job, events))
    return JSONBody(data)


# Last of the namespace routes: {namespace:path} would otherwise swallow '/jobs' and '/datasets'.
@router.get(
    "/api/v1/namespaces/{namespace:path}",
    response_model=NamespaceModel,
    tags=["Namespaces"],
    summary="One namespace",
    responses=error_responses(401, 404, 503),
)
def get_namespace(state: State, namespace: str) -> Response:
    store = state.catalog()
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
def get_run(state: State, id: RunId) -> Response:
    store = state.catalog()
    events = answer(lambda: queries.run_events(store, id))
    run = marquez.run_from_events(id, events)
    job_version = marquez_events.run_job_version(events)
    if job_version is not None:
        run["jobVersion"] = job_version
    return JSONBody(run)


@router.get(
    "/api/v1/jobs/runs/{id}/facets",
    response_model=FacetsResultModel,
    tags=["Jobs"],
    summary="A run's run facets or job facets (the latest value of each)",
    responses=error_responses(401, 404, 422, 503),
)
def get_run_facets(
    state: State,
    id: RunId,
    type: Annotated[str, Query(description="run or job (case-insensitive).", max_length=8)] = "run",
) -> Response:
    kind = type.strip().lower()
    if kind not in ("run", "job"):
        raise ApiError(422, "invalid_parameter", f"type must be run or job, got {type!r}")
    store = state.catalog()
    events = answer(lambda: queries.run_events(store, id))
    run_id = marquez.run_from_events(id, events)["id"]
    return JSONBody(marquez_events.facets_of_run(run_id, events, kind))


@router.get(
    "/api/v1/jobs/runs/{id}/events",
    response_model=LineageEventList,
    tags=["Jobs"],
    summary="The raw OpenLineage events of a run, in event-time order (lineage-sdk)",
    responses=error_responses(401, 404, 503),
)
def get_run_events(state: State, id: RunId) -> Response:
    store = state.catalog()
    events = answer(lambda: queries.run_events(store, id))
    return JSONBody({"events": events, "totalCount": len(events)})


@router.get(
    "/api/v1/sources",
    response_model=SourceList,
    tags=["Sources"],
    summary="Sources: the namespaces holding datasets",
    responses=error_responses(401, 503),
)
def get_sources(state: State, limit: Limit = 100, offset: Offset = 0) -> Response:
    store = state.catalog()
    page = _paged(answer(lambda: _dataset_namespaces(store)), limit, offset)
    return JSONBody({"sources": [marquez_events.source_data(n) for n in page]})


@router.get(
    "/api/v1/sources/{source:path}",
    response_model=SourceModel,
    tags=["Sources"],
    summary="One source (a namespace holding datasets)",
    responses=error_responses(401, 404, 503),
)
def get_source(state: State, source: str) -> Response:
    store = state.catalog()
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
    *,
    namespace: str | None,
    before: str | None,
    after: str | None,
    sort: str | None,
    limit: int,
    offset: int,
) -> Response:
    store = _history(state)
    page = answer(
        lambda: store.lineage_events(
            before=_instant(before, "before"),
            after=_instant(after, "after"),
            namespace=namespace,
            ascending=_ascending(sort),
            limit=limit,
            offset=offset,
        )
    )
    return JSONBody({"events": page, "totalCount": page.total})


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
def get_lineage_events(
    state: State,
    before: Before = None,
    after: After = None,
    sortDirection: SortDirection = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    return _event_log(
        state,
        namespace=None,
        before=before,
        after=after,
        sort=sortDirection,
        limit=limit,
        offset=offset,
    )


@router.get(
    "/api/v1/events",
    response_model=LineageEventList,
    tags=["Events"],
    summary="The event log, as marquez-python's list_events() asks for it",
    responses=error_responses(401, 422, 501, 503),
)
def get_events(
    state: State,
    before: Before = None,
    after: After = None,
    sortDirection: SortDirection = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    return _event_log(
        state,
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
    namespace: str,
    before: Before = None,
    after: After = None,
    sortDirection: SortDirection = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    return _event_log(
        state,
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


def _updated_at(state: ApiState, kind: NodeType, namespace: str, name: str) -> datetime | None:
    store = _history(state)
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
    store = state.catalog()
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
            updated[hit] = answer(lambda hit=hit: _updated_at(state, *hit))  # type: ignore[misc]

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
    return JSONBody(body)


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
    runId: Annotated[
        str,
        Query(min_length=1, max_length=64, pattern=_UUID_PATTERN, description="The run's UUID."),
    ],
    depth: Annotated[
        int, Query(ge=0, le=100, description="Producer hops from the run (0: the run alone).")
    ] = 20,
) -> Response:
    history = _history(state)
    events = answer(lambda: queries.run_events(state.catalog(), runId))
    return JSONBody(
        answer(
            lambda: marquez_events.upstream_run_lineage(
                events, history.events_of_dataset, depth=depth
            )
        )
    )
