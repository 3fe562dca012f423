"""A broker that blocks publishers (resource alarm) confirms nothing: events go to the spool
promptly, nothing is lost, and publishing resumes when the alarm clears. On a private node,
since raising an alarm on the shared broker would block everyone."""

from __future__ import annotations

import collections
import logging
from pathlib import Path

import pytest
from brokers import RabbitNode
from rabbitmq_support import make_events, unique_topology, wait_for

from lineage_exporters.rabbitmq import RabbitMQExporter
from lineage_exporters.rabbitmq.config import RabbitMQConfig

pytestmark = pytest.mark.rabbitmq


def test_blocked_connection_spools_and_recovers(
    rabbit_node: RabbitNode, tmp_path: Path, caplog
) -> None:
    with unique_topology(rabbit_node.url) as topo:
        exporter = RabbitMQExporter(
            RabbitMQConfig(
                url=rabbit_node.url,
                spool_dir=str(tmp_path / "spool"),
                reconnect_initial_ms=50,
                reconnect_max_ms=500,
            ),
            exchange=topo.exchange,
        )
        try:
            first = make_events(10)
            exporter.export(first)
            assert exporter.force_flush(20)
            with caplog.at_level(logging.WARNING, logger="lineage_exporters.rabbitmq"):
                rabbit_node.ctl("set_vm_memory_high_watermark", "0.000001")  # memory alarm
                blocked = make_events(300)
                for i in range(0, 300, 50):
                    exporter.export(blocked[i : i + 50])
                # Blocked, then given up after spool_fsync_interval_ms: on disk within ~1 s.
                assert wait_for(lambda: exporter.stats().spooled >= 300, timeout=5)
                assert "blocked publishing" in caplog.text
                rabbit_node.ctl("set_vm_memory_high_watermark", "0.4")
                assert exporter.force_flush(30)
            stats = exporter.stats()
            assert stats.dropped == 0
            got = collections.Counter(
                props.message_id for _, props, _ in topo.drain(expected=310, timeout=30)
            )
            assert set(got) == {e.event_id for e in first + blocked}
        finally:
            exporter.shutdown(10)
