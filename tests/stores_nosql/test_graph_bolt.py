"""The graph store through the official neo4j driver over Bolt, against FalkorDB.

FalkorDB's Bolt layer crashes on parameters past ~4 KB and mangles quotes (see tests/servers.py),
so these tests keep to small, plain events and one event per batch; the full suite runs the same
store code through FalkorDBRespRunner, or through Bolt against a real Neo4j.
"""

from __future__ import annotations

import pytest
from nosql_events import records, run_event, uid

from lineage_sdk.collector.store import node_id
from lineage_sdk.collector.stores.graph import Neo4jRunner
from lineage_sdk.exceptions import StoreError

pytestmark = pytest.mark.neo4j


def test_bolt_store_detects_the_dialect_and_indexes(bolt_store):
    assert isinstance(bolt_store.runner, Neo4jRunner)
    assert bolt_store.dialect == "opencypher"  # FalkorDB has no dbms.components()
    labels = {
        r["label"] for r in bolt_store.runner.run("CALL db.indexes() YIELD label RETURN label")
    }
    assert {"Job", "Dataset", "Run", "Event"} <= labels


def test_bolt_writes_queries_and_idempotency(bolt_store):
    ns = f"b{uid()}"
    run = "0b0b0b0b-0000-4000-8000-000000000001"
    events = [
        run_event(job="j1", namespace=ns, inputs=[(ns, "d0")], outputs=[(ns, "d1")], seconds=1),
        run_event(job="j2", namespace=ns, inputs=[(ns, "d1")], outputs=[(ns, "d2")], seconds=2),
        run_event(
            job="j3", namespace=ns, run_id=run, event_type="START", inputs=[(ns, "d2")], seconds=3
        ),
        run_event(
            job="j3",
            namespace=ns,
            run_id=run,
            event_type="COMPLETE",
            outputs=[(ns, "d3")],
            seconds=4,
        ),
    ]
    for rec in records(*events, *reversed(events)):
        bolt_store.write_batch([rec])
    up = bolt_store.lineage(node_id("DATASET", ns, "d3"), direction="upstream", depth=3)
    assert {n.name for n in up.nodes.values() if n.type == "JOB"} == {"j1", "j2", "j3"}
    assert bolt_store.events_of_run(run) == events[2:]
    (summary,) = bolt_store.runs_of_job(ns, "j3")
    assert summary.state == "COMPLETE" and summary.run_id == run
    counts = bolt_store.runner.run(
        "MATCH (e:Event) WHERE e.runId = $r RETURN count(e) AS c", {"r": run}
    )
    assert counts == [{"c": 2}]


def test_bolt_statement_errors_become_store_errors(bolt_store):
    """A batch's statements run as one transaction; a failing one surfaces as the store's error."""
    with pytest.raises(StoreError) as caught:
        bolt_store.runner.run_all([("RETURN 1 AS ok", {}), ("THIS IS NOT CYPHER", {})])
    assert caught.value.store == "graph" and "Error" in str(caught.value)
    assert bolt_store.runner.run("RETURN $x AS x", {"x": 7}) == [{"x": 7}]  # still usable
