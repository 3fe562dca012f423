"""The lineage questions, asked identically of the engine over the document, graph and memory
backends."""

from __future__ import annotations

import pytest
from nosql_events import chain, records, run_event, uid

from lineage_sdk.collector.engine import Engine
from lineage_sdk.collector.store import node_id

pytestmark = [pytest.mark.mongodb, pytest.mark.neo4j]


def ids(graph, kind):
    return {n.name for n in graph.nodes.values() if n.type == kind}


def edges(graph):
    return {(e.origin, e.destination) for n in graph.nodes.values() for e in n.out_edges}


def test_stores_implement_the_query_protocol(query_store):
    assert isinstance(query_store, Engine)


def test_upstream_three_hops_returns_the_right_datasets_and_jobs(query_store):
    ns = f"ns-{uid()}"
    query_store.write_batch(records(*chain(ns, 5)))
    graph = query_store.lineage(node_id("DATASET", ns, "d5"), direction="upstream", depth=3)
    assert ids(graph, "JOB") == {"j5", "j4", "j3"}
    assert ids(graph, "DATASET") == {"d5", "d4", "d3", "d2"}
    d = lambda n: node_id("DATASET", ns, n)  # noqa: E731
    j = lambda n: node_id("JOB", ns, n)  # noqa: E731
    assert edges(graph) == {
        (d("d2"), j("j3")),
        (j("j3"), d("d3")),
        (d("d3"), j("j4")),
        (j("j4"), d("d4")),
        (d("d4"), j("j5")),
        (j("j5"), d("d5")),
    }
    deeper = query_store.lineage(node_id("DATASET", ns, "d5"), direction="upstream", depth=10)
    assert ids(deeper, "JOB") == {f"j{i}" for i in range(1, 6)}
    assert ids(deeper, "DATASET") == {f"d{i}" for i in range(0, 6)}


def test_downstream_and_job_roots(query_store):
    ns = f"ns-{uid()}"
    query_store.write_batch(records(*chain(ns, 4)))
    down = query_store.lineage(node_id("DATASET", ns, "d0"), direction="downstream", depth=2)
    assert ids(down, "JOB") == {"j1", "j2"}
    assert ids(down, "DATASET") == {"d0", "d1", "d2"}
    job0 = query_store.lineage(node_id("JOB", ns, "j2"), direction="upstream", depth=0)
    assert ids(job0, "JOB") == {"j2"} and ids(job0, "DATASET") == {"d1"}
    both = query_store.lineage(node_id("JOB", ns, "j2"), direction="both", depth=1)
    assert ids(both, "JOB") == {"j1", "j2", "j3"}
    assert ids(both, "DATASET") == {"d0", "d1", "d2", "d3"}
    unknown = query_store.lineage(node_id("DATASET", ns, "nothing"), depth=3)
    assert list(unknown.nodes) == [node_id("DATASET", ns, "nothing")]


def test_fan_in_and_cycles_terminate(query_store):
    ns = f"ns-{uid()}"
    events = [
        run_event(job="a", namespace=ns, inputs=[(ns, "x"), (ns, "y")], outputs=[(ns, "z")]),
        run_event(job="b", namespace=ns, inputs=[(ns, "z")], outputs=[(ns, "x")]),  # cycle
    ]
    query_store.write_batch(records(*events))
    graph = query_store.lineage(node_id("DATASET", ns, "z"), direction="upstream", depth=50)
    assert ids(graph, "JOB") == {"a", "b"}
    assert ids(graph, "DATASET") == {"x", "y", "z"}


def test_runs_of_job_and_events_of_run_converge_out_of_order(query_store):
    ns, run1, run2 = (
        f"ns-{uid()}",
        "11111111-1111-4111-8111-111111111111",
        "22222222-2222-4222-8222-222222222222",
    )
    start1 = run_event(job="job", namespace=ns, event_type="START", run_id=run1, seconds=0)
    running1 = run_event(job="job", namespace=ns, event_type="RUNNING", run_id=run1, seconds=30)
    done1 = run_event(job="job", namespace=ns, event_type="COMPLETE", run_id=run1, seconds=10)
    start2 = run_event(job="job", namespace=ns, event_type="START", run_id=run2, seconds=100)
    fail2 = run_event(job="job", namespace=ns, event_type="FAIL", run_id=run2, seconds=150)
    # COMPLETE before START, a late RUNNING after COMPLETE, and duplicates across batches.
    query_store.write_batch(records(done1, fail2))
    query_store.write_batch(records(start1, running1, done1))
    query_store.write_batch(records(start2, start1))
    runs = query_store.runs_of_job(ns, "job")
    assert [r.run_id for r in runs] == [run2, run1]  # most recent first
    r2, r1 = runs
    assert (r1.state, r2.state) == ("COMPLETE", "FAIL")  # terminal wins over a later RUNNING
    assert r1.started_at is not None and r1.started_at.isoformat().startswith("2025-03-01T12:00:00")
    assert r1.ended_at is not None and r1.ended_at.isoformat().startswith("2025-03-01T12:00:10")
    assert query_store.runs_of_job(ns, "job", limit=1)[0].run_id == run2
    assert query_store.events_of_run(run1) == [start1, done1, running1]  # event-time order, exact
    assert query_store.runs_of_job(ns, "other") == []
    assert query_store.events_of_run("33333333-3333-4333-8333-333333333333") == []


def test_parent_and_child_are_linked(query_store):
    ns, parent, child = (
        f"ns-{uid()}",
        "aaaaaaaa-0000-4000-8000-000000000001",
        "aaaaaaaa-0000-4000-8000-000000000002",
    )
    query_store.write_batch(
        records(
            run_event(job="child", namespace=ns, run_id=child, parent=(parent, ns, "parent")),
            run_event(job="parent", namespace=ns, run_id=parent, event_type="START"),
        )
    )
    (child_run,) = query_store.runs_of_job(ns, "child")
    assert child_run.parent_run_id == parent
    (parent_run,) = query_store.runs_of_job(ns, "parent")
    assert parent_run.run_id == parent and parent_run.state == "START"


def test_writes_are_idempotent(query_store):
    ns, run = f"ns-{uid()}", "bbbbbbbb-0000-4000-8000-000000000001"
    events = [
        run_event(job="j", namespace=ns, run_id=run, event_type=t, seconds=i, inputs=[(ns, "in")])
        for i, t in enumerate(["START", "COMPLETE"])
    ]
    query_store.write_batch(records(*events, *events))
    query_store.write_batch(records(*events))
    assert query_store.events_of_run(run) == events
    assert len(query_store.runs_of_job(ns, "j")) == 1


def test_bad_query_arguments_are_rejected(query_store):
    with pytest.raises(ValueError, match="node id"):
        query_store.lineage("nonsense")
    with pytest.raises(TypeError):
        query_store.runs_of_job({"$ne": None}, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        query_store.events_of_run({"$gt": ""})  # type: ignore[arg-type]
