"""A database as the ``sql`` store of the releases before the engine left it: its tables and
its events rows, valued as it bound them (tests/backends/test_sql_upgrade.py and
tests/collector/test_sql_concurrent_open.py open such databases)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from typing import Any

import orjson
import sqlalchemy as sa

from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.stores.sql_backend import name_key

__all__ = ["PREFIX", "old_rows", "write_pre_engine"]

PREFIX = "lineage_"

#: The old store's tables as it created them ({ts}: its UTCDateTime column type on the dialect).
_OLD_DDL = (
    "CREATE TABLE {p}events (event_id VARCHAR(32) NOT NULL, kind VARCHAR(8) NOT NULL, "
    "event_type VARCHAR(16), event_time {ts} NOT NULL, event_time_raw TEXT NOT NULL, "
    "run_id VARCHAR(64), job_key VARCHAR(32), producer TEXT NOT NULL, payload TEXT NOT NULL, "
    "PRIMARY KEY (event_id))",
    "CREATE INDEX ix_{p}events_run ON {p}events (run_id, event_time)",
    "CREATE INDEX ix_{p}events_time ON {p}events (event_time, event_id)",
    "CREATE INDEX ix_{p}events_job_run ON {p}events (job_key, event_time, run_id)",
    "CREATE TABLE {p}jobs (job_key VARCHAR(32) NOT NULL, namespace TEXT NOT NULL, "
    "name TEXT NOT NULL, latest_run_id VARCHAR(64), latest_run_time {ts}, PRIMARY KEY (job_key))",
    "CREATE TABLE {p}datasets (dataset_key VARCHAR(32) NOT NULL, namespace TEXT NOT NULL, "
    "name TEXT NOT NULL, PRIMARY KEY (dataset_key))",
    "CREATE TABLE {p}runs (run_id VARCHAR(64) NOT NULL, job_key VARCHAR(32), "
    "state VARCHAR(16), state_rank INTEGER NOT NULL, state_time {ts} NOT NULL, "
    "started_at {ts}, ended_at {ts}, first_event_time {ts} NOT NULL, "
    "parent_run_id VARCHAR(64), root_run_id VARCHAR(64), heartbeat_s FLOAT, "
    "PRIMARY KEY (run_id))",
    "CREATE INDEX ix_{p}runs_parent ON {p}runs (parent_run_id)",
    "CREATE INDEX ix_{p}runs_job ON {p}runs (job_key, first_event_time)",
    "CREATE TABLE {p}run_io (run_id VARCHAR(64) NOT NULL, dataset_key VARCHAR(32) NOT NULL, "
    "direction VARCHAR(3) NOT NULL, first_seen {ts}, PRIMARY KEY (run_id, dataset_key, direction))",
    "CREATE INDEX ix_{p}run_io_dataset ON {p}run_io (dataset_key, direction)",
    "CREATE TABLE {p}job_io (job_key VARCHAR(32) NOT NULL, dataset_key VARCHAR(32) NOT NULL, "
    "direction VARCHAR(3) NOT NULL, first_seen {ts}, PRIMARY KEY (job_key, dataset_key, direction))",
    "CREATE INDEX ix_{p}job_io_dataset ON {p}job_io (dataset_key, direction, job_key)",
    "CREATE TABLE {p}column_edges (out_key VARCHAR(32) NOT NULL, in_key VARCHAR(32) NOT NULL, "
    "out_dataset_key VARCHAR(32) NOT NULL, in_dataset_key VARCHAR(32) NOT NULL, "
    "out_namespace TEXT NOT NULL, out_dataset TEXT NOT NULL, out_field TEXT NOT NULL, "
    "in_namespace TEXT NOT NULL, in_dataset TEXT NOT NULL, in_field TEXT NOT NULL, "
    "info TEXT NOT NULL, rank VARCHAR(64) NOT NULL, PRIMARY KEY (out_key, in_key))",
    "CREATE INDEX ix_{p}column_edges_in ON {p}column_edges (in_key)",
    "CREATE INDEX ix_{p}column_edges_in_ds ON {p}column_edges (in_dataset_key)",
    "CREATE INDEX ix_{p}column_edges_out_ds ON {p}column_edges (out_dataset_key)",
    "CREATE TABLE {p}static_refs (ref_kind VARCHAR(8) NOT NULL, ref_key VARCHAR(32) NOT NULL, "
    "event_id VARCHAR(32) NOT NULL, PRIMARY KEY (ref_kind, ref_key, event_id))",
)

_OLD_COLUMNS = (
    "event_id",
    "kind",
    "event_type",
    "event_time",
    "event_time_raw",
    "run_id",
    "job_key",
    "producer",
    "payload",
)


def old_rows(events: list[dict[str, Any]], dialect: str) -> list[dict[str, Any]]:
    """The old store's ``{prefix}events`` rows of ``events``, valued as it bound them: the event
    time naive UTC text to the microsecond on SQLite, aware UTC on PostgreSQL; the job key the
    hash of its names; the payload the event's compact JSON."""
    rows = []
    for event in events:
        rec = build_record(event)
        at = rec.event_time.astimezone(UTC)
        job_key = (
            name_key(rec.job_namespace, rec.job_name)
            if rec.job_namespace is not None and rec.job_name is not None
            else None
        )
        rows.append(
            {
                "event_id": rec.event_id,
                "kind": rec.kind,
                "event_type": rec.event_type,
                "event_time": (
                    at.replace(tzinfo=None).isoformat(" ", "microseconds")
                    if dialect == "sqlite"
                    else at
                ),
                "event_time_raw": rec.event_time_raw,
                "run_id": rec.run_id,
                "job_key": job_key,
                "producer": rec.producer,
                "payload": orjson.dumps(rec.event).decode(),
            }
        )
    return rows


def write_pre_engine(
    url: str,
    events: list[dict[str, Any]],
    *,
    prefix: str = PREFIX,
    poison: Sequence[dict[str, Any]] = (),
) -> None:
    """A database as the old store left it: its tables named ``{prefix}...``, ``events`` stored
    (and ``poison``, rows given as they are)."""
    engine = sa.create_engine(url)
    try:
        dialect = engine.dialect.name
        ts = "DATETIME" if dialect == "sqlite" else "TIMESTAMP WITH TIME ZONE"
        insert = sa.text(
            f"INSERT INTO {prefix}events ({', '.join(_OLD_COLUMNS)}) "
            f"VALUES ({', '.join(':' + c for c in _OLD_COLUMNS)})"
        )
        with engine.begin() as conn:
            for ddl in _OLD_DDL:
                conn.exec_driver_sql(ddl.format(p=prefix, ts=ts))
            conn.execute(insert, [*old_rows(events, dialect), *poison])
    finally:
        engine.dispose()
