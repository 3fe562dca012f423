"""The collector's HTTP API: OpenLineage ingest, a Marquez-compatible read API, and the graph page.

``create_app`` takes a :class:`LineageManager` (the normal case: events are written through
:class:`LineageCollectorService` like broker messages, and reads are answered by the first
configured store that supports queries: ``sql``, else ``graph``, else any other), a single store,
or a read-only catalog. It never opens or closes stores: whoever made them owns them
(:func:`lineage_sdk.collector.api.server.serve` does both).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import orjson
from fastapi import Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lineage_sdk.collector.api import marquez, queries
from lineage_sdk.collector.api.errors import ApiError, error_responses
from lineage_sdk.collector.api.ingest import Ingestor
from lineage_sdk.collector.api.schemas import (
    BatchResult,
    DatasetList,
    HealthBody,
    IngestAccepted,
    JobList,
    JobModel,
    LineageEventList,
    LineageGraphModel,
    NamespaceList,
    RunList,
    RunModel,
    SearchResultList,
)
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.store import (
    LineageCatalogProtocol,
    LineageStoreProtocol,
    node_id,
)
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import StoreError
from lineage_sdk.version import __version__

__all__ = ["DEFAULT_MAX_BODY_BYTES", "STATIC_DIR", "create_app", "pick_query_store"]

DEFAULT_MAX_BODY_BYTES = 4 << 20
STATIC_DIR = Path(__file__).parent / "static"
_log = logging.getLogger("lineage_sdk.collector.api")
_T = TypeVar("_T")
_UUID_PATTERN = r"^[0-9A-Fa-f]{8}(-?[0-9A-Fa-f]{4}){3}-?[0-9A-Fa-f]{12}$"

# The page runs only its own scripts and talks only to this server; data never becomes markup.
_PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
_JSON_TYPES = ("application/json",)


# Parameter types shared by the read routes (module level: FastAPI resolves them by name).
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


class JSONBody(JSONResponse):
    """orjson-encoded JSON: the lineage answers are big, and FastAPI's encoder is slow for them.
    (A JSONResponse subclass, so FastAPI documents each route's response model in OpenAPI.)"""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class _SecurityHeaders:
    """Pure ASGI middleware adding nosniff & co. to every answer, and the CSP to HTML."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def _send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend(_SECURITY_HEADERS)
                ctype = next((v for k, v in headers if k == b"content-type"), b"")
                if ctype.startswith(b"text/html"):
                    headers.append((b"content-security-policy", _PAGE_CSP.encode()))
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, _send)


def _catalog_of(store: Any) -> LineageCatalogProtocol | None:
    return store if isinstance(store, LineageCatalogProtocol) else None


def pick_query_store(stores: Sequence[Any]) -> LineageCatalogProtocol | None:
    """The store that answers reads: ``sql`` first, then ``graph``, then any other catalog.

    Composite stores are looked into, so a ``[document, graph, sql]`` composite reads from sql.
    """
    leaves: list[Any] = []
    for store in stores:
        inner = getattr(store, "stores", None)
        leaves.extend(inner if isinstance(inner, list) else [store])
    catalogs = [s for s in leaves if _catalog_of(s) is not None]
    for preferred in ("sql", "graph"):
        for store in catalogs:
            if getattr(store, "name", None) == preferred:
                return _catalog_of(store)
    return _catalog_of(catalogs[0]) if catalogs else None


def _resolve(
    target: LineageManager | LineageStoreProtocol | LineageCatalogProtocol,
) -> tuple[LineageCollectorService | None, LineageCatalogProtocol | None, str | None]:
    if isinstance(target, LineageManager):
        query = pick_query_store(target.stores)
        return LineageCollectorService(target), query, getattr(query, "name", None)
    if isinstance(target, LineageStoreProtocol):
        manager = LineageManager(LineageConfig(), stores=[target])
        query = pick_query_store([target])
        return LineageCollectorService(manager), query, getattr(query, "name", None)
    if isinstance(target, LineageCatalogProtocol):
        return None, target, getattr(target, "name", type(target).__name__)
    raise TypeError(
        "create_app needs a LineageManager, a store or a LineageCatalogProtocol, "
        f"got {type(target).__name__}"
    )


def create_app(
    manager_or_store: LineageManager | LineageStoreProtocol | LineageCatalogProtocol,
    *,
    api_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    protect_reads: bool = False,
    service: LineageCollectorService | None = None,
) -> FastAPI:
    """The API as an ASGI app.

    ``api_key``: when set, ingest requires it (``Authorization: Bearer KEY`` or ``X-API-Key:
    KEY``), and so do reads if ``protect_reads``. ``max_body_bytes`` caps request bodies, before
    and after gzip (413 past it). ``service`` shares an existing service (and its metrics) when
    the API runs beside a collector in one process.
    """
    if max_body_bytes < 1:
        raise ValueError("max_body_bytes must be at least 1")
    resolved_service, query, query_name = _resolve(manager_or_store)
    service = service or resolved_service
    ingestor = Ingestor(service, max_body_bytes)
    expected_key = api_key.encode() if api_key else None

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
    app.add_middleware(_SecurityHeaders)

    # -- errors -----------------------------------------------------------------------------

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> Response:
        body = exc.body if exc.body is not None else {"detail": exc.detail, "reason": exc.reason}
        body.setdefault("detail", exc.detail)
        body.setdefault("reason", exc.reason)
        return JSONBody(body, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> Response:
        _log.error("unexpected error in the HTTP API", exc_info=exc)
        return JSONBody(
            {"detail": "internal error; see the server log", "reason": "internal"},
            status_code=500,
        )

    # -- authentication and bodies ----------------------------------------------------------

    def _check_key(request: Request) -> None:
        if expected_key is None:
            return
        given: str | None = request.headers.get("x-api-key")
        auth = request.headers.get("authorization")
        if given is None and auth:
            scheme, _, token = auth.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                given = token.strip()
        challenge = {"WWW-Authenticate": 'Bearer realm="lineage"'}
        if given is None:
            raise ApiError(
                401,
                "unauthorized",
                "an API key is required: send Authorization: Bearer <key> or X-API-Key: <key>",
                headers=challenge,
            )
        if not hmac.compare_digest(given.encode(), expected_key):
            raise ApiError(401, "unauthorized", "the API key is not valid", headers=challenge)

    def _check_read_key(request: Request) -> None:
        if protect_reads:
            _check_key(request)

    write_auth = [Depends(_check_key)]
    read_auth = [Depends(_check_read_key)]

    async def _json_body(request: Request) -> bytes:
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media not in _JSON_TYPES and not media.endswith("+json"):
            raise ApiError(
                415,
                "unsupported_media_type",
                f"Content-Type must be application/json, got {media or 'none'!r}",
            )
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                raise ApiError(400, "bad_request", "Content-Length is not a number")
            if int(declared) > max_body_bytes:
                raise ApiError(
                    413,
                    "too_large",
                    f"body of {declared} bytes exceeds the {max_body_bytes}-byte limit",
                )
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body_bytes:
                raise ApiError(413, "too_large", f"body exceeds the {max_body_bytes}-byte limit")
            chunks.append(chunk)
        return b"".join(chunks)

    # -- ingest -----------------------------------------------------------------------------

    @app.post(
        "/api/v1/lineage",
        status_code=201,
        response_model=IngestAccepted,
        dependencies=write_auth,
        tags=["OpenLineage"],
        summary="Record one OpenLineage event (RunEvent, DatasetEvent or JobEvent)",
        responses=error_responses(400, 401, 413, 415, 422, 503),
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"type": "object"}}},
            }
        },
    )
    async def post_lineage(request: Request) -> Response:
        body = await _json_body(request)
        encoding = request.headers.get("content-encoding")
        result = await run_in_threadpool(ingestor.single, body, encoding)
        return JSONBody(result, status_code=201)

    @app.post(
        "/api/v1/lineage/batch",
        response_model=BatchResult,
        dependencies=write_auth,
        tags=["OpenLineage"],
        summary="Record a batch of OpenLineage events, with per-event outcomes",
        description=(
            "Follows the OpenLineage spec's `/lineage/batch`: valid events are stored even when "
            "others are not; `failed_events` lists each failure by index. 200 when at least one "
            "event was stored; 400 (all invalid) or 503 (store unavailable) carry the same body "
            "with status `failure`."
        ),
        responses={
            **error_responses(401, 413, 415, 422),
            400: {"model": BatchResult, "description": "No event of the batch is valid."},
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
    async def post_lineage_batch(request: Request) -> Response:
        body = await _json_body(request)
        encoding = request.headers.get("content-encoding")
        status, result = await run_in_threadpool(ingestor.batch, body, encoding)
        return JSONBody(result, status_code=status)

    # -- reads ------------------------------------------------------------------------------

    def _query() -> LineageCatalogProtocol:
        if query is None:
            raise ApiError(
                503,
                "no_query_store",
                "no configured store answers queries; configure the sql or graph store",
            )
        return query

    def _call(fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except queries.NotFound as exc:
            raise ApiError(404, "not_found", str(exc)[:300]) from None
        except StoreError as exc:
            raise ApiError(503, "store_unavailable", str(exc)) from None

    @app.get(
        "/api/v1/lineage",
        response_model=LineageGraphModel,
        dependencies=read_auth,
        tags=["Lineage"],
        summary="The lineage graph around a job or dataset (Marquez's getLineage)",
        responses=error_responses(400, 401, 404, 503),
    )
    def get_lineage(
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
        store = _query()
        return JSONBody(
            _call(lambda: queries.lineage(store, nodeId, direction=direction, depth=depth))
        )

    @app.get(
        "/api/v1/namespaces",
        response_model=NamespaceList,
        dependencies=read_auth,
        tags=["Namespaces"],
        summary="Namespaces of the recorded jobs and datasets",
        responses=error_responses(401, 503),
    )
    def get_namespaces(limit: Limit = 100, offset: Offset = 0) -> Response:
        store = _query()
        names = _call(store.namespaces)[offset : offset + limit]
        return JSONBody({"namespaces": [{"name": n} for n in names]})

    @app.get(
        "/api/v1/namespaces/{namespace:path}/jobs",
        response_model=JobList,
        dependencies=read_auth,
        tags=["Jobs"],
        summary="Jobs of a namespace, each with its latest run and state",
        responses=error_responses(401, 503),
    )
    def get_jobs(
        namespace: Annotated[str, PathParam(description="URL-encoded namespace.")],
        limit: Limit = 100,
        offset: Offset = 0,
    ) -> Response:
        store = _query()
        jobs = _call(lambda: store.jobs(namespace, limit=offset + limit))[offset:]
        body = [marquez.job_from_summary(j) for j in jobs]
        return JSONBody({"jobs": body, "totalCount": len(body)})

    @app.get(
        "/api/v1/namespaces/{namespace:path}/jobs/{job:path}/runs",
        response_model=RunList,
        dependencies=read_auth,
        tags=["Jobs"],
        summary="Runs of a job, most recent first, with state and duration",
        responses=error_responses(401, 503),
    )
    def get_runs(namespace: str, job: str, limit: Limit = 100, offset: Offset = 0) -> Response:
        store = _query()
        found = _call(lambda: queries.runs(store, namespace, job, limit=limit, offset=offset))
        return JSONBody({"runs": found})

    @app.get(
        "/api/v1/namespaces/{namespace:path}/datasets",
        response_model=DatasetList,
        dependencies=read_auth,
        tags=["Datasets"],
        summary="Datasets of a namespace",
        responses=error_responses(401, 503),
    )
    def get_datasets(namespace: str, limit: Limit = 100, offset: Offset = 0) -> Response:
        store = _query()
        pairs = _call(lambda: store.datasets(namespace, limit=offset + limit))[offset:]
        body = [marquez.dataset_data(ns, nm) for ns, nm in pairs]
        return JSONBody({"datasets": body, "totalCount": len(body)})

    # Registered after the routes above: {job:path} would otherwise swallow '/runs'.
    @app.get(
        "/api/v1/namespaces/{namespace:path}/jobs/{job:path}",
        response_model=JobModel,
        dependencies=read_auth,
        tags=["Jobs"],
        summary="One job with its latest runs and its inputs and outputs",
        responses=error_responses(401, 404, 503),
    )
    def get_job(namespace: str, job: str) -> Response:
        store = _query()
        runs = _call(lambda: store.runs_of_job(namespace, job, limit=10))
        graph = _call(lambda: store.lineage(node_id("JOB", namespace, job), depth=0))
        root = graph.nodes.get(graph.root)
        isolated = root is None or not (root.in_edges or root.out_edges)
        known = runs or not isolated or _call(lambda: queries.exists(store, "JOB", namespace, job))
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

    def _events(store: LineageCatalogProtocol, run_id: str) -> list[dict[str, Any]]:
        return _call(lambda: queries.run_events(store, run_id))

    @app.get(
        "/api/v1/jobs/runs/{id}",
        response_model=RunModel,
        dependencies=read_auth,
        tags=["Jobs"],
        summary="One run, its state folded from its events",
        responses=error_responses(401, 404, 503),
    )
    def get_run(id: RunId) -> Response:
        events = _events(_query(), id)
        return JSONBody(marquez.run_from_events(id, events))

    @app.get(
        "/api/v1/jobs/runs/{id}/events",
        response_model=LineageEventList,
        dependencies=read_auth,
        tags=["Jobs"],
        summary="The raw OpenLineage events of a run, in event-time order (lineage-sdk)",
        responses=error_responses(401, 404, 503),
    )
    def get_run_events(id: RunId) -> Response:
        events = _events(_query(), id)
        return JSONBody({"events": events, "totalCount": len(events)})

    @app.get(
        "/api/v1/search",
        response_model=SearchResultList,
        dependencies=read_auth,
        tags=["Search"],
        summary="Jobs and datasets whose name contains the text (case-insensitive)",
        responses=error_responses(401, 503),
    )
    def search(
        q: Annotated[str, Query(min_length=1, max_length=1000, description="Text to find.")],
        filter: Annotated[
            Literal["dataset", "job", "DATASET", "JOB"] | None,
            Query(description="Only datasets or only jobs."),
        ] = None,
        limit: Limit = 50,
    ) -> Response:
        store = _query()
        hits = _call(lambda: store.search(q, limit=limit if filter is None else 1000))
        if filter is not None:
            hits = [h for h in hits if h[0] == filter.upper()][:limit]
        return JSONBody(marquez.search_results(hits))

    # -- operations and the page ----------------------------------------------------------

    @app.get("/api/v1/health", response_model=HealthBody, tags=["Operations"])
    def health() -> Response:
        return JSONBody({"status": "ok", "ingest": service is not None, "query_store": query_name})

    if service is not None:
        metrics_registry = service.metrics.registry

        @app.get("/metrics", include_in_schema=False)
        def metrics() -> Response:
            from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

            return Response(generate_latest(metrics_registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
