"""The engine over the graph backend through the official neo4j driver over Bolt, against
FalkorDB.

FalkorDB's Bolt layer crashes on parameters past ~4 KB and mangles quotes (see tests/servers.py),
so these tests keep to small, plain events and one event per batch; the full suite runs the same
backend code through FalkorDBRespRunner, or through Bolt against a real Neo4j. ``bolt_store`` is
the session's one ``EngineStore(GraphBackend(...))`` over Bolt.
"""

from __future__ import annotations

import pytest
from nosql_events import records, run_event, uid

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.store import node_id
from lineage_sdk.collector.stores.falkordb import FALKORDB
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.graph_runner import Neo4jRunner
from lineage_sdk.exceptions import StoreError

pytestmark = pytest.mark.neo4j


def _backend(store: EngineStore) -> GraphBackend:
    backend = store.backend
    assert isinstance(backend, GraphBackend)
    return backend


def test_bolt_store_detects_the_dialect_and_indexes(bolt_store: EngineStore) -> None:
    backend = _backend(bolt_store)
    assert isinstance(backend.runner, Neo4jRunner)
    assert backend.tactics is FALKORDB  # FalkorDB has no dbms.components(): openCypher's tactics
    labels = {r["label"] for r in backend.runner.run("CALL db.indexes() YIELD label RETURN label")}
    assert {"Job", "Dataset", "Run", "Event", "ColumnEdge", "Mention"} <= labels


def test_bolt_writes_queries_and_idempotency(bolt_store: EngineStore) -> None:
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
    counts = _backend(bolt_store).runner.run(
        "MATCH (e:Event) WHERE e.runId = $r RETURN count(e) AS c", {"r": run}
    )
    assert counts == [{"c": 2}]


def test_bolt_statement_errors_become_store_errors(bolt_store: EngineStore) -> None:
    """A batch's statements run as one transaction; a failing one surfaces as the store's error."""
    runner = _backend(bolt_store).runner
    with pytest.raises(StoreError) as caught:
        runner.run_all([("RETURN 1 AS ok", {}), ("THIS IS NOT CYPHER", {})])
    assert caught.value.store == "graph" and "Error" in str(caught.value)
    assert runner.run("RETURN $x AS x", {"x": 7}) == [{"x": 7}]  # still usable
