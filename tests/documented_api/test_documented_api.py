"""The Data Lineage API (issue 12, docs/data-lineage-api.md) exactly as documented: its names, its
signatures and its configuration file, against real servers (RabbitMQ on 127.0.0.1:5672,
SecantusDB for the MongoDB store, FalkorDB's Bolt endpoint for the Neo4j store).

Test plumbing (fixtures in conftest.py, the queue consumer that drives the service from the
broker, reading queues) is the only thing here that is not a documented name.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pika
import pytest
from documented_helpers import DOCUMENTED_TOML, EXCHANGE, ExchangeReader, GraphServer, connect
from servers import secantus_server

from lineage_sdk import BaseService, LineageProducer, track_lineage
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.store import LineageStoreProtocol
from lineage_sdk.collector.stores.document import DocumentLineageStore
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.graph import Neo4jLineageStore
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.config import load_config
from lineage_sdk.models import LineageDataset, LineageEvent
from lineage_sdk.transport.unrouted import holding_queue, unrouted_exchange

pytestmark = [pytest.mark.rabbitmq, pytest.mark.mongodb, pytest.mark.neo4j]

PRODUCER_URI = "https://github.com/my-org/my-service"  # the file's Markdown link, unwrapped
RUN_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
ORDERS = LineageDataset(namespace="postgres://db:5432", name="shop.public.orders")
REPORT = LineageDataset(namespace="s3://reports", name="daily/orders.parquet")


def run_event(job: str, run_id: str | None = None, event_type: str = "COMPLETE") -> dict[str, Any]:
    """A small RunEvent (FalkorDB's Bolt endpoint takes small parameters only)."""
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {
        "eventType": event_type,
        "eventTime": now,
        "producer": PRODUCER_URI,
        "schemaURL": RUN_EVENT_SCHEMA,
        "run": {"runId": run_id or str(uuid.uuid4())},
        "job": {"namespace": "my-service-ns", "name": job},
        "inputs": [{"namespace": ORDERS.namespace, "name": ORDERS.name}],
        "outputs": [],
    }


def leaves(manager: LineageManager) -> list[LineageStoreProtocol]:
    """The stores under the composite ``get_store()`` returns."""
    composite: Any = manager.get_store()
    return list(composite.stores)


def stored_in(store: Any, run_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = store.events_of_run(run_id)
    return events


def names(datasets: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


def unique(prefix: str) -> str:
    return f"{prefix}.{uuid.uuid4().hex[:10]}"


# -- the file -------------------------------------------------------------------------------------


def test_the_docs_page_shows_the_file_these_tests_run() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "data-lineage-api.md"
    assert f"```toml\n{DOCUMENTED_TOML}```" in page.read_text()


async def test_get_store_is_the_composite_of_document_and_graph_writing_to_both(
    documented_env: Path,
) -> None:
    manager = LineageManager(load_config(path=documented_env))
    async with manager:
        store = manager.get_store()
        assert isinstance(store, LineageStoreProtocol)
        document, graph = leaves(manager)
        # The documented names, each the engine over its backend.
        assert type(document) is DocumentLineageStore and type(graph) is Neo4jLineageStore
        assert isinstance(document, EngineStore) and isinstance(graph, EngineStore)
        assert type(document.backend) is DocumentBackend and type(graph.backend) is GraphBackend
        assert isinstance(document, LineageStoreProtocol)
        assert isinstance(graph, LineageStoreProtocol)
        # collection_name names the backend's collections: <name>_events, _runs, ...
        assert document.backend._coll("events").name == "audit_lineage_events_events"

        event = run_event(unique("documented.get_store"))
        await LineageCollectorService(manager).handle_lineage_event(event)
        run_id = event["run"]["runId"]
        for leaf in (document, graph):
            assert [e["eventType"] for e in stored_in(leaf, run_id)] == ["COMPLETE"], leaf.name


# -- the collector service ------------------------------------------------------------------------


async def test_the_collector_service_stores_a_dict_and_a_model_in_both_stores(
    documented_env: Path,
) -> None:
    service = LineageCollectorService(LineageManager(load_config(path=documented_env)))
    assert isinstance(service, BaseService)
    assert not service.is_connected
    async with service:
        manager = service.lineage_manager
        assert manager.is_connected  # the service's _connect connected the manager

        as_dict = run_event(unique("documented.dict"))
        await service.handle_lineage_event(
            as_dict,
            raw_message=orjson.dumps(as_dict),
            message_key="orders-1",
            raw_headers={"x-source": "test"},
        )
        as_model = LineageEvent.model_validate(run_event(unique("documented.model")))
        assert isinstance(as_model, LineageEvent)
        await service.handle_lineage_event(as_model)

        for leaf in leaves(manager):
            for event in (as_dict, orjson.loads(as_model.model_dump_json(by_alias=True))):
                stored = stored_in(leaf, event["run"]["runId"])
                assert [e["job"]["name"] for e in stored] == [event["job"]["name"]], leaf.name
    assert not service.is_connected
    assert not manager.is_connected  # and its _close closed the manager


@pytest.fixture
def failing_store_collector(
    documented_env: Path, monkeypatch: pytest.MonkeyPatch, graph_server: GraphServer
) -> Iterator[tuple[Any, Any, Callable[[], None]]]:
    """The documented file behind lineage-sdk's queue consumer, with a MongoDB this test may stop.

    Beyond the file, the environment sets only what a deployment does: the connection addresses,
    a short server-selection timeout, two attempts with a 200 ms retry delay, and
    ``collector_topic``, overridden to a unique name for queue isolation only (the file's
    ``platform.lineage.events`` is shared by every process on this broker: a collector bound to it
    would consume their events, and they its).
    """
    from lineage_sdk.collector.consumer import LineageCollector
    from lineage_sdk.collector.topology import Topology

    with secantus_server() as mongo:
        topic = unique("test.documented-api")
        monkeypatch.setenv("LINEAGE_CONNECTIONS_DEFAULT_MONGO_URI", mongo.uri)
        monkeypatch.setenv("LINEAGE_CONNECTIONS_DEFAULT_MONGO_TIMEOUT_MS", "500")
        monkeypatch.setenv("LINEAGE_COLLECTOR_TOPIC", topic)
        monkeypatch.setenv("LINEAGE_COLLECTOR_RETRY_DELAYS_MS", "200")
        monkeypatch.setenv("LINEAGE_COLLECTOR_MAX_ATTEMPTS", "2")
        config = load_config(path=documented_env)
        topology = Topology.from_config(config)
        collector = LineageCollector(config, LineageManager(config))
        thread = threading.Thread(target=collector.run, name="documented-collector", daemon=True)
        graph_server.warm_up()
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while not collector.ready:
                assert thread.is_alive() and time.monotonic() < deadline, "collector not ready"
                time.sleep(0.05)
            yield collector, topology, mongo.stop
        finally:
            collector.stop()
            thread.join(30)
            conn = connect()
            channel = conn.channel()
            for queue in (topology.queue, topology.dead_letter_queue):
                channel.queue_delete(queue)
            for retry in topology.retry_queues:
                channel.queue_delete(retry.name)
            channel.queue_delete(holding_queue(topic))  # test plumbing: the topic's holding queue
            channel.exchange_delete(unrouted_exchange(topic))
            channel.exchange_delete(topic)
            conn.close()
    assert not thread.is_alive(), "collector did not stop"


def test_a_failing_store_sends_the_message_to_a_retry_then_to_the_dead_letter_queue(
    failing_store_collector: tuple[Any, Any, Callable[[], None]],
) -> None:
    collector, topology, stop_mongo = failing_store_collector
    service = collector.service
    assert isinstance(service, LineageCollectorService)  # the consumer's one way to the stores
    conn = connect()
    channel = conn.channel()
    try:

        def publish(event: dict[str, Any]) -> bytes:
            body = orjson.dumps(event)
            channel.basic_publish(
                topology.exchange,
                "lineage.my-service-ns",
                body,
                pika.BasicProperties(content_type="application/json", delivery_mode=2),
            )
            return body

        stored = run_event(unique("documented.through-the-broker"))
        publish(stored)
        deadline = time.monotonic() + 30
        while not all(
            stored_in(s, stored["run"]["runId"]) for s in leaves(service.lineage_manager)
        ):
            assert time.monotonic() < deadline, "the event did not reach both stores"
            time.sleep(0.1)

        stop_mongo()  # the document store fails from now on; the graph store still writes
        failed = run_event(unique("documented.failing"))
        body = publish(failed)
        deadline = time.monotonic() + 60
        while True:
            method, props, parked = channel.basic_get(topology.dead_letter_queue, auto_ack=True)
            if method is not None:
                break
            assert time.monotonic() < deadline, "nothing reached the dead-letter queue"
            conn.sleep(0.1)
        assert parked == body
        headers = props.headers
        assert headers["x-lineage-reason"] == "retries_exhausted"
        assert headers["x-lineage-store"] == "document"
        assert headers["x-lineage-attempts"] == 2
        assert headers["x-lineage-attempt"] == 1  # it went through the retry queue once before
    finally:
        conn.close()


# -- the manager's lifecycle ----------------------------------------------------------------------


async def test_the_managers_lifecycle(documented_env: Path, graph_server: GraphServer) -> None:
    manager = LineageManager(load_config(path=documented_env))
    assert isinstance(manager, BaseService)
    assert not manager.is_connected
    await manager.close()  # closing what was never connected does nothing

    await asyncio.gather(manager.connect(), manager.connect(), manager.connect())
    assert manager.is_connected
    drivers = [getattr(leaf, "runner", None) for leaf in leaves(manager)]
    await manager.connect()  # idempotent: nothing is opened again
    assert [getattr(leaf, "runner", None) for leaf in leaves(manager)] == drivers
    await LineageCollectorService(manager).handle_lineage_event(run_event(unique("lifecycle")))

    await asyncio.gather(manager.close(), manager.close())
    assert not manager.is_connected
    await manager.close()

    graph_server.warm_up()
    async with manager as entered:
        assert entered is manager and manager.is_connected
    assert not manager.is_connected

    # Inside a running event loop, the synchronous way in refuses (it would block the loop) ...
    with pytest.raises(RuntimeError, match=r"await connect\(\)"):
        manager.connect_sync()
    assert not manager.is_connected

    # ... and is what synchronous code uses: here, a thread with no loop of its own.
    def synchronous_code() -> tuple[bool, bool]:
        graph_server.warm_up()
        with manager:
            inside = manager.is_connected
        return inside, manager.is_connected

    assert await asyncio.to_thread(synchronous_code) == (True, False)


# -- the producer side ----------------------------------------------------------------------------


async def test_track_lineage_on_an_async_function(
    lineage_from_documented_file: Path, exchange_reader: ExchangeReader
) -> None:
    job = unique("documented.decorated")

    @track_lineage(job_name=job, inputs=[ORDERS], outputs=[REPORT])
    async def build_report(day: str) -> str:
        await asyncio.sleep(0.01)
        return f"report {day}"

    assert await build_report("2026-11-30") == "report 2026-11-30"
    events = exchange_reader.events(lambda e: e.get("job", {}).get("name") == job, 2)
    assert sorted(e["eventType"] for e in events) == ["COMPLETE", "START"]
    for event in events:
        assert event["job"]["namespace"] == "my-service-ns"
        assert event["producer"] == PRODUCER_URI
        assert names(event["inputs"]) == [(ORDERS.namespace, ORDERS.name)]
        assert names(event["outputs"]) == [(REPORT.namespace, REPORT.name)]
    assert len({e["run"]["runId"] for e in events}) == 1


async def test_both_producer_methods_publish_to_platform_lineage_events(
    lineage_from_documented_file: Path, exchange_reader: ExchangeReader
) -> None:
    job = unique("documented.consumer-job")
    group = unique("documented.group")
    topic = unique("orders.created")
    producer = LineageProducer()
    assert isinstance(producer, BaseService) and not producer.is_connected
    async with producer:
        assert producer.is_connected
        await producer.record_consumption(
            "COMPLETE", job, inputs=[ORDERS], outputs=[REPORT], producer_uri=None
        )
        await producer.record_message_consumption(
            topic=topic, group_id=group, source_namespace="rabbitmq://127.0.0.1:5672"
        )
    assert not producer.is_connected  # close() flushed what was queued

    consumed = exchange_reader.events(lambda e: e.get("job", {}).get("name") == job, 1)[0]
    assert consumed["eventType"] == "COMPLETE"
    assert consumed["job"]["namespace"] == "my-service-ns"
    assert consumed["producer"] == PRODUCER_URI
    assert names(consumed["inputs"]) == [(ORDERS.namespace, ORDERS.name)]
    assert names(consumed["outputs"]) == [(REPORT.namespace, REPORT.name)]

    read = exchange_reader.events(lambda e: e.get("job", {}).get("name") == group, 1)[0]
    assert read["eventType"] == "COMPLETE"
    assert names(read["inputs"]) == [("rabbitmq://127.0.0.1:5672", topic)]
    assert EXCHANGE == "platform.lineage.events"  # where exchange_reader listened
