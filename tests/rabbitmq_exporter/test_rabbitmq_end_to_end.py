"""From @track_lineage to a queue bound to the exchange, through the real SDK pipeline."""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from brokers import RabbitNode
from rabbitmq_support import Topology, unique_topology, validate_event, wait_for

import lineage_sdk
from lineage_exporters.rabbitmq import RabbitMQExporter
from lineage_exporters.rabbitmq.config import RabbitMQConfig
from lineage_sdk import LineageDataset, configure, track_lineage
from lineage_sdk.config.schema import LineageConfig, PipelineConfig
from lineage_sdk.sdk.exporters import InMemoryExporter

pytestmark = pytest.mark.rabbitmq

ORDERS = LineageDataset("postgres://db:5432", "shop.public.orders")
REPORT = LineageDataset("s3://bucket", "reports/daily.parquet")


def _sdk_to(topology: Topology, spool: Path) -> tuple[RabbitMQExporter, InMemoryExporter]:
    """The SDK publishing to the test's exchange, with a memory exporter as the witness."""
    config = LineageConfig(
        collector_topic=topology.exchange,
        rabbitmq=RabbitMQConfig(
            url=topology.url,
            spool_dir=str(spool),
            reconnect_initial_ms=100,
            reconnect_max_ms=2000,
        ),
        pipeline=PipelineConfig(max_queue_size=200_000),
    )
    rabbit = RabbitMQExporter.from_config(config)
    witness = InMemoryExporter()
    sdk = configure(config, exporters=[rabbit, witness])
    assert sdk is not None
    return rabbit, witness


@pytest.fixture
def sdk_to(topology: Topology, tmp_path) -> Iterator[tuple[RabbitMQExporter, InMemoryExporter]]:
    yield _sdk_to(topology, tmp_path / "spool")
    lineage_sdk.shutdown(10)


@pytest.fixture
def own_topology(rabbit_node: RabbitNode) -> Iterator[Topology]:
    """The test's exchange and queue on a private node that the test may stop."""
    with unique_topology(rabbit_node.url) as topo:
        yield topo


@pytest.fixture
def sdk_to_own_node(
    own_topology: Topology, tmp_path
) -> Iterator[tuple[RabbitMQExporter, InMemoryExporter]]:
    yield _sdk_to(own_topology, tmp_path / "spool")
    lineage_sdk.shutdown(10)


def test_decorated_functions_arrive_intact_valid_once(topology: Topology, sdk_to) -> None:
    rabbit, witness = sdk_to

    @track_lineage(job_name="extract.orders", inputs=[ORDERS])
    def extract(n: int) -> list[int]:
        return list(range(n))

    @track_lineage(job_name="daily.report", inputs=[ORDERS], outputs=[REPORT])
    def report() -> int:
        return sum(extract(3))

    @track_lineage(job_name="broken#step")
    def broken() -> None:
        raise ValueError("bad row")

    @track_lineage(job_name="async.step", outputs=[REPORT])
    async def async_step() -> str:
        await asyncio.sleep(0)
        return "done"

    assert report() == 3
    with pytest.raises(ValueError, match="bad row"):
        broken()
    assert asyncio.run(async_step()) == "done"
    assert lineage_sdk.force_flush(30)
    sent = witness.encoded
    assert len(sent) == 8
    got = topology.drain(expected=len(sent))
    counts = collections.Counter(props.message_id for _, props, _ in got)
    assert set(counts) == {e.event_id for e in sent}
    assert max(counts.values()) == 1
    payloads = {e.event_id: e.payload for e in sent}
    kinds = collections.Counter()
    for method, props, body in got:
        assert body == payloads[props.message_id]
        event = orjson.loads(body)
        validate_event(event)
        kinds[event["eventType"]] += 1
        assert method.routing_key.endswith("." + event["eventType"])
    assert kinds == {"START": 4, "COMPLETE": 3, "FAIL": 1}
    assert any(m.routing_key.split(".")[1] == "broken%23step" for m, _, _ in got)
    assert rabbit.stats().exported == 8


@pytest.mark.slow
def test_broker_failure_in_a_stream_of_20000_events(
    rabbit_node: RabbitNode, own_topology: Topology, sdk_to_own_node
) -> None:
    """close_all_connections, then stop_app/start_app mid-stream: every event arrives.

    The broker that stops is a private node of this test, never the machine's shared one.
    """
    topology = own_topology
    rabbit, witness = sdk_to_own_node
    calls = 10_000  # START + COMPLETE each
    done = threading.Event()

    @track_lineage(job_name="stream.step", inputs=[ORDERS], outputs=[REPORT])
    def step(i: int) -> int:
        return i

    def produce() -> None:
        for i in range(calls):
            step(i)
            if i % 10 == 0:
                time.sleep(0.008)  # ~8 s of traffic, so the outage falls mid-stream
        done.set()

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        assert wait_for(lambda: rabbit.stats().exported > 1000, timeout=20)
        rabbit_node.ctl("close_all_connections", "lineage-sdk outage test")
        time.sleep(1.0)
        rabbit_node.ctl("stop_app")
        time.sleep(2.0)
    finally:
        rabbit_node.ctl("start_app")
        rabbit_node.await_startup()
    producer.join(60)
    assert done.is_set()
    assert lineage_sdk.force_flush(60)
    assert wait_for(lambda: rabbit.stats().buffered == 0 and rabbit.stats().spool_bytes == 0, 30)
    sent = {e.event_id for e in witness.encoded}
    assert len(sent) == 2 * calls
    got = topology.drain(expected=2 * calls, timeout=60, idle=1.0)
    counts = collections.Counter(props.message_id for _, props, _ in got)
    assert set(counts) == sent  # every event arrived
    stats = rabbit.stats()
    print(stats, "duplicates:", sum(counts.values()) - len(counts))
    assert stats.dropped == 0
    assert stats.connection_failures >= 2
    # Duplicates are allowed only for messages in flight when a connection was cut.
    assert sum(counts.values()) - len(counts) <= stats.retried
