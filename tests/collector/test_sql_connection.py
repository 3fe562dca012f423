"""Every SQLite connection of the sql backend is set up as the module says: WAL, ``synchronous``
NORMAL, the busy timeout, and a checkpoint every ``_WAL_CHECKPOINT_PAGES`` pages (a batch of 200
events dirties more than SQLite's default 1,000, which made every commit checkpoint)."""

from __future__ import annotations

import gc
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.stores.sql_backend import SqlBackend, create_sql_engine

_NORMAL = 1  # PRAGMA synchronous's answer for NORMAL


def test_each_sqlite_connection_is_in_wal_and_checkpoints_every_10000_pages(
    tmp_path: Path,
) -> None:
    engine = create_sql_engine(f"sqlite:///{tmp_path}/lineage.db")
    try:
        for _ in range(2):  # a connection from the pool and a new one: both set up
            with engine.connect() as conn:
                raw = conn.connection.dbapi_connection
                assert raw is not None
                answers = {
                    name: raw.execute(f"PRAGMA {name}").fetchone()[0]
                    for name in (
                        "journal_mode",
                        "synchronous",
                        "busy_timeout",
                        "wal_autocheckpoint",
                    )
                }
                assert answers == {
                    "journal_mode": "wal",
                    "synchronous": _NORMAL,
                    "busy_timeout": 30_000,
                    "wal_autocheckpoint": 10_000,
                }
            engine.dispose()
    finally:
        engine.dispose()


def test_a_views_latest_run_read_leaves_no_reference_cycles(tmp_path: Path) -> None:
    """``runs(jobs=..., latest=n)`` is the views' hot read (the parent view: ten an answer). Its
    statement was built at every call, and the alias and subquery left about 770 objects in
    reference cycles a read; the cyclic collector's passes over them made the parent view's
    p95 (docs/design/engine.md section 12). Built once, a read leaves none of them."""
    from stores_nosql.nosql_events import chain, records

    store = EngineStore(SqlBackend(f"sqlite:///{tmp_path}/lineage.db"))
    store.open()
    try:
        store.write_batch(records(*chain("ns", 5)))
        jobs = [("ns", f"j{i}") for i in range(1, 6)]
        backend = store.backend
        assert len(list(backend.runs(jobs=jobs, latest=1))) == 5  # builds the statement once
        left = _sqlalchemy_cycles(lambda: len(backend.runs(jobs=jobs, latest=1)), 5, 20)
        assert not left, f"SQLAlchemy objects left in reference cycles by 20 reads: {left}"
    finally:
        store.close()


def _sqlalchemy_cycles(read: Callable[[], object], expected: object, times: int) -> Counter[str]:
    """SQLAlchemy's objects left in reference cycles by ``times`` calls of ``read`` (each must
    answer ``expected``), by type. SQLAlchemy's only: the suite's other threads (servers of
    earlier tests in this process) may leave cycles of their own meanwhile (16 objects, once in
    a CI run)."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(times):
            assert read() == expected
        gc.collect()
        return Counter(
            type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("sqlalchemy.")
        )
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


@pytest.fixture(params=["sqlite", "postgres"])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/lineage.db"
    return str(request.getfixturevalue("pg_url"))


def test_the_views_reads_leave_no_reference_cycles(sql_url: str) -> None:
    """Every read of the parent view, and the other shapes of those reads (a window, stated
    mentions, runs by job or parent, keys past SQLite's IN list, a run id PostgreSQL cannot
    take as joined text), builds its statement once per shape. Built at every call, each read
    left objects in reference cycles, 3-8 of them SQLAlchemy's on SQLite and 9-13 on PostgreSQL
    (about 400 objects a parent answer there), for the cyclic collector's passes, which made the
    parent view's p95 (docs/design/engine.md section 12). Both dialects: their key parameters
    differ."""
    from stores_nosql.nosql_events import chain, records, run_event

    from lineage_sdk.collector.api import queries

    store = EngineStore(SqlBackend(sql_url))
    store.open()
    try:
        app_run = str(uuid.uuid4())
        child = run_event(job="task", parent=(app_run, "ns", "app"), outputs=[("ns", "d1")])
        store.write_batch(records(*chain("ns", 3), run_event(job="app", run_id=app_run), child))
        backend, jobs = store.backend, [("ns", "app"), ("ns", "task"), ("ns", "j1")]
        datasets, later = [("ns", "d1"), ("ns", "d2")], datetime.now(UTC)
        many = [("ns", f"d{i}") for i in range(600)]  # SQLite: json_each, not an IN list

        def reads() -> list[int]:
            answer = queries.lineage(store, "job:ns:task", depth=10, granularity="parent")
            return [
                len(answer["graph"]),
                *(len(backend.edges("JOB", jobs, io)) for io in ("in", "out")),
                len(backend.edges("DATASET", many, "out", until=later)),
                len(backend.mentions("JOB", jobs, roles=["parent"])),
                len(backend.mentions("JOB", jobs, roles=["parent"], until=later)),
                len(backend.mentions("DATASET", datasets, stated=True)),
                len(backend.nodes("JOB", keys=jobs)),
                len(backend.nodes("DATASET", keys=datasets, until=later)),
                len(backend.runs(jobs=jobs, latest=1)),
                len(backend.runs(jobs=jobs, latest=1, until=later)),
                len(backend.runs(latest=1)),
                len(backend.runs(jobs=jobs)),
                len(backend.runs(parent=app_run)),
                len(backend.runs(run_ids=[app_run, "a,b"])),
            ]

        first = reads()  # builds the statements
        assert first == [6, 1, 2, 4, 1, 1, 5, 3, 2, 3, 3, 5, 3, 1, 1], first
        left = _sqlalchemy_cycles(reads, first, 5)
        assert not left, f"SQLAlchemy objects left in reference cycles by 5 rounds: {left}"
    finally:
        store.close()
