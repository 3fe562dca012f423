"""Events published to the exchange end up in every configured store, exactly once each."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import pytest
from collector_helpers import (
    BATCH_CONTENT_TYPE,
    dumps,
    event_id,
    json_props,
    many_events,
    publish,
    running,
    wait_until,
)

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.stores.sql_backend import SqlBackend

pytestmark = pytest.mark.rabbitmq


def test_single_and_batch_messages_reach_every_store_once(
    make_config, sink, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    config = make_config(
        store={
            "backend": "composite",
            "backends": ["sql", "logging", "openlineage_http"],
            "openlineage_http": {"url": sink.url, "api_key": "s3cret"},
            "logging": {"logger_name": "test.lineage.events"},
        }
    )
    events = many_events(300)
    singles = [(dumps(e), json_props(message_id=event_id(e))) for e in events[:200]]
    batches = [
        (dumps(events[i : i + 20]), json_props(content_type=BATCH_CONTENT_TYPE))
        for i in range(200, 300, 20)
    ]
    caplog.set_level(logging.INFO, logger="test.lineage.events")
    with running(config) as collector:
        publish(config.collector_topic, [*singles, *batches])
        wait_until(
            lambda: len({event_id(e) for e in sink.events}) >= 300,
            30,
            message="events in the HTTP sink",
        )
        wait_until(lambda: collector.metrics.messages_consumed._value.get() >= 205, 10)
    store = EngineStore(SqlBackend(config.section("store.sql").url))
    store.open()
    try:
        assert store.count_events() == 300
        expected = {event_id(e) for e in events}
        assert {event_id(e) for e in store.events_of_run(events[0]["run"]["runId"])} <= expected
        counts = Counter(event_id(e) for e in sink.events)
        assert set(counts) == expected
        assert max(counts.values()) == 1
        assert set(sink.auth) == {"Bearer s3cret"}
        lines = [r.getMessage() for r in caplog.records if r.name == "test.lineage.events"]
        logged = Counter(__import__("orjson").loads(line)["event_id"] for line in lines)
        assert set(logged) == expected and max(logged.values()) == 1
    finally:
        store.close()


def test_stores_from_manager_and_get_store(make_config, sink):
    config = make_config(store={"backend": "composite", "backends": ["sql", "logging"]})
    manager = LineageManager(config)
    assert [s.name for s in manager.stores] == ["sql", "logging"]
    assert manager.get_store().name == "composite"
    single = LineageManager(make_config(store={"backend": "logging"}))
    assert single.get_store().name == "logging"


def test_redelivered_duplicates_leave_one_copy(make_config):
    config = make_config()
    events = many_events(40)
    bodies = [(dumps(e), json_props()) for e in events]
    with running(config) as collector:
        publish(config.collector_topic, [*bodies, *bodies[:25]])
        wait_until(lambda: collector.metrics.messages_consumed._value.get() >= 65, 20)
    store = EngineStore(SqlBackend(config.section("store.sql").url))
    store.open()
    try:
        assert store.count_events() == 40
    finally:
        store.close()


def test_several_collectors_share_one_queue(make_config):
    config = make_config()
    events = many_events(2000, prefix="shared")
    with running(config) as first, running(config) as second:
        from collector_helpers import publish_fast

        publish_fast(config.collector_topic, [dumps(e) for e in events])
        wait_until(
            lambda: (
                first.metrics.messages_consumed._value.get()
                + second.metrics.messages_consumed._value.get()
                >= 2000
            ),
            60,
        )
        assert first.metrics.messages_consumed._value.get() > 0
        assert second.metrics.messages_consumed._value.get() > 0
    store = EngineStore(SqlBackend(config.section("store.sql").url))
    store.open()
    try:
        assert store.count_events() == 2000
    finally:
        store.close()


def test_handle_lineage_event_accepts_models_and_dicts(make_config):
    from lineage_sdk.collector.service import LineageCollectorService
    from lineage_sdk.exceptions import InvalidEventError
    from lineage_sdk.models import parse_event

    config = make_config()
    with LineageManager(config) as manager:
        service = LineageCollectorService(manager)
        raw = many_events(2)
        record = service.handle_lineage_event_sync(raw[0], raw_message=b"...", delivery_tag=1)
        assert record.event_id == event_id(raw[0])
        service.handle_lineage_event_sync(parse_event(raw[1]))
        with pytest.raises(InvalidEventError, match="runId"):
            service.handle_lineage_event_sync({**raw[0], "run": {"runId": "nope"}})
        store = manager.get_store()
        assert isinstance(store, EngineStore) and isinstance(store.backend, SqlBackend)
        assert store.count_events() == 2


@pytest.mark.parametrize("events_per_message", [1, 20])
def test_events_from_the_sdk_rabbitmq_exporter(make_config, tmp_path, events_per_message):
    exporter_mod = pytest.importorskip("lineage_exporters.rabbitmq")
    from lineage_sdk.sdk.events import encode_event
    from lineage_sdk.sdk.export import ExportResult

    config = make_config(
        rabbitmq={"events_per_message": events_per_message, "spool_dir": str(tmp_path / "spool")}
    )
    events = many_events(500, prefix=f"exported{events_per_message}")
    with running(config):
        exporter = exporter_mod.RabbitMQExporter.from_config(config)
        try:
            for i in range(0, len(events), 100):
                assert (
                    exporter.export([encode_event(e) for e in events[i : i + 100]])
                    == ExportResult.SUCCESS
                )
            assert exporter.force_flush(30)
        finally:
            exporter.shutdown(10)
        store = EngineStore(SqlBackend(config.section("store.sql").url))
        store.open()
        try:
            wait_until(lambda: store.count_events() >= 500, 30, message="exported events stored")
            assert store.count_events() == 500
            run = events[0]["run"]["runId"]
            assert [event_id(e) for e in store.events_of_run(run)] == [
                event_id(e) for e in events[:2]
            ]
        finally:
            store.close()
