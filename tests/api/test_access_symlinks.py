"""Access follows every name of a dataset (issue 32, item 8), over real HTTP, on every access
store. The corpus of ``test_api_symlink_names`` (Spark writes ``hdfs://host`` locations, each
with its Hive table as ``symlinks``; ``warehouse:report`` reads the table by its own name), and
a DatasetEvent for each name of t2: one sent under the location, one under the table.

Two keys, each holding one of the two namespaces: LOC reads ``spark`` and ``hdfs://host`` (the
producer's view), TABLE reads ``warehouse`` and ``hive://metastore`` (the catalog's). The rule
(docs/api.md, "Every name of a dataset"): a key sees the dataset under the names its namespaces
hold (LOC as the location, TABLE as the table), from what its readable events state under those
names; a name of a hidden namespace answers as an unknown one, and no answer carries the other
name or what was stated under it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from api_helpers import ACCESS_KINDS, ADMIN, Served, access_api, client_of
from openapi_check import validate_operation
from test_api_symlink_names import HDFS, HIVE, SPARK_RUN, T1, T2, TABLE2, _symlinked, events

from lineage_sdk.collector.api.access import hash_key
from lineage_sdk.collector.settings import ApiKeyConfig

KEY_LOC = "lsk_location-0a1b2c3d4e5f60718293a4b5c6d7e8f9"
KEY_TABLE = "lsk_table-9f8e7d6c5b4a3928170f6e5d4c3b2a19"
KEYS = {
    "loc": ApiKeyConfig(key_hash=hash_key(KEY_LOC), write=["spark"], read=["spark", HDFS]),
    "table": ApiKeyConfig(
        key_hash=hash_key(KEY_TABLE), write=["warehouse"], read=["warehouse", HIVE]
    ),
}
DATASET_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent"
#: What only the other name's events state: no answer to the other key may hold it.
LOCATION_WORDS = (HDFS, "/user/hive/warehouse/t", "Location doc")
TABLE_WORDS = (HIVE, "default.t", "Table doc")


def _described(dataset: dict[str, Any], description: str) -> dict[str, Any]:
    doc = {
        "_producer": "https://example.com/docs",
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DocumentationDatasetFacet.json",
        "description": description,
    }
    dataset = copy.deepcopy(dataset)
    dataset.setdefault("facets", {})["documentation"] = doc
    return {
        "eventTime": "2025-03-01T00:10:00Z",
        "producer": "https://example.com/docs",
        "schemaURL": DATASET_EVENT,
        "dataset": dataset,
    }


def corpus() -> list[dict[str, Any]]:
    location = _described(_symlinked(T2, TABLE2), "Location doc.")
    table = _described({"namespace": HIVE, "name": "default.t2", "facets": {}}, "Table doc.")
    return [*events(), location, table]


@pytest.fixture(scope="module", params=ACCESS_KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("symlink-access")
    with access_api(request, folder, api_key=ADMIN, keys=KEYS, posts=[(ADMIN, corpus())]) as made:
        yield made


loc = client_of(KEY_LOC)
table = client_of(KEY_TABLE)
admin = client_of(ADMIN)


def _path(key: tuple[str, str]) -> str:
    return f"/api/v1/namespaces/{quote(key[0], safe='')}/datasets/{quote(key[1], safe='')}"


def _node(key: tuple[str, str]) -> str:
    return f"dataset:{key[0]}:{key[1]}"


def _ok(client: httpx.Client, path: str, operation: str, hidden: tuple[str, ...], **params: Any):
    """A 200 valid for ``operation`` that holds none of ``hidden``."""
    response = client.get(path, params=params)
    assert response.status_code == 200, (path, params, response.text)
    validate_operation(operation, response.json())
    for word in hidden:
        assert word not in response.text, (word, path, params, response.text)
    return response.json()


def test_the_key_of_the_location_sees_the_location_and_nothing_of_the_table(loc):
    dataset = _ok(loc, _path(T2), "getDataset", TABLE_WORDS)
    assert dataset["id"] == {"namespace": HDFS, "name": T2[1]}
    assert [f["name"] for f in dataset["fields"]] == ["id"]
    assert dataset["description"] == "Location doc."
    assert "otherNames" not in dataset
    versions = _ok(loc, f"{_path(T2)}/versions", "getDatasetVersions", TABLE_WORDS)
    assert versions["versions"]
    graph = _ok(loc, "/api/v1/lineage", "getLineage", TABLE_WORDS, nodeId=_node(T2), depth=2)
    ids = {n["id"] for n in graph["graph"]}
    assert ids == {_node(T2), "job:spark:etl.write_t2"}, ids
    assert "nodeId" not in graph
    past = _ok(
        loc, "/api/v1/lineage", "getLineage", TABLE_WORDS, nodeId=_node(T2), asOf="2030-01-01"
    )
    assert {n["id"] for n in past["graph"]} == ids
    in_run = _ok(
        loc, "/api/v1/lineage", "getLineage", TABLE_WORDS, nodeId=_node(T2), runId=SPARK_RUN
    )
    assert _node(T2) in {n["id"] for n in in_run["graph"]}
    columns = _ok(
        loc,
        "/api/v1/column-lineage",
        "getColumnLineage",
        TABLE_WORDS,
        nodeId=f"datasetField:{HDFS}:{T2[1]}:id",
    )
    fields = {n["id"] for n in columns["graph"]}
    assert fields == {f"datasetField:{HDFS}:{T2[1]}:id", f"datasetField:{HDFS}:{T1[1]}:id"}
    hits = _ok(loc, "/api/v1/search", "search", TABLE_WORDS, q=T2[1])["results"]
    assert [(h["namespace"], h["name"]) for h in hits] == [T2]
    assert _ok(loc, "/api/v1/search", "search", (), q="default.t2")["results"] == []
    # A part of the location finds both datasets, each as the location the key sees.
    hits = _ok(loc, "/api/v1/search", "search", TABLE_WORDS, q="WAREHOUSE/t")["results"]
    assert [(h["namespace"], h["name"]) for h in hits] == [T1, T2]
    run_events = loc.get(f"/api/v1/jobs/runs/{SPARK_RUN}/events")
    assert run_events.status_code == 200 and T2[1] in run_events.text, run_events.text
    assert not [w for w in TABLE_WORDS if w in run_events.text], run_events.text
    _ok(loc, "/api/v1/namespaces/spark/jobs/etl.write_t2", "getJob", TABLE_WORDS)


def test_the_key_of_the_table_sees_the_table_and_nothing_of_the_location(table):
    dataset = _ok(table, _path(TABLE2), "getDataset", LOCATION_WORDS)
    assert dataset["id"] == {"namespace": HIVE, "name": "default.t2"}
    assert dataset["description"] == "Table doc."
    assert "otherNames" not in dataset
    _ok(table, f"{_path(TABLE2)}/versions", "getDatasetVersions", LOCATION_WORDS)
    graph = _ok(table, "/api/v1/lineage", "getLineage", LOCATION_WORDS, nodeId=_node(TABLE2))
    assert {n["id"] for n in graph["graph"]} >= {_node(TABLE2), "job:warehouse:report"}
    assert _ok(table, "/api/v1/search", "search", (), q=T2[1])["results"] == []
    for part in ("warehouse/t2", "hive/ware", "user%t2"):  # no part of a hidden alias finds it
        assert _ok(table, "/api/v1/search", "search", (), q=part)["results"] == [], part
    hits = _ok(table, "/api/v1/search", "search", LOCATION_WORDS, q="default.t2")["results"]
    assert [(h["namespace"], h["name"]) for h in hits] == [TABLE2]
    response = table.get("/api/v1/column-lineage", params={"nodeId": _node(TABLE2)})
    for word in LOCATION_WORDS:
        assert word not in response.text, response.text


@pytest.mark.parametrize(
    ("who", "hidden", "unknown"),
    [("loc", TABLE2, (HIVE, "default.t9")), ("table", T2, (HDFS, "/user/hive/warehouse/t9"))],
)
def test_the_other_name_answers_as_an_unknown_one(loc, table, who, hidden, unknown):
    """Byte for byte, as a name never recorded of the same length (``test_access_attacker``)."""
    from test_access_attacker import assert_alike

    client = loc if who == "loc" else table
    for make in (
        lambda key: (_path(key), {}),
        lambda key: (f"{_path(key)}/versions", {}),
        lambda key: ("/api/v1/lineage", {"nodeId": _node(key)}),
        lambda key: ("/api/v1/lineage", {"nodeId": _node(key), "asOf": "2030-01-01"}),
        lambda key: ("/api/v1/column-lineage", {"nodeId": f"datasetField:{key[0]}:{key[1]}:id"}),
    ):
        path, params = make(hidden)
        asked = client.get(path, params=params)
        other_path, other_params = make(unknown)
        never = client.get(other_path, params=other_params)
        assert asked.status_code == 404, (path, params, asked.text)
        assert_alike(asked, never, (hidden[1], unknown[1]))


def test_a_key_of_both_namespaces_sees_one_node_under_both_names(admin):
    by_table = _ok(admin, _path(TABLE2), "getDataset", ())
    assert {"namespace": HDFS, "name": T2[1]} in by_table["otherNames"]
    assert _ok(admin, _path(T2), "getDataset", ()) == by_table
