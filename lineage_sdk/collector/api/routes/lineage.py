"""The lineage reads: the graph around a job or dataset (Marquez's getLineage) and a run's
upstream run lineage (Marquez's getRunLineageUpstream), each bounded by ``nodeLimit``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response

from lineage_sdk.collector.api import marquez_events, queries
from lineage_sdk.collector.api.dependencies import (
    NodeLimit,
    ReadGrant,
    State,
    answer,
    read_auth,
)
from lineage_sdk.collector.api.errors import ApiError, error_responses
from lineage_sdk.collector.api.routes.common import (
    UUID_PATTERN,
    Since,
    Until,
    catalog,
    instant,
    reply,
    run_events,
)
from lineage_sdk.collector.api.schemas import (
    ImpactModel,
    LineageGraphModel,
    UpstreamRunLineageModel,
)
from lineage_sdk.collector.api.views import check_node, read_view
from lineage_sdk.collector.engine.views import RUN_PREFIX
from lineage_sdk.collector.store import DEFAULT_NODE_LIMIT, GRANULARITIES
from lineage_sdk.collector.watch.impact import impact_answer

__all__ = ["get_impact", "get_lineage", "get_run_lineage_upstream", "router"]

router = APIRouter(dependencies=read_auth)


@router.get(
    "/api/v1/lineage",
    response_model=LineageGraphModel,
    tags=["Lineage"],
    summary="The lineage graph around a job or dataset (Marquez's getLineage)",
    responses=error_responses(400, 401, 404, 422, 503),
)
def get_lineage(
    state: State,
    nodeId: Annotated[
        str,
        Query(
            min_length=1,
            max_length=20_000,
            description="dataset:<namespace>:<name> or job:<namespace>:<name>; with "
            "granularity=run also run:<runId>.",
        ),
    ],
    grant: ReadGrant,
    depth: Annotated[int, Query(ge=0, le=100, description="Job hops from the node.")] = 20,
    direction: Annotated[
        Literal["both", "upstream", "downstream"] | None,
        Query(
            description="lineage-sdk extension: the directed walks (upstream against the data "
            "flow, downstream with it, both the two). Absent: Marquez's walk, every job sharing "
            "any dataset with a job walked, whichever way the data flows, to depth."
        ),
    ] = None,
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
    since: Since = None,
    until: Until = None,
    granularity: Annotated[
        str,
        Query(
            json_schema_extra={"enum": list(GRANULARITIES)},
            description="lineage-sdk extension: the graph's nodes. job (Marquez's answer): jobs "
            "and datasets; dataset: datasets alone, each edge listing the jobs that made it "
            "(data.jobs); run: runs (RUN nodes, run:<runId>) and the datasets they read and "
            "wrote, with parent run links; parent: jobs with a parent job folded into their "
            "root job (data.children). 400 naming it when unknown.",
        ),
    ] = "job",
    marks: Annotated[
        Literal["schema"] | None,
        Query(
            description="lineage-sdk extension: schema marks each dataset node whose last "
            "schema change removed or retyped a field (schemaBreaking: true), in the job view "
            "as it stands now; it reads two runs of each writer, about 40% more of the answer.",
        ),
    ] = None,
) -> Response:
    try:
        asked = read_view(since, until, granularity, as_of=asOf, run_id=runId)
        check_node(nodeId, asked.granularity)
    except ValueError as exc:
        raise ApiError(400, "invalid_parameter", str(exc)[:300]) from None
    if not nodeId.startswith(RUN_PREFIX):
        try:
            queries.parse_node(nodeId)
        except ValueError as exc:
            raise ApiError(400, "invalid_node_id", str(exc)[:300]) from None
    as_of = instant(asOf, "asOf")
    store = catalog(state, grant)
    readable = None if grant.reads_all else grant.may_read
    try:
        graph = answer(
            lambda: queries.lineage(
                store,
                nodeId,
                direction=direction or "undirected",
                depth=depth,
                readable=readable,
                as_of=as_of,
                run_id=runId,
                node_limit=nodeLimit,
                since=asked.since,
                until=asked.until,
                granularity=asked.granularity,
                schema_marks=marks == "schema",
            )
        )
    except ValueError as exc:  # a combination the engine refuses; the message names it
        raise ApiError(400, "invalid_parameter", str(exc)[:300]) from None
    return reply(graph, grant)


@router.get(
    "/api/v1/runlineage/upstream",
    response_model=UpstreamRunLineageModel,
    tags=["Lineage"],
    summary="A run and the runs that produced the dataset versions it read, recursively "
    "(Marquez's getRunLineageUpstream)",
    responses=error_responses(401, 404, 503),
)
def get_run_lineage_upstream(
    state: State,
    grant: ReadGrant,
    runId: Annotated[
        str,
        Query(min_length=1, max_length=64, pattern=UUID_PATTERN, description="The run's UUID."),
    ],
    depth: Annotated[
        int, Query(ge=0, le=100, description="Producer hops from the run (0: the run alone).")
    ] = 20,
    nodeLimit: NodeLimit = DEFAULT_NODE_LIMIT,
) -> Response:
    store = catalog(state, grant)
    events = run_events(state, runId, grant)

    def readable_writers(namespace: str, name: str) -> list[dict[str, Any]]:
        # A producer in a hidden namespace is not named, and the walk does not pass through it.
        return queries.dataset_events(store, namespace, name)

    return reply(
        answer(
            lambda: marquez_events.upstream_run_lineage(
                events, readable_writers, depth=depth, node_limit=nodeLimit
            )
        ),
        grant,
    )


@router.get(
    "/api/v1/impact",
    response_model=ImpactModel,
    tags=["Lineage"],
    summary="Everything downstream of a job or dataset, with distance, latest run and owners "
    "(lineage-sdk extension)",
    responses=error_responses(400, 401, 404, 422, 503),
)
def get_impact(
    state: State,
    grant: ReadGrant,
    nodeId: Annotated[
        str,
        Query(
            min_length=1,
            max_length=20_000,
            description="dataset:<namespace>:<name> or job:<namespace>:<name>.",
        ),
    ],
    depth: Annotated[
        int,
        Query(
            ge=0,
            le=100,
            description="Job hops from the node, as the lineage read counts them (from a job, "
            "0 is its own outputs).",
        ),
    ] = 20,
    nodeLimit: NodeLimit = DEFAULT_NODE_LIMIT,
) -> Response:
    """The jobs and datasets downstream of the node within depth, nearest first (by edges
    along the data flow, then id), each with its latest run (Marquez's state) and its owners
    (``ownership`` facets). A key that may not read a namespace sees no node of it and nothing
    reached through one."""
    try:
        queries.parse_node(nodeId)
    except ValueError as exc:
        raise ApiError(400, "invalid_node_id", str(exc)[:300]) from None
    store = catalog(state, grant)
    readable = None if grant.reads_all else grant.may_read

    def ask() -> dict[str, Any]:
        try:
            return impact_answer(
                store, nodeId, depth=depth, node_limit=nodeLimit, readable=readable
            )
        except LookupError as exc:
            raise queries.NotFound(str(exc)) from None

    return reply(answer(ask), grant)
