"""The document store against a MongoDB-wire server (SecantusDB, or LINEAGE_TEST_MONGODB_URI)."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from nosql_events import HOSTILE_KEYS, HOSTILE_STRINGS, facet, records, run_event, uid

from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.stores.document import (
    DocumentLineageStore,
    escape_key,
    escape_keys,
    unescape_key,
    unescape_keys,
)
from lineage_sdk.exceptions import StoreError

pytestmark = pytest.mark.mongodb


@pytest.mark.parametrize(
    "key", ["", "%", "%%", "$", "$$x", "a.b", ".", "%24", "%2E", "\x00", "a%2", "😀.$%"]
)
def test_key_escaping_is_reversible_and_safe(key):
    escaped = escape_key(key)
    assert unescape_key(escaped) == key
    assert "." not in escaped and "$" not in escaped and "\x00" not in escaped and escaped


def test_escaped_keys_never_collide():
    keys = ["a.b", "a%2Eb", "a%252Eb", "$x", "%24x", "", "%", "%25"]
    assert len({escape_key(k) for k in keys}) == len(keys)
    nested = {"$a": [{"b.c": {"": 1}}, 2**70], "d": {"%": "x.y$"}}
    assert unescape_keys(escape_keys(nested)) == {
        "$a": [{"b.c": {"": 1}}, str(2**70)],
        "d": {"%": "x.y$"},
    }


def _escape_keys_reference(value: Any) -> Any:
    """escape_keys by its definition: always a fresh copy, every key escaped."""
    if isinstance(value, dict):
        return {escape_key(k): _escape_keys_reference(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escape_keys_reference(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        return str(value)
    return value


_JSON_KEYS = st.one_of(st.sampled_from(["", "%", "$", ".", "a.b", "$x", "%2E", "\x00"]), st.text())
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False)
    | st.text()
    | st.integers(min_value=-(2**70), max_value=2**70),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_JSON_KEYS, inner, max_size=4),
    max_leaves=25,
)


@given(_JSON)
def test_escape_keys_matches_its_definition_and_never_mutates(value):
    before = copy.deepcopy(value)
    escaped = escape_keys(value)
    assert escaped == _escape_keys_reference(value)
    assert value == before  # copy-on-write: the shared event is never touched
    assert unescape_keys(escaped) == unescape_keys(_escape_keys_reference(value))


def test_each_event_is_stored_once(document_store):
    ns = f"ns-{uid()}"
    events = [run_event(job="j", namespace=ns, seconds=i) for i in range(50)]
    document_store.write_batch(records(*events, *events[:10]))  # duplicates inside the batch
    document_store.write_batch(records(*events[20:30]))  # redelivery: duplicate-key errors ignored
    document_store.write_batch(records(*events[25:], run_event(job="late", namespace=ns)))
    assert document_store.collection.count_documents({}) == 51
    ids = {build_record(e).event_id for e in events}
    assert {d["_id"] for d in document_store.collection.find({"job.name": "j"}, {"_id": 1})} == ids


def test_document_shape_dates_and_indexes(document_store):
    event = run_event(
        job="shape",
        namespace="ns",
        inputs=[("db", "in")],
        outputs=[("db", "out")],
        parent=("cccccccc-0000-4000-8000-000000000001", "ns", "parent"),
    )
    event["eventTime"] = "2025-03-01T13:00:00.123456+01:00"
    (rec,) = records(event)
    document_store.write_batch([rec])
    doc = document_store.collection.find_one({"_id": rec.event_id})
    assert isinstance(doc["eventTime"], datetime)
    assert doc["eventTime"].isoformat().startswith("2025-03-01T12:00:00.123")  # BSON date, UTC
    assert doc["eventTimeRaw"] == "2025-03-01T13:00:00.123456+01:00"
    assert doc["job"] == {"namespace": "ns", "name": "shape"}
    assert doc["datasets"] == [
        {"namespace": "db", "name": "in", "role": "input"},
        {"namespace": "db", "name": "out", "role": "output"},
    ]
    assert doc["parentRunId"] == "cccccccc-0000-4000-8000-000000000001"
    assert doc["runId"] == rec.run_id and doc["eventType"] == "COMPLETE" and doc["kind"] == "run"
    keys = {
        tuple(k for k, _ in ix["key"].items()) for ix in document_store.collection.list_indexes()
    }
    assert {
        ("runId", "eventTime"),
        ("job.namespace", "job.name", "eventTime"),
        ("datasets.namespace", "datasets.name"),
    } <= keys
    # the audit questions are answered by those indexes
    assert (
        document_store.collection.count_documents(
            {"datasets": {"$elemMatch": {"namespace": "db", "name": "out", "role": "output"}}}
        )
        == 1
    )


def _plan_stages(plan: Any) -> set[str]:
    """Every ``stage`` named anywhere in an explain() answer (mongod and SecantusDB shapes)."""
    if isinstance(plan, dict):
        found = {plan["stage"]} if isinstance(plan.get("stage"), str) else set()
        return found.union(*(_plan_stages(v) for v in plan.values()))
    if isinstance(plan, list):
        return set().union(*(_plan_stages(v) for v in plan))
    return set()


@pytest.mark.parametrize(
    "query",
    [
        # The first $match of each read of the events, as the store builds them (events_of_run,
        # runs_of_job, events_of_job, events_of_dataset; the walks read the edges collection,
        # whose queries test_as_of_document.py checks).
        {"runId": "eeeeeeee-0000-4000-8000-000000000001"},
        {"job.namespace": "ns", "job.name": "idx"},
        {"job.namespace": "ns", "job.name": {"$in": ["idx", "other"]}},
        {"datasets.namespace": "db", "datasets.name": {"$in": ["in", "out"]}},
        {"staticKey": {"$in": ["dataset\x1fdb\x1fin", "job\x1fns\x1fidx"]}},  # static_events
        # has_node: a job, a run's parent job, a dataset
        {"parentJob.namespace": "ns", "parentJob.name": "parent"},
        {"datasets.namespace": "db", "datasets.name": "in"},
    ],
)
def test_every_audit_query_uses_an_index(document_store, query):
    event = run_event(
        job="idx",
        namespace="ns",
        run_id="eeeeeeee-0000-4000-8000-000000000001",
        inputs=[("db", "in")],
        outputs=[("db", "out")],
        parent=("eeeeeeee-0000-4000-8000-000000000002", "ns", "parent"),
    )
    document_store.write_batch(records(event))
    stages = _plan_stages(document_store.collection.find(query).explain())
    assert "IXSCAN" in stages and "COLLSCAN" not in stages, stages


def test_hostile_names_and_facets_are_stored_and_read_back_exactly(document_store):
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
    document_store.write_batch(recs)
    document_store.write_batch(recs)
    assert document_store.events_of_run(run_id) == events

    # the queryable copy holds no key that could be an operator or a path
    def walk(value):
        if isinstance(value, dict):
            for k, v in value.items():
                assert not k.startswith("$") and "." not in k
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for doc in document_store.collection.find({}, {"event": 1}):
        walk(doc["event"])
    # and stays queryable by its escaped path
    assert document_store.collection.count_documents(
        {"event.run.facets.%24where.js": "sleep(1000)"}
    ) == len(events)
    for text in HOSTILE_STRINGS[:5]:
        assert [r.run_id for r in document_store.runs_of_job(text, text)] == [run_id]


def test_a_job_named_like_an_operator_matches_only_itself(document_store):
    document_store.write_batch(
        records(run_event(job="$ne", namespace="$ne"), run_event(job="x", namespace="y"))
    )
    assert len(document_store.runs_of_job("$ne", "$ne")) == 1
    assert document_store.runs_of_job("$ne", "x") == []


def test_errors_other_than_duplicates_raise_store_error(document_store):
    ok = run_event(job="ok", namespace="ns")
    document_store.write_batch(records(ok))
    too_big = run_event(
        job="big", namespace="ns", run_facets={"blob": facet(data="x" * (17 * 1024 * 1024))}
    )
    with pytest.raises(StoreError) as info:
        document_store.write_batch(records(ok, too_big))
    assert info.value.store == "document" and info.value.permanent


def test_server_side_rejection_is_not_ignored(mongo):
    """A write error that is not E11000 (here a validator's 121) must surface, not be swallowed."""
    # Not `from conftest import ...`: with tests/collector collected too, that name is ambiguous.
    connection = ConnectionConfig(uri=mongo.uri, database="lineage_tests", timeout_ms=5000)
    store = DocumentLineageStore(connection, collection_name=f"v_{uid()}")
    db = store.collection.database
    db.create_collection(store.collection.name, validator={"kind": {"$in": ["dataset"]}})
    try:
        with pytest.raises(StoreError) as info:
            store.write_batch(records(run_event(job="j", namespace="n")))
        assert "121" in str(info.value)
    finally:
        store.collection.drop()
        store.close()
