"""The watch's state, shared by a fleet of collectors: causes, schema candidates, the latest
schema of each dataset, live runs and alert rows, in SQLite or PostgreSQL (SQLAlchemy 2 Core).

Why it looks like this:

* Everything the watch knows is in these rows, nothing only in memory, so a collector killed
  with alerts pending sends them when it (or another) starts on the same store.
* Ids are primary keys and every write of the ingest path is insert-if-absent (``INSERT ... ON
  CONFLICT DO NOTHING``): the same cause noticed twice (a redelivered event, two collectors) is
  one row. :meth:`WatchStore.record` is one transaction of ``executemany`` statements and reads
  nothing first.
* Work is taken by leases (``claimed_by``, ``claimed_until``): a claim is one ``UPDATE ...
  WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING`` on PostgreSQL, so collectors
  claiming at the same moment never take the same row; SQLite's write transactions are
  serialized (``BEGIN IMMEDIATE``), which gives the same. A lease that runs out (its owner
  died) is claimed again.
* The engine is the sql store's
  (:func:`~lineage_sdk.collector.stores.sql_backend.create_sql_engine`): SQLite in WAL with a
  busy timeout, PostgreSQL with a small pre-pinged pool. Tables are named ``lineage_watch_*``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, Self, TypeVar

import orjson
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Connection, Engine

from lineage_sdk.collector.stores.sql_backend import (
    UTCDateTime,
    _changing_schema,
    _chunks,
    _made_meanwhile,
    _reason,
    _store_error,
    create_sql_engine,
    name_key,
    sql_reading,
    sql_writing,
)
from lineage_sdk.collector.watch.model import Alert, Beat, Cause, Key, Noticed, SchemaSeen
from lineage_sdk.config.redaction import redact
from lineage_sdk.exceptions import ConfigError, StoreError

__all__ = ["ALERT_STATUSES", "TABLE_PREFIX", "Outcome", "WatchStore"]

TABLE_PREFIX = "lineage_watch_"
ALERT_STATUSES = ("pending", "sent", "parked")
#: Indexes of the first release, replaced by ones that hold their claims' whole order.
_REPLACED_INDEXES = tuple(
    f"{TABLE_PREFIX}{name}" for name in ("causes_todo", "pending_schemas_time", "alerts_due")
)
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one attempt at an alert came to (:meth:`WatchStore.settle`): ``sent`` (``at`` its
    time), ``pending`` again from ``next_at`` (retried), or ``parked``; ``error`` why not sent."""

    alert_id: str
    status: Literal["sent", "pending", "parked"]
    at: datetime
    next_at: datetime | None = None
    error: str | None = None


def _outcome_updates(t: sa.Table) -> dict[str, Any]:
    """:meth:`WatchStore.settle`'s statement for each outcome, built once (building one costs
    more than running it): the attempt counted and the lease released; a sent alert is never
    made pending or parked by a late outcome, a parked one is never made pending."""

    def ended(*where: Any, **values: Any) -> Any:
        return (
            sa.update(t)
            .where(t.c.id == sa.bindparam("alert_id"), *where)
            .values(attempts=t.c.attempts + 1, claimed_by=None, claimed_until=None, **values)
        )

    return {
        "sent": ended(
            t.c.status != "sent", status="sent", sent_at=sa.bindparam("ended_at"), last_error=None
        ),
        "pending": ended(
            t.c.status == "pending",
            next_at=sa.bindparam("due_at"),
            last_error=sa.bindparam("error"),
        ),
        "parked": ended(t.c.status == "pending", status="parked", last_error=sa.bindparam("error")),
    }


def _tables(metadata: sa.MetaData) -> dict[str, sa.Table]:
    p = TABLE_PREFIX
    when = UTCDateTime
    causes = sa.Table(
        f"{p}causes",
        metadata,
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("subject", sa.Text, nullable=False),
        sa.Column("namespace", sa.Text, nullable=False),
        sa.Column("time", when, nullable=False),
        sa.Column("data", sa.Text, nullable=False),  # JSON
        sa.Column("done", sa.Boolean, nullable=False, default=False),
        sa.Column("noticed_at", when, nullable=False),
        sa.Column("claimed_by", sa.Text),
        sa.Column("claimed_until", when),
    )
    # Every claim's order is in its index, id last: without it each claim sorted every row
    # waiting (6 ms of CPU a claim with 4,750 alerts pending, measured with bench_api --watch).
    sa.Index(f"{p}causes_next", causes.c.done, causes.c.noticed_at, causes.c.id)
    pending = sa.Table(
        f"{p}pending_schemas",
        metadata,
        # name_key(dataset) + ":" + event_id: one candidate per dataset and event.
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("dataset_ns", sa.Text, nullable=False),
        sa.Column("dataset_name", sa.Text, nullable=False),
        sa.Column("event_id", sa.Text, nullable=False),
        sa.Column("event_time", when, nullable=False),
        sa.Column("job_ns", sa.Text),
        sa.Column("job_name", sa.Text),
        sa.Column("run_id", sa.Text),
        sa.Column("fields", sa.Text, nullable=False),  # JSON
        sa.Column("claimed_by", sa.Text),
        sa.Column("claimed_until", when),
    )
    sa.Index(f"{p}pending_schemas_next", pending.c.event_time, pending.c.id)
    schemas = sa.Table(
        f"{p}schemas",
        metadata,
        sa.Column("dataset_key", sa.String(32), primary_key=True),  # name_key(ns, name)
        sa.Column("dataset_ns", sa.Text, nullable=False),
        sa.Column("dataset_name", sa.Text, nullable=False),
        sa.Column("event_id", sa.Text, nullable=False),
        sa.Column("event_time", when, nullable=False),
        sa.Column("job_ns", sa.Text),
        sa.Column("job_name", sa.Text),
        sa.Column("run_id", sa.Text),
        sa.Column("fields", sa.Text, nullable=False),  # JSON
    )
    live = sa.Table(
        f"{p}live",
        metadata,
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("job_ns", sa.Text, nullable=False),
        sa.Column("job_name", sa.Text, nullable=False),
        sa.Column("interval_s", sa.Float, nullable=False),
        sa.Column("last_event", when, nullable=False),
    )
    alerts = sa.Table(
        f"{p}alerts",
        metadata,
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("cause_id", sa.Text, nullable=False),
        sa.Column("rule", sa.Text, nullable=False),
        sa.Column("body", sa.LargeBinary, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, default=0),
        sa.Column("first_at", when, nullable=False),
        sa.Column("next_at", when, nullable=False),
        sa.Column("last_error", sa.Text),
        sa.Column("sent_at", when),
        sa.Column("claimed_by", sa.Text),
        sa.Column("claimed_until", when),
    )
    sa.Index(f"{p}alerts_next", alerts.c.status, alerts.c.next_at, alerts.c.id)
    return {
        "causes": causes,
        "pending": pending,
        "schemas": schemas,
        "live": live,
        "alerts": alerts,
    }


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _now() -> datetime:
    return datetime.now(UTC)


def _key(ns: str | None, name: str | None) -> Key | None:
    return None if ns is None or name is None else (ns, name)


def _cause_row(c: Cause, at: datetime) -> dict[str, Any]:
    return {
        "id": c.id,
        "kind": c.kind,
        "subject": c.subject,
        "namespace": c.namespace,
        "time": c.time,
        "data": _json(c.data),
        "done": False,
        "noticed_at": at,
    }


def _alert_row(a: Alert) -> dict[str, Any]:
    return {
        "id": a.id,
        "cause_id": a.cause_id,
        "rule": a.rule,
        "body": a.body,
        "status": a.status,
        "attempts": a.attempts,
        "first_at": a.first_at,
        "next_at": a.next_at,
        "last_error": a.last_error,
        "sent_at": a.sent_at,
    }


def _schema_values(s: SchemaSeen) -> dict[str, Any]:
    job = s.job or (None, None)
    return {
        "dataset_ns": s.dataset[0],
        "dataset_name": s.dataset[1],
        "event_id": s.event_id,
        "event_time": s.event_time,
        "job_ns": job[0],
        "job_name": job[1],
        "run_id": s.run_id,
        "fields": _json(s.fields),
    }


def _seen(r: Any) -> SchemaSeen:
    return SchemaSeen(
        dataset=(r.dataset_ns, r.dataset_name),
        event_id=r.event_id,
        event_time=r.event_time,
        job=_key(r.job_ns, r.job_name),
        run_id=r.run_id,
        fields=orjson.loads(r.fields),
    )


def _cause(r: Any) -> Cause:
    return Cause(
        id=r.id,
        kind=r.kind,
        subject=r.subject,
        namespace=r.namespace,
        time=r.time,
        data=orjson.loads(r.data),
    )


def _alert(r: Any) -> Alert:
    return Alert(
        id=r.id,
        cause_id=r.cause_id,
        rule=r.rule,
        body=bytes(r.body),
        status=r.status,
        attempts=r.attempts,
        first_at=r.first_at,
        next_at=r.next_at,
        last_error=r.last_error,
        sent_at=r.sent_at,
    )


class WatchStore:
    """The watch's rows on ``url`` (``sqlite:///path`` or ``postgresql+psycopg://...``); see the
    module docstring. Thread-safe: every method takes its own connection."""

    name = "watch"

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self._url = url
        self._echo = echo
        #: The URL without its password (``check``, logs, errors).
        self.address = redact(url)
        self._metadata = sa.MetaData()
        self._t = _tables(self._metadata)
        self._engine: Engine | None = None
        self._pg = False
        self._record: tuple[Any, Any, Any, Any] | None = None
        self._outcome_updates = _outcome_updates(self._t["alerts"])

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def _db(self) -> Engine:
        if self._engine is None:
            raise StoreError(self.name, "watch store is not open")
        return self._engine

    def open(self) -> None:
        """Connect and create the tables that are missing (idempotent; safe for collectors
        opening the same database at once)."""
        if self._engine is not None:
            return
        try:
            engine = create_sql_engine(self._url, echo=self._echo)
            if engine.dialect.name not in ("sqlite", "postgresql"):
                engine.dispose()
                raise StoreError(
                    self.name,
                    f"unsupported SQL dialect {engine.dialect.name!r} (SQLite or PostgreSQL)",
                    permanent=True,
                )
            self._engine = engine
            self._pg = engine.dialect.name == "postgresql"
            self._record = None
            try:
                with _changing_schema(engine, TABLE_PREFIX) as conn:
                    self._create(conn)
            except (sa_exc.IntegrityError, sa_exc.ProgrammingError) as exc:
                if not _made_meanwhile(exc):
                    raise
                with _changing_schema(engine, TABLE_PREFIX) as conn:
                    self._create(conn)
        except (ConfigError, StoreError):
            self.close()
            raise
        except (sa_exc.SQLAlchemyError, ImportError, OSError) as exc:
            self.close()
            raise StoreError(self.name, f"cannot open {self.address}: {_reason(exc)}") from None

    def _create(self, conn: Connection) -> None:
        """The missing tables, and the missing indexes of tables an earlier release made (which
        ``create_all`` leaves alone); the indexes that release had and this one replaced are
        dropped."""
        self._metadata.create_all(conn, checkfirst=True)
        for table in self._metadata.tables.values():
            for index in table.indexes:
                index.create(conn, checkfirst=True)
        for old in _REPLACED_INDEXES:
            conn.execute(sa.text(f"DROP INDEX IF EXISTS {old}"))

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def missing(self) -> list[str]:
        """What :meth:`open` would create, found without changing anything (``lineage-collector
        check``); StoreError when the database cannot be reached."""
        url = sa.engine.make_url(self._url)
        path = url.database if url.get_backend_name() == "sqlite" else None
        if path not in (None, "", ":memory:") and not Path(str(path)).exists():
            return [f"database file {path}"]
        engine = create_sql_engine(self._url)
        try:
            with engine.connect() as conn:
                have = set(sa.inspect(conn).get_table_names())
        except sa_exc.SQLAlchemyError as exc:
            raise _store_error(self.name, self.address, exc) from None
        finally:
            engine.dispose()
        return [f"table {name}" for name in sorted(self._metadata.tables) if name not in have]

    def check(self) -> None:
        """Raise StoreError unless the database answers."""
        with self._reading() as conn:
            conn.execute(sa.select(sa.literal(1)))

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- connections ---------------------------------------------------------------------------

    def _reading(self) -> AbstractContextManager[Connection]:
        return sql_reading(self._db, self.name, self.address)

    def _writing(self, work: Callable[[Connection], _T]) -> _T:
        return sql_writing(self._db, self.name, self.address, work)

    def _insert(self, table: sa.Table) -> Any:
        return (pg_dialect.insert if self._pg else sqlite_dialect.insert)(table)

    def _if_absent(self, table: sa.Table) -> Any:
        return self._insert(table).on_conflict_do_nothing()

    # -- write path ----------------------------------------------------------------------------

    def record(self, noticed: Noticed) -> None:
        """What a stored batch noticed, in one transaction, reading nothing first: causes and
        schema candidates inserted if absent, heartbeats upserted (the latest event kept), the
        runs that ended removed from the live runs."""
        if not noticed:
            return
        at = _now()
        causes = [_cause_row(c, at) for c in noticed.causes]
        schemas = [
            {"id": f"{name_key(*s.dataset)}:{s.event_id}", **_schema_values(s)}
            for s in noticed.schemas
        ]
        beats: dict[str, Beat] = {}
        for b in noticed.beats:  # one row per run: an upsert may not change a row twice
            if b.run_id not in beats or beats[b.run_id].last_event < b.last_event:
                beats[b.run_id] = b
        ended = list(dict.fromkeys(noticed.ended))

        add_cause, add_schema, beat, end = self._record_statements()

        def work(conn: Connection) -> None:
            if causes:
                conn.execute(add_cause, causes)
            if schemas:
                conn.execute(add_schema, schemas)
            if beats:
                conn.execute(
                    beat,
                    [
                        {
                            "run_id": b.run_id,
                            "job_ns": b.job[0],
                            "job_name": b.job[1],
                            "interval_s": b.interval_s,
                            "last_event": b.last_event,
                        }
                        for b in beats.values()
                    ],
                )
            if ended:
                for chunk in _chunks(ended, 1000):
                    conn.execute(end, {"rids": list(chunk)})

        self._writing(work)

    def _record_statements(self) -> tuple[Any, Any, Any, Any]:
        """:meth:`record`'s statements, built once (building one costs more than running it)."""
        if self._record is None:
            t = self._t
            live = t["live"]
            ins = self._insert(live)
            beat = ins.on_conflict_do_update(
                index_elements=[live.c.run_id],
                set_={
                    "job_ns": ins.excluded.job_ns,
                    "job_name": ins.excluded.job_name,
                    "interval_s": ins.excluded.interval_s,
                    "last_event": ins.excluded.last_event,
                },
                where=live.c.last_event < ins.excluded.last_event,
            )
            # One statement for a batch's ended runs (most never sent a heartbeat): a delete
            # a run was most of record()'s time.
            end = sa.delete(live).where(live.c.run_id.in_(sa.bindparam("rids", expanding=True)))
            self._record = (
                self._if_absent(t["causes"]),
                self._if_absent(t["pending"]),
                beat,
                end,
            )
        return self._record

    # -- leases ----------------------------------------------------------------------------------

    def _claim(
        self,
        table: sa.Table,
        where: Sequence[Any],
        order_by: Sequence[Any],
        owner: str,
        now: datetime,
        limit: int,
        lease_s: float,
    ) -> list[Any]:
        """Lease up to ``limit`` rows matching ``where`` (and free: never claimed, or their lease
        ran out) to ``owner`` until ``now + lease_s``; the rows, in ``order_by`` order."""
        if limit <= 0:
            return []
        free = sa.or_(table.c.claimed_until.is_(None), table.c.claimed_until <= now)
        candidates = sa.select(table.c.id).where(*where, free)
        # A read first: most passes find nothing, and a claim is a write transaction, which on
        # SQLite takes the database's write lock that ingest shares (the watch's store is the
        # sql store's database by default); a read in WAL mode waits for no writer.
        with self._reading() as conn:
            if conn.execute(candidates.limit(1)).first() is None:
                return []
        pick = candidates.order_by(*order_by).limit(limit)
        if self._pg:
            pick = pick.with_for_update(skip_locked=True)
        stmt = (
            sa.update(table)
            .where(table.c.id.in_(pick.scalar_subquery()), *where, free)
            .values(claimed_by=owner, claimed_until=now + timedelta(seconds=lease_s))
            .returning(*table.c)
        )
        rows = self._writing(lambda conn: list(conn.execute(stmt)))
        return rows

    # -- causes (worker) -------------------------------------------------------------------------

    def claim_causes(
        self, owner: str, limit: int, lease_s: float, *, wait_s: float = 0.0
    ) -> list[Cause]:
        """Lease causes not resolved yet, noticed at least ``wait_s`` seconds ago, oldest
        noticed first."""
        t = self._t["causes"]
        now = _now()
        waited: list[Any] = [t.c.done.is_(False)]
        if wait_s > 0:
            waited.append(t.c.noticed_at <= now - timedelta(seconds=wait_s))
        rows = self._claim(t, waited, [t.c.noticed_at, t.c.id], owner, now, limit, lease_s)
        rows.sort(key=lambda r: (r.noticed_at, r.id))
        return [_cause(r) for r in rows]

    def resolve(self, cause_id: str, alerts: Sequence[Alert]) -> None:
        """The cause's alerts inserted if absent, and the cause marked done, in one transaction."""
        t = self._t
        rows = [_alert_row(a) for a in alerts]

        def work(conn: Connection) -> None:
            if rows:
                conn.execute(self._if_absent(t["alerts"]), rows)
            c = t["causes"]
            conn.execute(
                sa.update(c)
                .where(c.c.id == cause_id)
                .values(done=True, claimed_by=None, claimed_until=None)
            )

        self._writing(work)

    # -- schemas (worker) ------------------------------------------------------------------------

    def claim_schemas(self, owner: str, limit: int, lease_s: float) -> list[SchemaSeen]:
        """Lease schema candidates, oldest event first."""
        t = self._t["pending"]
        rows = self._claim(t, [], [t.c.event_time, t.c.id], owner, _now(), limit, lease_s)
        rows.sort(key=lambda r: (r.event_time, r.id))
        return [_seen(r) for r in rows]

    def previous_schemas(self, datasets: Collection[Key]) -> dict[Key, SchemaSeen]:
        """The latest schema settled for each of ``datasets`` that has one, in one read."""
        t = self._t["schemas"]
        keys = sorted({name_key(*d) for d in datasets})
        if not keys:
            return {}
        with self._reading() as conn:
            rows = conn.execute(sa.select(t).where(t.c.dataset_key.in_(keys))).all()
        found = (_seen(r) for r in rows)
        return {seen.dataset: seen for seen in found}

    def settle_schemas(self, settled: Sequence[tuple[SchemaSeen, Sequence[Cause]]]) -> None:
        """In one transaction, in order: each candidate kept as its dataset's latest schema
        unless a later one is (event time, then event id), its candidate row dropped, its
        causes added if absent."""
        if not settled:
            return
        t = self._t
        s = t["schemas"]
        ins = self._insert(s)
        newer = sa.or_(
            s.c.event_time < ins.excluded.event_time,
            sa.and_(
                s.c.event_time == ins.excluded.event_time, s.c.event_id < ins.excluded.event_id
            ),
        )
        upsert = ins.on_conflict_do_update(
            index_elements=[s.c.dataset_key],
            set_={c.name: ins.excluded[c.name] for c in s.c if c.name != "dataset_key"},
            where=newer,
        )
        p = t["pending"]
        drop = sa.delete(p).where(p.c.id == sa.bindparam("candidate"))
        at = _now()

        def work(conn: Connection) -> None:
            for seen, causes in settled:  # one at a time: an upsert may not change a row twice
                values = {"dataset_key": name_key(*seen.dataset), **_schema_values(seen)}
                conn.execute(upsert, values)
                conn.execute(drop, {"candidate": f"{values['dataset_key']}:{seen.event_id}"})
                if causes:
                    conn.execute(self._if_absent(t["causes"]), [_cause_row(c, at) for c in causes])

        self._writing(work)

    def live_runs(self) -> list[Beat]:
        """The runs that send heartbeats and have not ended."""
        t = self._t["live"]
        with self._reading() as conn:
            rows = conn.execute(sa.select(t).order_by(t.c.last_event, t.c.run_id)).all()
        return [
            Beat(
                run_id=r.run_id,
                job=(r.job_ns, r.job_name),
                interval_s=r.interval_s,
                last_event=r.last_event,
            )
            for r in rows
        ]

    # -- alerts (delivery) -----------------------------------------------------------------------

    def claim_alerts(
        self,
        owner: str,
        now: datetime,
        limit: int,
        lease_s: float,
        *,
        rules: Collection[str] | None = None,
    ) -> list[Alert]:
        """Lease pending alerts due by ``now``, earliest due first; ``rules``: only alerts of
        these rule keys (the rules this collector knows and has room for)."""
        t = self._t["alerts"]
        where: list[Any] = [t.c.status == "pending", t.c.next_at <= now]
        if rules is not None:
            if not rules:
                return []
            where.append(t.c.rule.in_(sorted(rules)))
        rows = self._claim(t, where, [t.c.next_at, t.c.id], owner, now, limit, lease_s)
        rows.sort(key=lambda r: (r.next_at, r.id))
        return [_alert(r) for r in rows]

    def release(
        self, ids: Sequence[str], owner: str, *, kind: Literal["alerts", "causes"] = "alerts"
    ) -> None:
        """Give back alerts (or causes) ``owner`` claimed and did not attempt (resolve):
        claimable again at once."""
        if ids:
            t = self._t[kind]
            stmt = (
                sa.update(t)
                .where(t.c.id.in_(list(ids)), t.c.claimed_by == owner)
                .values(claimed_by=None, claimed_until=None)
            )
            self._writing(lambda conn: conn.execute(stmt))

    def settle(self, outcomes: Sequence[Outcome]) -> None:
        """Write what attempts came to, in one transaction (the deliverer gathers the outcomes
        that end while one is written: one commit for many sends, not one each), each row
        released from its lease (:func:`_outcome_updates`)."""
        if not outcomes:
            return
        rows: dict[str, list[dict[str, Any]]] = {}
        for o in outcomes:
            rows.setdefault(o.status, []).append(
                {
                    "alert_id": o.alert_id,
                    "ended_at": o.at,
                    "due_at": o.next_at or o.at,
                    "error": None if o.error is None else o.error[:2000],
                }
            )

        def work(conn: Connection) -> None:
            for status, params in rows.items():
                conn.execute(self._outcome_updates[status], params)

        self._writing(work)

    def alerts(self, *, status: str | None = None, limit: int = 100) -> list[Alert]:
        """Alerts (of ``status``), the latest first (``lineage-collector alerts list``)."""
        t = self._t["alerts"]
        query = sa.select(t).order_by(t.c.first_at.desc(), t.c.id).limit(limit)
        if status is not None:
            query = query.where(t.c.status == status)
        with self._reading() as conn:
            return [_alert(r) for r in conn.execute(query)]

    def alert(self, alert_id: str) -> Alert | None:
        t = self._t["alerts"]
        with self._reading() as conn:
            row = conn.execute(sa.select(t).where(t.c.id == alert_id)).first()
        return None if row is None else _alert(row)

    def counts(self) -> dict[str, int]:
        """How many alerts are in each status."""
        t = self._t["alerts"]
        with self._reading() as conn:
            rows = conn.execute(sa.select(t.c.status, sa.func.count()).group_by(t.c.status))
            found = {status: int(n) for status, n in rows}
        return {s: found.get(s, 0) for s in ALERT_STATUSES}

    def replay(self, alert_ids: Sequence[str] | None = None) -> int:
        """Parked alerts (``None``), or the alerts named (whatever their status), pending again
        now with a fresh retry window; how many."""
        t = self._t["alerts"]
        now = _now()
        stmt = sa.update(t).values(
            status="pending", first_at=now, next_at=now, claimed_by=None, claimed_until=None
        )
        if alert_ids is None:
            stmt = stmt.where(t.c.status == "parked")
        else:
            ids = list(dict.fromkeys(alert_ids))
            if not ids:
                return 0
            stmt = stmt.where(t.c.id.in_(ids))
        return int(self._writing(lambda conn: conn.execute(stmt).rowcount))
