"""Static lineage (OpenLineage JobEvent and DatasetEvent) through the HTTP read API, from every
query store, the engine over each backend: SQLite and PostgreSQL (sql), SecantusDB (document),
FalkorDB (graph) and memory. Each answer is validated against Marquez's OpenAPI document, and the
stores answer as memory does (and alike again when the events arrive in the opposite order).

``load`` runs once (reads ``raw.a``, writes ``stg.b``: observed edges) and a JobEvent declares
that it reads ``raw.a`` and ``raw.extra``; ``plan`` never runs, a JobEvent declares it reads
``stg.b`` and writes ``mart.c``; DatasetEvents describe ``stg.b`` (documentation) and
``ref.codes`` (schema), a dataset nothing else names.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import httpx
import pytest
from api_helpers import (
    PRODUCER,
    drop_store,
    engine_store,
    postgres_store,
    validate_openapi_response,
)
from openapi_check import validate_operation
from test_api_marquez import _q

from lineage_sdk.collector.api import ApiServer, create_app
from lineage_sdk.collector.engine import EngineStore

NS = "static"
PG = "postgres://static.example:5432"
SPEC = "https://openlineage.io/spec"
RUN = str(uuid.UUID(int=0x5747, version=4))
RUNS = {n: str(uuid.UUID(int=0x5750 + i, version=4)) for i, n in enumerate(("spark", "athena"))}
LAKE = "s3://lake"  # where Spark writes the table's files
HIVE = "hive://metastore:9083"  # the table's catalog: the canonical name (type TABLE)
# "reversed": SQLite again, fed the same events in the opposite order (arrival-order independence).
# memory (the reference backend) first: what the others answer like.
KINDS = ("memory", "sql", "postgres", "document", "graph", "reversed")


def _facet(name: str, **fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": f"{SPEC}/facets/1-0-0/{name}.json", **fields}


def _ds(name: str, facets: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"namespace": PG, "name": name, "facets": facets or {}}


def _job_event(name: str, at: str, inputs: list[str], outputs: list[str]) -> dict[str, Any]:
    doc = _facet("DocumentationJobFacet", description=f"{name}, as declared")
    return {
        "eventTime": f"2025-06-01T{at}Z",
        "job": {"namespace": NS, "name": name, "facets": {"documentation": doc}},
        "inputs": [_ds(n) for n in inputs],
        "outputs": [_ds(n) for n in outputs],
        "producer": PRODUCER,
        "schemaURL": f"{SPEC}/2-0-2/OpenLineage.json#/$defs/JobEvent",
    }


def _dataset_event(at: str, dataset: dict[str, Any]) -> dict[str, Any]:
    return {
        "eventTime": f"2025-06-01T{at}Z",
        "dataset": dataset,
        "producer": PRODUCER,
        "schemaURL": f"{SPEC}/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
    }


def events() -> list[dict[str, Any]]:
    run = [
        {
            "eventType": kind,
            "eventTime": f"2025-06-01T{at}Z",
            "run": {"runId": RUN, "facets": {}},
            "job": {"namespace": NS, "name": "load", "facets": {}},
            "inputs": [_ds("raw.a")],
            "outputs": [_ds("stg.b")],
            "producer": PRODUCER,
            "schemaURL": f"{SPEC}/2-0-2/OpenLineage.json#/$defs/RunEvent",
        }
        for kind, at in (("START", "01:00:00"), ("COMPLETE", "01:05:00"))
    ]
    codes = {"schema": _facet("SchemaDatasetFacet", fields=[{"name": "code", "type": "TEXT"}])}
    return [
        *run,
        *symlinked(),
        _job_event("load", "00:30:00", ["raw.a", "raw.extra"], []),
        _job_event("plan", "00:40:00", ["stg.b"], ["mart.c"]),
        _dataset_event(
            "02:00:00",
            _ds("stg.b", {"documentation": _facet("DocumentationDatasetFacet", description="B.")}),
        ),
        _dataset_event("02:10:00", _ds("ref.codes", codes)),
    ]


def _symlinks() -> dict[str, Any]:
    identifiers = [
        {"namespace": HIVE, "name": "sales.orders", "type": "TABLE"},
        {"namespace": "s3a://lake", "name": "warehouse/orders", "type": "LOCATION"},
    ]
    return {"symlinks": _facet("SymlinksDatasetFacet", identifiers=identifiers)}


def _columns(source: tuple[str, str]) -> dict[str, Any]:
    inputs = [{"namespace": source[0], "name": source[1], "field": "id"}]
    return {
        "columnLineage": _facet("ColumnLineageDatasetFacet", fields={"id": {"inputFields": inputs}})
    }


def symlinked() -> list[dict[str, Any]]:
    """Spark writes the table by its location (``s3://lake`` ``warehouse/orders``, the table as
    symlink), reading ``raw.a``; Athena reads the table by its catalog name and writes
    ``mart.orders``, its column lineage naming the location by its other (``s3a``) alias; a
    DatasetEvent documents the location (it arrives first)."""
    location = {"namespace": LAKE, "name": "warehouse/orders"}
    spark_out = {**location, "facets": {**_symlinks(), **_columns((PG, "raw.a"))}}
    athena_out = _ds("mart.orders", _columns(("s3a://lake", "warehouse/orders")))
    athena_in = {
        "namespace": HIVE,
        "name": "sales.orders",
        "facets": {},
    }
    doc = _facet("DocumentationDatasetFacet", description="Orders, as a table.")
    runs = []
    for job, inputs, outputs, at in (
        ("spark_write", [_ds("raw.a")], [spark_out], "03:00:00"),
        ("athena_read", [athena_in, {**location, "facets": _symlinks()}], [athena_out], "04:00:00"),
    ):
        runs.append(
            {
                "eventType": "COMPLETE",
                "eventTime": f"2025-06-01T{at}Z",
                "run": {"runId": RUNS[job.split("_")[0]], "facets": {}},
                "job": {"namespace": NS, "name": job, "facets": {}},
                "inputs": inputs,
                "outputs": outputs,
                "producer": PRODUCER,
                "schemaURL": f"{SPEC}/2-0-2/OpenLineage.json#/$defs/RunEvent",
            }
        )
    described = {**location, "facets": {**_symlinks(), "documentation": doc}}
    return [*runs, _dataset_event("00:10:00", described)]


def serve_stores(
    stack: contextlib.ExitStack,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    kinds: Sequence[str],
    batch: Callable[[str], list[dict[str, Any]]],
) -> dict[str, httpx.Client]:
    """An API per store kind, the engine over each backend (memory; sql on SQLite, postgres on
    PostgreSQL; document, graph; "reversed" is SQLite), each fed ``batch(kind)`` in one POST;
    everything is closed and dropped by ``stack``."""
    clients: dict[str, httpx.Client] = {}
    for kind in kinds:
        store: EngineStore
        if kind == "postgres":
            store = stack.enter_context(postgres_store("lineage_static"))
        else:
            store = engine_store(
                "sql" if kind == "reversed" else kind, request, tmp_path_factory.mktemp(kind)
            )
            stack.callback(store.close)
            stack.callback(drop_store, store)
        store.open()
        server = ApiServer(create_app(store)).start()
        stack.callback(server.stop)
        client = stack.enter_context(httpx.Client(base_url=server.url, timeout=30))
        events = batch(kind)
        posted = client.post("/api/v1/lineage/batch", json=events)
        assert posted.status_code == 200, posted.text
        assert posted.json()["summary"]["successful"] == len(events)
        clients[kind] = client
    return clients


def agreed(apis: dict[str, httpx.Client], path: str, **params: Any) -> dict[str, Any]:
    """The answer to ``GET path`` every backend of ``apis`` gives (a 200), after checking they
    all give it (``memory``'s first: the reference)."""
    answers = {}
    for kind, client in apis.items():
        response = client.get(path, params=params)
        assert response.status_code == 200, (kind, path, params, response.text)
        answers[kind] = response.json()
    first = answers["memory"]
    for kind, found in answers.items():
        assert found == first, (kind, path, params)
    return first


@pytest.fixture(scope="module")
def apis(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, httpx.Client]]:
    with contextlib.ExitStack() as stack:
        yield serve_stores(
            stack,
            request,
            tmp_path_factory,
            KINDS,
            lambda kind: events()[::-1] if kind == "reversed" else events(),
        )


def _get(client: httpx.Client, path: str, operation: str, **params: Any) -> Any:
    response = client.get(path, params=params)
    assert response.status_code == 200, (path, response.text)
    body = response.json()
    validate_operation(operation, body)
    return body


def _lineage(client: httpx.Client, node: str, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = _get(client, "/api/v1/lineage", "getLineage", nodeId=node, **params)
    return body


def _edges(body: dict[str, Any]) -> dict[tuple[str, str], bool]:
    """(origin, destination) -> declared, over every edge of a lineage answer."""
    found: dict[tuple[str, str], bool] = {}
    for node in body["graph"]:
        for edge in (*node["inEdges"], *node["outEdges"]):
            found[edge["origin"], edge["destination"]] = edge.get("declared", False)
    return found


def test_declared_edges_are_walked_and_marked_beside_observed_ones(apis):
    load, plan = f"job:{NS}:load", f"job:{NS}:plan"
    a, extra, b, c = (f"dataset:{PG}:{n}" for n in ("raw.a", "raw.extra", "stg.b", "mart.c"))
    for kind, api in apis.items():
        edges = _edges(_lineage(api, load, depth=3, direction="both"))  # the directed walks
        assert edges == {
            (a, load): True,  # observed and declared
            (extra, load): True,  # declared only
            (load, b): False,  # observed only
            (b, plan): True,  # plan never ran: all it has is declared
            (plan, c): True,
        }, kind
        upstream = _edges(_lineage(api, c, depth=5, direction="upstream"))
        assert (a, load) in upstream and (b, plan) in upstream, kind


def test_a_job_known_only_from_a_job_event(apis):
    for kind, api in apis.items():
        job = _get(api, f"/api/v1/namespaces/{NS}/jobs/plan", "getJob")
        assert [i["name"] for i in job["inputs"]] == ["stg.b"], kind
        assert [o["name"] for o in job["outputs"]] == ["mart.c"], kind
        assert job["description"] == "plan, as declared", kind
        assert job.get("latestRun") is None and "currentVersion" not in job, kind


def test_dataset_event_facets_feed_the_dataset_reads(apis):
    for kind, api in apis.items():
        base = f"/api/v1/namespaces/{_q(PG)}/datasets"
        b = _get(api, f"{base}/stg.b", "getDataset")
        assert b["description"] == "B." and "documentation" in b["facets"], kind
        codes = _get(api, f"{base}/ref.codes", "getDataset")
        assert [(f["name"], f["type"]) for f in codes["fields"]] == [("code", "TEXT")], kind
        (version,) = _get(api, f"{base}/ref.codes/versions", "getDatasetVersions")["versions"]
        assert version["version"] == codes["currentVersion"], kind
        hits = _get(api, "/api/v1/search", "search", q="codes")["results"]
        assert [(h["type"], h["name"]) for h in hits] == [("DATASET", "ref.codes")], kind
        listed = _get(api, f"/api/v1/namespaces/{_q(PG)}/datasets", "getDatasets")["datasets"]
        assert "ref.codes" in {d["name"] for d in listed}, kind


def test_answers_match_the_served_openapi_document(apis):
    """The extra ``declared`` key and a version without ``createdByRun`` are in our own
    ``/openapi.json``, not only tolerated by Marquez's."""
    api = apis["sql"]
    openapi = api.get("/openapi.json").json()
    body = _lineage(api, f"job:{NS}:plan")
    assert any(e.get("declared") for n in body["graph"] for e in n["inEdges"])
    validate_openapi_response(openapi, "/api/v1/lineage", "get", 200, body)
    template = "/api/v1/namespaces/{namespace}/datasets/{dataset}/versions"
    versions = api.get(f"/api/v1/namespaces/{_q(PG)}/datasets/ref.codes/versions").json()
    validate_openapi_response(openapi, template, "get", 200, versions)


def test_symlinked_names_are_one_dataset(apis):
    """The location and the table are one node, named by the table (the TABLE symlink), in
    lineage, in column lineage and in the dataset's reads."""
    table = f"dataset:{HIVE}:sales.orders"
    spark, athena = f"job:{NS}:spark_write", f"job:{NS}:athena_read"
    for kind, api in apis.items():
        body = _lineage(api, f"job:{NS}:athena_read", depth=2, direction="upstream")
        ids = {n["id"] for n in body["graph"]}
        assert table in ids and spark in ids, kind
        assert not [i for i in ids if "lake" in i], (kind, ids)
        edges = _edges(body)
        assert (spark, table) in edges and (table, athena) in edges, kind
        columns = _get(
            api,
            "/api/v1/column-lineage",
            "getColumnLineage",
            nodeId=f"datasetField:{PG}:mart.orders:id",
            depth=5,
        )
        fields = {n["id"] for n in columns["graph"]}
        assert fields == {
            f"datasetField:{PG}:mart.orders:id",
            f"datasetField:{HIVE}:sales.orders:id",
            f"datasetField:{PG}:raw.a:id",
        }, (kind, fields)
        dataset = _get(api, f"/api/v1/namespaces/{_q(HIVE)}/datasets/sales.orders", "getDataset")
        assert dataset["description"] == "Orders, as a table.", kind
        assert "symlinks" in dataset["facets"] and "columnLineage" in dataset["facets"], kind
        hits = _get(api, "/api/v1/search", "search", q="orders")["results"]
        assert {h["namespace"] for h in hits} == {HIVE, PG}, (kind, hits)


def test_every_store_answers_alike(apis):
    paths = [
        ("/api/v1/lineage", {"nodeId": f"job:{NS}:load", "depth": 3}),
        ("/api/v1/lineage", {"nodeId": f"dataset:{PG}:ref.codes"}),
        (f"/api/v1/namespaces/{NS}/jobs/plan", {}),
        (f"/api/v1/namespaces/{NS}/jobs/load", {}),
        (f"/api/v1/namespaces/{_q(PG)}/datasets/stg.b", {}),
        (f"/api/v1/namespaces/{_q(PG)}/datasets/stg.b/versions", {}),
        (f"/api/v1/namespaces/{_q(PG)}/datasets/ref.codes", {}),
        ("/api/v1/search", {"q": "a"}),
        ("/api/v1/lineage", {"nodeId": f"dataset:{HIVE}:sales.orders"}),
        ("/api/v1/column-lineage", {"nodeId": f"dataset:{PG}:mart.orders", "withDownstream": 1}),
        (f"/api/v1/namespaces/{_q(HIVE)}/datasets/sales.orders", {}),
        (f"/api/v1/namespaces/{_q(HIVE)}/datasets/sales.orders/versions", {}),
    ]
    for path, params in paths:
        answers = {kind: api.get(path, params=params) for kind, api in apis.items()}
        first = answers["memory"]
        assert first.status_code == 200, (path, first.text)
        for kind, answer in answers.items():
            assert answer.status_code == 200, (kind, path, answer.text)
            assert answer.json() == first.json(), (kind, path, answer.text, first.text)
