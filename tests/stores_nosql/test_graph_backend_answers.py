"""The engine over the graph backend answers every read as the sql store does (issue 31).

The same corpus and reads as test_backend_answers.py (the memory backend's), asked of
``EngineStore(GraphBackend(...))`` on FalkorDB through its Redis protocol, a graph of its own per
store, dropped afterwards (a smaller check runs over its Bolt endpoint). Written in order, shuffled in small batches, twice over in reverse, and after
deleting every third event, each answer must equal the sql store's (SQLite).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from nosql_events import records, run_event, uid
from servers import FalkorDBRespRunner, GraphTarget
from test_backend_answers import EVENTS, RECORDS, _written, answers

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.records import compute_event_id
from lineage_sdk.collector.store import node_id
from lineage_sdk.collector.stores.falkordb import FALKORDB
from lineage_sdk.collector.stores.graph import Neo4jLineageStore, Neo4jRunner
from lineage_sdk.collector.stores.graph_backend import GraphBackend

pytestmark = pytest.mark.mongodb  # make_store's fixtures start the session's servers

GraphFactory = Callable[[], EngineStore]


@pytest.fixture
def make_graph(graph_target: GraphTarget) -> Iterator[GraphFactory]:
    """``make_graph()``: an open graph backend on a FalkorDB graph of its own (Redis protocol),
    under the engine, dropped afterwards."""
    if graph_target.kind != "falkordb":
        pytest.skip("needs a graph per store (FalkorDB)")
    made: list[tuple[EngineStore, FalkorDBRespRunner]] = []

    def make() -> EngineStore:
        runner = graph_target.runner(f"gb_{uid()}")
        assert isinstance(runner, FalkorDBRespRunner)
        store = EngineStore(GraphBackend(runner=runner))
        store.open()
        made.append((store, runner))
        return store

    yield make
    for store, runner in made:
        runner.drop()
        store.close()


def _differ(got: dict[str, Any], reference: dict[str, Any]) -> str:
    keys = [k for k in reference if got.get(k) != reference[k]]
    return "\n".join(f"{k}:\n  graph {got.get(k)}\n  sql   {reference[k]}" for k in keys[:5])


@pytest.mark.parametrize("how", ["in order", "shuffled", "twice"])
def test_graph_answers_as_the_sql_store(
    make_store: Any, make_graph: GraphFactory, how: str
) -> None:
    reference = answers(_written(make_store("sqlite"), "in order"))
    store = make_graph()
    assert store.backend.tactics is FALKORDB  # type: ignore[attr-defined]  # the probe's pick
    got = answers(_written(store, how))
    assert got.keys() == reference.keys()
    assert got == reference, _differ(got, reference)


def test_graph_forgets_as_the_sql_store(make_store: Any, make_graph: GraphFactory) -> None:
    """After deleting every third event, each store answers as one fed the others only."""
    gone = [compute_event_id(e) for e in EVENTS[::3]]
    kept = [r for r in RECORDS if r.event_id not in set(gone)]
    reference = _written(make_store("sqlite"), "shuffled")
    assert reference.delete_events(gone) == len(gone)
    expected = answers(reference)
    store = _written(make_graph(), "shuffled")
    assert store.delete_events(gone) == len(gone)
    assert store.delete_events(gone) == 0
    got = answers(store)
    assert got == expected, _differ(got, expected)
    fresh = make_graph()
    fresh.write_batch(kept)
    assert answers(fresh) == got


@pytest.mark.neo4j
def test_graph_backend_over_bolt(make_store: Any, bolt_store: Neo4jLineageStore) -> None:
    """The same backend through the official neo4j driver over FalkorDB's Bolt endpoint. Its
    Bolt layer crashes on parameters past ~4 KB and mangles quotes (see tests/servers.py), so
    this writes small, plain events one per batch, on the session's one driver, and compares a
    few answers with the sql store's; the corpus above runs through the Redis protocol."""
    assert isinstance(bolt_store.runner, Neo4jRunner)
    backend = GraphBackend(runner=bolt_store.runner)
    backend.open()  # the driver is the session's: not closed here
    assert backend.tactics is FALKORDB  # the dialect probe, over Bolt
    ns = f"gb{uid()}"
    run = "0b0b0b0b-0000-4000-8000-00000000000b"
    events = [
        run_event(job="j1", namespace=ns, inputs=[(ns, "d0")], outputs=[(ns, "d1")], seconds=1),
        run_event(job="j2", namespace=ns, run_id=run, event_type="START", inputs=[(ns, "d1")],
                  seconds=2),
        run_event(job="j2", namespace=ns, run_id=run, event_type="COMPLETE",
                  outputs=[(ns, "d2")], seconds=3),
    ]  # fmt: skip
    graph, sql = EngineStore(backend), make_store("sqlite")
    for rec in records(*events, *reversed(events)):
        graph.write_batch([rec])
        sql.write_batch([rec])
    for store in (graph, sql):
        assert store.has_node("DATASET", ns, "d2")
    up = [
        s.lineage(node_id("DATASET", ns, "d2"), direction="upstream", depth=3) for s in (graph, sql)
    ]
    assert up[0].nodes.keys() == up[1].nodes.keys() and len(up[0].nodes) == 5
    assert graph.events_of_run(run) == sql.events_of_run(run) == events[1:]
    assert graph.runs_of_job(ns, "j2") == sql.runs_of_job(ns, "j2")
    assert graph.jobs(ns) == sql.jobs(ns)
    assert graph.delete_events([records(events[0])[0].event_id]) == 1
    assert not graph.has_node("JOB", ns, "j1") and graph.has_node("DATASET", ns, "d1")
