"""OpenLineage ingest: ``POST /api/v1/lineage`` and ``/api/v1/lineage/batch``."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from lineage_sdk.collector.api.dependencies import JsonBody, State, WriteGrant, write_auth
from lineage_sdk.collector.api.errors import error_responses
from lineage_sdk.collector.api.responses import JSONBody
from lineage_sdk.collector.api.schemas import BatchResult, IngestAccepted

__all__ = ["router"]

router = APIRouter(tags=["OpenLineage"], dependencies=write_auth)


@router.post(
    "/api/v1/lineage",
    status_code=201,
    response_model=IngestAccepted,
    summary="Record one OpenLineage event (RunEvent, DatasetEvent or JobEvent)",
    responses=error_responses(400, 401, 403, 413, 415, 422, 503),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
)
async def post_lineage(
    request: Request, body: JsonBody, state: State, grant: WriteGrant
) -> Response:
    encoding = request.headers.get("content-encoding")
    result = await state.ingestor.single(body, encoding, grant)
    return JSONBody(result, status_code=201)


@router.post(
    "/api/v1/lineage/batch",
    response_model=BatchResult,
    summary="Record a batch of OpenLineage events, with per-event outcomes",
    description=(
        "Follows the OpenLineage spec's `/lineage/batch`: valid events are stored even when "
        "others are not; `failed_events` lists each failure by index (an event targeting a "
        "namespace the key may not write fails with reason `forbidden: ...`). 200 when at "
        "least one event was stored; 400 (all invalid), 403 (none writable by the key) or 503 "
        "(store unavailable) carry the same body with status `failure`."
    ),
    responses={
        **error_responses(401, 413, 415, 422),
        400: {"model": BatchResult, "description": "No event of the batch is valid."},
        403: {
            "model": BatchResult,
            "description": "The key may write no valid event of the batch.",
        },
        503: {"model": BatchResult, "description": "The store is unavailable; retry."},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"type": "array", "items": {"type": "object"}}}
            },
        }
    },
)
async def post_lineage_batch(
    request: Request, body: JsonBody, state: State, grant: WriteGrant
) -> Response:
    encoding = request.headers.get("content-encoding")
    status, result = await state.ingestor.batch(body, encoding, grant)
    return JSONBody(result, status_code=status)
