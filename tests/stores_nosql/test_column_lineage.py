"""Column lineage asked identically of the engine over every backend: memory (the reference),
sql on SQLite and on PostgreSQL, document (MongoDB wire) and graph (FalkorDB), from the same
events written in different orders."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from nosql_events import COLUMN_SCHEMA, PRODUCER, records, run_event
from servers import postgres_schema

from lineage_sdk.collector.columns import edge_info, marquez_column_graph, parse_column_node
from lineage_sdk.collector.engine import Engine, EngineStore
from lineage_sdk.collector.store import ColumnGraph, FieldRef
from lineage_sdk.collector.stores.sql_backend import SqlBackend

pytestmark = [pytest.mark.mongodb, pytest.mark.neo4j]

PG = "postgres://db.example:5432"  # a namespace holding ':' and '/', as real ones do


def new_form(fields: dict[str, list[tuple[str, str, str, str]]]) -> dict[str, Any]:
    """The current facet: output field -> [(ns, dataset, field, transformation subtype)]."""
    return {
        "_producer": PRODUCER,
        "_schemaURL": COLUMN_SCHEMA,
        "fields": {
            out: {
                "inputFields": [
                    {
                        "namespace": ns,
                        "name": ds,
                        "field": f,
                        "transformations": [{"type": "DIRECT", "subtype": sub, "masking": False}],
                    }
                    for ns, ds, f, sub in ins
                ]
            }
            for out, ins in fields.items()
        },
    }


def old_form(fields: dict[str, tuple[list[tuple[str, str, str]], str]]) -> dict[str, Any]:
    """The 1-0-x facet: bare input fields, one transformationDescription per output field."""
    return {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ColumnLineageDatasetFacet.json",
        "fields": {
            out: {
                "inputFields": [{"namespace": ns, "name": ds, "field": f} for ns, ds, f in ins],
                "transformationDescription": desc,
                "transformationType": "IDENTITY",
            }
            for out, (ins, desc) in fields.items()
        },
    }


def writes(job: str, ns: str, src: str, dst: str, facet: dict[str, Any], seconds: float) -> Any:
    event = run_event(job=job, namespace=ns, inputs=[(PG, src)], outputs=[(PG, dst)])
    event["eventTime"] = f"2025-03-01T12:00:{seconds:06.3f}Z"
    event["outputs"][0]["facets"] = {"columnLineage": facet}
    return event


def pipeline(ns: str) -> list[dict[str, Any]]:
    """raw.orders -> stg.orders -> mart.daily -> c3 -> c4 -> c5 -> c6 (a chain on ``amount``),
    old and new facet forms mixed, a cycle (c6.amount -> raw.orders.amount), and an edge stated
    twice with different transformations (the later event wins)."""
    events = [
        writes(
            "stage",
            ns,
            "raw.orders",
            "stg.orders",
            new_form(
                {
                    "id": [(PG, "raw.orders", "id", "IDENTITY")],
                    "amount": [(PG, "raw.orders", "amount", "IDENTITY")],
                    "customer": [(PG, "raw.orders", "cust", "IDENTITY")],
                }
            ),
            1,
        ),
        # the same edge again, later, with another subtype: this statement wins
        writes(
            "stage",
            ns,
            "raw.orders",
            "stg.orders",
            new_form({"amount": [(PG, "raw.orders", "amount", "TRANSFORMATION")]}),
            2,
        ),
        writes(
            "mart",
            ns,
            "stg.orders",
            "mart.daily",
            old_form(
                {
                    "total": ([(PG, "stg.orders", "amount")], "SUM(amount)"),
                    "orders": ([(PG, "stg.orders", "id"), (PG, "stg.orders", "customer")], "COUNT"),
                }
            ),
            3,
        ),
    ]
    prev = ("mart.daily", "total")
    for i in range(3, 7):
        facet = new_form({"amount": [(PG, prev[0], prev[1], "IDENTITY")]})
        events.append(writes(f"c{i}", ns, prev[0], f"c{i}", facet, 3 + i))
        prev = (f"c{i}", "amount")
    events.append(
        writes(
            "loop",
            ns,
            "c6",
            "raw.orders",
            new_form({"amount": [(PG, "c6", "amount", "MASKED")]}),
            20,
        )
    )
    return events


@pytest.fixture(scope="module")
def pg_store() -> Iterator[EngineStore]:
    """The engine over the sql backend on PostgreSQL, in a schema of its own (shared by the
    module's tests), dropped afterwards."""
    with postgres_schema("lineage_cols") as url:
        store = EngineStore(SqlBackend(url))
        store.open()
        try:
            yield store
        finally:
            store.close()


@pytest.fixture
def sqlite_store(tmp_path: Any) -> Iterator[EngineStore]:
    """The engine over the sql backend on a SQLite file of its own."""
    store = EngineStore(SqlBackend(f"sqlite:///{tmp_path / 'lineage.db'}"))
    store.open()
    yield store
    store.close()


#: Every backend under the engine, the reference (memory) first.
STORES = ["memory", "sqlite", "postgresql", "document", "graph"]


@pytest.fixture(params=STORES)
def any_store(request: pytest.FixtureRequest) -> Any:
    name = {"sqlite": "sqlite_store", "postgresql": "pg_store"}.get(request.param)
    return request.getfixturevalue(name or f"{request.param}_store")


def shape(graph: ColumnGraph) -> tuple[Any, ...]:
    """A store-independent view of an answer."""
    return (
        graph.roots,
        sorted(graph.fields),
        sorted((o.id, i.id, json.loads(info)) for (o, i), info in graph.edges.items()),
    )


def fid(dataset: str, field: str) -> str:
    return FieldRef(PG, dataset, field).id


def write_shuffled(store: Any, events: list[dict[str, Any]], seed: int) -> None:
    """Every event, in a shuffled order, in small batches, the first batch twice (a replay)."""
    shuffled = events[:]
    random.Random(seed).shuffle(shuffled)
    batches = [shuffled[i : i + 3] for i in range(0, len(shuffled), 3)]
    for batch in [*batches, batches[0]]:
        store.write_batch(records(*batch))


def test_every_store_answers_column_lineage_alike(any_store: Any) -> None:
    assert isinstance(any_store, Engine)
    ns = f"ns-{uuid.uuid4().hex[:8]}"
    events = pipeline(ns)
    # Jobs get a namespace of their own; datasets live under PG in the module's PostgreSQL
    # schema, where the same edges are stated again with the same info: the answers hold.
    write_shuffled(any_store, events, seed=len(repr(type(any_store))))

    up = any_store.column_lineage(fid("mart.daily", "total"), depth=2)
    roots, fields, edges = shape(up)
    assert roots == (FieldRef(PG, "mart.daily", "total"),)
    assert [f.id for f in fields] == sorted(
        [fid("mart.daily", "total"), fid("stg.orders", "amount"), fid("raw.orders", "amount")]
    )
    assert edges == sorted(
        [
            (fid("mart.daily", "total"), fid("stg.orders", "amount"), OLD_SUM),
            (fid("stg.orders", "amount"), fid("raw.orders", "amount"), NEW_WINS),
        ]
    )

    # depth 5 upstream from c6.amount follows the chain back to raw.orders.amount
    deep = any_store.column_lineage(fid("c6", "amount"), depth=5)
    assert {f.dataset for f in deep.fields} == {
        "c6",
        "c5",
        "c4",
        "c3",
        "mart.daily",
        "stg.orders",
    }
    # downstream too, through the cycle, which terminates
    both = any_store.column_lineage(fid("stg.orders", "amount"), depth=50, with_downstream=True)
    assert {f.dataset for f in both.fields} == {
        "raw.orders",
        "stg.orders",
        "mart.daily",
        "c3",
        "c4",
        "c5",
        "c6",
    }
    # a whole dataset: each of its fields that column lineage names is a root
    whole = any_store.column_lineage(f"dataset:{PG}:stg.orders", depth=1)
    assert [r.field for r in whole.roots] == ["amount", "customer", "id"]
    assert {f.id for f in whole.fields} >= {fid("raw.orders", "cust"), fid("raw.orders", "id")}
    # a job: the fields of the datasets it writes (as Marquez answers a job)
    job = any_store.column_lineage(f"job:{ns}:mart", depth=1)
    assert [r.id for r in job.roots] == [fid("mart.daily", "orders"), fid("mart.daily", "total")]
    assert (
        shape(job)[1:] == shape(any_store.column_lineage(f"dataset:{PG}:mart.daily", depth=1))[1:]
    )
    assert any_store.column_lineage(f"job:{ns}:nothing").roots == ()
    # nothing recorded: no roots, no fields
    unknown = any_store.column_lineage(fid("stg.orders", "nope"), depth=3)
    assert unknown.roots == () and unknown.fields == set()
    zero = any_store.column_lineage(fid("mart.daily", "orders"), depth=0)
    assert zero.fields == {FieldRef(PG, "mart.daily", "orders")} and zero.edges == {}


OLD_SUM = {"transformationDescription": "SUM(amount)", "transformationType": "IDENTITY"}
NEW_WINS = {"transformations": [{"masking": False, "subtype": "TRANSFORMATION", "type": "DIRECT"}]}


def test_the_answers_are_identical_across_stores(
    memory_store: EngineStore,
    sqlite_store: EngineStore,
    pg_store: EngineStore,
    document_store: EngineStore,
    graph_store: EngineStore,
) -> None:
    """The same events, in a different order and batching for each store: the reference's
    (memory's) answer."""
    ns = f"ns-{uuid.uuid4().hex[:8]}"
    events = pipeline(ns)
    questions = [
        (fid("c6", "amount"), 5, False),
        (fid("stg.orders", "amount"), 50, True),
        (f"dataset:{PG}:stg.orders", 2, True),
        (f"job:{ns}:mart", 3, False),
    ]
    answers = []
    stores = (memory_store, sqlite_store, pg_store, document_store, graph_store)
    for seed, store in enumerate(stores):
        write_shuffled(store, events, seed)
        answers.append(
            [shape(store.column_lineage(q, depth=d, with_downstream=w)) for q, d, w in questions]
        )
    assert all(a == answers[0] for a in answers[1:])
    assert all(answer[1] for answer in answers[0])  # none of them empty


def test_node_ids_and_bad_input(sqlite_store: EngineStore) -> None:
    assert parse_column_node(f"datasetField:{PG}:db.s.t:col") == ("FIELD", PG, "db.s.t", "col")
    assert parse_column_node("dataset:ns:a:b") == ("DATASET", "ns", "a:b", None)
    assert parse_column_node("job:ns:j") == ("JOB", "ns", "j", None)
    for bad in ("run:ns:j", "datasetField:ns", "datasetField:ns:t:", "dataset:", "x"):
        with pytest.raises(ValueError, match=r"node id|column lineage starts at"):
            sqlite_store.column_lineage(bad)
    with pytest.raises(ValueError, match="depth"):
        sqlite_store.column_lineage("dataset:ns:t", depth=-1)


def test_marquez_shape_lists_inputs_and_flow_edges(sqlite_store: EngineStore) -> None:
    sqlite_store.write_batch(records(*pipeline("shape")))
    body = marquez_column_graph(sqlite_store.column_lineage(fid("mart.daily", "orders"), depth=1))
    nodes = {n["id"]: n for n in body["graph"]}
    root = body["graph"][0]
    assert root["id"] == fid("mart.daily", "orders") and root["type"] == "DATASET_FIELD"
    assert [i["field"] for i in root["data"]["inputFields"]] == ["customer", "id"]
    assert root["data"]["inputFields"][0]["transformationDescription"] == "COUNT"
    assert root["inEdges"] == [  # as Marquez writes them: from the node to its inputs
        {"origin": root["id"], "destination": fid("stg.orders", "customer")},
        {"origin": root["id"], "destination": fid("stg.orders", "id")},
    ]
    assert nodes[fid("stg.orders", "id")]["outEdges"] == [
        {"origin": fid("stg.orders", "id"), "destination": root["id"]}
    ]


def test_malformed_facets_are_skipped_not_raised(sqlite_store: EngineStore) -> None:
    """Ingest checks no facet: whatever a producer put there, the event is stored, and only the
    well-formed edges are kept."""
    good = {"namespace": PG, "name": "src", "field": "a", "transformations": [{"type": "DIRECT"}]}
    facets: list[Any] = [
        "not an object",
        {"fields": ["a list"]},
        {"fields": {"x": "not an object", "y": {"inputFields": "not a list"}}},
        {"fields": {"z": {"inputFields": [1, {"namespace": PG, "name": 2, "field": "f"}]}}},
        {"fields": {"ok": {"inputFields": [good, {"namespace": PG, "name": "src"}]}}},
    ]
    events = []
    for i, facet in enumerate(facets):
        event = writes(f"m{i}", "malformed", "src", "dst", facet, i)
        events.append(event)
    sqlite_store.write_batch(records(*events))
    assert sqlite_store.count_events() == len(events)
    answer = sqlite_store.column_lineage(f"dataset:{PG}:dst", depth=1)
    assert {(o.field, i.field) for o, i in answer.edges} == {("ok", "a")}
    # integers past 64 bits inside a transformation (orjson refuses them) still make canonical text
    assert json.loads(edge_info({**good, "transformations": [{"n": 2**70}]}, {})) == {
        "transformations": [{"n": 2**70}]
    }


def test_column_lineage_over_bolt(bolt_store: Any) -> None:
    """The neo4j driver's path (FalkorDB's Bolt endpoint): small events, one per batch (see
    tests/servers.py on its parameter limit); a restated edge keeps the later statement."""
    ns = f"bolt-{uuid.uuid4().hex[:8]}"
    first = writes("b1", ns, "b.src", "b.dst", new_form({"x": [(PG, "b.src", "y", "A")]}), 1)
    later = writes("b1", ns, "b.src", "b.dst", new_form({"x": [(PG, "b.src", "y", "B")]}), 2)
    for event in (later, first, later):
        bolt_store.write_batch(records(event))
    answer = bolt_store.column_lineage(FieldRef(PG, "b.dst", "x").id, depth=3)
    (info,) = answer.edges.values()
    assert json.loads(info)["transformations"][0]["subtype"] == "B"
    assert bolt_store.column_lineage(f"job:{ns}:b1", depth=1).roots == (FieldRef(PG, "b.dst", "x"),)
