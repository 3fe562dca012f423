"""The document store's job edges (issue 16): one document per (job, dataset, role) in
``<collection>_edges``, dated by the least time an event states it (``firstSeenUs``), kept by
the writes, recomputed by deletions, derived at open for a database from before them.

Lineage (plain and ``asOf``) walks those edges, and must answer exactly what the events answer:
test_as_of_indexed.py compares ``DocumentLineageStore.lineage_as_of`` with history's generic fold
of the raw events with the other stores'; here, what is the document store's own, against the
real SecantusDB (or MongoDB).
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from nosql_events import StoreFactory, records, run_event
from pymongo import monitoring
from test_as_of_indexed import (
    DIRECTIONS,
    _nodes,
    assert_indexed_is_generic,
    at_,
)
from test_bounded import _corpus as bounded_corpus
from test_bounded import _late_fan
from test_document_store import _plan_stages
from test_history import _corpus as history_corpus

from lineage_sdk.collector.stores.document import (
    _IN_BATCH,
    DocumentLineageStore,
    _doc_id,
    _far_name,
    _micros,
)

pytestmark = [pytest.mark.mongodb, pytest.mark.neo4j]


def edges_of(store: DocumentLineageStore) -> dict[tuple[str, ...], int]:
    """The stored edges, (job ns, job, dataset ns, dataset, role) -> firstSeenUs."""
    return {
        (d["jns"], d["jn"], d["dns"], d["dn"], d["role"]): d["firstSeenUs"]
        for d in store.edges.find({"jns": {"$exists": True}})
    }


def adjacency_of(store: DocumentLineageStore) -> dict[tuple[str, ...], int]:
    """The edges as ``<collection>_adjacency`` holds them, (job ns, job, dataset ns, dataset,
    role) -> firstSeenUs, after checking that the job's and the dataset's documents agree, that
    each document is a known node's, and that none is empty."""
    named = {
        d["_id"]: (d["kind"], d["ns"], d["n"])
        for d in store.nodes.find({"kind": {"$in": ["JOB", "DATASET"]}})
    }
    at_job: dict[tuple[str, ...], int] = {}
    at_dataset: dict[tuple[str, ...], int] = {}
    for doc in store.adjacency.find({"born": {"$exists": True}}):
        kind, ns, name = named[doc["_id"]]
        assert not doc.get("spilled")
        assert doc.get("input") or doc.get("output"), doc
        for role in ("input", "output"):
            for far, when in (doc.get(role) or {}).items():
                fns, fn = _far_name(far)
                if kind == "JOB":
                    at_job[(ns, name, fns, fn, role)] = when
                else:
                    at_dataset[(fns, fn, ns, name, role)] = when
    assert at_job == at_dataset
    return at_job


def reopened(store: DocumentLineageStore) -> DocumentLineageStore:
    """A second store object on the same collections, opened (as a restarted collector)."""
    again = DocumentLineageStore(store._connection, store._collection_name)
    again.open()
    return again


def plain_answers(store: DocumentLineageStore, nodes: list[str]) -> dict[str, Any]:
    return {
        f"{node} {direction}": sorted(
            (n.id, sorted((e.origin, e.destination) for e in n.out_edges))
            for n in store.lineage(node, direction=direction, depth=20).nodes.values()
        )
        for node in nodes
        for direction in DIRECTIONS
    }


@pytest.mark.parametrize(
    "query",
    [
        # each hop of a walk, and the asOf test of a dataset, exactly as the store builds them
        {"jns": "ns", "role": "input", "jn": {"$in": ["idx", "other"]}},
        {"dns": "db", "role": "output", "dn": {"$in": ["in", "out"]}},
        {"dns": "db", "role": "output", "dn": "out"},
    ],
)
def test_every_edge_query_uses_an_index(
    document_store: DocumentLineageStore, query: dict[str, Any]
) -> None:
    event = run_event(job="idx", namespace="ns", inputs=[("db", "in")], outputs=[("db", "out")])
    document_store.write_batch(records(event))
    stages = _plan_stages(document_store.edges.find(query).explain())
    assert "IXSCAN" in stages and "COLLSCAN" not in stages, stages


def test_a_redelivered_batch_leaves_its_edges(document_store: DocumentLineageStore) -> None:
    """A collector that stopped between inserting the events and upserting their edges: the
    batch comes again (to a restarted collector), every event a duplicate, and its edges are
    written."""
    batch = records(*history_corpus())
    document_store.write_batch(batch)
    want = edges_of(document_store)
    assert want
    document_store.edges.delete_many({"jns": {"$exists": True}})
    again = reopened(document_store)
    try:
        again.write_batch(batch)
        assert edges_of(again) == want
    finally:
        again.close()


def test_known_edges_are_not_written_again_until_a_deletion(make_store: StoreFactory) -> None:
    """A job's next run restates its edges: a store skips those it wrote at that time or
    earlier. Another collector's deletion empties that cache: an edge it removed is written
    again by the next event stating it."""
    store = make_store("document")
    key = ("ns", "j", "ns", "d", "input")
    first = records(run_event(job="j", inputs=[("ns", "d")], seconds=10))
    store.write_batch(first)
    version = store.edges.find_one({"_id": _doc_id(key)})["v"]
    store.write_batch(records(run_event(job="j", inputs=[("ns", "d")], seconds=20)))
    assert store.edges.find_one({"_id": _doc_id(key)})["v"] == version  # not written
    store.write_batch(records(run_event(job="j", inputs=[("ns", "d")], seconds=5)))
    assert edges_of(store)[key] == _micros(at_(5))  # an earlier time is written
    other = reopened(store)
    try:
        events = [d["_id"] for d in store.collection.find({}, {"_id": 1})]
        other.delete_events(events)
        assert edges_of(store) == {}
        other.edges.update_one({"_id": "deletions"}, {"$set": {"until": at_(0)}})  # lease over
        store.write_batch(records(run_event(job="j", inputs=[("ns", "d")], seconds=30)))
        assert edges_of(store) == {key: _micros(at_(30))}
    finally:
        other.close()


def test_an_older_database_gets_its_edges_at_open(make_store: StoreFactory) -> None:
    """Events without edges (a database from before them): open derives them, exactly; a
    backfill stopped halfway resumes; until it is done lineage_as_of leaves asOf to the
    generic path."""
    store = make_store("document")
    corpus = [*history_corpus(), *bounded_corpus(), *_late_fan()]
    store.write_batch(records(*corpus))
    nodes = _nodes(corpus)
    want_edges = edges_of(store)
    want = plain_answers(store, nodes)
    store.edges.drop()
    assert store.lineage_as_of("dataset:ns:d1", as_of=at_(25)) is None
    again = reopened(store)
    try:
        assert edges_of(again) == want_edges == adjacency_of(again)
        assert plain_answers(again, nodes) == want
        times = [0, 11, 30.5, 40, 1000]
        assert assert_indexed_is_generic(again, nodes[::3], times, [(20, None), (2, 3)]) > 100
    finally:
        again.close()
    # a backfill 10 events at a time derives the same
    store.edges.drop()
    store._backfill(store.edges, store._edges_of_docs, batch_size=10)
    assert edges_of(store) == want_edges
    # one stopped after the first 10 events (in _id order) goes on from there at the next open
    store.edges.drop()
    ids = sorted(d["_id"] for d in store.collection.find({}, {"_id": 1}))
    store.edges.insert_one({"_id": "backfill", "done": False, "after": ids[9]})
    assert store.lineage_as_of("dataset:ns:d1", as_of=at_(25)) is None
    resumed = reopened(store)
    try:
        rest = make_store("document")
        rest.write_batch([r for r in records(*corpus) if r.event_id > ids[9]])
        assert edges_of(resumed) == edges_of(rest) != want_edges
        assert resumed.lineage_as_of("dataset:ns:d1", as_of=at_(25)) is not None
    finally:
        resumed.close()


def test_deletion_recomputes_the_edges(make_store: StoreFactory) -> None:
    """After a deletion every edge is the least time of the events that remain, and an edge no
    event states is gone: the edges equal a fresh store's fed the remaining events."""
    corpus = [*history_corpus(), *bounded_corpus()]
    batch = records(*corpus)
    for drop in (batch[::3], batch[1::2], batch[: len(batch) // 2], batch):
        store = make_store("document")
        store.write_batch(batch)
        gone = {r.event_id for r in drop}
        assert store.delete_events(sorted(gone)) == len(gone)
        kept = [r for r in batch if r.event_id not in gone]
        fresh = make_store("document")
        fresh.write_batch(kept)
        assert edges_of(store) == edges_of(fresh) == adjacency_of(store)
        assert store.delete_events(sorted(gone)) == 0


class Overtaking(DocumentLineageStore):
    """A store whose deletion is overtaken by another collector: :meth:`overtake`, called by a
    subclass where the race is to happen, writes the events in ``pending`` once."""

    pending: list[Any]

    def overtake(self) -> None:
        if self.pending:
            writer = DocumentLineageStore(self._connection, self._collection_name)
            writer.write_batch(self.pending)
            writer.close()
            self.pending = []


def delete_overtaken(make_store: StoreFactory, kind: type[Overtaking]) -> Overtaking:
    """A store of ``kind`` (open: the caller closes it) where job j read d at 10 s, whose event
    it then deleted while another collector wrote j reading d at 20 s."""
    base = make_store("document")
    store = kind(base._connection, base._collection_name)
    store.open()
    old = records(run_event(job="j", inputs=[("ns", "d")], seconds=10))
    store.write_batch(old)
    store.pending = records(run_event(job="j", inputs=[("ns", "d")], seconds=20))
    assert store.delete_events([old[0].event_id]) == 1
    return store


class _Interleaved(Overtaking):
    """Overtaken between reading an edge's version and setting it."""

    def _least_times(self, job: tuple[str, str], wanted: set[Any]) -> dict[Any, int]:
        found = super()._least_times(job, wanted)
        self.overtake()
        return found


def test_deletion_while_a_collector_writes_the_same_edge(make_store: StoreFactory) -> None:
    """The compare-and-set on the edge's version: the recomputation that missed the new event
    is refused and done again, so the edge keeps the new event's time (without it, the edge
    would be deleted while an event states it)."""
    store = delete_overtaken(make_store, _Interleaved)
    try:
        assert edges_of(store) == {("ns", "j", "ns", "d", "input"): _micros(at_(20))}
        assert adjacency_of(store) == edges_of(store)
        doc = store.edges.find_one({"_id": _doc_id(("ns", "j", "ns", "d", "input"))})
        assert doc is not None and doc["v"] >= 3  # written, overtaken, recomputed
    finally:
        store.close()


def test_writers_and_deleters_at_once_end_as_the_events_say(make_store: StoreFactory) -> None:
    """Threads writing and deleting events of shared edges: the edges end as a fresh store's
    fed the events that remain."""
    store = make_store("document")
    events = [
        run_event(
            job=f"j{i % 3}",
            inputs=[("ns", f"d{i % 4}")],
            outputs=[("ns", f"o{i % 5}")],
            seconds=i,
        )
        for i in range(120)
    ]
    batch = records(*events)
    store.write_batch(batch[:60])
    gone = [r.event_id for r in batch[:60:2]]

    def write() -> None:
        for start in range(60, 120, 4):
            store.write_batch(batch[start : start + 4])

    def delete() -> None:
        for start in range(0, len(gone), 3):
            store.delete_events(gone[start : start + 3])

    threads = [threading.Thread(target=write), threading.Thread(target=delete)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    fresh = make_store("document")
    fresh.write_batch([r for r in batch if r.event_id not in set(gone)])
    assert edges_of(store) == edges_of(fresh) == adjacency_of(store)


class _Commands(monitoring.CommandListener):
    """The names of the commands sent while ``on``, and the filters that open the reads
    (pymongo's listeners are process-wide)."""

    def __init__(self) -> None:
        self.on = False
        self.names: list[str] = []
        self.filters: list[tuple[str, dict[str, Any]]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self.on:
            self.names.append(event.command_name)
            name, command = event.command_name, event.command
            if name == "find":
                self.filters.append((command["find"], dict(command["filter"])))
            elif name == "aggregate" and "$match" in command["pipeline"][0]:
                self.filters.append((command["aggregate"], dict(command["pipeline"][0]["$match"])))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


def test_many_jobs_latest_runs_take_a_few_queries(document_store: DocumentLineageStore) -> None:
    """A lineage answer's jobs get their latest runs (plain and ``asOf``) in a few queries
    however many jobs there are (one or two per job before: ~1,000 round trips for a 1,000-node
    answer), and each is what that job's own events say, to the microsecond."""
    jobs = [("a" if i % 2 else "b", f"j{i}") for i in range(600)]
    first = {job: str(uuid.uuid4()) for job in jobs}
    second = {job: str(uuid.uuid4()) for job in jobs}
    events = []
    for i, (ns, name) in enumerate(jobs):
        run = {"job": name, "namespace": ns}
        events += [
            run_event(**run, event_type="START", run_id=first[(ns, name)], seconds=10),
            run_event(**run, event_type="COMPLETE", run_id=first[(ns, name)], seconds=20),
            run_event(**run, event_type="START", run_id=second[(ns, name)], seconds=30 + i),
        ]
    # "late" starts a second run in the millisecond of the asOf below, but after it: as of
    # then, its latest run is still the first (asked again, strictly before that millisecond)
    late = ("a", "late")
    first[late], second[late] = str(uuid.uuid4()), str(uuid.uuid4())
    events += [
        run_event(job="late", namespace="a", event_type="COMPLETE", run_id=first[late], seconds=20),
        run_event(
            job="late", namespace="a", event_type="START", run_id=second[late], seconds=25.0008
        ),
    ]
    jobs.append(late)
    document_store.write_batch(records(*events))
    listener = _Commands()
    monitoring.register(listener)
    store = reopened(document_store)  # a client created after the listener: it reports
    try:
        listener.on = True
        latest = store.latest_runs(jobs)
        plain = [n for n in listener.names if n in ("find", "aggregate")]
        listener.names.clear()
        then = store._latest_runs_as_of(jobs, at_(25.0001))
        as_of = [n for n in listener.names if n in ("find", "aggregate")]
        graph = store.lineage_as_of("job:a:j1", depth=0, as_of=at_(25))
        # (and, for their plans, the plain walk and the lookups of a job and a dataset)
        store.lineage("job:a:j1", depth=3)
        assert not store.has_node("JOB", "a", "nothing")
        assert not store.has_node("DATASET", "a", "nothing")
        listener.on = False
        # each opens on an index: one predicate beside the $in, and SecantusDB scans
        db = store.collection.database
        plans = {repr((c, f)): _plan_stages(db[c].find(f).explain()) for c, f in listener.filters}
    finally:
        listener.on = False
        store.close()
    for query, stages in plans.items():
        assert "IXSCAN" in stages and "COLLSCAN" not in stages, (query, stages)
    assert {job: run.run_id for job, run in latest.items()} == second
    assert {run.state for run in latest.values()} == {"START"}
    assert {job: run["runId"] for job, run in then.items()} == first
    assert {run["state"] for run in then.values()} == {"COMPLETE"}
    assert (
        graph is not None
        and graph.nodes["job:a:j1"].data["latestRun"]["runId"] == first[("a", "j1")]
    )

    # the latest runs: whether the runs and the pointers are derived (a find each), then the
    # pointers a batch of jobs a find, the runs' summaries a batch of runs a find; asOf:
    # whether the runs are derived, then per namespace the jobs' runs a batch of jobs a find
    # (301 in a, 300 in b); every run by then is whole, so no event is read
    def batches(n: int) -> int:
        return -(-n // _IN_BATCH)

    assert plain == ["find"] * (2 + batches(601) + batches(601))
    assert as_of == ["find"] * (1 + batches(301) + batches(300))
