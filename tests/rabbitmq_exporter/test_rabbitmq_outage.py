"""The broker away, cut or hung (through a loopback proxy to the real broker): nothing is lost."""

from __future__ import annotations

import collections
import logging
import time

import pytest
from rabbitmq_support import TcpProxy, Topology, make_events, wait_for

from lineage_sdk.sdk.export import ExportResult

pytestmark = pytest.mark.rabbitmq


def _ids(got) -> list[str]:
    return [props.message_id for _, props, _ in got]


def test_broker_away_then_back_memory_then_spool_replayed_in_order(
    topology: Topology, proxy: TcpProxy, make_exporter
) -> None:
    proxy.stop()
    exporter = make_exporter(
        topology.exchange, url=proxy.url, memory_buffer_events=300, outage_buffer="memory"
    )
    events = make_events(1000)
    for i in range(0, 1000, 100):
        assert exporter.export(events[i : i + 100]) is ExportResult.SUCCESS
    stats = exporter.stats()
    assert stats.buffered == 300
    assert stats.spooled == 700
    assert stats.spool_bytes > 0
    assert not stats.connected
    proxy.start()
    assert wait_for(lambda: exporter.stats().connected)
    assert exporter.force_flush(30)
    got = topology.drain(expected=1000)
    assert _ids(got) == [e.event_id for e in events]  # in order, once each
    stats = exporter.stats()
    assert stats.exported == 1000 and stats.replayed == 700 and stats.dropped == 0
    assert stats.spool_bytes == 0


def test_cut_connections_are_retried(topology: Topology, proxy: TcpProxy, make_exporter) -> None:
    exporter = make_exporter(topology.exchange, url=proxy.url)
    events = make_events(3000)
    for i in range(0, 3000, 100):
        exporter.export(events[i : i + 100])
        if i in (800, 1900):
            # Connected first (on a loaded machine the first connect may still be under way,
            # and a cut then is only a slower connect): then cut while publishes are in flight.
            assert wait_for(lambda: exporter.stats().connected)
            proxy.stop()
            proxy.start()
    assert exporter.force_flush(30)
    counts = collections.Counter(_ids(topology.drain(expected=3000)))
    assert set(counts) == {e.event_id for e in events}
    stats = exporter.stats()
    assert stats.connection_failures >= 1
    # Duplicates only come from messages in flight when a connection was cut.
    assert sum(counts.values()) - len(counts) <= stats.retried


def test_hung_broker_hits_the_publish_timeout_and_recovers(
    topology: Topology, proxy: TcpProxy, make_exporter, caplog
) -> None:
    exporter = make_exporter(topology.exchange, url=proxy.url, publish_timeout_ms=500)
    exporter.export(make_events(5))
    assert exporter.force_flush(20)
    proxy.freeze()
    events = make_events(50)
    with caplog.at_level(logging.WARNING, logger="lineage_exporters.rabbitmq"):
        exporter.export(events)
        assert wait_for(lambda: exporter.stats().retried >= 1, timeout=10)
        proxy.thaw()
        proxy.stop()  # the frozen connections are dead; let it reconnect afresh
        proxy.start()
        assert exporter.force_flush(30)
    assert "no publisher confirm" in caplog.text
    got = set(_ids(topology.drain(expected=55)))
    assert {e.event_id for e in events} <= got


def test_drops_only_past_both_caps_counted_and_logged_once(
    topology: Topology, proxy: TcpProxy, make_exporter, caplog
) -> None:
    proxy.stop()
    events = make_events(400)
    one = len(events[0].payload) + 200
    exporter = make_exporter(
        topology.exchange, url=proxy.url, memory_buffer_events=100, spool_max_bytes=100 * one
    )
    with caplog.at_level(logging.WARNING, logger="lineage_exporters.rabbitmq"):
        results = [exporter.export(events[i : i + 50]) for i in range(0, 400, 50)]
    stats = exporter.stats()
    assert stats.buffered == 100
    assert 50 <= stats.spooled <= 100
    assert stats.dropped == 400 - 100 - stats.spooled
    assert ExportResult.FAILURE in results
    drop_lines = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert len(drop_lines) == 1  # once per interval, not once per batch
    kept = {e.event_id for e in events[: 100 + stats.spooled]}
    proxy.start()
    assert exporter.force_flush(30)
    assert set(_ids(topology.drain(expected=len(kept)))) == kept


def test_export_returns_without_waiting_for_the_broker(proxy: TcpProxy, make_exporter) -> None:
    """With the broker hung, export() still hands events over (the pipeline never blocks)."""
    proxy.freeze()
    exporter = make_exporter("test.lineage.rmq.never", url=proxy.url, memory_buffer_events=50)
    for _ in range(20):
        assert exporter.export(make_events(10)) is ExportResult.SUCCESS
    stats = exporter.stats()
    assert stats.buffered + stats.spooled == 200


def test_flush_while_away_spills_memory_and_shutdown_keeps_everything(
    topology: Topology, proxy: TcpProxy, make_exporter, tmp_path
) -> None:
    proxy.stop()
    spool = str(tmp_path / "keep")
    exporter = make_exporter(topology.exchange, url=proxy.url, spool_dir=spool)
    events = make_events(200)
    exporter.export(events)
    assert wait_for(lambda: exporter.stats().connection_failures >= 1)
    assert exporter.force_flush(10)  # memory goes to disk while the broker is away
    assert exporter.stats().buffered == 0 and exporter.stats().spooled == 200
    exporter.shutdown(5)
    proxy.start()
    started = time.monotonic()
    again = make_exporter(topology.exchange, url=proxy.url, spool_dir=spool)
    assert again.force_flush(30)
    assert again.stats().replayed == 200
    assert _ids(topology.drain(expected=200)) == [e.event_id for e in events]
    assert time.monotonic() - started < 60
