"""The ``openlineage_http`` store: forwards events to an OpenLineage HTTP endpoint (Marquez).

Each event is ``POST {url}/api/v1/lineage`` (Marquez's API has no batch endpoint), with up to
``max_concurrency`` requests in flight on a shared connection pool. Timeouts, transport errors and
5xx/429 answers are retried with backoff and jitter (stamina) a few times within the call; if the
endpoint still fails, the StoreError is transient and the collector's retry queues take over.
Any other 4xx is the endpoint refusing the event itself, which no retry changes: the error is
permanent and the event is parked in the dead-letter queue with the server's answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar

import httpx
import stamina

from lineage_sdk.collector.store import BaseLineageStore, LineageRecord
from lineage_sdk.collector.stores.settings import HttpStoreConfig
from lineage_sdk.config.redaction import redact
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.config.sections import Section
from lineage_sdk.exceptions import ConfigError, StoreError
from lineage_sdk.models.json_exact import dumps_exact

__all__ = ["HttpStoreConfig", "OpenLineageStore"]

_RETRY_STATUS = frozenset({408, 425, 429})


class _Retryable(Exception):
    pass


class OpenLineageStore(BaseLineageStore):
    """Posts each record's event as JSON; see the module docstring for the error policy."""

    name = "openlineage_http"
    config_class: ClassVar[type[Section]] = HttpStoreConfig

    @classmethod
    def from_config(cls, config: LineageConfig) -> OpenLineageStore:
        """Entry point ``lineage_sdk.stores:openlineage_http``."""
        cfg = config.section("store.openlineage_http", HttpStoreConfig)
        if not cfg.url:
            raise ConfigError(
                "store.openlineage_http.url",
                None,
                "the openlineage_http store needs the endpoint's base URL",
            )
        if not cfg.url.startswith(("http://", "https://")):
            raise ConfigError(
                "store.openlineage_http.url", redact(cfg.url), "an http:// or https:// URL"
            )
        return cls(
            cfg.url,
            api_key=cfg.api_key,
            timeout_s=cfg.timeout_ms / 1000,
            max_concurrency=cfg.max_concurrency,
        )

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 5.0,
        max_concurrency: int = 8,
        attempts: int = 3,
        wait_initial_s: float = 0.1,
        wait_max_s: float = 2.0,
        endpoint: str = "api/v1/lineage",
    ) -> None:
        self.endpoint_url = f"{url.rstrip('/')}/{endpoint.lstrip('/')}"
        self._safe_url = redact(self.endpoint_url)
        self._api_key = api_key
        self._timeout = timeout_s
        self._max_concurrency = max_concurrency
        self._attempts = attempts
        self._wait_initial = wait_initial_s
        self._wait_max = wait_max_s
        self._client: httpx.Client | None = None
        self._pool: ThreadPoolExecutor | None = None

    def open(self) -> None:
        if self._client is not None:
            return
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        limits = httpx.Limits(
            max_connections=self._max_concurrency, max_keepalive_connections=self._max_concurrency
        )
        self._client = httpx.Client(headers=headers, timeout=self._timeout, limits=limits)
        self._pool = ThreadPoolExecutor(
            self._max_concurrency, thread_name_prefix="lineage-http-store"
        )

    def _post_once(self, body: bytes) -> httpx.Response:
        assert self._client is not None
        try:
            response = self._client.post(self.endpoint_url, content=body)
        except httpx.TransportError as exc:  # timeouts, refused connections, resets
            raise _Retryable(f"{type(exc).__name__}: {redact(str(exc))}") from None
        if response.status_code >= 500 or response.status_code in _RETRY_STATUS:
            raise _Retryable(f"HTTP {response.status_code} {_snippet(response)}")
        return response

    def _post(self, record: LineageRecord) -> None:
        body = dumps_exact(record.event)
        try:
            for attempt in stamina.retry_context(
                on=_Retryable,
                attempts=self._attempts,
                wait_initial=self._wait_initial,
                wait_max=self._wait_max,
                timeout=None,
            ):
                with attempt:
                    response = self._post_once(body)
        except _Retryable as exc:
            raise StoreError(self.name, f"{self._safe_url}: {exc}") from None
        if response.status_code >= 400:
            raise StoreError(
                self.name,
                f"{self._safe_url} refused event {record.event_id}: "
                f"HTTP {response.status_code} {_snippet(response)}",
                permanent=True,
            )

    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        if self._pool is None:
            raise StoreError(self.name, "store is not open")
        if len(records) == 1:
            self._post(records[0])
            return
        futures = [self._pool.submit(self._post, record) for record in records]
        errors = [f.exception() for f in futures]
        failures = [e for e in errors if e is not None]
        if not failures:
            return
        # Transient failures first: a retry may fix them, and it re-sends the rest harmlessly.
        transient = [e for e in failures if not (isinstance(e, StoreError) and e.permanent)]
        first = transient[0] if transient else failures[0]
        if isinstance(first, StoreError):
            raise first
        raise StoreError(self.name, f"{type(first).__name__}: {first}")

    def check(self) -> None:
        """Reachable means any HTTP answer that is not a 5xx (an empty GET may well be 405)."""
        if self._client is None:
            raise StoreError(self.name, "store is not open")
        try:
            response = self._client.get(self.endpoint_url)
        except httpx.HTTPError as exc:
            raise StoreError(
                self.name, f"{self._safe_url}: {type(exc).__name__}: {redact(str(exc))}"
            ) from None
        if response.status_code >= 500 or response.status_code in (401, 403):
            raise StoreError(self.name, f"{self._safe_url}: HTTP {response.status_code}")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._client is not None:
            self._client.close()
            self._client = None


def _snippet(response: httpx.Response) -> str:
    return redact(response.text[:200].replace("\n", " ")).strip()
