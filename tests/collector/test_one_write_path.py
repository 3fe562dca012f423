"""One path from a message to the stores: the queue consumer and the HTTP ingest both await
``LineageCollectorService.handle_lineage_events`` on an event loop (the consumer's own, the
server's). The server's loop never runs the store write; the consumer's, which runs nothing else,
does."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx
import pytest
from collector_helpers import dumps, json_props, many_events, publish, running, wait_until

from lineage_sdk.collector.api import ApiServer, create_app
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.config.schema import LineageConfig


class Calls:
    """Where ``handle_lineage_events`` was awaited, and where the store wrote."""

    def __init__(self) -> None:
        self.awaited: list[tuple[str, int]] = []  # (thread, events)
        self.written_on: list[str] = []


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    seen = Calls()
    handle = LineageCollectorService.handle_lineage_events
    write = LineageCollectorService._write_batch

    async def spy_handle(
        self: LineageCollectorService, events: Iterable[Any], **kwargs: Any
    ) -> Any:
        asyncio.get_running_loop()  # raises unless awaited on a running loop
        events = list(events)
        seen.awaited.append((threading.current_thread().name, len(events)))
        return await handle(self, events, **kwargs)

    def spy_write(self: LineageCollectorService, records: list[Any]) -> None:
        seen.written_on.append(threading.current_thread().name)
        write(self, records)

    monkeypatch.setattr(LineageCollectorService, "handle_lineage_events", spy_handle)
    monkeypatch.setattr(LineageCollectorService, "_write_batch", spy_write)
    return seen


@pytest.mark.rabbitmq
def test_the_consumer_awaits_the_service_on_its_own_loop(make_config, calls: Calls) -> None:
    config = make_config()
    events = many_events(40)
    with running(config) as collector:
        assert collector.service.is_connected  # the service connected the manager
        assert collector.manager.is_connected
        publish(config.collector_topic, [(dumps(e), json_props()) for e in events])
        wait_until(lambda: sum(n for _, n in calls.awaited) >= 40, 30, message="40 events")
    assert not collector.service.is_connected and not collector.manager.is_connected
    assert {thread for thread, _ in calls.awaited} == {"test-collector"}
    assert set(calls.written_on) == {"test-collector"}  # on its private loop: no thread switch
    store = EngineStore(SqlBackend(config.section("store.sql").url))
    store.open()
    try:
        assert store.count_events() == 40
    finally:
        store.close()


def test_the_http_ingest_awaits_the_service_on_the_servers_loop(
    tmp_path: Path, calls: Calls
) -> None:
    config = LineageConfig.model_validate(
        {"store": {"backend": "sql", "sql": {"url": f"sqlite:///{tmp_path}/api.db"}}}
    )
    manager = LineageManager(config)
    with manager, ApiServer(create_app(manager)) as server:
        events = many_events(3)
        single = httpx.post(f"{server.url}/api/v1/lineage", json=events[0], timeout=30)
        batch = httpx.post(f"{server.url}/api/v1/lineage/batch", json=events[1:], timeout=30)
        assert (single.status_code, batch.status_code) == (201, 200)
        assert [n for _, n in calls.awaited] == [1, 2]
        loop_threads = {thread for thread, _ in calls.awaited}
        assert len(loop_threads) == 1 and not loop_threads & set(calls.written_on)
        store = manager.get_store()
        assert isinstance(store, EngineStore) and isinstance(store.backend, SqlBackend)
        assert store.count_events() == 3
