"""A loopback HTTP endpoint that records every POST (path, headers, body) and answers with a
status it is told, after a delay it is told: the receiver of the http exporter's tests."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import pytest

__all__ = ["Recorder", "server"]


class Recorder(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.status = 201
        self.delay = 0.0


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Recorder

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.server.delay:
            time.sleep(self.server.delay)
        self.server.requests.append((self.path, dict(self.headers), body))
        self.send_response(self.server.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Recorder]:
    """A :class:`Recorder` serving on a thread for the test."""
    srv = Recorder()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
