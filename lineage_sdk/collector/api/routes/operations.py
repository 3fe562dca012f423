"""Operations: ``/api/v1/health`` always, ``/metrics`` when the API writes (its service's
Prometheus registry)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from lineage_sdk.collector.api.dependencies import State
from lineage_sdk.collector.api.responses import JSONBody
from lineage_sdk.collector.api.schemas import HealthBody

__all__ = ["health_router", "metrics_router"]

health_router = APIRouter(tags=["Operations"])
metrics_router = APIRouter()


@health_router.get("/api/v1/health", response_model=HealthBody)
async def health(state: State) -> Response:
    return JSONBody(
        {"status": "ok", "ingest": state.service is not None, "query_store": state.query_name}
    )


@metrics_router.get("/metrics", include_in_schema=False)
def metrics(state: State) -> Response:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    if state.service is None:  # not mounted without a service; kept safe anyway
        return Response(status_code=404)
    return Response(generate_latest(state.service.metrics.registry), media_type=CONTENT_TYPE_LATEST)
