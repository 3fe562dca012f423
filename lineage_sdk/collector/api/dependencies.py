"""The routes' shared dependencies: the app's state, API-key checks (each answering the request's
:class:`~lineage_sdk.collector.api.access.Grant`) and the request body, plus
:func:`answer`, which turns store failures into the API's errors.

The checks are ``async`` on purpose: they do no blocking work, and FastAPI would run a plain
``def`` dependency on the thread pool, a thread hop per request for nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

from fastapi import Depends, Query, Request

from lineage_sdk.collector.api import queries
from lineage_sdk.collector.api.access import OPEN, Grant
from lineage_sdk.collector.api.errors import ApiError
from lineage_sdk.collector.api.state import ApiState, api_state
from lineage_sdk.collector.store import DEFAULT_NODE_LIMIT
from lineage_sdk.exceptions import StoreError

__all__ = [
    "JsonBody",
    "NodeLimit",
    "ReadGrant",
    "State",
    "WriteGrant",
    "answer",
    "json_body",
    "read_auth",
    "require_key",
    "require_read_key",
    "write_auth",
]

_T = TypeVar("_T")
_JSON_TYPES = ("application/json",)
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="lineage"'}

State = Annotated[ApiState, Depends(api_state)]


def _presented_key(request: Request) -> str | None:
    given: str | None = request.headers.get("x-api-key")
    auth = request.headers.get("authorization")
    if given is None and auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            given = token.strip()
    return given


def _authenticate(request: Request, state: ApiState) -> Grant:
    """The grant of the key the request carries; 401 without one, or with one that is not
    configured. The key itself never reaches a message or a log."""
    given = _presented_key(request)
    if given is None:
        raise ApiError(
            401,
            "unauthorized",
            "an API key is required: send Authorization: Bearer <key> or X-API-Key: <key>",
            headers=_CHALLENGE,
        )
    grant = state.settings.access.authenticate(given)
    if grant is None:
        raise ApiError(401, "unauthorized", "the API key is not valid", headers=_CHALLENGE)
    return grant


async def require_key(request: Request, state: State) -> Grant:
    """The request's :class:`Grant` for a write: 401 unless it carries a configured key
    (``Authorization: Bearer KEY`` or ``X-API-Key: KEY``); everything when no key is
    configured."""
    if not state.settings.access.configured:
        return OPEN
    return _authenticate(request, state)


async def require_read_key(request: Request, state: State) -> Grant:
    """The request's :class:`Grant` for a read: the key's when reads are protected, else
    everything (open reads: no key configured, or only ``api_key`` without
    ``protect_reads``)."""
    if not state.settings.access.protect_reads:
        return OPEN
    return _authenticate(request, state)


write_auth = [Depends(require_key)]
read_auth = [Depends(require_read_key)]
#: The grant of a write or a read (resolved once per request with ``write_auth``/``read_auth``).
WriteGrant = Annotated[Grant, Depends(require_key)]
ReadGrant = Annotated[Grant, Depends(require_read_key)]


async def json_body(request: Request, state: State) -> bytes:
    """The raw JSON body, refused early: 415 for another content type, 413 past the size cap
    (by the declared length before reading, and while streaming, for chunked bodies)."""
    limit = state.settings.max_body_bytes
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
        if int(declared) > limit:
            raise ApiError(
                413, "too_large", f"body of {declared} bytes exceeds the {limit}-byte limit"
            )
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, "too_large", f"body exceeds the {limit}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


JsonBody = Annotated[bytes, Depends(json_body)]


def answer(ask: Callable[[], _T]) -> _T:
    """``ask()``, with "nothing recorded" as a 404 and an unavailable store as a 503."""
    try:
        return ask()
    except queries.NotFound as exc:
        raise ApiError(404, "not_found", str(exc)[:300]) from None
    except StoreError as exc:
        raise ApiError(503, "store_unavailable", str(exc)) from None


#: ``nodeLimit`` of the graph reads (lineage, column lineage, run lineage): issue #16's bounded
#: queries, so a 10,000-node neighbourhood answers in time and never freezes the browser.
NodeLimit = Annotated[
    int,
    Query(
        ge=1,
        le=100_000,
        description="lineage-sdk extension: the most nodes to answer (default "
        f"{DEFAULT_NODE_LIMIT:,}), nearest the root first (by edges from it along the asked "
        "direction; ties by id), only edges among them; the walk stops early. The answer's "
        "`truncated` says whether nodes were left out, `nodeLimit` echoes the limit.",
    ),
]
