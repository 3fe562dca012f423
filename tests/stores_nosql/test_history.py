"""History (issue 16, item 1): ``asOf`` and ``runId`` lineage, the same in every store.

The engine over every backend: memory (the reference), sql on SQLite and on PostgreSQL, document
(SecantusDB) and graph (FalkorDB), fed one small corpus::

    t=0   run r1: d0 -> [j1] -> d1
    t=10  run r2: d1 -> [j2] -> d2
    t=20  run r3: dx -> [j1] -> d1          (j1's inputs change: d0, then d0 and dx)
    t=30  run r4: d2 -> [j3] -> d3          (a child of r2; j3 does not exist before)
    t=40  JobEvent: d3 -> [j4] -> d4        (declared)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest
from nosql_events import (
    BASE_TIME,
    PRODUCER,
    STORE_KINDS,
    StoreFactory,
    column_lineage,
    records,
    run_event,
)

from lineage_sdk.collector.api import marquez, queries
from lineage_sdk.collector.api.history import (
    history_columns,
    history_job,
    history_lineage,
    of_dataset,
    of_job,
    parse_instant,
    run_scope_events,
)
from lineage_sdk.collector.store import LineageGraph

pytestmark = [pytest.mark.mongodb, pytest.mark.neo4j]

R1, R2, R3, R4 = (f"0190{i}000-0000-7000-8000-000000000000" for i in range(1, 5))


def _corpus() -> list[dict[str, Any]]:
    events = []
    for run_id, job, inputs, outputs, at, parent in (
        (R1, "j1", [("ns", "d0")], [("ns", "d1")], 0, None),
        (R2, "j2", [("ns", "d1")], [("ns", "d2")], 10, None),
        (R3, "j1", [("ns", "dx")], [("ns", "d1")], 20, None),
        (R4, "j3", [("ns", "d2")], [("ns", "d3")], 30, (R2, "ns", "j2")),
    ):
        for kind, delta in (("START", 0.0), ("COMPLETE", 1.0)):
            events.append(
                run_event(
                    job=job,
                    namespace="ns",
                    event_type=kind,
                    run_id=run_id,
                    inputs=inputs,
                    outputs=outputs,
                    parent=parent,
                    seconds=at + delta,
                )
            )
    # A dataset only a DatasetEvent names (t=5): no job leads to it.
    events.append(
        {
            "eventTime": at_(5).isoformat(),
            "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
            "dataset": {"namespace": "ns", "name": "lonely", "facets": {}},
        }
    )
    # Column lineage in a component of its own: c1.x from c0.a, then (t=22) also from c0.b.
    for at, source in ((12, "a"), (22, "b")):
        event = run_event(job="jcol", namespace="ns", inputs=[("ns", "c0")], seconds=at)
        event["outputs"] = [
            {
                "namespace": "ns",
                "name": "c1",
                "facets": {"columnLineage": column_lineage({"x": [("ns", "c0", source)]})},
            }
        ]
        events.append(event)
    events.append(
        {
            "eventTime": at_(40).isoformat(),
            "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
            "job": {"namespace": "ns", "name": "j4", "facets": {}},
            "inputs": [{"namespace": "ns", "name": "d3", "facets": {}}],
            "outputs": [{"namespace": "ns", "name": "d4", "facets": {}}],
        }
    )
    return events


def at_(seconds: float) -> datetime:
    return BASE_TIME + timedelta(seconds=seconds)


#: Every store: the engine over each backend, the reference (memory) first.
NAMES = STORE_KINDS
#: The stores compared with the reference.
OTHERS = NAMES[1:]


class _Loaded(Mapping[str, Any]):
    """The stores by name, each made and fed the corpus when first asked for (a test of one store
    makes only that one; iterating makes them all)."""

    def __init__(self, make: Callable[[str], Any]) -> None:
        self._make = make
        self._made: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._made:
            if name not in NAMES:
                raise KeyError(name)
            store = self._make(name)
            store.write_batch(records(*_corpus()))
            self._made[name] = store
        return self._made[name]

    def __iter__(self) -> Iterator[str]:
        return iter(NAMES)

    def __len__(self) -> int:
        return len(NAMES)


@pytest.fixture
def stores(request: pytest.FixtureRequest, make_store: StoreFactory) -> Mapping[str, Any]:
    """Every store of :data:`NAMES`, each holding the corpus (made when a test first reads it)."""

    def make(name: str) -> Any:
        if name == "graph":  # the graph_store fixture: on a real Neo4j too
            return request.getfixturevalue("graph_store")
        return make_store(name)

    return _Loaded(make)


def _shape(graph: LineageGraph) -> tuple[set[str], set[tuple[str, str]]]:
    edges = {(e.origin, e.destination) for n in graph.nodes.values() for e in n.out_edges}
    return set(graph.nodes), edges


def _answers(store: Any, node: str, **kwargs: Any) -> dict[str, Any]:
    graph, declared = history_lineage(store, node, **kwargs)
    return {"graph": marquez.lineage_graph(graph), "declared": sorted(declared)}


CASES: list[tuple[str, dict[str, Any]]] = [
    ("dataset:ns:d1", {"as_of": at_(15)}),
    ("dataset:ns:d1", {"as_of": at_(25), "direction": "upstream"}),
    ("job:ns:j2", {"as_of": at_(35), "depth": 1}),
    ("job:ns:j2", {"run_id": R2}),
    ("job:ns:j3", {"run_id": R4, "as_of": at_(35)}),
    ("dataset:ns:d3", {"as_of": at_(50)}),
]


def test_every_store_answers_history_alike(stores: Mapping[str, Any]) -> None:
    for node, kwargs in CASES:
        answers = {name: _answers(store, node, **kwargs) for name, store in stores.items()}
        for kind in OTHERS:
            assert answers[kind] == answers["memory"], (kind, node, kwargs)


@pytest.mark.parametrize("name", NAMES)
def test_as_of_reads_the_past(stores: Mapping[str, Any], name: str) -> None:
    store = stores[name]
    # Before j3 existed: the walk downstream of d2 stops there; j3 itself is unknown.
    before, _ = history_lineage(store, "dataset:ns:d2", as_of=at_(25), direction="downstream")
    assert "job:ns:j3" not in before.nodes
    with pytest.raises(LookupError, match="j3"):
        history_lineage(store, "job:ns:j3", as_of=at_(25))
    # Between j1's two input versions: only the old edge.
    old, _ = history_lineage(store, "job:ns:j1", as_of=at_(15), depth=0)
    assert _shape(old)[1] == {("dataset:ns:d0", "job:ns:j1"), ("job:ns:j1", "dataset:ns:d1")}
    new, _ = history_lineage(store, "job:ns:j1", as_of=at_(25), depth=0)
    assert ("dataset:ns:dx", "job:ns:j1") in _shape(new)[1]
    # asOf is inclusive: the START of r3 at exactly t=20 counts, and sets j1's latest run.
    edge, _ = history_lineage(store, "job:ns:j1", as_of=at_(20), depth=0)
    assert ("dataset:ns:dx", "job:ns:j1") in _shape(edge)[1]
    assert edge.nodes["job:ns:j1"].data["latestRun"]["runId"] == R3
    assert edge.nodes["job:ns:j1"].data["latestRun"]["state"] == "START"
    # A node no job leads to is known from the time an event names it.
    lonely, _ = history_lineage(store, "dataset:ns:lonely", as_of=at_(10))
    assert set(lonely.nodes) == {"dataset:ns:lonely"}
    with pytest.raises(LookupError, match="lonely"):
        history_lineage(store, "dataset:ns:lonely", as_of=at_(4))
    # d0 is only read (by j1 from t=0): asked upstream, no job leads to it, yet it is known then;
    # dx is first read at t=20, so before that it is not.
    for direction in ("upstream", "both"):
        source, _ = history_lineage(store, "dataset:ns:d0", as_of=at_(5), direction=direction)
        assert "dataset:ns:d0" in source.nodes
    read_only, _ = history_lineage(store, "dataset:ns:dx", as_of=at_(25), direction="upstream")
    assert set(read_only.nodes) == {"dataset:ns:dx"}
    with pytest.raises(LookupError, match="dx"):
        history_lineage(store, "dataset:ns:dx", as_of=at_(15), direction="upstream")
    # asOf now is the plain answer, for every node and direction.
    now = datetime.now(tz=BASE_TIME.tzinfo)
    for node in ("dataset:ns:d1", "job:ns:j1", "dataset:ns:d3", "job:ns:j4"):
        for direction in ("upstream", "downstream", "both"):
            plain = store.lineage(node, direction=direction, depth=5)
            past, _ = history_lineage(store, node, as_of=now, direction=direction, depth=5)
            assert _shape(past) == _shape(plain), (node, direction)


@pytest.mark.parametrize("name", NAMES)
def test_run_id_is_the_run_with_its_parent_and_children(
    stores: Mapping[str, Any], name: str
) -> None:
    store = stores[name]
    # r2 (j2) and its child r4 (j3); not j1, whose runs are neither.
    graph, _ = history_lineage(store, "job:ns:j2", run_id=R2)
    assert set(graph.nodes) == {
        "job:ns:j2",
        "dataset:ns:d1",
        "dataset:ns:d2",
        "job:ns:j3",
        "dataset:ns:d3",
    }
    # From the child: its parent's job and datasets.
    child, _ = history_lineage(store, "job:ns:j3", run_id=R4, direction="upstream")
    assert set(child.nodes) == {"job:ns:j3", "dataset:ns:d2", "job:ns:j2", "dataset:ns:d1"}
    # One run of j1 states only its own inputs.
    first, _ = history_lineage(store, "job:ns:j1", run_id=R1, depth=0)
    assert "dataset:ns:dx" not in first.nodes and "dataset:ns:d0" in first.nodes
    with pytest.raises(LookupError, match="no events recorded for run"):
        history_lineage(store, "job:ns:j1", run_id="no-such-run")
    with pytest.raises(LookupError, match="no events recorded for run"):
        history_lineage(store, "job:ns:j3", run_id=R4, as_of=at_(25))


@pytest.mark.parametrize("name", NAMES)
def test_column_lineage_as_of(stores: Mapping[str, Any], name: str) -> None:
    store = stores[name]
    field = "datasetField:ns:c1:x"
    early = history_columns(store, field, as_of=at_(15))
    assert {src.field for _, src in early.edges} == {"a"}
    late = history_columns(store, field, as_of=at_(25))
    assert {src.field for _, src in late.edges} == {"a", "b"}
    assert not history_columns(store, field, as_of=at_(5)).roots
    now = datetime.now(tz=BASE_TIME.tzinfo)
    for node in (field, "dataset:ns:c1", "job:ns:jcol", "datasetField:ns:c0:a"):
        plain = store.column_lineage(node, depth=5, with_downstream=True)
        past = history_columns(store, node, as_of=now, depth=5, with_downstream=True)
        assert (past.roots, past.fields, past.edges) == (plain.roots, plain.fields, plain.edges)
    same = {k: history_columns(s, "dataset:ns:c1", as_of=at_(25)).edges for k, s in stores.items()}
    assert all(same[kind] == same["memory"] for kind in OTHERS), same


@pytest.mark.parametrize("name", NAMES)
def test_declared_edges_count_from_their_job_event_on(stores: Mapping[str, Any], name: str) -> None:
    store = stores[name]
    _, declared = history_lineage(store, "dataset:ns:d3", as_of=at_(50))
    assert ("dataset:ns:d3", "job:ns:j4") in declared
    graph, declared = history_lineage(store, "dataset:ns:d3", as_of=at_(35))
    assert "job:ns:j4" not in graph.nodes and not declared


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="asOf must be an RFC 3339 time"):
        parse_instant("yesterday")
    assert parse_instant("2025-03-01") == datetime.fromisoformat("2025-03-01T00:00:00+00:00")
    with pytest.raises(ValueError, match="depth"):
        history_lineage(object(), "job:ns:j1", as_of=at_(0), depth=-1)


def test_job_as_of_is_the_same_in_every_store(stores: Mapping[str, Any]) -> None:
    """The job read's asOf (j1's inputs grow at t=20; j4 is only a JobEvent at t=40)."""

    def job(store: Any, name: str, seconds: float) -> dict[str, Any] | None:
        read_all = history_job(queries.job_events(store, "ns", name), "ns", name, at_(seconds))
        bounded = queries.job_events_up_to(store, "ns", name, at_(seconds))
        assert history_job(bounded, "ns", name, at_(seconds)) == read_all, (name, seconds)
        return read_all

    for name, seconds in (("j1", 15), ("j1", 25), ("j4", 45), ("j3", 29)):
        answers = {key: job(store, name, seconds) for key, store in stores.items()}
        for kind in OTHERS:
            assert answers[kind] == answers["memory"], (kind, name, seconds)
    reference = stores["memory"]
    early, late = job(reference, "j1", 15), job(reference, "j1", 25)
    assert early is not None and late is not None
    assert [d["name"] for d in early["inputs"]] == ["d0"]
    assert [d["name"] for d in late["inputs"]] == ["d0", "dx"]
    assert late["latestRun"]["id"] == R3 and early["latestRun"]["id"] == R1
    assert job(reference, "j3", 29) is None  # before its first event
    declared = job(reference, "j4", 45)
    assert declared is not None and declared.get("latestRun") is None
    assert [d["name"] for d in declared["outputs"]] == ["d4"]


def _event_key(event: dict[str, Any]) -> tuple[str, str, str]:
    return event["eventTime"], event["run"]["runId"], event["eventType"]


def test_job_events_up_to_bounds_by_time_on_the_index(stores: Mapping[str, Any]) -> None:
    """Each store's bounded read equals its events_of_job filtered by time (asOf inclusive, to
    the microsecond), and the three stores agree."""
    jobs = [("ns", "j1"), ("ns", "j2"), ("ns", "nosuch")]
    for seconds in (0.5, 1, 20, 100):
        bound = at_(seconds)
        answers = {}
        for name, store in stores.items():
            got = store.job_events_up_to(jobs, bound)
            expected = [
                e
                for ns, job in jobs
                for e in store.events_of_job(ns, job)
                if parse_instant(e["eventTime"]) <= bound
            ]
            assert sorted(map(_event_key, (e for _, e in got))) == sorted(
                map(_event_key, expected)
            ), name
            answers[name] = [event_id for event_id, _ in got]
        for kind in OTHERS:
            assert answers[kind] == answers["memory"], (kind, seconds)
    # t=1 is r1's COMPLETE: inclusive; 1 µs before it, only r1's START.
    reference = stores["memory"]
    assert len(reference.job_events_up_to([("ns", "j1")], at_(1))) == 2
    assert len(reference.job_events_up_to([("ns", "j1")], at_(1) - timedelta(microseconds=1))) == 1
    assert reference.job_events_up_to([], at_(100)) == []


def test_child_runs_by_each_store_index(stores: Mapping[str, Any]) -> None:
    """r4 names r2 as its parent: each store finds it by its parent index, and only it."""
    for name, store in stores.items():
        assert store.child_runs(R2) == [R4], name
        assert store.child_runs(R4) == [], name
        assert store.child_runs("no-such-run") == [], name


@pytest.mark.parametrize("name", NAMES)
def test_run_scope_reads_runs_not_every_event(
    stores: Mapping[str, Any], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's scope is read run by run (its own, its parents', its children's by the parent
    index), never by a scan of the store's events."""
    store = stores[name]

    def scan(**_: Any) -> Any:
        raise AssertionError("runId read every event")

    monkeypatch.setattr(store, "iter_raw_events", scan)
    scope = run_scope_events(store, R2)
    assert {e["run"]["runId"] for e in scope} == {R2, R4}
    assert [e["eventTime"] for e in scope] == sorted(e["eventTime"] for e in scope)
    child = run_scope_events(store, R4, as_of=at_(30))
    assert [(e["run"]["runId"], e["eventType"]) for e in child] == [
        (R2, "START"),
        (R2, "COMPLETE"),
        (R4, "START"),
    ]
    graph, _ = history_lineage(store, "job:ns:j2", run_id=R2)
    assert "job:ns:j3" in graph.nodes
    with pytest.raises(LookupError, match="no events recorded for run"):
        run_scope_events(store, R4, as_of=at_(29))


def test_job_and_columns_of_a_run_are_the_same_in_every_store(stores: Mapping[str, Any]) -> None:
    def job(store: Any, name: str, run_id: str) -> dict[str, Any] | None:
        return history_job(of_job(run_scope_events(store, run_id), "ns", name), "ns", name, None)

    for name, run_id in (("j1", R1), ("j1", R3), ("j3", R2), ("j2", R4), ("j1", R2)):
        answers = {key: job(store, name, run_id) for key, store in stores.items()}
        for kind in OTHERS:
            assert answers[kind] == answers["memory"], (kind, name, run_id)
    reference = stores["memory"]
    first, later = job(reference, "j1", R1), job(reference, "j1", R3)
    assert first is not None and later is not None
    assert [d["name"] for d in first["inputs"]] == ["d0"]
    assert [d["name"] for d in later["inputs"]] == ["dx"]
    assert job(reference, "j1", R2) is None  # r2's scope (r2, r4) does not name j1
    child = job(reference, "j3", R2)
    assert child is not None and child["latestRun"]["id"] == R4
    # Column lineage of one run: the jcol runs (t=12, t=22; their ids differ per store) have no
    # parent, and each states its own edge.
    edges = {}
    for key, store in stores.items():
        runs = [e["run"]["runId"] for e in store.events_of_job("ns", "jcol")]
        edges[key] = [history_columns(store, "dataset:ns:c1", run_id=r).edges for r in runs]
    assert all(edges[kind] == edges["memory"] for kind in OTHERS), edges
    assert [{src.field for _, src in found} for found in edges["memory"]] == [{"a"}, {"b"}]
    assert not history_columns(reference, "dataset:ns:c1", run_id=R1).roots


def test_of_dataset_keeps_the_runs_that_named_it() -> None:
    named = run_event(job="j", namespace="ns", run_id=R1, inputs=[("ns", "d")])
    same_run = run_event(job="j", namespace="ns", run_id=R1, event_type="COMPLETE")
    other = run_event(job="j", namespace="ns", run_id=R2, inputs=[("ns", "e")])
    assert of_dataset([named, same_run, other], "ns", "d") == [named, same_run]
    assert of_dataset([other], "ns", "d") == []
    assert of_job([named, other], "ns", "j") == [named, other]
    assert of_job([named], "ns", "k") == []
