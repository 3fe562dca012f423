"""Marquez's nodes in full (issue 32, items 1 and 5), over real HTTP on every store (the helpers
of ``test_api_marquez``): job answers, job lists and lineage job nodes carry every field of
Marquez's ``Job``/``JobData`` (``parentJobName`` and ``parentJobUuid`` from the ``parent`` run
facet, ``simpleName`` relative to the parent, ``type``, ``inputs``, ``outputs``,
``latestRun``), dataset answers, lists and lineage dataset nodes every field of
``Dataset``/``DatasetData`` (``fields``, ``sourceName``, ``lastModifiedAt``), and the sources are
the ``dataSource`` facets' (``default`` for datasets sent without one). Each answer is checked
against openapi.yml (``openapi_check``) and the stores answer alike.

The history is Airflow-shaped: the DAG ``ol_check`` runs, and its tasks ``ol_check.create_totals``
(writes ``totals``) and ``ol_check.fill_totals`` (reads ``src``, writes ``totals``) name the DAG's
run in their ``parent`` facet; the datasets carry the ``dataSource`` facet of the shop database
but ``src``'s first read, and ``feed`` is read by a streaming job with none.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_helpers import PRODUCER
from openapi_check import validate_operation
from test_api_marquez import STORES, _q, open_apis

NS = "airflow"
PG = "postgres://db:5432"
SHOP = "postgres://db:5432/shop"
SPEC = "https://openlineage.io/spec"
RUNS = {n: str(uuid.UUID(int=0x3200 + i, version=4)) for i, n in enumerate(("dag", "c", "f", "s"))}
#: Marquez's ``JobData`` and ``DatasetData`` fields (service/models), as a lineage node's data.
JOB_DATA = {
    "id", "type", "name", "simpleName", "parentJobName", "parentJobUuid", "createdAt",
    "updatedAt", "namespace", "inputs", "outputs", "location", "description", "latestRun",
}  # fmt: skip
DATASET_DATA = {
    "id", "type", "name", "physicalName", "createdAt", "updatedAt", "namespace", "sourceName",
    "fields", "tags", "lastModifiedAt", "description",
}  # fmt: skip


def _facet(name: str, **fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": f"{SPEC}/facets/1-0-0/{name}.json", **fields}


def _ds(name: str, *, source: bool = True) -> dict[str, Any]:
    facets: dict[str, Any] = {
        "schema": _facet("SchemaDatasetFacet", fields=[{"name": "id", "type": "INTEGER"}]),
        "documentation": _facet("DocumentationDatasetFacet", description=f"The {name} table."),
    }
    if source:
        facets["dataSource"] = {**_facet("DatasourceDatasetFacet", uri=SHOP), "name": "shopdb"}
    return {"namespace": PG, "name": name, "facets": facets}


def _event(
    job: str,
    run: str,
    kind: str,
    at: str,
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    *,
    parent: bool = True,
    processing: str = "BATCH",
) -> dict[str, Any]:
    run_facets: dict[str, Any] = {}
    if parent:
        run_facets["parent"] = _facet(
            "ParentRunFacet",
            run={"runId": RUNS["dag"]},
            job={"namespace": NS, "name": "ol_check"},
        )
    job_facets = {
        "jobType": _facet("JobTypeJobFacet", processingType=processing, integration="AIRFLOW"),
        "sourceCodeLocation": _facet("SourceCodeLocationJobFacet", type="git", url="https://g/x"),
        "documentation": _facet("DocumentationJobFacet", description=f"The {job} task."),
    }
    return {
        "eventType": kind,
        "eventTime": f"2025-06-01T{at}Z",
        "run": {"runId": RUNS[run], "facets": run_facets},
        "job": {"namespace": NS, "name": job, "facets": job_facets},
        "inputs": inputs,
        "outputs": outputs,
        "producer": PRODUCER,
        "schemaURL": f"{SPEC}/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }


def history() -> list[dict[str, Any]]:
    create, fill = "ol_check.create_totals", "ol_check.fill_totals"
    return [
        _event("ol_check", "dag", "START", "01:00:00", [], [], parent=False),
        _event(create, "c", "START", "01:00:01", [], [_ds("totals")]),
        _event(create, "c", "COMPLETE", "01:00:02", [], [_ds("totals")]),
        _event(fill, "f", "START", "01:00:03", [_ds("src", source=False)], [_ds("totals")]),
        _event(fill, "f", "COMPLETE", "01:00:04", [_ds("src")], [_ds("totals")]),
        _event("ol_check", "dag", "COMPLETE", "01:00:05", [], [], parent=False),
        _event("tail", "s", "START", "01:00:06", [_ds("feed", source=False)], [], parent=False,
               processing="STREAMING"),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def apis(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, httpx.Client]]:
    with open_apis(request, tmp_path_factory, history()) as clients:
        yield clients


@pytest.fixture(params=STORES)
def api(request: pytest.FixtureRequest, apis: dict[str, httpx.Client]) -> httpx.Client:
    return apis[request.param]


def _get(api: httpx.Client, operation: str, url: str, **params: Any) -> Any:
    response = api.get(url, params=params)
    assert response.status_code == 200, (url, response.text)
    body = response.json()
    validate_operation(operation, body)
    return body


DAG_UUID = str(
    uuid.uuid5(uuid.UUID("6f1c8c0e-4d1e-4c55-9a57-4c1d6b0f3a21"), "job\x1fairflow\x1fol_check")
)


def test_a_task_names_its_dag_as_parent(api):
    body = _get(api, "getJob", f"/api/v1/namespaces/{NS}/jobs/ol_check.fill_totals")
    assert body["parentJobName"] == "ol_check"
    assert body["parentJobUuid"] == DAG_UUID  # derived from the parent's name: every store's
    assert body["simpleName"] == "fill_totals"  # relative to the parent
    assert body["type"] == "BATCH"
    assert body["inputs"] == [{"namespace": PG, "name": "src"}]
    assert body["latestRun"]["id"] == RUNS["f"]
    dag = _get(api, "getJob", f"/api/v1/namespaces/{NS}/jobs/ol_check")
    assert dag["simpleName"] == "ol_check" and "parentJobName" not in dag
    stream = _get(api, "getJob", f"/api/v1/namespaces/{NS}/jobs/tail")
    assert stream["type"] == "STREAM"


def test_job_lists_carry_the_job_fields(api):
    jobs = _get(api, "getJobs", f"/api/v1/namespaces/{NS}/jobs")["jobs"]
    by_name = {j["name"]: j for j in jobs}
    one = _get(api, "getJob", f"/api/v1/namespaces/{NS}/jobs/ol_check.fill_totals")
    listed = by_name["ol_check.fill_totals"]
    for key in ("type", "simpleName", "parentJobName", "parentJobUuid", "createdAt"):
        assert listed[key] == one[key], key
    for key in ("updatedAt", "location", "description", "currentVersion", "inputs", "outputs"):
        assert listed[key] == one[key], key
    assert by_name["tail"]["type"] == "STREAM"
    assert "parentJobName" not in by_name["ol_check"]


def test_lineage_nodes_carry_jobdata_and_datasetdata(api):
    body = _get(
        api, "getLineage", "/api/v1/lineage", nodeId=f"job:{NS}:ol_check.fill_totals", depth=2
    )
    nodes = {n["id"]: n["data"] for n in body["graph"]}
    task = nodes[f"job:{NS}:ol_check.fill_totals"]
    assert set(task) == JOB_DATA, set(task) ^ JOB_DATA
    assert (task["parentJobName"], task["simpleName"]) == ("ol_check", "fill_totals")
    assert task["parentJobUuid"] == DAG_UUID
    assert (task["type"], task["createdAt"], task["updatedAt"]) == (
        "BATCH",
        "2025-06-01T01:00:03Z",
        "2025-06-01T01:00:04Z",
    )
    assert task["outputs"] == [{"namespace": PG, "name": "totals"}]
    assert task["description"] == "The ol_check.fill_totals task."
    totals = nodes[f"dataset:{PG}:totals"]
    assert set(totals) == DATASET_DATA, set(totals) ^ DATASET_DATA
    assert totals["sourceName"] == "shopdb"
    assert totals["fields"] == [{"name": "id", "type": "INTEGER", "tags": []}]
    assert totals["lastModifiedAt"] == "2025-06-01T01:00:04Z"  # fill_totals completed last
    assert (totals["type"], totals["physicalName"]) == ("DB_TABLE", "totals")
    # src: its first read named no dataSource, the second shopdb: the latest says shopdb
    assert nodes[f"dataset:{PG}:src"]["sourceName"] == "shopdb"
    assert "lastModifiedAt" not in nodes[f"dataset:{PG}:src"]  # nothing wrote it


def test_dataset_answers_and_lists_name_the_source(api):
    one = _get(api, "getDataset", f"/api/v1/namespaces/{_q(PG)}/datasets/totals")
    assert (one["sourceName"], one["lastModifiedAt"]) == ("shopdb", "2025-06-01T01:00:04Z")
    feed = _get(api, "getDataset", f"/api/v1/namespaces/{_q(PG)}/datasets/feed")
    assert feed["sourceName"] == "default"
    listed = _get(api, "getDatasets", f"/api/v1/namespaces/{_q(PG)}/datasets")["datasets"]
    by_name = {d["name"]: d for d in listed}
    assert by_name["totals"]["sourceName"] == "shopdb"
    assert by_name["totals"]["fields"] == one["fields"]
    assert by_name["totals"]["lastModifiedAt"] == one["lastModifiedAt"]
    assert by_name["feed"]["sourceName"] == "default"


def test_sources_are_the_datasource_facets(api):
    sources = _get(api, "getSources", "/api/v1/sources")["sources"]
    assert sources == [
        {
            "type": "POSTGRESQL",
            "name": "default",
            "createdAt": "2025-06-01T01:00:03Z",  # src's first read, without the facet
            "updatedAt": "2025-06-01T01:00:06Z",  # feed's
            "connectionUrl": "",
        },
        {
            "type": "POSTGRESQL",
            "name": "shopdb",
            "createdAt": "2025-06-01T01:00:01Z",
            "updatedAt": "2025-06-01T01:00:04Z",
            "connectionUrl": SHOP,
        },
    ]
    assert _get(api, "getSource", "/api/v1/sources/shopdb") == sources[1]
    assert api.get("/api/v1/sources/shop").status_code == 404


def test_the_stores_answer_alike(apis):
    urls = [
        f"/api/v1/namespaces/{NS}/jobs",
        f"/api/v1/namespaces/{_q(PG)}/datasets",
        "/api/v1/sources",
        f"/api/v1/lineage?nodeId=job:{NS}:ol_check.fill_totals",
    ]
    reference = [apis["memory"].get(url).json() for url in urls]
    for kind in STORES[1:]:
        assert [apis[kind].get(url).json() for url in urls] == reference, kind
