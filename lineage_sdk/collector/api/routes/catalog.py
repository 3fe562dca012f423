"""The catalog reads: namespaces, sources (what the datasets' ``dataSource`` facets name), Marquez's
default tags, and search over job and dataset names."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response

from lineage_sdk.collector.api import marquez, marquez_events
from lineage_sdk.collector.api.access import Grant
from lineage_sdk.collector.api.dependencies import ReadGrant, State, answer, read_auth
from lineage_sdk.collector.api.errors import ApiError, error_responses
from lineage_sdk.collector.api.responses import JSONBody
from lineage_sdk.collector.api.routes.common import (
    Limit,
    Offset,
    catalog,
    event_time,
    instant,
    paged,
    reply,
)
from lineage_sdk.collector.api.schemas import (
    NamespaceList,
    NamespaceModel,
    SearchResultList,
    SourceList,
    SourceModel,
    TagList,
)
from lineage_sdk.collector.api.state import ApiState
from lineage_sdk.collector.store import NodeType, names_dataset

__all__ = [
    "get_namespace",
    "get_namespaces",
    "get_source",
    "get_sources",
    "get_tags",
    "router",
    "search",
]

router = APIRouter(dependencies=read_auth)


@router.get(
    "/api/v1/namespaces",
    response_model=NamespaceList,
    tags=["Namespaces"],
    summary="Namespaces of the recorded jobs and datasets",
    responses=error_responses(401, 503),
)
def get_namespaces(
    state: State, grant: ReadGrant, limit: Limit = 100, offset: Offset = 0
) -> Response:
    store = catalog(state, grant)
    names = answer(lambda: store.namespaces(limit=limit, offset=offset))
    return JSONBody({"namespaces": [marquez_events.namespace_data(n) for n in names]})


# Served after the job and dataset routes (READ_ORDER in routes/__init__.py): {namespace:path}
# would otherwise swallow '/jobs' and '/datasets'.
@router.get(
    "/api/v1/namespaces/{namespace:path}",
    response_model=NamespaceModel,
    tags=["Namespaces"],
    summary="One namespace",
    responses=error_responses(401, 404, 503),
)
def get_namespace(state: State, grant: ReadGrant, namespace: str) -> Response:
    store = catalog(state, grant)
    names = answer(lambda: store.namespaces())
    if namespace not in names:
        raise ApiError(404, "not_found", "no job or dataset is recorded in this namespace")
    return JSONBody(marquez_events.namespace_data(namespace))


@router.get(
    "/api/v1/sources",
    response_model=SourceList,
    tags=["Sources"],
    summary="Sources: what the datasets' dataSource facets name (default: datasets without one)",
    responses=error_responses(401, 503),
)
def get_sources(state: State, grant: ReadGrant, limit: Limit = 100, offset: Offset = 0) -> Response:
    store = catalog(state, grant)
    found = marquez_events.sources_data(answer(lambda: store.sources()))
    return JSONBody({"sources": paged(found, limit, offset)})


@router.get(
    "/api/v1/sources/{source:path}",
    response_model=SourceModel,
    tags=["Sources"],
    summary="One source (as the datasets' dataSource facets name it)",
    responses=error_responses(401, 404, 503),
)
def get_source(state: State, grant: ReadGrant, source: str) -> Response:
    store = catalog(state, grant)
    found = marquez_events.sources_data(answer(lambda: store.sources(source)))
    if not found:
        raise ApiError(404, "not_found", "no dataset names a source of this name")
    return JSONBody(found[0])


@router.get(
    "/api/v1/tags",
    response_model=TagList,
    tags=["Tags"],
    summary="Tags: the ones Marquez creates at start-up",
    responses=error_responses(401),
)
def get_tags(limit: Limit = 100, offset: Offset = 0) -> Response:
    tags = [dict(t) for t in marquez_events.DEFAULT_TAGS]
    return JSONBody({"tags": tags[offset : offset + limit]})


def _search_pattern(q: str) -> tuple[str, re.Pattern[str]]:
    """Marquez's ``q``: case-insensitive "contains", where ``%`` matches any text and ``_`` one
    character. Returns the longest literal piece (what the store is asked for) and the full
    pattern (what each hit must match)."""
    pieces = re.split(r"[%_]", q)
    literal = max(pieces, key=len)
    body = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in q)
    return literal, re.compile(body, re.IGNORECASE | re.DOTALL)


def _updated_at(
    state: ApiState, grant: Grant, kind: NodeType, namespace: str, name: str
) -> datetime | None:
    store = catalog(state, grant)
    events = (
        store.events_of_job(namespace, name)
        if kind == "JOB"
        else [
            e for e in store.events_of_dataset(namespace, name) if names_dataset(e, namespace, name)
        ]
    )
    times = [t for t in (event_time(e) for e in events) if t is not None]
    return max(times) if times else None


@router.get(
    "/api/v1/search",
    response_model=SearchResultList,
    tags=["Search"],
    summary="Jobs and datasets whose name matches the text (case-insensitive; % and _ wildcards)",
    responses=error_responses(401, 422, 503),
)
def search(
    state: State,
    grant: ReadGrant,
    q: Annotated[str, Query(min_length=1, max_length=1000, description="Text to find.")],
    filter: Annotated[
        str | None, Query(description="dataset or job (case-insensitive).", max_length=16)
    ] = None,
    sort: Annotated[
        str | None, Query(description="name (the default) or updated_at.", max_length=16)
    ] = None,
    namespace: Annotated[
        str | None, Query(description="Only this namespace.", max_length=1024)
    ] = None,
    before: Annotated[
        str | None, Query(description="Only updated before this date (YYYY-MM-DD).", max_length=64)
    ] = None,
    after: Annotated[
        str | None, Query(description="Only updated after this date (YYYY-MM-DD).", max_length=64)
    ] = None,
    limit: Limit = 10,
) -> Response:
    kind = (filter or "").strip().upper() or None
    if kind not in (None, "DATASET", "JOB"):
        raise ApiError(422, "invalid_parameter", f"filter must be dataset or job, got {filter!r}")
    order = (sort or "name").strip().lower()
    if order not in ("name", "updated_at", "updatedat"):
        raise ApiError(422, "invalid_parameter", f"sort must be name or updated_at, got {sort!r}")
    since, until = instant(after, "after"), instant(before, "before")
    literal, pattern = _search_pattern(q)
    store = catalog(state, grant)
    hits = answer(lambda: store.search(literal, limit=100_000))
    # A dataset is found by any of its names: ``q`` matching one of its aliases finds it.
    aliased = [] if kind == "JOB" else answer(lambda: store.dataset_aliases(literal))
    found = sorted(
        {
            (t, ns, nm)
            for t, ns, nm in hits
            if pattern.search(nm)
            and (kind is None or t == kind)
            and (namespace is None or ns == namespace)
        }
        | {
            ("DATASET", *node)
            for alias, node in aliased
            if pattern.search(alias[1]) and (namespace is None or namespace in (alias[0], node[0]))
        },
        key=lambda h: (h[2], h[1], h[0]),
    )
    timed = order != "name" or since is not None or until is not None
    updated: dict[tuple[NodeType, str, str], datetime | None] = {}
    if timed:
        for hit in found:
            updated[hit] = answer(lambda hit=hit: _updated_at(state, grant, *hit))  # type: ignore[misc]

        def within(hit: tuple[NodeType, str, str]) -> bool:
            when = updated[hit]
            if since is None and until is None:
                return True
            return (
                when is not None
                and (since is None or when >= since)
                and (until is None or when < until)
            )

        found = [h for h in found if within(h)]
        if order != "name":
            found.sort(key=lambda h: updated[h] or datetime.min.replace(tzinfo=UTC), reverse=True)
    body = marquez.search_results(found[:limit])
    if timed:
        for result, hit in zip(body["results"], found[:limit], strict=True):
            if updated.get(hit) is not None:
                result["updatedAt"] = marquez.iso(updated[hit])  # type: ignore[arg-type]
    return reply(body, grant)
