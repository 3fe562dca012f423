"""The SQLite store file (the engine over the sql backend) is private: created 0600 whatever the
umask, and so are its WAL files (lineage names tables, jobs and owners; issue 13, item 3)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from collector_helpers import run_event

from lineage_sdk.collector.decode import validate_event
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.stores.sql_backend import SqlBackend


def test_sqlite_file_and_wal_are_created_0600(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        store = EngineStore(SqlBackend(f"sqlite:///{tmp_path}/lineage.db"))
        store.open()
        try:
            store.write_batch([validate_event(run_event(job="j", outputs=[("db", "t")]))])
            files = [p for p in tmp_path.iterdir() if p.name.startswith("lineage.db")]
            assert {p.name for p in files} >= {"lineage.db", "lineage.db-wal", "lineage.db-shm"}
            assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in files} == dict.fromkeys(
                (p.name for p in files), 0o600
            )
        finally:
            store.close()
    finally:
        os.umask(old)
