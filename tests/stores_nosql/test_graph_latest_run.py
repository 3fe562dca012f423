"""The graph store's latest-run pointer (``Job.latestRunId``): kept by the writes in any order,
derived again by deletions and, for a database from before it, by ``open``; reads answer the
same whether they follow the pointer or pass over the job's runs (FalkorDB, or Neo4j)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from nosql_events import records, run_event

from lineage_sdk.collector.stores import graph as graph_store_module
from lineage_sdk.collector.stores.graph import Neo4jLineageStore

pytestmark = pytest.mark.neo4j

PARENT = "0190c000-0000-7000-8000-0000000000aa"
SHARED = "0190c000-0000-7000-8000-0000000000bb"
TIED = ("0190c000-0000-7000-8000-000000000002", "0190c000-0000-7000-8000-000000000001")


def _corpus() -> list[dict[str, Any]]:
    """Runs of one job out of time order, two runs ending at one instant (the least id is the
    latest), a child whose parent job has no event of its own (a placeholder run), a run id two
    jobs name, and a job that only ever ran once."""
    io = {"inputs": [("ns", "src")], "outputs": [("ns", "dst")]}
    return [
        run_event(job="a", event_type="START", seconds=30, **io),
        run_event(job="a", event_type="COMPLETE", seconds=10, **io),
        run_event(job="a", run_id=TIED[0], seconds=50, **io),
        run_event(job="a", run_id=TIED[1], event_type="START", seconds=40, **io),
        run_event(job="a", run_id=TIED[1], seconds=50, **io),
        run_event(job="child", seconds=5, parent=(PARENT, "ns", "orchestrator"), **io),
        run_event(job="b", run_id=SHARED, event_type="START", seconds=20),
        run_event(job="c", run_id=SHARED, seconds=25, outputs=[("ns", "c_out")]),
        run_event(job="once", seconds=1, outputs=[("ns", "once_out")]),
    ]


def _pointers(store: Neo4jLineageStore) -> dict[str, str | None]:
    rows = store.runner.run("MATCH (j:Job) RETURN j.name AS name, j.latestRunId AS ptr", None)
    return {r["name"]: r["ptr"] for r in rows}


def _picked(store: Neo4jLineageStore) -> dict[str, str]:
    """Each job's latest run by a pass over all its runs (what the pointer must equal)."""
    keys = [r["key"] for r in store.runner.run("MATCH (j:Job) RETURN j.key AS key", None)]
    rows = store.runner.run(graph_store_module._JOB_NAMES_AND_LATEST_RUNS["pick"], {"keys": keys})
    return {r["name"]: r["runId"] or "" for r in rows}


def _answers(store: Neo4jLineageStore) -> Any:
    jobs = [("ns", n) for n in ("a", "b", "c", "child", "orchestrator", "once")]
    lineage = store.lineage("dataset:ns:dst", direction="both", depth=5)
    return (
        store.latest_runs(jobs),
        {n.id: n.data.get("latestRun") for n in lineage.nodes.values()},
        [(j.name, j.latest_run) for j in store.jobs("ns")],
    )


def test_the_pointer_is_the_latest_of_every_run_whatever_the_order(
    graph_store: Neo4jLineageStore,
) -> None:
    events = _corpus()
    rnd = random.Random(5)
    newest_first = sorted(events, key=lambda e: e["eventTime"], reverse=True)
    splits: list[tuple[list[dict[str, Any]], list[int]]] = [
        (events, []),  # one batch
        (newest_first, list(range(1, len(events)))),  # one event a batch, the latest first
    ]
    for size in (1, 2, 3, 5):  # batches of any size, any order
        order = events[:]
        rnd.shuffle(order)
        splits.append((order, sorted(rnd.sample(range(1, len(order)), size))))
    reference = None
    for order, cuts in splits:
        graph_store.runner.run("MATCH (n) DETACH DELETE n", None)
        for batch in (order[i:j] for i, j in zip([0, *cuts], [*cuts, len(order)], strict=True)):
            graph_store.write_batch(records(*batch))
        pointers = _pointers(graph_store)
        assert pointers == _picked(graph_store), order
        assert pointers["a"] == TIED[1]  # the least id of the two ending at 50 s
        assert pointers["orchestrator"] == PARENT  # its only run, a placeholder
        assert reference is None or pointers == reference
        reference = pointers


def test_deletion_derives_the_pointer_again(graph_store: Neo4jLineageStore) -> None:
    graph_store.write_batch(records(*_corpus()))
    latest = _pointers(graph_store)["a"]
    ids = [
        r["id"]
        for r in graph_store.runner.run(
            "MATCH (e:Event {runId: $r}) RETURN e.eventId AS id", {"r": latest}
        )
    ]
    assert graph_store.delete_events(ids) == len(ids)
    pointers = _pointers(graph_store)
    assert pointers == _picked(graph_store)
    assert pointers["a"] == TIED[0]  # the other run ending at 50 s
    once = [
        r["id"]
        for r in graph_store.runner.run(
            "MATCH (x:Run)-[:INSTANCE_OF]->(:Job {name: 'once'}) "
            "MATCH (e:Event {runId: x.runId}) RETURN e.eventId AS id",
            None,
        )
    ]
    graph_store.delete_events(once)
    assert "once" not in _pointers(graph_store)  # the job went with its only event


def test_a_run_id_leaving_a_job_leaves_its_pointer(graph_store: Neo4jLineageStore) -> None:
    """Job d ran once on its own and last under a run id job e names too; deleting d's event of
    the shared run keeps the run (e's) but unlinks it from d: d's pointer is its own run again."""
    shared = "0190c000-0000-7000-8000-0000000000cc"
    own = run_event(job="d", seconds=1, outputs=[("ns", "d_out")])
    graph_store.write_batch(
        records(
            own,
            run_event(job="d", run_id=shared, seconds=9, outputs=[("ns", "d_out")]),
            run_event(job="e", run_id=shared, event_type="START", seconds=2),
        )
    )
    assert _pointers(graph_store)["d"] == shared
    (gone,) = graph_store.runner.run(
        "MATCH (e:Event {runId: $r}) WHERE e.eventTime > $t RETURN e.eventId AS id",
        {"r": shared, "t": "2025-03-01T12:00:05.000000Z"},
    )
    graph_store.delete_events([gone["id"]])
    pointers = _pointers(graph_store)
    assert pointers == _picked(graph_store)
    assert pointers["d"] == own["run"]["runId"] and pointers["e"] == shared


def test_a_database_from_before_the_pointer_reads_alike_and_open_derives_it(
    graph_store: Neo4jLineageStore,
) -> None:
    graph_store.write_batch(records(*_corpus()))
    before = _answers(graph_store)
    pointers = _pointers(graph_store)
    graph_store.runner.run("MATCH (j:Job) SET j.latestRunId = null", None)
    assert set(_pointers(graph_store).values()) == {None}
    assert _answers(graph_store) == before  # every read passes over the runs instead
    # a batch written meanwhile leaves an unknown pointer unknown (it cannot see every run)
    graph_store.write_batch(records(run_event(job="a", seconds=60)))
    assert _pointers(graph_store)["a"] is None
    graph_store.open()
    after = _pointers(graph_store)
    assert after == _picked(graph_store) and None not in after.values()
    assert after["a"] != pointers["a"]  # the run at 60 s
    assert graph_store.runner.run(graph_store_module._JOBS_WITHOUT_LATEST_RUN, {"limit": 10}) == []


def test_reads_follow_the_pointer(
    graph_store: Neo4jLineageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every pointer known, a lineage answer and ``latest_runs`` never pass over runs."""
    graph_store.write_batch(records(*_corpus()))
    picks = {
        graph_store_module._JOB_NAMES_AND_LATEST_RUNS["pick"],
        graph_store_module._LATEST_RUNS["pick"],
    }
    seen: list[str] = []
    real_run = graph_store.runner.run

    def run(query: str, params: Any = None) -> Any:
        seen.append(query)
        return real_run(query, params)

    monkeypatch.setattr(graph_store.runner, "run", run)
    real_transaction = graph_store.runner.transaction
    monkeypatch.setattr(
        graph_store.runner,
        "transaction",
        lambda work: real_transaction(
            lambda inner: work(lambda q, p=None: (seen.append(q), inner(q, p))[1])
        ),
    )
    answers = _answers(graph_store)
    assert answers[0][("ns", "a")].run_id == TIED[1]
    assert answers[1]["job:ns:a"]["runId"] == TIED[1]
    assert not picks & set(seen)
    assert graph_store_module._JOB_NAMES_AND_LATEST_RUNS["pointer"] in seen
