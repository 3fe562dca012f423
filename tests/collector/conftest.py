"""Fixtures for the collector tests: unique broker names, a collector thread, PostgreSQL
schemas and a loopback OpenLineage HTTP endpoint. Everything is real; nothing is mocked."""

from __future__ import annotations

import contextlib
import http.server
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from collector_helpers import RABBIT_URL, connect

from lineage_sdk.collector.settings import CollectorConfig
from lineage_sdk.collector.topology import Topology
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.transport.unrouted import holding_queue, unrouted_exchange


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = (
            _merge(out[key], value)
            if isinstance(value, dict) and isinstance(out.get(key), dict)
            else value
        )
    return out


@pytest.fixture
def topic() -> Iterator[str]:
    """A unique exchange name; its queues and the exchange are deleted afterwards."""
    name = f"test.lineage.{uuid.uuid4().hex[:10]}"
    yield name
    with contextlib.suppress(Exception):
        conn = connect()
        ch = conn.channel()
        for q in _queues_for(name):
            ch.queue_delete(q)
        ch.exchange_delete(name)
        ch.queue_delete(holding_queue(name))
        ch.exchange_delete(unrouted_exchange(name))
        conn.close()


_created_topologies: dict[str, set[str]] = {}


def _queues_for(topic: str) -> set[str]:
    # Collectors started in subprocesses or from a plain config declare the default retry queues.
    defaults = {f"{topic}.collector.retry.{d}ms" for d in CollectorConfig().retry_delays_ms}
    queues = (
        _created_topologies.pop(topic, set()) | {f"{topic}.collector", f"{topic}.dlq"} | defaults
    )
    return queues | {f"{q}.migrating" for q in queues}  # left by an interrupted migration test


@pytest.fixture
def make_config(topic: str, tmp_path: Path) -> Callable[..., LineageConfig]:
    def factory(**extra: Any) -> LineageConfig:
        base: dict[str, Any] = {
            "collector_topic": topic,
            "rabbitmq": {"url": RABBIT_URL, "reconnect_initial_ms": 100, "reconnect_max_ms": 1000},
            "store": {"backend": "sql", "sql": {"url": f"sqlite:///{tmp_path}/lineage.db"}},
            "collector": {
                "retry_delays_ms": [200, 400],
                "max_attempts": 3,
                "prefetch": 200,
                "batch_size": 50,
                "batch_timeout_ms": 20,
            },
        }
        config = LineageConfig.model_validate(_merge(base, extra))
        topo = Topology.from_config(config)
        _created_topologies.setdefault(topic, set()).update(
            {topo.queue, topo.dead_letter_queue, *(r.name for r in topo.retry_queues)}
        )
        return config

    return factory


class LineageSink:
    """A real OpenLineage HTTP endpoint on loopback that records what it accepts.

    ``fail_next`` answers 503 that many times; ``refuse`` lists job names answered with 400.
    """

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.requests = 0
        self.fail_next = 0
        self.refuse: set[str] = set()
        self.auth: list[str | None] = []
        self.lock = threading.Lock()
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with sink.lock:
                    sink.requests += 1
                    sink.auth.append(self.headers.get("Authorization"))
                    if sink.fail_next > 0:
                        sink.fail_next -= 1
                        return self._answer(503, b"busy")
                    event = orjson.loads(body)
                    if event.get("job", {}).get("name") in sink.refuse:
                        return self._answer(400, b'{"error":"job refused"}')
                    sink.events.append(event)
                return self._answer(201, b"")

            def do_GET(self) -> None:
                self._answer(405, b"")

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sink() -> Iterator[LineageSink]:
    s = LineageSink()
    yield s
    s.close()
