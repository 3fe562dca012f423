"""Every name of a dataset finds its one node (issue 32, item 2), through the HTTP API of every
query store, the engine over each backend: memory, SQLite and PostgreSQL (sql), SecantusDB
(document) and FalkorDB (graph); and deletion by either name deletes it. The corpus, a Spark job
that names its tables by location, each with the Hive table as ``symlinks``, and a job that
reads the table by its own name::

    hdfs://host:/user/hive/warehouse/t1 (= hive://metastore:default.t1)
        -> [spark:etl.write_t2] -> hdfs://host:/user/hive/warehouse/t2 (= hive://metastore:default.t2)
    hive://metastore:default.t2 -> [warehouse:report] -> hive://metastore:default.t3

t2's ``id`` comes from t1's ``id`` (the column lineage names t1 by its location, as Spark does).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from api_helpers import PRODUCER, column_facet, run_cli, run_event, schema_facet
from ingest.every_store import every_store
from openapi_check import validate_operation
from servers import FalkorDBServer, MongoTarget
from test_api_static import serve_stores

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.retention import purge_mentioning

KINDS = ("memory", "sql", "postgres", "document", "graph")
HDFS, HIVE = "hdfs://host", "hive://metastore"
T1 = (HDFS, "/user/hive/warehouse/t1")
T2 = (HDFS, "/user/hive/warehouse/t2")
TABLE1, TABLE2, TABLE3 = ((HIVE, f"default.t{n}") for n in (1, 2, 3))
SPARK_RUN = str(uuid.UUID(int=0x5E1, version=4))
SYMLINKS = "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json"


def _symlinked(location: tuple[str, str], table: tuple[str, str]) -> dict[str, Any]:
    identifiers = [{"namespace": table[0], "name": table[1], "type": "TABLE"}]
    facet = {"_producer": PRODUCER, "_schemaURL": SYMLINKS, "identifiers": identifiers}
    return {"namespace": location[0], "name": location[1], "facets": {"symlinks": facet}}


def events() -> list[dict[str, Any]]:
    """The Spark run (START, COMPLETE) and the Hive report run."""
    spark = []
    for kind, at in (("START", 0), ("COMPLETE", 5)):
        event = run_event("etl.write_t2", namespace="spark", event_type=kind, run_id=SPARK_RUN)
        event["eventTime"] = event["eventTime"].replace("00:00Z", f"00:{at:02d}Z")
        event["inputs"] = [_symlinked(T1, TABLE1)]
        event["outputs"] = [_symlinked(T2, TABLE2)]
        event["outputs"][0]["facets"]["schema"] = schema_facet(("id", "BIGINT", "the key"))
        event["outputs"][0]["facets"]["columnLineage"] = column_facet({"id": [(*T1, "id")]})
        spark.append(event)
    report = run_event(
        "report", namespace="warehouse", inputs=[TABLE2], outputs=[TABLE3], seconds=60
    )
    return [*spark, report]


@pytest.fixture(scope="module")
def apis(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, httpx.Client]]:
    with contextlib.ExitStack() as stack:
        yield serve_stores(stack, request, tmp_path_factory, KINDS, lambda _: events())


def _get(client: httpx.Client, path: str, operation: str, **params: Any) -> Any:
    response = client.get(path, params=params)
    assert response.status_code == 200, (path, params, response.text)
    body = response.json()
    validate_operation(operation, body)
    return body


def _dataset_path(key: tuple[str, str]) -> str:
    return f"/api/v1/namespaces/{quote(key[0], safe='')}/datasets/{quote(key[1], safe='')}"


def _node(key: tuple[str, str]) -> str:
    return f"dataset:{key[0]}:{key[1]}"


def _field(key: tuple[str, str], field: str = "id") -> str:
    return f"datasetField:{key[0]}:{key[1]}:{field}"


def _without_node_id(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "nodeId"}


def test_the_dataset_reads_find_it_by_both_names(apis):
    for kind, api in apis.items():
        by_table = _get(api, _dataset_path(TABLE2), "getDataset")
        assert by_table["id"] == {"namespace": HIVE, "name": "default.t2"}, kind
        assert [f["name"] for f in by_table["fields"]] == ["id"], kind
        assert {"namespace": HDFS, "name": T2[1]} in by_table["otherNames"], kind
        by_location = _get(api, _dataset_path(T2), "getDataset")
        assert by_location == by_table, kind
        versions = _get(api, f"{_dataset_path(TABLE2)}/versions", "getDatasetVersions")
        assert versions["versions"], kind
        assert _get(api, f"{_dataset_path(T2)}/versions", "getDatasetVersions") == versions, kind
        version = versions["versions"][0]["version"]
        one = _get(api, f"{_dataset_path(T2)}/versions/{version}", "getDatasetVersion")
        assert one["version"] == version, kind
        # The input's location finds its table too, though no event names the table itself.
        assert _get(api, _dataset_path(T1), "getDataset")["id"]["name"] == "default.t1", kind


def test_lineage_finds_it_by_both_names(apis):
    spark, report = "job:spark:etl.write_t2", "job:warehouse:report"
    for kind, api in apis.items():
        by_table = _get(api, "/api/v1/lineage", "getLineage", nodeId=_node(TABLE2), depth=2)
        ids = {n["id"] for n in by_table["graph"]}
        assert {spark, report, _node(TABLE1), _node(TABLE2), _node(TABLE3)} <= ids, (kind, ids)
        assert not [i for i in ids if HDFS in i], (kind, ids)
        by_location = _get(api, "/api/v1/lineage", "getLineage", nodeId=_node(T2), depth=2)
        assert by_location["nodeId"] == _node(TABLE2), kind
        assert _without_node_id(by_location) == by_table, kind
        past = _get(
            api,
            "/api/v1/lineage",
            "getLineage",
            nodeId=_node(T2),
            depth=2,
            asOf="2030-01-01T00:00:00Z",
        )
        assert {n["id"] for n in past["graph"]} == ids, kind
        in_run = _get(api, "/api/v1/lineage", "getLineage", nodeId=_node(T2), runId=SPARK_RUN)
        assert spark in {n["id"] for n in in_run["graph"]}, kind


def test_column_lineage_finds_it_by_both_names(apis):
    for kind, api in apis.items():
        for root in (_node, _field):
            by_table = _get(api, "/api/v1/column-lineage", "getColumnLineage", nodeId=root(TABLE2))
            fields = {n["id"] for n in by_table["graph"]}
            assert fields == {_field(TABLE2), _field(TABLE1)}, (kind, fields)
            by_location = _get(api, "/api/v1/column-lineage", "getColumnLineage", nodeId=root(T2))
            assert by_location["nodeId"] == root(TABLE2), kind
            assert _without_node_id(by_location) == by_table, kind
        upstream = _get(
            api,
            "/api/v1/column-lineage",
            "getColumnLineage",
            nodeId=_field(T1),
            withDownstream="true",
        )
        assert _field(TABLE2) in {n["id"] for n in upstream["graph"]}, kind


def test_search_finds_it_by_both_names(apis):
    for kind, api in apis.items():
        for q in ("default.t2", T2[1]):
            hits = _get(api, "/api/v1/search", "search", q=q)["results"]
            found = {(h["type"], h["namespace"], h["name"]) for h in hits}
            assert ("DATASET", *TABLE2) in found, (kind, q, hits)
        only = _get(api, "/api/v1/search", "search", q=T2[1], namespace=HDFS)["results"]
        assert [(h["namespace"], h["name"]) for h in only] == [TABLE2], kind
        jobs = _get(api, "/api/v1/search", "search", q=T2[1], filter="job")["results"]
        assert jobs == [], kind


def test_search_finds_it_by_a_part_of_any_name(apis):
    """As Marquez's ``name ILIKE %q%`` over a row per name: once, under its canonical name."""
    both = [("DATASET", *TABLE1), ("DATASET", *TABLE2)]
    for kind, api in apis.items():
        for q in ("warehouse", "HIVE/WAREHOUSE/T", "user%ware_ouse"):
            hits = _get(api, "/api/v1/search", "search", q=q)["results"]
            assert [(h["type"], h["namespace"], h["name"]) for h in hits] == both, (kind, q)
        hits = _get(api, "/api/v1/search", "search", q="warehouse/t2", namespace=HDFS)["results"]
        assert [(h["namespace"], h["name"]) for h in hits] == [TABLE2], kind
        # An alias is found by its own name only, not by the dataset's it is kept with.
        assert _get(api, "/api/v1/search", "search", q="metastore")["results"] == [], kind
        assert _get(api, "/api/v1/search", "search", q='"')["results"] == [], kind
        assert _get(api, "/api/v1/search", "search", q="warehouse", filter="job")["results"] == []
        names = {n["name"] for n in _get(api, "/api/v1/namespaces", "getNamespaces")["namespaces"]}
        assert HDFS not in names, (kind, names)  # no namespace holds only aliases


def test_a_name_no_event_gave_stays_unknown(apis):
    for kind, api in apis.items():
        missing = (HDFS, "/user/hive/warehouse/t9")
        assert api.get(_dataset_path(missing)).status_code == 404, kind
        response = api.get("/api/v1/lineage", params={"nodeId": _node(missing)})
        assert response.status_code == 404, kind


@pytest.mark.parametrize("source", ["http", "store"])
def test_the_cli_finds_it_by_both_names(api, source):
    """``lineage graph``, ``impact`` and ``columns``, against a collector's API and its store."""
    posted = api.client.post("/api/v1/lineage/batch", json=events())
    assert posted.status_code == 200, posted.text
    args = ["--url", api.url] if source == "http" else ["--config", str(api.config_path)]
    for node in (_node(T2), _node(TABLE2)):
        result = run_cli(*args, "graph", node, "--format", "json")
        assert result.returncode == 0, result.stderr
        assert _node(TABLE2) in result.stdout and "job:spark:etl.write_t2" in result.stdout
        tree = run_cli(*args, "graph", node, "--downstream")
        assert tree.returncode == 0, tree.stderr
        assert "report" in tree.stdout and "default.t3" in tree.stdout, tree.stdout
        impact = run_cli(*args, "impact", node)
        assert impact.returncode == 0 and "default.t3" in impact.stdout, impact.stdout
        columns = run_cli(*args, "columns", node.replace("dataset:", "datasetField:") + ":id")
        assert columns.returncode == 0, columns.stderr
        assert "default.t1" in columns.stdout, columns.stdout


@pytest.fixture
def stores(
    tmp_path: Path, pg_url: str, mongo: MongoTarget, falkordb: FalkorDBServer
) -> Iterator[dict[str, EngineStore]]:
    """Every backend, opened and holding the corpus (the engine, without the API)."""
    with every_store(tmp_path, pg_url, mongo, falkordb, "alias") as found:
        for store in found.values():
            store.open()
            store.write_batch([build_record(e) for e in events()])
        try:
            yield found
        finally:
            for store in found.values():
                store.close()


@pytest.mark.postgres
@pytest.mark.mongodb
@pytest.mark.neo4j
@pytest.mark.parametrize("name", [T2, TABLE2], ids=["location", "table"])
def test_deleting_either_name_deletes_the_node(stores, name):
    for kind, store in stores.items():
        assert store.dataset_name(*T2) == TABLE2, kind
        assert store.dataset_aliases("WAREHOUSE/t2") == [(T2, TABLE2)], kind
        found = purge_mentioning([store], "dataset", *name)
        assert found.removed[store.name] == 3, (kind, found.removed)
        assert not store.has_node("DATASET", *TABLE2), kind
        assert store.dataset_name(*T2) == T2, kind  # no event gives the name any more
        assert store.count_events() == 0, kind
        assert not list(store.backend.mentions("DATASET", [T2, TABLE2])), kind
        assert store.dataset_aliases("warehouse") == [], kind  # search no longer finds it
        assert not store.backend.nodes("ALIAS"), kind


@pytest.mark.postgres
@pytest.mark.mongodb
@pytest.mark.neo4j
def test_retention_keeps_the_names_the_remaining_events_give(stores):
    """Alias mentions of a run are derived again from its remaining events; those of a run-less
    event (a DatasetEvent) go with it."""
    described = {
        "eventTime": "2025-03-01T00:10:00Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": _symlinked((HDFS, "/user/hive/warehouse/t4"), (HIVE, "default.t4")),
    }
    t4 = (HIVE, "default.t4")
    for kind, store in stores.items():
        store.write_batch([build_record(described)])
        assert store.dataset_name(HDFS, "/user/hive/warehouse/t4") == (HIVE, "default.t4"), kind
        spark = [r.event_id for r in store.iter_raw_events() if "etl.write_t2" in r.json]
        static = [r.event_id for r in store.iter_raw_events() if "t4" in r.json]
        assert len(spark) == 2 and len(static) == 1, kind
        assert store.dataset_aliases("/t4") == [((HDFS, "/user/hive/warehouse/t4"), t4)], kind
        store.delete_events(spark[:1])
        assert store.dataset_name(*T2) == TABLE2, kind
        assert store.dataset_aliases("warehouse/t2") == [(T2, TABLE2)], kind
        store.delete_events(spark[1:] + static)
        assert store.dataset_name(*T2) == T2, kind
        assert store.dataset_name(HDFS, "/user/hive/warehouse/t4") == (
            HDFS,
            "/user/hive/warehouse/t4",
        ), kind
        assert store.has_node("DATASET", *TABLE2), kind  # the report still names the table
        assert not store.has_node("DATASET", HIVE, "default.t4"), kind
        left = store.backend.mentions("DATASET", [T2, T1, ("", T2[1])], roles=["alias"])
        assert not list(left), kind
        assert store.dataset_aliases("warehouse") == [], kind
        assert not store.backend.nodes("ALIAS"), kind
