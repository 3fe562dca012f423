"""Publishing to the real broker: messages intact, each exactly once, valid, routed, counted."""

from __future__ import annotations

import collections
import os
import subprocess

import orjson
import pytest
from rabbitmq_support import (
    Topology,
    blocking_connection,
    delete_event_exchange,
    make_event,
    make_events,
    validate_event,
)

from lineage_exporters.rabbitmq import (
    BATCH_CONTENT_TYPE,
    HEADER_EVENT_COUNT,
    HEADER_EVENT_IDS,
    HEADER_EVENT_TYPE,
    HEADER_PRODUCER,
    HEADER_SCHEMA_URL,
    JSON_CONTENT_TYPE,
    RabbitMQExporter,
    batch_message_id,
    routing_key,
)
from lineage_exporters.rabbitmq.config import RabbitMQConfig
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.sdk.export import ExportResult
from lineage_sdk.transport.unrouted import event_exchange_arguments

pytestmark = pytest.mark.rabbitmq


def test_events_arrive_intact_once_each_and_valid(topology: Topology, make_exporter) -> None:
    exporter = make_exporter(topology.exchange)
    events = make_events(1000)
    for i in range(0, len(events), 100):
        assert exporter.export(events[i : i + 100]) is ExportResult.SUCCESS
    assert exporter.force_flush(30)
    got = topology.drain(expected=len(events))
    by_id = {e.event_id: e for e in events}
    counts = collections.Counter(props.message_id for _, props, _ in got)
    assert set(counts) == set(by_id)
    assert max(counts.values()) == 1
    for method, props, body in got:
        event = by_id[props.message_id]
        assert body == event.payload
        assert props.content_type == JSON_CONTENT_TYPE
        assert props.delivery_mode == 2
        assert props.headers[HEADER_EVENT_TYPE] == event.event_type
        assert props.headers[HEADER_SCHEMA_URL] == event.schema_url
        assert props.headers[HEADER_PRODUCER] == event.producer
        assert props.headers[HEADER_EVENT_COUNT] == 1
        assert method.exchange == topology.exchange
        assert method.routing_key == routing_key(
            event.job_namespace, event.job_name, event.event_type
        )
    for _, _, body in got[:50]:
        validate_event(orjson.loads(body))
    stats = exporter.stats()
    assert stats.exported == 1000
    assert (stats.dropped, stats.unroutable, stats.spooled, stats.buffered) == (0, 0, 0, 0)
    assert stats.connected


def test_routing_keys_select_with_topic_bindings(topology: Topology, make_exporter) -> None:
    completes = topology.bind("*.*.COMPLETE")
    dotted = topology.bind("ns%2Ewith%2Edots.#")
    exporter = make_exporter(topology.exchange)
    events = [
        make_event(0, namespace="ns.with.dots", name="a.b", event_type="START"),
        make_event(1, namespace="plain", name="job#1", event_type="COMPLETE"),
        make_event(2, namespace="ns.with.dots", name="c*", event_type="COMPLETE"),
    ]
    exporter.export(events)
    assert exporter.force_flush(20)
    assert {p.message_id for _, p, _ in topology.drain(completes, expected=2)} == {
        events[1].event_id,
        events[2].event_id,
    }
    assert {p.message_id for _, p, _ in topology.drain(dotted, expected=2)} == {
        events[0].event_id,
        events[2].event_id,
    }


def test_batch_mode(topology: Topology, make_exporter) -> None:
    exporter = make_exporter(topology.exchange, events_per_message=20)
    events = make_events(500, name="batch.job")
    for i in range(0, 500, 128):
        exporter.export(events[i : i + 128])
    assert exporter.force_flush(20)
    got = topology.drain(expected=25)
    seen: list[str] = []
    for method, props, body in got:
        assert props.content_type == BATCH_CONTENT_TYPE
        assert props.delivery_mode == 2
        items = orjson.loads(body)
        assert isinstance(items, list) and 1 <= len(items) <= 20
        assert props.headers[HEADER_EVENT_COUNT] == len(items)
        ids = props.headers[HEADER_EVENT_IDS].split(",")
        assert len(ids) == len(items)
        assert props.message_id == batch_message_id(ids)
        assert method.routing_key == "tests%2Ens.batch%2Ejob.START"
        seen.extend(ids)
        validate_event(items[0])
    assert sorted(seen) == sorted(e.event_id for e in events)
    assert collections.Counter(seen).most_common(1)[0][1] == 1
    by_id = {e.event_id: e.payload for e in events}
    _, props, body = got[0]
    assert (
        body
        == b"[" + b",".join(by_id[i] for i in props.headers[HEADER_EVENT_IDS].split(",")) + b"]"
    )
    assert exporter.stats().exported == 500


def test_unroutable_events_are_counted(make_exporter) -> None:
    topo = Topology(exchange=f"test.lineage.rmq.unroutable.{id(make_exporter):x}", queue="")
    conn = blocking_connection()  # an exchange without the alternate exchange (an older one)
    conn.channel().exchange_declare(topo.exchange, "topic", durable=True)
    conn.close()
    exporter = make_exporter(topo.exchange, events_per_message=5)
    try:
        exporter.export(make_events(12, name="lonely"))
        assert exporter.force_flush(20)
        stats = exporter.stats()
        assert stats.unroutable == 12
        assert stats.exported == 0
        assert stats.buffered == 0 and stats.retried == 0
    finally:
        conn = blocking_connection()
        conn.channel().exchange_delete(topo.exchange)
        conn.close()


def test_exchange_is_declared_durable_topic_when_missing(make_exporter) -> None:
    name = f"test.lineage.rmq.declared.{id(make_exporter):x}"
    exporter = make_exporter(name)
    try:
        exporter.export(make_events(1))
        assert exporter.force_flush(20)
        conn = blocking_connection()
        try:
            # Re-declaring with other properties fails with 406, so this proves durable + topic.
            conn.channel().exchange_declare(
                name, "topic", durable=True, arguments=event_exchange_arguments(name)
            )
        finally:
            conn.close()
    finally:
        conn = blocking_connection()
        delete_event_exchange(conn.channel(), name)
        conn.close()


def test_connection_name_is_visible_on_the_broker(topology: Topology, make_exporter) -> None:
    exporter = make_exporter(topology.exchange, connection_name=f"svc-{topology.exchange}")
    exporter.export(make_events(1))
    assert exporter.force_flush(20)
    out = subprocess.run(
        ["rabbitmqctl", "-q", "list_connections", "client_properties"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert f"svc-{topology.exchange}" in out


def test_from_config_uses_collector_topic_and_namespace(topology: Topology, tmp_path) -> None:
    config = LineageConfig(
        collector_topic=topology.exchange,
        rabbitmq=RabbitMQConfig(url=topology.url, spool_dir=str(tmp_path)),  # a private vhost
    )
    exporter = RabbitMQExporter.from_config(config)
    try:
        assert exporter.exchange == topology.exchange
        assert exporter.connection_name.startswith("default/")
        exporter.export(make_events(3))
        assert exporter.force_flush(20)
        assert len(topology.drain(expected=3)) == 3
    finally:
        exporter.shutdown(5)


def test_shutdown_is_idempotent_and_export_after_it_fails_softly(
    topology: Topology, make_exporter
) -> None:
    exporter = make_exporter(topology.exchange)
    exporter.export(make_events(5))
    exporter.shutdown(10)
    exporter.shutdown(10)
    assert exporter.export(make_events(2)) is ExportResult.FAILURE
    assert exporter.stats().exported == 5
    assert exporter.stats().dropped == 2
    assert len(topology.drain(expected=5)) == 5


def test_forked_child_publishes_its_own_events_only(topology: Topology, make_exporter) -> None:
    exporter = make_exporter(topology.exchange)
    parent_events = make_events(20)
    exporter.export(parent_events)
    assert exporter.force_flush(20)
    child_events = make_events(15)
    pid = os.fork()
    if pid == 0:  # the child: the inherited exporter starts afresh on first use
        code = 1
        try:
            exporter.export(child_events)
            ok = exporter.force_flush(20) and exporter.stats().exported == 15
            exporter.shutdown(5)
            code = 0 if ok else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    got = [p.message_id for _, p, _ in topology.drain(expected=35)]
    assert sorted(got) == sorted(e.event_id for e in parent_events + child_events)
    assert exporter.stats().exported == 20
