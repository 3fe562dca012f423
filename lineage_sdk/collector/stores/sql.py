"""The ``sql`` store: raw events plus a job/run/dataset graph, on SQLAlchemy 2 Core.

One code path serves SQLite (the embedded default, ``sqlite:///lineage.db``, in WAL mode) and
PostgreSQL (``postgresql+psycopg://...``); only the ``INSERT ... ON CONFLICT`` constructor is
picked per dialect, and both dialects speak the same clause.

Why the tables look like this:

* ``lineage_events`` is keyed by the content hash ``event_id``, so a redelivered event is an
  insert-or-ignore no-op: the store is idempotent without reading first.
* Jobs and datasets are keyed by a 128-bit hash of ``namespace\\0name``. Names may be 10,000
  characters of anything; PostgreSQL cannot index such text (btree rows are capped near 2.7 KB),
  and short fixed keys keep the edge tables and their indexes small, which is what makes a
  depth-10 lineage walk over 100,000 events take milliseconds.
* Every run column is a pure function of the run's set of events, whatever the arrival order
  or the number of collectors writing, by :mod:`lineage_sdk.models.run_state`: the state by rank,
  then time, then name (columns ``state_rank``/``state_time``/``state``), the earliest START, the
  latest terminal time, the least parent/root/job named. A job's latest run is the run with the
  latest event, the least run id among equals.
* Lineage is walked breadth-first, one indexed ``IN`` query per hop on ``lineage_job_io``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import orjson
import sqlalchemy as sa
from pydantic import Field
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Connection, Dialect, Engine

from lineage_sdk.collector.columns import (
    ColumnEdge,
    ColumnRoot,
    column_edges,
    edge_rank,
    field_key,
    walk_columns,
)
from lineage_sdk.collector.keyed import keyed_answer, remember_names, walk_keys
from lineage_sdk.collector.store import (
    BaseLineageStore,
    ColumnGraph,
    Direction,
    FieldRef,
    JobSummary,
    LineageGraph,
    LineageRecord,
    NodeType,
    Page,
    RawEvent,
    RunFold,
    RunSummary,
    check_node_limit,
    check_page,
    event_mentions,
    event_namespace,
    named_connection,
    parse_node_id,
    unknown_as_of,
)
from lineage_sdk.config.redaction import redact
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.config.sections import Section, UriSetting
from lineage_sdk.exceptions import ConfigError, StoreError
from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY
from lineage_sdk.models.run_state import (
    STATE_RANK,
    TERMINAL_STATES,
    heartbeat_interval,
    pick_interval,
    pick_link,
    run_state,
    state_key,
)

__all__ = ["SqlStore", "SqlStoreConfig", "name_key"]

_CHUNK = 500  # keys per IN list: under SQLite's oldest variable limit (999)
#: Execution option marking a write transaction (SQLite: BEGIN IMMEDIATE; see SqlStore._writing).
_WRITE_OPTION = "lineage_write"


def name_key(namespace: str, name: str) -> str:
    """The fixed-size key of a job or dataset (see the module docstring for why)."""
    return hashlib.blake2b(f"{namespace}\x00{name}".encode(), digest_size=16).hexdigest()


class SqlStoreConfig(Section):
    """The collector's `sql` store (SQLite or PostgreSQL through SQLAlchemy)."""

    url: Annotated[str, UriSetting()] = Field(
        default="sqlite:///lineage.db",
        description="SQLAlchemy URL: sqlite:///path (default) or postgresql+psycopg://...",
    )
    connection_name: str | None = Field(
        default=None,
        description="Optional [lineage.connections.NAME] holding the URL instead.",
    )


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


def _tables(metadata: sa.MetaData, prefix: str) -> dict[str, sa.Table]:
    key = sa.String(32)
    events = sa.Table(
        f"{prefix}events",
        metadata,
        sa.Column("event_id", key, primary_key=True),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("event_type", sa.String(16)),
        sa.Column("event_time", UTCDateTime(), nullable=False),
        sa.Column("event_time_raw", sa.Text, nullable=False),
        sa.Column("run_id", sa.String(64)),
        sa.Column("job_key", key),
        sa.Column("producer", sa.Text, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Index(f"ix_{prefix}events_run", "run_id", "event_time"),
        # With the run id, a job's latest run (as of a time) is read from the index alone.
        sa.Index(f"ix_{prefix}events_job_run", "job_key", "event_time", "run_id"),
        # Event-time order: export, rebuild and retention page through it (no sort of the table).
        sa.Index(f"ix_{prefix}events_time", "event_time", "event_id"),
    )
    jobs = sa.Table(
        f"{prefix}jobs",
        metadata,
        sa.Column("job_key", key, primary_key=True),
        sa.Column("namespace", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("latest_run_id", sa.String(64)),
        sa.Column("latest_run_time", UTCDateTime()),
    )
    datasets = sa.Table(
        f"{prefix}datasets",
        metadata,
        sa.Column("dataset_key", key, primary_key=True),
        sa.Column("namespace", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
    )
    runs = sa.Table(
        f"{prefix}runs",
        metadata,
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("job_key", key),
        sa.Column("state", sa.String(16)),
        sa.Column("state_rank", sa.Integer, nullable=False),
        sa.Column("state_time", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime()),
        sa.Column("ended_at", UTCDateTime()),
        sa.Column("first_event_time", UTCDateTime(), nullable=False),
        sa.Column("parent_run_id", sa.String(64)),
        sa.Column("root_run_id", sa.String(64)),
        # The greatest heartbeat interval the run's events name (run_state.heartbeat_interval).
        sa.Column("heartbeat_s", sa.Float),
        sa.Index(f"ix_{prefix}runs_job", "job_key", "first_event_time"),
        sa.Index(f"ix_{prefix}runs_parent", "parent_run_id"),
    )
    run_io = sa.Table(
        f"{prefix}run_io",
        metadata,
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("dataset_key", key, primary_key=True),
        sa.Column("direction", sa.String(3), primary_key=True),  # 'in' read, 'out' wrote
        # The least eventTime of the run's events naming the edge; NULL: written before the
        # column existed (unknown, so asOf answers from the raw events).
        sa.Column("first_seen", UTCDateTime()),
        sa.Index(f"ix_{prefix}run_io_dataset", "dataset_key", "direction"),
    )
    job_io = sa.Table(
        f"{prefix}job_io",
        metadata,
        sa.Column("job_key", key, primary_key=True),
        sa.Column("dataset_key", key, primary_key=True),
        sa.Column("direction", sa.String(3), primary_key=True),  # 'in' consumes, 'out' produces
        # The least eventTime of the events stating the edge (JobEvents included): the graph as
        # of T is the edges first seen by T. NULL as in run_io.
        sa.Column("first_seen", UTCDateTime()),
        sa.Index(f"ix_{prefix}job_io_dataset", "dataset_key", "direction", "job_key"),
    )
    # One row per (output field, input field) of the columnLineage facets; the info of the
    # greatest rank wins (lineage_sdk.collector.columns). Names are kept beside their keys.
    column_edges = sa.Table(
        f"{prefix}column_edges",
        metadata,
        sa.Column("out_key", key, primary_key=True),
        sa.Column("in_key", key, primary_key=True),
        sa.Column("out_dataset_key", key, nullable=False),
        sa.Column("in_dataset_key", key, nullable=False),
        sa.Column("out_namespace", sa.Text, nullable=False),
        sa.Column("out_dataset", sa.Text, nullable=False),
        sa.Column("out_field", sa.Text, nullable=False),
        sa.Column("in_namespace", sa.Text, nullable=False),
        sa.Column("in_dataset", sa.Text, nullable=False),
        sa.Column("in_field", sa.Text, nullable=False),
        sa.Column("info", sa.Text, nullable=False),
        sa.Column("rank", sa.String(64), nullable=False),
        sa.Index(f"ix_{prefix}column_edges_in", "in_key"),
        sa.Index(f"ix_{prefix}column_edges_out_ds", "out_dataset_key"),
        sa.Index(f"ix_{prefix}column_edges_in_ds", "in_dataset_key"),
    )
    # Static lineage: the JobEvents of a job ('job', job_key) and the DatasetEvents of a dataset
    # ('dataset', dataset_key), so reads find them without scanning the events.
    static_refs = sa.Table(
        f"{prefix}static_refs",
        metadata,
        sa.Column("ref_kind", sa.String(8), primary_key=True),
        sa.Column("ref_key", key, primary_key=True),
        sa.Column("event_id", key, primary_key=True),
    )
    return {
        "events": events,
        "jobs": jobs,
        "datasets": datasets,
        "runs": runs,
        "run_io": run_io,
        "job_io": job_io,
        "column_edges": column_edges,
        "static_refs": static_refs,
    }


def _without_jit(dbapi_conn: Any, _record: Any) -> None:
    """``SET jit = off`` on a new PostgreSQL connection: reads are many short indexed lookups,
    and a planner misled by missing statistics (a fresh import, autovacuum off) JIT-compiles
    each of them (measured: 37 ms a walk query instead of 0.08 ms)."""
    info = getattr(dbapi_conn, "info", None)
    version = getattr(info, "server_version", None) or getattr(dbapi_conn, "server_version", 0)
    if not isinstance(version, int):
        return
    if version >= 110000:  # jit exists from PostgreSQL 11
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
    except FileExistsError:
        return
    except OSError:
        return  # e.g. a missing directory: SQLAlchemy reports it with the store's name
    try:
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _least(a: Any, b: Any) -> Any:
    return sa.case((a.is_(None), b), (b.is_(None), a), (b < a, b), else_=a)


def _greatest(a: Any, b: Any) -> Any:
    return sa.case((a.is_(None), b), (b.is_(None), a), (b > a, b), else_=a)


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


#: Keys per query on PostgreSQL, where they travel as one array parameter (see _member).
_PG_CHUNK = 10_000


def _key_chunks(conn: Connection, keys: Iterable[str]) -> Iterator[Sequence[str]]:
    """``keys`` sorted and deduplicated, in as few chunks as the dialect's :func:`_member`
    takes: SQLite's variable limit, or one array per ``_PG_CHUNK`` keys on PostgreSQL."""
    size = _PG_CHUNK if conn.dialect.name == "postgresql" else _CHUNK
    return _chunks(sorted(set(keys)), size)


def _member(conn: Connection, column: Any, keys: Sequence[str]) -> Any:
    """``column IN keys``. On PostgreSQL ``column = ANY(...)`` of one parameter whatever the
    count, so the statement text never changes (psycopg prepares it after a few runs, and the
    server skips planning) and no per-key parameter is bound; 0.66x the time of a 500-key IN
    list measured on the million-event graph. The keys travel as one comma-joined text that
    the server splits (``string_to_array``): psycopg dumps a list parameter key by key, a regex
    test each, 7% of a lineage walk (0.89x a walk's time measured). Keys that hold a comma,
    or an empty key, go as a list. SQLite takes an IN list."""
    if conn.dialect.name != "postgresql":
        return column.in_(keys)
    joined = ",".join(keys)
    if joined.count(",") == len(keys) - 1 and all(keys):
        split = sa.func.string_to_array(sa.bindparam(None, joined, type_=sa.Text), ",")
        return column == sa.any_(split)
    return column == sa.any_(sa.bindparam(None, list(keys), type_=pg_dialect.ARRAY(sa.Text)))


class SqlStore(BaseLineageStore):
    """SQLite or PostgreSQL through one SQLAlchemy engine; implements LineageCatalogProtocol."""

    name = "sql"
    config_class: ClassVar[type[Section]] = SqlStoreConfig

    @classmethod
    def from_config(cls, config: LineageConfig) -> SqlStore:
        """Entry point ``lineage_sdk.stores:sql``; ``store.sql.connection_name`` may name a
        ``[lineage.connections.NAME]`` whose ``uri`` is the URL."""
        sql = config.section("store.sql", SqlStoreConfig)
        url = sql.url
        if sql.connection_name:
            url = named_connection(
                config, "store.sql.connection_name", sql.connection_name
            ).settings.uri
        return cls(url)

    def __init__(self, url: str, *, table_prefix: str = "lineage_", echo: bool = False) -> None:
        self.url = url
        self._safe_url = redact(url)
        self.prefix = table_prefix
        self.metadata = sa.MetaData()
        self.t = _tables(self.metadata, table_prefix)
        self._engine: Engine | None = None
        self._echo = echo
        self._prepared_for: dict[str, _Prepared] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise StoreError(self.name, "store is not open")
        return self._engine

    def _create_engine(self) -> Engine:
        try:
            url = sa.make_url(self.url)
        except sa_exc.ArgumentError:
            raise ConfigError(
                "store.sql.url",
                self._safe_url,
                "a SQLAlchemy URL such as "
                "sqlite:///lineage.db or postgresql+psycopg://user@host/db",
            ) from None
        if url.get_backend_name() == "sqlite":
            if url.database and url.database != ":memory:" and not url.database.startswith("file:"):
                _create_private_file(Path(url.database))
            engine = sa.create_engine(url, echo=self._echo, connect_args={"timeout": 30})

            @sa.event.listens_for(engine, "connect")
            def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                cur = dbapi_conn.cursor()
                if url.database and url.database != ":memory:":
                    cur.execute("PRAGMA journal_mode=WAL")
                # NORMAL in WAL survives a killed process; only power loss may lose the last commit.
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.execute("PRAGMA busy_timeout=30000")
                cur.close()
                # Transactions are begun below, not by the driver: a write transaction must take
                # SQLite's write lock at BEGIN (see _writing).
                dbapi_conn.isolation_level = None

            @sa.event.listens_for(engine, "begin")
            def _begin(conn: Connection) -> None:
                immediate = conn.get_execution_options().get(_WRITE_OPTION)
                conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

            return engine
        engine = sa.create_engine(
            url, echo=self._echo, pool_pre_ping=True, pool_size=2, max_overflow=4
        )
        if url.get_backend_name() == "postgresql":
            sa.event.listen(engine, "connect", _without_jit)
        return engine

    def open(self) -> None:
        if self._engine is not None:
            return
        try:
            self._engine = self._create_engine()
            with self._engine.begin() as conn:
                self.metadata.create_all(conn, checkfirst=True)
            self._add_missing_columns()
            self._add_missing_indexes()
            self._drop_superseded_indexes()
        except ConfigError:
            raise
        except sa_exc.IntegrityError:
            # Another collector created the tables at the same moment: they exist now.
            with self.engine.begin() as conn:
                self.metadata.create_all(conn, checkfirst=True)
        except (sa_exc.SQLAlchemyError, ImportError, OSError) as exc:
            self._dispose()
            raise StoreError(self.name, f"cannot open {self._safe_url}: {_reason(exc)}") from None

    #: Columns added after a table was first released: (table, column), added (typed as the
    #: table defines them, NULL in existing rows) to an existing database at open.
    _ADDED_COLUMNS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("runs", "heartbeat_s"),
        ("run_io", "first_seen"),
        ("job_io", "first_seen"),
    )

    def _add_missing_columns(self) -> None:
        """``ALTER TABLE ... ADD COLUMN`` for the columns a database made by an older release
        lacks."""
        for table, column in self._ADDED_COLUMNS:
            name = self.t[table].name
            type_ = self.t[table].c[column].type.compile(dialect=self.engine.dialect)
            self._add_if_missing(
                name, "columns", column, f"ALTER TABLE {name} ADD COLUMN {column} {type_}"
            )

    def _add_missing_indexes(self) -> None:
        """The indexes a database made by an older release lacks, built at open (once: on a big
        table this takes a while, and PostgreSQL holds writes to it meanwhile)."""
        for table in self.t.values():
            for index in sorted(table.indexes, key=lambda ix: str(ix.name)):
                self._add_if_missing(
                    table.name,
                    "indexes",
                    str(index.name),
                    sa.schema.CreateIndex(index, if_not_exists=True),
                )

    #: Indexes of earlier releases that a wider one now serves: (table, index name without the
    #: table prefix), dropped at open once the new one exists (writes pay for every index).
    _SUPERSEDED_INDEXES: ClassVar[tuple[tuple[str, str], ...]] = (("events", "events_job"),)

    def _drop_superseded_indexes(self) -> None:
        for table, suffix in self._SUPERSEDED_INDEXES:
            name = f"ix_{self.prefix}{suffix}"
            if self._has(self.t[table].name, "indexes", name):
                gone = sa.Index(name, *self.t[table].primary_key.columns)  # named, for the DDL
                with self.engine.begin() as conn:
                    conn.execute(sa.schema.DropIndex(gone, if_exists=True))

    def _has(self, table: str, what: Literal["columns", "indexes"], name: str) -> bool:
        """Whether ``table`` has the column or index ``name`` (as the database lists them)."""
        with self.engine.connect() as conn:
            inspector = sa.inspect(conn)
            found = (
                inspector.get_columns(table) if what == "columns" else inspector.get_indexes(table)
            )
            return name in {item["name"] for item in found}

    def _add_if_missing(
        self,
        table: str,
        what: Literal["columns", "indexes"],
        name: str,
        ddl: str | sa.schema.ExecutableDDLElement,
    ) -> None:
        """Run ``ddl`` unless ``table`` has the column or index ``name`` already; when it fails,
        a collector that added the same at the same moment is harmless, anything else is
        raised."""
        if self._has(table, what, name):
            return
        try:
            with self.engine.begin() as conn:
                if isinstance(ddl, str):
                    conn.exec_driver_sql(ddl)
                else:
                    conn.execute(ddl)
        except sa_exc.SQLAlchemyError:
            if not self._has(table, what, name):
                raise

    def missing(self) -> list[str]:
        """What :meth:`open` would create (tables, columns, indexes), found without creating
        anything (``lineage-collector check``); raises StoreError if the database cannot be
        reached. A SQLite file that does not exist is reported, not created."""
        try:
            url = sa.make_url(self.url)
        except sa_exc.ArgumentError:
            self._create_engine()  # raises the ConfigError naming store.sql.url
            raise
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            path = Path(url.database)
            if not url.database.startswith("file:") and not path.is_file():
                return [f"database file {path}"]
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                inspector = sa.inspect(conn)
                tables = set(inspector.get_table_names())
                found = [f"table {t.name}" for t in self.t.values() if t.name not in tables]
                for table, column in self._ADDED_COLUMNS:
                    name = self.t[table].name
                    if name in tables and column not in {
                        c["name"] for c in inspector.get_columns(name)
                    }:
                        found.append(f"column {name}.{column}")
                for t in self.t.values():
                    if t.name in tables:
                        have = {ix["name"] for ix in inspector.get_indexes(t.name)}
                        found += [f"index {ix.name}" for ix in t.indexes if ix.name not in have]
                return found
        except (sa_exc.SQLAlchemyError, ImportError, OSError) as exc:
            raise StoreError(self.name, f"cannot open {self._safe_url}: {_reason(exc)}") from None
        finally:
            engine.dispose()

    def check(self) -> None:
        try:
            with self.engine.connect() as conn:
                conn.execute(sa.select(sa.func.count()).select_from(self.t["events"]).limit(1))
        except sa_exc.SQLAlchemyError as exc:
            raise StoreError(self.name, f"{self._safe_url}: {_reason(exc)}") from None

    def _dispose(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def close(self) -> None:
        self._dispose()

    # -- writing ------------------------------------------------------------------------------

    def _statements(self, dialect: Dialect) -> dict[str, Any]:
        """The upsert of each table, as SQLAlchemy constructs (one definition for every dialect)."""
        if dialect.name == "postgresql":
            insert: Any = pg_dialect.insert
        elif dialect.name == "sqlite":
            insert = sqlite_dialect.insert
        else:
            raise StoreError(self.name, f"unsupported SQL dialect {dialect.name!r}", permanent=True)
        t = self.t
        out: dict[str, Any] = {
            "events": insert(t["events"]).on_conflict_do_nothing(index_elements=["event_id"]),
            "datasets": insert(t["datasets"]).on_conflict_do_nothing(
                index_elements=["dataset_key"]
            ),
            "static_refs": insert(t["static_refs"]).on_conflict_do_nothing(),
        }
        for name in ("run_io", "job_io"):
            io = t[name]
            ins = insert(io)
            # The least time stays; NULL (unknown: the edge may be older than any event
            # here) stays NULL. A later statement of the edge leaves its row untouched.
            out[name] = ins.on_conflict_do_update(
                index_elements=[c.name for c in io.primary_key.columns],
                set_={"first_seen": ins.excluded.first_seen},
                where=ins.excluded.first_seen < io.c.first_seen,
            )
        jobs = t["jobs"]
        ins = insert(jobs)
        newer = sa.or_(
            jobs.c.latest_run_time.is_(None),
            ins.excluded.latest_run_time > jobs.c.latest_run_time,
            sa.and_(
                ins.excluded.latest_run_time == jobs.c.latest_run_time,
                ins.excluded.latest_run_id < jobs.c.latest_run_id,
            ),
        )
        out["jobs"] = ins.on_conflict_do_update(
            index_elements=["job_key"],
            set_={
                "latest_run_id": sa.case(
                    (newer, ins.excluded.latest_run_id), else_=jobs.c.latest_run_id
                ),
                "latest_run_time": _greatest(jobs.c.latest_run_time, ins.excluded.latest_run_time),
            },
        )
        runs = t["runs"]
        ins = insert(runs)
        x = ins.excluded
        # state_key's order (run_state.py) without its last part, which never changes the state.
        no_state: Any = sa.literal_column("''")  # inline: the statement binds table columns only
        wins = sa.or_(
            x.state_rank > runs.c.state_rank,
            sa.and_(
                x.state_rank == runs.c.state_rank,
                sa.or_(
                    x.state_time > runs.c.state_time,
                    sa.and_(
                        x.state_time == runs.c.state_time,
                        sa.func.coalesce(x.state, no_state)
                        >= sa.func.coalesce(runs.c.state, no_state),
                    ),
                ),
            ),
        )
        out["runs"] = ins.on_conflict_do_update(
            index_elements=["run_id"],
            set_={
                "state": sa.case((wins, x.state), else_=runs.c.state),
                "state_rank": sa.case((wins, x.state_rank), else_=runs.c.state_rank),
                "state_time": sa.case((wins, x.state_time), else_=runs.c.state_time),
                "started_at": _least(runs.c.started_at, x.started_at),
                "ended_at": _greatest(runs.c.ended_at, x.ended_at),
                "first_event_time": _least(runs.c.first_event_time, x.first_event_time),
                "job_key": _least(runs.c.job_key, x.job_key),
                "parent_run_id": _least(runs.c.parent_run_id, x.parent_run_id),
                "root_run_id": _least(runs.c.root_run_id, x.root_run_id),
                "heartbeat_s": _greatest(runs.c.heartbeat_s, x.heartbeat_s),
            },
        )
        edges = t["column_edges"]
        ins = insert(edges)
        later = ins.excluded.rank > edges.c.rank
        out["column_edges"] = ins.on_conflict_do_update(
            index_elements=["out_key", "in_key"],
            set_={
                "info": sa.case((later, ins.excluded.info), else_=edges.c.info),
                "rank": sa.case((later, ins.excluded.rank), else_=edges.c.rank),
            },
        )
        return out

    def _prepared(self, dialect: Dialect) -> _Prepared:
        """The statements compiled once for ``dialect``, and how to bind rows to them.

        Executing a SQLAlchemy construct with many rows costs ~35 µs per event in parameter
        processing; compiling once and handing plain tuples to the driver's ``executemany``
        leaves only the database's own work. Times are bound through the column type's own
        processor, so the stored values are exactly what SQLAlchemy would store.
        """
        prepared = self._prepared_for.get(dialect.name)
        if prepared is None:
            statements = {}
            for name, stmt in self._statements(dialect).items():
                columns = tuple(c.key for c in self.t[name].columns)
                compiled = stmt.compile(dialect=dialect, column_keys=list(columns))
                order = compiled.positiontup
                if order is None:  # named parameters (psycopg): bind dicts
                    statements[name] = _Statement(compiled.string, columns, positional=False)
                else:
                    index = tuple(columns.index(key) for key in order)
                    statements[name] = _Statement(
                        compiled.string,
                        columns,
                        positional=True,
                        order=None if index == tuple(range(len(columns))) else index,
                    )
            time_type = self.t["events"].c.event_time.type
            bind = time_type.dialect_impl(dialect).bind_processor(dialect)
            prepared = _Prepared(statements, bind or (lambda value: value))
            self._prepared_for[dialect.name] = prepared
        return prepared

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A write transaction. In SQLite it takes the write lock at BEGIN (IMMEDIATE): a
        deferred one that read first fails at once ("database is locked", no busy wait) when
        another writer (retention, a second collector) committed since its snapshot."""
        with self.engine.connect() as conn:
            conn.execution_options(**{_WRITE_OPTION: True})
            with conn.begin():
                yield conn

    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        if not records:
            return
        try:
            prepared = self._prepared(self.engine.dialect)
            rows = _BatchRows(records, prepared.bind_time)
            with self._writing() as conn:
                self._write(conn, prepared, rows)
        except StoreError:
            raise
        except (
            sa_exc.OperationalError,
            sa_exc.InterfaceError,
            sa_exc.TimeoutError,
            sa_exc.DisconnectionError,
        ) as exc:
            raise StoreError(self.name, f"{self._safe_url}: {_reason(exc)}") from None
        except sa_exc.SQLAlchemyError as exc:
            # Integrity, data or programming errors repeat identically on every retry.
            raise StoreError(self.name, _reason(exc), permanent=True) from None

    def _write(self, conn: Connection, prepared: _Prepared, rows: _BatchRows) -> None:
        for name, params in (
            ("events", rows.events),
            ("datasets", rows.datasets),
            ("jobs", rows.jobs),
            ("runs", rows.runs),
            ("run_io", rows.run_io),
            ("job_io", rows.job_io),
            ("column_edges", rows.column_edges),
            ("static_refs", rows.static_refs),
        ):
            if params:
                statement = prepared.statements[name]
                conn.exec_driver_sql(statement.sql, statement.bind(params))

    # -- queries ------------------------------------------------------------------------------

    def _names(
        self,
        conn: Connection,
        table: str,
        keys: Iterable[str],
    ) -> dict[str, tuple[str, str]]:
        """(namespace, name) of each key of ``table`` (jobs or datasets) that has a row."""
        tbl = self.t[table]
        key_col = tbl.c.job_key if table == "jobs" else tbl.c.dataset_key
        found: dict[str, tuple[str, str]] = {}
        for chunk in _key_chunks(conn, keys):
            for key, ns, name in conn.execute(
                sa.select(key_col, tbl.c.namespace, tbl.c.name).where(_member(conn, key_col, chunk))
            ):
                found[key] = (ns, name)
        return found

    def _io(
        self,
        conn: Connection,
        column: str,
        keys: Iterable[str],
        direction: str,
        as_of: datetime | None = None,
    ) -> list[tuple[str, str]]:
        """(job_key, dataset_key) pairs of ``direction`` whose ``column`` is in ``keys``; with
        ``as_of``, only those first seen by then (_FirstSeenUnknown when one is not known)."""
        io = self.t["job_io"]
        col = io.c[column]
        out: list[tuple[str, str]] = []
        for chunk in _key_chunks(conn, keys):
            query = sa.select(io.c.job_key, io.c.dataset_key).where(
                _member(conn, col, chunk), io.c.direction == direction
            )
            if as_of is None:
                out.extend(conn.execute(query).all())
                continue
            until = as_of + timedelta(microseconds=1)
            seen = io.c.first_seen
            timed = query.add_columns(seen.is_(None)).where(sa.or_(seen < until, seen.is_(None)))
            for job, ds, unknown in conn.execute(timed):
                if unknown:
                    raise _FirstSeenUnknown
                out.append((job, ds))
        return out

    def lineage(
        self,
        node: str,
        *,
        direction: Direction = "both",
        depth: int = 5,
        node_limit: int | None = None,
    ) -> LineageGraph:
        """Jobs and datasets up to ``depth`` job hops from ``node``, edges along the data flow;
        at most ``node_limit`` of them, nearest first (:func:`cut_lineage`; None: every one).

        From a dataset, depth 1 upstream is the jobs that wrote it and the datasets they read;
        from a job, depth 0 is its own inputs/outputs and depth 1 adds the jobs beyond those.
        """
        with self.engine.connect() as conn:
            return self._lineage(conn, node, direction, depth, node_limit, None)

    def lineage_as_of(
        self,
        node: str,
        *,
        direction: Direction = "both",
        depth: int = 5,
        node_limit: int | None = None,
        as_of: datetime,
    ) -> LineageGraph | None:
        """:class:`~lineage_sdk.collector.store.DatedLineageProtocol` over ``job_io.first_seen``;
        None when an edge it would read was written before the column existed (NULL)."""
        try:
            with self.engine.connect() as conn:
                if not self._known_as_of(conn, node, as_of):
                    raise unknown_as_of(node, as_of)
                return self._lineage(conn, node, direction, depth, node_limit, as_of)
        except _FirstSeenUnknown:
            return None
        except sa_exc.SQLAlchemyError as exc:
            raise StoreError(self.name, f"{self._safe_url}: {_reason(exc)}") from None

    def _known_as_of(self, conn: Connection, node: str, as_of: datetime) -> bool:
        """Whether an event up to ``as_of`` names ``node``: a job by one of its own events
        (JobEvents included); a dataset by an edge first seen by then, either way, or by a
        DatasetEvent (what history's generic path decides, see ``_dataset_known``)."""
        node_type, namespace, name = parse_node_id(node)
        key = name_key(namespace, name)
        until = as_of + timedelta(microseconds=1)
        ev = self.t["events"]
        if node_type == "JOB":
            query = sa.select(ev.c.event_id).where(ev.c.job_key == key, ev.c.event_time < until)
            return conn.execute(query.limit(1)).first() is not None
        io, refs = self.t["job_io"], self.t["static_refs"]
        for direction in ("in", "out"):
            seen = io.c.first_seen
            query = sa.select(seen.is_(None)).where(
                io.c.dataset_key == key,
                io.c.direction == direction,
                sa.or_(seen < until, seen.is_(None)),
            )
            for (unknown,) in conn.execute(query):
                if unknown:
                    raise _FirstSeenUnknown
                return True
        stated = (
            sa.select(ev.c.event_id)
            .join(refs, refs.c.event_id == ev.c.event_id)
            .where(refs.c.ref_kind == "dataset", refs.c.ref_key == key, ev.c.event_time < until)
        )
        return conn.execute(stated.limit(1)).first() is not None

    def _lineage(
        self,
        conn: Connection,
        node: str,
        direction: Direction,
        depth: int,
        node_limit: int | None,
        as_of: datetime | None,
    ) -> LineageGraph:
        """The walk of :meth:`lineage` (``as_of`` None) and :meth:`lineage_as_of`."""
        node_type, namespace, name = parse_node_id(node)
        root = (node_type, name_key(namespace, name))
        check_node_limit(node_limit)

        def step(
            end: NodeType, keys: Collection[str], io: Literal["in", "out"]
        ) -> list[tuple[str, str]]:
            column = "job_key" if end == "JOB" else "dataset_key"
            return self._io(conn, column, keys, io, as_of)

        def names_of(node_type: NodeType, keys: list[str]) -> dict[str, tuple[str, str]]:
            return self._names(conn, "jobs" if node_type == "JOB" else "datasets", keys)

        read_names = remember_names(names_of)

        def read_jobs(
            jobs: set[str],
        ) -> tuple[dict[str, tuple[str, str]], dict[str, dict[str, Any]]]:
            if as_of is None:  # names and latest runs in one read
                return self._jobs_and_latest_runs(conn, jobs)
            return read_names("JOB", list(jobs)), self._latest_runs_as_of(conn, jobs, as_of)

        walk = walk_keys(step, root, direction, max(0, depth), node_limit, read_names)
        return keyed_answer(node, root, walk, direction, node_limit, read_names, read_jobs)

    def _latest_run_events(
        self, conn: Connection, job_keys: Iterable[str], until: datetime | None = None
    ) -> dict[str, tuple[datetime, str]]:
        """Per job, (time, run id) of its latest run event (before ``until`` when given), the
        least run id among equal times: grouped in the database on the (job, time) index."""
        ev = self.t["events"]
        latest_time = (
            sa.select(ev.c.job_key, sa.func.max(ev.c.event_time).label("at"))
            .where(ev.c.run_id.is_not(None))
            .group_by(ev.c.job_key)
        )
        if until is not None:
            latest_time = latest_time.where(ev.c.event_time < until)
        latest: dict[str, tuple[datetime, str]] = {}
        for chunk in _key_chunks(conn, job_keys):
            sub = latest_time.where(_member(conn, ev.c.job_key, chunk)).subquery()
            for job_key, at, run_id in conn.execute(
                sa.select(ev.c.job_key, ev.c.event_time, sa.func.min(ev.c.run_id))
                .join(sub, sa.and_(sub.c.job_key == ev.c.job_key, sub.c.at == ev.c.event_time))
                .where(ev.c.run_id.is_not(None))
                .group_by(ev.c.job_key, ev.c.event_time)
            ):
                latest[job_key] = (at, run_id)
        return latest

    def _latest_runs_as_of(
        self, conn: Connection, job_keys: Iterable[str], as_of: datetime
    ) -> dict[str, dict[str, Any]]:
        """Each job's latest run as of ``as_of``: the run of its latest run event by then (the
        least run id among equal times), its state and heartbeat interval folded from that
        run's events by then only. Reads the jobs' event times on the (job, time) index, then
        the payloads of those runs' events by then (not every event of the jobs)."""
        ev = self.t["events"]
        until = as_of + timedelta(microseconds=1)
        latest = self._latest_run_events(conn, job_keys, until)
        runs = RunFold()
        # Only the payloads that may name a heartbeat travel (a text test in the database).
        beating = ev.c.payload.contains(HEARTBEAT_FACET_KEY, autoescape=True)
        for chunk in _key_chunks(conn, (run_id for _, run_id in latest.values())):
            of_runs = sa.select(
                ev.c.run_id,
                ev.c.event_type,
                ev.c.event_time,
                ev.c.event_id,
                sa.case((beating, ev.c.payload), else_=sa.null()),
            ).where(_member(conn, ev.c.run_id, chunk), ev.c.event_time < until)
            for run_id, event_type, at, event_id, payload in conn.execute(of_runs):
                beat = None
                if payload is not None:
                    beat = heartbeat_interval(orjson.loads(payload))
                runs.add(run_id, state_key(event_type, at, event_id), beat)
        return {job_key: runs.latest_run(run_id) for job_key, (_, run_id) in latest.items()}

    def _jobs_and_latest_runs(
        self, conn: Connection, job_keys: Iterable[str]
    ) -> tuple[dict[str, tuple[str, str]], dict[str, dict[str, Any]]]:
        """(namespace, name) of each job that has a row, and the latest run of those that ran:
        one read (two reads cost a walk one more round trip and key list)."""
        jobs, runs = self.t["jobs"], self.t["runs"]
        names: dict[str, tuple[str, str]] = {}
        latest: dict[str, dict[str, Any]] = {}
        for chunk in _key_chunks(conn, job_keys):
            query = (
                sa.select(
                    jobs.c.job_key,
                    jobs.c.namespace,
                    jobs.c.name,
                    runs.c.run_id,
                    runs.c.state,
                    runs.c.state_time,
                    runs.c.heartbeat_s,
                )
                .outerjoin(runs, runs.c.run_id == jobs.c.latest_run_id)
                .where(_member(conn, jobs.c.job_key, chunk))
            )
            for job_key, ns, name, run_id, state, state_time, heartbeat_s in conn.execute(query):
                names[job_key] = (ns, name)
                if run_id is not None:
                    latest[job_key] = {
                        "runId": run_id,
                        "state": state,
                        "stateTime": state_time,
                        "heartbeatS": heartbeat_s,
                    }
        return names, latest

    def _run_summary(self, row: Any, names: dict[str, tuple[str, str]]) -> RunSummary:
        ns, nm = names.get(row.job_key, ("", ""))
        return RunSummary(
            run_id=row.run_id,
            job_namespace=ns,
            job_name=nm,
            state=row.state,
            started_at=row.started_at,
            ended_at=row.ended_at,
            parent_run_id=row.parent_run_id,
            state_time=row.state_time,
            heartbeat_s=row.heartbeat_s,
        )

    def runs_of_job(
        self, namespace: str, name: str, *, limit: int = 100, offset: int = 0
    ) -> Page[RunSummary]:
        runs = self.t["runs"]
        key = name_key(namespace, name)
        order = sa.func.coalesce(runs.c.started_at, runs.c.first_event_time)
        query = sa.select(runs).where(runs.c.job_key == key)
        with self.engine.connect() as conn:
            return Page.sliced(
                (
                    self._run_summary(r, {key: (namespace, name)})
                    for r in self._page_rows(
                        conn, query.order_by(order.desc(), runs.c.run_id), limit, offset
                    )
                ),
                offset=offset,
                limit=limit,
                count=lambda: self._count(conn, query),
            )

    @staticmethod
    def _page_rows(conn: Connection, query: Any, limit: int | None, offset: int) -> Sequence[Any]:
        """One page of an ordered query, paged by the database."""
        check_page(limit, offset)
        return conn.execute(query.limit(limit).offset(offset)).all()

    @staticmethod
    def _count(conn: Connection, query: Any) -> int:
        """How many rows ``query`` (unpaged) returns."""
        total = conn.execute(sa.select(sa.func.count()).select_from(query.subquery()))
        return int(total.scalar_one())

    def events_of_run(self, run_id: str) -> list[dict[str, Any]]:
        ev = self.t["events"]
        with self.engine.connect() as conn:
            rows = (
                conn.execute(
                    sa.select(ev.c.payload)
                    .where(ev.c.run_id == run_id)
                    .order_by(ev.c.event_time, ev.c.event_id)
                )
                .scalars()
                .all()
            )
        return [orjson.loads(p) for p in rows]

    def namespaces(self, *, limit: int | None = None, offset: int = 0) -> Page[str]:
        jobs, ds = self.t["jobs"], self.t["datasets"]
        union = sa.union(sa.select(jobs.c.namespace), sa.select(ds.c.namespace)).subquery()
        query = sa.select(union.c.namespace)
        with self.engine.connect() as conn:
            rows = self._page_rows(conn, query.order_by(union.c.namespace), limit, offset)
            return Page.sliced(
                (r.namespace for r in rows),
                offset=offset,
                limit=limit,
                count=lambda: self._count(conn, query),
            )

    def dataset_namespaces(self) -> list[str]:
        ds = self.t["datasets"]
        with self.engine.connect() as conn:
            query = sa.select(ds.c.namespace).distinct().order_by(ds.c.namespace)
            return list(conn.scalars(query))

    def jobs(
        self, namespace: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> Page[JobSummary]:
        jobs, runs, io, ds = self.t["jobs"], self.t["runs"], self.t["job_io"], self.t["datasets"]
        query = sa.select(
            jobs,
            runs.c.run_id,
            runs.c.state,
            runs.c.started_at,
            runs.c.ended_at,
            runs.c.parent_run_id,
            runs.c.state_time,
            runs.c.heartbeat_s,
        ).outerjoin(runs, runs.c.run_id == jobs.c.latest_run_id)
        counted = sa.select(jobs.c.job_key)
        if namespace is not None:
            query = query.where(jobs.c.namespace == namespace)
            counted = counted.where(jobs.c.namespace == namespace)
        with self.engine.connect() as conn:
            ordered = query.order_by(jobs.c.namespace, jobs.c.name)
            rows = self._page_rows(conn, ordered, limit, offset)
            keys = [r.job_key for r in rows]
            io_rows: list[Any] = []
            for chunk in _key_chunks(conn, keys):
                io_rows.extend(
                    conn.execute(
                        sa.select(io.c.job_key, io.c.direction, ds.c.namespace, ds.c.name)
                        .join(ds, ds.c.dataset_key == io.c.dataset_key)
                        .where(_member(conn, io.c.job_key, chunk))
                        .order_by(ds.c.namespace, ds.c.name)
                    ).all()
                )
            ins: dict[str, list[tuple[str, str]]] = {}
            outs: dict[str, list[tuple[str, str]]] = {}
            for r in io_rows:
                (ins if r.direction == "in" else outs).setdefault(r.job_key, []).append(
                    (r.namespace, r.name)
                )
            result: list[JobSummary] = []
            for r in rows:
                latest = None
                if r.run_id is not None:
                    latest = RunSummary(
                        r.run_id,
                        r.namespace,
                        r.name,
                        r.state,
                        r.started_at,
                        r.ended_at,
                        r.parent_run_id,
                        r.state_time,
                        r.heartbeat_s,
                    )
                result.append(
                    JobSummary(
                        r.namespace,
                        r.name,
                        latest,
                        tuple(ins.get(r.job_key, ())),
                        tuple(outs.get(r.job_key, ())),
                    )
                )
            return Page.sliced(
                result, offset=offset, limit=limit, count=lambda: self._count(conn, counted)
            )

    def datasets(
        self, namespace: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> Page[tuple[str, str]]:
        ds = self.t["datasets"]
        query = sa.select(ds.c.namespace, ds.c.name)
        if namespace is not None:
            query = query.where(ds.c.namespace == namespace)
        with self.engine.connect() as conn:
            rows = self._page_rows(conn, query.order_by(ds.c.namespace, ds.c.name), limit, offset)
            return Page.sliced(
                ((ns, nm) for ns, nm in rows),
                offset=offset,
                limit=limit,
                count=lambda: self._count(conn, query),
            )

    def has_node(self, node_type: NodeType, namespace: str, name: str) -> bool:
        table = "jobs" if node_type == "JOB" else "datasets"
        with self.engine.connect() as conn:
            return bool(self._names(conn, table, [name_key(namespace, name)]))

    def search(self, text: str, *, limit: int = 50) -> list[tuple[NodeType, str, str]]:
        escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        pattern = f"%{escaped}%"
        jobs, ds = self.t["jobs"], self.t["datasets"]
        out: list[tuple[NodeType, str, str]] = []
        with self.engine.connect() as conn:
            for type_, tbl in (("JOB", jobs), ("DATASET", ds)):
                rows = conn.execute(
                    sa.select(tbl.c.namespace, tbl.c.name)
                    .where(sa.func.lower(tbl.c.name).like(pattern, escape="\\"))
                    .order_by(tbl.c.namespace, tbl.c.name)
                    .limit(limit)
                ).all()
                out.extend((type_, ns, nm) for ns, nm in rows)  # type: ignore[misc]
        return out[:limit]

    def count_events(self) -> int:
        """Number of stored events (tests, tooling)."""
        with self.engine.connect() as conn:
            return int(
                conn.execute(sa.select(sa.func.count()).select_from(self.t["events"])).scalar_one()
            )

    # -- history: the raw events behind Marquez's versions, facets and event log

    def _payloads(self, query: Any) -> list[dict[str, Any]]:
        ev = self.t["events"]
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(ev.c.event_time, ev.c.event_id)).scalars().all()
        return [orjson.loads(p) for p in rows]

    def events_of_job(self, namespace: str, name: str) -> list[dict[str, Any]]:
        ev = self.t["events"]
        key = name_key(namespace, name)
        return self._payloads(
            sa.select(ev.c.payload).where(ev.c.job_key == key, ev.c.run_id.is_not(None))
        )

    def events_of_dataset(self, namespace: str, name: str) -> list[dict[str, Any]]:
        ev, io = self.t["events"], self.t["run_io"]
        runs = sa.select(io.c.run_id).where(io.c.dataset_key == name_key(namespace, name))
        return self._payloads(sa.select(ev.c.payload).where(ev.c.run_id.in_(runs)))

    def static_events(
        self,
        *,
        jobs: Sequence[tuple[str, str]] = (),
        datasets: Sequence[tuple[str, str]] = (),
    ) -> list[dict[str, Any]]:
        """The JobEvents of ``jobs`` and the DatasetEvents of ``datasets`` (static lineage), in
        event-time order (then event id)."""
        ev, refs = self.t["events"], self.t["static_refs"]
        wanted = [("job", name_key(ns, nm)) for ns, nm in jobs]
        wanted += [("dataset", name_key(ns, nm)) for ns, nm in datasets]
        rows: dict[str, tuple[datetime, str]] = {}
        with self.engine.connect() as conn:
            for kind in ("job", "dataset"):
                keys = [k for t, k in wanted if t == kind]
                for chunk in _key_chunks(conn, keys):
                    query = (
                        sa.select(ev.c.event_id, ev.c.event_time, ev.c.payload)
                        .join(refs, refs.c.event_id == ev.c.event_id)
                        .where(refs.c.ref_kind == kind, _member(conn, refs.c.ref_key, chunk))
                    )
                    for event_id, event_time, payload in conn.execute(query):
                        rows[event_id] = (event_time, payload)
        ordered = sorted(rows.items(), key=lambda item: (item[1][0], item[0]))
        return [orjson.loads(payload) for _, (_, payload) in ordered]

    def lineage_events(
        self,
        *,
        before: datetime | None = None,
        after: datetime | None = None,
        namespace: str | None = None,
        ascending: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> Page[dict[str, Any]]:
        ev, jobs = self.t["events"], self.t["jobs"]
        query = sa.select(ev.c.payload)
        if before is not None:
            query = query.where(ev.c.event_time < before)
        if after is not None:
            query = query.where(ev.c.event_time >= after)
        if namespace is not None:
            keys = sa.select(jobs.c.job_key).where(jobs.c.namespace == namespace)
            query = query.where(ev.c.run_id.is_not(None), ev.c.job_key.in_(keys))
        when = ev.c.event_time.asc() if ascending else ev.c.event_time.desc()
        with self.engine.connect() as conn:
            rows = self._page_rows(conn, query.order_by(when, ev.c.event_id), limit, offset)
            return Page.sliced(
                (orjson.loads(r.payload) for r in rows),
                offset=offset,
                limit=limit,
                count=lambda: self._count(conn, query),
            )

    def latest_runs(self, jobs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], RunSummary]:
        names = {name_key(ns, nm): (ns, nm) for ns, nm in jobs}
        jobs_t, runs = self.t["jobs"], self.t["runs"]
        out: dict[tuple[str, str], RunSummary] = {}
        with self.engine.connect() as conn:
            for chunk in _key_chunks(conn, names):
                query = (
                    sa.select(runs)
                    .join(jobs_t, runs.c.run_id == jobs_t.c.latest_run_id)
                    .where(_member(conn, jobs_t.c.job_key, chunk))
                )
                for row in conn.execute(query):
                    key = names[row.job_key]
                    out[key] = self._run_summary(row, {row.job_key: key})
        return out

    def column_lineage(
        self,
        node: str,
        *,
        depth: int = 20,
        with_downstream: bool = False,
        node_limit: int | None = None,
    ) -> ColumnGraph:
        """Fields ``depth`` column hops from ``node``, one indexed ``IN`` query per hop, all on
        one connection (see :func:`lineage_sdk.collector.columns.walk_columns`)."""
        edges = self.t["column_edges"]
        c = edges.c

        def out_ref(row: Any) -> FieldRef:
            return FieldRef(row.out_namespace, row.out_dataset, row.out_field)

        def in_ref(row: Any) -> FieldRef:
            return FieldRef(row.in_namespace, row.in_dataset, row.in_field)

        with self.engine.connect() as conn:

            def roots(root: ColumnRoot) -> list[FieldRef]:
                if root.field is not None:
                    ref = FieldRef(root.namespace, root.name, root.field)
                    key = field_key(ref)
                    for column in (c.out_key, c.in_key):
                        if conn.execute(sa.select(column).where(column == key).limit(1)).first():
                            return [ref]
                    return []
                if root.kind == "JOB":
                    io = self.t["job_io"]
                    ds_keys = set(
                        conn.execute(
                            sa.select(io.c.dataset_key).where(
                                io.c.job_key == name_key(root.namespace, root.name),
                                io.c.direction == "out",
                            )
                        ).scalars()
                    )
                else:
                    ds_keys = {name_key(root.namespace, root.name)}
                found: set[FieldRef] = set()
                for column, side in ((c.out_dataset_key, "out_"), (c.in_dataset_key, "in_")):
                    names = (c[f"{side}namespace"], c[f"{side}dataset"], c[f"{side}field"])
                    for chunk in _key_chunks(conn, ds_keys):
                        query = sa.select(*names).where(_member(conn, column, chunk))
                        rows = conn.execute(query.distinct())
                        found.update(FieldRef(*row) for row in rows)
                return sorted(f for f in found if name_key(f.namespace, f.dataset) in ds_keys)

            def step(fields: Sequence[FieldRef], upstream: bool) -> list[ColumnEdge]:
                column = c.out_key if upstream else c.in_key
                keys = sorted({field_key(f) for f in fields})
                found: list[ColumnEdge] = []
                for chunk in _key_chunks(conn, keys):
                    for row in conn.execute(sa.select(edges).where(_member(conn, column, chunk))):
                        found.append(ColumnEdge(out_ref(row), in_ref(row), row.info))
                return found

            return walk_columns(
                node,
                roots,
                step,
                depth=depth,
                with_downstream=with_downstream,
                node_limit=node_limit,
            )

    # -- portability: raw events in (event_time, event_id) order (lineage_sdk.collector.portability)

    def _raw_filtered(
        self,
        query: Any,
        namespace: str | None,
        since: datetime | None,
        until: datetime | None,
    ) -> Any:
        """``query`` over the events table narrowed by the filters of :class:`RawEventSource`.

        A DatasetEvent has no job: it passes the namespace filter here and is checked on its
        payload by the caller.
        """
        ev, jobs = self.t["events"], self.t["jobs"]
        if since is not None:
            query = query.where(ev.c.event_time >= since)
        if until is not None:
            query = query.where(ev.c.event_time < until)
        if namespace is not None:
            in_namespace = sa.select(jobs.c.job_key).where(jobs.c.namespace == namespace)
            query = query.where(sa.or_(ev.c.job_key.in_(in_namespace), ev.c.kind == "dataset"))
        return query

    def iter_raw_events(
        self,
        *,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: tuple[datetime, str] | None = None,
        batch_size: int = 1000,
    ) -> Iterator[RawEvent]:
        """Every stored event as received, ordered by (event time, event id), through one
        server-side cursor (PostgreSQL) or one stepped statement (SQLite): flat memory."""
        ev = self.t["events"]
        query = self._raw_filtered(
            sa.select(ev.c.event_id, ev.c.event_time, ev.c.payload, ev.c.kind),
            namespace,
            since,
            until,
        )
        if after is not None:
            at, last_id = after
            query = query.where(
                sa.or_(
                    ev.c.event_time > at, sa.and_(ev.c.event_time == at, ev.c.event_id > last_id)
                )
            )
        query = query.order_by(ev.c.event_time, ev.c.event_id)
        try:
            with self.engine.connect() as conn:
                rows = conn.execution_options(stream_results=True, yield_per=batch_size).execute(
                    query
                )
                for event_id, event_time, payload, kind in rows:
                    if (
                        namespace is not None
                        and kind == "dataset"
                        and event_namespace(orjson.loads(payload)) != namespace
                    ):
                        continue
                    yield RawEvent(event_id, event_time, payload)
        except sa_exc.SQLAlchemyError as exc:
            raise StoreError(self.name, f"{self._safe_url}: {_reason(exc)}") from None

    def count_raw_events(
        self,
        *,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> int | None:
        """How many events ``iter_raw_events`` yields (with a namespace, DatasetEvents of any
        namespace are counted: they are few, and only the progress bar reads this)."""
        ev = self.t["events"]
        query = self._raw_filtered(
            sa.select(sa.func.count()).select_from(ev), namespace, since, until
        )
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def stored_event_ids(self, event_ids: Sequence[str]) -> set[str]:
        """Which of ``event_ids`` are stored (one indexed IN query per 500 ids)."""
        ev = self.t["events"]
        found: set[str] = set()
        with self.engine.connect() as conn:
            for chunk in _chunks(sorted(set(event_ids))):
                found.update(
                    conn.execute(sa.select(ev.c.event_id).where(ev.c.event_id.in_(chunk))).scalars()
                )
        return found

    # -- retention and deletion (lineage_sdk.collector.retention) --------------------------------

    def delete_events(self, event_ids: Sequence[str]) -> int:
        """Remove these raw events and make, in the same transaction, the derived rows equal to
        what the remaining events derive.

        Derived rows are aggregates over events and cannot be "un-merged", so what the deleted
        events touched is derived again, at a cost proportional to the batch, not to the jobs'
        or datasets' whole history:

        * their runs: the run rows and run edges are removed and rebuilt from the run's
          remaining events (the store's own write path);
        * a column edge whose winning statement (greatest rank) was deleted is removed and
          rebuilt from the remaining events that may state it (those touching its dataset and
          carrying a ``columnLineage`` facet); one whose winner remains is left as it is;
        * their jobs: job edges are recomputed in SQL from the remaining events' runs (a run
          belongs to one job) plus the job's run-less events; the latest run is recomputed from
          the job's events; a job no remaining event names (as its job or, checked on its known
          child runs, as a parent) is removed;
        * their datasets: a dataset no run edge, job edge or remaining DatasetEvent names is
          removed.

        One call is one short transaction; the caller batches. Returns how many events were
        removed (deleting twice is a no-op).
        """
        ids = sorted(set(event_ids))
        if not ids:
            return 0
        for attempt in range(_DEADLOCK_RETRIES + 1):
            try:
                prepared = self._prepared(self.engine.dialect)
                with self._writing() as conn:
                    return _Forget(self, conn, prepared).run(ids)
            except StoreError:
                raise
            except sa_exc.OperationalError as exc:
                # A writer took a lock of a job this batch re-derives after the batch locked it
                # (see _Forget.run); PostgreSQL rolled one of the two back: do the batch again.
                if attempt < _DEADLOCK_RETRIES and _deadlock(exc):
                    continue
                raise StoreError(self.name, f"{self._safe_url}: {_reason(exc)}") from None
            except sa_exc.SQLAlchemyError as exc:
                raise StoreError(self.name, f"{self._safe_url}: {_reason(exc)}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def job_events_up_to(
        self, jobs: Sequence[tuple[str, str]], as_of: datetime
    ) -> list[tuple[str, dict[str, Any]]]:
        """(event id, event) of the run events of ``jobs`` with ``eventTime <= as_of``, in
        (event time, event id) order: the time bound is applied on the ``(job_key,
        event_time)`` index, not after reading every event of the jobs (history's ``asOf``)."""
        ev = self.t["events"]
        until = as_of + timedelta(microseconds=1)
        rows: list[tuple[datetime, str, Any]] = []
        try:
            with self.engine.connect() as conn:
                for chunk in _key_chunks(conn, (name_key(ns, nm) for ns, nm in jobs)):
                    query = sa.select(ev.c.event_time, ev.c.event_id, ev.c.payload).where(
                        _member(conn, ev.c.job_key, chunk),
                        ev.c.event_time < until,
                        ev.c.run_id.is_not(None),
                    )
                    rows.extend((t, i, p) for t, i, p in conn.execute(query))
        except sa_exc.SQLAlchemyError as exc:
            raise StoreError(self.name, f"{self._safe_url}: {_reason(exc)}") from None
        rows.sort(key=lambda row: (row[0], row[1]))
        return [(event_id, orjson.loads(payload)) for _, event_id, payload in rows]

    def child_runs(self, run_id: str) -> list[str]:
        """The runs whose parent (the least their events name) is ``run_id``, sorted: read on
        the ``parent_run_id`` index (history's ``runId``: a run with its children)."""
        runs = self.t["runs"]
        query = sa.select(runs.c.run_id).where(runs.c.parent_run_id == run_id)
        try:
            with self.engine.connect() as conn:
                return sorted(str(r) for r in conn.execute(query).scalars())
        except sa_exc.SQLAlchemyError as exc:
            raise StoreError(self.name, f"{self._safe_url}: {_reason(exc)}") from None


class _FirstSeenUnknown(Exception):
    """An edge an ``asOf`` walk reads was written before ``first_seen`` existed (NULL)."""


class _Statement:
    """One compiled upsert, and how to hand it rows built in table-column order."""

    __slots__ = ("columns", "order", "positional", "sql")

    def __init__(
        self,
        sql: str,
        columns: tuple[str, ...],
        *,
        positional: bool,
        order: tuple[int, ...] | None = None,
    ) -> None:
        self.sql = sql
        self.columns = columns
        self.positional = positional
        self.order = order  # parameter positions, when they differ from column order

    def bind(self, rows: list[tuple[Any, ...]]) -> list[Any]:
        if not self.positional:
            return [dict(zip(self.columns, row, strict=True)) for row in rows]
        if self.order is None:
            return rows
        order = self.order
        return [tuple(row[i] for i in order) for row in rows]


class _Prepared:
    __slots__ = ("bind_time", "statements")

    def __init__(self, statements: dict[str, _Statement], bind_time: Callable[[Any], Any]) -> None:
        self.statements = statements
        self.bind_time = bind_time


class _BatchRows:
    """A batch turned into de-duplicated rows per table, merged in Python first so that one
    statement never touches the same key twice (PostgreSQL refuses that in ON CONFLICT).

    Rows are tuples in table-column order, times already bound for the database (``bind_time``
    once per distinct instant); run rows are merged as datetimes and bound at the end.
    """

    __slots__ = (
        "column_edges",
        "datasets",
        "events",
        "job_io",
        "jobs",
        "run_io",
        "runs",
        "static_refs",
    )

    def __init__(self, records: Sequence[LineageRecord], bind_time: Callable[[Any], Any]) -> None:
        self.events: list[tuple[Any, ...]] = []
        bound: dict[datetime, Any] = {}
        keys: dict[tuple[str, str], str] = {}
        runs: dict[str, dict[str, Any]] = {}
        # edge -> the least time the batch states it (first_seen)
        run_io: dict[tuple[str, str, str], datetime] = {}
        job_io: dict[tuple[str, str, str], datetime] = {}
        ds_rows: dict[str, tuple[Any, ...]] = {}
        job_rows: dict[str, list[Any]] = {}
        seen_events: set[str] = set()
        edges: dict[tuple[str, str], tuple[Any, ...]] = {}
        static_refs: set[tuple[str, str, str]] = set()

        fields: dict[FieldRef, str] = {}

        def field_of(ref: FieldRef) -> str:
            found = fields.get(ref)
            if found is None:
                found = fields[ref] = field_key(ref)
            return found

        def key_of(namespace: str, name: str) -> str:
            found = keys.get((namespace, name))
            if found is None:
                found = keys[(namespace, name)] = name_key(namespace, name)
            return found

        for rec in records:
            if rec.event_id in seen_events:
                continue
            seen_events.add(rec.event_id)
            job_key = None
            if rec.job_namespace is not None and rec.job_name is not None:
                job_key = key_of(rec.job_namespace, rec.job_name)
                row = job_rows.get(job_key)
                if row is None:
                    row = job_rows[job_key] = [job_key, rec.job_namespace, rec.job_name, None, None]
                if rec.run_id and (
                    row[4] is None or (rec.event_time, row[3]) > (row[4], rec.run_id)
                ):  # the latest event's run; the least run id among equals
                    row[3], row[4] = rec.run_id, rec.event_time
            if rec.parent_job_namespace and rec.parent_job_name:
                pkey = key_of(rec.parent_job_namespace, rec.parent_job_name)
                if pkey not in job_rows:
                    parent_ns, parent_name = rec.parent_job_namespace, rec.parent_job_name
                    job_rows[pkey] = [pkey, parent_ns, parent_name, None, None]
            event_time = bound.get(rec.event_time)
            if event_time is None:
                event_time = bound[rec.event_time] = bind_time(rec.event_time)
            self.events.append(
                (
                    rec.event_id,
                    rec.kind,
                    rec.event_type,
                    event_time,
                    rec.event_time_raw,
                    rec.run_id,
                    job_key,
                    rec.producer,
                    orjson.dumps(rec.event).decode(),
                )
            )
            for refs, direction in ((rec.inputs, "in"), (rec.outputs, "out")):
                for ref in refs:
                    dkey = key_of(ref.namespace, ref.name)
                    if dkey not in ds_rows:
                        ds_rows[dkey] = (dkey, ref.namespace, ref.name)
                    if rec.run_id:
                        _earliest(run_io, (rec.run_id, dkey, direction), rec.event_time)
                    if job_key is not None:
                        _earliest(job_io, (job_key, dkey, direction), rec.event_time)
            if rec.run_id:
                _merge_run(runs, rec, job_key)
            elif rec.kind == "job" and job_key is not None:
                static_refs.add(("job", job_key, rec.event_id))
            elif rec.kind == "dataset":
                for ref in rec.outputs:
                    static_refs.add(("dataset", key_of(ref.namespace, ref.name), rec.event_id))
            stated = column_edges(rec)
            if stated:
                rank = edge_rank(rec.event_time, rec.event_id)
                for (out, src), info in stated.items():
                    pair = (field_of(out), field_of(src))
                    old = edges.get(pair)
                    if old is None or rank > old[-1]:
                        edges[pair] = (
                            *pair,
                            key_of(out.namespace, out.dataset),
                            key_of(src.namespace, src.dataset),
                            out.namespace,
                            out.dataset,
                            out.field,
                            src.namespace,
                            src.dataset,
                            src.field,
                            info,
                            rank,
                        )
        # Every table's rows in key order: collectors writing at once then take row locks in one
        # order, so PostgreSQL never has to break a deadlock between them (and retry a batch).
        self.events.sort(key=lambda row: row[0])
        self.datasets = sorted(ds_rows.values())
        self.jobs = [
            (k, ns, nm, run_id, None if t is None else bound.get(t) or bind_time(t))
            for k, ns, nm, run_id, t in sorted(job_rows.values(), key=lambda row: row[0])
        ]
        columns = ("started_at", "ended_at", "first_event_time", "state_time")
        for run in runs.values():
            for column in columns:
                value = run[column]
                if value is not None:
                    run[column] = bound.get(value) or bind_time(value)
        self.runs = [
            (
                r["run_id"],
                r["job_key"],
                r["state"],
                r["state_rank"],
                r["state_time"],
                r["started_at"],
                r["ended_at"],
                r["first_event_time"],
                r["parent_run_id"],
                r["root_run_id"],
                r["heartbeat_s"],
            )
            for r in sorted(runs.values(), key=lambda row: row["run_id"])
        ]
        self.run_io = [(*edge, bound[run_io[edge]]) for edge in sorted(run_io)]
        self.job_io = [(*edge, bound[job_io[edge]]) for edge in sorted(job_io)]
        self.column_edges = [edges[pair] for pair in sorted(edges)]
        self.static_refs = sorted(static_refs)


def _earliest(
    seen: dict[tuple[str, str, str], datetime], edge: tuple[str, str, str], at: datetime
) -> None:
    """Keep the least time ``edge`` is stated at (its ``first_seen``)."""
    old = seen.get(edge)
    if old is None or at < old:
        seen[edge] = at


def _merge_run(runs: dict[str, dict[str, Any]], rec: LineageRecord, job_key: str | None) -> None:
    """Fold ``rec`` into the batch's row for its run, by the rules the upsert applies."""
    state = run_state(rec.event_type)
    rank = STATE_RANK.get(state or "", 0)
    t = rec.event_time
    run_id = rec.run_id or ""
    old = runs.get(run_id)
    if old is None:
        runs[run_id] = {
            "run_id": rec.run_id,
            "job_key": job_key,
            "state": state,
            "state_rank": rank,
            "state_time": t,
            "started_at": t if state == "START" else None,
            "ended_at": t if state in TERMINAL_STATES else None,
            "first_event_time": t,
            "parent_run_id": rec.parent_run_id or None,
            "root_run_id": rec.root_run_id or None,
            "heartbeat_s": heartbeat_interval(rec.event),
        }
        return
    if (rank, t, state or "") >= (old["state_rank"], old["state_time"], old["state"] or ""):
        old["state"], old["state_rank"], old["state_time"] = state, rank, t
    if state == "START":
        old["started_at"] = t if old["started_at"] is None else min(old["started_at"], t)
    if state in TERMINAL_STATES:
        old["ended_at"] = t if old["ended_at"] is None else max(old["ended_at"], t)
    old["first_event_time"] = min(old["first_event_time"], t)
    old["heartbeat_s"] = pick_interval((old["heartbeat_s"], heartbeat_interval(rec.event)))
    for column, value in (
        ("job_key", job_key),
        ("parent_run_id", rec.parent_run_id),
        ("root_run_id", rec.root_run_id),
    ):
        old[column] = pick_link((old[column], value))


def _reason(exc: BaseException) -> str:
    """One line naming the database's complaint, with any password in it removed."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip().splitlines()
    return redact(f"{type(orig or exc).__name__}: {text[0] if text else ''}")[:500]


class _Forget:
    """One :meth:`SqlStore.delete_events` transaction (see there for what is derived again)."""

    def __init__(self, store: SqlStore, conn: Connection, prepared: _Prepared) -> None:
        self.store, self.conn, self.prepared, self.t = store, conn, prepared, store.t

    def keys(self, query: Callable[[Sequence[str]], Any], keys: Iterable[str]) -> list[Any]:
        """Rows of ``query(chunk)`` over ``keys`` in chunks of the IN-list size."""
        rows: list[Any] = []
        for chunk in _chunks(sorted(set(keys))):
            rows.extend(self.conn.execute(query(chunk)))
        return rows

    def delete(self, table: str, column: str, keys: Iterable[str]) -> None:
        tbl = self.t[table]
        for chunk in _chunks(sorted(set(keys))):
            self.conn.execute(tbl.delete().where(tbl.c[column].in_(chunk)))

    def rewrite(self, event_ids: Iterable[str]) -> list[LineageRecord]:
        """Write the remaining events ``event_ids`` again through the store's write path."""
        from lineage_sdk.collector.decode import PoisonMessage, validate_event

        ev = self.t["events"]
        records: list[LineageRecord] = []
        for (payload,) in self.keys(
            lambda c: sa.select(ev.c.payload).where(ev.c.event_id.in_(c)), event_ids
        ):
            with contextlib.suppress(PoisonMessage):  # stored, so valid when written
                records.append(validate_event(orjson.loads(payload)))
        for start in range(0, len(records), _CHUNK):
            batch = _BatchRows(records[start : start + _CHUNK], self.prepared.bind_time)
            self.store._write(self.conn, self.prepared, batch)
        return records

    def run(self, ids: list[str]) -> int:
        from lineage_sdk.collector.decode import PoisonMessage, validate_event

        t, conn = self.t, self.conn
        ev, runs, io, ce = t["events"], t["runs"], t["run_io"], t["column_edges"]
        found = self.keys(
            lambda c: sa.select(ev.c.event_id, ev.c.run_id, ev.c.job_key, ev.c.payload).where(
                ev.c.event_id.in_(c)
            ),
            ids,
        )
        if not found:
            return 0
        run_ids: set[str] = set()
        job_keys: set[str] = set()
        parents_of: dict[str, set[str]] = {}  # parent job key -> parent run ids named
        datasets: set[str] = set()
        stated: dict[tuple[str, str], set[str]] = {}  # column edge -> ranks deleted
        for event_id, run_id, job_key, payload in found:
            event = orjson.loads(payload)
            if run_id:
                run_ids.add(run_id)
            if job_key:
                job_keys.add(job_key)
            mention = event_mentions(event)
            for ns, nm in mention.parent_jobs:
                parents_of.setdefault(name_key(ns, nm), set()).update(mention.parent_runs)
            datasets.update(name_key(ns, nm) for ns, nm in mention.datasets)
            if '"columnLineage"' in payload:
                try:
                    rec = validate_event(event)
                except PoisonMessage:
                    continue
                rank = edge_rank(rec.event_time, event_id)
                for out, src in column_edges(rec):
                    stated.setdefault((field_key(out), field_key(src)), set()).add(rank)
        job_keys.update(parents_of)
        # Writers lock job rows (their upsert) before runs and edges, in key order. Locking the
        # touched jobs first, in the same order, before deleting anything, makes a writer of
        # those jobs wait for this short transaction instead of deadlocking with it.
        jobs = t["jobs"]
        for chunk in _chunks(sorted(job_keys)):
            conn.execute(
                sa.select(jobs.c.job_key)
                .where(jobs.c.job_key.in_(chunk))
                .order_by(jobs.c.job_key)
                .with_for_update()
            )
        # The runs of the touched jobs, before any row goes: their children name the job.
        runs_of_jobs: dict[str, set[str]] = {}
        for run_id, job_key in self.keys(
            lambda c: sa.select(runs.c.run_id, runs.c.job_key).where(runs.c.job_key.in_(c)),
            job_keys,
        ):
            runs_of_jobs.setdefault(job_key, set()).add(run_id)
        self.delete("events", "event_id", [row[0] for row in found])
        # The static-lineage index of a deleted JobEvent or DatasetEvent goes with it.
        self.delete("static_refs", "event_id", [row[0] for row in found])

        rederive: set[str] = set()
        # Runs: rebuilt from their remaining events.
        self.delete("runs", "run_id", run_ids)
        self.delete("run_io", "run_id", run_ids)
        rederive.update(
            r[0]
            for r in self.keys(
                lambda c: sa.select(ev.c.event_id).where(ev.c.run_id.in_(c)), run_ids
            )
        )
        # Column edges whose winning statement is gone: rebuilt from the events that may state them.
        lost: set[str] = set()  # their datasets
        # By output field, on the primary key's first column: a (out, in) row-value IN list is
        # a scan of the whole table in SQLite. The few edges of other inputs are skipped here.
        for out_key, in_key, rank, out_ds in self.keys(
            lambda c: sa.select(ce.c.out_key, ce.c.in_key, ce.c.rank, ce.c.out_dataset_key).where(
                ce.c.out_key.in_(c)
            ),
            (out_key for out_key, _ in stated),
        ):
            if rank in stated.get((out_key, in_key), ()):
                conn.execute(ce.delete().where(ce.c.out_key == out_key, ce.c.in_key == in_key))
                lost.add(out_ds)
        if lost:
            stating = ev.c.payload.like('%"columnLineage"%')
            runs_of_lost = sa.select(io.c.run_id)
            rederive.update(
                r[0]
                for r in self.keys(
                    lambda c: sa.select(ev.c.event_id).where(
                        ev.c.run_id.in_(runs_of_lost.where(io.c.dataset_key.in_(c))), stating
                    ),
                    lost,
                )
            )
            rederive.update(
                conn.execute(
                    sa.select(ev.c.event_id).where(ev.c.run_id.is_(None), stating)
                ).scalars()
            )
        # Jobs: edges and latest run recomputed; run-less events (JobEvents) written again.
        self.delete("job_io", "job_key", job_keys)
        rederive.update(
            r[0]
            for r in self.keys(
                lambda c: sa.select(ev.c.event_id).where(
                    ev.c.job_key.in_(c), ev.c.run_id.is_(None)
                ),
                job_keys,
            )
        )
        self.rewrite(rederive)
        self._jobs(job_keys, runs_of_jobs, parents_of)
        self._datasets(datasets)
        return len(found)

    def _jobs(
        self, job_keys: set[str], runs_of_jobs: dict[str, set[str]], parents_of: dict[str, set[str]]
    ) -> None:
        t, conn = self.t, self.conn
        ev, io, jobs, runs = t["events"], t["run_io"], t["jobs"], t["runs"]
        # Two indexed lookups (a join lets PostgreSQL pick a scan of run_io): the jobs' runs,
        # then those runs' edges.
        job_of_runs: dict[str, set[str]] = {}
        for job_key, run_id in self.keys(
            lambda c: (
                sa.select(ev.c.job_key, ev.c.run_id)
                .distinct()
                .where(ev.c.job_key.in_(c), ev.c.run_id.is_not(None))
            ),
            job_keys,
        ):
            job_of_runs.setdefault(run_id, set()).add(job_key)
        # edge -> the least first_seen of its runs' edges; None when one of them is unknown
        rows: dict[tuple[str, str, str], datetime | None] = {}
        for run_id, dataset_key, direction, first_seen in self.keys(
            lambda c: sa.select(
                io.c.run_id, io.c.dataset_key, io.c.direction, io.c.first_seen
            ).where(io.c.run_id.in_(c)),
            job_of_runs,
        ):
            for job_key in job_of_runs[run_id]:
                edge = (job_key, dataset_key, direction)
                old = rows.get(edge, first_seen)
                unknown = old is None or first_seen is None
                rows[edge] = None if unknown else min(old, first_seen)
        if rows:
            bind = self.prepared.bind_time
            statement = self.prepared.statements["job_io"]
            conn.exec_driver_sql(
                statement.sql,
                statement.bind(
                    [(*edge, None if at is None else bind(at)) for edge, at in sorted(rows.items())]
                ),
            )
            # The upsert keeps a rewritten JobEvent's time over NULL; unknown must stay unknown.
            lost = [edge for edge, at in sorted(rows.items()) if at is None]
            if lost:
                job_io = t["job_io"]
                conn.execute(
                    job_io.update()
                    .where(
                        job_io.c.job_key == sa.bindparam("job"),
                        job_io.c.dataset_key == sa.bindparam("dataset"),
                        job_io.c.direction == sa.bindparam("way"),
                    )
                    .values(first_seen=None),
                    [{"job": j, "dataset": d, "way": w} for j, d, w in lost],
                )
        latest: dict[str, tuple[Any, str]] = dict(self.store._latest_run_events(conn, job_keys))
        update = (
            jobs.update()
            .where(jobs.c.job_key == sa.bindparam("key"))
            .values(latest_run_id=sa.bindparam("run"), latest_run_time=sa.bindparam("at"))
        )
        none: tuple[Any, str | None] = (None, None)
        latest_rows = [(key, *latest.get(key, none)) for key in sorted(job_keys)]
        if latest_rows:  # one executemany for every touched job (none: a DatasetEvent's batch)
            conn.execute(
                update, [{"key": key, "at": at, "run": run} for key, at, run in latest_rows]
            )
        # Jobs no remaining event names: gone, unless a known child run names them as parent.
        named = {
            r[0]
            for r in self.keys(
                lambda c: sa.select(ev.c.job_key).distinct().where(ev.c.job_key.in_(c)), job_keys
            )
        }
        orphans = job_keys - named
        if not orphans:
            return
        parent_runs = set().union(
            *(runs_of_jobs.get(k, set()) | parents_of.get(k, set()) for k in orphans)
        )
        children = {
            r[0]
            for r in self.keys(
                lambda c: sa.select(runs.c.run_id).where(runs.c.parent_run_id.in_(c)), parent_runs
            )
        }
        for (payload,) in self.keys(
            lambda c: sa.select(ev.c.payload).where(ev.c.run_id.in_(c)), children
        ):
            mention = event_mentions(orjson.loads(payload))
            orphans -= {name_key(ns, nm) for ns, nm in mention.parent_jobs}
        self.delete("jobs", "job_key", orphans)

    def _datasets(self, datasets: set[str]) -> None:
        t, conn = self.t, self.conn
        ev, io, job_io, ds = t["events"], t["run_io"], t["job_io"], t["datasets"]
        used = {
            r[0]
            for query in (
                lambda c: sa.select(io.c.dataset_key).distinct().where(io.c.dataset_key.in_(c)),
                lambda c: (
                    sa.select(job_io.c.dataset_key).distinct().where(job_io.c.dataset_key.in_(c))
                ),
            )
            for r in self.keys(query, datasets)
        }
        unused = datasets - used
        if unused:  # a remaining DatasetEvent (no run, no job) may still name one
            names = {
                r[0]: (r[1], r[2])
                for r in self.keys(
                    lambda c: sa.select(ds.c.dataset_key, ds.c.namespace, ds.c.name).where(
                        ds.c.dataset_key.in_(c)
                    ),
                    unused,
                )
            }
            if names:
                for (payload,) in conn.execute(
                    sa.select(ev.c.payload).where(ev.c.job_key.is_(None), ev.c.run_id.is_(None))
                ):
                    mention = event_mentions(orjson.loads(payload))
                    unused -= {name_key(ns, nm) for ns, nm in mention.datasets}
        self.delete("datasets", "dataset_key", unused)


_DEADLOCK_RETRIES = 3


def _deadlock(exc: sa_exc.OperationalError) -> bool:
    """PostgreSQL's deadlock (SQLSTATE 40P01) or serialization failure (40001)."""
    orig = getattr(exc, "orig", None)
    return getattr(orig, "sqlstate", None) in ("40P01", "40001")
