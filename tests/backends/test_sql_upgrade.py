"""The ``sql`` store of the engine upgrades a database of a release before the engine.

A database the old ``sql`` store wrote (``{prefix}events`` and its derived tables) is made here
by raw DDL and raw rows, exactly as that store wrote them (its events table's columns and
values; the derived tables are created, empty: the upgrade reads the events only). Opening
:meth:`~lineage_sdk.collector.stores.sql.SqlStore.from_config` over it copies every event into the
new tables, answers as the memory backend does for the same events, drops the old layout,
resumes a copy that was interrupted, and skips a stored row that is no event. On SQLite and on
a PostgreSQL database of each test's own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import sqlalchemy as sa
from backends.sql_pre_engine import PREFIX, old_rows, write_pre_engine
from backends.upgrade_helpers import Interrupting
from servers import postgres_database
from stores_nosql.nosql_events import chain, column_lineage, records, run_event

from lineage_sdk.collector.engine.store import EngineStore
from lineage_sdk.collector.records import build_record, compute_event_id
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.collector.stores.sql import SqlStore
from lineage_sdk.collector.stores.sql_backend import (
    PRE_ENGINE_TABLES,
    UPGRADE_MARK_TABLE,
    SqlBackend,
    _tables,
)
from lineage_sdk.collector.stores.sql_legacy import SqlPreEngineLayout
from lineage_sdk.config.schema import LineageConfig


def table_names(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


# -------------------------------------------------------------------------------------- corpus

T = "2025-03-01T12:00:00Z"
PARENT_RUN = "0190aaaa-0000-7000-8000-000000000001"


def corpus() -> list[dict[str, Any]]:
    """Runs along a chain in two namespaces, a parent with children, a job run twice, column
    lineage, a START and its COMPLETE: 30 events (several batches of 7)."""
    events = [*chain("ns1", 10), *chain("ns2", 6, seconds=30.0)]
    events.append(run_event(job="orchestrator", namespace="ns1", run_id=PARENT_RUN, seconds=0.5))
    for i in range(3):
        events.append(
            run_event(
                job=f"task{i}",
                namespace="ns1",
                parent=(PARENT_RUN, "ns1", "orchestrator"),
                inputs=[("ns1", "d8")],
                outputs=[("ns3", f"t{i}")],
                seconds=40.0 + i,
            )
        )
    cols = column_lineage({"c": [("ns1", "d1", "a"), ("ns1", "d1", "b")]})
    for run in range(4):
        run_id = f"0190bbbb-0000-7000-8000-00000000000{run}"
        for kind, at in (("START", 50.0 + run), ("COMPLETE", 50.5 + run)):
            events.append(
                run_event(
                    job="load",
                    namespace="ns1",
                    event_type=kind,
                    run_id=run_id,
                    inputs=[("ns1", "d1")],
                    outputs=[("ns3", "wide")],
                    dataset_facets={"columnLineage": cols} if kind == "COMPLETE" else None,
                    seconds=at,
                )
            )
    events.append(run_event(job="load", namespace="ns1", event_type="FAIL", seconds=70.0))
    events.append(run_event(job="j1", namespace="ns1", event_type="RUNNING", seconds=71.0))
    assert len({compute_event_id(e) for e in events}) == len(events) == 30
    return events


NODES = [
    *(f"job:ns1:j{i}" for i in (1, 4, 8)),
    "job:ns2:j2",
    "job:ns1:orchestrator",
    "job:ns1:task1",
    "job:ns1:load",
    "dataset:ns1:d0",
    "dataset:ns1:d5",
    "dataset:ns1:d8",
    "dataset:ns3:wide",
    "dataset:ns3:t2",
]
JOBS = [("ns1", "j1"), ("ns1", "load"), ("ns1", "orchestrator"), ("ns1", "task0"), ("ns2", "j3")]


def answers(store: Any) -> dict[str, Any]:
    """Reads over the corpus's nodes, comparable between stores."""
    out: dict[str, Any] = {}
    for node in NODES:
        for direction in ("upstream", "downstream", "both"):
            graph = store.lineage(node, direction=direction, depth=10)
            out[f"lineage {node} {direction}"] = (
                graph.truncated,
                sorted(
                    (
                        n.id,
                        n.type,
                        repr(sorted(n.data.items(), key=lambda kv: kv[0])),
                        sorted((e.origin, e.destination) for e in n.in_edges),
                        sorted((e.origin, e.destination) for e in n.out_edges),
                    )
                    for n in graph.nodes.values()
                ),
            )
    for node in ("dataset:ns3:wide", "dataset:ns1:d1"):
        columns = store.column_lineage(node, depth=10, with_downstream=True)
        out[f"columns {node}"] = (
            sorted(f.id for f in columns.fields),
            sorted((o.id, i.id, info) for (o, i), info in columns.edges.items()),
        )
    for ns, name in JOBS:
        page = store.runs_of_job(ns, name)
        out[f"runs {ns}:{name}"] = (page.total, list(page))
        out[f"events {ns}:{name}"] = [compute_event_id(e) for e in store.events_of_job(ns, name)]
    out["latest"] = sorted(store.latest_runs(JOBS).items())
    out["children"] = store.child_runs(PARENT_RUN)
    out["raw"] = [(r.event_id, r.event_time, orjson.loads(r.json)) for r in store.iter_raw_events()]
    return out


def memory_answers(events: list[dict[str, Any]]) -> dict[str, Any]:
    store = EngineStore(MemoryBackend())
    store.open()
    store.write_batch(records(*events))
    return answers(store)


def poison_rows(dialect: str) -> list[dict[str, Any]]:
    """Two stored rows that are no event: JSON that does not parse, and JSON of no event."""
    at = datetime(2025, 3, 1, 12, 0, 20, tzinfo=UTC)
    rows = []
    for event_id, payload in (("f" * 32, '{"eventType": "START", "run"'), ("e" * 32, '{"a": 1}')):
        rows.append(
            {
                "event_id": event_id,
                "kind": "run",
                "event_type": "START",
                "event_time": (
                    at.replace(tzinfo=None).isoformat(" ", "microseconds")
                    if dialect == "sqlite"
                    else at
                ),
                "event_time_raw": "2025-03-01T12:00:20Z",
                "run_id": None,
                "job_key": None,
                "producer": "test",
                "payload": payload,
            }
        )
    return rows


# ------------------------------------------------------------------------------------ fixtures


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database: a SQLite file, or a PostgreSQL database of the test's own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/lineage.db"
        return
    with postgres_database("lineage_upgrade") as pg:
        yield pg


def config_of(url: str) -> LineageConfig:
    return LineageConfig.model_validate({"store": {"backend": "sql", "sql": {"url": url}}})


def dialect_of(url: str) -> str:
    return sa.make_url(url).get_backend_name()


def old_tables() -> set[str]:
    return {f"{PREFIX}{name}" for name in (*PRE_ENGINE_TABLES, UPGRADE_MARK_TABLE)}


def new_tables() -> set[str]:
    return {t.name for t in _tables(sa.MetaData(), PREFIX).values()}


# --------------------------------------------------------------------------------------- tests


def test_layouts_share_no_table_name() -> None:
    """drop() names only the old layout's tables and the mark: none is a table of the new."""
    assert not old_tables() & new_tables()
    assert len(old_tables()) == len(PRE_ENGINE_TABLES) + 1


def test_upgrade_copies_every_event_and_drops_the_old_layout(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    events = corpus()
    write_pre_engine(url, events)
    assert old_tables() - {f"{PREFIX}{UPGRADE_MARK_TABLE}"} <= table_names(url)

    backend = SqlBackend(url)
    before = backend.missing()
    assert f"table {PREFIX}ev" in before
    assert before[-1] == (
        "30 event(s) in the layout of a release before the engine (copied into the new "
        "tables at the next open, or by lineage-collector store init)"
    )
    assert not new_tables() & table_names(url)  # missing() created nothing

    store = SqlStore.from_config(config_of(url))
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.collector.engine.store"):
        store.open()
    try:
        assert "holds 30 event(s) in the layout of a release before the engine" in caplog.text
        assert "30 event(s) copied this time, 0 skipped" in caplog.text
        assert "deriving them again" not in caplog.text  # the copy derived by today's rules
        assert store.count_raw_events() == 30
        assert answers(store) == memory_answers(events)
    finally:
        store.close()

    tables = table_names(url)
    assert not old_tables() & tables
    assert new_tables() <= tables
    assert backend.missing() == []

    caplog.clear()
    again = SqlStore.from_config(config_of(url))  # a second open: nothing to copy, nothing changes
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.collector.engine.store"):
        again.open()
    try:
        assert caplog.text == ""
        assert again.count_raw_events() == 30
        assert answers(again) == memory_answers(events)
    finally:
        again.close()
    assert table_names(url) == tables


def test_an_interrupted_copy_resumes_where_it_stopped(url: str) -> None:
    """Batches of 7; reading fails at the 15th event, after two batches were appended and
    marked. A plain reopen reads on after the 14th and ends with every event once."""
    events = corpus()
    write_pre_engine(url, events)
    layout = SqlPreEngineLayout(url)
    crashing = Interrupting(layout, events=14)
    store = EngineStore(SqlBackend(url), earlier=crashing, upgrade_batch=7)
    with pytest.raises(ConnectionError):
        store.open()
    try:
        assert store.count_raw_events() == 14
    finally:
        store.close()
    assert not crashing.dropped
    first = sorted(
        old_rows(events, dialect_of(url)), key=lambda r: (r["event_time"], r["event_id"])
    )
    marked = layout.copied()
    assert marked is not None
    assert marked[1] == first[13]["event_id"]
    assert layout.count_raw_events() == 30  # the old layout is still whole
    assert SqlBackend(url).missing() == [
        "30 event(s) in the layout of a release before the engine (copied into the new "
        "tables at the next open, or by lineage-collector store init)"
    ]

    watched = Interrupting(SqlPreEngineLayout(url))
    resumed = EngineStore(SqlBackend(url), earlier=watched, upgrade_batch=7)
    resumed.open()
    try:
        assert watched.afters == [marked]
        assert watched.dropped
        ids = [r.event_id for r in resumed.iter_raw_events()]
        assert sorted(ids) == sorted({compute_event_id(e) for e in events})
        assert resumed.count_raw_events() == 30
        assert answers(resumed) == memory_answers(events)
    finally:
        resumed.close()
    assert not old_tables() & table_names(url)
    assert SqlBackend(url).missing() == []


def test_a_stored_row_that_is_no_event_is_skipped(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    events = corpus()
    write_pre_engine(url, events, poison=poison_rows(dialect_of(url)))
    assert SqlBackend(url).missing()[-1].startswith("32 event(s) in the layout")
    store = SqlStore.from_config(config_of(url))
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.collector.engine.store"):
        store.open()
    try:
        skipped = [r.getMessage() for r in caplog.records if "skips event" in r.getMessage()]
        assert len(skipped) == 2
        assert any("f" * 32 in m for m in skipped) and any("e" * 32 in m for m in skipped)
        assert "30 event(s) copied this time, 2 skipped as invalid" in caplog.text
        assert store.count_raw_events() == 30
        assert answers(store) == memory_answers(events)
    finally:
        store.close()
    assert not old_tables() & table_names(url)


def test_a_database_without_the_old_layout(url: str) -> None:
    """Nothing to copy: the layout counts 0, reads nothing, and drop() drops nothing else."""
    layout = SqlPreEngineLayout(url)
    if dialect_of(url) == "sqlite":
        assert SqlBackend(url).missing() == [f"database file {sa.make_url(url).database}"]
    store = SqlStore.from_config(config_of(url))
    store.open()
    try:
        assert layout.count_raw_events() == 0
        assert list(layout.iter_raw_events()) == []
        assert layout.copied() is None
        store.write_batch(records(*corpus()[:5]))
        layout.drop()
        assert store.count_raw_events() == 5
    finally:
        store.close()
    assert table_names(url) == new_tables()
    assert SqlBackend(url).missing() == []


def test_the_layout_reads_in_order_after_a_position(url: str) -> None:
    events = corpus()
    write_pre_engine(url, events)
    layout = SqlPreEngineLayout(url)
    read = list(layout.iter_raw_events(batch_size=4))
    expected = sorted(
        ((build_record(e).event_time.astimezone(UTC), compute_event_id(e), e) for e in events),
        key=lambda x: (x[0], x[1]),
    )
    assert [(r.event_time, r.event_id, r.data()) for r in read] == expected
    assert all(r.event_time.tzinfo is not None for r in read)
    after = list(layout.iter_raw_events(after=read[9].position))
    assert [r.event_id for r in after] == [r.event_id for r in read[10:]]
    layout.mark_copied(read[9].position)
    layout.mark_copied(read[11].position)  # one row, the last position
    assert layout.copied() == read[11].position
    layout.drop()
    assert table_names(url) == set()


def index_definition(url: str, name: str) -> str | None:
    """The SQL that defines index ``name`` (None: the database has no such index)."""
    engine = sa.create_engine(url)
    query = (
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = :n"
        if dialect_of(url) == "sqlite"
        else "SELECT indexdef FROM pg_indexes WHERE indexname = :n"
    )
    try:
        with engine.connect() as conn:
            found: str | None = conn.execute(sa.text(query), {"n": name}).scalar()
            return found
    finally:
        engine.dispose()


def test_an_index_an_earlier_release_lacks_is_named_then_built_at_open(url: str) -> None:
    """The parent mentions' partial index (the parent view's children, on both dialects since
    docs/design/engine.md section 24): a database made without it is told by ``missing()`` (what
    ``lineage-collector check`` prints) and gets it at the next open, partial as made new."""
    name = f"ix_{PREFIX}mentions_parent"
    store = SqlStore.from_config(config_of(url))
    store.open()
    store.write_batch(records(*corpus()[:5]))
    store.close()
    made = index_definition(url, name)
    assert made is not None and "'parent'" in made.replace('"', "")
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP INDEX {name}"))
    finally:
        engine.dispose()
    assert SqlBackend(url).missing() == [f"index {name}"]
    store = SqlStore.from_config(config_of(url))
    store.open()
    try:
        assert store.count_raw_events() == 5
    finally:
        store.close()
    assert SqlBackend(url).missing() == []
    assert index_definition(url, name) == made
