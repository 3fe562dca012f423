"""The document backend's job edges (issues 16 and 31): one document per (job, dataset, io) in
``<collection>_edges``, dated by the least time an event states it (``first_seen``), joined by
every append, derived again by deletions (:mod:`lineage_sdk.collector.engine.forget`).

Lineage (plain and ``asOf``) walks those edges and must answer exactly what the events answer:
test_document_backend_answers.py compares every read of ``EngineStore(DocumentBackend(...))``
with the memory backend's; here, what is the document backend's own, against the real
SecantusDB (or MongoDB). The helpers here (a factory of engine stores on collections of their
own, the edges as stored, a command listener) serve the other test_document_*.py modules too.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nosql_events import records, run_event, uid
from pymongo import monitoring
from servers import MongoTarget
from test_as_of_indexed import DIRECTIONS, at_
from test_bounded import _corpus as bounded_corpus
from test_history import _corpus as history_corpus

from lineage_sdk.collector.backend import Rows, Touched
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.store import LineageRecord
from lineage_sdk.collector.stores.document_backend import DocumentBackend, _k
from lineage_sdk.collector.stores.memory import MemoryBackend

pytestmark = [pytest.mark.mongodb, pytest.mark.neo4j]


class Documents:
    """Engine stores over document backends, each on collections of its own (or on another
    store's: :meth:`again`), all dropped and closed at the end of the test."""

    def __init__(self, mongo: MongoTarget) -> None:
        self.connection = ConnectionConfig(uri=mongo.uri, database="lineage_tests", timeout_ms=5000)
        self._names: dict[int, str] = {}
        self._made: list[tuple[EngineStore, str]] = []

    def new(
        self,
        name: str | None = None,
        *,
        kind: type[DocumentBackend] = DocumentBackend,
        open_it: bool = True,
    ) -> EngineStore:
        """An engine store over a ``kind`` backend on the collections ``name`` (new ones when
        None), opened unless ``open_it`` is false."""
        name = name or f"d_{uid()}"
        store = EngineStore(kind(self.connection, collection_name=name))
        self._names[id(store)] = name
        self._made.append((store, name))
        if open_it:
            store.open()
        return store

    def again(self, store: EngineStore, *, kind: type[DocumentBackend] = DocumentBackend) -> Any:
        """A second store on ``store``'s collections, opened (as a restarted collector)."""
        return self.new(self.name(store), kind=kind)

    def name(self, store: EngineStore) -> str:
        return self._names[id(store)]

    def close(self) -> None:
        dropped: set[str] = set()
        for store, name in reversed(self._made):
            if name not in dropped:
                dropped.add(name)
                backend(store).drop()
            store.close()


@pytest.fixture
def documents(mongo: MongoTarget) -> Iterator[Documents]:
    made = Documents(mongo)
    try:
        yield made
    finally:
        made.close()


def memory(*batches: list[LineageRecord]) -> EngineStore:
    """The reference: the memory backend under the engine, fed ``batches``."""
    store = EngineStore(MemoryBackend())
    store.open()
    for batch in batches:
        store.write_batch(batch)
    return store


def _plan_stages(plan: Any) -> set[str]:
    """Every ``stage`` named anywhere in an explain() answer (mongod and SecantusDB shapes)."""
    if isinstance(plan, dict):
        found = {plan["stage"]} if isinstance(plan.get("stage"), str) else set()
        return found.union(*(_plan_stages(v) for v in plan.values()))
    if isinstance(plan, list):
        return set().union(*(_plan_stages(v) for v in plan))
    return set()


def backend(store: EngineStore) -> DocumentBackend:
    found = store.backend
    assert isinstance(found, DocumentBackend)
    return found


def collection(store: EngineStore, kind: str) -> Any:
    """The backend's collection of ``kind`` (events, mentions, edges, runs, columns, nodes)."""
    return backend(store)._coll(kind)


def edges_of(store: EngineStore) -> dict[tuple[str, ...], tuple[int, int | None]]:
    """The stored edges, (job ns, job, dataset ns, dataset, io) -> (first seen, declared), µs."""
    return {
        (*d["job"], *d["dataset"], d["io"]): (d["first_seen"], d.get("declared"))
        for d in collection(store, "edges").find({})
    }


def plain_answers(store: EngineStore, nodes: list[str]) -> dict[str, Any]:
    return {
        f"{node} {direction}": sorted(
            (n.id, sorted((e.origin, e.destination) for e in n.out_edges))
            for n in store.lineage(node, direction=direction, depth=20).nodes.values()
        )
        for node in nodes
        for direction in DIRECTIONS
    }


def _us(seconds: float) -> int:
    """``at_(seconds)`` in µs since the epoch, as the backend stores a time."""
    return int((at_(seconds) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1))


@pytest.mark.parametrize(
    "query",
    [
        # each hop of a walk, and the asOf test of a dataset, as the backend builds them (the
        # first $match: SecantusDB's tactics put a time bound in a second one)
        {"io": "in", "xj": {"$in": [_k("ns", "idx"), _k("ns", "other")]}},
        {"io": "out", "xd": {"$in": [_k("db", "in"), _k("db", "out")]}},
        {"io": "out", "xd": {"$in": [_k("db", "out")]}},
    ],
)
def test_every_edge_query_uses_an_index(documents: Documents, query: dict[str, Any]) -> None:
    store = documents.new()
    event = run_event(job="idx", namespace="ns", inputs=[("db", "in")], outputs=[("db", "out")])
    store.write_batch(records(event))
    assert len(list(collection(store, "edges").find(query))) == 1
    stages = _plan_stages(collection(store, "edges").find(query).explain())
    assert "IXSCAN" in stages and "COLLSCAN" not in stages, stages


def test_a_redelivered_batch_leaves_its_edges(documents: Documents) -> None:
    """A collector that stopped between inserting the events and upserting their edges: the
    batch comes again (to a restarted collector), every event a duplicate, and its edges are
    written."""
    store = documents.new()
    batch = records(*history_corpus())
    store.write_batch(batch)
    want = edges_of(store)
    assert want
    collection(store, "edges").delete_many({})
    again = documents.again(store)
    again.write_batch(batch)
    assert edges_of(again) == want


def test_an_edge_is_its_least_time_and_comes_back_after_a_deletion(documents: Documents) -> None:
    """A job's later run leaves its edge's time; an earlier one moves it back. Another
    collector's deletion of every event removes the edge, and the next event stating it writes
    it again, at that event's time."""
    store = documents.new()
    key = ("ns", "j", "ns", "d", "in")
    store.write_batch(records(run_event(job="j", inputs=[("ns", "d")], seconds=10)))
    assert edges_of(store) == {key: (_us(10), None)}
    store.write_batch(records(run_event(job="j", inputs=[("ns", "d")], seconds=20)))
    assert edges_of(store) == {key: (_us(10), None)}
    store.write_batch(records(run_event(job="j", inputs=[("ns", "d")], seconds=5)))
    assert edges_of(store) == {key: (_us(5), None)}  # an earlier time is written
    other = documents.again(store)
    events = [d["_id"] for d in collection(store, "events").find({}, {"_id": 1})]
    assert other.delete_events(events) == 3
    assert edges_of(store) == {}
    store.write_batch(records(run_event(job="j", inputs=[("ns", "d")], seconds=30)))
    assert edges_of(store) == {key: (_us(30), None)}
    assert store.lineage("job:ns:j", direction="upstream", depth=1).nodes.keys() == {
        "job:ns:j",
        "dataset:ns:d",
    }


def test_deletion_recomputes_the_edges(documents: Documents) -> None:
    """After a deletion every edge is the least time of the events that remain, and an edge no
    event states is gone: the edges equal a fresh store's fed the remaining events."""
    corpus = [*history_corpus(), *bounded_corpus()]
    batch = records(*corpus)
    for drop in (batch[::3], batch[1::2], batch[: len(batch) // 2], batch):
        store = documents.new()
        store.write_batch(batch)
        gone = {r.event_id for r in drop}
        assert store.delete_events(sorted(gone)) == len(gone)
        kept = [r for r in batch if r.event_id not in gone]
        fresh = documents.new()
        fresh.write_batch(kept)
        assert edges_of(store) == edges_of(fresh)
        assert store.delete_events(sorted(gone)) == 0


class Overtaken(DocumentBackend):
    """A backend whose deletion is overtaken by another collector: ``pending`` is written once
    by a second store on the same collections, ``when`` its ``replace`` (of the deletion's
    derived rows) runs: "before" it deletes the touched rows (the writer's rows are then
    deleted with the old ones, and the engine's re-read after ``replace`` must append them
    again), or "after" it (the writer's append joins what ``replace`` wrote)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pending: list[LineageRecord] = []
        self.when = "before"
        self.writer: EngineStore | None = None

    def _overtake(self) -> None:
        if self.pending and self.writer is not None:
            self.writer.write_batch(self.pending)
            self.pending = []

    def replace(self, touched: Touched, rows: Rows) -> None:
        if self.when == "before":
            self._overtake()
        super().replace(touched, rows)
        if self.when == "after":
            self._overtake()


def delete_overtaken(documents: Documents, when: str) -> EngineStore:
    """A store where job j read d at 10 s, whose event it then deleted while another collector
    wrote j reading d at 20 s (``when``: see :class:`Overtaken`)."""
    store = documents.new(kind=Overtaken)
    overtaken = store.backend
    assert isinstance(overtaken, Overtaken)
    old = records(run_event(job="j", inputs=[("ns", "d")], seconds=10))
    store.write_batch(old)
    overtaken.when = when
    overtaken.writer = documents.again(store)
    overtaken.pending = records(run_event(job="j", inputs=[("ns", "d")], seconds=20))
    assert store.delete_events([old[0].event_id]) == 1
    assert overtaken.pending == []  # the writer did overtake
    return store


@pytest.mark.parametrize("when", ["before", "after"])
def test_deletion_while_a_collector_writes_the_same_edge(documents: Documents, when: str) -> None:
    """A deletion's ``replace`` is no transaction: a writer's event of the same edge landing
    before it is appended again by the engine's re-read, one landing after it joins; either
    way the edge keeps the new event's time (and is not deleted while an event states it), and
    the job's run and nodes are the new event's."""
    store = delete_overtaken(documents, when)
    key = ("ns", "j", "ns", "d", "in")
    assert edges_of(store) == {key: (_us(20), None)}
    assert store.lineage("job:ns:j", direction="upstream", depth=1).nodes.keys() == {
        "job:ns:j",
        "dataset:ns:d",
    }
    (run,) = store.runs_of_job("ns", "j")
    assert run.state == "COMPLETE" and store.count_events() == 1
    assert store.has_node("DATASET", "ns", "d")


def test_writers_and_deleters_at_once_end_as_the_events_say(documents: Documents) -> None:
    """Threads writing and deleting events of shared edges: the edges end as a fresh store's
    fed the events that remain."""
    store = documents.new()
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
    deleter = documents.again(store)  # its own client, as another collector

    def write() -> None:
        for start in range(60, 120, 4):
            store.write_batch(batch[start : start + 4])

    def delete() -> None:
        for start in range(0, len(gone), 3):
            deleter.delete_events(gone[start : start + 3])

    threads = [threading.Thread(target=write), threading.Thread(target=delete)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    fresh = documents.new()
    fresh.write_batch([r for r in batch if r.event_id not in set(gone)])
    assert edges_of(store) == edges_of(fresh)


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


def listening(documents: Documents, store: EngineStore) -> tuple[_Commands, EngineStore]:
    """A listener, and a second store on ``store``'s collections whose client reports to it
    (pymongo's listeners join the clients created after them)."""
    listener = _Commands()
    monitoring.register(listener)
    return listener, documents.again(store)


def test_many_jobs_latest_runs_take_a_few_queries(documents: Documents) -> None:
    """A lineage answer's jobs get their latest runs (plain and ``asOf``) in a few queries
    however many jobs there are (one ``$in`` batch of jobs a query, on the runs' index; one or
    two per job once: ~1,000 round trips for a 1,000-node answer), and each is what that job's
    own events say, to the microsecond."""
    document_store = documents.new()
    jobs = [("a" if i % 2 else "b", f"j{i}") for i in range(600)]
    first = {job: str(uuid.uuid4()) for job in jobs}
    second = {job: str(uuid.uuid4()) for job in jobs}
    events = []
    for i, (ns, name) in enumerate(jobs):
        run: dict[str, Any] = {"job": name, "namespace": ns}
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
    listener, store = listening(documents, document_store)
    try:
        listener.on = True
        latest = store.latest_runs(jobs)
        plain = [n for n in listener.names if n in ("find", "aggregate")]
        plain_read = {c for c, _ in listener.filters}
        listener.names.clear()
        then = backend(store).runs(jobs=jobs, until=at_(25.0001), latest=1)
        as_of = [n for n in listener.names if n in ("find", "aggregate")]
        graph = store.lineage_as_of("job:a:j1", depth=0, as_of=at_(25))
        # (and, for their plans, the plain walk and the lookups of a job and a dataset)
        store.lineage("job:a:j1", depth=3)
        assert not store.has_node("JOB", "a", "nothing")
        assert not store.has_node("DATASET", "a", "nothing")
        listener.on = False
        # each opens on an index (a predicate beside the $in, and SecantusDB scans)
        db = collection(store, "events").database
        plans = {repr((c, f)): _plan_stages(db[c].find(f).explain()) for c, f in listener.filters}
    finally:
        listener.on = False
    for query, stages in plans.items():
        assert "IXSCAN" in stages and "COLLSCAN" not in stages, (query, stages)
    assert {job: run.run_id for job, run in latest.items()} == second
    assert {run.state for run in latest.values()} == {"START"}
    assert {r.job: r.run_id for r in then} == first
    assert {r.state.value for r in then} == {"COMPLETE"}
    assert graph.nodes["job:a:j1"].data["latestRun"]["runId"] == first[("a", "j1")]

    # the latest runs, plain and asOf: the runs a batch of jobs a query; no event is read
    def batches(n: int) -> int:
        return -(-n // backend(store).tactics.in_batch)

    assert len(plain) == len(as_of) == batches(601), (plain, as_of)
    assert plain_read == {f"{documents.name(store)}_runs"}
