"""The graph backend's latest run of each job: picked by the server from the job's Run vertices
(one statement, a subquery per job), right whatever order the events came in and after
deletions, and no read passes every run of the jobs back to the client; every answer is the
memory backend's (FalkorDB, or Neo4j)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from nosql_events import records, run_event

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.store import LineageRecord
from lineage_sdk.collector.stores import graph_backend as graph_backend_module
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.memory import MemoryBackend

pytestmark = pytest.mark.neo4j

PARENT = "0190c000-0000-7000-8000-0000000000aa"
SHARED = "0190c000-0000-7000-8000-0000000000bb"
TIED = ("0190c000-0000-7000-8000-000000000002", "0190c000-0000-7000-8000-000000000001")
JOBS = [("ns", n) for n in ("a", "b", "c", "child", "orchestrator", "once")]


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


def _backend(store: EngineStore) -> GraphBackend:
    backend = store.backend
    assert isinstance(backend, GraphBackend)
    return backend


def _memory(batch: list[LineageRecord]) -> EngineStore:
    store = EngineStore(MemoryBackend())
    store.open()
    store.write_batch(batch)
    return store


def _latest(store: EngineStore, jobs: list[tuple[str, str]] = JOBS) -> dict[str, str]:
    return {name: run.run_id for (_, name), run in store.latest_runs(jobs).items()}


def _answers(store: EngineStore) -> Any:
    lineage = store.lineage("dataset:ns:dst", direction="both", depth=5)
    return (
        store.latest_runs(JOBS),
        {n.id: n.data.get("latestRun") for n in lineage.nodes.values()},
        [(j.name, j.latest_run) for j in store.jobs("ns")],
    )


def _event_ids(store: EngineStore, where: str, params: dict[str, Any]) -> list[str]:
    query = f"MATCH (e:Event) WHERE {where} RETURN e.eventId AS id"
    return [r["id"] for r in _backend(store).runner.run(query, params)]


def test_the_latest_run_is_the_latest_of_every_run_whatever_the_order(
    graph_store: EngineStore,
) -> None:
    events = _corpus()
    want = _answers(_memory(records(*events)))
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
    for order, cuts in splits:
        _backend(graph_store).runner.run("MATCH (n) DETACH DELETE n", None)
        for batch in (order[i:j] for i, j in zip([0, *cuts], [*cuts, len(order)], strict=True)):
            graph_store.write_batch(records(*batch))
        assert _answers(graph_store) == want, order
        latest = _latest(graph_store)
        assert latest["a"] == TIED[1]  # the least id of the two ending at 50 s
        assert latest["c"] == SHARED and latest["child"] and "orchestrator" not in latest


def test_deletion_derives_the_latest_run_again(graph_store: EngineStore) -> None:
    batch = records(*_corpus())
    graph_store.write_batch(batch)
    latest = _latest(graph_store)["a"]
    gone = set(_event_ids(graph_store, "e.runId = $r", {"r": latest}))
    assert graph_store.delete_events(sorted(gone)) == len(gone) == 2
    assert _answers(graph_store) == _answers(_memory([r for r in batch if r.event_id not in gone]))
    assert _latest(graph_store)["a"] == TIED[0]  # the other run ending at 50 s
    once = _event_ids(graph_store, "e.jobName = $n", {"n": "once"})
    assert graph_store.delete_events(once) == 1
    assert "once" not in _latest(graph_store)  # the job went with its only event
    assert not graph_store.has_node("JOB", "ns", "once")


def test_a_run_id_leaving_a_job_leaves_its_latest_run(graph_store: EngineStore) -> None:
    """Job d ran once on its own and last under a run id job e names too; deleting d's event of
    the shared run keeps the run (e's) but takes it from d: d's latest is its own run again."""
    shared = "0190c000-0000-7000-8000-0000000000cc"
    own = run_event(job="d", seconds=1, outputs=[("ns", "d_out")])
    batch = records(
        own,
        run_event(job="d", run_id=shared, seconds=9, outputs=[("ns", "d_out")]),
        run_event(job="e", run_id=shared, event_type="START", seconds=2),
    )
    graph_store.write_batch(batch)
    jobs = [("ns", "d"), ("ns", "e")]
    assert _latest(graph_store, jobs)["d"] == shared
    (gone,) = _event_ids(graph_store, "e.runId = $r AND e.jobName = $n", {"r": shared, "n": "d"})
    graph_store.delete_events([gone])
    latest = _latest(graph_store, jobs)
    assert latest == _latest(_memory([r for r in batch if r.event_id != gone]), jobs)
    assert latest["d"] == own["run"]["runId"] and latest["e"] == shared


def test_reads_pick_the_latest_run_on_the_server(
    graph_store: EngineStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lineage answer, ``jobs`` and ``latest_runs`` ask the server for each job's latest run
    (one row a job): no statement returns every run of the jobs."""
    graph_store.write_batch(records(*_corpus()))
    every_run = {
        graph_backend_module._RUNS["jobs"],
        graph_backend_module._RUNS["jobs in"],
        graph_backend_module._RUNS["all"],
    }
    runner = _backend(graph_store).runner
    seen: list[str] = []
    real_run = runner.run

    def run(query: str, params: Any = None) -> Any:
        seen.append(query)
        return real_run(query, params)

    monkeypatch.setattr(runner, "run", run)
    real_transaction = runner.transaction

    def transaction(work: Any) -> Any:
        def seeing(inner: Any) -> Any:
            def ask(query: str, params: Any = None) -> Any:
                seen.append(query)
                return inner(query, params)

            return work(ask)

        return real_transaction(seeing)

    monkeypatch.setattr(runner, "transaction", transaction)
    answers = _answers(graph_store)
    assert answers[0][("ns", "a")].run_id == TIED[1]
    assert answers[1]["job:ns:a"]["runId"] == TIED[1]
    assert not every_run & set(seen)
    assert graph_backend_module._LATEST_RUNS[False] in seen
