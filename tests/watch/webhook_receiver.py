"""Loopback webhook receivers for the watch's tests. :func:`receiver` records every POST (its
time, headers and body) and answers each with the next status of its script (then ``status``),
after holding it while ``hold`` is not set (a slow receiver), up to ``hold_s`` seconds; with
``keep_alive`` it speaks HTTP/1.1 and keeps connections open (``drop_idle``: it closes each
connection after its answer without saying so, as a receiver closing idle connections does).
:func:`hung_receiver` accepts every connection and never answers (a hung receiver)."""

from __future__ import annotations

import http.server
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Hung", "Received", "Receiver", "assert_refuses_the_rule", "hung_receiver", "receiver"]


@dataclass(frozen=True)
class Received:
    at: float
    headers: dict[str, str]
    body: bytes
    status: int
    #: The sender's port: one per connection.
    port: int = 0

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
        self.keep_alive = False
        self.drop_idle = False
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

    def setup(self) -> None:
        super().setup()
        self.protocol_version = "HTTP/1.1" if self.server.keep_alive else "HTTP/1.0"

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
                    time.monotonic(),
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                    status,
                    self.client_address[1],
                )
            )
            srv.changed.notify_all()
        try:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
        except OSError:
            pass  # the client gave up (a timeout) or died
        if srv.drop_idle:
            self.close_connection = True  # unannounced: the client finds out on its next send

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


class Hung:
    """A TCP server on loopback that accepts every connection, reads nothing and never answers
    until :meth:`release` closes them all."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.1)
        self.connections: list[socket.socket] = []
        self.accepted = 0
        self.changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.getsockname()[1]}/hook"

    def wait_accepted(self, count: int, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.accepted >= count, timeout)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self.changed:
                self.connections.append(conn)
                self.accepted += 1
                self.changed.notify_all()

    def release(self) -> None:
        """Stop accepting and close every connection held (their senders fail at once)."""
        self._stop.set()
        self._thread.join(5)
        self.server.close()
        with self.changed:
            held, self.connections = self.connections, []
        for conn in held:
            conn.close()


@contextmanager
def hung_receiver() -> Iterator[Hung]:
    hung = Hung()
    try:
        yield hung
    finally:
        hung.release()


def assert_refuses_the_rule(
    command: list[str], env: dict[str, str], cwd: Path, secret: str
) -> None:
    """``command`` (a collector started with a rule whose URL is not HTTP(S)) exits 2 with one
    line naming the rule's key: no traceback, never the secret."""
    done = subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert "lineage.alerts.webhook[0].url" in done.stderr, said
    assert "Traceback" not in said and secret not in said
    assert len(done.stderr.strip().splitlines()) == 1, said
