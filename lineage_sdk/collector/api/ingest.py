"""OpenLineage ingest over HTTP: the same decoding and the same store path as broker messages.

A body is decoded by :func:`lineage_sdk.collector.decode.decode_message` (size cap, NUL bytes,
nesting depth, JSON, then :func:`lineage_sdk.models.codec.check_ingest_event` per event: what
the stores need, with every URI format an annotation, as Marquez accepts) and the valid events
are written by awaiting :meth:`LineageCollectorService.handle_lineage_events`, exactly what the
queue consumer does, so an event stores identically whichever way it came. Neither step blocks the
server's event loop: large bodies are decoded in a worker thread, and the service writes in one.
The answer is sent only after every configured store wrote it (or refused it): a 201 means
stored, and a 503 means nothing was lost that the client will not resend (the OpenLineage client
retries 5xx, and stores are idempotent per event).
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

from lineage_sdk.collector.api.access import OPEN, Grant, write_refusal
from lineage_sdk.collector.api.errors import ApiError
from lineage_sdk.collector.decode import (
    JSON_CONTENT_TYPE,
    DecodedMessage,
    PoisonMessage,
    decode_message,
)
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.store import LineageRecord
from lineage_sdk.exceptions import StoreError

__all__ = ["Ingestor"]

_log = logging.getLogger("lineage_sdk.collector.api")
# PoisonMessage reasons that are not "the event is malformed" and deserve their own status.
_STATUS_BY_REASON = {"too_large": 413, "unsupported_encoding": 415}
# Plain bodies up to this size decode on the event loop (tens of microseconds); larger or
# compressed ones in a worker thread, so one big batch never stalls the other requests.
_INLINE_DECODE_BYTES = 64 * 1024
_T = TypeVar("_T")


class Ingestor:
    """Turns request bodies into stored events and answers; raises :class:`ApiError`."""

    def __init__(self, service: LineageCollectorService | None, max_body_bytes: int) -> None:
        self.service = service
        self.max_body_bytes = max_body_bytes

    def _require_service(self) -> LineageCollectorService:
        if self.service is None:
            raise ApiError(503, "no_store", "this API has no store to write events to")
        return self.service

    def inflate(self, body: bytes, content_encoding: str | None) -> bytes:
        """The body without its ``Content-Encoding`` (gzip or deflate, as the OpenLineage client
        sends with ``compression="gzip"``), refusing to inflate past the body limit."""
        encoding = (content_encoding or "").strip().lower()
        if encoding in ("", "identity"):
            return body
        if encoding not in ("gzip", "deflate"):
            raise ApiError(
                415, "unsupported_encoding", f"Content-Encoding {encoding!r} is not supported"
            )
        inflater = zlib.decompressobj(31 if encoding == "gzip" else 15)
        try:
            out = inflater.decompress(body, self.max_body_bytes + 1)
        except zlib.error as exc:
            raise ApiError(
                400, "malformed_body", f"{encoding} body does not inflate: {exc}"
            ) from None
        if len(out) > self.max_body_bytes or inflater.unconsumed_tail:
            raise ApiError(
                413, "too_large", f"inflated body exceeds the {self.max_body_bytes}-byte limit"
            )
        return out

    def _decode(self, body: bytes) -> DecodedMessage:
        try:
            return decode_message(body, JSON_CONTENT_TYPE, max_bytes=self.max_body_bytes)
        except PoisonMessage as exc:
            status = _STATUS_BY_REASON.get(exc.reason, 400)
            reason = exc.reason if exc.reason != "undecodable" else "malformed_json"
            raise ApiError(status, reason, exc.detail) from None

    async def _off_loop(
        self, decode: Callable[[bytes, str | None], _T], body: bytes, encoding: str | None
    ) -> _T:
        if len(body) <= _INLINE_DECODE_BYTES and (encoding or "").strip().lower() in (
            "",
            "identity",
        ):
            return decode(body, encoding)
        return await asyncio.to_thread(decode, body, encoding)

    async def _write(self, service: LineageCollectorService, records: list[Any]) -> None:
        try:
            await service.handle_lineage_events(records)
        except StoreError as exc:
            _log.warning("HTTP ingest: store failed: %s", exc)
            if exc.permanent:
                raise ApiError(
                    422, "store_rejected", f"the store refused the event: {exc}"
                ) from None
            raise ApiError(503, "store_unavailable", f"store unavailable, retry: {exc}") from None

    async def single(
        self, body: bytes, content_encoding: str | None, grant: Grant = OPEN
    ) -> dict[str, Any]:
        """``POST /api/v1/lineage``: one event object -> ``{"eventId": ...}``; 403 when
        ``grant`` may not write a namespace the event targets (``access.write_refusal``)."""
        service = self._require_service()
        decoded = await self._off_loop(self._decode_single, body, content_encoding)
        record = decoded.records[0]
        refusal = write_refusal(record, grant)
        if refusal is not None:
            raise ApiError(403, "forbidden", refusal)
        await self._write(service, decoded.records)
        return {"eventId": record.event_id}

    def _decode_single(self, body: bytes, content_encoding: str | None) -> DecodedMessage:
        body = self.inflate(body, content_encoding)
        if _is_array(body):
            raise ApiError(
                400,
                "not_an_event",
                "the body is a JSON array: POST arrays to /api/v1/lineage/batch",
            )
        decoded = self._decode(body)
        if decoded.rejected or len(decoded.records) != 1:  # pragma: no cover - objects only
            raise ApiError(400, "invalid_event", "the body is not one OpenLineage event")
        return decoded

    async def batch(
        self, body: bytes, content_encoding: str | None, grant: Grant = OPEN
    ) -> tuple[int, dict[str, Any]]:
        """``POST /api/v1/lineage/batch``: an array of events -> (status, the spec's answer).

        Good events are stored even when others in the batch are bad; each bad one is reported
        with its index and reason, and so is each event ``grant`` may not write
        (reason ``forbidden: ...``). 200 when at least one event was stored.
        """
        service = self._require_service()
        decoded = await self._off_loop(self._decode_batch, body, content_encoding)
        failed: list[dict[str, Any]] = [
            {"index": r.index, "reason": f"{r.reason}: {r.detail}", "retriable": False}
            for r in decoded.rejected
        ]
        records: list[LineageRecord] = []
        positions: list[int] = []
        forbidden = 0
        for record, position in zip(decoded.records, decoded.positions, strict=True):
            refusal = write_refusal(record, grant)
            if refusal is None:
                records.append(record)
                positions.append(position)
            else:
                forbidden += 1
                failed.append(
                    {"index": position, "reason": f"forbidden: {refusal}", "retriable": False}
                )
        stored = 0
        retriable = 0
        store_error: ApiError | None = None
        if records:
            try:
                await self._write(service, records)
                stored = len(records)
            except ApiError as exc:
                store_error = exc
                is_retriable = exc.status == 503
                retriable = len(records) if is_retriable else 0
                for index in positions:
                    failed.append({"index": index, "reason": exc.detail, "retriable": is_retriable})
        failed.sort(key=lambda f: f["index"])
        received = stored + len(failed)
        result: dict[str, Any] = {
            "status": "success" if not failed else "partial_success",
            "summary": {
                "received": received,
                "successful": stored,
                "failed": len(failed),
                "retriable": retriable,
                "non_retriable": len(failed) - retriable,
            },
            "failed_events": failed,
        }
        if stored:
            return 200, result
        result["status"] = "failure"
        if store_error is not None:
            raise ApiError(store_error.status, store_error.reason, store_error.detail, body=result)
        if forbidden:
            raise ApiError(
                403,
                "forbidden",
                "the API key may not write any valid event of the batch (see failed_events)",
                body=result,
            )
        raise ApiError(400, "invalid_events", "no event in the batch is valid", body=result)

    def _decode_batch(self, body: bytes, content_encoding: str | None) -> DecodedMessage:
        body = self.inflate(body, content_encoding)
        if not _is_array(body):
            raise ApiError(400, "not_a_batch", "the body must be a JSON array of events")
        return self._decode(body)


def _is_array(body: bytes) -> bool:
    return body.lstrip()[:1] == b"["
