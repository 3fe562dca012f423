"""Issue 14, item 1: the collector accepts every event the spec accepts, over HTTP and the queue,
and every store writes it exactly as sent.

The events come from :func:`ingest_events.spec_events`: valid against ``OpenLineage.json`` with
formats as annotations (checked on every example), with a UUID ``runId`` and an RFC 3339
``eventTime``. They go to the real ``serve`` app over loopback and through the real broker to the
real consumer; behind each, a manager writes sql (SQLite), logging, document (SecantusDB) and
graph (FalkorDB) stores. A Spark-style event (``dataSource.uri`` ``file`` and ``bigquery``, as
OpenLineage's Spark integration sends) is checked on both paths by name, too.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pika
import pytest
from collector_helpers import (
    RABBIT_URL,
    connect,
    delete_queues,
    json_props,
    publish,
    wait_until,
)
from collector_helpers import running as running_collector
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ingest_events import schema_violations, spec_events
from ingest_rig import StoreRig, store_rig
from servers import FalkorDBServer, MongoTarget

from lineage_sdk.collector.api import ApiServer, create_app
from lineage_sdk.collector.consumer import LineageCollector
from lineage_sdk.collector.records import compute_event_id
from lineage_sdk.collector.topology import Topology
from lineage_sdk.exceptions import InvalidEventError
from lineage_sdk.models import parse_event
from lineage_sdk.models.constants import BATCH_CONTENT_TYPE

pytestmark = [pytest.mark.mongodb, pytest.mark.neo4j]

SETTINGS = settings(
    database=None,
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_batches = st.lists(spec_events(), min_size=1, max_size=3)
BATCH = "/api/v1/lineage/batch"


def _spark_event() -> dict[str, Any]:
    """A START event as OpenLineage's Spark integration (1.23) sends it, reading a file and
    writing a BigQuery table: the naming spec makes the namespaces ``file`` and ``bigquery``."""
    producer = "https://github.com/OpenLineage/OpenLineage/tree/1.23.0/integration/spark"
    facet_base = "https://openlineage.io/spec/facets"

    def facet(schema: str, **fields: Any) -> dict[str, Any]:
        return {"_producer": producer, "_schemaURL": f"{facet_base}/{schema}", **fields}

    def dataset(namespace: str, name: str) -> dict[str, Any]:
        source = facet("1-0-1/DatasourceDatasetFacet.json", name=namespace, uri=namespace)
        schema = facet(
            "1-1-1/SchemaDatasetFacet.json",
            fields=[{"name": "id", "type": "long"}, {"name": "amount", "type": "decimal(10,2)"}],
        )
        return {
            "namespace": namespace,
            "name": name,
            "facets": {"dataSource": source, "schema": schema},
        }

    return {
        "eventTime": "2025-03-01T10:00:00.123Z",
        "producer": producer,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "eventType": "START",
        "run": {
            "runId": str(uuid.uuid4()),
            "facets": {
                "spark_version": facet(
                    "1-0-0/SparkVersionFacet.json", **{"spark-version": "3.5.1"}
                ),
                "processing_engine": facet(
                    "1-1-1/ProcessingEngineRunFacet.json",
                    version="3.5.1",
                    name="spark",
                    openlineageAdapterVersion="1.23.0",
                ),
            },
        },
        "job": {
            "namespace": "spark_namespace",
            "name": "orders_etl.execute_insert_into_hadoop_fs_relation_command",
            "facets": {
                "jobType": facet(
                    "2-0-3/JobTypeJobFacet.json",
                    processingType="BATCH",
                    integration="SPARK",
                    jobType="SQL_JOB",
                )
            },
        },
        "inputs": [dataset("file", "/data/landing/orders.csv")],
        "outputs": [dataset("bigquery", "project.warehouse.orders")],
    }


# ------------------------------------------------------------------------------------------ HTTP


@pytest.fixture(scope="module")
def http_rig(
    tmp_path_factory: pytest.TempPathFactory, mongo: MongoTarget, falkordb: FalkorDBServer
) -> Iterator[tuple[httpx.Client, StoreRig]]:
    """The ``serve`` app on a loopback port, writing the four stores."""
    with store_rig(tmp_path_factory.mktemp("http"), mongo, falkordb) as rig:
        server = ApiServer(create_app(rig.manager)).start()
        try:
            with httpx.Client(base_url=server.url, timeout=30) as client:
                yield client, rig
        finally:
            server.stop()


def _post(client: httpx.Client, path: str, body: bytes) -> httpx.Response:
    return client.post(path, content=body, headers={"Content-Type": "application/json"})


@SETTINGS
@given(_batches)
def test_every_spec_event_is_accepted_over_http_and_stored_as_sent(
    http_rig: tuple[httpx.Client, StoreRig], events: list[dict[str, Any]]
) -> None:
    client, rig = http_rig
    for event in events:
        assert schema_violations(event) == [], event
    first = orjson.dumps(events[0])
    single = _post(client, "/api/v1/lineage", first)
    assert single.status_code == 201, single.text
    assert single.json()["eventId"] == compute_event_id(events[0])
    batch = _post(client, BATCH, orjson.dumps(events))
    assert batch.status_code == 200, batch.text
    assert batch.json()["summary"]["successful"] == len(events), batch.text
    for event in events:  # a 2xx comes after every store wrote: no waiting
        body = orjson.dumps(event)
        assert rig.holds_as_sent(event, body, compute_event_id(event)), rig.stored(
            compute_event_id(event)
        )


def test_a_spark_event_is_accepted_over_http_and_read_back(
    http_rig: tuple[httpx.Client, StoreRig],
) -> None:
    client, rig = http_rig
    event = _spark_event()
    with pytest.raises(InvalidEventError, match="not a URI: 'file'"):
        parse_event(event)  # the typed models stay strict
    body = orjson.dumps(event)
    response = _post(client, "/api/v1/lineage", body)
    assert response.status_code == 201, response.text  # was 400 invalid_event
    assert rig.holds_as_sent(event, body, compute_event_id(event))
    graph = client.get(
        "/api/v1/lineage", params={"nodeId": "dataset:bigquery:project.warehouse.orders"}
    ).json()
    ids = {node["id"] for node in graph["graph"]}
    assert {
        "dataset:file:/data/landing/orders.csv",
        "job:spark_namespace:orders_etl.execute_insert_into_hadoop_fs_relation_command",
    } <= ids
    # A bad event next to it in a batch is refused by name; the good one is still stored.
    other = _spark_event()
    bad = {**_spark_event(), "run": {"runId": "x"}}
    answer = _post(client, BATCH, orjson.dumps([bad, other]))
    assert answer.status_code == 200, answer.text
    [failed] = answer.json()["failed_events"]
    assert failed["index"] == 0 and "run.runId: not a UUID: 'x'" in failed["reason"]
    assert rig.holds_as_sent(other, orjson.dumps(other), compute_event_id(other))


# ----------------------------------------------------------------------------------------- queue


@pytest.fixture(scope="module")
def queue_rig(
    tmp_path_factory: pytest.TempPathFactory, mongo: MongoTarget, falkordb: FalkorDBServer
) -> Iterator[tuple[str, LineageCollector, StoreRig]]:
    """The real consumer on a fresh exchange and queue of the shared broker, writing the four
    stores; its queues and exchange are deleted afterwards."""
    topic = f"test.lineage.ingest.{uuid.uuid4().hex[:10]}"
    extra = {
        "collector_topic": topic,
        "rabbitmq": {"url": RABBIT_URL, "reconnect_initial_ms": 100, "reconnect_max_ms": 1000},
        "collector": {"retry_delays_ms": [200], "max_attempts": 2, "batch_timeout_ms": 20},
    }
    with store_rig(tmp_path_factory.mktemp("queue"), mongo, falkordb, extra) as rig:
        try:
            with running_collector(rig.config, rig.manager) as collector:
                yield topic, collector, rig
        finally:
            conn = connect()
            try:
                channel = conn.channel()
                delete_queues(channel, Topology.from_config(rig.config))
                channel.exchange_delete(topic)
            finally:
                conn.close()


def _parked(collector: LineageCollector) -> float:
    return sum(
        sample.value
        for metric in collector.metrics.dead_lettered.collect()
        for sample in metric.samples
        if sample.name.endswith("_total")
    )


@SETTINGS
@given(_batches)
def test_every_spec_event_is_accepted_over_the_queue_and_stored_as_sent(
    queue_rig: tuple[str, LineageCollector, StoreRig], events: list[dict[str, Any]]
) -> None:
    topic, collector, rig = queue_rig
    for event in events:
        assert schema_violations(event) == [], event
    parked = _parked(collector)
    messages: list[tuple[bytes, pika.BasicProperties]] = [
        (orjson.dumps(event), json_props()) for event in events
    ]
    messages.append((orjson.dumps(events), json_props(content_type=BATCH_CONTENT_TYPE)))
    publish(topic, messages)
    for event in events:
        body = orjson.dumps(event)
        event_id = compute_event_id(event)
        wait_until(
            lambda: rig.holds_as_sent(event, body, event_id),  # noqa: B023 - waited on here
            20,
            message=f"event {event_id} in every store",
        )
    assert _parked(collector) == parked  # nothing was refused


def test_a_spark_event_is_accepted_over_the_queue(
    queue_rig: tuple[str, LineageCollector, StoreRig],
) -> None:
    topic, collector, rig = queue_rig
    event = _spark_event()
    body = orjson.dumps(event)
    parked = _parked(collector)
    publish(topic, [(body, json_props())])
    event_id = compute_event_id(event)
    wait_until(lambda: rig.holds_as_sent(event, body, event_id), 20, message="the Spark event")
    assert _parked(collector) == parked  # was parked as invalid_event "not a URI: 'file'"
