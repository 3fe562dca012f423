"""The ``http`` exporter: POST each event to an OpenLineage HTTP endpoint (Marquez and kin).

It runs on the pipeline's worker thread and never raises. A failing endpoint costs the worker
little: after a transport error the exporter fails fast for a back-off period (doubling up to
30 s) instead of waiting for a timeout on every event, and failures are logged at most once per
interval. It does not buffer or retry: use the ``rabbitmq`` exporter for lossless delivery.
"""

from __future__ import annotations

import gzip
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar
from urllib.parse import urlsplit

import httpx

from lineage_exporters.http_config import HttpExporterConfig
from lineage_sdk._logging import RateLimitedLog
from lineage_sdk.config.redaction import redact
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.config.sections import Section
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.sdk.export import EncodedEvent, ExportResult, LineageExporter
from lineage_sdk.version import __version__

__all__ = ["HttpExporter", "HttpExporterConfig", "HttpExporterStats"]

_LOG = logging.getLogger("lineage_exporters.http")
_MAX_BACKOFF_S = 30.0


@dataclass(frozen=True, slots=True)
class HttpExporterStats:
    """``sent``: events the endpoint accepted (2xx). ``failed``: refused, errored or skipped
    while the endpoint was backing off."""

    sent: int
    failed: int


class HttpExporter(LineageExporter):
    """POSTs each event's JSON to ``{url}/{endpoint}``, with an optional bearer token."""

    config_class: ClassVar[type[Section]] = HttpExporterConfig

    def __init__(self, settings: HttpExporterConfig, *, report_interval_s: float = 60.0) -> None:
        if not settings.url:
            raise ConfigError(
                "lineage.http.url",
                settings.url,
                "the base URL of an OpenLineage HTTP endpoint, e.g. "
                "http://localhost:5000 (OPENLINEAGE_URL also sets it)",
            )
        try:
            scheme = urlsplit(settings.url).scheme
        except ValueError:
            scheme = ""
        if scheme not in ("http", "https"):
            raise ConfigError(
                "lineage.http.url", redact(settings.url), "a URL starting with http:// or https://"
            )
        self.endpoint_url = settings.url.rstrip("/") + "/" + settings.endpoint.lstrip("/")
        self.safe_url = redact(self.endpoint_url)
        self._api_key = settings.api_key
        headers = {"Content-Type": "application/json", "User-Agent": f"lineage-sdk/{__version__}"}
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        self._gzip = settings.compression == "gzip"
        if self._gzip:
            headers["Content-Encoding"] = "gzip"
        self._client = httpx.Client(timeout=settings.timeout_ms / 1000, headers=headers)
        self._lock = threading.Lock()
        self._sent = 0
        self._failed = 0
        self._backoff_s = 0.0
        self._down_until = 0.0
        self._failures_log = RateLimitedLog(_LOG, report_interval_s)
        self._closed = False

    @classmethod
    def from_config(cls, config: LineageConfig) -> HttpExporter:
        return cls(config.section("http", HttpExporterConfig))

    def export(self, batch: Sequence[EncodedEvent]) -> ExportResult:
        """POST each event in turn; never raises."""
        try:
            return self._export(batch)
        except Exception:  # noqa: BLE001 - telemetry never raises into the pipeline
            _LOG.exception("lineage HTTP exporter: internal error in export()")
            self._count(0, len(batch), None)
            return ExportResult.FAILURE

    def _export(self, batch: Sequence[EncodedEvent]) -> ExportResult:
        if self._closed:
            self._count(0, len(batch), "the exporter is shut down")
            return ExportResult.FAILURE
        sent = failed = 0
        reason: str | None = None
        for i, event in enumerate(batch):
            if time.monotonic() < self._down_until:
                failed += len(batch) - i  # fail fast while the endpoint is backing off
                reason = reason or "the endpoint failed recently; backing off"
                break
            try:
                body = gzip.compress(event.payload, 6) if self._gzip else event.payload
                response = self._client.post(self.endpoint_url, content=body)
            except httpx.HTTPError as exc:
                self._backoff_s = min(_MAX_BACKOFF_S, max(0.5, self._backoff_s * 2))
                self._down_until = time.monotonic() + self._backoff_s
                failed += 1
                reason = f"{type(exc).__name__}: {exc}"
                continue
            if response.is_success:
                sent += 1
                self._backoff_s = 0.0
            else:
                failed += 1
                reason = f"HTTP {response.status_code} {response.text[:200]}".replace("\n", " ")
        self._count(sent, failed, reason)
        return ExportResult.FAILURE if failed else ExportResult.SUCCESS

    def _count(self, sent: int, failed: int, reason: str | None) -> None:
        """Add to the counters; log pending failures at most once per interval."""
        with self._lock:
            self._sent += sent
            self._failed += failed
            why = f": {redact(reason, self._api_key)}" if reason else ""
            self._failures_log.add(
                failed,
                "lineage HTTP exporter could not deliver %d event(s) to %s%s",
                self.safe_url,
                why,
            )

    def stats(self) -> HttpExporterStats:
        with self._lock:
            return HttpExporterStats(sent=self._sent, failed=self._failed)

    def shutdown(self, timeout: float = 30.0) -> None:
        self._closed = True
        try:
            self._client.close()
        except Exception:  # noqa: BLE001
            _LOG.debug("lineage HTTP exporter: close failed", exc_info=True)
