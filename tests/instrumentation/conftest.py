"""Fixtures for the instrumentation tests: the real broker, unique names, an SDK writing to memory."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pika
import pika.exceptions
import pytest

from lineage_instrumentation.pika import PikaInstrumentor
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.sdk.exporters import InMemoryExporter
from lineage_sdk.sdk.provider import configure, shutdown

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conformance import validate_event
from memory_capture import CapturedEvents

BROKER_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
REPO = Path(__file__).resolve().parents[2]

__all__ = ["BROKER_URL", "REPO", "Names", "connect", "validate_event"]


def connect(attempts: int = 20) -> Any:
    """A BlockingConnection, retried: another test may be bouncing the shared broker."""
    last: Exception | None = None
    for _ in range(attempts):
        try:
            return pika.BlockingConnection(pika.URLParameters(BROKER_URL))
        except pika.exceptions.AMQPConnectionError as exc:
            last = exc
            time.sleep(0.5)
    raise RuntimeError(f"broker unavailable: {last}")


@dataclass
class Names:
    exchange: str
    queue: str
    routing_key: str = "orders.created"


@pytest.fixture
def names() -> Iterator[Names]:
    """A unique topic exchange and queue bound with ``orders.*``; deleted afterwards."""
    suffix = uuid.uuid4().hex[:10]
    found = Names(f"test.instr.ex.{suffix}", f"test.instr.q.{suffix}")
    conn = connect()
    ch = conn.channel()
    ch.exchange_declare(found.exchange, exchange_type="topic")
    ch.queue_declare(found.queue)
    ch.queue_bind(found.queue, found.exchange, routing_key="orders.*")
    conn.close()
    yield found
    conn = connect()
    ch = conn.channel()
    ch.queue_delete(found.queue)
    ch.exchange_delete(found.exchange)
    conn.close()


class Captured(CapturedEvents):
    def runs(self, job_name: str) -> dict[str, list[dict[str, Any]]]:
        """Events of ``job_name`` grouped by run id, in order."""
        out: dict[str, list[dict[str, Any]]] = {}
        for event in self.events():
            if event["job"]["name"] == job_name:
                out.setdefault(event["run"]["runId"], []).append(event)
        return out


@pytest.fixture
def captured() -> Iterator[Captured]:
    """Lineage configured to memory (namespace ``tests.instr``); shut down afterwards."""
    exporter = InMemoryExporter()
    config = LineageConfig.model_validate(
        {"exporters": ["memory"], "producer": {"job_namespace": "tests.instr"}}
    )
    configure(config, exporters=[exporter], strict=True)
    yield Captured(exporter)
    shutdown(10.0)


@pytest.fixture
def instrument(captured: Captured) -> Iterator[Any]:
    """Call ``instrument(**kwargs)`` inside a test; always uninstrumented afterwards."""
    instrumentor = PikaInstrumentor()
    instrumentor.uninstrument()

    def do(**kwargs: Any) -> PikaInstrumentor:
        assert instrumentor.instrument(**kwargs)
        return instrumentor

    yield do
    instrumentor.uninstrument()
