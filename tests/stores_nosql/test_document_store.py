"""The engine over the document backend against a MongoDB-wire server (SecantusDB, or
LINEAGE_TEST_MONGODB_URI): how events and their rows are stored, the indexes the reads open on,
hostile names, and the errors a write raises."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from nosql_events import HOSTILE_KEYS, HOSTILE_STRINGS, facet, records, run_event, uid
from test_as_of_document import Documents, _plan_stages, backend, collection, documents

from lineage_sdk.collector.engine.derive import child_entry
from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.stores.document_backend import _k
from lineage_sdk.exceptions import StoreError

pytestmark = pytest.mark.mongodb
__all__ = ["documents"]  # the fixture, imported for the tests below

_COLLECTIONS = ("events", "mentions", "edges", "runs", "columns", "nodes")


def test_each_event_is_stored_once(documents: Documents) -> None:
    store = documents.new()
    ns = f"ns-{uid()}"
    events = [run_event(job="j", namespace=ns, seconds=i) for i in range(50)]
    store.write_batch(records(*events, *events[:10]))  # duplicates inside the batch
    store.write_batch(records(*events[20:30]))  # redelivery: duplicate-key errors ignored
    store.write_batch(records(*events[25:], run_event(job="late", namespace=ns)))
    assert collection(store, "events").count_documents({}) == 51 == store.count_events()
    ids = {build_record(e).event_id for e in events}
    found = collection(store, "events").find({"xj": _k(ns, "j")}, {"_id": 1})
    assert {d["_id"] for d in found} == ids
    assert len(store.runs_of_job(ns, "j")) == 50  # one run each, none doubled


def test_document_shape_dates_and_indexes(documents: Documents) -> None:
    store = documents.new()
    event = run_event(
        job="shape",
        namespace="ns",
        inputs=[("db", "in")],
        outputs=[("db", "out")],
        parent=("cccccccc-0000-4000-8000-000000000001", "ns", "parent"),
    )
    event["eventTime"] = "2025-03-01T13:00:00.123456+01:00"
    (rec,) = records(event)
    store.write_batch([rec])
    doc = collection(store, "events").find_one({"_id": rec.event_id})
    assert isinstance(doc["at"], datetime)  # a BSON date, for people reading the data
    assert doc["at"].isoformat().startswith("2025-03-01T12:00:00.123")  # UTC
    at = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert doc["event_time"] == (at - epoch) // timedelta(microseconds=1)  # µs, exact
    assert orjson.loads(doc["json"]) == event  # the event itself, as one text
    assert doc["job"] == ["ns", "shape"] and doc["xj"] == _k("ns", "shape")
    assert doc["parent_run_id"] == "cccccccc-0000-4000-8000-000000000001"
    assert doc["run_id"] == rec.run_id and doc["event_type"] == "COMPLETE" and doc["kind"] == "run"
    assert doc["namespace"] == "ns"
    mentions = list(collection(store, "mentions").find({"xs": _k("run", rec.run_id)}))
    assert {(m["kind"], tuple(m["key"]), m["role"]) for m in mentions} == {
        ("DATASET", ("db", "in"), "input"),
        ("DATASET", ("db", "out"), "output"),
        ("JOB", ("ns", "shape"), "stated"),  # what its COMPLETE states of its job
    }
    # its job's mention of the parent, one a (child, parent), not the run's (derivation 9)
    (child,) = collection(store, "mentions").find({"xs": _k("job", child_entry(("ns", "shape")))})
    assert (child["xn"], child["role"], child.get("detail")) == (
        _k("JOB", ("ns", "parent")),
        "parent",
        None,
    )
    # what it states of each dataset: one entry an event, in the run's mention of the dataset
    details = {m["role"]: m.get("detail") for m in mentions}
    assert all(isinstance(d, list) and len(d) == 1 for d in details.values()), details
    keys = {
        tuple(k for k, _ in ix["key"].items()) for ix in collection(store, "events").list_indexes()
    }
    assert {
        ("run_id", "event_time"),
        ("xj", "event_time"),
        ("namespace", "event_time", "_id"),
        ("event_time", "_id"),
    } <= keys
    # the audit question "which runs wrote db.out" is answered by the mentions' index
    assert (
        collection(store, "mentions").count_documents(
            {"xn": _k("DATASET", ("db", "out")), "role": "output"}
        )
        == 1
    )


RUN = "eeeeeeee-0000-4000-8000-000000000001"


@pytest.mark.parametrize(
    ("kind", "query"),
    [
        # The first $match of each read as the backend builds it (SecantusDB's tactics put the
        # other predicates in a second one): events by run, job, id and namespace; mentions by
        # node and by source; runs by job, id and parent; nodes by key and by namespace; the
        # edges' are in test_as_of_document.py.
        ("events", {"run_id": {"$in": [RUN]}}),
        ("events", {"xj": {"$in": [_k("ns", "idx"), _k("ns", "other")]}}),
        ("events", {"_id": {"$in": ["x", "y"]}}),
        ("events", {"namespace": "ns", "event_time": {"$gte": 0}}),
        ("mentions", {"xn": {"$in": [_k("DATASET", ("db", "in")), _k("DATASET", ("db", "out"))]}}),
        ("mentions", {"xn": {"$in": [_k("JOB", ("ns", "parent"))]}}),
        ("mentions", {"xs": {"$in": [_k("run", RUN)]}}),
        ("runs", {"xj": {"$in": [_k("ns", "idx"), _k("ns", "other")]}}),
        ("runs", {"run_id": {"$in": [RUN]}}),
        ("runs", {"parent_run_id": "eeeeeeee-0000-4000-8000-000000000002"}),
        ("nodes", {"_id": {"$in": [_k("JOB", ("ns", "idx")), _k("DATASET", ("db", "in"))]}}),
        ("nodes", {"kind": "DATASET", "xns": "db"}),
    ],
)
def test_every_audit_query_uses_an_index(
    documents: Documents, kind: str, query: dict[str, Any]
) -> None:
    store = documents.new()
    event = run_event(
        job="idx",
        namespace="ns",
        run_id=RUN,
        inputs=[("db", "in")],
        outputs=[("db", "out")],
        parent=("eeeeeeee-0000-4000-8000-000000000002", "ns", "parent"),
    )
    store.write_batch(records(event))
    stages = _plan_stages(collection(store, kind).find(query).explain())
    assert "IXSCAN" in stages and "COLLSCAN" not in stages, stages


def test_hostile_names_and_facets_are_stored_and_read_back_exactly(documents: Documents) -> None:
    store = documents.new()
    run_id = "dddddddd-0000-4000-8000-000000000001"
    hostile_facet = facet(
        **{k: {k: HOSTILE_STRINGS} for k in HOSTILE_KEYS}, big=2**63 - 1, f=0.1, n=None
    )
    events = []
    for i, text in enumerate(HOSTILE_STRINGS):
        events.append(
            run_event(
                job=text,
                namespace=text,
                run_id=run_id,
                seconds=i,
                inputs=[(text, text)],
                outputs=[("out", text)],
                run_facets={"custom": hostile_facet, "$where": facet(js="sleep(1000)")},
                job_facets={"a.b": facet(**{"$gt": text})},
                dataset_facets={"%2E": facet(v=text)},
            )
        )
    recs = records(*events)
    store.write_batch(recs)
    store.write_batch(recs)
    assert store.events_of_run(run_id) == events

    # no stored document holds a key that could be an operator or a path: names and facets
    # are values (the event is one JSON text), in every collection
    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                assert not k.startswith("$") and "." not in k, k
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for kind in _COLLECTIONS:
        for doc in collection(store, kind).find({}):
            walk(doc)
    for text in HOSTILE_STRINGS[:5]:
        assert [r.run_id for r in store.runs_of_job(text, text)] == [run_id]
        assert store.has_node("DATASET", text, text) and store.has_node("JOB", text, text)
        assert store.events_of_job(text, text) == [e for e in events if e["job"]["name"] == text]


def test_a_job_named_like_an_operator_matches_only_itself(documents: Documents) -> None:
    store = documents.new()
    store.write_batch(
        records(run_event(job="$ne", namespace="$ne"), run_event(job="x", namespace="y"))
    )
    assert len(store.runs_of_job("$ne", "$ne")) == 1
    assert store.runs_of_job("$ne", "x") == []
    assert store.search("$ne") == [("JOB", "$ne", "$ne")]


def test_errors_other_than_duplicates_raise_store_error(documents: Documents) -> None:
    store = documents.new()
    ok = run_event(job="ok", namespace="ns")
    store.write_batch(records(ok))
    too_big = run_event(
        job="big", namespace="ns", run_facets={"blob": facet(data="x" * (17 * 1024 * 1024))}
    )
    with pytest.raises(StoreError) as info:
        store.write_batch(records(ok, too_big))
    assert info.value.store == "document" and info.value.permanent


def test_server_side_rejection_is_not_ignored(documents: Documents) -> None:
    """A write error that is not E11000 (here a validator's 121) must surface, not be swallowed."""
    store = documents.new(open_it=False)
    events = collection(store, "events")
    events.database.create_collection(events.name, validator={"kind": {"$in": ["nothing"]}})
    store.open()
    with pytest.raises(StoreError) as info:
        store.write_batch(records(run_event(job="j", namespace="n")))
    assert "121" in str(info.value)
    assert backend(store).name == "document"
