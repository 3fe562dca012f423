"""Nacks from the real broker: republished after a pause, and a connection that gets nothing but
nacks is replaced (RabbitMQ 3.10 nacks every publish of a channel that first published to a
quorum queue during its leader election; docs/deployment.md). The stand-in for that channel is a
queue that refuses every message: ``x-max-length`` 0 with ``x-overflow: reject-publish``.
"""

from __future__ import annotations

import logging
import time

import pytest
from rabbitmq_support import Topology, blocking_connection, make_events, wait_for

pytestmark = pytest.mark.rabbitmq


def test_only_nacks_pause_then_reconnect_and_nothing_is_lost(
    topology: Topology, make_exporter, caplog: pytest.LogCaptureFixture
) -> None:
    refusing = f"{topology.exchange}.refusing"
    conn = blocking_connection()
    try:
        channel = conn.channel()
        channel.queue_declare(
            refusing, durable=True, arguments={"x-max-length": 0, "x-overflow": "reject-publish"}
        )
        channel.queue_bind(refusing, topology.exchange, "#")
    finally:
        conn.close()
    topology.extra_queues.append(refusing)
    exporter = make_exporter(topology.exchange)
    events = make_events(5)
    caplog.set_level(logging.WARNING, logger="lineage_exporters.rabbitmq")
    exporter.export(events)
    started = time.monotonic()
    assert wait_for(lambda: exporter.stats().connection_failures >= 1, timeout=15)
    elapsed = time.monotonic() - started
    stats = exporter.stats()
    assert stats.exported == 0
    # A pause of 100 ms after each nack: about 10 rounds a second, not a hot loop.
    assert stats.retried <= len(events) * (elapsed / 0.1 + 3), (stats, elapsed)
    assert "has nacked every publish" in caplog.text

    conn = blocking_connection()
    try:
        conn.channel().queue_delete(refusing)
    finally:
        conn.close()
    assert exporter.force_flush(20)
    assert wait_for(lambda: exporter.stats().exported == len(events), timeout=10)
    got = topology.drain(expected=len(events))
    # Nacked copies were kept by the accepting queue too: at least once, every event.
    assert {props.message_id for _, props, _ in got} == {e.event_id for e in events}
