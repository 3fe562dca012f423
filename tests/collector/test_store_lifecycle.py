"""The LineageManager is the one owner of store lifecycles: every store, including each leaf of a
composite, is opened once and closed once, whoever else is asked to open or close.

Real stores: the sql store (the engine over the sql backend) on a SQLite file (counted through
a thin subclass) next to a small store registered in-process under its own name, both built by
the manager from configuration.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from collector_helpers import many_events

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.store import BaseLineageStore, LineageRecord, LineageStoreProtocol
from lineage_sdk.collector.stores.composite import CompositeStore
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import StoreError


class CountingSqlStore(EngineStore):
    """The real sql store (the engine over the sql backend), counting the lifecycle calls it
    receives."""

    def __init__(self, url: str) -> None:
        super().__init__(SqlBackend(url))
        self.calls: list[str] = []

    def open(self) -> None:
        self.calls.append("open")
        super().open()

    def close(self) -> None:
        self.calls.append("close")
        super().close()


class MemoryStore(BaseLineageStore):
    """A plugin-like store: keeps event ids, refuses writes unless open; may fail to open."""

    name = "memory"

    def __init__(self, *, fail_open: bool = False) -> None:
        self.fail_open = fail_open
        self.calls: list[str] = []
        self.event_ids: set[str] = set()
        self.is_open = False

    def open(self) -> None:
        self.calls.append("open")
        if self.fail_open:
            raise StoreError(self.name, "server unreachable")
        self.is_open = True

    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        if not self.is_open:
            raise StoreError(self.name, "store is not open")
        self.event_ids.update(r.event_id for r in records)

    def close(self) -> None:
        self.calls.append("close")
        self.is_open = False


def _manager(
    tmp_path: Path, backends: list[str], **memory: bool
) -> tuple[LineageManager, dict[str, LineageStoreProtocol]]:
    config = LineageConfig(
        store={
            "backend": "composite" if len(backends) > 1 else backends[0],
            "backends": backends if len(backends) > 1 else [],
            "sql": {"url": f"sqlite:///{tmp_path / 'lineage.db'}"},
        }
    )
    built: dict[str, LineageStoreProtocol] = {}

    def sql(cfg: LineageConfig) -> LineageStoreProtocol:
        built["sql"] = CountingSqlStore(cfg.section("store.sql").url)
        return built["sql"]

    def mem(_cfg: LineageConfig) -> LineageStoreProtocol:
        built["memory"] = MemoryStore(**memory)
        return built["memory"]

    return LineageManager(config, creators={"sql": sql, "memory": mem}), built


def _calls(store: LineageStoreProtocol) -> list[str]:
    assert isinstance(store, CountingSqlStore | MemoryStore)
    return store.calls


def test_each_leaf_of_a_composite_is_opened_once_and_closed_once(tmp_path):
    manager, built = _manager(tmp_path, ["sql", "memory"])
    manager.connect_sync()
    manager.connect_sync()  # a second open (the bench opens before run() opens) changes nothing
    composite = manager.get_store()
    assert isinstance(composite, CompositeStore)
    assert [_calls(built[name]) for name in ("sql", "memory")] == [["open"], ["open"]]

    service = LineageCollectorService(manager)
    asyncio.run(service.handle_lineage_events(many_events(10)))
    sql = built["sql"]
    memory = built["memory"]
    assert isinstance(sql, EngineStore) and isinstance(memory, MemoryStore)
    assert sql.count_events() == 10 and len(memory.event_ids) == 10

    # The composite's own open and close are its writer pool's: the leaves stay open.
    composite.close()
    composite.open()
    assert [_calls(built[name]) for name in ("sql", "memory")] == [["open"], ["open"]]
    assert sql.count_events() == 10

    manager.close_sync()
    manager.close_sync()  # closing again closes nothing twice
    assert [_calls(built[name]) for name in ("sql", "memory")] == [
        ["open", "close"],
        ["open", "close"],
    ]
    with pytest.raises(StoreError, match="not open"):
        sql.count_events()


def test_the_manager_opens_the_composite_so_its_writers_run_from_the_first_batch(tmp_path):
    manager, built = _manager(tmp_path, ["memory", "sql"])
    composite = manager.get_store()
    with pytest.raises(RuntimeError, match="not open"):
        composite.write_batch([])  # built but not opened: no writer pool yet
    with manager:
        seen: list[threading.Thread] = []
        original = built["sql"].write_batch

        def write_batch(records: Sequence[LineageRecord]) -> None:
            seen.append(threading.current_thread())
            original(records)

        built["sql"].write_batch = write_batch  # type: ignore[method-assign]
        composite.write_batch([])
        assert seen and seen[0].name.startswith("lineage-composite")
    assert not seen[0].is_alive()  # closing the manager ended the composite's writers


def test_a_store_that_fails_to_open_closes_what_was_opened_once(tmp_path, caplog):
    manager, built = _manager(tmp_path, ["sql", "memory"], fail_open=True)
    with pytest.raises(StoreError, match="server unreachable"):
        manager.connect_sync()
    assert _calls(built["sql"]) == ["open", "close"]
    assert _calls(built["memory"]) == ["open", "close"]  # released what its open acquired
    manager.close_sync()  # nothing is open: nothing is closed again
    assert _calls(built["sql"]) == ["open", "close"]
    assert _calls(built["memory"]) == ["open", "close"]


def test_a_manager_never_opened_closes_nothing(tmp_path):
    manager, built = _manager(tmp_path, ["sql"])
    manager.build()
    manager.close_sync()
    assert _calls(built["sql"]) == []


def test_close_goes_on_past_a_failing_store_last_opened_first(tmp_path, caplog):
    order: list[str] = []

    class Closing(MemoryStore):
        def close(self) -> None:
            super().close()
            order.append(self.name)
            if self.name == "b":
                raise OSError("stuck")

    stores: list[LineageStoreProtocol] = []
    for name in "abc":
        store = Closing()
        store.name = name
        stores.append(store)
    manager = LineageManager(LineageConfig(), stores=stores)
    manager.connect_sync()
    manager.get_store().write_batch([])
    with caplog.at_level(logging.ERROR, logger="lineage_sdk.collector"):
        manager.close_sync()  # never raises
    assert order == ["c", "b", "a"]
    assert "closing store b failed" in caplog.text


def test_check_opens_and_closes_only_a_manager_that_is_not_open(tmp_path):
    manager, built = _manager(tmp_path, ["sql", "memory"])
    assert manager.check() == {"sql": None, "memory": None}
    assert [_calls(built[name]) for name in ("sql", "memory")] == [["open", "close"]] * 2
    with manager:
        assert manager.check() == {"sql": None, "memory": None}
        assert [_calls(built[name]) for name in ("sql", "memory")] == [
            ["open", "close", "open"]
        ] * 2
    assert [_calls(built[name]) for name in ("sql", "memory")] == [["open", "close"] * 2] * 2
