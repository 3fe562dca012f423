"""What the routes share, kept on ``app.state``: the settings, the writing service, the query store.

One typed object (``app.state.lineage``) rather than loose attributes, so each dependency that
reads it is checked by mypy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import HTTPConnection

from lineage_sdk.collector.api.access import AccessPolicy
from lineage_sdk.collector.api.errors import ApiError
from lineage_sdk.collector.api.ingest import Ingestor
from lineage_sdk.collector.engine import Engine
from lineage_sdk.collector.service import LineageCollectorService

__all__ = ["DEFAULT_MAX_BODY_BYTES", "ApiSettings", "ApiState", "api_state"]

DEFAULT_MAX_BODY_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """``access``: the keys, and whether reads need one (see :class:`AccessPolicy`);
    ``max_body_bytes`` caps request bodies before and after gzip."""

    access: AccessPolicy = field(default_factory=AccessPolicy)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1:
            raise ValueError("max_body_bytes must be at least 1")


@dataclass(frozen=True, slots=True)
class ApiState:
    """``service`` writes ingested events (None: a read-only API); ``query`` answers reads (None:
    no configured store can, and reads answer 503)."""

    settings: ApiSettings
    service: LineageCollectorService | None
    query: Engine | None
    query_name: str | None
    ingestor: Ingestor

    def catalog(self) -> Engine:
        """The engine that answers reads; 503 when no configured store can. Asked by the routes
        once their parameters are valid, so a bad request is a 400/422 whatever the stores."""
        if self.query is None:
            raise ApiError(
                503,
                "no_query_store",
                "no configured store answers queries; configure the sql or graph store",
            )
        return self.query


async def api_state(connection: HTTPConnection) -> ApiState:
    """The app's :class:`ApiState`: the dependency through which routes reach it (``async``: a
    plain function would cost every request a hop to the thread pool)."""
    state: ApiState = connection.app.state.lineage
    return state
