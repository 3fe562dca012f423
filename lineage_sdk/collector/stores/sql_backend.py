"""The sql backend: the engine's rows in SQLite or PostgreSQL, on SQLAlchemy 2 Core.

A :class:`~lineage_sdk.collector.backend.LineageBackend`: it stores and indexes rows and knows
nothing of OpenLineage. One table per row type (``{prefix}ev``, ``edge``, ``run``, ``coledge``,
``node``, ``mentions``), each keyed by the row's ``key`` fields. Their names are apart from
those of the releases before the engine (:data:`PRE_ENGINE_TABLES`, :class:`SqlPreEngineLayout`).

Why the tables look like this:

* Keys are hashes of the names (:func:`name_key`; a field's: its dataset's, then its name's),
  and text that answers are ordered or merged by is ``COLLATE "C"`` on PostgreSQL (code point
  order, as Python compares): docs/stores.md says why. Node order comes from an index on the
  names' first 200 characters (a prefix sorts as its string does), the rest sorted on ties.
* Mentions (one per run or run-less event naming a node in a role, with its statements) are
  keyed by their source first (``source, source_id, kind, node_key, role``), so ``delete`` and
  ``replace`` remove an event's or a run's by a prefix of the key. The rows themselves are
  appended in write order (a rowid table on SQLite), a node's read through a slim index
  (``kind, node_key``): a batch's mentions name nodes all over the key space, and a table or
  index keyed by node dirties a page a mention at every commit, a slim index the fewest.
  The table is ``mentions``: ``mention_by`` and ``statement`` (layout 7), ``stated`` (6) and
  the per-event ``mention`` of early development databases are other layouts.
* ``append`` writes one compiled statement per row type, as docs/stores.md says: an
  ``executemany`` of plain tuples, times pre-bound once per instant; on psycopg, one ``unnest``
  of binary column arrays, which costs the client far less per row. An upsert's ``SET`` reads
  each field's merge rule from the row type's metadata (``min``/``max`` ignore NULL, ``ranked``
  takes the rank's row, ``union`` ORs a bit set). One statement's upsert may not change a row
  twice on PostgreSQL, so rows of one key are joined first.
* Collections in filters travel as one parameter whatever their size (:func:`_within`): an
  array on PostgreSQL, an IN list up to SQLite's variable limit and ``json_each`` beyond it.

The choices the contract leaves open are the memory backend's
(:mod:`lineage_sdk.collector.stores.memory`), and ``tests/stores_nosql/test_backend_answers.py``
holds this backend to the same answers.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import random
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any, Literal, TypeVar

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.sql.util import ClauseAdapter

from lineage_sdk.collector.backend import (
    ColumnEdgeRow,
    EdgeRow,
    EventRow,
    Io,
    Key,
    MentionRow,
    NodeKind,
    NodeRow,
    Position,
    Ranked,
    Role,
    Rows,
    RunRow,
    Touched,
    check_window,
    merge,
)
from lineage_sdk.collector.store import EventKind, FieldRef, Page
from lineage_sdk.collector.stores.settings import SqlStoreConfig
from lineage_sdk.config.redaction import redact
from lineage_sdk.exceptions import ConfigError, StoreError

__all__ = [
    "PRE_ENGINE_TABLES",
    "UPGRADE_MARK_TABLE",
    "SqlBackend",
    "SqlStoreConfig",
    "UTCDateTime",
    "create_sql_engine",
    "name_key",
    "sql_reading",
    "sql_writing",
]

_CHUNK = 500  # keys per IN list: under SQLite's oldest variable limit (999)
#: Execution option marking a write transaction (SQLite: BEGIN IMMEDIATE; see create_sql_engine).
_WRITE_OPTION = "lineage_write"
#: SQLite's busy timeout (seconds), and the bound on retrying what SQLite refuses at once.
_BUSY_S = 30.0
#: SQLite's WAL pages before a commit checkpoints them into the file (default 1,000, 4 MB). A
#: batch of 200 events dirties about 1,400 pages: at the default each commit checkpointed; at
#: 10,000 one in seven or so does, copying a page once however often it was rewritten. 20,000
#: bench_million events in batches of 200 (three alternated runs each): the commits' process CPU
#: 1.08-1.12 -> 0.67-0.74 s, the whole write's 5.42-5.61 -> 5.00-5.38 s. The WAL grows to ~40 MB.
_WAL_CHECKPOINT_PAGES = 10_000


def name_key(namespace: str, name: str) -> str:
    """The fixed-size key of a job or dataset: 128 bits of a hash of ``namespace\\0name``
    (see the module docstring for why)."""
    return hashlib.blake2b(f"{namespace}\x00{name}".encode(), digest_size=16).hexdigest()


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """Aware UTC datetimes on every backend (SQLite stores naive text, compared as text)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _without_jit(dbapi_conn: Any, _record: Any) -> None:
    """``SET jit = off`` on a new PostgreSQL connection: reads are many short indexed lookups,
    and a planner misled by missing statistics (a fresh import, autovacuum off) JIT-compiles
    each of them (measured: 37 ms a walk query instead of 0.08 ms)."""
    info = getattr(dbapi_conn, "info", None)
    version = getattr(info, "server_version", None) or getattr(dbapi_conn, "server_version", 0)
    if isinstance(version, int) and version >= 110000:  # jit exists from PostgreSQL 11
        cur = dbapi_conn.cursor()
        cur.execute("SET jit = off")
        cur.close()
        dbapi_conn.commit()


def _create_private_file(path: Path) -> None:
    """Create the SQLite file 0600 (whatever the umask) before SQLite does: lineage can name
    private tables and jobs. SQLite gives its -wal and -shm files the main file's mode. An
    existing file is left as it is (its owner chose its mode)."""
    try:
        fd = os.open(
            path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o600
        )
    except OSError:  # it exists, or e.g. its directory does not: SQLAlchemy reports that
        return
    try:
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _url_of(url: str) -> sa.URL:
    """``url`` parsed; ConfigError naming ``store.sql.url`` when it is no SQLAlchemy URL."""
    try:
        return sa.make_url(url)
    except sa_exc.ArgumentError:
        raise ConfigError(
            "store.sql.url",
            redact(url),
            "a SQLAlchemy URL such as sqlite:///lineage.db or postgresql+psycopg://user@host/db",
        ) from None


def create_sql_engine(url: str, *, echo: bool = False) -> Engine:
    """The engine of a ``store.sql.url`` (ConfigError when it is no SQLAlchemy URL).

    SQLite: the file created 0600 first (:func:`_create_private_file`), WAL (:func:`_into_wal`),
    ``synchronous`` NORMAL, a checkpoint every :data:`_WAL_CHECKPOINT_PAGES` pages, a 30 s busy
    timeout, and transactions begun here, not by the driver:
    a connection whose execution options hold :data:`_WRITE_OPTION` begins with ``BEGIN
    IMMEDIATE`` (the write lock taken at BEGIN: a deferred transaction that read first fails at
    once, "database is locked", when another writer committed since its snapshot or holds the
    write lock). PostgreSQL: a small pool with pre-ping, and jit off (:func:`_without_jit`).
    """
    parsed = _url_of(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:" and not database.startswith("file:"):
            _create_private_file(Path(database))
        engine = sa.create_engine(parsed, echo=echo, connect_args={"timeout": _BUSY_S})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            if database and database != ":memory:":
                _into_wal(cur)
            # NORMAL in WAL survives a killed process; only power loss may lose the last commit.
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute(f"PRAGMA busy_timeout={int(_BUSY_S * 1000)}")
            cur.execute(f"PRAGMA wal_autocheckpoint={_WAL_CHECKPOINT_PAGES}")
            cur.close()
            # Transactions are begun below, not by the driver (see the docstring).
            dbapi_conn.isolation_level = None

        @sa.event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            immediate = conn.get_execution_options().get(_WRITE_OPTION)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine
    engine = sa.create_engine(parsed, echo=echo, pool_pre_ping=True, pool_size=2, max_overflow=4)
    if parsed.get_backend_name() == "postgresql":
        sa.event.listen(engine, "connect", _without_jit)
    return engine


def _into_wal(cursor: Any) -> None:
    """``PRAGMA journal_mode=WAL``, again while SQLite answers "database is locked" (within
    :data:`_BUSY_S`). Switching a file that is not in WAL yet (a new one, or an earlier
    release's) reads it, then upgrades to the write lock, and SQLite refuses that upgrade at
    once, busy timeout or not, while another connection holds the lock: one switching the same
    file at the same moment (collectors started together). The next try finds the file in WAL,
    where the pragma only reads."""
    deadline = time.monotonic() + _BUSY_S
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
        time.sleep(random.uniform(0.002, 0.02))  # noqa: S311 - jitter, not crypto


def _schema_lock(conn: Connection, prefix: str) -> None:
    """Take PostgreSQL's advisory lock of the tables named ``{prefix}...`` in the schema they
    are made in (``current_schema()``), until the transaction ends: a signed 64-bit hash."""
    schema = conn.execute(sa.select(sa.func.current_schema())).scalar()
    name = f"lineage-sdk schema {schema}.{prefix}".encode()
    key = int.from_bytes(hashlib.blake2b(name, digest_size=8).digest(), "big", signed=True)
    conn.execute(sa.select(sa.func.pg_advisory_xact_lock(key)))


@contextlib.contextmanager
def _changing_schema(engine: Engine, prefix: str, *, locked: bool = True) -> Iterator[Connection]:
    """One transaction that reads the schema, then changes it (``open``'s tables and indexes, the
    earlier layout's copy mark and drop), holding from its start the lock that other
    collectors opening the same database at the same moment take too, so they wait for it
    instead of failing. SQLite: ``BEGIN IMMEDIATE`` (a deferred transaction that read, then
    writes while another holds the write lock, is refused at once, "database is locked", not
    waited for). PostgreSQL: an advisory lock for the transaction (without it, a ``CREATE
    TABLE`` checked absent may meet another's: "relation ... already exists", or a unique
    violation of ``pg_type_typname_nsp_index``); not ``locked``: the caller takes it."""
    with engine.connect() as conn:
        conn.execution_options(**{_WRITE_OPTION: True})
        with conn.begin():
            if locked and conn.dialect.name == "postgresql":
                _schema_lock(conn, prefix)
            yield conn


def _made_meanwhile(exc: sa_exc.DBAPIError) -> bool:
    """A ``CREATE`` that met the same table made by another at the same moment (a collector of
    a release that takes no schema lock): a unique violation in the catalog (SQLSTATE 23505),
    "already exists" (42P07, 42710)."""
    return getattr(exc.orig, "sqlstate", None) in ("23505", "42P07", "42710")


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _reason(exc: BaseException) -> str:
    """One line naming the database's complaint, with any password in it removed."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip().splitlines()
    return redact(f"{type(orig or exc).__name__}: {text[0] if text else ''}")[:500]


_DEADLOCK_RETRIES = 3


def _store_error(name: str, address: str, exc: sa_exc.SQLAlchemyError) -> StoreError:
    if isinstance(exc, _TRANSIENT):
        return StoreError(name, f"{address}: {_reason(exc)}")
    # Integrity, data or programming errors repeat identically on every retry.
    return StoreError(name, _reason(exc), permanent=True)


def _deadlock(exc: sa_exc.OperationalError) -> bool:
    """PostgreSQL's deadlock (SQLSTATE 40P01) or serialization failure (40001)."""
    orig = getattr(exc, "orig", None)
    return getattr(orig, "sqlstate", None) in ("40P01", "40001")


_T = TypeVar("_T")
_Bind = Callable[[datetime | None], Any]

#: Characters of a namespace and a name in the node order index (4 bytes a character at most:
#: two of them stay under PostgreSQL's btree row limit of 2,704 bytes).
_PREFIX = 200
_STORED_KINDS: tuple[NodeKind, NodeKind] = ("JOB", "DATASET")
_HOLDS_BITS: dict[NodeKind, int] = {"JOB": 1, "DATASET": 2, "NAMESPACE": 4}
_NO_JOB = ""  # the key column of a row without a job (key columns cannot be NULL)
#: 'run' as SQL text: a partial index serves only a query holding its term as written.
_NOT_RUN: sa.ColumnClause[str] = sa.literal_column("'run'")
#: 'parent' as SQL text, for the same reason (the parent mentions' index).
_PARENT: sa.ColumnClause[str] = sa.literal_column("'parent'")
_TRANSIENT = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,
    sa_exc.DisconnectionError,
)


def _text() -> Any:
    """Text compared in code point order on every dialect (SQLite's BINARY, PostgreSQL's C)."""
    return sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


_HASH = sa.String(32)

#: A field key; ranges of it are read (code point order on PostgreSQL, whatever the locale).
_FIELD_HASH = sa.String(48).with_variant(sa.String(48, collation="C"), "postgresql")

_key_hash = functools.lru_cache(maxsize=1 << 16)(name_key)


@functools.lru_cache(maxsize=1 << 16)
def _field_hash(ref: FieldRef) -> str:
    """A field's key: its dataset's key, then 64 bits of a hash of its name (see the coledge
    table; two names of one dataset would need to collide in 64 bits to share a key).
    Remembered: a job's runs state the same fields again."""
    name = hashlib.blake2b(ref.field.encode(), digest_size=8).hexdigest()
    return _key_hash(ref.namespace, ref.dataset) + name


def _fields_of(column: Any, dataset_keys: Sequence[str]) -> Any:
    """``column`` (a field key) holds a field of one of the datasets: a key range each (two
    parameters a dataset: callers pass at most :data:`_RANGES` datasets)."""
    return sa.or_(*(column.between(k, k + "g") for k in dataset_keys))


_UNTIL: Any = sa.bindparam("t")  # the reads' ``until``, a parameter given at execution
_RANGES = _CHUNK // 4  # datasets per statement of key ranges (both sides: four parameters each)


def _ns_hash(namespace: str) -> str:
    return _key_hash(namespace, "")


def _job_hash(job: Key | None) -> str:
    return _NO_JOB if job is None else _key_hash(*job)


def _key(namespace: str | None, name: str | None) -> Key | None:
    return None if namespace is None or name is None else (namespace, name)


def _prefix(column: Any) -> Any:
    """The first characters of ``column``, as the node order index holds them (literal
    arguments: a bound parameter would not match the index expression)."""
    return sa.func.substr(column, sa.literal_column("1"), sa.literal_column(str(_PREFIX)))


class _Time(UTCDateTime):
    """:class:`UTCDateTime` as stored, read on SQLite by ``datetime.fromisoformat``: SQLAlchemy's
    SQLite ``DateTime`` parses each value with a regular expression, then ``UTCDateTime`` sets
    its zone; at two or three times a row, that was the largest part of a walk's reads."""

    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        if dialect.name == "sqlite":
            return lambda value: None if value is None else _sqlite_time(value)
        return super().bind_processor(dialect)

    def result_processor(self, dialect: Dialect, coltype: Any) -> Callable[[Any], Any] | None:
        if dialect.name == "sqlite":
            return _sqlite_parsed
        return super().result_processor(dialect, coltype)


@functools.lru_cache(maxsize=1 << 16)
def _sqlite_parsed(value: str | None) -> datetime | None:
    """A time as read (None as None), remembered: a job's edges, node and runs share its first
    event's time, and a walk reads each several times (a hit costs a tenth of a parse)."""
    return None if value is None else datetime.fromisoformat(value).replace(tzinfo=UTC)


def _tables(metadata: sa.MetaData, prefix: str) -> dict[str, sa.Table]:
    def table(name: str, *items: Any, **options: Any) -> sa.Table:
        return sa.Table(f"{prefix}{name}", metadata, *items, **options)

    def index(name: str, *columns: Any, **options: Any) -> sa.Index:
        return sa.Index(f"ix_{prefix}{name}", *columns, **options)

    # Columns are NOT NULL unless null=True.
    def time(name: str, *, null: bool = False) -> sa.Column[Any]:
        return sa.Column(name, _Time(), nullable=null)

    def text(name: str, *, key: bool = False, null: bool = False) -> sa.Column[Any]:
        return sa.Column(name, _text(), primary_key=key, nullable=null)

    def hashed(name: str, *, key: bool = False, null: bool = False) -> sa.Column[Any]:
        return sa.Column(name, _HASH, primary_key=key, nullable=null)

    ev = table(
        "ev",
        text("event_id", key=True),
        time("event_time"),
        sa.Column("kind", sa.String(8), nullable=False),
        text("event_type", null=True),
        text("run_id", null=True),
        hashed("job_key", null=True),
        text("job_ns", null=True),
        text("job_name", null=True),
        text("parent_run_id", null=True),
        hashed("ns_key", null=True),
        text("namespace", null=True),
        sa.Column("json", sa.Text, nullable=False),
        index("ev_time", "event_time", "event_id"),
        index("ev_run", "run_id", "event_time"),
        index("ev_job", "job_key", "event_time"),
        index("ev_ns", "ns_key", "event_time"),
    )
    # JobEvents and DatasetEvents, rare beside run events: an asOf walk asks for the jobs' few
    # static events, which the (job, time) index finds among every run event of the jobs.
    static = ev.c.kind != _NOT_RUN
    sa.Index(f"ix_{prefix}ev_static", ev.c.job_key, sqlite_where=static, postgresql_where=static)
    edge = table(
        "edge",
        hashed("job_key", key=True),
        sa.Column("io", sa.String(3), primary_key=True),  # the key serves (job, io)
        hashed("dataset_key", key=True),
        text("job_ns"),
        text("job_name"),
        text("dataset_ns"),
        text("dataset_name"),
        time("first_seen"),
        time("declared", null=True),
        # SQLite: the rows in the key's b-tree, the dataset side's index covering them, so a
        # walk's step reads no other page (a 300-key step: 1.6 -> 0.6 ms). PostgreSQL's btree
        # takes no 10,000-character names: it reads the rows from the heap.
        sqlite_with_rowid=False,
    )
    index("edge_dataset", edge.c.dataset_key, edge.c.io).ddl_if(dialect="postgresql")
    index(
        "edge_dataset_rows",
        *(edge.c[name] for name in ("dataset_key", "io", "job_ns", "job_name", "dataset_ns")),
        *(edge.c[name] for name in ("dataset_name", "first_seen", "declared")),
    ).ddl_if(dialect="sqlite")
    run = table(
        "run",
        text("run_id", key=True),
        hashed("job_key", key=True),  # _NO_JOB: no job
        text("job_ns", null=True),
        text("job_name", null=True),
        time("first_event"),
        time("last_event"),
        text("state_rank"),
        text("state_value", null=True),
        time("started_at", null=True),
        time("ended_at", null=True),
        text("parent_run_id", null=True),
        text("root_run_id", null=True),
        sa.Column("heartbeat_s", sa.Float),
        index("run_job", "job_key", "last_event"),
        index("run_parent", "parent_run_id"),
    )
    coledge = table(
        "coledge",
        # A field's key is its dataset's key then its name's hash (_field_hash): the key serves
        # outputs and, by range, output datasets; one index serves inputs and input datasets.
        # A dataset's fields share index pages, so an event's edges dirty few of them
        # (separate dataset-key indexes made the sql backend's commit the largest write cost).
        sa.Column("output_key", _FIELD_HASH, primary_key=True),
        sa.Column("input_key", _FIELD_HASH, primary_key=True),
        hashed("job_key", key=True),  # _NO_JOB: stated by a DatasetEvent
        text("output_ns"),
        text("output_dataset"),
        text("output_field"),
        text("input_ns"),
        text("input_dataset"),
        text("input_field"),
        text("job_ns", null=True),
        text("job_name", null=True),
        time("first_seen"),
        text("info_rank"),
        text("info_value", null=True),
        index("coledge_input", "input_key"),
        index("coledge_job", "job_key"),
    )
    node = table(
        "node",
        sa.Column("kind", sa.String(9), primary_key=True),
        hashed("node_key", key=True),
        text("ns"),
        text("name"),
        time("first_seen"),
        time("last_seen"),
        sa.Column("holds", sa.Integer, nullable=False),  # bits of _HOLDS_BITS
        # A rowid table on SQLite: a batch moves the last_seen of most nodes it names, rewriting
        # each row of a WITHOUT ROWID b-tree but updated in place here (the key's index left
        # alone). 20,000 bench_million events, three alternated runs: the node upserts' CPU
        # 0.43-0.44 -> 0.31 s, the write's 5.14-5.23 -> 4.87-5.16 s. A read by key seeks the index,
        # then the row (walks read none); an earlier release's WITHOUT ROWID table is kept.
    )
    index("node_order", node.c.kind, _prefix(node.c.ns), _prefix(node.c.name))

    # Appended in write order (a rowid table on SQLite, a heap on PostgreSQL) and keyed by
    # source (see the module docstring); a node's are read through the node index, a row each.
    # The names are the node row's, mapped back from the hashes a read asks for.
    mentions = table(
        "mentions",
        sa.Column("source", sa.String(5), nullable=False),
        text("source_id"),
        sa.Column("kind", sa.String(9), nullable=False),
        hashed("node_key"),
        sa.Column("role", sa.String(8), nullable=False),
        time("first_seen"),
        text("detail", null=True),  # its statements, one a line (MentionRow.detail)
        sa.PrimaryKeyConstraint("source", "source_id", "kind", "node_key", "role"),
        index("mentions_node", "kind", "node_key"),
    )
    # A job's children (the parent view) were found among every mention of each job asked, a
    # table row each (five runs a job at the million). Slim, as mentions_node: covering the rows
    # read no faster and cost the import 7-9% (docs/design/engine.md, 21). On PostgreSQL too:
    # the parent view's mention reads at the million 20-23 -> 9 ms an answer (section 24).
    on = {f"{dialect}_where": mentions.c.role == _PARENT for dialect in ("sqlite", "postgresql")}
    index("mentions_parent", mentions.c.kind, mentions.c.node_key, **on)
    # What the backend keeps of itself: the derivation version (``derivation``).
    meta = table("meta", text("name", key=True), sa.Column("value", sa.Integer, nullable=False))
    tables = (ev, edge, run, coledge, node, mentions, meta)
    return {t.name[len(prefix) :]: t for t in tables}


# -- rows as table tuples (in table column order) and back ------------------------------------


def _event_values(r: EventRow, t: _Bind) -> tuple[Any, ...]:
    job, ns = r.job, r.namespace
    return (
        r.event_id,
        t(r.event_time),
        r.kind,
        r.event_type,
        r.run_id,
        None if job is None else _key_hash(*job),
        *(job or (None, None)),
        r.parent_run_id,
        None if ns is None else _ns_hash(ns),
        ns,
        r.json,
    )


def _edge_values(r: EdgeRow, t: _Bind) -> tuple[Any, ...]:
    return (
        _key_hash(*r.job),
        r.io,
        _key_hash(*r.dataset),
        *r.job,
        *r.dataset,
        t(r.first_seen),
        t(r.declared),
    )


def _run_values(r: RunRow, t: _Bind) -> tuple[Any, ...]:
    job = r.job
    return (
        r.run_id,
        _job_hash(job),
        *(job or (None, None)),
        t(r.first_event),
        t(r.last_event),
        r.state.rank,
        r.state.value,
        t(r.started_at),
        t(r.ended_at),
        r.parent_run_id,
        r.root_run_id,
        r.heartbeat_s,
    )


def _column_values(r: ColumnEdgeRow, t: _Bind) -> tuple[Any, ...]:
    out, inp, job = r.output, r.input, r.job
    return (
        _field_hash(out),
        _field_hash(inp),
        _job_hash(job),
        *out,
        *inp,
        *(job or (None, None)),
        t(r.first_seen),
        r.info.rank,
        r.info.value,
    )


#: Each bit set's kinds, made once (a walk reads thousands of node rows).
_HOLDS_OF: dict[int, frozenset[NodeKind]] = {
    bits: frozenset(kind for kind, bit in _HOLDS_BITS.items() if bits & bit) for bits in range(8)
}


def _node_values(r: NodeRow, t: _Bind) -> tuple[Any, ...]:
    return (
        r.kind,
        _key_hash(*r.key),
        *r.key,
        t(r.first_seen),
        t(r.last_seen),
        sum(_HOLDS_BITS[kind] for kind in r.holds),  # a set of distinct bits: their OR
    )


def _mention_values(r: MentionRow, t: _Bind) -> tuple[Any, ...]:
    detail = None if r.detail is None else "\n".join(sorted(r.detail))
    return (r.source, r.source_id, r.kind, _key_hash(*r.key), r.role, t(r.first_seen), detail)


# Rows read back from whole-table selects, unpacked by position (table column order): a named
# access per field cost more than the query on a walk's thousand run rows.


def _event_row(r: Any) -> EventRow:
    event_id, at, kind, event_type, run_id, _, job_ns, job_name, parent, _, namespace, body = r
    job = _key(job_ns, job_name)
    return EventRow(event_id, at, kind, event_type, run_id, job, parent, namespace, body)


def _run_row(r: Any) -> RunRow:
    run_id, _, job_ns, job_name, first, last, rank, value, started, ended, parent, root, beat = r
    state = Ranked(rank, value)
    job = _key(job_ns, job_name)
    return RunRow(run_id, job, first, last, state, started, ended, parent, root, beat)


def _node_row(r: Any) -> NodeRow:
    kind, _, namespace, name, first, last, holds = r
    return NodeRow(kind, (namespace, name), first, last, _HOLDS_OF[holds])


def _mention_row(r: Any, keys: dict[str, Key]) -> MentionRow:
    source, source_id, kind, node_key, role, first_seen, detail = r
    entries = None if detail is None else frozenset(detail.split("\n"))
    return MentionRow(source, source_id, kind, keys[node_key], role, first_seen, entries)


@dataclass(frozen=True, slots=True)
class _Kind:
    """How one row type is written: its table, its tuple, and whether it merges."""

    table: str
    row: type
    values: Callable[[Any, _Bind], tuple[Any, ...]]
    merges: bool


#: The order of writes: events first (the contract: an event's row no later than its derived
#: rows; in one transaction that holds), then what they derive, each with the rows it takes.
_KINDS: tuple[tuple[Callable[[Rows], Sequence[Any]], _Kind], ...] = (
    (attrgetter("events"), _Kind("ev", EventRow, _event_values, merges=False)),
    (attrgetter("mentions"), _Kind("mentions", MentionRow, _mention_values, merges=True)),
    (attrgetter("edges"), _Kind("edge", EdgeRow, _edge_values, merges=True)),
    (attrgetter("runs"), _Kind("run", RunRow, _run_values, merges=True)),
    (attrgetter("columns"), _Kind("coledge", ColumnEdgeRow, _column_values, merges=True)),
    (attrgetter("nodes"), _Kind("node", NodeRow, _node_values, merges=True)),
)


def _merged(insert: Any, table: sa.Table, row: type, dialect: Dialect) -> Any:
    """``insert`` as an upsert that joins a row into the stored one by ``row``'s merge rules
    (:mod:`lineage_sdk.collector.backend`), updating only a row the join changes."""
    x, sqlite = insert.excluded, dialect.name == "sqlite"
    set_: dict[str, Any] = {}
    changes: list[Any] = []
    for f in fields(row):
        rule = f.metadata.get("merge", "first")
        if rule in ("min", "max"):
            old, new = table.c[f.name], x[f.name]
            better = new < old if rule == "min" else new > old
            if sqlite:  # SQLite's scalar min/max answer NULL if an argument is NULL
                pick = sa.func.min if rule == "min" else sa.func.max
                set_[f.name] = pick(sa.func.coalesce(old, new), sa.func.coalesce(new, old))
            else:  # LEAST/GREATEST ignore NULL
                set_[f.name] = (sa.func.least if rule == "min" else sa.func.greatest)(old, new)
            changes.append(sa.or_(better, sa.and_(old.is_(None), new.is_not(None))))
        elif rule == "ranked":
            rank, value = f"{f.name}_rank", f"{f.name}_value"
            wins = x[rank] > table.c[rank]
            set_[rank] = sa.case((wins, x[rank]), else_=table.c[rank])
            set_[value] = sa.case((wins, x[value]), else_=table.c[value])
            changes.append(wins)
        elif rule == "union" and isinstance(table.c[f.name].type, sa.Integer):  # bit sets
            joined = table.c[f.name].op("|")(x[f.name])
            set_[f.name] = joined
            changes.append(joined != table.c[f.name])
        elif rule == "union":  # sets of lines (_mention_values): the new lines added
            old, new = table.c[f.name], x[f.name]
            eol: Any = sa.literal_column("char(10)" if sqlite else "chr(10)")  # no parameter
            lines = (eol + old + eol, eol + new + eol)
            find = sa.func.instr(*lines) if sqlite else sa.func.strpos(*lines)
            held = sa.or_(new.is_(None), sa.and_(old.is_not(None), find > sa.literal_column("0")))
            set_[f.name] = sa.case((held, old), (old.is_(None), new), else_=old + eol + new)
            changes.append(sa.not_(held))
    return insert.on_conflict_do_update(
        index_elements=[c.name for c in table.primary_key.columns],
        set_=set_,
        where=sa.or_(*changes),
    )


@dataclass(frozen=True, slots=True)
class _Write:
    """One row type's compiled statement, and the order its tuples are written in."""

    sql: str
    order: Callable[[tuple[Any, ...]], Any]
    #: One statement of column arrays (psycopg) instead of an ``executemany``.
    columnar: bool = False


def _unnest(table: sa.Table, dialect: Dialect, conflict: str = "DO NOTHING") -> str:
    """``table``'s insert of one array per column, ``conflict`` deciding what a stored key
    does (an upsert's ``ON CONFLICT`` tail): psycopg's ``executemany`` costs more per row in
    the client than the server's insert does."""
    quote = dialect.identifier_preparer.quote
    types = {_Time: "timestamptz", sa.Float: "float8", sa.Integer: "int4"}
    names = ", ".join(quote(c.name) for c in table.columns)
    arrays = ", ".join(f"%b::{types.get(type(c.type), 'text')}[]" for c in table.columns)
    # Identifiers from this module's metadata, quoted by the dialect; values are parameters.
    return (
        f"INSERT INTO {quote(table.name)} ({names}) SELECT * FROM unnest({arrays}) "  # noqa: S608
        f"ON CONFLICT {conflict}"
    )


def _distinct(
    values: list[tuple[Any, ...]],
    items: Sequence[Any],
    key: Callable[[tuple[Any, ...]], Any],
    kind: _Kind,
    bind: _Bind,
) -> list[tuple[Any, ...]]:
    """``values`` with one tuple per key, rows of one key joined by their merge rules: one
    statement's upsert may not change a row twice (PostgreSQL refuses it)."""
    if len({key(v) for v in values}) == len(values):
        return values
    joined: dict[Any, Any] = {}
    for row, v in zip(items, values, strict=True):
        k = key(v)
        old = joined.get(k)
        joined[k] = row if old is None else merge(old, row)
    return [kind.values(row, bind) for row in joined.values()]


class _Times(dict[datetime | None, Any]):
    """Times as bound, each converted once per batch (an event's time recurs in its derived
    rows); a hit is one C-level lookup."""

    def __init__(self, convert: Callable[[datetime], Any]) -> None:
        super().__init__({None: None})
        self._convert = convert

    def __missing__(self, at: datetime) -> Any:
        found = self[at] = self._convert(at)
        return found


def _utc(at: datetime) -> datetime:
    """``at`` as :class:`UTCDateTime` binds it on PostgreSQL (aware, UTC)."""
    return at if at.tzinfo is UTC else at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)


def _sqlite_time(at: datetime) -> str:
    """``at`` as :class:`UTCDateTime` stores it on SQLite (naive UTC text, microseconds always),
    formatted directly: SQLAlchemy's two processors per value cost more than the insert."""
    if at.tzinfo is not None and at.tzinfo is not UTC:
        at = at.astimezone(UTC)
    return at.replace(tzinfo=None).isoformat(" ", "microseconds")


def _sqlite_functions(dbapi_conn: Any, _record: Any) -> None:
    """``lineage_lower``: Python's ``str.lower`` (SQLite's ``lower`` folds ASCII only), so
    ``text`` matches as the memory backend's does."""
    dbapi_conn.create_function(
        "lineage_lower", 1, lambda s: None if s is None else str(s).lower(), deterministic=True
    )


@contextlib.contextmanager
def sql_reading(db: Engine, name: str, address: str) -> Iterator[Connection]:
    """A connection of ``db``, its errors as StoreError naming ``name`` at ``address``."""
    try:
        with db.connect() as conn:
            yield conn
    except sa_exc.SQLAlchemyError as exc:
        raise _store_error(name, address, exc) from None


def sql_writing(db: Engine, name: str, address: str, work: Callable[[Connection], _T]) -> _T:
    """``work`` in one write transaction (SQLite: the write lock taken at BEGIN), done again
    when PostgreSQL breaks a deadlock by rolling it back."""
    for attempt in range(_DEADLOCK_RETRIES + 1):
        try:
            with db.connect() as conn:
                conn.execution_options(**{_WRITE_OPTION: True})
                with conn.begin():
                    return work(conn)
        except sa_exc.SQLAlchemyError as exc:
            retry = isinstance(exc, sa_exc.OperationalError) and _deadlock(exc)
            if not retry or attempt == _DEADLOCK_RETRIES:
                raise _store_error(name, address, exc) from None
            time.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


class SqlBackend:
    """SQLite or PostgreSQL rows through one SQLAlchemy engine (see the module docstring)."""

    name = "sql"

    def __init__(self, url: str, *, table_prefix: str = "lineage_", echo: bool = False) -> None:
        self._url = url
        self._echo = echo
        #: What ``lineage-collector check`` shows: the URL without its password.
        self.address = redact(url)
        self._prefix = table_prefix
        self._metadata = sa.MetaData()
        self._t = _tables(self._metadata, table_prefix)
        self._statements: dict[tuple[Any, ...], Any] = {}  # the reads', by shape: see _built
        self._engine: Engine | None = None
        self._reads: Engine | None = None  # the reads' (see open)
        self._writes: dict[str, dict[str, _Write]] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def _db(self) -> Engine:
        if self._engine is None:
            raise StoreError(self.name, "store is not open")
        return self._engine

    def open(self) -> None:
        if self._engine is not None:
            return
        try:
            engine = create_sql_engine(self._url, echo=self._echo)
            if engine.dialect.name == "sqlite":
                sa.event.listen(engine, "connect", _sqlite_functions)
            elif engine.dialect.name != "postgresql":
                engine.dispose()
                raise StoreError(
                    self.name, f"unsupported SQL dialect {engine.dialect.name!r}", permanent=True
                )
            self._engine = engine
            try:
                with _changing_schema(engine, self._prefix) as conn:
                    # Layouts 6 and 7 kept statements apart from mentions: dropped, and the
                    # version marked 0, in one transaction, so the engine derives them again.
                    earlier = [f"{self._prefix}{n}" for n in ("stated", "statement", "mention_by")]
                    earlier = [n for n in earlier if sa.inspect(conn).has_table(n)]
                    for name in earlier:
                        quoted = conn.dialect.identifier_preparer.quote(name)
                        conn.exec_driver_sql(f"DROP TABLE {quoted}")
                    self._metadata.create_all(conn, checkfirst=True)
                    if earlier:
                        self._mark(conn, 0)
            except (sa_exc.IntegrityError, sa_exc.ProgrammingError) as exc:
                if not _made_meanwhile(exc):
                    raise
                # Another collector created the tables at the same moment: they exist now.
                with _changing_schema(engine, self._prefix) as conn:
                    self._metadata.create_all(conn, checkfirst=True)
            self._add_missing_indexes(engine)
            # Autocommit reads where a statement has its own snapshot anyway (engine.md, 12).
            rc = engine.dialect.default_isolation_level == "READ COMMITTED"  # SQLite: SERIALIZABLE
            self._reads = engine.execution_options(isolation_level="AUTOCOMMIT") if rc else engine
        except (ConfigError, StoreError):
            raise
        except (sa_exc.SQLAlchemyError, ImportError, OSError) as exc:
            self.close()
            raise StoreError(self.name, f"cannot open {self.address}: {_reason(exc)}") from None

    def _add_missing_indexes(self, engine: Engine) -> None:
        """The indexes a table made by an earlier release lacks (``create_all`` skips a table
        that exists, and its indexes with it), built at open, once: on a big table this takes a
        while, and PostgreSQL holds writes to it meanwhile. ``IF NOT EXISTS``: two collectors
        opening at once both succeed."""
        with engine.connect() as conn:
            absent = _absent_indexes(conn, self._metadata.sorted_tables)
        for ix in absent:
            with _changing_schema(engine, self._prefix) as conn:
                conn.execute(sa.schema.CreateIndex(ix, if_not_exists=True))

    def check(self) -> None:
        with self._reading() as conn:
            conn.execute(sa.select(sa.literal(1)))

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = self._reads = None

    def missing(self) -> list[str]:
        """What :meth:`open` would create (tables, indexes), found without creating anything
        (``lineage-collector check``), and the events of the layout of a release before the
        engine (:class:`SqlPreEngineLayout`) that the next open copies; raises StoreError if
        the database cannot be reached. A SQLite file that does not exist is reported, not
        created."""
        url = _url_of(self._url)
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            path = Path(str(url.database))
            if not str(url.database).startswith("file:") and not path.is_file():
                return [f"database file {path}"]
        engine = sa.create_engine(url)  # no pragmas: nothing is written, not even WAL's files
        try:
            with engine.connect() as conn:
                tables = set(sa.inspect(conn).get_table_names())
                found = [f"table {t.name}" for t in self._t.values() if t.name not in tables]
                present = [t for t in self._t.values() if t.name in tables]
                found += [f"index {ix.name}" for ix in _absent_indexes(conn, present)]
                earlier = _pre_engine_count(conn, self._prefix, tables)
                if earlier:
                    found.append(
                        f"{earlier} event(s) in the layout of a release before the engine "
                        "(copied into the new tables at the next open, or by "
                        "lineage-collector store init)"
                    )
                return found
        except (sa_exc.SQLAlchemyError, ImportError, OSError) as exc:
            raise StoreError(self.name, f"cannot open {self.address}: {_reason(exc)}") from None
        finally:
            engine.dispose()

    # -- connections and errors ---------------------------------------------------------------

    def _reading(self) -> contextlib.AbstractContextManager[Connection]:
        return sql_reading(self._reads or self._db, self.name, self.address)

    def _writing(self, work: Callable[[Connection], _T]) -> _T:
        return sql_writing(self._db, self.name, self.address, work)

    def _built(self, shape: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        """A read's statement, built once a ``shape``, its values named parameters: built at
        every call, it left objects in reference cycles (docs/design/engine.md section 12)."""
        if (statement := self._statements.get(shape)) is None:
            statement = self._statements[shape] = build()
        return statement

    # -- writes ------------------------------------------------------------------------------

    def _compiled(self, dialect: Dialect) -> dict[str, _Write]:
        """Each row type's statement, compiled once per dialect: ``executemany`` of plain tuples
        leaves the database's own work alone (SQLAlchemy's per-row parameter processing costs
        more than the insert)."""
        found = self._writes.get(dialect.name)
        if found is not None:
            return found
        insert: Any = pg_dialect.insert if dialect.name == "postgresql" else sqlite_dialect.insert
        if not dialect.positional and dialect.name == "postgresql":
            # psycopg takes %s with tuples as well as %(name)s with dicts: no dict per row.
            positional: Any = type(dialect)
            dialect = positional(paramstyle="format")
        found = {}
        for _, kind in _KINDS:
            table = self._t[kind.table]
            if kind.merges:
                stmt = _merged(insert(table), table, kind.row, dialect)
            else:
                stmt = insert(table).on_conflict_do_nothing()
            columns = [c.key for c in table.columns]
            compiled = stmt.compile(dialect=dialect, column_keys=columns)
            key = itemgetter(*(columns.index(c.key) for c in table.primary_key.columns))
            if dialect.driver == "psycopg":  # %b: psycopg's binary
                # An upsert's tail (no parameters: the merge reads only columns) after VALUES.
                _, on_conflict, tail = compiled.string.partition(" ON CONFLICT ")
                if "%" in tail or (kind.merges and not on_conflict):
                    raise AssertionError(f"unexpected upsert for {table.name}: {compiled.string}")
                conflict = tail if kind.merges else "DO NOTHING"
                found[kind.table] = _Write(_unnest(table, dialect, conflict), key, columnar=True)
            elif compiled.positiontup == columns:  # plain tuples, in table-column order
                found[kind.table] = _Write(compiled.string, key)
            else:
                raise AssertionError(f"unexpected parameters for {table.name}: {compiled.string}")
        self._writes[dialect.name] = found
        return found

    def _write(self, conn: Connection, rows: Rows) -> None:
        dialect = conn.dialect
        writes = self._compiled(dialect)
        bind = _Times(_sqlite_time if dialect.name == "sqlite" else _utc).__getitem__

        ordered = dialect.name == "postgresql"  # SQLite has one writer at a time: no deadlock
        for pick, kind in _KINDS:
            items = pick(rows)
            if items:
                write = writes[kind.table]
                values = [kind.values(row, bind) for row in items]
                if write.columnar and kind.merges:
                    values = _distinct(values, items, write.order, kind, bind)
                if ordered:
                    values.sort(key=write.order)
                if write.columnar:
                    arrays = tuple(list(column) for column in zip(*values, strict=True))
                    conn.exec_driver_sql(write.sql, arrays)
                else:
                    conn.exec_driver_sql(write.sql, values)

    @staticmethod
    def _refuse_namespaces(rows: Rows) -> None:
        """Checked before any write, so a refused batch leaves nothing half-written."""
        if any(node.kind == "NAMESPACE" for node in rows.nodes):
            raise ValueError("NAMESPACE node rows are answered from JOB and DATASET rows")

    def append(self, rows: Rows) -> None:
        self._refuse_namespaces(rows)
        if any((rows.events, rows.mentions, rows.edges, rows.runs, rows.columns, rows.nodes)):
            self._writing(lambda conn: self._write(conn, rows))

    def delete(self, event_ids: Sequence[str]) -> list[EventRow]:
        ids = sorted(set(event_ids))
        if not ids:
            return []
        ev = self._t["ev"]

        def work(conn: Connection) -> list[EventRow]:
            query = sa.select(ev).where(_within(conn, ev.c.event_id, ids))
            removed = [_event_row(r) for r in conn.execute(query).all()]
            gone = [r.event_id for r in removed]
            if gone:  # by (source, source_id), the mention key's prefix
                self._drop_sourced(conn, "event", gone)
                conn.execute(sa.delete(ev).where(_within(conn, ev.c.event_id, gone)))
            return sorted(removed, key=lambda r: r.position)

        return self._writing(work)

    def _drop_sourced(self, conn: Connection, source: str, ids: Collection[str]) -> None:
        """The mentions whose source is one of ``ids`` (a prefix of their key)."""
        m = self._t["mentions"]
        conn.execute(sa.delete(m).where(m.c.source == source, _within(conn, m.c.source_id, ids)))

    def replace(self, touched: Touched, rows: Rows) -> None:
        self._refuse_namespaces(rows)
        t, hashed = self._t, {kind: [_key_hash(*k) for k in ks] for kind, ks in touched.nodes}
        jobs, datasets, runs = hashed["JOB"], hashed["DATASET"], sorted(touched.runs)

        def work(conn: Connection) -> None:
            col = t["coledge"].c
            every = ("edge", "coledge", "run", "node", "mentions")
            for name in every if touched.every else ():
                conn.execute(sa.delete(t[name]))
            if jobs:
                conn.execute(sa.delete(t["edge"]).where(_within(conn, t["edge"].c.job_key, jobs)))
                conn.execute(sa.delete(t["coledge"]).where(_within(conn, col.job_key, jobs)))
                m = t["mentions"].c  # the jobs' children, as parents ("job" mentions)
                of = sa.and_(m.kind == "JOB", _within(conn, m.node_key, jobs), m.source == "job")
                conn.execute(sa.delete(t["mentions"]).where(of))
            for some in _chunks(sorted(set(datasets)), _RANGES):
                stated = sa.and_(col.job_key == _NO_JOB, _fields_of(col.output_key, some))
                conn.execute(sa.delete(t["coledge"]).where(stated))
            if runs:
                conn.execute(sa.delete(t["run"]).where(_within(conn, t["run"].c.run_id, runs)))
                self._drop_sourced(conn, "run", runs)
            node = t["node"].c
            for kind, keys in hashed.items():
                if keys:
                    of_kind = sa.and_(node.kind == kind, _within(conn, node.node_key, keys))
                    conn.execute(sa.delete(t["node"]).where(of_kind))
            self._write(conn, rows)

        self._writing(work)

    def derivation(self) -> int | None:
        meta = self._t["meta"]
        with self._reading() as conn:
            return conn.execute(sa.select(meta.c.value).where(meta.c.name == "derivation")).scalar()

    def mark_derivation(self, version: int) -> None:
        self._writing(lambda conn: self._mark(conn, version))

    def _mark(self, conn: Connection, version: int) -> None:
        """An upsert: collectors opening at once all mark it."""
        dialect = pg_dialect if conn.dialect.name == "postgresql" else sqlite_dialect
        mark = dialect.insert(self._t["meta"]).values(name="derivation", value=version)
        conn.execute(mark.on_conflict_do_update(index_elements=["name"], set_=mark.excluded))

    # -- reads -------------------------------------------------------------------------------

    def edges(
        self,
        end: Literal["JOB", "DATASET"],
        keys: Collection[Key],
        io: Io,
        *,
        until: datetime | None = None,
    ) -> Iterable[EdgeRow]:
        if end not in ("JOB", "DATASET"):
            raise ValueError(f"edges end must be JOB or DATASET, not {end!r}")
        if not keys:
            return []
        c = self._t["edge"].c
        with self._reading() as conn:
            form, value = _keys_param(conn, [_key_hash(*k) for k in keys])

            def build() -> Any:
                column = c.job_key if end == "JOB" else c.dataset_key
                query = sa.select(
                    c.job_ns, c.job_name, c.dataset_ns, c.dataset_name, c.first_seen, c.declared
                ).where(_in(column, form, None, "keys"), c.io == sa.bindparam("io"))
                return query if until is None else query.where(c.first_seen < _UNTIL)

            # Plain tuples in one fetch: a walk reads thousands of edges, and SQLAlchemy's
            # row-by-row iteration and named access cost more than the query.
            query = self._built(("edges", end, form, until is None), build)
            found = conn.execute(query, {"keys": value, "io": io, "t": until}).all()
        return [  # a set: the contract leaves the order free
            EdgeRow((jn, jname), (dn, dname), io, first, declared)
            for jn, jname, dn, dname, first, declared in found
        ]

    def nodes(
        self,
        kind: NodeKind,
        *,
        keys: Collection[Key] | None = None,
        namespace: str | None = None,
        text: str | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        offset: int = 0,
        count: bool = False,
    ) -> Page[NodeRow]:
        check_window(limit, offset)
        if kind == "NAMESPACE":
            return self._namespaces(keys, namespace, text, until, limit, offset, count)
        node = self._t["node"]
        if keys is not None and not keys:
            return Page([], 0)
        with self._reading() as conn:
            form, value = _keys_param(conn, [_key_hash(*k) for k in keys]) if keys else (None, None)

            def build() -> Any:
                query = sa.select(node).where(node.c.kind == sa.bindparam("kind"))
                if form is not None:
                    query = query.where(_in(node.c.node_key, form, None, "keys"))
                if namespace is not None:  # the prefix first: what the order index holds
                    ns = sa.bindparam("ns", type_=sa.Text)
                    query = query.where(_prefix(node.c.ns) == _prefix(ns), node.c.ns == ns)
                if text is not None:
                    matches = _lower(conn, node.c.name).contains(text.lower(), autoescape=True)
                    query = query.where(matches)
                return query if until is None else query.where(node.c.first_seen < _UNTIL)

            params = {"kind": kind, "keys": value, "ns": namespace, "t": until}
            if keys is not None and limit is None and offset == 0:
                # A lookup by key (a walk's names): by the primary key, sorted here. With the
                # ORDER BY, SQLite walks every node of the kind through the order index and sorts
                # (100,000 events: 36 ms a lineage read against 6 ms for the old store's names).
                shape = ("nodes", form, namespace is None, until is None)
                query = build() if text is not None else self._built(shape, build)
                rows = conn.execute(query, params).all()
                found = sorted(map(_node_row, rows), key=attrgetter("key"))
                return Page(found, len(found))
            order = (_prefix(node.c.ns), node.c.ns, _prefix(node.c.name), node.c.name)
            return self._paged(conn, build(), order, limit, offset, count, _node_row, params)

    def _namespaces(
        self,
        keys: Collection[Key] | None,
        namespace: str | None,
        text: str | None,
        until: datetime | None,
        limit: int | None,
        offset: int,
        count: bool,
    ) -> Page[NodeRow]:
        """One row per namespace holding a JOB or DATASET row first seen before ``until``; its
        name is "", so only an empty ``text`` matches it."""
        names = None if keys is None else sorted({ns for ns, name in keys if name == ""})
        if (names is not None and not names) or (text is not None and text.lower()):
            return Page([], 0)
        c = self._t["node"].c
        holds = [
            sa.func.max(sa.case((c.kind == kind, _HOLDS_BITS[kind]), else_=0)).label(kind)
            for kind in _STORED_KINDS
        ]
        query = sa.select(
            c.ns,
            sa.func.min(c.first_seen).label("first_seen"),
            sa.func.max(c.last_seen).label("last_seen"),
            *holds,
        ).where(c.kind.in_(_STORED_KINDS))
        with self._reading() as conn:
            if names is not None:
                query = query.where(_within(conn, c.ns, names))
            if namespace is not None:
                query = query.where(c.ns == namespace)
            if until is not None:
                query = query.where(c.first_seen < until)
            query = query.group_by(c.ns)

            def row(r: Any) -> NodeRow:
                bits = sum(getattr(r, kind) for kind in _STORED_KINDS)
                return NodeRow("NAMESPACE", (r.ns, ""), r.first_seen, r.last_seen, _HOLDS_OF[bits])

            return self._paged(conn, query, (c.ns,), limit, offset, count, row)

    def runs(
        self,
        *,
        jobs: Collection[Key] | None = None,
        run_ids: Collection[str] | None = None,
        parent: str | None = None,
        until: datetime | None = None,
        latest: int | None = None,
        limit: int | None = None,
        offset: int = 0,
        count: bool = False,
    ) -> Page[RunRow]:
        if latest is not None and latest < 0:
            raise ValueError(f"latest must not be negative, not {latest!r}")
        check_window(limit, offset)
        run = self._t["run"]
        job_keys = None if jobs is None else [_key_hash(*j) for j in jobs if j is not None]
        if (job_keys is not None and not job_keys) or (run_ids is not None and not run_ids):
            return Page([], 0)
        with self._reading() as conn:
            ids = (None, None) if run_ids is None else _keys_param(conn, run_ids)
            of = (None, None) if job_keys is None else _keys_param(conn, job_keys)

            def build() -> Any:
                c, t = run.c, None if until is None else _UNTIL
                where = [] if ids[0] is None else [_in(c.run_id, ids[0], None, "ids")]
                where += [] if parent is None else [c.parent_run_id == sa.bindparam("parent")]
                if latest is None:
                    where += [] if of[0] is None else [_in(c.job_key, of[0], None, "jobs")]
                    where += [] if t is None else [c.first_event < t]
                    return sa.select(run).where(*where).order_by(*_run_order(c))
                # The views' hot read (jobs, latest=1): ~770 objects left in cycles when built.
                found = self._latest(conn, of[0], where, t, latest).subquery()
                return sa.select(found).order_by(*_run_order(found.c))

            keys = sorted(set(job_keys or ()))  # _key_table's
            params = {"ids": ids[1], "jobs": of[1], "parent": parent, "t": until}
            params["keys"] = keys if conn.dialect.name == "postgresql" else json.dumps(keys)
            if limit is None and not (offset or count):  # built once (see _built)
                shape = ("runs", ids[0], of[0], parent is None, until is None, latest)
                query = self._built(shape, build)
                return Page([_run_row(r) for r in conn.execute(query, params).all()])
            return self._paged(conn, build(), (), limit, offset, count, _run_row, params)

    def _latest(
        self, conn: Connection, form: str | None, where: list[Any], until: Any, latest: int
    ) -> Any:
        """Per job the ``latest`` runs of the greatest last event (before ``until``, a
        parameter, or None; ties: the least run id), plus the runs spanning ``until``. With a
        ``form``, of the jobs of the parameters ``keys`` (:func:`_key_table`) and ``jobs``
        (:func:`_in`), read from the (job, last event) index, newest first, so a job's cost does
        not grow with its runs (ranking every run of the jobs took 14 ms of a 70 ms walk at
        100,000 events)."""
        run = self._t["run"]
        if form is None:
            number = (
                sa.func.row_number()
                .over(partition_by=run.c.job_key, order_by=(run.c.last_event.desc(), run.c.run_id))
                .label("n")
            )
            ended = [*where] if until is None else [*where, run.c.last_event < until]
            ranked: Any = sa.select(run, number).where(*ended).subquery()
            top = sa.select(*(ranked.c[c.name] for c in run.columns)).where(ranked.c.n <= latest)
        else:
            keys, ranked = _key_table(conn), run.alias("ranked")
            ended = [] if until is None else [ranked.c.last_event < until]
            aliased: Any = map(ClauseAdapter(ranked).traverse, where)  # where, on the alias
            rows = (
                sa.select(ranked.c.run_id)
                .where(ranked.c.job_key == keys.c.value, *aliased, *ended)
                .order_by(ranked.c.last_event.desc(), ranked.c.run_id)
                .limit(latest)
            )
            top = sa.select(run).select_from(keys)
            if conn.dialect.name == "postgresql":
                top_ids = rows.lateral("top")
                top, picked = top.join(top_ids, sa.true()), run.c.run_id == top_ids.c.run_id
            else:  # SQLite evaluates the correlated subquery once per key, then reads by the key
                picked = run.c.run_id.in_(rows.scalar_subquery())
            top = top.join(run, sa.and_(run.c.job_key == keys.c.value, picked))
            where = [_in(run.c.job_key, form, None, "jobs"), *where]
        if until is None:
            return top
        spanning = [*where, run.c.first_event < until, run.c.last_event >= until]  # spanning it
        return sa.union_all(top, sa.select(run).where(*spanning))

    def events(
        self,
        *,
        ids: Collection[str] | None = None,
        run_ids: Collection[str] | None = None,
        jobs: Collection[Key] | None = None,
        kinds: Collection[EventKind] | None = None,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: Position | None = None,
        descending: bool = False,
        limit: int | None = None,
        offset: int = 0,
        count: bool = False,
    ) -> Page[EventRow]:
        check_window(limit, offset)
        if any(f is not None and not f for f in (ids, run_ids, jobs, kinds)):
            return Page([], 0)
        c = self._t["ev"].c
        with self._reading() as conn:
            where: list[Any] = []
            if ids is not None:
                where.append(_within(conn, c.event_id, list(ids)))
            if run_ids is not None:
                where.append(_within(conn, c.run_id, list(run_ids)))
            if jobs is not None:
                where.append(_within(conn, c.job_key, [_key_hash(*j) for j in jobs]))
            if kinds is not None:
                where.append(c.kind.in_(sorted(set(kinds))))
                if "run" not in kinds:  # the static index's own term (see _tables)
                    where.append(c.kind != _NOT_RUN)
            if namespace is not None:
                where += [c.ns_key == _ns_hash(namespace), c.namespace == namespace]
            if since is not None:
                where.append(c.event_time >= since)
            if until is not None:
                where.append(c.event_time < until)
            if after is not None:
                at, event_id = after
                if descending:  # (time descending, id ascending): no row value orders so
                    sooner = sa.and_(c.event_time == at, c.event_id > event_id)
                    where.append(sa.or_(c.event_time < at, sooner))
                else:
                    # A row value, so the (time, id) index seeks to the position: the same test
                    # written with OR made SQLite scan the index from its start on every page
                    # (90,000 events in: 92 ms a page against 7.7), so reading every event in
                    # pages took time quadratic in their number (export, retention, upgrade).
                    mark = sa.tuple_(sa.literal(at, _Time()), sa.literal(event_id, sa.Text))
                    where.append(sa.tuple_(c.event_time, c.event_id) > mark)
            query = sa.select(self._t["ev"]).where(*where)
            order = (c.event_time.desc() if descending else c.event_time, c.event_id)
            return self._paged(conn, query, order, limit, offset, count, _event_row)

    def mentions(
        self,
        kind: NodeKind,
        keys: Collection[Key],
        *,
        roles: Collection[Role] | None = None,
        until: datetime | None = None,
        stated: bool = False,
    ) -> Iterable[MentionRow]:
        if not keys or (roles is not None and not roles):
            return []
        hashes = {_key_hash(*k): (k[0], k[1]) for k in keys}
        m = self._t["mentions"]
        parents = roles is not None and set(roles) == {"parent"}  # see _PARENT
        with self._reading() as conn:
            form, value = _keys_param(conn, hashes)

            def build() -> Any:
                query = sa.select(m).where(m.c.kind == sa.bindparam("kind"))
                query = query.where(_in(m.c.node_key, form, None, "keys"))
                if parents:
                    query = query.where(m.c.role == _PARENT)
                elif roles is not None:
                    query = query.where(m.c.role.in_(sa.bindparam("roles", expanding=True)))
                if until is not None:
                    query = query.where(m.c.first_seen < _UNTIL)
                return query.where(m.c.detail.is_not(None)) if stated else query

            which = "parent" if parents else roles is None
            query = self._built(("mentions", form, which, until is None, stated), build)
            params = {"kind": kind, "keys": value, "roles": sorted(set(roles or ())), "t": until}
            return [_mention_row(r, hashes) for r in conn.execute(query, params).all()]

    def column_edges(
        self,
        *,
        outputs: Collection[FieldRef] | None = None,
        inputs: Collection[FieldRef] | None = None,
        datasets: Collection[Key] | None = None,
        until: datetime | None = None,
    ) -> Iterable[ColumnEdgeRow]:
        if any(f is not None and not f for f in (outputs, inputs, datasets)):
            return []
        table = self._t["coledge"]
        c = table.c
        with self._reading() as conn:
            query = sa.select(
                *(c.output_ns, c.output_dataset, c.output_field),
                *(c.input_ns, c.input_dataset, c.input_field),
                *(c.job_ns, c.job_name, c.first_seen, c.info_rank, c.info_value),
            )
            if outputs is not None:
                query = query.where(_within(conn, c.output_key, [_field_hash(f) for f in outputs]))
            if inputs is not None:
                query = query.where(_within(conn, c.input_key, [_field_hash(f) for f in inputs]))
            if until is not None:
                query = query.where(c.first_seen < until)
            if datasets is None:
                found = conn.execute(query).all()
            else:
                found = []
                hashes = sorted({_key_hash(*d) for d in datasets})
                for some in _chunks(hashes, _RANGES):
                    sides = sa.or_(_fields_of(c.output_key, some), _fields_of(c.input_key, some))
                    found += conn.execute(query.where(sides)).all()
        return [  # a set: the contract leaves the order free
            ColumnEdgeRow(
                FieldRef(ons, ods, of),
                FieldRef(ins, ids, inf),
                _key(jns, jname),
                first,
                Ranked(rank, info),
            )
            for ons, ods, of, ins, ids, inf, jns, jname, first, rank, info in found
        ]

    @staticmethod
    def _paged(
        conn: Connection,
        query: Any,
        order: Sequence[Any],
        limit: int | None,
        offset: int,
        count: bool,
        row: Callable[[Any], _T],
        params: dict[str, Any] | None = None,
    ) -> Page[_T]:
        """One page of ``query`` in ``order``; with ``count``, the whole answer's size (counted
        only when the page cannot tell it)."""
        items: list[_T] = []
        if limit != 0:
            paged = query.order_by(*order).limit(limit).offset(offset or None)
            items = [row(r) for r in conn.execute(paged, params).all()]

        def total() -> int:
            counted = sa.select(sa.func.count()).select_from(query.order_by(None).subquery())
            return int(conn.execute(counted, params).scalar_one())

        return Page.sliced(items, offset=offset, limit=limit, count=total) if count else Page(items)


def _lower(conn: Connection, column: Any) -> Any:
    """``column`` in lower case as Python folds it (SQLite: ``_sqlite_functions``; PostgreSQL:
    ``lower`` under the database's own locale, not the column's C collation)."""
    if conn.dialect.name == "sqlite":
        return sa.func.lineage_lower(column, type_=sa.Text)
    return sa.func.lower(sa.collate(column, "default"), type_=sa.Text)


def _key_table(conn: Connection) -> Any:
    """The parameter ``keys`` (a list; on SQLite its JSON text) as a table of one column,
    ``value``."""
    if conn.dialect.name == "postgresql":
        array = sa.bindparam("keys", type_=pg_dialect.ARRAY(sa.Text))
        return sa.func.unnest(array).table_valued("value").render_derived().alias()
    return sa.func.json_each(sa.bindparam("keys", type_=sa.Text)).table_valued("value").alias()


def _run_order(c: Any) -> tuple[Any, ...]:
    """The order of ``runs`` answers (newest start first)."""
    started = sa.func.coalesce(c.started_at, c.first_event).desc()
    return (started, c.run_id, c.job_ns.is_(None), c.job_ns, c.job_name)


def _within(conn: Connection, column: Any, values: Collection[str]) -> Any:
    """``column IN values`` as one parameter at any size (see :func:`_keys_param`)."""
    return _in(column, *_keys_param(conn, values))


def _keys_param(conn: Connection, values: Collection[str]) -> tuple[str, Any]:
    """The form of :func:`_in` for ``values``, and its parameter's value. On PostgreSQL
    ``column = ANY(...)``, so the statement text never changes (psycopg prepares it after a few
    runs, and the server skips planning) and no per-key parameter is bound; 0.66x the time of a
    500-key IN list measured on the million-event graph. The keys travel as one comma-joined
    text that the server splits (``string_to_array``): psycopg dumps a list parameter key by
    key, a regex test each, 7% of a lineage walk (0.89x a walk's time measured). Keys that hold
    a comma, or an empty key, go as a list."""
    keys = sorted(set(values))
    if conn.dialect.name == "sqlite":  # one expanding parameter: no key coerced one by one
        return ("in", keys) if len(keys) <= _CHUNK else ("json", json.dumps(keys))
    joined = ",".join(keys)
    plain = joined.count(",") == len(keys) - 1 and all(keys)
    return ("split", joined) if plain else ("array", keys)


def _in(column: Any, form: str, value: Any = None, name: str | None = None) -> Any:
    """``column IN`` the parameter ``name`` (None: anonymous, of ``value``) in ``form``."""
    param = functools.partial(sa.bindparam, name, value)
    if form == "in":
        return column.in_(param(expanding=True))
    if form == "array":
        return column == sa.any_(param(type_=pg_dialect.ARRAY(sa.Text)))
    text = param(type_=sa.Text)
    if form == "json":
        return column.in_(sa.select(sa.func.json_each(text).table_valued("value").alias().c.value))
    return column == sa.any_(sa.func.string_to_array(text, ","))


def _index_names(conn: Connection, table: str) -> set[str]:
    """The indexes ``table`` has, by name: on SQLite from its schema table (SQLAlchemy does not
    reflect an index on expressions, such as the node order's)."""
    if conn.dialect.name == "sqlite":
        listed = sa.text("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = :t")
        return set(conn.execute(listed, {"t": table}).scalars())
    return {str(ix["name"]) for ix in sa.inspect(conn).get_indexes(table)}


def _absent_indexes(conn: Connection, tables: Iterable[sa.Table]) -> list[sa.Index]:
    """The indexes of ``tables`` (which exist) that the database lacks, of those ``create_all``
    makes on its dialect: what ``missing`` reports and ``open`` builds."""
    absent: list[sa.Index] = []
    for t in tables:
        have = _index_names(conn, t.name)
        absent += [
            ix
            for ix in sorted(t.indexes, key=lambda ix: str(ix.name))
            if ix.name not in have and _created_on(ix, conn.dialect)
        ]
    return absent


def _created_on(index: sa.Index, dialect: Dialect) -> bool:
    """Whether ``create_all`` creates ``index`` on ``dialect`` (``ddl_if`` may limit it to one)."""
    only = getattr(index, "_ddl_if", None)
    if only is None or only.dialect is None:
        return True
    return dialect.name in ((only.dialect,) if isinstance(only.dialect, str) else only.dialect)


# -- the layout of the releases before the engine ----------------------------------------------

#: The tables of the sql store of the releases before the engine, without their prefix (events
#: first: the only one read); none is one of :func:`_tables`', so dropping them spares the new.
PRE_ENGINE_TABLES = (
    "events",
    "jobs",
    "datasets",
    "runs",
    "run_io",
    "job_io",
    "column_edges",
    "static_refs",
)
#: The table, beside them, recording how far the copy into the new tables went (one row).
UPGRADE_MARK_TABLE = "upgrade_copied"


def _pre_engine_count(conn: Connection, prefix: str, tables: Collection[str]) -> int:
    """The events in ``{prefix}events`` of the layout before the engine (0: no such table)."""
    name = f"{prefix}events"
    if name not in tables:
        return 0
    return int(conn.execute(sa.select(sa.func.count()).select_from(sa.table(name))).scalar_one())
