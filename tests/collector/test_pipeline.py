"""A message is acked only after the stores wrote it, batches are acked in order, and a stop
waits for the write in flight and acks it (checked with a store that holds its writes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest
from collector_helpers import connect, dumps, json_props, publish, run_event, running, wait_until
from pika.adapters.blocking_connection import BlockingChannel

from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.store import BaseLineageStore, LineageRecord
from lineage_sdk.collector.topology import Topology

pytestmark = pytest.mark.rabbitmq


class _GatedStore(BaseLineageStore):
    """Holds every write until ``gate`` is set; records what it wrote."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.written: list[str] = []

    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        self.entered.set()
        assert self.gate.wait(30), "test never opened the gate"
        self.written.extend(r.event_id for r in records)

    def close(self) -> None:
        self.gate.set()


def _ready(queue: str) -> int:
    conn = connect()
    try:
        return int(conn.channel().queue_declare(queue, passive=True).method.message_count)
    finally:
        conn.close()


def _spy_acks(monkeypatch: pytest.MonkeyPatch, store: _GatedStore) -> list[tuple[int, int]]:
    """(acked delivery tag, events written at that moment) for every ack of the collector."""
    acks: list[tuple[int, int]] = []
    original = BlockingChannel.basic_ack

    def basic_ack(self: BlockingChannel, delivery_tag: int = 0, multiple: bool = False) -> None:
        assert multiple
        acks.append((delivery_tag, len(store.written)))
        original(self, delivery_tag=delivery_tag, multiple=multiple)

    monkeypatch.setattr(BlockingChannel, "basic_ack", basic_ack)
    return acks


def test_messages_are_acked_only_after_their_write_finished(make_config, monkeypatch):
    # A long batch timeout: batches close on size, so the held first one has at least five
    # messages (on a loaded machine a 20 ms timeout closed it at four, and the consumer, busy
    # with the held write, never received a fifth).
    config = make_config(collector={"batch_size": 5, "batch_timeout_ms": 10000, "prefetch": 50})
    store = _GatedStore()
    acks = _spy_acks(monkeypatch, store)
    events = [run_event(job=f"gated{i}") for i in range(20)]
    with running(config, LineageManager(config, stores=[store])) as collector:
        publish(config.collector_topic, [(dumps(e), json_props()) for e in events])
        assert store.entered.wait(20)
        assert collector.metrics.messages_consumed._value.get() >= 5
        # the first write is held: nothing may be acked meanwhile
        time.sleep(0.5)
        assert acks == []
        store.gate.set()
        wait_until(lambda: len(store.written) == len(events), 20, message="all written")
        wait_until(lambda: bool(acks) and acks[-1][0] == len(events), 20, message="all acked")
    # one message = one event, one channel: tag N is the N-th message. Every multiple ack up to
    # tag N came after N events were written, and tags only grow (batches acked in order).
    assert all(written >= tag for tag, written in acks), acks
    assert [tag for tag, _ in acks] == sorted({tag for tag, _ in acks})
    assert len(set(store.written)) == len(events)
    assert _ready(Topology.from_config(config).queue) == 0


def test_stop_waits_for_the_write_in_flight_and_acks_it(make_config, monkeypatch):
    # A long batch timeout: the five events must make one batch even on a loaded machine (a
    # batch closed early by its timeout left the fifth unwritten when stop() came).
    config = make_config(collector={"batch_size": 5, "batch_timeout_ms": 10000, "prefetch": 50})
    store = _GatedStore()
    acks = _spy_acks(monkeypatch, store)
    topo = Topology.from_config(config)
    events = [run_event(job=f"stop{i}") for i in range(5)]
    stopper: threading.Timer | None = None
    with running(config, LineageManager(config, stores=[store])) as collector:
        publish(config.collector_topic, [(dumps(e), json_props()) for e in events])
        assert store.entered.wait(20)
        collector.stop()  # asked to stop while the write is held ...
        stopper = threading.Timer(0.3, store.gate.set)  # ... which finishes a moment later
        stopper.start()
    stopper.join()
    assert len(store.written) == len(events)
    assert acks and acks[-1] == (len(events), len(events))
    # everything written was acked before the connection closed: nothing came back
    assert _ready(topo.queue) == 0
