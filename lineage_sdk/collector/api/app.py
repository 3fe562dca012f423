"""The collector's HTTP API as an ASGI app: :func:`create_app` assembles the routers.

``create_app`` takes a :class:`LineageManager` (the normal case: events are written through
:class:`LineageCollectorService` like broker messages, and reads are answered by the manager's
:meth:`~LineageManager.query_store`), a single store, or an :class:`Engine` over a backend
(read-only). It never opens or
closes stores: whoever made them owns them (:func:`lineage_sdk.collector.api.server.serve` does
both). What the routes share lives on ``app.state`` (:class:`ApiState`), reached through the
dependencies of :mod:`lineage_sdk.collector.api.dependencies`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fastapi import FastAPI, Request, Response

from lineage_sdk.collector.api.access import AccessPolicy
from lineage_sdk.collector.api.errors import ApiError
from lineage_sdk.collector.api.ingest import Ingestor
from lineage_sdk.collector.api.middleware import KeysNotInUrls, SecurityHeaders
from lineage_sdk.collector.api.responses import JSONBody
from lineage_sdk.collector.api.routes import (
    columns,
    ingest,
    operations,
    page,
    read_router,
    writes,
)
from lineage_sdk.collector.api.state import DEFAULT_MAX_BODY_BYTES, ApiSettings, ApiState
from lineage_sdk.collector.engine import Engine, EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.settings import ApiKeyConfig
from lineage_sdk.collector.store import LineageStoreProtocol
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.version import __version__

__all__ = ["DEFAULT_MAX_BODY_BYTES", "create_app"]

_log = logging.getLogger("lineage_sdk.collector.api")


def _query_store(manager: LineageManager) -> Engine | None:
    try:
        return manager.query_store()
    except ConfigError:
        return None  # ingest still works; reads answer 503 no_query_store


def _resolve(
    target: LineageManager | LineageStoreProtocol | Engine,
) -> tuple[LineageCollectorService | None, Engine | None, str | None]:
    if isinstance(target, LineageManager):
        manager = target
    elif isinstance(target, EngineStore):
        manager = LineageManager(LineageConfig(), stores=[target])
    elif isinstance(target, Engine):  # read-only: whoever writes the backend does it elsewhere
        return None, target, target.name
    else:
        manager = LineageManager(LineageConfig(), stores=[target])
    query = _query_store(manager)
    return LineageCollectorService(manager), query, None if query is None else query.name


async def _api_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    body = exc.body if exc.body is not None else {"detail": exc.detail, "reason": exc.reason}
    body.setdefault("detail", exc.detail)
    body.setdefault("reason", exc.reason)
    return JSONBody(body, status_code=exc.status, headers=exc.headers)


async def _unexpected(_request: Request, exc: Exception) -> Response:
    _log.error("unexpected error in the HTTP API", exc_info=exc)
    return JSONBody(
        {"detail": "internal error; see the server log", "reason": "internal"},
        status_code=500,
    )


def create_app(
    manager_or_store: LineageManager | LineageStoreProtocol | Engine,
    *,
    api_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    protect_reads: bool | None = None,
    service: LineageCollectorService | None = None,
    keys: Mapping[str, ApiKeyConfig] | None = None,
) -> FastAPI:
    """The API as an ASGI app.

    ``api_key``: when set, ingest requires it (``Authorization: Bearer KEY`` or ``X-API-Key:
    KEY``), and so do reads if ``protect_reads``. ``keys``: named keys, each with the namespaces
    it may write and read (see :mod:`lineage_sdk.collector.api.access`); with them, reads need
    a key unless ``protect_reads`` says otherwise (False is refused: ConfigError).
    ``max_body_bytes`` caps request bodies, before and after gzip (413 past it). ``service``
    shares an existing service (and its metrics) when the API runs beside a collector in one
    process.
    """
    settings = ApiSettings(
        access=AccessPolicy(api_key=api_key or None, keys=keys, protect_reads=protect_reads),
        max_body_bytes=max_body_bytes,
    )
    resolved_service, query, query_name = _resolve(manager_or_store)
    service = service or resolved_service

    app = FastAPI(
        title="lineage-sdk collector API",
        version=__version__,
        description=(
            "OpenLineage ingest (`POST /api/v1/lineage`, `/api/v1/lineage/batch`) and a read API "
            "answering in Marquez's response shapes. See docs/api.md."
        ),
        # Swagger UI and ReDoc load their scripts from a CDN; the API serves nothing remote.
        docs_url=None,
        redoc_url=None,
        default_response_class=JSONBody,
    )
    app.state.lineage = ApiState(
        settings=settings,
        service=service,
        query=query,
        query_name=query_name,
        ingestor=Ingestor(service, max_body_bytes),
    )
    app.add_middleware(KeysNotInUrls)
    app.add_middleware(SecurityHeaders)  # added last: outermost, so on every answer
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(Exception, _unexpected)

    app.include_router(ingest.router)
    app.include_router(read_router())
    app.include_router(columns.router)
    app.include_router(writes.router)
    app.include_router(operations.health_router)
    if service is not None:
        app.include_router(operations.metrics_router)
    app.include_router(page.router)
    app.mount("/static", page.static_files(), name="static")
    return app
