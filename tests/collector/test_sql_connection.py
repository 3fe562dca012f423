"""Every SQLite connection of the sql backend is set up as the module says: WAL, ``synchronous``
NORMAL, the busy timeout, and a checkpoint every ``_WAL_CHECKPOINT_PAGES`` pages (a batch of 200
events dirties more than SQLite's default 1,000, which made every commit checkpoint)."""

from __future__ import annotations

from pathlib import Path

from lineage_sdk.collector.stores.sql_backend import create_sql_engine

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
