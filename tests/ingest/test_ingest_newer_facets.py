"""Issue 32 item 4: events carrying each newer facet of the spec round-trip unchanged through
HTTP ingest, the queue and every store.

The facets: tags (run, job, dataset), jobType 2-0-4 with emissionPattern, parent 1-2-0 with root,
schema 1-2-0 with ordinal_position, datasetType, catalog, hierarchy, executionParameters,
environmentVariables, subset (input and output), inputStatistics, dataQualityAssertions 1-1-0.
The events: one built from the typed models (tests/newer_facets.py), the events the SDK itself
emits with every facet attached through ``@track_lineage``, the spec's own example documents of
these facets (some name a schema that was never published: accepted and kept all the same), and
a newer facet another producer got wrong (kept as sent: only the SDK validates what it emits).

Behind ``serve`` (real HTTP over loopback) and behind the real consumer (the shared RabbitMQ, in
this process's private vhost) a :class:`LineageManager` writes five stores: memory, sql on
SQLite, sql on PostgreSQL (a database of this module's own), document on SecantusDB and graph on
FalkorDB. Each event is read back from each store twice, with ``events_of_run`` and in the raw
export (``export_events``, the NDJSON of ``lineage-collector export``), and must equal the event
sent: the same JSON value, with the same types (compared as canonical sorted-key JSON, so ``1``
and ``1.0`` differ).
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import conformance
import orjson
import pytest
from collector_helpers import json_props, publish, wait_until
from collector_helpers import running as running_collector
from every_store import (
    api_client,
    deleting_queues,
    differences,
    every_store,
    managing,
    queue_config,
)
from newer_facets import (
    PRODUCER,
    dataset_facets,
    every_facet_event,
    input_facets,
    job_facets,
    output_facets,
    run_facets,
)
from servers import FalkorDBServer, MongoTarget, postgres_database

import lineage_sdk
from lineage_sdk import LineageDataset, current_run, track_lineage
from lineage_sdk.collector.consumer import LineageCollector
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.portability import export_events
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.models import TagsRunFacet
from lineage_sdk.models.constants import BATCH_CONTENT_TYPE
from lineage_sdk.sdk.exporters import InMemoryExporter

pytestmark = [pytest.mark.rabbitmq, pytest.mark.postgres, pytest.mark.mongodb, pytest.mark.neo4j]

STORE_NAMES = ("memory", "sqlite", "postgres", "document", "graph")
EXAMPLES = conformance.shared_dir() / "openlineage-spec" / "examples"
#: The spec's example folders of the facets issue 32 lists.
EXAMPLE_FOLDERS = (
    "TagsRunFacet",
    "TagsJobFacet",
    "TagsDatasetFacet",
    "JobTypeJobFacet",
    "ParentRunFacet",
    "SchemaDatasetFacet",
    "DatasetTypeDatasetFacet",
    "HierarchyDatasetFacet",
    "EnvironmentVariablesRunFacet",
    "BaseSubsetDatasetFacet",
    "DataQualityAssertionsDatasetFacet",
)
#: Every other example of the spec ("accept and keep every facet of the current spec"), but the
#: ``lineage`` facet's, whose edges are the engine's part of issue 32: test_ingest_lineage_facet.py
#: round-trips those examples the same way and reads their edges back.
OTHER_EXAMPLE_FOLDERS = tuple(
    sorted(
        p.name
        for p in EXAMPLES.iterdir()
        if p.is_dir() and p.name not in EXAMPLE_FOLDERS and p.name != "LineageFacet"
    )
)
BATCH = "/api/v1/lineage/batch"


def canonical(event: Any) -> bytes:
    return orjson.dumps(event, option=orjson.OPT_SORT_KEYS)


# ------------------------------------------------------------------------------------ events


def _example_events() -> list[dict[str, Any]]:
    """Each spec example (of the listed facets, and of every other facet), in a RunEvent where
    its kind belongs."""
    events: list[dict[str, Any]] = []
    for folder in (*EXAMPLE_FOLDERS, *OTHER_EXAMPLE_FOLDERS):
        for path in sorted((EXAMPLES / folder).glob("*.json")):
            ((key, facet),) = json.loads(path.read_text()).items()
            event = every_facet_event()
            event["run"]["facets"] = {}
            event["job"]["facets"] = {}
            event["inputs"] = []
            event["outputs"] = []
            dataset: dict[str, Any] = {"namespace": "postgres://db:5432", "name": path.stem}
            if folder.endswith("InputDatasetFacet") or folder in (
                "BaseSubsetDatasetFacet",
                "DataQualityAssertionsDatasetFacet",
            ):
                dataset["inputFacets"] = {key: facet}  # input facets, as their schemas say
                event["inputs"] = [dataset]
            elif folder.endswith("OutputDatasetFacet"):
                dataset["outputFacets"] = {key: facet}
                event["outputs"] = [dataset]
            elif folder.endswith("DatasetFacet"):
                dataset["facets"] = {key: facet}
                event["outputs"] = [dataset]
            elif folder.endswith("JobFacet"):
                event["job"]["facets"] = {key: facet}
            else:
                event["run"]["facets"] = {key: facet}
            event["job"]["name"] = f"examples.{folder}.{path.stem}"
            events.append(event)
    return events


def _foreign_event() -> dict[str, Any]:
    """Newer facets as another producer got them wrong: accepted and kept exactly."""
    event = every_facet_event()
    bad = {"_producer": "https://example.com/other", "_schemaURL": "https://example.com/x.json"}
    event["run"]["facets"]["tags"] = {**bad, "tags": "not a list"}
    event["job"]["facets"]["tags"] = {**bad, "tags": [{"key": 1}]}
    event["inputs"][0]["inputFacets"]["inputStatistics"]["rowCount"] = "lots"
    event["inputs"][0]["inputFacets"]["subset"]["inputCondition"] = {"type": "nonsense"}
    event["outputs"][0]["facets"]["datasetType"] = {**bad}  # datasetType missing
    return event


def _sdk_payloads(namespace: str) -> list[bytes]:
    """What the SDK sends for a run (and a nested one) carrying every newer facet."""
    witness = InMemoryExporter()
    config = LineageConfig.model_validate({"exporters": ["memory"]})
    assert lineage_sdk.configure(config, exporters=[witness], strict=True) is not None
    try:
        orders = LineageDataset(
            "postgres://db:5432",
            "shop.public.orders",
            facets=dataset_facets(),
            input_facets=input_facets(),
            output_facets=output_facets(),
        )

        @track_lineage(
            job_name="sdk.load",
            job_namespace=namespace,
            inputs=[orders],
            outputs=[orders],
            run_facets=run_facets(),
            job_facets=job_facets(),
        )
        def load() -> None:
            @track_lineage(job_name="sdk.load.step", job_namespace=namespace, inputs=[orders])
            def step() -> None:
                current_run().add_run_facets({"tags": TagsRunFacet(producer=PRODUCER, tags=[])})

            step()

        load()
        assert lineage_sdk.force_flush(30)
    finally:
        lineage_sdk.shutdown(10)
    payloads = [e.payload for e in witness.encoded]
    assert len(payloads) == 4
    for payload in payloads:
        conformance.validate_event(orjson.loads(payload))
    return payloads


def _all_events(namespace: str) -> list[bytes]:
    """Every event to send, as the exact bytes sent (each with a run id of its own)."""
    built = [every_facet_event(namespace=namespace), _foreign_event(), *_example_events()]
    for event in built:
        event["run"]["runId"] = str(uuid.uuid4())
        event["job"]["namespace"] = namespace
    conformance.validate_event(built[0])
    return [orjson.dumps(event) for event in built] + _sdk_payloads(namespace)


# ------------------------------------------------------------------------------------ stores


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_database("lineage_newer") as url:
        yield url


def _compare(where: str, sent: list[dict[str, Any]], got: list[dict[str, Any]]) -> list[str]:
    if sorted(map(canonical, sent)) == sorted(map(canonical, got)):
        return []
    if len(sent) != len(got):
        return [f"{where}: {len(sent)} events sent, {len(got)} read back"]
    by_time = sorted(sent, key=lambda e: e["eventType"])
    back = sorted(got, key=lambda e: e["eventType"])
    return [f"{where} {d}" for a, b in zip(by_time, back, strict=True) for d in differences(a, b)]


def _check_every_store(stores: dict[str, EngineStore], bodies: list[bytes]) -> None:
    """Each event, read back from each store by run and in the raw export, is the one sent."""
    sent: dict[str, list[dict[str, Any]]] = {}
    for body in bodies:
        event = orjson.loads(body)
        sent.setdefault(event["run"]["runId"], []).append(event)
    differences: list[str] = []
    for name, store in stores.items():
        out = io.BytesIO()
        export_events(store, out)
        exported: dict[str, list[dict[str, Any]]] = {}
        for line in out.getvalue().splitlines():
            event = orjson.loads(line)
            exported.setdefault(event["run"]["runId"], []).append(event)
        for run_id, events in sent.items():
            job = events[0]["job"]["name"]
            differences += _compare(
                f"{name} events_of_run {job}", events, store.events_of_run(run_id)
            )
            differences += _compare(f"{name} export {job}", events, exported.get(run_id, []))
    assert differences == [], "\n".join(differences)


def _stored_everywhere(stores: dict[str, EngineStore], run_ids: list[str]) -> bool:
    try:
        return all(store.events_of_run(r) for store in stores.values() for r in run_ids)
    except Exception:
        return False


# ------------------------------------------------------------------------------------- HTTP


def test_every_newer_facet_round_trips_through_http_and_every_store(
    tmp_path: Path, pg_url: str, mongo: MongoTarget, falkordb: FalkorDBServer
) -> None:
    bodies = _all_events(f"newer.http.{uuid.uuid4().hex[:6]}")
    with (
        every_store(tmp_path, pg_url, mongo, falkordb, "nf") as stores,
        managing(stores) as manager,
    ):
        with api_client(manager) as client:
            headers = {"Content-Type": "application/json"}
            half = len(bodies) // 2
            for body in bodies[:half]:  # one by one
                answer = client.post("/api/v1/lineage", content=body, headers=headers)
                assert answer.status_code == 201, answer.text
            batch = b"[" + b",".join(bodies[half:]) + b"]"
            answer = client.post(BATCH, content=batch, headers=headers)
            assert answer.status_code == 200, answer.text
            assert answer.json()["summary"]["successful"] == len(bodies) - half
        _check_every_store(stores, bodies)  # a 2xx comes after every store wrote


# ------------------------------------------------------------------------------------ queue


def test_every_newer_facet_round_trips_through_the_queue_and_every_store(
    tmp_path: Path, pg_url: str, mongo: MongoTarget, falkordb: FalkorDBServer
) -> None:
    bodies = _all_events(f"newer.queue.{uuid.uuid4().hex[:6]}")
    topic = f"test.lineage.newer.{uuid.uuid4().hex[:10]}"
    config = queue_config(topic)
    collector: LineageCollector
    with (
        every_store(tmp_path, pg_url, mongo, falkordb, "nf") as stores,
        managing(stores, config) as manager,
        deleting_queues(config),
        running_collector(config, manager) as collector,
    ):
        half = len(bodies) // 2
        messages = [(body, json_props()) for body in bodies[:half]]
        batch = b"[" + b",".join(bodies[half:]) + b"]"
        messages.append((batch, json_props(content_type=BATCH_CONTENT_TYPE)))
        publish(topic, messages)
        run_ids = [orjson.loads(b)["run"]["runId"] for b in bodies]
        wait_until(
            lambda: _stored_everywhere(stores, run_ids),
            60,
            message="every event in every store",
        )
        parked = sum(
            s.value
            for metric in collector.metrics.dead_lettered.collect()
            for s in metric.samples
            if s.name.endswith("_total")
        )
        assert parked == 0
        _check_every_store(stores, bodies)  # the collector closes them when it stops
