"""The run reads: a job's runs, one run with its state folded from its events, its facets, and
its raw events (a lineage-sdk extension)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi import Path as PathParam

from lineage_sdk.collector.api import marquez, marquez_events, queries
from lineage_sdk.collector.api.dependencies import ReadGrant, State, answer, read_auth
from lineage_sdk.collector.api.errors import ApiError, error_responses
from lineage_sdk.collector.api.responses import JSONBody
from lineage_sdk.collector.api.routes.common import (
    UUID_PATTERN,
    Limit,
    Offset,
    catalog,
    reply,
    run_events,
)
from lineage_sdk.collector.api.schemas import (
    FacetsResultModel,
    LineageEventList,
    RunList,
    RunModel,
)

__all__ = ["get_run", "get_run_events", "get_run_facets", "get_runs", "router"]

RunId = Annotated[
    str,
    PathParam(
        min_length=1,
        max_length=64,
        pattern=UUID_PATTERN,
        description="The run's UUID.",
    ),
]

router = APIRouter(dependencies=read_auth)


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
    store = catalog(state, grant)
    found = answer(lambda: queries.runs(store, namespace, job, limit=limit, offset=offset))
    return JSONBody({"runs": found, "totalCount": found.total})


@router.get(
    "/api/v1/jobs/runs/{id}",
    response_model=RunModel,
    tags=["Jobs"],
    summary="One run, its state folded from its events",
    responses=error_responses(401, 404, 503),
)
def get_run(state: State, grant: ReadGrant, id: RunId) -> Response:
    events = run_events(state, id, grant)
    run = marquez.run_from_events(id, events)
    job_version = marquez_events.run_job_version(events)
    if job_version is not None:
        run["jobVersion"] = job_version
    return reply(run, grant)


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
    events = run_events(state, id, grant)
    run_id = marquez.run_from_events(id, events)["id"]
    return reply(marquez_events.facets_of_run(run_id, events, kind), grant)


@router.get(
    "/api/v1/jobs/runs/{id}/events",
    response_model=LineageEventList,
    tags=["Jobs"],
    summary="The raw OpenLineage events of a run, in event-time order (lineage-sdk)",
    responses=error_responses(401, 404, 503),
)
def get_run_events(state: State, grant: ReadGrant, id: RunId) -> Response:
    events = run_events(state, id, grant)
    return reply({"events": events, "totalCount": len(events)}, grant)
