"""The tables of the stores whose modules import a driver or the engine: ``[lineage.store.sql]``,
``[lineage.store.graph]``, ``[lineage.store.openlineage_http]`` and ``[lineage.store.logging]``.

Here, apart from their stores, so that listing the configuration (the commands' flags, the
reference page, ``lineage-collector check``) imports no store: the ``lineage_sdk.config_sections``
entry points name these classes, and each store's module re-exports its own.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from lineage_sdk.config.schema import check_url
from lineage_sdk.config.sections import Section, UriSetting

__all__ = ["GraphStoreConfig", "HttpStoreConfig", "LoggingStoreConfig", "SqlStoreConfig"]


class SqlStoreConfig(Section):
    """The collector's `sql` store (SQLite or PostgreSQL through SQLAlchemy)."""

    url: Annotated[str, UriSetting()] = Field(
        default="sqlite:///lineage.db",
        description="SQLAlchemy URL: sqlite:///path (default) or postgresql+psycopg://...",
    )
    connection_name: str | None = Field(
        default=None,
        description="Optional [lineage.connections.NAME] holding the URL instead.",
    )


class GraphStoreConfig(Section):
    """The collector's `graph` store (Neo4j or another Bolt server)."""

    graph_connection_name: str = Field(
        default="default_graph",
        min_length=1,
        description="Name of the [lineage.connections.NAME] section with the Bolt URI.",
    )


class HttpStoreConfig(Section):
    """The collector's `openlineage_http` store (a Marquez-compatible endpoint)."""

    url: Annotated[str | None, UriSetting()] = Field(
        default=None,
        description=(
            "Base URL of an OpenLineage HTTP endpoint (Marquez-compatible); events go to "
            "{url}/api/v1/lineage."
        ),
    )
    api_key: str | None = Field(
        default=None,
        description="Bearer token for the endpoint.",
    )
    timeout_ms: int = Field(default=5000, ge=1, description="Timeout of one request.")
    max_concurrency: int = Field(default=8, ge=1, description="Requests in flight at once.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return check_url(value, ("http", "https"))


class LoggingStoreConfig(Section):
    """The collector's `logging` store."""

    logger_name: str = Field(
        default="lineage.events",
        description="Logger the logging store writes one JSON line per event to.",
    )
