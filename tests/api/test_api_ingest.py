"""HTTP ingest: the real openlineage-python client's HttpTransport posting to the API, events read
back through the read API and the CLI, batch outcomes per the spec, and parity with the queue."""

from __future__ import annotations

import asyncio
import gzip
import uuid

import orjson
import pytest
import requests
from api_helpers import (
    API_KEY,
    PG,
    PRODUCER,
    openlineage_batch_response_schema,
    run_cli,
    run_event,
    validate_marquez,
)
from jsonschema import Draft7Validator
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.transport.http import (
    ApiKeyTokenProvider,
    HttpCompression,
    HttpConfig,
    HttpTransport,
)

from lineage_sdk.collector.decode import decode_message
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.config.schema import LineageConfig


def _client(url: str, *, key: str | None = API_KEY, gzip_body: bool = False) -> OpenLineageClient:
    config = HttpConfig(
        url=url,
        timeout=10,
        auth=ApiKeyTokenProvider({"apiKey": key}) if key else HttpConfig(url=url).auth,
        compression=HttpCompression.GZIP if gzip_body else None,
        retry={"total": 0},  # a failure must show here, not be retried away
    )
    return OpenLineageClient(transport=HttpTransport(config))


def _ol_run(
    job: str, run_id: str, state: RunState, when: str, ins: list[str], outs: list[str]
) -> RunEvent:
    return RunEvent(
        eventType=state,
        eventTime=when,
        run=Run(runId=run_id),
        job=Job(namespace="ol-client", name=job),
        producer=PRODUCER,
        inputs=[InputDataset(namespace=PG, name=n) for n in ins],
        outputs=[OutputDataset(namespace=PG, name=n) for n in outs],
    )


@pytest.mark.parametrize("gzip_body", [False, True], ids=["plain", "gzip"])
def test_openlineage_client_events_read_back_through_api_and_cli(api, gzip_body):
    client = _client(api.url, gzip_body=gzip_body)
    load_run, report_run = str(uuid.uuid4()), str(uuid.uuid4())
    client.emit(
        _ol_run(
            "load",
            load_run,
            RunState.START,
            "2025-03-01T10:00:00Z",
            ["landing.orders"],
            ["warehouse.orders"],
        )
    )
    client.emit(
        _ol_run(
            "load",
            load_run,
            RunState.COMPLETE,
            "2025-03-01T10:00:42.500Z",
            ["landing.orders"],
            ["warehouse.orders"],
        )
    )
    client.emit(
        _ol_run(
            "report",
            report_run,
            RunState.START,
            "2025-03-01T11:00:00Z",
            ["warehouse.orders"],
            ["reports.daily"],
        )
    )
    client.emit(
        _ol_run(
            "report",
            report_run,
            RunState.FAIL,
            "2025-03-01T11:00:03Z",
            ["warehouse.orders"],
            ["reports.daily"],
        )
    )
    client.close()
    assert api.count() == 4

    # Lineage upstream of the report's output, in Marquez's shape.
    answer = api.client.get(
        "/api/v1/lineage", params={"nodeId": f"dataset:{PG}:reports.daily", "depth": 5}
    ).json()
    validate_marquez("LineageGraph", answer)
    ids = {n["id"] for n in answer["graph"]}
    assert ids == {
        f"dataset:{PG}:reports.daily",
        "job:ol-client:report",
        f"dataset:{PG}:warehouse.orders",
        "job:ol-client:load",
        f"dataset:{PG}:landing.orders",
    }
    nodes = {n["id"]: n for n in answer["graph"]}
    assert nodes["job:ol-client:report"]["data"]["latestRun"]["state"] == "FAILED"
    assert nodes["job:ol-client:load"]["data"]["latestRun"]["state"] == "COMPLETED"
    assert {"origin": "job:ol-client:load", "destination": f"dataset:{PG}:warehouse.orders"} in (
        nodes["job:ol-client:load"]["outEdges"]
    )

    runs = api.client.get("/api/v1/namespaces/ol-client/jobs/load/runs").json()["runs"]
    assert [(r["id"], r["state"], r["durationMs"]) for r in runs] == [
        (load_run, "COMPLETED", 42500)
    ]
    events = api.client.get(f"/api/v1/jobs/runs/{report_run}/events").json()["events"]
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    assert events[0]["producer"] == PRODUCER and events[0]["run"]["runId"] == report_run

    # And the same through the CLI, as a user runs it.
    tree = run_cli("--url", api.url, "graph", f"dataset:{PG}:reports.daily", "--upstream")
    assert tree.returncode == 0, tree.stderr
    for text in ("report", "load", "landing.orders", "FAILED"):
        assert text in tree.stdout
    listed = run_cli("--url", api.url, "runs", "job:ol-client:report", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert [r["state"] for r in orjson.loads(listed.stdout)] == ["FAILED"]
    printed = run_cli("--url", api.url, "events", report_run, "--format", "jsonl")
    assert printed.returncode == 0, printed.stderr
    lines = [orjson.loads(line) for line in printed.stdout.splitlines()]
    assert lines == events


def test_openlineage_client_without_or_with_wrong_key_is_refused(api):
    event = _ol_run("x", str(uuid.uuid4()), RunState.START, "2025-03-01T10:00:00Z", [], ["d"])
    for key in (None, "wrong-key"):
        client = _client(api.url, key=key)
        with pytest.raises(requests.HTTPError) as info:
            client.emit(event)
        assert info.value.response.status_code == 401
        client.close()
    assert api.count() == 0


def test_single_event_answers_201_with_its_content_id_and_is_idempotent(api):
    event = run_event("one", outputs=[("ns", "d")])
    first = api.client.post("/api/v1/lineage", json=event)
    again = api.client.post("/api/v1/lineage", json=event)
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    from lineage_sdk.models import event_id

    assert first.json()["eventId"] == event_id(event)
    assert api.count() == 1


def test_dataset_and_job_events_are_accepted(api):
    dataset_event = {
        "eventTime": "2025-03-01T10:00:00Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {"namespace": "ns", "name": "static.table", "facets": {}},
    }
    job_event = {
        "eventTime": "2025-03-01T10:00:00Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
        "job": {"namespace": "ns", "name": "defined.job", "facets": {}},
        "inputs": [{"namespace": "ns", "name": "static.table", "facets": {}}],
        "outputs": [],
    }
    for event in (dataset_event, job_event):
        assert api.client.post("/api/v1/lineage", json=event).status_code == 201
    assert api.count() == 2
    found = api.client.get("/api/v1/search", params={"q": "static"}).json()
    assert {
        "type": "DATASET",
        "name": "static.table",
        "namespace": "ns",
        "nodeId": "dataset:ns:static.table",
    } in found["results"]


def test_mixed_batch_gets_per_event_outcomes_as_the_spec_describes(api):
    good = [run_event(f"job{i}", outputs=[("ns", f"d{i}")]) for i in range(3)]
    bad_run_id = run_event("bad")
    bad_run_id["run"]["runId"] = "not-a-uuid"
    bad_time = run_event("bad")
    bad_time["eventTime"] = "yesterday"
    batch = [good[0], {"hello": "world"}, good[1], bad_run_id, 42, bad_time, good[2]]
    response = api.client.post("/api/v1/lineage/batch", json=batch)
    assert response.status_code == 200
    body = response.json()
    Draft7Validator(openlineage_batch_response_schema()).validate(body)
    assert body["status"] == "partial_success"
    assert body["summary"] == {
        "received": 7,
        "successful": 3,
        "failed": 4,
        "retriable": 0,
        "non_retriable": 4,
    }
    failed = {f["index"]: f for f in body["failed_events"]}
    assert sorted(failed) == [1, 3, 4, 5]
    assert all(f["retriable"] is False for f in failed.values())
    assert "run, dataset or job" in failed[1]["reason"]
    assert "runId" in failed[3]["reason"]
    assert "object" in failed[4]["reason"] or "int" in failed[4]["reason"]
    assert "eventTime" in failed[5]["reason"]
    assert api.count() == 3

    all_good = api.client.post("/api/v1/lineage/batch", json=good)
    assert all_good.status_code == 200
    assert all_good.json()["status"] == "success"
    assert all_good.json()["failed_events"] == []
    Draft7Validator(openlineage_batch_response_schema()).validate(all_good.json())


def test_batch_of_only_bad_events_is_400_with_the_same_outcome_body(api):
    response = api.client.post("/api/v1/lineage/batch", json=[{"x": 1}, "text"])
    assert response.status_code == 400
    body = response.json()
    assert body["status"] == "failure"
    assert body["summary"]["successful"] == 0 and body["summary"]["failed"] == 2
    assert [f["index"] for f in body["failed_events"]] == [0, 1]
    assert api.count() == 0


def test_store_down_answers_503_retriable_and_the_client_can_resend(api):
    events = [run_event("later", outputs=[("ns", "d")])]
    api.store.close()  # the real store, really unavailable: its connections are gone
    try:
        single = api.client.post("/api/v1/lineage", json=events[0])
        assert single.status_code == 503
        assert single.json()["reason"] == "store_unavailable"
        batch = api.client.post("/api/v1/lineage/batch", json=events)
        assert batch.status_code == 503
        assert batch.json()["summary"]["retriable"] == 1
        assert batch.json()["failed_events"][0]["retriable"] is True
    finally:
        api.store.open()
    assert api.client.post("/api/v1/lineage/batch", json=events).status_code == 200
    assert api.count() == 1


def test_http_path_and_queue_path_store_identically(api, tmp_path):
    """The same events, posted over HTTP and decoded as a broker message, give equal stores."""
    events = [
        run_event(
            "a",
            event_type="START",
            run_id="0b6b3c1e-0000-4000-8000-000000000001",
            inputs=[("ns", "in")],
            outputs=[("ns", "mid")],
            seconds=1,
        ),
        run_event(
            "a",
            run_id="0b6b3c1e-0000-4000-8000-000000000001",
            inputs=[("ns", "in")],
            outputs=[("ns", "mid")],
            seconds=2,
        ),
        run_event(
            "b", event_type="FAIL", inputs=[("ns", "mid")], outputs=[("ns", "out")], seconds=3
        ),
    ]
    assert api.client.post("/api/v1/lineage/batch", json=events).status_code == 200

    queue_store = EngineStore(SqlBackend(f"sqlite:///{tmp_path}/queue.db"))
    manager = LineageManager(LineageConfig(), stores=[queue_store])
    manager.connect_sync()
    try:
        body = orjson.dumps(events)
        decoded = decode_message(body, "application/vnd.lineage-sdk.batch+json")
        asyncio.run(LineageCollectorService(manager).handle_lineage_events(decoded.records))
        for node in ("dataset:ns:out", "job:ns:a", "dataset:ns:in"):
            assert queue_store.lineage(node, depth=5) == api.store.lineage(node, depth=5)
        run_id = events[0]["run"]["runId"]
        assert queue_store.events_of_run(run_id) == api.store.events_of_run(run_id)
        assert queue_store.runs_of_job("ns", "b") == api.store.runs_of_job("ns", "b")
        assert queue_store.count_events() == api.count() == 3
    finally:
        manager.close_sync()


def test_gzip_body_is_inflated_and_stored(api):
    event = run_event("zipped", outputs=[("ns", "z")])
    response = api.client.post(
        "/api/v1/lineage",
        content=gzip.compress(orjson.dumps(event)),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert response.status_code == 201, response.text
    assert api.count() == 1
