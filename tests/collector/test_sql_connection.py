"""Every SQLite connection of the sql backend is set up as the module says: WAL, ``synchronous``
NORMAL, the busy timeout, and a checkpoint every ``_WAL_CHECKPOINT_PAGES`` pages (a batch of 200
events dirties more than SQLite's default 1,000, which made every commit checkpoint)."""

from __future__ import annotations

import gc
from collections import Counter
from pathlib import Path

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
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for _ in range(20):
                assert len(list(backend.runs(jobs=jobs, latest=1))) == 5
            gc.collect()
            # SQLAlchemy's objects only: the suite's other threads (servers of earlier tests in
            # this process) may leave cycles of their own meanwhile (16 objects, once in a CI run).
            left = Counter(
                type(o).__qualname__
                for o in gc.garbage
                if type(o).__module__.startswith("sqlalchemy.")
            )
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
        assert not left, f"SQLAlchemy objects left in reference cycles by 20 reads: {left}"
    finally:
        store.close()
