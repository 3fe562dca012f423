"""The API's own error: a status, a stable reason code and a readable detail, sent as JSON."""

from __future__ import annotations

from typing import Any

__all__ = ["ApiError", "error_responses"]


class ApiError(Exception):
    """Raised by the routes; the app turns it into ``{"detail": ..., "reason": ...}``.

    ``headers`` carries e.g. ``WWW-Authenticate`` on a 401. ``body`` replaces the default body
    where the answer has a richer shape of its own (a failed batch's per-event outcomes).
    """

    def __init__(
        self,
        status: int,
        reason: str,
        detail: str,
        *,
        headers: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.reason = reason
        self.detail = detail
        self.headers = headers or {}
        self.body = body


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries documenting :class:`ErrorBody` for ``codes``."""
    from lineage_sdk.collector.api.schemas import ErrorBody

    descriptions = {
        400: "Malformed request or event; `detail` says what is wrong.",
        401: "Missing or wrong API key.",
        403: "The API key may not write a namespace the event targets (`detail` names it).",
        404: "Nothing is recorded under that name.",
        405: "A Marquez write endpoint: this collector only records OpenLineage events.",
        413: "Request body larger than the configured limit.",
        415: "Content type is not application/json.",
        422: "The store refused the event permanently (retrying will not help), or a query "
        "parameter has a value the API does not take (`detail` names it).",
        503: "The store is unavailable (retry later), or none is configured for this request.",
    }
    return {code: {"model": ErrorBody, "description": descriptions[code]} for code in codes}
