"""Whether a job or dataset is recorded, asked by its name (``has_node``): what each store's
``search`` would list, by one indexed lookup. The API asks it of every node without edges before
it answers 404; through ``search`` it read every name (minutes and gigabytes on a 200,000-event
document store) and missed a node among 1,000 others containing its name."""

from __future__ import annotations

import uuid

import pytest
from nosql_events import STORE_KINDS, StoreFactory, records, run_event

from lineage_sdk.collector.engine import Engine

pytestmark = [pytest.mark.mongodb, pytest.mark.neo4j]

STORES = STORE_KINDS


@pytest.mark.parametrize("kind", STORES)
def test_has_node_is_what_search_lists(make_store: StoreFactory, kind: str) -> None:
    store = make_store(kind)
    assert isinstance(store, Engine)
    parent_run = str(uuid.uuid4())
    events = [
        run_event(
            job="etl",
            namespace="ns",
            inputs=[("db", "in")],
            outputs=[("wh", "out")],
            parent=(parent_run, "ns", "orchestrator"),
        ),
        # 1,100 datasets containing "t" that sort before zz/t: search("t", limit=1000) lists
        # only those, so a lookup through search said zz/t is not recorded
        run_event(job="many", namespace="ns", outputs=[("aa", f"t{i:04d}") for i in range(1100)]),
        run_event(job="late", namespace="ns", outputs=[("zz", "t")]),
    ]
    store.write_batch(records(*events))
    recorded = [
        ("JOB", "ns", "etl"),
        ("JOB", "ns", "many"),
        ("DATASET", "db", "in"),
        ("DATASET", "wh", "out"),
        ("DATASET", "aa", "t0999"),
        ("DATASET", "zz", "t"),
    ]
    unknown = [
        ("JOB", "ns", "nothing"),
        ("JOB", "other", "etl"),  # the name in another namespace
        ("JOB", "db", "in"),  # a dataset's name asked as a job
        ("DATASET", "ns", "etl"),  # a job's name asked as a dataset
        ("DATASET", "db", "out"),  # one event names db/in and wh/out: not db/out
        ("DATASET", "wh", "in"),
        ("DATASET", "zz", "t0999"),
    ]
    for node in recorded:
        assert store.has_node(*node), node
    for node in unknown:
        assert not store.has_node(*node), node
    # A run's parent job is a job wherever search lists it, and has_node says the same.
    listed = ("JOB", "ns", "orchestrator") in store.search("orchestrator", limit=10)
    assert store.has_node("JOB", "ns", "orchestrator") is listed
    # the lookup is by exact name: not a substring, nor another case
    assert not store.has_node("DATASET", "zz", "T")
    assert not store.has_node("JOB", "ns", "et")
