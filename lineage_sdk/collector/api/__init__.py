"""The collector's HTTP API: OpenLineage ingest, a Marquez-compatible read API, the graph page.

Run it with ``lineage-collector serve`` (or ``python -m lineage_sdk.collector.api``); embed it
with :func:`create_app` or :class:`ApiServer`. See docs/api.md.
"""

from __future__ import annotations

from lineage_sdk.collector.api.app import (
    DEFAULT_MAX_BODY_BYTES,
    STATIC_DIR,
    create_app,
    pick_query_store,
)
from lineage_sdk.collector.api.server import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    ApiServer,
    api_settings,
    serve,
)

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_PORT",
    "STATIC_DIR",
    "ApiServer",
    "api_settings",
    "create_app",
    "pick_query_store",
    "serve",
]
