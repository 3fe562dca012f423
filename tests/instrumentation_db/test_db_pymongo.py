"""pymongo command monitoring against a MongoDB-wire server (SecantusDB, or LINEAGE_TEST_MONGODB_URI)."""

from __future__ import annotations

import pymongo
import pytest
from servers import mongo_target

from lineage_instrumentation.db.pymongo_monitor import PymongoInstrumentor, command_collections
from lineage_sdk import track_lineage

pytestmark = pytest.mark.mongodb


@pytest.fixture(scope="module")
def mongo_uri():
    with mongo_target() as target:
        yield target.uri


def test_reads_writes_and_pipeline_stages(mongo_uri, captured, instrumented):
    original = pymongo.MongoClient.__init__
    instrumented(PymongoInstrumentor)
    client = pymongo.MongoClient(mongo_uri)
    db = client["shop_i15"]
    db.customers.insert_one({"_id": 1, "name": "ann"})

    @track_lineage(job_name="mongo_job")
    def job() -> None:
        db.orders.insert_many([{"_id": 1, "customer": 1}, {"_id": 2, "customer": 1}])
        assert db.orders.count_documents({}) == 2
        list(db.customers.find({}))
        db.orders.aggregate(
            [
                {
                    "$lookup": {
                        "from": "customers",
                        "localField": "customer",
                        "foreignField": "_id",
                        "as": "c",
                    }
                },
                {"$out": "order_view"},
            ]
        )
        db.stock.update_one({"_id": 1}, {"$set": {"n": 1}}, upsert=True)

    try:
        job()
    finally:
        client.drop_database("shop_i15")
        client.close()
    [complete] = captured.final("mongo_job")
    host, port = mongo_uri.split("//")[1].split("/")[0].rsplit(":", 1)
    namespace = f"mongodb://{host}:{port}"
    assert {d["namespace"] for d in complete["inputs"] + complete["outputs"]} == {namespace}
    assert sorted(d["name"] for d in complete["inputs"]) == [
        "shop_i15.customers",
        "shop_i15.orders",
    ]
    assert sorted(d["name"] for d in complete["outputs"]) == [
        "shop_i15.order_view",
        "shop_i15.orders",
        "shop_i15.stock",
    ]
    PymongoInstrumentor().uninstrument()
    assert pymongo.MongoClient.__init__ is original


def test_command_collections_covers_every_stage():
    pipeline = [
        {
            "$unionWith": {
                "coll": "b",
                "pipeline": [{"$lookup": {"from": {"db": "x", "coll": "c"}}}],
            }
        },
        {"$facet": {"f": [{"$graphLookup": {"from": "d"}}]}},
        {"$merge": {"into": {"db": "y", "coll": "m"}}},
    ]
    reads, writes = command_collections("aggregate", {"aggregate": "a", "pipeline": pipeline}, "db")
    assert sorted(reads) == ["db.a", "db.b", "db.d", "x.c"]
    assert writes == ["y.m"]
    assert command_collections("distinct", {"distinct": "a"}, "db") == (["db.a"], [])
    assert command_collections("findAndModify", {"findAndModify": "a"}, "db") == ([], ["db.a"])
    assert command_collections(
        "aggregate", {"aggregate": 1, "pipeline": [{"$out": "o"}]}, "db"
    ) == ([], ["db.o"])
    assert command_collections("getMore", {"getMore": 1, "collection": "a"}, "db") == ([], [])


def test_run_per_transaction_outside_any_run(mongo_uri, captured, instrumented):
    instrumented(PymongoInstrumentor, outside_run="run_per_transaction", job_name="mongo_tx")
    client = pymongo.MongoClient(mongo_uri)
    db = client["shop_i15_tx"]
    try:
        db.create_collection("ledger")
        with client.start_session() as session, session.start_transaction():
            db.ledger.insert_one({"_id": 1}, session=session)
            db.ledger.update_one({"_id": 1}, {"$set": {"n": 2}}, session=session)
        assert db.ledger.find_one({"_id": 1}) == {"_id": 1, "n": 2}
    finally:
        client.drop_database("shop_i15_tx")
        client.close()
    finals = [e for e in captured.final("mongo_tx")]
    outputs = [[d["name"] for d in e["outputs"]] for e in finals]
    inputs = [[d["name"] for d in e["inputs"]] for e in finals]
    assert ["shop_i15_tx.ledger"] in outputs  # the transaction: one run, both writes
    assert outputs.count(["shop_i15_tx.ledger"]) == 1
    assert ["shop_i15_tx.ledger"] in inputs  # the find_one after it: a run of its own
    assert all(e["eventType"] == "COMPLETE" for e in finals)
