"""The engine over the graph backend answers every read as the memory backend does (issue 31).

The same corpus and reads as test_backend_answers.py (the memory backend's), asked of
``EngineStore(GraphBackend(...))`` on FalkorDB through its Redis protocol, a graph of its own per
store, dropped afterwards (a smaller check runs over its Bolt endpoint). Written in order, shuffled in small batches, twice over in reverse, and after
deleting every third event, each answer must equal the memory backend's under the engine
(``EngineStore(MemoryBackend())``, the reference every backend is held to).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from nosql_events import BASE_TIME, records, run_event, uid
from servers import FalkorDBRespRunner, GraphTarget
from test_backend_answers import EVENTS, RECORDS, _written, answers

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.records import MICROSECOND, compute_event_id
from lineage_sdk.collector.store import node_id
from lineage_sdk.collector.stores.falkordb import FALKORDB
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.graph_runner import Neo4jRunner
from lineage_sdk.collector.stores.memory import MemoryBackend

pytestmark = pytest.mark.neo4j

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


def _memory() -> EngineStore:
    """The reference: a fresh, open engine store over the memory backend."""
    store = EngineStore(MemoryBackend())
    store.open()
    return store


def _differ(got: dict[str, Any], reference: dict[str, Any]) -> str:
    keys = [k for k in reference if got.get(k) != reference[k]]
    return "\n".join(f"{k}:\n  graph  {got.get(k)}\n  memory {reference[k]}" for k in keys[:5])


@pytest.mark.parametrize("how", ["in order", "shuffled", "twice"])
def test_graph_answers_as_the_memory_backend(make_graph: GraphFactory, how: str) -> None:
    reference = answers(_written(_memory(), "in order"))
    store = make_graph()
    assert store.backend.tactics is FALKORDB  # type: ignore[attr-defined]  # the probe's pick
    got = answers(_written(store, how))
    assert got.keys() == reference.keys()
    assert got == reference, _differ(got, reference)


def test_graph_forgets_as_the_memory_backend(make_graph: GraphFactory) -> None:
    """After deleting every third event, each store answers as one fed the others only."""
    gone = [compute_event_id(e) for e in EVENTS[::3]]
    kept = [r for r in RECORDS if r.event_id not in set(gone)]
    reference = _written(_memory(), "shuffled")
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


def test_graph_backend_over_bolt(bolt_store: EngineStore) -> None:
    """The same backend through the official neo4j driver over FalkorDB's Bolt endpoint. Its
    Bolt layer crashes on parameters past ~4 KB and mangles quotes (see tests/servers.py), so
    this writes small, plain events one per batch, on the session's one driver (the session's store,
    opened by the fixture), and compares a few answers with the memory backend's; the corpus
    above runs through the Redis protocol."""
    backend = bolt_store.backend
    assert isinstance(backend, GraphBackend) and isinstance(backend.runner, Neo4jRunner)
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
    graph, memory = bolt_store, _memory()
    for rec in records(*events, *reversed(events)):
        graph.write_batch([rec])
        memory.write_batch([rec])
    for store in (graph, memory):
        assert store.has_node("DATASET", ns, "d2")
    up = [
        s.lineage(node_id("DATASET", ns, "d2"), direction="upstream", depth=3)
        for s in (graph, memory)
    ]
    assert up[0].nodes.keys() == up[1].nodes.keys() and len(up[0].nodes) == 5
    assert graph.events_of_run(run) == memory.events_of_run(run) == events[1:]
    assert graph.runs_of_job(ns, "j2") == memory.runs_of_job(ns, "j2")
    assert graph.jobs(ns) == memory.jobs(ns)
    assert graph.delete_events([records(events[0])[0].event_id]) == 1
    assert not graph.has_node("JOB", ns, "j1") and graph.has_node("DATASET", ns, "d1")


def _clock_events() -> list[dict[str, Any]]:
    """420 events over three hours: 150 at one instant (more than a window's page), then one
    every 7 s in that hour, then one every 11 s in the next, in two namespaces."""
    at = (
        [3600.0] * 150
        + [3600 + 7.0 * i for i in range(150)]
        + [7200 + 11.0 * i for i in range(120)]
    )
    return [
        run_event(job=f"j{i % 13}", namespace=f"ns{i % 2}", seconds=s) for i, s in enumerate(at)
    ]


def _ids(page: Any) -> list[str]:
    return [row.event_id for row in page]


def test_graph_time_ranges_as_the_memory_backend(make_graph: GraphFactory) -> None:
    """Events by time (FalkorDB reads them in windows over ``eventUs``, stores/falkordb.py): every
    range, order, page and position answers as the memory backend, around an instant of 150
    events, across the hour where FalkorDB's text index returned the next hour's events too."""
    recs = records(*_clock_events())
    stores = make_graph(), _memory()
    for store in stores:
        for start in range(0, len(recs), 100):
            store.write_batch(recs[start : start + 100])
    graph, memory = (store.backend for store in stores)
    hour = [BASE_TIME + timedelta(seconds=s) for s in (3600, 5000, 7200, 9000)]
    bounds = [None, hour[0], hour[0] + MICROSECOND, *hour[1:]]
    asked = 0
    for since in bounds:
        for until in bounds:
            if since is not None and until is not None and since > until:
                continue
            for descending in (False, True):
                for namespace in (None, "ns1"):
                    for limit, offset in ((None, 0), (1, 0), (70, 0), (70, 140), (500, 3)):
                        ask = dict(since=since, until=until, descending=descending,
                                   namespace=namespace, limit=limit, offset=offset)  # fmt: skip
                        assert _ids(graph.events(**ask)) == _ids(memory.events(**ask)), ask
                        asked += 1
                    ask = dict(since=since, until=until, namespace=namespace, limit=0, count=True)
                    assert graph.events(**ask).total == memory.events(**ask).total, ask
    every = list(memory.events())
    assert len(every) == len(recs)
    for row in every[::37]:
        for descending in (False, True):
            for limit in (None, 1, 90):
                ask = dict(after=row.position, descending=descending, limit=limit)
                assert _ids(graph.events(**ask)) == _ids(memory.events(**ask)), ask
            ask = dict(after=row.position, descending=descending, limit=0, count=True)
            assert graph.events(**ask).total == memory.events(**ask).total, ask
    assert asked > 500


def test_events_without_numbered_times_are_numbered_at_open(make_graph: GraphFactory) -> None:
    """A graph whose events were written before their times were numbers too (``eventUs``):
    ``missing`` names them, the next open numbers them, and time ranges answer as before."""
    store = make_graph()
    store.write_batch(records(*_clock_events()[:200]))
    backend = store.backend
    assert isinstance(backend, GraphBackend)
    since, until = BASE_TIME + timedelta(seconds=3600), BASE_TIME + timedelta(seconds=4000)
    before = _ids(backend.events(since=since, until=until))
    assert len(before) == 200
    assert not [m for m in backend.missing() if "as a number" in m]
    backend.runner.run("MATCH (e:Event) SET e.eventUs = NULL", {})
    assert not _ids(backend.events(since=since, until=until))  # ranges read eventUs alone
    assert "200 event(s) without their time as a number" in " ".join(backend.missing())
    backend.open()  # what the collector's next start does
    assert not [m for m in backend.missing() if "as a number" in m]
    assert _ids(backend.events(since=since, until=until)) == before


def test_parent_mentions_without_their_key_are_keyed_at_open(make_graph: GraphFactory) -> None:
    """A graph whose parent mentions were written before ``parentKey`` (the index a parent's
    children are read by): ``missing`` names them, the parent reads find no child until the next
    open keys them, then the same children as the memory backend."""
    app, tasks = str(uuid.uuid4()), [str(uuid.uuid4()) for _ in range(3)]
    events = [run_event(job="dag", run_id=app, seconds=1.0)]
    events += [
        run_event(job=f"task{i}", parent=(app, "ns", "dag"), seconds=2.0 + i, run_id=task)
        for i, task in enumerate(tasks)
    ]
    events.append(run_event(job="spark", parent=(tasks[0], "ns", "task0"), seconds=9.0))
    store = make_graph()
    store.write_batch(records(*events))
    backend = store.backend
    assert isinstance(backend, GraphBackend)
    memory = EngineStore(MemoryBackend())
    memory.open()
    memory.write_batch(records(*events))
    parents = [("ns", "dag"), ("ns", "task0")]

    def children(b: Any) -> list[tuple[str, str, str]]:
        return sorted(
            (m.key[1], m.source, m.source_id) for m in b.mentions("JOB", parents, roles=["parent"])
        )

    expected = children(memory.backend)
    assert len(expected) == 4 and children(backend) == expected
    assert not [m for m in backend.missing() if "parentKey" in m]
    backend.runner.run("MATCH (x:Mention) SET x.parentKey = NULL", {})
    assert children(backend) == []  # the parent reads read parentKey alone
    assert "4 parent mention(s) without parentKey" in " ".join(backend.missing())
    backend.open()  # what the collector's next start does
    assert not [m for m in backend.missing() if "parentKey" in m]
    assert children(backend) == expected
