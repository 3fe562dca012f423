"""The document store's run summaries (``<collection>_runs``) and jobs' latest-run pointers
(``<collection>_latest``): kept by the writes in any order, derived again by deletions and, for a
database from before them, by ``open``; ``latest_runs`` answers from them what the events' fold
answers, in a few queries however many events the runs hold (SecantusDB, or a real mongod)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from nosql_events import records, run_event
from pymongo import monitoring
from test_as_of_document import _Commands, reopened
from test_graph_latest_run import PARENT, SHARED, TIED, _corpus

from lineage_sdk.collector.stores.document import DocumentLineageStore
from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY

pytestmark = pytest.mark.mongodb

JOBS = [("ns", n) for n in ("a", "b", "c", "child", "orchestrator", "once", "nothing")]


def _from_events(store: DocumentLineageStore) -> dict[Any, Any]:
    return store._latest_runs_from_events(JOBS)


def _splits(events: list[dict[str, Any]]) -> list[tuple[list[dict[str, Any]], list[int]]]:
    """One batch; one event a batch, the latest first; random orders in batches of any size."""
    rnd = random.Random(3)
    newest_first = sorted(events, key=lambda e: e["eventTime"], reverse=True)
    out = [(events, []), (newest_first, list(range(1, len(events))))]
    for size in (1, 2, 4):
        order = events[:]
        rnd.shuffle(order)
        out.append((order, sorted(rnd.sample(range(1, len(order)), size))))
    return out


def test_the_summaries_and_pointers_are_the_fold_of_the_events_whatever_the_order(
    document_store: DocumentLineageStore,
) -> None:
    """Batches alternate between two store objects on the same collections (two collectors):
    neither knows what the other wrote, so the server's compare decides."""
    events = _corpus()
    reference = None
    for order, cuts in _splits(events):
        document_store.drop()
        document_store.open()
        other = reopened(document_store)
        batches = (order[i:j] for i, j in zip([0, *cuts], [*cuts, len(order)], strict=True))
        for n, batch in enumerate(batches):
            (other if n % 2 else document_store).write_batch(records(*batch))
        other.close()
        latest = document_store.latest_runs(JOBS)
        assert latest == _from_events(document_store), order
        assert latest[("ns", "a")].run_id == TIED[1]  # the least id of the two ending at 50 s
        assert latest[("ns", "c")].run_id == SHARED
        assert ("ns", "orchestrator") not in latest  # a parent named, never run
        assert latest[("ns", "child")].parent_run_id == PARENT
        assert reference is None or latest == reference
        reference = latest


def test_deletion_derives_summaries_and_pointers_again(
    document_store: DocumentLineageStore,
) -> None:
    document_store.write_batch(records(*_corpus()))
    latest = document_store.latest_runs(JOBS)[("ns", "a")].run_id

    def ids(query: dict[str, Any]) -> list[str]:
        return [d["_id"] for d in document_store.collection.find(query, {"_id": 1})]

    # the latest run of a, whole: its pointer moves to the other run ending at 50 s
    assert document_store.delete_events(ids({"runId": latest})) == 2
    after = document_store.latest_runs(JOBS)
    assert after == _from_events(document_store)
    assert after[("ns", "a")].run_id == TIED[0]
    # part of a run: the shared run loses c's COMPLETE, its summary is b's START alone
    document_store.delete_events(ids({"runId": SHARED, "eventType": "COMPLETE"}))
    after = document_store.latest_runs(JOBS)
    assert after == _from_events(document_store)
    assert after[("ns", "b")].state == "START" and ("ns", "c") not in after
    assert document_store.runs.count_documents({"run": latest}) == 0


def test_a_database_from_before_them_answers_alike_and_open_derives_them(
    document_store: DocumentLineageStore,
) -> None:
    document_store.write_batch(records(*_corpus()))
    before = document_store.latest_runs(JOBS)
    document_store.runs.drop()
    document_store.latest.drop()
    assert document_store.latest_runs(JOBS) == before  # folded from the events meanwhile
    store = reopened(document_store)
    try:
        assert store._ready(store.runs) and store._ready(store.latest)
        assert store.latest_runs(JOBS) == before
        assert store.runs.count_documents({"run": {"$exists": True}}) == 9 - 2  # 7 runs
    finally:
        store.close()


def test_latest_runs_cost_a_few_queries_however_many_heartbeats(
    document_store: DocumentLineageStore,
) -> None:
    """A streaming consumer's run with 400 heartbeats: its job's latest run is read in four
    queries (two readiness markers, the pointer, the summary), and no event is read."""
    run_id = "0190c000-0000-7000-8000-0000000000dd"
    beat = {HEARTBEAT_FACET_KEY: {"_producer": "p", "_schemaURL": "s", "intervalS": 30}}
    events = [run_event(job="stream", run_id=run_id, event_type="START", seconds=0)]
    events += [
        run_event(job="stream", run_id=run_id, event_type="RUNNING", seconds=s, run_facets=beat)
        for s in range(30, 12_001, 30)
    ]
    document_store.write_batch(records(*events))
    listener = _Commands()
    monitoring.register(listener)
    store = reopened(document_store)
    try:
        listener.on = True
        latest = store.latest_runs([("ns", "stream")])
        listener.on = False
    finally:
        listener.on = False
        store.close()
    run = latest[("ns", "stream")]
    assert run.run_id == run_id and run.state == "RUNNING" and run.heartbeat_s == 30
    assert run == document_store._latest_runs_from_events([("ns", "stream")])[("ns", "stream")]
    assert listener.names == ["find"] * 4
    assert {collection for collection, _ in listener.filters} == {
        f"{document_store._collection_name}_runs",
        f"{document_store._collection_name}_latest",
    }


def _stream(job: str, run_id: str, beats: int) -> list[dict[str, Any]]:
    """A streaming consumer's run: a START and ``beats`` RUNNING heartbeats, 30 s apart."""
    beat = {HEARTBEAT_FACET_KEY: {"_producer": "p", "_schemaURL": "s", "intervalS": 30}}
    events = [run_event(job=job, run_id=run_id, event_type="START", seconds=0)]
    events += [
        run_event(job=job, run_id=run_id, event_type="RUNNING", seconds=s, run_facets=beat)
        for s in range(30, 30 * beats + 1, 30)
    ]
    return events


def test_runs_of_a_job_are_read_from_summaries_and_equal_the_fold_of_its_events(
    document_store: DocumentLineageStore,
) -> None:
    """Every page of every job's runs equals the fold of the job's events (a database whose
    summaries are not derived yet), a run two jobs name included: each job's run folds its own
    events only. A job whose runs no other job names is read without touching the events."""
    stream = "0190c000-0000-7000-8000-0000000000ee"
    document_store.write_batch(records(*_corpus(), *_stream("stream", stream, 200)))
    jobs = [*JOBS, ("ns", "stream")]
    shapes = [(100, 0), (1, 0), (1, 1), (2, 1), (5, 3)]
    listener = _Commands()
    monitoring.register(listener)
    store = reopened(document_store)  # a client sees the listeners registered before it
    try:
        listener.on = True
        summed = {
            (job, shape): store.runs_of_job(*job, limit=shape[0], offset=shape[1])
            for job in jobs
            for shape in shapes
        }
        listener.on = False
        every_read = listener.filters[:]
        listener.names.clear()
        listener.filters.clear()
        listener.on = True
        store.runs_of_job("ns", "stream")
        listener.on = False
    finally:
        listener.on = False
        store.close()
    assert listener.names == ["find", "find"]  # the readiness marker and the job's runs
    assert {collection for collection, _ in every_read} == {
        f"{document_store._collection_name}_runs",
        document_store._collection_name,  # the shared run's events, for b and c alone
    }
    document_store.runs.drop()  # as a database from before the summaries reads them
    folded = {
        (job, shape): document_store.runs_of_job(*job, limit=shape[0], offset=shape[1])
        for job in jobs
        for shape in shapes
    }
    for key, page in summed.items():
        assert list(page) == list(folded[key]) and page.total == folded[key].total, key
    (b_run,), (c_run,) = summed[(("ns", "b"), (100, 0))], summed[(("ns", "c"), (100, 0))]
    assert b_run.run_id == c_run.run_id == SHARED
    assert (b_run.state, c_run.state) == ("START", "COMPLETE")  # not the whole run's summary
    a_runs = summed[(("ns", "a"), (100, 0))]
    assert len(a_runs) == a_runs.total == 4
    assert [r.run_id for r in summed[(("ns", "a"), (1, 1))]] == [a_runs[1].run_id]
    (streaming,) = summed[(("ns", "stream"), (100, 0))]
    assert (streaming.run_id, streaming.state, streaming.heartbeat_s) == (stream, "RUNNING", 30)
    assert (
        summed[(("ns", "nothing"), (100, 0))] == []
        and summed[(("ns", "nothing"), (100, 0))].total == 0
    )
