"""A tiny HTTP endpoint for orchestrators: ``/healthz``, ``/readyz`` and ``/metrics``.

The standard library's threading server is enough for three GET routes and keeps FastAPI out of
the collector's hot process; the full HTTP API lives in ``lineage_sdk.collector.api``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["HealthServer"]


class HealthServer:
    """Serves liveness (process loop alive), readiness (broker connected, stores open) and the
    Prometheus text format, on a daemon thread."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        registry: CollectorRegistry,
        live: Callable[[], bool],
        ready: Callable[[], bool],
    ) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path in ("/healthz", "/livez"):
                    ok = outer._live()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"not alive\n")
                elif path == "/readyz":
                    ok = outer._ready()
                    self._send(200 if ok else 503, b"ready\n" if ok else b"not ready\n")
                elif path == "/metrics":
                    self._send(200, generate_latest(outer._registry), CONTENT_TYPE_LATEST)
                else:
                    self._send(404, b"not found\n")

            def _send(
                self, status: int, body: bytes, ctype: str = "text/plain; charset=utf-8"
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return None  # probes every few seconds would flood the logs

        self._registry = registry
        self._live = live
        self._ready = ready
        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="lineage-collector-health", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
