"""What the Marquez-compatible read routes share: paging parameters, the engine as the request's
key sees it, times, and the scrubbed reply.

Each read route takes the request's :class:`~lineage_sdk.collector.api.access.Grant` and asks the
engine through the key's sight (:func:`~lineage_sdk.collector.api.access.visible`), which holds
only what the key may read: a hidden thing is not there, so it answers as an unknown one by the same
code, with no special case in the routes. Lineage is pruned at unreadable nodes (``queries``), and
every answer goes through :func:`~lineage_sdk.collector.api.access.scrub` (:func:`reply`).

Answers come in Marquez's shapes (see ``marquez``); lists are paged by the query store, and
``totalCount`` is the size of the whole answer, not of the page.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import Query, Response

from lineage_sdk.collector.api import queries
from lineage_sdk.collector.api.access import Grant, scrub, visible
from lineage_sdk.collector.api.dependencies import answer
from lineage_sdk.collector.api.errors import ApiError
from lineage_sdk.collector.api.history import parse_instant
from lineage_sdk.collector.api.responses import JSONBody
from lineage_sdk.collector.api.state import ApiState
from lineage_sdk.collector.engine import Engine
from lineage_sdk.collector.records import parse_event_time
from lineage_sdk.collector.store import Page
from lineage_sdk.exceptions import InvalidEventError

__all__ = [
    "UUID_PATTERN",
    "Limit",
    "Offset",
    "Since",
    "Until",
    "catalog",
    "event_time",
    "instant",
    "paged",
    "reply",
    "run_events",
]

UUID_PATTERN = r"^[0-9A-Fa-f]{8}(-?[0-9A-Fa-f]{4}){3}-?[0-9A-Fa-f]{12}$"

# Parameter types shared by the routes. A route module imports them by name: with postponed
# annotations, FastAPI resolves a parameter's type in the globals of the route's module.
Limit = Annotated[int, Query(ge=1, le=1000, description="Most results to return.")]
Offset = Annotated[int, Query(ge=0, le=100_000, description="Results to skip.")]
Since = Annotated[
    str | None,
    Query(
        description="lineage-sdk extension: the window's start (inclusive; RFC 3339, or "
        "YYYY-MM-DD for that day's start): only edges a run read or wrote with an event at or "
        "after it. Not with asOf or runId; 400 naming it when unreadable or not before until.",
    ),
]
Until = Annotated[
    str | None,
    Query(
        description="lineage-sdk extension: the window's end (exclusive; RFC 3339, or "
        "YYYY-MM-DD for that day's start): only edges a run read or wrote with an event before "
        "it, and declared edges declared before it. Not with asOf (asOf=T is until just after "
        "T) or runId.",
    ),
]


def catalog(state: ApiState, grant: Grant) -> Engine:
    """The engine as ``grant`` sees it."""
    return visible(state.catalog(), grant)


def instant(value: str | None, name: str) -> datetime | None:
    """A query parameter's time: RFC 3339 (an offset or Z; none means UTC) or a plain date;
    None when absent or blank, 422 when unreadable."""
    if value is None or not value.strip():
        return None
    try:
        return parse_instant(value, name)
    except ValueError as exc:
        raise ApiError(422, "invalid_parameter", str(exc)[:300]) from None


def paged(items: list[Any], limit: int, offset: int) -> Page[Any]:
    """One page of an answer made in full, with the whole answer's size as its total."""
    return Page(items[offset : offset + limit], len(items))


def reply(data: Any, grant: Grant, status_code: int = 200) -> Response:
    """The answer as ``grant`` may see it."""
    return JSONBody(scrub(data, grant), status_code=status_code)


def run_events(state: ApiState, run_id: str, grant: Grant) -> list[dict[str, Any]]:
    """A run's events; 404 when it has none the key may read."""
    store = catalog(state, grant)
    return answer(lambda: queries.run_events(store, run_id))


def event_time(event: dict[str, Any]) -> datetime | None:
    """An event's time, None when it has no readable one."""
    try:
        return parse_event_time(event.get("eventTime"))
    except InvalidEventError:
        return None
