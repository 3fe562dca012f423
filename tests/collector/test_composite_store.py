"""Unit tests of the composite store's concurrency and failure logic, with in-process stores.

The composite's integration with real stores and the real broker is covered by test_delivery.py
and tests/stores_nosql/test_collector_*.py, and the lifecycle of its stores (owned by the
LineageManager) by test_store_lifecycle.py; here the stores are plain objects so that the
concurrency itself can be proved with barriers (no timing assertions).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from lineage_sdk.collector.store import BaseLineageStore, LineageRecord
from lineage_sdk.collector.stores.composite import CompositeStore
from lineage_sdk.exceptions import StoreError

WAIT_S = 10.0  # only reached when the behaviour under test is broken


class FakeStore(BaseLineageStore):
    """Records what it was given and on which thread; ``action`` runs inside write_batch."""

    def __init__(self, name: str, action: Callable[[], None] | None = None) -> None:
        self.name = name
        self.action = action
        self.batches: list[list[Any]] = []
        self.threads: list[str] = []
        self.events: list[str] = []

    def open(self) -> None:
        self.events.append("open")

    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        self.threads.append(threading.current_thread().name)
        if self.action is not None:
            self.action()
        self.batches.append(list(records))

    def close(self) -> None:
        self.events.append("close")


RECORDS: list[Any] = ["r1", "r2", "r3"]


def test_stores_are_written_concurrently():
    # Each store waits at the barrier until the other has arrived: written one after the other,
    # the first would wait in vain and the barrier would break.
    barrier = threading.Barrier(2, timeout=WAIT_S)
    first = FakeStore("first", lambda: barrier.wait())
    second = FakeStore("second", lambda: barrier.wait())
    composite = CompositeStore([first, second])
    composite.open()
    try:
        for _ in range(3):
            composite.write_batch(RECORDS)
    finally:
        composite.close()
    assert first.batches == second.batches == [RECORDS] * 3
    assert first.threads == [threading.current_thread().name] * 3
    assert all(name.startswith("lineage-composite") for name in second.threads)
    assert first.events == second.events == []  # the manager opens and closes the stores


def test_open_starts_the_writer_pool_and_close_ends_it_leaving_the_stores_alone():
    barrier = threading.Barrier(3, timeout=WAIT_S)
    stores = [FakeStore(f"s{i}", lambda: barrier.wait()) for i in range(3)]
    composite = CompositeStore(stores)
    with pytest.raises(RuntimeError, match="not open"):
        composite.write_batch(RECORDS)
    composite.open()
    composite.write_batch(RECORDS)
    names = {s.threads[0] for s in stores[1:]}
    writers = [t for t in threading.enumerate() if t.name in names]
    composite.close()
    assert [s.batches for s in stores] == [[RECORDS]] * 3
    assert len({s.threads[0] for s in stores}) == 3
    assert writers and not any(t.is_alive() for t in writers)
    assert [s.events for s in stores] == [[], [], []]


def test_a_failing_store_raises_store_error_naming_it_after_the_others_finished():
    failed = threading.Event()
    slow_done = threading.Event()

    def fail() -> None:
        failed.set()
        raise StoreError("graph", "server went away")

    def slow() -> None:
        # Finishes only after the other store has failed: the composite must still wait for it.
        assert failed.wait(WAIT_S)
        threading.Event().wait(0.05)
        slow_done.set()

    graph = FakeStore("graph", fail)
    document = FakeStore("document", slow)
    composite = CompositeStore([graph, document])
    composite.open()
    try:
        with pytest.raises(StoreError) as info:
            composite.write_batch(RECORDS)
        assert info.value.store == "graph"
        assert "server went away" in str(info.value)
        assert not info.value.permanent
        assert slow_done.is_set()
        assert document.batches == [RECORDS] and graph.batches == []
    finally:
        composite.close()


def test_any_exception_becomes_a_store_error_naming_the_store():
    def boom() -> None:
        raise RuntimeError("disk on fire")

    composite = CompositeStore([FakeStore("ok"), FakeStore("plugin", boom)])
    composite.open()
    try:
        with pytest.raises(StoreError) as info:
            composite.write_batch(RECORDS)
    finally:
        composite.close()
    assert info.value.store == "plugin"
    assert "RuntimeError: disk on fire" in str(info.value)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_a_retryable_failure_wins_over_a_permanent_one_then_store_order():
    def permanent() -> None:
        raise StoreError("document", "too large", permanent=True)

    def retryable(name: str) -> Callable[[], None]:
        def fail() -> None:
            raise StoreError(name, "timeout")

        return fail

    stores = [
        FakeStore("document", permanent),
        FakeStore("graph", retryable("graph")),
        FakeStore("sql", retryable("sql")),
    ]
    composite = CompositeStore(stores)
    composite.open()
    try:
        with pytest.raises(StoreError) as info:
            composite.write_batch(RECORDS)
        assert info.value.store == "graph" and not info.value.permanent
        only_permanent = CompositeStore([FakeStore("ok"), stores[0]])
        only_permanent.open()
        with pytest.raises(StoreError) as info:
            only_permanent.write_batch(RECORDS)
        only_permanent.close()
        assert info.value.store == "document" and info.value.permanent
    finally:
        composite.close()


def test_a_single_store_composite_writes_inline_and_needs_no_pool():
    store = FakeStore("only")
    composite = CompositeStore([store])
    composite.open()
    composite.write_batch(RECORDS)
    composite.close()
    assert store.threads == [threading.current_thread().name]
    assert store.events == []


def test_an_empty_composite_is_refused():
    with pytest.raises(ValueError, match="at least one store"):
        CompositeStore([])


def test_manager_close_ends_the_composite_writer_threads(tmp_path):
    from lineage_sdk.collector.engine import EngineStore
    from lineage_sdk.collector.manager import LineageManager
    from lineage_sdk.collector.stores.sql_backend import SqlBackend
    from lineage_sdk.config.schema import LineageConfig

    def writers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith("lineage-composite")]

    config = LineageConfig(
        store={
            "backend": "composite",
            "backends": ["sql", "logging"],
            "sql": {"url": f"sqlite:///{tmp_path / 'c.db'}"},
        }
    )
    # the sql store is the engine over the sql backend, as the product builds it
    manager = LineageManager(
        config,
        creators={"sql": lambda c: EngineStore(SqlBackend(c.section("store.sql").url))},
    )
    manager.connect_sync()
    before = set(writers())
    manager.get_store().write_batch([])  # the second store is written on a writer thread
    started = set(writers()) - before
    assert started, "the composite wrote its second store inline"
    manager.close_sync()
    assert not (set(writers()) & started)


def test_engine_stores_share_one_derivation_of_each_batch(monkeypatch: pytest.MonkeyPatch):
    """Two engine stores beside another store: the batch is derived once (derivation is pure,
    a fifth of an engine store's write), both engine stores hold what their own derivation
    would have given, and the other store still gets the records."""
    from stores_nosql.nosql_events import records, run_event

    from lineage_sdk.collector.engine import EngineStore
    from lineage_sdk.collector.stores import composite
    from lineage_sdk.collector.stores.memory import MemoryBackend

    calls = []
    real = composite.derive
    monkeypatch.setattr(composite, "derive", lambda batch: calls.append(1) or real(batch))
    batch = records(
        run_event(job="j", run_id="r1", event_type="START", inputs=[("ns", "a")]),
        run_event(job="j", run_id="r1", event_type="COMPLETE", outputs=[("ns", "b")], seconds=1),
    )
    first, second = EngineStore(MemoryBackend()), EngineStore(MemoryBackend())
    other = FakeStore("other")
    store = CompositeStore([first, second, other])
    store.open()
    try:
        store.write_batch(batch)
    finally:
        store.close()
    assert calls == [1]
    assert other.batches == [batch]
    alone = EngineStore(MemoryBackend())
    alone.write_batch(batch)
    for engine in (first, second):
        assert engine.lineage("dataset:ns:b", direction="both", depth=5) == alone.lineage(
            "dataset:ns:b", direction="both", depth=5
        )
        assert engine.events_of_run("r1") == alone.events_of_run("r1")
