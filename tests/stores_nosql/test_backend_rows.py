"""Promises of the backend contract asked of every backend directly, below the engine
(issue 31): what the conformance answers cannot tell apart, because the engine never sends it
(a mention's first time merged across batches; which mentions a delete or a replace removes).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nosql_events import STORE_KINDS

from lineage_sdk.collector.backend import EventRow, LineageBackend, MentionRow, Rows, Touched

pytestmark = pytest.mark.mongodb  # make_store's fixtures start the session's servers

KINDS = STORE_KINDS
T0 = datetime(2026, 1, 1, tzinfo=UTC)
D1, D2, J1 = ("ns", "d1"), ("ns", "d2"), ("ns", "j1")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def event(event_id: str, seconds: float, run_id: str | None) -> EventRow:
    kind = "run" if run_id else "dataset"
    return EventRow(event_id, at(seconds), kind, None, run_id, None, None, "ns", "{}")  # type: ignore[arg-type]


def by_run(run_id: str, key: Any, role: Any, seconds: float, kind: Any = "DATASET") -> MentionRow:
    return MentionRow("run", run_id, kind, key, role, at(seconds))


def by_event(event_id: str, key: Any, seconds: float) -> MentionRow:
    return MentionRow("event", event_id, "DATASET", key, "dataset", at(seconds))


def mentions(backend: LineageBackend, *keys: Any, **kwargs: Any) -> set[MentionRow]:
    return set(backend.mentions("DATASET", list(keys), **kwargs))


@pytest.mark.parametrize("kind", KINDS)
def test_a_runs_mention_keeps_its_least_first_time_across_batches(make_store: Any, kind: str):
    backend: LineageBackend = make_store(kind).backend
    for seconds in (5, 3, 7, 3):
        backend.append(Rows(mentions=(by_run("r1", D1, "input", seconds),)))
    assert mentions(backend, D1) == {by_run("r1", D1, "input", 3)}
    assert mentions(backend, D1, until=at(3)) == set()
    assert mentions(backend, D1, until=at(3.000001)) == {by_run("r1", D1, "input", 3)}
    assert mentions(backend, D1, roles=["output"]) == set()
    assert set(backend.mentions("JOB", [D1])) == set()  # the kind is part of the key


@pytest.mark.parametrize("kind", KINDS)
def test_delete_takes_an_events_mentions_and_replace_a_touched_runs(make_store: Any, kind: str):
    backend: LineageBackend = make_store(kind).backend
    run_event, static = event("e1", 1, "r1"), event("e2", 2, None)
    kept = by_run("r2", D1, "input", 4)
    backend.append(
        Rows(
            events=(run_event, static),
            mentions=(by_run("r1", D1, "input", 1), kept, by_event("e2", D2, 2)),
        )
    )
    assert backend.delete(["e2", "e1", "absent"]) == [run_event, static]
    # The event's own mention goes with it; a run's is a derived row, renewed by replace only.
    assert mentions(backend, D2) == set()
    assert mentions(backend, D1) == {by_run("r1", D1, "input", 1), kept}
    renewed = by_run("r1", D2, "output", 6)
    backend.replace(Touched(runs=frozenset({"r1"})), Rows(mentions=(renewed,)))
    assert mentions(backend, D1) == {kept}
    assert mentions(backend, D2) == {renewed}


@pytest.mark.parametrize("kind", KINDS)
def test_statements_join_by_union_and_go_with_their_mention(make_store: Any, kind: str) -> None:
    """A mention's ``detail`` (statements: a set) joins by union across batches, a redelivery
    adds nothing, a mention without one keeps none; ``stated`` answers only mentions holding
    some; delete and replace take the statements with their mentions."""
    backend: LineageBackend = make_store(kind).backend

    def said(row: MentionRow, *entries: str) -> MentionRow:
        return MentionRow(row.source, row.source_id, row.kind, row.key, row.role,
                          row.first_seen, frozenset(entries))  # fmt: skip

    start, done = by_run("r1", D1, "input", 2), by_run("r1", D1, "input", 1)
    plain, static = by_run("r2", D1, "input", 3), by_event("e2", D1, 4)
    backend.append(Rows(events=(event("e2", 4, None),), mentions=(said(start, "a"), plain)))
    backend.append(Rows(mentions=(said(done, "b"), said(start, "a"), said(static, "c"))))
    backend.append(Rows(mentions=(by_run("r1", D1, "input", 5),)))  # no detail: none lost
    both = said(done, "a", "b")
    assert mentions(backend, D1) == {both, plain, said(static, "c")}
    assert mentions(backend, D1, stated=True) == {both, said(static, "c")}
    assert mentions(backend, D1, stated=True, roles=["dataset"]) == {said(static, "c")}
    assert mentions(backend, D1, stated=True, until=at(1)) == set()
    backend.delete(["e2"])
    assert mentions(backend, D1, stated=True) == {both}
    backend.replace(Touched(runs=frozenset({"r1"})), Rows(mentions=(said(start, "a"),)))
    assert mentions(backend, D1, stated=True) == {said(start, "a")}
    assert mentions(backend, D1) == {said(start, "a"), plain}


@pytest.mark.parametrize("kind", KINDS)
def test_pages_without_a_limit_and_past_any_answer(make_store: Any, kind: str) -> None:
    """No limit lists every node and event; an offset or a limit of 2**32 and beyond is one:
    FalkorDB takes SKIP and LIMIT modulo 2**32, and the graph backend's first "no limit" (2**62)
    answered no row there."""
    from lineage_sdk.collector.backend import NodeRow

    backend: LineageBackend = make_store(kind).backend
    nodes = tuple(NodeRow("JOB", ("ns", f"j{i}"), at(i), at(i), frozenset()) for i in range(3))
    backend.append(Rows(events=(event("e1", 1, "r1"), event("e2", 2, None)), nodes=nodes))
    assert [n.key for n in backend.nodes("JOB")] == [n.key for n in nodes]
    assert [n.key for n in backend.nodes("JOB", namespace="ns")] == [n.key for n in nodes]
    assert len(backend.nodes("JOB", limit=(1 << 32) + 1)) == 3
    assert len(backend.nodes("JOB", offset=1 << 32)) == 0
    assert [e.event_id for e in backend.events()] == ["e1", "e2"]
    assert [e.event_id for e in backend.events(limit=(1 << 32) + 1)] == ["e1", "e2"]
    assert list(backend.events(offset=(1 << 32) + 1)) == []
