"""A loopback webhook receiver for the watch's tests: records every POST (its time, headers and
body) and answers each with the next status of its script (then ``status``), after holding it
while ``hold`` is not set (a slow receiver), up to ``hold_s`` seconds."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["Received", "Receiver", "receiver"]


@dataclass(frozen=True)
class Received:
    at: float
    headers: dict[str, str]
    body: bytes
    status: int

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


class Receiver(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.received: list[Received] = []
        self.script: list[int] = []
        self.status = 200
        self.hold: threading.Event | None = None
        self.hold_s = 30.0
        self.holding = 0
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"

    def ok(self) -> list[Received]:
        with self.lock:
            return [r for r in self.received if 200 <= r.status < 300]

    def wait_for(self, predicate: object, timeout: float = 30.0) -> bool:
        with self.changed:
            return self.changed.wait_for(predicate, timeout)  # type: ignore[arg-type]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        srv = self.server
        if srv.hold is not None and not srv.hold.is_set():
            with srv.changed:
                srv.holding += 1
                srv.changed.notify_all()
            srv.hold.wait(srv.hold_s)
            with srv.changed:
                srv.holding -= 1
        with srv.changed:
            status = srv.script.pop(0) if srv.script else srv.status
            srv.received.append(
                Received(
                    time.monotonic(), {k.lower(): v for k, v in self.headers.items()}, body, status
                )
            )
            srv.changed.notify_all()
        try:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
        except OSError:
            pass  # the client gave up (a timeout) or died

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def receiver(port: int = 0) -> Iterator[Receiver]:
    srv = Receiver(port)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        if srv.hold is not None:
            srv.hold.set()
        srv.shutdown()
        srv.server_close()
