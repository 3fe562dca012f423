"""The event log: every received OpenLineage event, or one namespace's, by event time (Marquez's
getLineageEvents and marquez-python's ``list_events``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from lineage_sdk.collector.api.access import Grant
from lineage_sdk.collector.api.dependencies import ReadGrant, State, answer, read_auth
from lineage_sdk.collector.api.errors import ApiError, error_responses
from lineage_sdk.collector.api.routes.common import (
    Limit,
    Offset,
    catalog,
    event_time,
    instant,
    reply,
)
from lineage_sdk.collector.api.schemas import LineageEventList
from lineage_sdk.collector.api.state import ApiState
from lineage_sdk.collector.records import compute_event_id
from lineage_sdk.collector.store import Page

__all__ = ["get_lineage_events", "get_namespace_events", "router"]

router = APIRouter(dependencies=read_auth)

Before = Annotated[
    str | None,
    Query(description="Only events before this time (RFC 3339, or YYYY-MM-DD).", max_length=64),
]
After = Annotated[
    str | None,
    Query(
        description="Only events at or after this time (RFC 3339, or YYYY-MM-DD).", max_length=64
    ),
]
SortDirection = Annotated[
    str | None, Query(description="asc or desc (the default), by event time.", max_length=8)
]


def _ascending(value: str | None) -> bool:
    direction = (value or "desc").strip().lower()
    if direction not in ("asc", "desc"):
        raise ApiError(
            422, "invalid_parameter", f"sortDirection must be asc or desc, got {value!r}"
        )
    return direction == "asc"


def _event_log(
    state: ApiState,
    grant: Grant,
    *,
    namespace: str | None,
    before: str | None,
    after: str | None,
    sort: str | None,
    limit: int,
    offset: int,
) -> Response:
    store = catalog(state, grant)
    since, until, ascending = instant(after, "after"), instant(before, "before"), _ascending(sort)

    def ask(ns: str | None, size: int, skip: int) -> Page[dict[str, Any]]:
        return store.lineage_events(
            before=until, after=since, namespace=ns, ascending=ascending, limit=size, offset=skip
        )

    if grant.reads_all or namespace is not None:
        page = answer(lambda: ask(namespace, limit, offset))
        return reply({"events": page, "totalCount": page.total}, grant)
    # A key that reads some namespaces: the log of each (one query each, up to the page's
    # end), merged in the store's order (event time, then event id).
    readable = list(answer(lambda: store.namespaces()))
    merged: list[tuple[datetime, str, dict[str, Any]]] = []
    total = 0
    for ns in readable:
        part = answer(lambda ns=ns: ask(ns, offset + limit, 0))  # type: ignore[misc]
        total += part.total
        for event in part:
            when = event_time(event) or datetime.min.replace(tzinfo=UTC)
            merged.append((when, compute_event_id(event), event))
    merged.sort(key=lambda item: item[:2], reverse=not ascending)
    events = [event for _, _, event in merged[offset : offset + limit]]
    return reply({"events": events, "totalCount": total}, grant)


@router.get(
    "/api/v1/events/lineage",
    response_model=LineageEventList,
    tags=["Events"],
    summary="The received OpenLineage events, newest first (Marquez's getLineageEvents)",
    responses=error_responses(401, 422, 503),
)
@router.get(
    "/api/v1/events",
    response_model=LineageEventList,
    tags=["Events"],
    summary="The event log, as marquez-python's list_events() asks for it",
    responses=error_responses(401, 422, 503),
)
def get_lineage_events(
    state: State,
    grant: ReadGrant,
    before: Before = None,
    after: After = None,
    sortDirection: SortDirection = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    return _event_log(
        state,
        grant,
        namespace=None,
        before=before,
        after=after,
        sort=sortDirection,
        limit=limit,
        offset=offset,
    )


@router.get(
    "/api/v1/events/{namespace:path}",
    response_model=LineageEventList,
    tags=["Events"],
    summary="The run events of one namespace's jobs (marquez-python's list_events(namespace))",
    responses=error_responses(401, 422, 503),
)
def get_namespace_events(
    state: State,
    grant: ReadGrant,
    namespace: str,
    before: Before = None,
    after: After = None,
    sortDirection: SortDirection = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    return _event_log(
        state,
        grant,
        namespace=namespace,
        before=before,
        after=after,
        sort=sortDirection,
        limit=limit,
        offset=offset,
    )
