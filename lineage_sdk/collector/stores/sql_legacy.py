"""The tables the ``sql`` store of the releases before the engine left, read for the upgrade
(a :class:`~lineage_sdk.collector.engine.store.PreEngineLayout`; the document and graph
backends have theirs in ``document_legacy`` and ``graph_legacy``). Their names are
:data:`~.sql_backend.PRE_ENGINE_TABLES`, apart from the backend's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection

from lineage_sdk.collector.store import RawEvent
from lineage_sdk.collector.stores.sql_backend import (
    PRE_ENGINE_TABLES,
    UPGRADE_MARK_TABLE,
    UTCDateTime,
    _changing_schema,
    _pre_engine_count,
    _schema_lock,
    _store_error,
    create_sql_engine,
)
from lineage_sdk.config.redaction import redact

__all__ = ["SqlPreEngineLayout"]


class _Dropped(Exception):
    """A table of the earlier layout was dropped between the check that it exists and its read."""


def _no_table(exc: sa_exc.DBAPIError) -> bool:
    """PostgreSQL's "relation ... does not exist" (SQLSTATE 42P01). SQLite reads the schema
    of the transaction's snapshot: a table it found stays there until the transaction ends."""
    return getattr(exc.orig, "sqlstate", None) == "42P01"


class SqlPreEngineLayout:
    """The tables the ``sql`` store of the releases before the engine left in a database, read
    only (a :class:`~lineage_sdk.collector.engine.store.PreEngineLayout`): its raw events,
    ``{prefix}events`` (``event_id``, ``event_time`` as :class:`UTCDateTime` stores it,
    ``payload`` the event's JSON), yielded for :class:`EngineStore` to copy into the new tables.

    How far the copy went is one row of ``{prefix}upgrade_copied`` in the same database;
    :meth:`drop` drops the old tables (:data:`PRE_ENGINE_TABLES`) and that one, never a table
    of the new layout. Each call opens an engine of its own and disposes it when done.

    Collectors opening the same database at once may copy the same events (an append is
    idempotent); the mark and the drop take the schema lock (:func:`_changing_schema`), and a
    read that finds a table dropped by another since it checked (PostgreSQL) answers as if it
    were absent: the other dropped it after copying every event.
    """

    name = "sql"

    def __init__(self, url: str, table_prefix: str = "lineage_", *, echo: bool = False) -> None:
        self._url = url
        self._echo = echo
        self.address = redact(url)
        self._prefix = table_prefix
        self._names = tuple(f"{table_prefix}{name}" for name in PRE_ENGINE_TABLES)
        metadata = sa.MetaData()
        self._events = sa.Table(
            f"{table_prefix}events",
            metadata,
            sa.Column("event_id", sa.String(32), primary_key=True),
            sa.Column("event_time", UTCDateTime(), nullable=False),
            sa.Column("payload", sa.Text, nullable=False),
        )
        self._mark = sa.Table(
            f"{table_prefix}{UPGRADE_MARK_TABLE}",
            metadata,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("event_time", UTCDateTime(), nullable=False),
            sa.Column("event_id", sa.Text, nullable=False),
        )

    @contextlib.contextmanager
    def _connected(self, *, write: bool = False, locked: bool = True) -> Iterator[Connection]:
        """A connection of an engine of its own (one transaction; ``write``: the schema lock
        taken at BEGIN, on PostgreSQL by the caller when not ``locked``), disposed afterwards;
        a table dropped meanwhile as :class:`_Dropped`, other database errors as StoreError."""
        engine = create_sql_engine(self._url, echo=self._echo)
        try:
            if write:
                with _changing_schema(engine, self._prefix, locked=locked) as conn:
                    yield conn
            else:
                with engine.connect() as conn, conn.begin():
                    yield conn
        except sa_exc.SQLAlchemyError as exc:
            if isinstance(exc, sa_exc.DBAPIError) and _no_table(exc):
                raise _Dropped from None
            raise _store_error(self.name, self.address, exc) from None
        finally:
            engine.dispose()

    @staticmethod
    def _has(conn: Connection, table: sa.Table) -> bool:
        return sa.inspect(conn).has_table(table.name)

    def count_raw_events(self) -> int:
        with contextlib.suppress(_Dropped), self._connected() as conn:
            present = [self._events.name] if self._has(conn, self._events) else []
            return _pre_engine_count(conn, self._prefix, present)
        return 0  # dropped since the check, by another collector that copied them

    def iter_raw_events(
        self, *, after: tuple[datetime, str] | None = None, batch_size: int = 1000
    ) -> Iterator[RawEvent]:
        """The stored events ordered by ``(event_time, event_id)``, after ``after``, through one
        server-side cursor (PostgreSQL) or one stepped statement (SQLite)."""
        ev = self._events
        query = sa.select(ev.c.event_id, ev.c.event_time, ev.c.payload)
        if after is not None:
            at, last_id = after
            later = sa.and_(ev.c.event_time == at, ev.c.event_id > last_id)
            query = query.where(sa.or_(ev.c.event_time > at, later))
        query = query.order_by(ev.c.event_time, ev.c.event_id)
        with contextlib.suppress(_Dropped), self._connected() as conn:
            if not self._has(conn, ev):
                return
            rows = conn.execution_options(stream_results=True, yield_per=batch_size).execute(query)
            for event_id, event_time, payload in rows:
                yield RawEvent(event_id, event_time, payload)

    def copied(self) -> tuple[datetime, str] | None:
        mark = self._mark
        row = None
        with contextlib.suppress(_Dropped), self._connected() as conn:
            if not self._has(conn, mark):
                return None
            row = conn.execute(sa.select(mark.c.event_time, mark.c.event_id)).first()
        return None if row is None else (row[0], row[1])

    def mark_copied(self, position: tuple[datetime, str]) -> None:
        mark = self._mark
        with self._connected(write=True) as conn:
            mark.create(conn, checkfirst=True)
            conn.execute(sa.delete(mark))
            conn.execute(sa.insert(mark).values(id=1, event_time=position[0], event_id=position[1]))

    def drop(self) -> None:
        """Drop the old layout's tables (with their indexes) and the copy's mark, in one
        transaction; the tables that do not exist are skipped. On PostgreSQL the events table
        first, then the schema lock: that drop waits for another collector still copying from
        it, which takes the lock to mark its copy meanwhile (the other way round, each would
        wait for the other, and PostgreSQL sees no deadlock in an advisory lock's wait)."""
        with self._connected(write=True, locked=False) as conn:
            quote = conn.dialect.identifier_preparer.quote
            events, *others = (*self._names, self._mark.name)
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {quote(events)}")
            if conn.dialect.name == "postgresql":
                _schema_lock(conn, self._prefix)
            for name in others:
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {quote(name)}")
