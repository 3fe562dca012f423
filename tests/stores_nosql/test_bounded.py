"""Bounded queries (issue 16, item 8): every graph read takes a node limit, stops its walk early
and answers the same nearest-first cut in every store (SQLite, PostgreSQL, SecantusDB, FalkorDB)
and in history (``asOf``/``runId``): the engine over every backend (memory, the reference;
SQLite and PostgreSQL, SecantusDB, FalkorDB).

The corpus is a seeded, layered graph with what makes a cut easy to get wrong: jobs writing two
datasets of one layer (a node's edges back to nodes already found), jobs reading two layers back
(shortcuts: a node nearer than its layer) and datasets read by several jobs (diamonds). The
expected cut is computed here, independently of the code under test, from each store's unbounded
answer: the ``limit`` nodes nearest the root (edges from it along the asked direction, the smaller
of the two for ``both``; ties by id) and the edges among them.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from nosql_events import (
    BASE_TIME,
    STORE_KINDS,
    StoreFactory,
    chain,
    column_lineage,
    records,
    run_event,
)

from lineage_sdk.collector.api.history import history_columns, history_lineage
from lineage_sdk.collector.store import ColumnGraph, Direction, LineageGraph

pytestmark = [pytest.mark.mongodb, pytest.mark.neo4j]

KINDS = STORE_KINDS
PARENT = "0190a000-0000-7000-8000-000000000000"
FAR_FUTURE = BASE_TIME + timedelta(days=365)


def _corpus(seed: int = 7) -> list[dict[str, Any]]:
    """Six layers of datasets, four jobs between each two, all children of run PARENT."""
    rnd = random.Random(seed)
    layers = [
        [f"d{level}_{i}" for i in range(width)] for level, width in enumerate((3, 4, 5, 5, 4, 3))
    ]
    events = [run_event(job="orchestrator", event_type="START", run_id=PARENT)]
    for level in range(1, len(layers)):
        for k in range(4):
            reads = rnd.sample(layers[level - 1], rnd.randint(1, 2))
            if level >= 2 and rnd.random() < 0.4:
                reads.append(rnd.choice(layers[level - 2]))  # a shortcut
            writes = rnd.sample(layers[level], rnd.randint(1, 2))
            events.append(
                run_event(
                    job=f"j{level}_{k}",
                    inputs=[("ns", d) for d in sorted(set(reads))],
                    outputs=[("ns", d) for d in writes],
                    parent=(PARENT, "ns", "orchestrator"),
                    seconds=level * 10 + k,
                )
            )
    return events


def _columns_corpus(seed: int = 11) -> list[dict[str, Any]]:
    """Four datasets of four fields, each field derived from two fields of the one before."""
    rnd = random.Random(seed)
    fields = [f"f{i}" for i in range(4)]
    events = []
    for level in range(1, 4):
        facet = column_lineage(
            {f: [("ns", f"c{level - 1}", src) for src in rnd.sample(fields, 2)] for f in fields}
        )
        event = run_event(job=f"cj{level}", inputs=[("ns", f"c{level - 1}")], seconds=100 + level)
        event["outputs"] = [
            {"namespace": "ns", "name": f"c{level}", "facets": {"columnLineage": facet}}
        ]
        events.append(event)
    return events


@pytest.fixture
def stores(make_store: StoreFactory) -> dict[str, Any]:
    loaded = {kind: make_store(kind) for kind in KINDS}
    for store in loaded.values():
        store.write_batch(records(*_corpus(), *_columns_corpus()))
    return loaded


# -- the expected cut, computed from an unbounded answer ----------------------------------------


def _distances(
    roots: Iterable[str], adjacencies: Iterable[Mapping[str, Iterable[str]]]
) -> dict[str, int]:
    best: dict[str, int] = {}
    for adjacency in adjacencies:
        dist = dict.fromkeys(roots, 0)
        queue = list(dist)
        for current in queue:  # grows while read: a breadth-first queue
            for nxt in adjacency.get(current, ()):
                if nxt not in dist:
                    dist[nxt] = dist[current] + 1
                    queue.append(nxt)
        for nid, d in dist.items():
            best[nid] = min(d, best.get(nid, d))
    return best


def _adjacencies(graph: LineageGraph, direction: Direction) -> list[dict[str, list[str]]]:
    up = {n.id: [e.origin for e in n.in_edges] for n in graph.nodes.values()}
    down = {n.id: [e.destination for e in n.out_edges] for n in graph.nodes.values()}
    return {"upstream": [up], "downstream": [down], "both": [up, down]}[direction]


Shape = tuple[frozenset[str], frozenset[tuple[str, str]], bool]


def _shape(graph: LineageGraph) -> Shape:
    edges = {(e.origin, e.destination) for n in graph.nodes.values() for e in n.out_edges}
    ins = {(e.origin, e.destination) for n in graph.nodes.values() for e in n.in_edges}
    assert edges == ins, "an edge listed at one end only"
    return frozenset(graph.nodes), frozenset(edges), graph.truncated


def _expected(full: LineageGraph, direction: Direction, limit: int) -> Shape:
    dist = _distances([full.root], _adjacencies(full, direction))
    assert set(dist) == set(full.nodes), "the unbounded answer holds an unreachable node"
    kept = frozenset(sorted(dist, key=lambda n: (dist[n], n))[:limit])
    nodes, edges, _ = _shape(full)
    return kept, frozenset((o, d) for o, d in edges if o in kept and d in kept), len(nodes) > limit


def _check_properties(graph: LineageGraph, direction: Direction, limit: int) -> None:
    """What the contract promises, checked on the cut answer itself."""
    assert len(graph.nodes) <= limit
    dist = _distances([graph.root], _adjacencies(graph, direction))
    assert set(dist) == set(graph.nodes), "a kept node is cut off from the root"


def _limits(size: int) -> list[int]:
    return sorted({n for n in (1, 2, 4, 7, 12, size - 1, size, size + 1) if n >= 1})


NODES = ["dataset:ns:d3_1", "job:ns:j2_0", "dataset:ns:d0_0"]


def test_every_store_cuts_alike_and_as_specified(stores: dict[str, Any]) -> None:
    checked = 0
    for node in NODES:
        for direction in ("both", "upstream", "downstream"):
            for depth in (2, 20):
                full = {
                    k: s.lineage(node, direction=direction, depth=depth) for k, s in stores.items()
                }
                shapes = {k: _shape(g) for k, g in full.items()}
                assert len(set(shapes.values())) == 1, (node, direction, depth, shapes)
                reference = full["memory"]
                assert not reference.truncated
                for limit in _limits(len(reference.nodes)):
                    want = _expected(reference, direction, limit)
                    for kind, store in stores.items():
                        cut = store.lineage(
                            node, direction=direction, depth=depth, node_limit=limit
                        )
                        assert _shape(cut) == want, (kind, node, direction, depth, limit)
                        _check_properties(cut, direction, limit)
                        checked += 1
    assert checked > 200


def test_truncated_at_the_boundary(stores: dict[str, Any]) -> None:
    node = "dataset:ns:d3_1"
    size = len(stores["memory"].lineage(node, depth=20).nodes)
    assert size > 10
    for store in stores.values():
        assert store.lineage(node, depth=20, node_limit=size).truncated is False
        assert store.lineage(node, depth=20, node_limit=size + 1).truncated is False
        short = store.lineage(node, depth=20, node_limit=size - 1)
        assert short.truncated is True and len(short.nodes) == size - 1
        one = store.lineage(node, depth=20, node_limit=1)
        assert set(one.nodes) == {node} and one.truncated


def test_bad_node_limit_is_named(stores: dict[str, Any]) -> None:
    for store in stores.values():
        for bad in (0, -3):
            with pytest.raises(ValueError, match="node_limit"):
                store.lineage("dataset:ns:d3_1", node_limit=bad)


@pytest.mark.parametrize("mode", ["as_of", "run_id"])
def test_history_cuts_as_the_stores_do(stores: dict[str, Any], mode: str) -> None:
    ask: dict[str, Any] = {"as_of": FAR_FUTURE} if mode == "as_of" else {"run_id": PARENT}
    node = "dataset:ns:d3_1"
    for direction in ("both", "upstream", "downstream"):
        full = {
            k: history_lineage(s, node, direction=direction, depth=20, **ask)[0]
            for k, s in stores.items()
        }
        assert len({_shape(g) for g in full.values()}) == 1
        reference = full["memory"]
        if mode == "as_of":  # every event counts: the history answer is the store's
            assert _shape(reference) == _shape(
                stores["memory"].lineage(node, direction=direction, depth=20)
            )
        assert len(reference.nodes) > 3
        for limit in _limits(len(reference.nodes)):
            want = _expected(reference, direction, limit)
            for kind, store in stores.items():
                cut, _ = history_lineage(
                    store, node, direction=direction, depth=20, node_limit=limit, **ask
                )
                assert _shape(cut) == want, (kind, mode, direction, limit)
                _check_properties(cut, direction, limit)


def _late_fan(width: int = 40) -> list[dict[str, Any]]:
    """A chain fan_d0 <- fan_j1 <- fan_d1 <- ... <- fan_d4 by 900 s; at 2000 s fan_j1 also
    reads ``width`` more datasets, so today's graph around fan_d0 is far wider than the past's."""
    events = [
        run_event(
            job=f"fan_j{i}",
            inputs=[("ns", f"fan_d{i}")],
            outputs=[("ns", f"fan_d{i - 1}")],
            seconds=900 - i,
        )
        for i in range(1, 5)
    ]
    events.append(
        run_event(
            job="fan_j1",
            inputs=[("ns", "fan_d1"), *[("ns", f"fan_x{i:03}") for i in range(width)]],
            outputs=[("ns", "fan_d0")],
            seconds=2000,
        )
    )
    return events


@pytest.mark.parametrize("kind", KINDS)
def test_as_of_cut_equals_the_cut_of_the_past_graph(make_store: StoreFactory, kind: str) -> None:
    """A bounded ``asOf`` answer reads a bounded present-day graph; where the past is sparser
    than today (jobs added later, a fan added later), it must still be the cut of the whole past
    graph (the unbounded ``asOf`` answer), retrying its present-day read larger when needed."""
    store = make_store(kind)
    store.write_batch(records(*_corpus(), *_late_fan()))
    fan_root = "dataset:ns:fan_d0"
    # the retry path: today fan_d0's upstream has 40 datasets at distance 2; then a chain of 8
    today = store.lineage(fan_root, direction="upstream", depth=20, node_limit=3 * 3)
    assert today.truncated
    checked = 0
    asked = [(1000, fan_root)] + [(seconds, node) for seconds in (35, 45) for node in NODES]
    for seconds, node in asked:
        as_of = BASE_TIME + timedelta(seconds=seconds)
        for direction in ("both", "upstream", "downstream"):
            try:
                past, _ = history_lineage(store, node, direction=direction, depth=20, as_of=as_of)
            except LookupError:  # not recorded yet then
                continue
            assert not past.truncated
            for limit in _limits(len(past.nodes)):
                cut, _ = history_lineage(
                    store, node, direction=direction, depth=20, as_of=as_of, node_limit=limit
                )
                assert _shape(cut) == _expected(past, direction, limit), (node, direction, limit)
                checked += 1
    assert checked > 60
    upstream, _ = history_lineage(
        store, fan_root, direction="upstream", depth=20, as_of=BASE_TIME + timedelta(seconds=1000)
    )
    assert set(upstream.nodes) == {f"dataset:ns:fan_d{i}" for i in range(5)} | {
        f"job:ns:fan_j{i}" for i in range(1, 5)
    }


# -- column lineage --------------------------------------------------------------------------


def _column_shape(graph: ColumnGraph) -> tuple[Any, ...]:
    return (
        tuple(r.id for r in graph.roots),
        frozenset(f.id for f in graph.fields),
        frozenset((o.id, i.id) for o, i in graph.edges),
        graph.truncated,
    )


def _column_expected(full: ColumnGraph, with_downstream: bool, limit: int) -> tuple[Any, ...]:
    up: dict[str, list[str]] = {}
    down: dict[str, list[str]] = {}
    for out, src in full.edges:
        up.setdefault(out.id, []).append(src.id)
        down.setdefault(src.id, []).append(out.id)
    dist = _distances([r.id for r in full.roots], [up, down] if with_downstream else [up])
    assert set(dist) == {f.id for f in full.fields}
    kept = set(sorted(dist, key=lambda n: (dist[n], n))[:limit])
    _, fields, edges, _ = _column_shape(full)
    return (
        tuple(r.id for r in full.roots if r.id in kept),
        frozenset(kept),
        frozenset((o, i) for o, i in edges if o in kept and i in kept),
        len(fields) > limit,
    )


@pytest.mark.parametrize("node", ["datasetField:ns:c2:f1", "dataset:ns:c2"])
def test_column_lineage_cuts_alike(stores: dict[str, Any], node: str) -> None:
    for with_downstream in (False, True):
        full = {
            k: s.column_lineage(node, depth=20, with_downstream=with_downstream)
            for k, s in stores.items()
        }
        full["history"] = history_columns(
            stores["sqlite"], node, as_of=FAR_FUTURE, depth=20, with_downstream=with_downstream
        )
        assert len({_column_shape(g) for g in full.values()}) == 1
        reference = full["memory"]
        assert len(reference.fields) > 4
        for limit in _limits(len(reference.fields)):
            want = _column_expected(reference, with_downstream, limit)
            for kind, store in stores.items():
                cut = store.column_lineage(
                    node, depth=20, with_downstream=with_downstream, node_limit=limit
                )
                assert _column_shape(cut) == want, (kind, node, with_downstream, limit)
            past = history_columns(
                stores["document"],
                node,
                as_of=FAR_FUTURE,
                depth=20,
                with_downstream=with_downstream,
                node_limit=limit,
            )
            assert _column_shape(past) == want, ("history", node, with_downstream, limit)


# -- the walk itself stops early -------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_sql_walk_stops_early(make_store: StoreFactory, kind: str) -> None:
    """A 60-job chain: unbounded, the walk reads one level per statement all the way down; with
    node_limit=3 it stops after the level that found a fourth node (and one edges-only step).
    Counted on the sql backend's own SQLAlchemy engine."""
    store = make_store(kind)
    store.write_batch(records(*chain("c", 60)))
    statements: list[str] = []

    def count(*args: Any) -> None:
        if not str(args[2]).startswith("BEGIN"):  # SQLite's transaction start: no read
            statements.append(str(args[2]))

    engine = store.backend._engine
    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        full = store.lineage("dataset:c:d0", direction="downstream", depth=100)
        unbounded = len(statements)
        statements.clear()
        cut = store.lineage("dataset:c:d0", direction="downstream", depth=100, node_limit=3)
        bounded = len(statements)
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    assert len(full.nodes) == 121 and not full.truncated
    assert set(cut.nodes) == {"dataset:c:d0", "job:c:j1", "dataset:c:d1"} and cut.truncated
    assert unbounded >= 120 and bounded <= 8, (unbounded, bounded)


@pytest.mark.parametrize("kind", KINDS)
def test_every_walk_stops_early(
    make_store: StoreFactory, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same chain: each step of the engine's walk is one ``edges`` read of the backend (one
    query to the server on every backend but memory; counted on the way through, every read
    still answered by the backend), so the count says where the walk stopped. The reads of
    latest runs that follow the walk are not counted."""
    store = make_store(kind)
    store.write_batch(records(*chain("c", 60)))
    calls: list[str] = []
    real = store.backend.edges

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append("edges")
        return real(*args, **kwargs)

    monkeypatch.setattr(store.backend, "edges", counted)
    full = store.lineage("dataset:c:d0", direction="downstream", depth=100)
    unbounded = len(calls)
    calls.clear()
    cut = store.lineage("dataset:c:d0", direction="downstream", depth=100, node_limit=3)
    assert len(full.nodes) == 121 and not full.truncated
    assert set(cut.nodes) == {"dataset:c:d0", "job:c:j1", "dataset:c:d1"} and cut.truncated
    assert unbounded >= 120 and len(calls) <= 4, (unbounded, calls)
    # Both ways advance together and the limit counts both: from the middle of the chain, two
    # steps each way find five nodes; the closing step asks only from the frontier nodes the cut
    # keeps: d29 upstream, none downstream (d31 is cut). Apart, each way would have walked five
    # steps to find five nodes of its own, and each closing step would have asked its frontier.
    calls.clear()
    both = store.lineage("dataset:c:d30", direction="both", depth=100, node_limit=4)
    assert set(both.nodes) == {"dataset:c:d30", "job:c:j30", "job:c:j31", "dataset:c:d29"}
    assert both.truncated and len(calls) == 5, calls
