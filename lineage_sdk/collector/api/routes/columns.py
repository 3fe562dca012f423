"""``GET /api/v1/column-lineage``: Marquez's column-lineage graph, from the querying store.

The answer is Marquez's ``Lineage`` of ``DATASET_FIELD`` nodes, each listing its ``inputFields``
(with the facet's transformations) within the answer; as in Marquez, every edge of a node starts
at the node (``inEdges`` to its inputs, ``outEdges`` to the fields derived from it). Upstream
only unless ``withDownstream=true``, as in Marquez, whose default ``depth`` (20) it keeps.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from lineage_sdk.collector.api import queries
from lineage_sdk.collector.api.access import scrub, visible
from lineage_sdk.collector.api.dependencies import (
    NodeLimit,
    ReadGrant,
    State,
    answer,
    read_auth,
)
from lineage_sdk.collector.api.errors import ApiError, error_responses
from lineage_sdk.collector.api.history import parse_instant
from lineage_sdk.collector.api.responses import JSONBody
from lineage_sdk.collector.api.routes.common import Since, Until
from lineage_sdk.collector.api.schemas import Windowed
from lineage_sdk.collector.api.views import read_view
from lineage_sdk.collector.columns import parse_column_node
from lineage_sdk.collector.store import DEFAULT_NODE_LIMIT

__all__ = ["ColumnLineageGraph", "router"]

router = APIRouter(dependencies=read_auth)


class _Doc(BaseModel):
    model_config = ConfigDict(extra="allow")


class ColumnInputField(_Doc):
    """One input of a field; transformation keys are present only when the facet states them."""

    namespace: str
    dataset: str
    field: str
    transformations: list[dict[str, Any]] | None = Field(
        default=None, description="The current facet's transformations (type, subtype, ...)."
    )
    transformationDescription: str | None = Field(
        default=None, description="The 1-0-x facet's description of the transformation."
    )
    transformationType: str | None = None


class ColumnNodeData(_Doc):
    namespace: str
    dataset: str
    field: str
    inputFields: list[ColumnInputField]


class ColumnEdgeModel(_Doc):
    origin: str
    destination: str


class ColumnGraphNode(_Doc):
    id: str = Field(description="datasetField:<namespace>:<dataset>:<field>")
    type: str = Field(description="Always DATASET_FIELD.")
    data: ColumnNodeData
    inEdges: list[ColumnEdgeModel]
    outEdges: list[ColumnEdgeModel]


class ColumnLineageGraph(Windowed):
    graph: list[ColumnGraphNode]


@router.get(
    "/api/v1/column-lineage",
    response_model=ColumnLineageGraph,
    tags=["Column lineage"],
    summary="The column-lineage graph of a field or a dataset (Marquez's getColumnLineage)",
    responses=error_responses(400, 401, 404, 422, 503),
)
def get_column_lineage(
    state: State,
    grant: ReadGrant,
    nodeId: Annotated[
        str,
        Query(
            min_length=1,
            max_length=20_000,
            description="datasetField:<namespace>:<dataset>:<field>, or dataset:<namespace>:"
            "<dataset> for every field of the dataset that column lineage names",
        ),
    ],
    depth: Annotated[int, Query(ge=0, le=100, description="Column hops from the node.")] = 20,
    withDownstream: Annotated[
        bool, Query(description="Also the fields derived from the node's fields.")
    ] = False,
    asOf: Annotated[
        str | None,
        Query(
            max_length=64,
            description="lineage-sdk extension: as the events up to this time (inclusive; "
            "RFC 3339, or YYYY-MM-DD for that day's start) state it.",
        ),
    ] = None,
    runId: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=64,
            description="lineage-sdk extension: as the events of this run, its parent runs and "
            "its child runs state it (with asOf: those up to that time); 404 naming the run "
            "when it has no events.",
        ),
    ] = None,
    nodeLimit: NodeLimit = DEFAULT_NODE_LIMIT,
    since: Since = None,
    until: Until = None,
    granularity: Annotated[
        str,
        Query(
            json_schema_extra={"enum": ["job"]},
            description="lineage-sdk extension: column lineage answers at granularity job only "
            "(the other views are /api/v1/lineage's); 400 naming it otherwise.",
        ),
    ] = "job",
) -> Response:
    try:
        window = read_view(since, until, granularity, as_of=asOf, run_id=runId, allowed=("job",))
    except ValueError as exc:
        raise ApiError(400, "invalid_parameter", str(exc)[:300]) from None
    try:
        parse_column_node(nodeId)
    except ValueError as exc:
        raise ApiError(400, "invalid_node_id", str(exc)[:300]) from None
    try:
        as_of = None if asOf is None or not asOf.strip() else parse_instant(asOf, "asOf")
    except ValueError as exc:
        raise ApiError(422, "invalid_parameter", str(exc)[:300]) from None
    store = visible(state.catalog(), grant)
    readable = None if grant.reads_all else grant.may_read
    try:
        graph = answer(
            lambda: queries.column_lineage(
                store,
                nodeId,
                depth=depth,
                with_downstream=withDownstream,
                readable=readable,
                as_of=as_of,
                run_id=runId,
                node_limit=nodeLimit,
                since=window.since,
                until=window.until,
            )
        )
    except ValueError as exc:  # a combination the engine refuses; the message names it
        raise ApiError(400, "invalid_parameter", str(exc)[:300]) from None
    return JSONBody(scrub(graph, grant))
