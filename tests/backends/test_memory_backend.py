"""The memory backend keeps every promise of ``lineage_sdk.collector.backend``.

Pure logic (the memory backend has no server), so rows are built by hand: each test states one
promise of the module docstring or of a ``LineageBackend`` method and checks it on a few rows.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from itertools import permutations
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage_sdk.collector.backend import (
    ColumnEdgeRow,
    EdgeRow,
    EventRow,
    LineageBackend,
    MentionRow,
    NodeRow,
    Ranked,
    Rows,
    RunRow,
    Touched,
    key_of,
)
from lineage_sdk.collector.store import FieldRef, Page
from lineage_sdk.collector.stores.memory import MemoryBackend

T0 = datetime(2026, 1, 1, tzinfo=UTC)
J1, J2, J3 = ("ns", "job1"), ("ns", "job2"), ("other", "Load_Orders")
D1, D2, D3 = ("ns", "ds1"), ("ns", "ds2"), ("other", "ds3")
JOBS, DATASETS = (J1, J2, J3), (D1, D2, D3)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def event(
    event_id: str,
    s: float,
    *,
    run: str | None = None,
    job: Any = None,
    kind: Any = "run",
    ns: str | None = None,
    body: str = "{}",
) -> EventRow:
    return EventRow(event_id, at(s), kind, "START", run, job, None, ns, body)


def run(
    run_id: str,
    job: Any,
    first: float,
    last: float,
    *,
    started: float | None = None,
    parent: str | None = None,
    rank: str = "0",
    state: str | None = None,
    ended: float | None = None,
    heartbeat: float | None = None,
) -> RunRow:
    return RunRow(
        run_id,
        job,
        at(first),
        at(last),
        Ranked(rank, state),
        None if started is None else at(started),
        None if ended is None else at(ended),
        parent,
        parent,
        heartbeat,
    )


def node(kind: Any, key: Any, first: float, last: float | None = None) -> NodeRow:
    return NodeRow(kind, key, at(first), at(first if last is None else last), frozenset())


def column(out: FieldRef, inp: FieldRef, job: Any, s: float, rank: str = "a") -> ColumnEdgeRow:
    return ColumnEdgeRow(out, inp, job, at(s), Ranked(rank, f"info-{rank}"))


def mention(event_id: str, kind: Any, key: Any, role: Any, s: float) -> MentionRow:
    """A run-less event's mention (a JobEvent's or a DatasetEvent's)."""
    return MentionRow("event", event_id, kind, key, role, at(s))


def run_mention(run_id: str, kind: Any, key: Any, role: Any, s: float) -> MentionRow:
    """A run's mention: a derived row, its first time the least of its events'."""
    return MentionRow("run", run_id, kind, key, role, at(s))


def backend(*batches: Rows) -> MemoryBackend:
    store = MemoryBackend()
    store.open()
    for rows in batches:
        store.append(rows)
    return store


def ids(page: Any) -> list[str]:
    return [row.event_id for row in page]


# -- the contract's shape ----------------------------------------------------------------------


def test_memory_backend_is_a_lineage_backend_with_nothing_more():
    store = MemoryBackend()
    assert isinstance(store, LineageBackend)
    methods = {name for name in vars(LineageBackend) if not name.startswith("_")}
    assert len(methods) == 12
    public = {name for name in dir(store) if not name.startswith("_")}
    assert public == methods | {"name", "address"}
    assert (store.name, store.address) == ("memory", "memory")


def test_open_check_close_are_trivial_and_close_keeps_rows():
    store = backend(Rows(events=(event("e1", 1),)))
    store.check()
    store.close()
    store.close()
    assert ids(store.events()) == ["e1"]


# -- writes --------------------------------------------------------------------------------------


def test_append_is_idempotent_per_event_id_and_mention_key():
    first = event("e1", 1, run="r1", job=J1, body='{"v": 1}')
    again = event("e1", 9, run="r2", job=J2, body='{"v": 2}')
    m = mention("e1", "JOB", J1, "parent", 1)
    store = backend(Rows(events=(first,), mentions=(m,)))
    store.append(Rows(events=(again,), mentions=(m, m)))
    assert list(store.events()) == [first]
    assert list(store.events(run_ids=["r2"])) == []
    assert list(store.events(jobs=[J2])) == []
    assert list(store.events(until=at(5))) == [first]
    assert list(store.mentions("JOB", [J1])) == [m]
    # A stored None is kept too: a redelivery fills in nothing (no merge of event rows).
    bare = event("e2", 2, ns=None)
    store.append(Rows(events=(bare,)))
    store.append(Rows(events=(event("e2", 2, run="r9", job=J3, ns="ns"),)))
    assert list(store.events(ids=["e2"])) == [bare]
    assert list(store.events(run_ids=["r9"])) == [] and list(store.events(namespace="ns")) == []
    m2 = mention("e2", "JOB", J1, "parent", 2)
    store.append(Rows(mentions=(m2, mention("e2", "JOB", J1, "parent", 3))))
    assert sorted(store.mentions("JOB", [J1]), key=key_of) == [m, m2]
    # A run's mention merges by its rule: the least first time, in any order.
    for times in ((5, 4, 6), (6, 4, 5)):
        runs = backend(
            Rows(mentions=tuple(run_mention("r1", "DATASET", D1, "input", t) for t in times))
        )
        assert list(runs.mentions("DATASET", [D1])) == [
            run_mention("r1", "DATASET", D1, "input", 4)
        ]


def test_run_rows_merge_by_their_rules_in_any_order():
    a = run("r", J1, 2, 2, started=2, parent="p2", rank="1", state="START", heartbeat=5.0)
    b = run("r", J1, 1, 7, parent="p1", rank="3", state="COMPLETE", ended=7)
    c = run("r", J1, 4, 4, started=3, rank="2", state="RUNNING", heartbeat=9.0)
    merged = RunRow("r", J1, at(1), at(7), Ranked("3", "COMPLETE"), at(2), at(7), "p1", "p1", 9.0)
    for order in permutations([a, b, c, a]):
        store = backend(Rows(runs=order))
        assert list(store.runs()) == [merged]
        # The parent index follows a merge that lowers parent_run_id.
        assert list(store.runs(parent="p1")) == [merged]
        assert list(store.runs(parent="p2")) == []


def test_edge_column_and_node_rows_merge_by_their_rules_in_any_order():
    f_out, f_in = FieldRef("ns", "ds2", "a"), FieldRef("ns", "ds1", "b")
    edges = [
        EdgeRow(J1, D1, "in", at(5), None),
        EdgeRow(J1, D1, "in", at(3), at(8)),
        EdgeRow(J1, D1, "in", at(4), at(6)),
    ]
    columns = [
        column(f_out, f_in, J1, 5, "b"),
        column(f_out, f_in, J1, 2, "a"),
        column(f_out, f_in, J1, 9, "c"),
    ]
    nodes = [
        NodeRow("JOB", J1, at(4), at(4), frozenset({"JOB"})),
        NodeRow("JOB", J1, at(2), at(9), frozenset({"DATASET"})),
    ]
    for e_order in permutations(edges):
        for c_order in permutations(columns):
            store = backend(*(Rows(edges=(e,)) for e in e_order), Rows(columns=c_order))
            assert list(store.edges("JOB", [J1], "in")) == [EdgeRow(J1, D1, "in", at(3), at(6))]
            assert list(store.column_edges()) == [
                ColumnEdgeRow(f_out, f_in, J1, at(2), Ranked("c", "info-c"))
            ]
    for n_order in permutations(nodes):
        store = backend(Rows(nodes=n_order))
        assert list(store.nodes("JOB")) == [
            NodeRow("JOB", J1, at(2), at(9), frozenset({"JOB", "DATASET"}))
        ]


def test_namespace_node_rows_are_refused_before_any_write():
    rows = Rows(events=(event("e1", 1),), nodes=(node("NAMESPACE", ("ns", ""), 1),))
    store = MemoryBackend()
    with pytest.raises(ValueError, match="NAMESPACE"):
        store.append(rows)
    with pytest.raises(ValueError, match="NAMESPACE"):
        store.replace(Touched(), rows)
    assert list(store.events()) == []


def test_delete_returns_the_removed_events_and_removes_their_mentions():
    e1, e2, e3 = event("e1", 3, run="r1", job=J1), event("e2", 1, run="r1", job=J1), event("e3", 2)
    store = backend(
        Rows(
            events=(e1, e2, e3),
            mentions=(
                mention("e1", "JOB", J1, "parent", 3),
                mention("e2", "JOB", J1, "parent", 1),
                mention("e1", "DATASET", D1, "input", 3),
                run_mention("e1", "DATASET", D2, "input", 3),  # a run whose id is an event's
            ),
        )
    )
    assert store.delete(["e1", "absent", "e2", "e1"]) == [e2, e1]
    assert store.delete(["e1"]) == []
    assert list(store.events()) == [e3]
    assert list(store.events(run_ids=["r1"])) == []
    assert list(store.events(jobs=[J1])) == []
    assert list(store.events(since=at(0), until=at(10))) == [e3]
    assert list(store.mentions("JOB", [J1])) == []
    assert list(store.mentions("DATASET", [D1])) == []
    # A run's mentions are derived rows: only replace renews them, never delete.
    assert list(store.mentions("DATASET", [D2])) == [run_mention("e1", "DATASET", D2, "input", 3)]
    store.append(Rows(events=(e1,)))  # a deleted id can be written again
    assert ids(store.events()) == ["e3", "e1"]


def test_replace_removes_exactly_the_touched_rows_and_writes_the_new_ones():
    o1, o2, o3 = (
        FieldRef("ns", "ds1", "x"),
        FieldRef("ns", "ds2", "y"),
        FieldRef("other", "ds3", "z"),
    )
    e = event("e1", 1, run="r1", job=J1)
    m = mention("e1", "JOB", J1, "parent", 1)
    of_r1, of_r2 = (
        run_mention("r1", "DATASET", D1, "input", 1),
        run_mention("r2", "DATASET", D1, "input", 1),
    )
    store = backend(
        Rows(
            events=(e,),
            mentions=(m, of_r1, of_r2),
            edges=(
                EdgeRow(J1, D1, "in", at(1), None),
                EdgeRow(J1, D2, "out", at(1), None),
                EdgeRow(J2, D1, "in", at(1), None),
            ),
            runs=(run("r1", J1, 1, 2), run("r1", J2, 1, 2), run("r2", J1, 1, 2)),
            columns=(
                column(o2, o1, J1, 1),
                column(o2, o1, J2, 1),
                column(o1, o3, None, 1),
                column(o3, o1, None, 1),
            ),
            nodes=(
                node("JOB", J1, 1),
                node("JOB", J2, 1),
                node("DATASET", D1, 1),
                node("DATASET", D2, 1),
            ),
        )
    )
    touched = Touched(jobs=frozenset({J1}), datasets=frozenset({D1}), runs=frozenset({"r1"}))
    fresh = EdgeRow(J1, D3, "in", at(4), None)
    renewed = run_mention("r1", "DATASET", D2, "output", 3)
    store.replace(
        touched,
        Rows(
            edges=(fresh,),
            runs=(run("r1", J1, 3, 4),),
            nodes=(node("JOB", J1, 3),),
            mentions=(renewed,),
        ),
    )
    assert [
        (r.job, r.dataset, r.io) for io in ("in", "out") for r in store.edges("JOB", JOBS, io)
    ] == [(J1, D3, "in"), (J2, D1, "in")]
    assert list(store.edges("DATASET", [D2], "out")) == []
    assert sorted((r.run_id, r.job, r.first_event) for r in store.runs()) == [
        ("r1", J1, at(3)),
        ("r2", J1, at(1)),
    ]
    assert [(c.output, c.input, c.job) for c in store.column_edges()] == [
        (o2, o1, J2),
        (o3, o1, None),  # a job-less edge stays when only its input is touched
    ]
    assert [c.job for c in store.column_edges(datasets=[D3])] == [None]  # indexes follow
    assert list(store.column_edges(inputs=[o3])) == []
    assert [(n.key, n.first_seen) for n in store.nodes("JOB")] == [(J1, at(3)), (J2, at(1))]
    assert [n.key for n in store.nodes("DATASET")] == [D2]
    assert list(store.events()) == [e] and list(store.mentions("JOB", [J1])) == [m]
    # The touched run's mentions are renewed; another run's and an event's stay.
    assert list(store.mentions("DATASET", [D1])) == [of_r2]
    assert list(store.mentions("DATASET", [D2])) == [renewed]


# -- filters and time bounds -----------------------------------------------------------------------


def corpus() -> MemoryBackend:
    f1, f2 = FieldRef("ns", "ds1", "a"), FieldRef("ns", "ds2", "b")
    return backend(
        Rows(
            events=(
                event("e1", 1, run="r1", job=J1, ns="ns"),
                event("e2", 2, run="r1", job=J1, ns="ns"),
                event("e3", 3, run="r2", job=J2, ns="ns", kind="job"),
                event("e4", 4, kind="dataset", ns="other"),
            ),
            edges=(
                EdgeRow(J1, D1, "in", at(1), None),
                EdgeRow(J1, D2, "out", at(3), None),
                EdgeRow(J2, D2, "in", at(2), at(2)),
            ),
            runs=(run("r1", J1, 1, 2), run("r2", J2, 3, 3), run("r3", None, 5, 5)),
            columns=(column(f2, f1, J1, 1), column(f2, f2, None, 3)),
            nodes=(
                node("JOB", J1, 1),
                node("JOB", J2, 3),
                node("DATASET", D1, 1),
                node("DATASET", D2, 1),
                node("DATASET", D3, 4),
            ),
            mentions=(
                mention("e1", "DATASET", D1, "input", 1),
                mention("e2", "DATASET", D1, "input", 2),
                mention("e2", "DATASET", D2, "output", 2),
                mention("e4", "DATASET", D3, "dataset", 4),
            ),
        )
    )


def test_none_filters_nothing_and_an_empty_collection_matches_nothing():
    store = corpus()
    assert len(store.events()) == 4
    for kwargs in ({"ids": []}, {"run_ids": []}, {"jobs": []}, {"kinds": []}):
        assert list(store.events(**kwargs)) == [], kwargs
    assert len(store.runs()) == 3
    assert list(store.runs(jobs=[])) == [] and list(store.runs(run_ids=[])) == []
    assert len(store.nodes("DATASET")) == 3 and list(store.nodes("DATASET", keys=[])) == []
    assert len(list(store.column_edges())) == 2
    for kwargs in ({"outputs": []}, {"inputs": []}, {"datasets": []}):
        assert list(store.column_edges(**kwargs)) == [], kwargs
    assert list(store.edges("JOB", [], "in")) == []
    assert list(store.mentions("DATASET", [])) == []
    assert list(store.mentions("DATASET", [D1], roles=[])) == []


def test_filters_given_together_must_all_hold():
    store = corpus()
    assert ids(store.events(run_ids=["r1", "r2"], jobs=[J2])) == ["e3"]
    assert ids(store.events(ids=["e1", "e3", "nope"], kinds=["run"])) == ["e1"]
    assert ids(store.events(namespace="ns", kinds=["job", "dataset"])) == ["e3"]
    assert ids(store.events(jobs=[J1], since=at(2))) == ["e2"]
    assert [r.run_id for r in store.runs(jobs=[J1, J2], run_ids=["r2", "r3"])] == ["r2"]
    # A row without a job is in the runs, but no jobs filter matches it.
    assert [r.run_id for r in store.runs(run_ids=["r3"])] == ["r3"]
    assert list(store.runs(jobs=[J1, J2, None], run_ids=["r3"])) == []  # type: ignore[list-item]
    f1, f2 = FieldRef("ns", "ds1", "a"), FieldRef("ns", "ds2", "b")
    assert [c.job for c in store.column_edges(outputs=[f2], inputs=[f2])] == [None]
    assert [c.job for c in store.column_edges(datasets=[D1])] == [J1]
    assert [c.job for c in store.column_edges(datasets=[D2])] == [J1, None]
    assert list(store.column_edges(inputs=[f1], datasets=[D3])) == []
    assert [m.event_id for m in store.mentions("DATASET", [D1, D2], roles=["output"])] == ["e2"]
    assert list(store.mentions("JOB", [D1])) == []  # the kind is part of the key
    assert [n.key for n in store.nodes("DATASET", keys=[D1, D3, J1], namespace="ns")] == [D1]


def test_since_is_inclusive_and_until_exclusive_on_events_and_mentions():
    store = corpus()
    assert ids(store.events(since=at(2), until=at(4))) == ["e2", "e3"]
    assert ids(store.events(since=at(2), until=at(2))) == []
    assert ids(store.events(ids=["e2", "e3", "e4"], since=at(2), until=at(4))) == ["e2", "e3"]
    assert [m.event_id for m in store.mentions("DATASET", [D1, D2], until=at(2))] == ["e1"]


def test_until_bounds_the_first_seen_of_derived_rows():
    store = corpus()
    assert [r.dataset for r in store.edges("JOB", [J1], "out", until=at(3))] == []
    assert [r.dataset for r in store.edges("JOB", [J1], "out", until=at(3.000001))] == [D2]
    assert [r.job for r in store.edges("DATASET", [D2], "in", until=at(2.5))] == [J2]
    assert [n.key for n in store.nodes("JOB", until=at(3))] == [J1]
    assert [n.key for n in store.nodes("DATASET", keys=[D3], until=at(4))] == []
    assert [c.job for c in store.column_edges(until=at(3))] == [J1]
    # Runs (without latest): the first event before until, whatever the last.
    assert [r.run_id for r in store.runs(until=at(3))] == ["r1"]
    assert [r.run_id for r in store.runs(until=at(1.5))] == ["r1"]


# -- order and pages -----------------------------------------------------------------------------


def tied() -> MemoryBackend:
    """Events at three times, with ties at each, stored in a scrambled order."""
    rows = [event(f"e{c}{t}", t, run="r") for t in (3, 1, 2) for c in "cab"]
    return backend(*(Rows(events=(row,)) for row in rows))


def test_events_come_by_position_and_descending_keeps_ties_by_id_ascending():
    store = tied()
    assert ids(store.events()) == ["ea1", "eb1", "ec1", "ea2", "eb2", "ec2", "ea3", "eb3", "ec3"]
    assert ids(store.events(run_ids=["r"])) == ids(store.events())
    down = ["ea3", "eb3", "ec3", "ea2", "eb2", "ec2", "ea1", "eb1", "ec1"]
    assert ids(store.events(descending=True)) == down
    assert ids(store.events(run_ids=["r"], descending=True)) == down


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("indexed", [False, True])
def test_after_is_exclusive_and_resumes_the_order_without_loss(descending, indexed):
    store = tied()
    extra: dict[str, Any] = {"run_ids": ["r"]} if indexed else {}
    whole = list(store.events(descending=descending, **extra))
    for batch in (1, 2, 4):
        got: list[EventRow] = []
        page = store.events(descending=descending, limit=batch, **extra)
        while page:
            got.extend(page)
            page = store.events(after=got[-1].position, descending=descending, limit=batch, **extra)
        assert got == whole
    third = whole[3]
    assert list(store.events(after=third.position, descending=descending, **extra)) == whole[4:]


def test_pages_slice_the_answer_and_count_fills_the_total():
    store = tied()
    whole = list(store.events())
    for limit in (None, 0, 1, 4, 20):
        for offset in (0, 2, 9, 12):
            page = store.events(limit=limit, offset=offset, count=True)
            stop = None if limit is None else offset + limit
            assert isinstance(page, Page)
            assert (list(page), page.total) == (whole[offset:stop], 9)
            bare = store.events(limit=limit, offset=offset)
            assert (list(bare), bare.total) == (whole[offset:stop], len(whole[offset:stop]))
    assert store.events(since=at(2), limit=1, count=True).total == 6
    with pytest.raises(ValueError, match="negative"):
        store.events(offset=-1)


def test_runs_order_by_start_or_first_event_descending_then_run_id_and_job():
    store = backend(
        Rows(
            runs=(
                run("b", J1, 1, 9),
                run("a", J2, 1, 2),
                run("a", J1, 1, 3),
                run("c", J1, 0, 1, started=5),
                run("d", None, 1, 1),
                run("a", None, 1, 1),
            ),
        )
    )
    assert [(r.run_id, r.job) for r in store.runs()] == [
        ("c", J1),
        ("a", J1),
        ("a", J2),
        ("a", None),
        ("b", J1),
        ("d", None),
    ]
    page = store.runs(limit=2, offset=1, count=True)
    assert [(r.run_id, r.job) for r in page] == [("a", J1), ("a", J2)] and page.total == 6


def test_nodes_order_by_namespace_then_name_and_page():
    keys = [("b", "x"), ("a", "z"), ("a.b", "a"), ("ab", "a"), ("a", "y"), ("a", "")]
    store = backend(Rows(nodes=tuple(node("DATASET", k, 1) for k in keys)))
    assert [n.key for n in store.nodes("DATASET")] == sorted(keys)
    assert [n.key for n in store.nodes("DATASET", namespace="a")] == [
        ("a", ""),
        ("a", "y"),
        ("a", "z"),
    ]
    page = store.nodes("DATASET", offset=1, limit=2, count=True)
    assert [n.key for n in page] == [("a", "y"), ("a", "z")] and page.total == 6


def test_text_is_a_case_insensitive_substring_of_the_name():
    store = backend(
        Rows(
            nodes=(
                node("JOB", J1, 1),
                node("JOB", J2, 1),
                node("JOB", J3, 1),
                node("DATASET", ("orders", "x"), 1),
            )
        )
    )
    assert [n.key for n in store.nodes("JOB", text="ORDER")] == [J3]
    assert [n.key for n in store.nodes("JOB", text="Job")] == [J1, J2]
    assert [n.key for n in store.nodes("JOB", text="job", namespace="other")] == []
    assert list(store.nodes("DATASET", text="orders")) == []  # the name only, not the namespace
    assert store.nodes("JOB", text="", count=True, limit=1).total == 3


def test_namespace_rows_aggregate_the_jobs_and_datasets_they_hold():
    store = backend(
        Rows(
            nodes=(
                node("JOB", ("ns", "j"), 5, 6),
                node("DATASET", ("ns", "d"), 2, 3),
                node("DATASET", ("ns2", "d"), 4, 9),
                node("JOB", ("ns2.x", "j"), 8, 8),
            )
        ),
    )
    answer = list(store.nodes("NAMESPACE"))
    assert answer == [
        NodeRow("NAMESPACE", ("ns", ""), at(2), at(6), frozenset({"JOB", "DATASET"})),
        NodeRow("NAMESPACE", ("ns2", ""), at(4), at(9), frozenset({"DATASET"})),
        NodeRow("NAMESPACE", ("ns2.x", ""), at(8), at(8), frozenset({"JOB"})),
    ]
    assert list(store.nodes("NAMESPACE", namespace="ns2")) == [answer[1]]
    assert list(store.nodes("NAMESPACE", keys=[("ns2.x", ""), ("ns", "j"), ("gone", "")])) == [
        answer[2]
    ]
    assert list(store.nodes("NAMESPACE", until=at(5))) == [
        NodeRow("NAMESPACE", ("ns", ""), at(2), at(3), frozenset({"DATASET"})),
        NodeRow("NAMESPACE", ("ns2", ""), at(4), at(9), frozenset({"DATASET"})),
    ]
    page = store.nodes("NAMESPACE", limit=1, offset=1, count=True)
    assert list(page) == [answer[1]] and page.total == 3


# -- latest runs ---------------------------------------------------------------------------------


def latest_corpus() -> MemoryBackend:
    return backend(
        Rows(
            runs=(
                run("r1", J1, 0, 1),
                run("r2", J1, 2, 4),
                run("r3", J1, 3, 4),
                run("r4", J1, 5, 9),
                run("r5", J1, 8, 8),
                run("s1", J2, 1, 2),
                run("n1", None, 1, 1),
                run("n2", None, 2, 2),
            ),
        )
    )


def runs_of(page: Any) -> set[str]:
    return {r.run_id for r in page}


def test_latest_gives_per_job_the_runs_of_the_greatest_last_event_ties_by_least_run_id():
    store = latest_corpus()
    assert runs_of(store.runs(jobs=[J1, J2], latest=1)) == {"r4", "s1"}
    assert runs_of(store.runs(jobs=[J1], latest=2)) == {"r4", "r5"}
    assert runs_of(store.runs(jobs=[J1], run_ids=["r2", "r3"], latest=1)) == {"r2"}
    assert runs_of(store.runs(latest=1)) == {"r4", "s1", "n2"}  # job None is a group of its own
    assert list(store.runs(jobs=[J1], latest=0)) == []
    tied = backend(Rows(runs=tuple(run(f"t{i}", J3, 1, 7) for i in reversed(range(10)))))
    assert runs_of(tied.runs(latest=1)) == {"t0"}
    assert runs_of(tied.runs(jobs=[J3], latest=2)) == {"t0", "t1"}
    assert runs_of(tied.runs(jobs=[J3], until=at(8), latest=3)) == {"t0", "t1", "t2"}


def test_latest_with_until_adds_every_run_spanning_it():
    store = latest_corpus()
    # Ended before 4: r1 (the latest such), spanning 4: r2, r3 (first_event < 4 <= last_event).
    assert runs_of(store.runs(jobs=[J1], until=at(4), latest=1)) == {"r1", "r2", "r3"}
    # Ended before 8.5: r5 wins; r4 spans 8.5.
    assert runs_of(store.runs(jobs=[J1], until=at(8.5), latest=1)) == {"r5", "r4"}
    assert runs_of(store.runs(jobs=[J1], until=at(10), latest=2)) == {"r4", "r5"}
    assert runs_of(store.runs(jobs=[J1, J2], until=at(0), latest=1)) == set()
    # A run whose first event is the bound itself does not span it.
    assert runs_of(store.runs(jobs=[J1], until=at(5), latest=1)) == {"r2"}
    page = store.runs(jobs=[J1], until=at(4), latest=1, limit=1, count=True)
    assert page.total == 3 and [r.run_id for r in page] == ["r3"]


# -- convergence ---------------------------------------------------------------------------------


def _pool() -> list[Rows]:
    f1, f2 = FieldRef("ns", "ds1", "a"), FieldRef("ns", "ds2", "b")
    singles: list[Any] = [
        event("e1", 1, run="r1", job=J1),
        event("e2", 1, run="r1", job=J1),
        event("e3", 0, job=J2),
        EdgeRow(J1, D1, "in", at(3), None),
        EdgeRow(J1, D1, "in", at(1), at(4)),
        EdgeRow(J2, D2, "out", at(2), None),
        run("r1", J1, 2, 2, started=2, parent="p2", rank="1", state="START"),
        run("r1", J1, 1, 5, parent="p1", rank="3", state="COMPLETE", ended=5, heartbeat=2.0),
        run("r1", J2, 1, 1),
        run("r2", None, 4, 4, heartbeat=1.0),
        column(f2, f1, J1, 3, "b"),
        column(f2, f1, J1, 1, "a"),
        column(f2, f1, None, 2),
        node("JOB", J1, 3, 4),
        node("JOB", J1, 1, 2),
        node("DATASET", D1, 2, 9),
        NodeRow("DATASET", D1, at(5), at(5), frozenset({"JOB"})),
        mention("e1", "JOB", J1, "parent", 1),
        mention("e1", "DATASET", D1, "input", 1),
        mention("e2", "JOB", J1, "parent", 1),
    ]
    field_of = {
        EventRow: "events",
        EdgeRow: "edges",
        RunRow: "runs",
        ColumnEdgeRow: "columns",
        NodeRow: "nodes",
        MentionRow: "mentions",
    }
    pool = [Rows(**{field_of[type(row)]: (row,)}) for row in singles]
    pool.append(Rows(events=(singles[0], singles[1]), runs=(singles[7],), nodes=(singles[13],)))
    return pool


POOL = _pool()


def state(store: MemoryBackend) -> tuple[Any, ...]:
    return (
        list(store.events()),
        list(store.events(descending=True)),
        list(store.runs()),
        [list(store.nodes(kind)) for kind in ("JOB", "DATASET", "NAMESPACE")],
        list(store.column_edges()),
        [
            list(store.edges(end, keys, io))
            for end, keys in (("JOB", JOBS), ("DATASET", DATASETS))
            for io in ("in", "out")
        ],
        list(store.mentions("JOB", JOBS)),
        list(store.mentions("DATASET", DATASETS)),
        list(store.runs(parent="p1")),
        list(store.runs(parent="p2")),
    )


REFERENCE = state(backend(*POOL))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from(range(len(POOL))), max_size=8).flatmap(
        lambda extra: st.permutations([*range(len(POOL)), *extra])
    )
)
def test_any_order_and_any_redelivery_of_batches_converge(order):
    assert state(backend(*(POOL[i] for i in order))) == REFERENCE


def test_a_writer_and_readers_in_threads_see_whole_batches():
    store = MemoryBackend()
    seen: list[int] = []
    errors: list[BaseException] = []

    def write() -> None:
        for i in range(300):
            store.append(
                Rows(events=(event(f"e{i:03}", i, run=f"r{i}"),), runs=(run(f"r{i}", J1, i, i),))
            )

    def read() -> None:
        try:
            for _ in range(100):
                page = store.events(count=True, limit=5)
                seen.append(page.total)
                assert len(store.runs(jobs=[J1], latest=1)) <= 1
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=write), *(threading.Thread(target=read) for _ in range(3))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.events(count=True, limit=1).total == 300
    assert [r.run_id for r in store.runs(jobs=[J1], latest=1)] == ["r299"]
