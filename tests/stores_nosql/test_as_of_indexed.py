"""``asOf`` lineage from a backend's time-stamped job edges (issue 16): the engine's
``lineage_as_of`` walks the job edges first seen by then (each edge row's ``first_seen``), and
must answer exactly what history's generic path (the fold of the raw events up to then)
answers, over every backend: memory, sql on SQLite and on PostgreSQL, document (SecantusDB) and
graph (FalkorDB). Every node, time, direction, depth and node limit tried here is asked both
ways (``indexed=False`` forces the generic path) and the engine's own walk is checked to have
answered.

Also: events arriving out of time order keep an edge's (and a run's mention's) least time, and
the sql backend's upserts say so in both dialects.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from nosql_events import BASE_TIME, STORE_KINDS, StoreFactory, records, run_event
from sqlalchemy.dialects import postgresql, sqlite
from test_bounded import _corpus as bounded_corpus
from test_bounded import _late_fan
from test_history import _corpus as history_corpus

from lineage_sdk.collector.api import marquez
from lineage_sdk.collector.api.history import history_lineage
from lineage_sdk.collector.backend import EdgeRow, MentionRow
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.store import Direction
from lineage_sdk.collector.stores.sql_backend import _merged, _tables
from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY

pytestmark = [pytest.mark.mongodb, pytest.mark.neo4j]

#: The engine over every backend (its ``lineage_as_of`` from the backend's dated edges).
KINDS = STORE_KINDS
DIRECTIONS: tuple[Direction, ...] = ("both", "upstream", "downstream")


def at_(seconds: float) -> datetime:
    return BASE_TIME + timedelta(seconds=seconds)


def answer(store: Any, node: str, *, indexed: bool, **ask: Any) -> Any:
    """What ``asOf`` answers, as comparable data: the Marquez graph (latest runs included),
    its declared edges and whether it was cut; or the 404's message."""
    try:
        graph, declared = history_lineage(store, node, indexed=indexed, **ask)
    except LookupError as exc:
        return ("404", str(exc))
    return marquez.lineage_graph(graph), sorted(declared), graph.truncated


def assert_indexed_is_generic(
    store: EngineStore,
    nodes: Iterable[str],
    times: Iterable[float],
    asks: Iterable[tuple[int, int | None]],
) -> int:
    """Every asked ``asOf`` answer of the engine's own walk equals the generic path's, and the
    engine's walk answered it (not a fallback); ``asks``: (depth, node limit) pairs. Returns
    how many answers were compared."""
    compared = 0
    for node in nodes:
        for seconds in times:
            for direction in DIRECTIONS:
                for depth, limit in asks:
                    ask = {
                        "as_of": at_(seconds),
                        "direction": direction,
                        "depth": depth,
                        "node_limit": limit,
                    }
                    generic = answer(store, node, indexed=False, **ask)
                    indexed = answer(store, node, indexed=True, **ask)
                    assert indexed == generic, (node, ask)
                    if generic[0] != "404":
                        own = store.lineage_as_of(
                            node,
                            direction=direction,
                            depth=depth,
                            node_limit=limit,
                            as_of=at_(seconds),
                        )
                        assert own is not None, (node, ask)
                    compared += 1
    return compared


def _nodes(events: Iterable[dict[str, Any]]) -> list[str]:
    found = {"job:ns:nowhere", "dataset:ns:nowhere"}
    for event in events:
        job = event.get("job")
        if job:
            found.add(f"job:{job['namespace']}:{job['name']}")
        for side in ("inputs", "outputs"):
            found.update(f"dataset:{d['namespace']}:{d['name']}" for d in event.get(side) or ())
        if "dataset" in event:
            found.add(f"dataset:{event['dataset']['namespace']}:{event['dataset']['name']}")
    return sorted(found)


@pytest.mark.parametrize("kind", KINDS)
def test_history_corpus_as_of_from_the_edges(make_store: StoreFactory, kind: str) -> None:
    """Runs, a child run, an edge added later, a DatasetEvent-only dataset, a JobEvent's
    declared edges: at every second a thing changes, and between."""
    store = make_store(kind)
    corpus = history_corpus()
    store.write_batch(records(*corpus))
    times = [-1, 0, 4.999, 5, 11, 21, 30.5, 39.999, 40]
    asks = [(0, None), (1, None), (20, None), (20, 2)]
    compared = assert_indexed_is_generic(store, _nodes(corpus), times, asks)
    assert compared > 1000
    # the JobEvent's edges are declared from t=40 on, not before
    _, declared, _ = answer(store, "dataset:ns:d3", indexed=True, as_of=at_(45))
    assert declared == [("dataset:ns:d3", "job:ns:j4"), ("job:ns:j4", "dataset:ns:d4")]
    assert answer(store, "job:ns:j4", indexed=True, as_of=at_(39))[0] == "404"


@pytest.mark.parametrize("kind", KINDS)
def test_bounded_corpus_as_of_cuts_from_the_edges(make_store: StoreFactory, kind: str) -> None:
    """The layered corpus (shortcuts, diamonds) and a fan added late: cut answers at every
    limit equal the generic path's (which reads a bounded present-day graph and retries)."""
    store = make_store(kind)
    corpus = [*bounded_corpus(), *_late_fan()]
    store.write_batch(records(*corpus))
    nodes = ["dataset:ns:fan_d0", "dataset:ns:d3_1", "job:ns:j2_0", "dataset:ns:d0_0"]
    asks = [(2, None), (20, None), *((20, limit) for limit in (1, 2, 5, 9, 30))]
    compared = assert_indexed_is_generic(store, nodes, [15, 35, 45, 1000, 3000], asks)
    assert compared == 4 * 5 * 3 * 7


def _heartbeat(seconds: float) -> dict[str, Any]:
    return {HEARTBEAT_FACET_KEY: {"_producer": "p", "_schemaURL": "s", "intervalS": seconds}}


@pytest.mark.parametrize("kind", KINDS)
def test_out_of_order_events_keep_the_least_time(make_store: StoreFactory, kind: str) -> None:
    """COMPLETE before START, a late event with an older time, two runs at one instant (the
    least run id is the latest run), a heartbeat interval that grows after asOf."""
    store = make_store(kind)
    run_a, run_b, run_c = (f"0190b000-0000-7000-8000-00000000000{c}" for c in "abc")
    io = {"inputs": [("ns", "src")], "outputs": [("ns", "dst")]}
    complete = run_event(job="j", event_type="COMPLETE", run_id=run_a, seconds=20, **io)
    start = run_event(
        job="j", event_type="START", run_id=run_a, seconds=10, run_facets=_heartbeat(5), **io
    )
    store.write_batch(records(complete))
    store.write_batch(records(start))  # arrives later, happened earlier
    # one batch, newest first: a later read of "extra", then an older one
    store.write_batch(
        records(
            run_event(job="j", run_id=run_a, seconds=30, inputs=[("ns", "extra")]),
            run_event(
                job="j",
                event_type="RUNNING",
                run_id=run_a,
                seconds=15,
                inputs=[("ns", "extra")],
                run_facets=_heartbeat(60),
            ),
        )
    )
    # two runs of k at one instant, the greater id first; a third k run much later
    store.write_batch(records(run_event(job="k", run_id=run_c, seconds=50, **io)))
    store.write_batch(records(run_event(job="k", run_id=run_b, seconds=50, **io)))
    store.write_batch(records(run_event(job="k", seconds=70, outputs=[("ns", "late")])))
    # within one millisecond (what a BSON date holds): m reads "fine" 300 µs after it writes
    # "finer"
    store.write_batch(
        records(
            run_event(job="m", seconds=80.0007, inputs=[("ns", "fine")]),
            run_event(job="m", seconds=80.0004, outputs=[("ns", "finer")]),
        )
    )
    seen = job_edge_times(store)
    assert seen[("j", "src")] == at_(10)
    assert seen[("j", "extra")] == at_(15)
    assert seen[("k", "late")] == at_(70)
    assert seen[("m", "fine")] == at_(80.0007)
    # the run's own mention of "extra" keeps its least time too (the backend's mention rows)
    (extra,) = store.backend.mentions("DATASET", [("ns", "extra")], roles=["input"])
    assert (extra.source, extra.source_id, extra.first_seen) == ("run", run_a, at_(15))

    def latest(node: str, seconds: float) -> dict[str, Any]:
        graph = store.lineage_as_of(node, depth=0, as_of=at_(seconds))
        assert graph is not None
        return dict(graph.nodes[node].data["latestRun"])

    assert latest("job:ns:j", 12) == {
        "runId": run_a,
        "state": "START",
        "stateTime": at_(10),
        "heartbeatS": 5.0,
    }
    assert latest("job:ns:j", 16)["heartbeatS"] == 60.0
    assert latest("job:ns:j", 16)["state"] == "RUNNING"
    assert latest("job:ns:j", 100)["state"] == "COMPLETE"
    assert latest("job:ns:k", 60)["runId"] == run_b  # least id among equal times
    assert latest("job:ns:k", 60)["heartbeatS"] is None
    graph = store.lineage_as_of("job:ns:m", depth=0, as_of=at_(80.0005))
    assert graph is not None and set(graph.nodes) == {"job:ns:m", "dataset:ns:finer"}
    nodes = [
        *("job:ns:j", "job:ns:k", "job:ns:m"),
        *(f"dataset:ns:{d}" for d in ("extra", "src", "late", "fine", "finer")),
    ]
    times = [9, 10, 12, 15, 16, 20, 29, 30, 50, 60, 70, 80.0003, 80.0004, 80.0005, 80.0007, 100]
    asks = [(0, None), (3, None), (3, 2)]
    assert assert_indexed_is_generic(store, nodes, times, asks) > 200


def job_edge_times(store: EngineStore) -> dict[tuple[str, str], Any]:
    """(job name, dataset name) -> the job edge's stored first time, either direction (the
    tests' names are unique across namespaces): the backend's edge rows, through its contract."""
    jobs = [row.key for row in store.backend.nodes("JOB")]
    return {
        (e.job[1], e.dataset[1]): e.first_seen
        for io in ("in", "out")
        for e in store.backend.edges("JOB", jobs, io)
    }


def test_first_seen_in_the_sql_backends_upserts() -> None:
    """Both dialects' upserts of the dated rows (job edges, mentions) keep the least
    ``first_seen`` and update a stored row only when the new time is earlier (pure SQL text)."""
    tables = _tables(sa.MetaData(), "lineage_")
    dialects: list[tuple[Any, Any, str]] = [
        (sqlite.dialect(), sqlite.insert, "min(coalesce(lineage_{t}.first_seen, "),
        (postgresql.dialect(), postgresql.insert, "least(lineage_{t}.first_seen, "),
    ]
    for dialect, insert, least in dialects:
        for name, row in (("edge", EdgeRow), ("mentions", MentionRow)):
            table = tables[name]
            sql = str(_merged(insert(table), table, row, dialect).compile(dialect=dialect))
            assert f"first_seen = {least.format(t=name)}" in sql, sql
            assert f"excluded.first_seen < lineage_{name}.first_seen" in sql, sql


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_id_named_by_two_jobs_answers_as_the_fold(
    make_store: StoreFactory, kind: str
) -> None:
    """One run id in the events of two jobs (the fold counts each job's own events only, so a
    store must not answer a job's latest run from the shared run's aggregates): every answer
    equals the fold's, and the engine answers it from the backend's rows itself."""
    store = make_store(kind)
    shared = "0190b000-0000-7000-8000-00000000abcd"
    events = [
        run_event(job="ja", run_id=shared, event_type="START", seconds=1, inputs=[("ns", "a0")]),
        run_event(job="ja", event_type="COMPLETE", seconds=3, outputs=[("ns", "a1")]),
        run_event(
            job="jb", run_id=shared, event_type="COMPLETE", seconds=5, outputs=[("ns", "a2")]
        ),
    ]
    store.write_batch(records(*events))
    compared = 0
    for node in _nodes(events):
        for seconds in (0.5, 1, 2, 3, 4, 5, 6):
            for direction in DIRECTIONS:
                ask = {"as_of": at_(seconds), "direction": direction, "depth": 5}
                assert answer(store, node, indexed=True, **ask) == answer(
                    store, node, indexed=False, **ask
                ), (node, seconds, direction)
                compared += 1
    assert compared == len(_nodes(events)) * 7 * 3
    # the engine answers these itself: at 4 s ja ran its own run last; at 6 s, jb the shared one
    latest = {
        job: store.lineage_as_of(f"job:ns:{job}", depth=0, as_of=at_(seconds))
        .nodes[f"job:ns:{job}"]
        .data["latestRun"]["runId"]
        for job, seconds in (("ja", 4), ("jb", 6))
    }
    assert latest["jb"] == shared and latest["ja"] != shared, latest


@pytest.mark.parametrize("kind", KINDS)
def test_an_as_of_is_the_present_from_the_newest_event_on(
    make_store: StoreFactory, kind: str
) -> None:
    """``asOf`` T answers the present (with Marquez's node facts) when no event is later than
    T: ``has_events_after`` reads the events from a microsecond after T (the newest event's
    time was a scan of every event on FalkorDB). Strict to the microsecond, a DatasetEvent
    counting as any event, on every backend."""
    store = make_store(kind)
    assert not store.has_events_after(at_(0))  # an empty store: always the present
    newest = at_(7.25)
    events = [
        run_event(job="ja", event_type="START", seconds=1, inputs=[("ns", "a0")]),
        run_event(job="ja", event_type="COMPLETE", seconds=7.25, outputs=[("ns", "a1")]),
    ]
    store.write_batch(records(*events))
    micro = timedelta(microseconds=1)
    assert store.has_events_after(newest - micro)
    assert not store.has_events_after(newest)
    assert not store.has_events_after(newest + timedelta(days=3650))
    dataset_event = {**events[1], "dataset": {"namespace": "ns", "name": "a1"}}
    for key in ("run", "job", "inputs", "outputs"):
        dataset_event.pop(key, None)
    dataset_event["eventTime"] = (newest + micro).isoformat().replace("+00:00", "Z")
    dataset_event["schemaURL"] = (
        "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent"
    )
    store.write_batch(records(dataset_event))
    assert store.has_events_after(newest)
    assert not store.has_events_after(newest + micro)
