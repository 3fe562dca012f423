"""The Marquez-compatible reads: lineage, namespaces, jobs, runs, datasets, run events, search.

Answers come in Marquez's shapes (see ``marquez``); lists are paged by the query store, and
``totalCount`` is the size of the whole answer, not of the page.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response
from fastapi import Path as PathParam

from lineage_sdk.collector.api import marquez, queries
from lineage_sdk.collector.api.dependencies import State, answer, read_auth
from lineage_sdk.collector.api.errors import ApiError, error_responses
from lineage_sdk.collector.api.responses import JSONBody
from lineage_sdk.collector.api.schemas import (
    DatasetList,
    JobList,
    JobModel,
    LineageEventList,
    LineageGraphModel,
    NamespaceList,
    RunList,
    RunModel,
    SearchResultList,
)
from lineage_sdk.collector.store import node_id

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
    return JSONBody({"namespaces": [{"name": n} for n in names]})


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


# Registered after the routes above: {job:path} would otherwise swallow '/runs'.
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
    return JSONBody(
        marquez.job_data(
            namespace,
            job,
            latest_run=latest[0] if latest else None,
            latest_runs=latest,
            inputs=inputs,
            outputs=outputs,
        )
    )


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
    return JSONBody(marquez.run_from_events(id, events))


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
    "/api/v1/search",
    response_model=SearchResultList,
    tags=["Search"],
    summary="Jobs and datasets whose name contains the text (case-insensitive)",
    responses=error_responses(401, 503),
)
def search(
    state: State,
    q: Annotated[str, Query(min_length=1, max_length=1000, description="Text to find.")],
    filter: Annotated[
        Literal["dataset", "job", "DATASET", "JOB"] | None,
        Query(description="Only datasets or only jobs."),
    ] = None,
    limit: Limit = 50,
) -> Response:
    store = state.catalog()
    hits = answer(lambda: store.search(q, limit=limit if filter is None else 1000))
    if filter is not None:
        hits = [h for h in hits if h[0] == filter.upper()][:limit]
    return JSONBody(marquez.search_results(hits))
