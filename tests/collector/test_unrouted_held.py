"""Nothing is unroutable (issue 13, item 1): events published before any collector exists are
held by the broker (the events exchange's alternate exchange) and stored once a collector starts.

The exporter is the real one, on the shared broker, with a unique topic that nothing has
declared before: no queue is bound when it publishes.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pika
import pika.exceptions
import pytest
from collector_helpers import RABBIT_URL, many_events, queue_depth, running, wait_until

from lineage_exporters.rabbitmq import RabbitMQExporter
from lineage_exporters.rabbitmq.config import RabbitMQConfig
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.sdk.events import encode_event
from lineage_sdk.transport.unrouted import holding_queue

pytestmark = pytest.mark.rabbitmq


def _publish_with_no_collector(topic: str, url: str, spool: Path, count: int) -> None:
    exporter = RabbitMQExporter(RabbitMQConfig(url=url, spool_dir=str(spool)), exchange=topic)
    try:
        events = [encode_event(e) for e in many_events(count, prefix=uuid.uuid4().hex[:6])]
        for i in range(0, count, 100):
            exporter.export(events[i : i + 100])
        assert exporter.force_flush(30)
        stats = exporter.stats()
        assert (stats.exported, stats.unroutable, stats.dropped) == (count, 0, 0)
    finally:
        exporter.shutdown(10)


def _queue_type(queue: str) -> str:
    """What the broker says the queue is: redeclaring a quorum queue as classic is refused."""
    connection = pika.BlockingConnection(pika.URLParameters(RABBIT_URL))
    try:
        connection.channel().queue_declare(
            queue, durable=True, arguments={"x-queue-type": "classic"}
        )
    except pika.exceptions.ChannelClosedByBroker as exc:
        return "quorum" if exc.reply_code == 406 else f"refused {exc.reply_code}"
    finally:
        if connection.is_open:
            connection.close()
    return "classic"


def _stored(url: str) -> int:
    store = EngineStore(SqlBackend(url))
    store.open()
    try:
        return store.count_events()
    finally:
        store.close()


def test_events_published_before_any_collector_are_stored_once_it_starts(
    make_config, tmp_path: Path
) -> None:
    config = make_config()
    topic = config.collector_topic
    _publish_with_no_collector(topic, RABBIT_URL, tmp_path / "spool", 1000)
    assert queue_depth(holding_queue(topic)) == 1000  # held by the broker, none returned
    assert _queue_type(holding_queue(topic)) == "quorum"  # survives the loss of a node

    sql_url = f"sqlite:///{tmp_path}/lineage.db"
    with running(config, LineageManager(config)):
        wait_until(lambda: _stored(sql_url) == 1000, 60, message="1000 events stored")
    assert _stored(sql_url) == 1000
    assert queue_depth(holding_queue(topic)) == 0


def test_what_no_collector_binds_stays_held_until_one_does(make_config, tmp_path: Path) -> None:
    """A collector whose binding matches nothing moves the held events through the exchange
    once; they come back to the holding queue (no loop), and a matching collector takes them."""
    narrow = make_config(
        collector={"queue": f"narrow.{uuid.uuid4().hex[:8]}", "binding_key": "x.#"}
    )
    topic = narrow.collector_topic
    _publish_with_no_collector(topic, RABBIT_URL, tmp_path / "spool", 20)

    with running(narrow, LineageManager(narrow)):
        wait_until(lambda: queue_depth(holding_queue(topic)) == 20, 10, message="held again")
    assert _stored(f"sqlite:///{tmp_path}/lineage.db") == 0

    broad = make_config()
    with running(broad, LineageManager(broad)):
        wait_until(lambda: _stored(f"sqlite:///{tmp_path}/lineage.db") == 20, 30, message="20")
    assert queue_depth(holding_queue(topic)) == 0
