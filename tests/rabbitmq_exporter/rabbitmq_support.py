"""Fixtures for the RabbitMQ exporter tests: real broker, unique names, a loopback TCP proxy.

The proxy sits between the exporter and the real broker so a test can take "the broker" away
(refuse and cut connections) or freeze it (connections stay open, nothing is answered) without
disturbing the other users of the shared broker. Tests that need a broker to really die start a
private node of their own (the ``rabbit_node`` fixture, tests/brokers.py); none stops the shared one.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pika
import pytest

from lineage_exporters.rabbitmq import RabbitMQExporter
from lineage_exporters.rabbitmq._destination import Destination, Endpoint
from lineage_exporters.rabbitmq.config import RabbitMQConfig
from lineage_sdk.sdk.events import encode_event
from lineage_sdk.sdk.export import EncodedEvent
from lineage_sdk.transport.unrouted import (
    declare_event_exchange,
    holding_queue,
    unrouted_exchange,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conformance import validate_event
from vhosts import session_vhost

__all__ = ["validate_event"]

BROKER_URL = session_vhost().url  # this process's private vhost, never the shared "/"
DEST = Destination.of("tests.exchange", [Endpoint(False, "127.0.0.1", 5672, "tests", "guest")])
"""The destination of the spool unit tests (no broker is involved)."""
RUN_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


def blocking_connection(url: str = BROKER_URL, attempts: int = 20) -> Any:
    """A BlockingConnection, retried: the outage test may be bouncing the broker."""
    last: Exception | None = None
    for _ in range(attempts):
        try:
            return pika.BlockingConnection(pika.URLParameters(url))
        except pika.exceptions.AMQPConnectionError as exc:
            last = exc
            time.sleep(0.5)
    raise RuntimeError(f"broker unavailable: {last}")


def make_event(
    i: int, *, namespace: str = "tests.ns", name: str | None = None, event_type: str = "START"
) -> EncodedEvent:
    """A valid OpenLineage 2-0-2 RunEvent, distinct per ``i``."""
    event = {
        "eventType": event_type,
        "eventTime": f"2024-05-01T12:00:00.{i % 1_000_000:06d}+00:00",
        "producer": "https://github.com/lineage-sdk/lineage-sdk",
        "schemaURL": RUN_EVENT_SCHEMA,
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": namespace, "name": name if name is not None else f"job.{i % 7}"},
        "inputs": [{"namespace": "postgres://db:5432", "name": f"shop.public.orders_{i}"}],
        "outputs": [],
    }
    return encode_event(event)


def make_events(n: int, **kwargs: Any) -> list[EncodedEvent]:
    return [make_event(i, **kwargs) for i in range(n)]


@dataclass
class Topology:
    """A unique exchange with one durable queue bound with ``#``, deleted afterwards."""

    exchange: str
    queue: str
    extra_queues: list[str] = field(default_factory=list)
    url: str = BROKER_URL

    def bind(self, binding_key: str) -> str:
        """Another queue on the exchange with ``binding_key``."""
        name = f"{self.exchange}.q{len(self.extra_queues)}"
        conn = blocking_connection(self.url)
        try:
            ch = conn.channel()
            ch.queue_declare(name, durable=True)
            ch.queue_bind(name, self.exchange, binding_key)
        finally:
            conn.close()
        self.extra_queues.append(name)
        return name

    def drain(
        self,
        queue: str | None = None,
        *,
        expected: int | None = None,
        timeout: float = 20.0,
        idle: float = 0.3,
    ) -> list[tuple[Any, Any, bytes]]:
        """All messages of ``queue``: until ``expected`` arrived, or ``idle`` s of silence."""
        out: list[tuple[Any, Any, bytes]] = []
        deadline = time.monotonic() + timeout
        conn = blocking_connection(self.url)
        try:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=1000)
            last = time.monotonic()
            for method, props, body in ch.consume(
                queue or self.queue, auto_ack=True, inactivity_timeout=0.05
            ):
                now = time.monotonic()
                if method is not None:
                    out.append((method, props, body))
                    last = now
                if expected is not None and len(out) >= expected and now - last >= idle:
                    break
                if expected is None and now - last >= idle:
                    break
                if now > deadline:
                    break
            ch.cancel()
        finally:
            with contextlib.suppress(Exception):
                conn.close()
        return out

    def declare_exchange(self) -> None:
        conn = blocking_connection(self.url)
        try:
            declare_event_exchange(conn.channel(), self.exchange)
        finally:
            conn.close()


@contextlib.contextmanager
def unique_topology(url: str = BROKER_URL) -> Iterator[Topology]:
    """A unique exchange and queue on the broker at ``url``; deleted afterwards."""
    name = f"test.lineage.rmq.{uuid.uuid4().hex[:10]}"
    topo = Topology(exchange=name, queue=f"{name}.all", url=url)
    conn = blocking_connection(url)
    try:
        ch = conn.channel()
        declare_event_exchange(ch, topo.exchange)  # as the exporter and the collector do
        ch.queue_declare(topo.queue, durable=True)
        ch.queue_bind(topo.queue, topo.exchange, "#")
    finally:
        conn.close()
    yield topo
    conn = blocking_connection(url)
    try:
        ch = conn.channel()
        delete_event_exchange(ch, topo.exchange, [topo.queue, *topo.extra_queues])
    finally:
        conn.close()


def delete_event_exchange(channel: Any, exchange: str, queues: list[str] | None = None) -> None:
    """Delete ``queues``, the exchange and its alternate exchange and holding queue."""
    for q in [*(queues or []), holding_queue(exchange)]:
        channel.queue_delete(q)
    channel.exchange_delete(exchange)
    channel.exchange_delete(unrouted_exchange(exchange))


@pytest.fixture
def topology() -> Iterator[Topology]:
    with unique_topology() as topo:
        yield topo


@pytest.fixture
def make_exporter(tmp_path: Path) -> Iterator[Callable[..., RabbitMQExporter]]:
    """Build exporters with a private spool directory; shut them all down afterwards."""
    made: list[RabbitMQExporter] = []

    def make(exchange: str, url: str = BROKER_URL, **settings: Any) -> RabbitMQExporter:
        settings.setdefault("spool_dir", str(tmp_path / "spool"))
        settings.setdefault("reconnect_initial_ms", 50)
        settings.setdefault("reconnect_max_ms", 500)
        exporter = RabbitMQExporter(
            RabbitMQConfig(url=url, **settings), exchange=exchange, job_namespace="tests"
        )
        made.append(exporter)
        return exporter

    yield make
    for exporter in made:
        exporter.shutdown(5.0)


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0, step: float = 0.02) -> bool:
    """Poll ``predicate`` until it holds; False on timeout (tests assert on it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def body_events(body: bytes) -> list[dict[str, Any]]:
    data = orjson.loads(body)
    return data if isinstance(data, list) else [data]


class TcpProxy:
    """A loopback TCP proxy to the broker that a test can stop, start and freeze."""

    def __init__(self, target: tuple[str, int] = ("127.0.0.1", 5672)) -> None:
        self.target = target
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._frozen = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.start()

    @property
    def url(self) -> str:
        # the session vhost through the proxy: nothing lands in the shared broker's "/"
        return BROKER_URL.replace(":5672/", f":{self.port}/", 1)

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        """Refuse new connections and cut the open ones (like a broker going away)."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, []
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def freeze(self) -> None:
        """Keep connections open but pass nothing on (a hung broker)."""
        self._frozen.set()

    def thaw(self) -> None:
        self._frozen.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                while self._frozen.is_set():
                    time.sleep(0.01)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    p = TcpProxy()
    yield p
    p.thaw()
    p.stop()
