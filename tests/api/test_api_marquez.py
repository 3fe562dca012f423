"""Marquez's read API, complete: every GET of shared/marquez/openapi.yml an event store can answer,
over real HTTP, from the engine over each backend (memory, sql on SQLite and on PostgreSQL,
document on SecantusDB, graph on FalkorDB), each answer validated against its operation in
openapi.yml, the stores answering as the memory backend does, and Marquez's write endpoints
refused with 405.

One API per store for the module, loaded once with a small known history (tests only read it)."""

from __future__ import annotations

import contextlib
import inspect
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from api_helpers import PRODUCER, drop_store, engine_store, postgres_store
from jsonschema import ValidationError
from openapi_check import OPERATION_CHECKS, operation, validate_operation
from servers import free_port

from lineage_sdk.collector.api import ApiServer, create_app
from lineage_sdk.collector.api.routes.writes import WRITE_ENDPOINTS
from lineage_sdk.collector.engine import EngineStore

#: The engine over each backend (sql on SQLite, and on PostgreSQL as ``postgres``); memory (the
#: reference backend) is what the others answer like.
STORES = ("memory", "sql", "postgres", "document", "graph")
NS = "warehouse"
PG = "postgres://db.example:5432"
SPEC = "https://openlineage.io/spec"
RUNS = {name: str(uuid.UUID(int=i + 1, version=4)) for i, name in enumerate(("l1", "l2", "rep"))}
LOCATION = "https://git.example/etl/load_orders.py"
#: The ``dataSource`` facet load_orders sends with its datasets (report and the others send none).
SHOPDB = "postgres://db:5432/shop"


def _facet(name: str, **fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": f"{SPEC}/facets/1-0-0/{name}.json", **fields}


def _schema(*columns: tuple[str, str]) -> dict[str, Any]:
    return {
        "schema": _facet("SchemaDatasetFacet", fields=[{"name": n, "type": t} for n, t in columns])
    }


def _event(
    job: str,
    run: str,
    kind: str,
    at: str,
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    job_facets: dict[str, Any] | None = None,
    run_facets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "eventType": kind,
        "eventTime": f"2025-04-01T{at}Z",
        "run": {"runId": RUNS[run], "facets": run_facets or {}},
        "job": {"namespace": NS, "name": job, "facets": job_facets or {}},
        "inputs": inputs,
        "outputs": outputs,
        "producer": PRODUCER,
        "schemaURL": f"{SPEC}/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }


def _ds(name: str, facets: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"namespace": PG, "name": name, "facets": facets or {}}


def _shopdb(facets: dict[str, Any]) -> dict[str, Any]:
    """``facets`` with the ``dataSource`` facet of the shop database."""
    source = {**_facet("DatasourceDatasetFacet", uri=SHOPDB), "name": "shopdb"}
    return {**facets, "dataSource": source}


def history() -> list[dict[str, Any]]:
    """load_orders ran twice (the second run also writes stg.audit: a second job version, and a
    second version of stg.orders with a new column); report read stg.orders and failed."""
    job_facets = {
        "sourceCodeLocation": _facet("SourceCodeLocationJobFacet", type="git", url=LOCATION),
        "jobType": _facet(
            "JobTypeJobFacet", processingType="BATCH", integration="X", jobType="JOB"
        ),
        "documentation": _facet("DocumentationJobFacet", description="Loads the orders."),
    }
    nominal = {
        "nominalTime": _facet("NominalTimeRunFacet", nominalStartTime="2025-04-01T00:00:00Z")
    }
    raw = _ds("raw.orders", _shopdb(_schema(("id", "INTEGER"), ("amount", "DECIMAL"))))
    v1 = _ds(
        "stg.orders",
        _shopdb(
            {
                **_schema(("id", "INTEGER"), ("amount", "DECIMAL")),
                "documentation": _facet("DocumentationDatasetFacet", description="Staged orders."),
            }
        ),
    )
    v2 = _ds(
        "stg.orders",
        _shopdb(_schema(("id", "INTEGER"), ("amount", "DECIMAL"), ("currency", "TEXT"))),
    )
    return [
        _event("load_orders", "l1", "START", "01:00:00", [raw], [v1], job_facets, nominal),
        _event("load_orders", "l1", "COMPLETE", "01:00:10", [raw], [v1], job_facets),
        _event("load_orders", "l2", "START", "02:00:00", [raw], [v2, _ds("stg.audit")], job_facets),
        _event("load_orders", "l2", "COMPLETE", "02:00:30", [raw], [v2, _ds("stg.audit")]),
        _event("report", "rep", "START", "03:00:00", [_ds("stg.orders")], [_ds("mart.revenue")]),
        _event("report", "rep", "FAIL", "03:00:05", [_ds("stg.orders")], [_ds("mart.revenue")]),
        {
            "eventTime": "2025-04-01T04:00:00Z",
            "producer": PRODUCER,
            "schemaURL": f"{SPEC}/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
            "dataset": _ds("ref.currencies", _schema(("code", "TEXT"))),
        },
    ]


@contextlib.contextmanager
def open_apis(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    events: list[dict[str, Any]],
) -> Iterator[dict[str, httpx.Client]]:
    """An API per store (:data:`STORES`), each holding ``events``; dropped afterwards."""
    clients: dict[str, httpx.Client] = {}
    with contextlib.ExitStack() as stack:  # undone last first: client, server, store
        for kind in STORES:
            store: EngineStore
            if kind == "postgres":  # closed, then its database dropped
                store = stack.enter_context(postgres_store("lineage_marquez"))
            else:
                store = engine_store(kind, request, tmp_path_factory.mktemp(kind))
                stack.callback(store.close)
                stack.callback(drop_store, store)
            store.open()
            server = ApiServer(create_app(store)).start()
            stack.callback(server.stop)
            client = stack.enter_context(httpx.Client(base_url=server.url, timeout=30))
            posted = client.post("/api/v1/lineage/batch", json=events)
            assert posted.status_code == 200, posted.text
            assert posted.json()["summary"]["successful"] == len(events)
            clients[kind] = client
        yield clients


@pytest.fixture(scope="module")
def apis(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, httpx.Client]]:
    """An API per store, each holding :func:`history`."""
    with open_apis(request, tmp_path_factory, history()) as clients:
        yield clients


@pytest.fixture(params=STORES)
def api(request: pytest.FixtureRequest, apis: dict[str, httpx.Client]) -> httpx.Client:
    return apis[request.param]


def _q(text: str) -> str:
    return quote(text, safe="")


def _version(client: httpx.Client, path: str) -> str:
    return str(client.get(path).json()["versions"][0]["version"])


def reads(client: httpx.Client) -> list[tuple[str, str, dict[str, Any] | None]]:
    """(operationId, url, params): one call of every GET this API answers from openapi.yml."""
    ds = f"/api/v1/namespaces/{_q(PG)}/datasets/stg.orders"
    job = f"/api/v1/namespaces/{NS}/jobs/load_orders"
    run = f"/api/v1/jobs/runs/{RUNS['l1']}"
    return [
        ("getNamespaces", "/api/v1/namespaces", None),
        ("getNamespace", f"/api/v1/namespaces/{_q(PG)}", None),
        ("getJobs", f"/api/v1/namespaces/{NS}/jobs", None),
        ("getJob", job, None),
        ("getJobVersions", f"{job}/versions", None),
        ("getJobVersion", f"{job}/versions/{_version(client, job + '/versions')}", None),
        ("getRuns", f"{job}/runs", None),
        ("getRun", run, None),
        ("getFacets", f"{run}/facets", {"type": "run"}),
        ("getFacets", f"{run}/facets", {"type": "job"}),
        ("getDatasets", f"/api/v1/namespaces/{_q(PG)}/datasets", None),
        ("getDataset", ds, None),
        ("getDatasetVersions", f"{ds}/versions", None),
        ("getDatasetVersion", f"{ds}/versions/{_version(client, ds + '/versions')}", None),
        ("getSources", "/api/v1/sources", None),
        ("getSource", "/api/v1/sources/shopdb", None),
        ("getSource", "/api/v1/sources/default", None),
        ("getTags", "/api/v1/tags", None),
        ("getLineageEvents", "/api/v1/events/lineage", {"limit": 3}),
        ("getLineage", "/api/v1/lineage", {"nodeId": f"dataset:{PG}:stg.orders"}),
        ("search", "/api/v1/search", {"q": "orders"}),
        ("getRunLineageUpstream", "/api/v1/runlineage/upstream", {"runId": RUNS["rep"]}),
    ]


def test_every_read_answers_its_operation_schema(api):
    for operation_id, url, params in reads(api):
        response = api.get(url, params=params)
        assert response.status_code == 200, (url, response.text)
        validate_operation(operation_id, response.json())


def test_every_answerable_get_of_openapi_is_covered(apis):
    """The GETs above are all of openapi.yml's but column lineage (its own module)."""
    covered = {op for op, _, _ in reads(apis["sql"])}
    import api_helpers

    every = {
        op["operationId"]
        for item in api_helpers.marquez_document()["paths"].values()
        for method, op in item.items()
        if method == "get" and isinstance(op, dict)
    }
    assert every - covered == {"getColumnLineage"}


def test_the_three_stores_answer_alike(apis):
    answers = {
        kind: [client.get(url, params=params).json() for _, url, params in reads(client)]
        for kind, client in apis.items()
    }
    for kind in STORES[1:]:
        calls = reads(apis["memory"])
        for (op, url, _), mine, ref in zip(calls, answers[kind], answers["memory"], strict=True):
            assert mine == ref, (kind, op, url)


def test_dataset_fields_versions_and_source(api):
    ds = f"/api/v1/namespaces/{_q(PG)}/datasets/stg.orders"
    body = api.get(ds).json()
    assert [(f["name"], f["type"]) for f in body["fields"]] == [
        ("id", "INTEGER"),
        ("amount", "DECIMAL"),
        ("currency", "TEXT"),  # the latest schema facet
    ]
    assert body["physicalName"] == "stg.orders"
    assert body["description"] == "Staged orders."  # an older facet the latest run did not resend
    assert (body["createdAt"], body["updatedAt"]) == (
        "2025-04-01T01:00:00Z",
        "2025-04-01T03:00:05Z",  # report read it last
    )
    assert body["lastModifiedAt"] == "2025-04-01T02:00:30Z"
    versions = api.get(f"{ds}/versions").json()
    assert versions["totalCount"] == 2  # one per run that wrote it; report only read it
    newest, oldest = versions["versions"]
    assert body["currentVersion"] == newest["version"]
    assert newest["createdByRun"]["id"] == RUNS["l2"]
    assert newest["createdByRun"]["state"] == "COMPLETED"
    assert [f["name"] for f in oldest["fields"]] == ["id", "amount"]
    one = api.get(f"{ds}/versions/{oldest['version']}").json()
    assert one == oldest
    page = api.get(f"{ds}/versions", params={"limit": 1, "offset": 1}).json()
    assert (page["versions"], page["totalCount"]) == ([oldest], 2)
    only_event = api.get(f"/api/v1/namespaces/{_q(PG)}/datasets/ref.currencies").json()
    # Known only from a DatasetEvent (static lineage): its schema gives fields and a version.
    assert only_event["name"] == "ref.currencies"
    assert [(f["name"], f["type"]) for f in only_event["fields"]] == [("code", "TEXT")]
    (static,) = api.get(f"/api/v1/namespaces/{_q(PG)}/datasets/ref.currencies/versions").json()[
        "versions"
    ]
    assert only_event["currentVersion"] == static["version"] and "createdByRun" not in static
    # Marquez's sources: the dataSource facets' names, "default" for the entries without one
    # (stg.audit, report's stg.orders, mart.revenue, ref.currencies), all typed POSTGRESQL.
    sources = api.get("/api/v1/sources").json()["sources"]
    assert sources == [
        {
            "type": "POSTGRESQL",
            "name": "default",
            "createdAt": "2025-04-01T02:00:00Z",
            "updatedAt": "2025-04-01T04:00:00Z",
            "connectionUrl": "",
        },
        {
            "type": "POSTGRESQL",
            "name": "shopdb",
            "createdAt": "2025-04-01T01:00:00Z",
            "updatedAt": "2025-04-01T02:00:30Z",
            "connectionUrl": SHOPDB,
        },
    ]
    assert api.get("/api/v1/sources/shopdb").json() == sources[1]
    page = api.get("/api/v1/sources", params={"limit": 1, "offset": 1}).json()
    assert page == {"sources": [sources[1]]}
    # A dataset's source is the latest dataSource facet it was sent with, else "default".
    assert body["sourceName"] == "shopdb"  # report read it without the facet: still shopdb
    assert {v["sourceName"] for v in versions["versions"]} == {"shopdb"}
    revenue = api.get(f"/api/v1/namespaces/{_q(PG)}/datasets/mart.revenue").json()
    assert revenue["sourceName"] == "default"


def test_job_versions_facets_and_run_version(api):
    job = f"/api/v1/namespaces/{NS}/jobs/load_orders"
    body = api.get(job).json()
    assert body["type"] == "BATCH" and body["location"] == LOCATION
    assert body["description"] == "Loads the orders."
    assert set(body["facets"]) == {"sourceCodeLocation", "jobType", "documentation"}
    versions = api.get(f"{job}/versions").json()
    assert versions["totalCount"] == 2  # the second run wrote stg.audit as well
    newest, oldest = versions["versions"]
    assert body["currentVersion"] == newest["version"]
    assert [d["name"] for d in newest["outputs"]] == ["stg.audit", "stg.orders"]
    assert [d["name"] for d in oldest["outputs"]] == ["stg.orders"]
    assert newest["latestRun"]["id"] == RUNS["l2"] and oldest["latestRun"]["id"] == RUNS["l1"]
    run = api.get(f"/api/v1/jobs/runs/{RUNS['l1']}").json()
    assert run["jobVersion"] == {
        "namespace": NS,
        "name": "load_orders",
        "version": oldest["version"],
    }
    assert api.get(f"{job}/versions/{oldest['version'].upper()}").json() == oldest
    facets = api.get(f"/api/v1/jobs/runs/{RUNS['l1']}/facets", params={"type": "RUN"}).json()
    assert facets == {"runId": RUNS["l1"], "facets": history()[0]["run"]["facets"]}
    job_facets = api.get(f"/api/v1/jobs/runs/{RUNS['l1']}/facets", params={"type": "job"}).json()
    assert set(job_facets["facets"]) == {"sourceCodeLocation", "jobType", "documentation"}


def test_event_log_pages_filters_and_sorts(api):
    sent = history()
    newest_first = sorted(sent, key=lambda e: e["eventTime"], reverse=True)
    body = api.get("/api/v1/events/lineage").json()
    assert body["totalCount"] == len(sent)
    assert body["events"] == newest_first  # every event, exactly as received
    page = api.get("/api/v1/events/lineage", params={"limit": 2, "offset": 1}).json()
    assert (page["events"], page["totalCount"]) == (newest_first[1:3], len(sent))
    window = {"after": "2025-04-01T02:00:00Z", "before": "2025-04-01T03:00:05+00:00"}
    asc = api.get("/api/v1/events/lineage", params={**window, "sortDirection": "ASC"}).json()
    assert [e["eventTime"] for e in asc["events"]] == [
        "2025-04-01T02:00:00Z",
        "2025-04-01T02:00:30Z",
        "2025-04-01T03:00:00Z",
    ]
    assert api.get("/api/v1/events/lineage", params={"before": "2025-04-01"}).json() == {
        "events": [],
        "totalCount": 0,
    }
    mine = api.get(f"/api/v1/events/{NS}").json()
    assert mine["totalCount"] == 6  # the dataset event belongs to no job
    assert api.get("/api/v1/events").json() == body
    for params in ({"before": "yesterday"}, {"sortDirection": "up"}):
        bad = api.get("/api/v1/events/lineage", params=params)
        assert bad.status_code == 422, params
        assert bad.json()["reason"] == "invalid_parameter"
        assert next(iter(params)) in bad.json()["detail"]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"q": "ORDERS", "filter": "Dataset"}, ["raw.orders", "stg.orders"]),
        ({"q": "o", "filter": "JOB"}, ["load_orders", "report"]),
        ({"q": "s_g.%d"}, ["stg.audit", "stg.orders"]),  # Marquez's wildcards
        ({"q": "orders", "namespace": NS}, ["load_orders"]),
        ({"q": "r", "limit": 2}, ["load_orders", "mart.revenue"]),  # by name, then the limit
        ({"q": "orders", "sort": "updated_at"}, ["stg.orders", "load_orders", "raw.orders"]),
        ({"q": "stg", "after": "2025-04-01T02:30:00Z"}, ["stg.orders"]),
    ],
)
def test_search_takes_marquez_parameters(api, params, expected):
    body = api.get("/api/v1/search", params=params).json()
    validate_operation("search", body)
    assert [r["name"] for r in body["results"]] == expected
    assert body["totalCount"] == len(expected)
    timed = "sort" in params or "after" in params
    assert all(("updatedAt" in r) == timed for r in body["results"])


def test_search_wildcard_alone_matches_everything(api):
    body = api.get("/api/v1/search", params={"q": "%"}).json()
    assert body["totalCount"] == 7  # 2 jobs and 5 datasets
    bad = api.get("/api/v1/search", params={"q": "x", "filter": "table"})
    assert bad.status_code == 422 and "filter" in bad.json()["detail"]


@pytest.mark.parametrize(
    "url",
    [
        f"/api/v1/namespaces/{NS}x",
        f"/api/v1/namespaces/{NS}/jobs/nope/versions",
        f"/api/v1/namespaces/{NS}/jobs/load_orders/versions/{uuid.UUID(int=9)}",
        f"/api/v1/namespaces/{_q(PG)}/datasets/nope",
        f"/api/v1/namespaces/{_q(PG)}/datasets/stg.orders/versions/{uuid.UUID(int=9)}",
        "/api/v1/sources/nope",
        f"/api/v1/jobs/runs/{uuid.UUID(int=9)}/facets",
    ],
)
def test_unknown_names_are_404_with_a_reason(apis, url):
    response = apis["sql"].get(url)
    assert response.status_code == 404, response.text
    assert response.json()["reason"] == "not_found"


def _concrete(path: str) -> str:
    values = {"namespace": _q(PG), "job": "load_orders", "dataset": "stg.orders", "id": RUNS["l1"]}
    for name, value in {**values, "source": "s", "field": "id", "tag": "PII"}.items():
        path = path.replace(f"{{{name}:path}}", value).replace(f"{{{name}}}", value)
    return path


def test_marquez_write_endpoints_answer_405_with_a_reason(apis):
    client = apis["sql"]
    tried = 0
    for methods, path, _what, allow in WRITE_ENDPOINTS:
        for method in methods:
            response = client.request(method, _concrete(path), json={"ownerName": "me"})
            assert response.status_code == 405, (method, path, response.text)
            body = response.json()
            assert body["reason"] == "read_only"
            assert "\n" not in body["detail"] and "/api/v1/lineage" in body["detail"]
            assert response.headers["allow"] == allow
            tried += 1
    assert tried == 15
    # Marquez's write operations, all refused (POST /lineage is ingest, and it still works).
    writes = {
        op["operationId"]
        for item in __import__("api_helpers").marquez_document()["paths"].values()
        for method, op in item.items()
        if method in ("put", "post", "delete") and isinstance(op, dict)
    }
    assert len(writes - {"recordLineage"}) == tried
    assert client.get(f"/api/v1/namespaces/{NS}/jobs/load_orders").status_code == 200


def test_openapi_check_fails_a_wrong_answer():
    with pytest.raises(ValidationError):
        validate_operation("getDatasetVersion", {"id": {"namespace": "n"}})
    with pytest.raises(ValidationError):  # facets must be facets (with _producer, _schemaURL)
        validate_operation("getFacets", {"runId": "r", "facets": {"x": {"a": 1}}})
    with pytest.raises(KeyError, match="getNothing"):
        operation("getNothing")


def _field_node(field: str, inputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": f"datasetField:{PG}:stg.orders:{field}",
        "type": "DATASET_FIELD",
        "data": {"namespace": PG, "dataset": "stg.orders", "field": field, "inputFields": inputs},
        "inEdges": [],
        "outEdges": [],
    }


def test_openapi_check_has_room_for_column_lineage():
    """Marquez's column-lineage answer has DATASET_FIELD nodes, which openapi.yml's NodeType
    lacks: the helper validates it as Marquez sends it, and still fails a wrong one."""
    source = {"namespace": PG, "dataset": "raw.orders", "field": "id"}
    validate_operation("getColumnLineage", {"graph": [_field_node("id", [source])]})
    validate_operation("getColumnLineage", {"graph": []})
    with pytest.raises(ValidationError):  # an input field without its dataset
        validate_operation(
            "getColumnLineage", {"graph": [_field_node("id", [{"namespace": PG, "field": "id"}])]}
        )
    with pytest.raises(ValidationError):
        validate_operation("getColumnLineage", {"graph": [{**_field_node("id", []), "type": "X"}]})
    assert OPERATION_CHECKS == {}  # nothing registered by this module


# ------------------------------------------------------------------------- marquez-python, as is


def client_calls(version_of: Any) -> dict[str, tuple[tuple[Any, ...], dict[str, Any], str]]:
    """marquez-python read method -> (args, kwargs, the operationId its answer must match).

    ``version_of(path)`` reads a version id the calls need over plain HTTP."""
    ds_versions = f"/api/v1/namespaces/{_q(PG)}/datasets/stg.orders/versions"
    return {
        "get_namespace": ((PG,), {}, "getNamespace"),
        "list_namespaces": ((), {}, "getNamespaces"),
        "list_events": ((), {"limit": 3}, "getLineageEvents"),
        "get_source": (("shopdb",), {}, "getSource"),
        "list_sources": ((), {}, "getSources"),
        "get_dataset": ((PG, "stg.orders"), {}, "getDataset"),
        "get_dataset_version": (
            (PG, "stg.orders", version_of(ds_versions)),
            {},
            "getDatasetVersion",
        ),
        "list_dataset_versions": ((PG, "stg.orders"), {}, "getDatasetVersions"),
        "list_datasets": ((PG,), {}, "getDatasets"),
        "get_job": ((NS, "load_orders"), {}, "getJob"),
        "list_jobs": ((NS,), {}, "getJobs"),
        "list_job_runs": ((NS, "load_orders"), {}, "getRuns"),
        "get_job_run": ((RUNS["l1"],), {}, "getRun"),
        "list_tags": ((), {}, "getTags"),
        "get_column_lineage_by_dataset": ((PG, "stg.orders"), {}, "getColumnLineage"),
        "get_column_lineage_by_dataset_field": ((PG, "stg.orders", "id"), {}, "getColumnLineage"),
        "get_column_lineage_by_job": ((NS, "load_orders"), {}, "getColumnLineage"),
    }


def _read_methods() -> set[str]:
    from marquez_client import MarquezClient

    return {
        name
        for name, _ in inspect.getmembers(MarquezClient, inspect.isfunction)
        if name.startswith(("get_", "list_"))
    }


def test_every_read_method_of_the_installed_client_is_called():
    assert _read_methods() == set(client_calls(lambda _path: "v"))


def _exercise(url: str, http: httpx.Client) -> list[str]:
    """Call every read method of marquez-python against ``url``; the names of those that pass."""
    from marquez_client import MarquezClient

    client = MarquezClient(url)
    calls = client_calls(lambda path: _version(http, path))
    passed: list[str] = []
    for name, (args, kwargs, operation_id) in sorted(calls.items()):
        body = getattr(client, name)(*args, **kwargs)
        validate_operation(operation_id, body)
        passed.append(name)
    return passed


def test_column_lineage_of_fields_only_a_schema_names(api):
    """No column lineage is recorded here; Marquez answers the schema's fields without inputs."""
    field = api.get(
        "/api/v1/column-lineage", params={"nodeId": f"datasetField:{PG}:stg.orders:currency"}
    )
    assert field.status_code == 200, field.text
    assert [(n["id"], n["data"]["inputFields"]) for n in field.json()["graph"]] == [
        (f"datasetField:{PG}:stg.orders:currency", [])
    ]
    whole = api.get("/api/v1/column-lineage", params={"nodeId": f"dataset:{PG}:stg.orders"})
    assert {n["data"]["field"] for n in whole.json()["graph"]} == {"id", "amount", "currency"}
    missing = api.get(
        "/api/v1/column-lineage", params={"nodeId": f"datasetField:{PG}:stg.orders:nope"}
    )
    assert missing.status_code == 404


def test_marquez_python_reads_each_store(api):
    passed = _exercise(str(api.base_url), api)
    assert len(passed) == 17


def test_marquez_python_answers_carry_the_history(apis):
    from marquez_client import MarquezClient

    client = MarquezClient(str(apis["sql"].base_url))
    assert client.get_namespace(PG) == {"name": PG, "ownerName": "anonymous"}
    assert [f["name"] for f in client.get_dataset(PG, "stg.orders")["fields"]] == [
        "id",
        "amount",
        "currency",
    ]
    assert client.list_dataset_versions(PG, "stg.orders", limit=1)["totalCount"] == 2
    assert [s["name"] for s in client.list_sources()["sources"]] == ["default", "shopdb"]
    assert client.get_source("shopdb")["connectionUrl"] == SHOPDB
    assert {t["name"] for t in client.list_tags()["tags"]} == {"PII", "SENSITIVE"}
    assert client.list_events(namespace=NS)["totalCount"] == 6
    assert client.get_job_run(RUNS["rep"])["state"] == "FAILED"
    from marquez_client.errors import APIError

    with pytest.raises(APIError):
        client.get_dataset(PG, "no.such.table")
    with pytest.raises(APIError):  # a write method: 405
        client.create_tag("PII", "personal")


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``lineage-collector serve`` as a user starts it, on the sql store, holding history()."""
    tmp = tmp_path_factory.mktemp("serve")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGE_", "OPENLINEAGE_"))}
    env.update({"LINEAGE_STORE_BACKEND": "sql", "LINEAGE_STORE_SQL_URL": f"sqlite:///{tmp}/api.db"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "lineage_sdk.collector.cli", "serve", "--port", str(port)],
        env=env,
        cwd=tmp,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/api/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "serve did not answer within 60 s"
            time.sleep(0.2)
        posted = httpx.post(f"{url}/api/v1/lineage/batch", json=history(), timeout=30)
        assert posted.json()["summary"]["successful"] == len(history()), posted.text
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_marquez_python_reads_against_lineage_collector_serve(serve):
    with httpx.Client(base_url=serve, timeout=30) as http:
        passed = _exercise(serve, http)
    assert len(passed) == 17
