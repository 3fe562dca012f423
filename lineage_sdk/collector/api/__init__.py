"""The collector's HTTP API: OpenLineage ingest, a Marquez-compatible read API, the graph page.

Run it with ``lineage-collector serve`` (or ``python -m lineage_sdk.collector.api``); embed it
with :func:`create_app` or :class:`ApiServer`. See docs/api.md.

The names below load on first use: the package's FastAPI-free parts (``queries``, ``marquez``,
``schemas``) are shared with the ``lineage`` CLI, which must not pay for FastAPI and uvicorn.
Nothing in this package imports the package itself, so no module of it depends on this file.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lineage_sdk.collector.api.app import create_app
    from lineage_sdk.collector.api.routes.page import STATIC_DIR
    from lineage_sdk.collector.api.server import (
        DEFAULT_HOST,
        DEFAULT_PORT,
        ApiServer,
        api_settings,
        serve,
    )
    from lineage_sdk.collector.api.state import DEFAULT_MAX_BODY_BYTES
    from lineage_sdk.collector.stores.composite import pick_query_store

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

_HOMES = {
    "DEFAULT_HOST": f"{__name__}.server",
    "DEFAULT_MAX_BODY_BYTES": f"{__name__}.state",
    "DEFAULT_PORT": f"{__name__}.server",
    "STATIC_DIR": f"{__name__}.routes.page",
    "ApiServer": f"{__name__}.server",
    "api_settings": f"{__name__}.server",
    "create_app": f"{__name__}.app",
    "pick_query_store": "lineage_sdk.collector.stores.composite",
    "serve": f"{__name__}.server",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(home), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
