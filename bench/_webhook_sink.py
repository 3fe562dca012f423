"""A healthy webhook receiver for the benchmarks, run as its own process (so its CPU is not the
collector's): ``python bench/_webhook_sink.py`` prints its port, then answers every POST 200 at
once (HTTP/1.1, keep-alive) and keeps, per POST, the receipt time (``time.monotonic()``: on
Linux the same clock in every process of the machine), its path and its ``webhook-id``.
``GET /received`` returns what came since the last GET as JSON ``[[at, path, webhook_id], ...]``
and forgets it."""

from __future__ import annotations

import http.server
import json
import sys
import threading
import time


class _Sink(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.received: list[tuple[float, str, str]] = []

    def handle_error(self, request: object, client_address: object) -> None:
        """A sender closing its keep-alive connection (the collector stopping) is no error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Sink
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        at = time.monotonic()
        with self.server.lock:
            self.server.received.append((at, self.path, self.headers.get("webhook-id", "")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        with self.server.lock:
            taken, self.server.received = self.server.received, []
        body = json.dumps(taken).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def main() -> int:
    sink = _Sink()
    print(sink.server_address[1], flush=True)
    sink.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
