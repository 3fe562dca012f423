"""The document backend's run rows (``<collection>_runs``, one per run and job): joined by the
writes in any order and by concurrent writers, derived again by deletions; ``latest_runs`` and
``runs_of_job`` answer from them what the memory backend answers, in one query of the runs
however many events the runs hold (SecantusDB, or a real mongod)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from nosql_events import records, run_event
from test_as_of_document import Documents, collection, documents, listening, memory
from test_graph_latest_run import PARENT, SHARED, TIED, _corpus

from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY

pytestmark = pytest.mark.mongodb
__all__ = ["documents"]  # the fixture, imported for the tests below

JOBS = [("ns", n) for n in ("a", "b", "c", "child", "orchestrator", "once", "nothing")]


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


def test_the_runs_are_the_fold_of_the_events_whatever_the_order(documents: Documents) -> None:
    """Batches alternate between two stores on the same collections (two collectors): neither
    knows what the other wrote, so the server's joins decide."""
    events = _corpus()
    reference = memory(records(*events))
    want = reference.latest_runs(JOBS)
    want_runs = {job: reference.runs_of_job(*job) for job in JOBS}
    previous = None
    for order, cuts in _splits(events):
        store = documents.new()
        other = documents.again(store)
        batches = (order[i:j] for i, j in zip([0, *cuts], [*cuts, len(order)], strict=True))
        for n, batch in enumerate(batches):
            (other if n % 2 else store).write_batch(records(*batch))
        latest = store.latest_runs(JOBS)
        assert latest == want, order
        assert {job: store.runs_of_job(*job) for job in JOBS} == want_runs, order
        assert latest[("ns", "a")].run_id == TIED[1]  # the least id of the two ending at 50 s
        assert latest[("ns", "c")].run_id == SHARED
        assert ("ns", "orchestrator") not in latest  # a parent named, never run
        assert latest[("ns", "child")].parent_run_id == PARENT
        assert previous is None or latest == previous
        previous = latest


def test_deletion_derives_the_runs_again(documents: Documents) -> None:
    store = documents.new()
    batch = records(*_corpus())
    store.write_batch(batch)
    latest = store.latest_runs(JOBS)[("ns", "a")].run_id

    def ids(query: dict[str, Any]) -> list[str]:
        return [d["_id"] for d in collection(store, "events").find(query, {"_id": 1})]

    # the latest run of a, whole: a's latest is the other run ending at 50 s
    gone = set(ids({"run_id": latest}))
    assert store.delete_events(sorted(gone)) == 2
    after = store.latest_runs(JOBS)
    assert after == memory([r for r in batch if r.event_id not in gone]).latest_runs(JOBS)
    assert after[("ns", "a")].run_id == TIED[0]
    # part of a run: the shared run loses c's COMPLETE, its row is b's START alone
    shared = ids({"run_id": SHARED, "event_type": "COMPLETE"})
    gone.update(shared)
    store.delete_events(shared)
    after = store.latest_runs(JOBS)
    assert after == memory([r for r in batch if r.event_id not in gone]).latest_runs(JOBS)
    assert after[("ns", "b")].state == "START" and ("ns", "c") not in after
    assert collection(store, "runs").count_documents({"run_id": latest}) == 0


def _stream(job: str, run_id: str, beats: int) -> list[dict[str, Any]]:
    """A streaming consumer's run: a START and ``beats`` RUNNING heartbeats, 30 s apart."""
    beat = {HEARTBEAT_FACET_KEY: {"_producer": "p", "_schemaURL": "s", "intervalS": 30}}
    events = [run_event(job=job, run_id=run_id, event_type="START", seconds=0)]
    events += [
        run_event(job=job, run_id=run_id, event_type="RUNNING", seconds=s, run_facets=beat)
        for s in range(30, 30 * beats + 1, 30)
    ]
    return events


def test_latest_runs_cost_one_query_however_many_heartbeats(documents: Documents) -> None:
    """A streaming consumer's run with 400 heartbeats: its job's latest run is read in one
    query of the runs, and no event is read."""
    run_id = "0190c000-0000-7000-8000-0000000000dd"
    events = _stream("stream", run_id, 400)
    document_store = documents.new()
    document_store.write_batch(records(*events))
    listener, store = listening(documents, document_store)
    try:
        listener.on = True
        latest = store.latest_runs([("ns", "stream")])
        listener.on = False
    finally:
        listener.on = False
    run = latest[("ns", "stream")]
    assert run.run_id == run_id and run.state == "RUNNING" and run.heartbeat_s == 30
    assert latest == memory(records(*events)).latest_runs([("ns", "stream")])
    assert len(listener.names) == 1 and listener.names[0] in ("find", "aggregate")
    assert {collection for collection, _ in listener.filters} == {f"{documents.name(store)}_runs"}


def test_runs_of_a_job_are_read_from_the_runs_and_equal_the_fold_of_its_events(
    documents: Documents,
) -> None:
    """Every page of every job's runs equals the memory backend's, a run two jobs name
    included: each job's run folds its own events only. Every page is one read of the runs,
    none of the events."""
    stream = "0190c000-0000-7000-8000-0000000000ee"
    batch = records(*_corpus(), *_stream("stream", stream, 200))
    document_store = documents.new()
    document_store.write_batch(batch)
    jobs = [*JOBS, ("ns", "stream")]
    shapes = [(100, 0), (1, 0), (1, 1), (2, 1), (5, 3)]
    listener, store = listening(documents, document_store)
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
    assert len(listener.names) == 1 and listener.names[0] in ("find", "aggregate")
    assert {collection for collection, _ in every_read} == {f"{documents.name(store)}_runs"}
    reference = memory(batch)
    folded = {
        (job, shape): reference.runs_of_job(*job, limit=shape[0], offset=shape[1])
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
