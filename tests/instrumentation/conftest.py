"""Fixtures for the instrumentation tests: the real broker, unique names, an SDK writing to memory."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from lineage_instrumentation.pika import PikaInstrumentor
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.sdk.exporters import InMemoryExporter
from lineage_sdk.sdk.provider import configure, shutdown

from .broker_helpers import Captured, Names, connect


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
