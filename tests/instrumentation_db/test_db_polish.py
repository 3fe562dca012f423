"""Database instrumentors, second pass: merged facets, ``conn.transaction()`` blocks, ABORT at
exit, and the statement cache shared by threads and connections. On the real PostgreSQL."""

from __future__ import annotations

import asyncio
import textwrap
import threading
import time

import psycopg
import pytest
from conformance import validate_event

from lineage_instrumentation.db import _sql, sql_stats
from lineage_instrumentation.db._merge import merge_datasets
from lineage_instrumentation.db._naming import postgres_target
from lineage_instrumentation.db.psycopg3 import PsycopgInstrumentor
from lineage_sdk import track_lineage
from lineage_sdk.models.dataset import LineageDataset

from .db_helpers import IDENTITY, PG_NAMESPACE, by_name, run_instrumented

pytestmark = pytest.mark.postgres

SCHEMA_URL = _sql.SCHEMA_FACET_URL
LINEAGE_URL = _sql.COLUMN_LINEAGE_FACET_URL
PRODUCER = "https://example.com/p"


def _field(db: str, table: str, column: str) -> dict[str, str]:
    return {"namespace": PG_NAMESPACE, "name": f"{db}.public.{table}", "field": column}


def _dsn(pg_db: str) -> str:
    return f"host=127.0.0.1 port=5432 dbname={pg_db}"


# --- 1. two statements writing one table ----------------------------------------------------


def test_two_statements_writing_one_table_merge_their_facets(pg_db, captured, instrumented):
    instrumented(PsycopgInstrumentor)

    @track_lineage(job_name="two_writers")
    def two_writers() -> None:
        with psycopg.connect(_dsn(pg_db)) as conn:
            conn.execute(
                "INSERT INTO order_report (order_id, amount) "
                "SELECT o.id AS order_id, o.amount AS amount FROM orders o WHERE o.id < %s",
                (0,),
            )
            conn.execute(
                "INSERT INTO order_report (order_id, customer) "
                "SELECT c.id AS order_id, c.name AS customer FROM customers c WHERE c.id < %s",
                (0,),
            )
            conn.rollback()

    two_writers()
    [complete] = captured.final("two_writers")  # validated against the official schemas
    db = pg_db
    [output] = complete["outputs"]
    assert output["name"] == f"{db}.public.order_report"
    fields = output["facets"]["columnLineage"]["fields"]
    assert set(fields) == {"order_id", "amount", "customer"}
    assert fields["order_id"]["inputFields"] == [
        {**_field(db, "orders", "id"), "transformations": IDENTITY},
        {**_field(db, "customers", "id"), "transformations": IDENTITY},
    ]
    assert fields["amount"]["inputFields"] == [
        {**_field(db, "orders", "amount"), "transformations": IDENTITY}
    ]
    assert fields["customer"]["inputFields"] == [
        {**_field(db, "customers", "name"), "transformations": IDENTITY}
    ]
    assert [f["name"] for f in output["facets"]["schema"]["fields"]] == [
        "order_id",
        "amount",
        "customer",
    ]
    assert set(by_name(complete["inputs"])) == {f"{db}.public.orders", f"{db}.public.customers"}


def test_merge_keeps_the_official_shape_and_deduplicates():
    def lineage(fields):
        return {"_producer": PRODUCER, "_schemaURL": LINEAGE_URL, "fields": fields}

    def src(name, field, *transformations):
        item = {"namespace": "ns", "name": name, "field": field}
        if transformations:
            item["transformations"] = [{"type": t} for t in transformations]
        return item

    first = LineageDataset(
        "ns",
        "t",
        {
            "columnLineage": lineage({"a": {"inputFields": [src("s", "x", "DIRECT")]}}),
            "schema": {"_producer": PRODUCER, "_schemaURL": SCHEMA_URL, "fields": [{"name": "a"}]},
        },
    )
    second = LineageDataset(
        "ns",
        "t",
        {
            "columnLineage": lineage(
                {
                    "a": {"inputFields": [src("s", "x", "INDIRECT"), src("u", "y")]},
                    "b": {"inputFields": [src("u", "z")]},
                }
            ),
            "schema": {
                "_producer": PRODUCER,
                "_schemaURL": SCHEMA_URL,
                "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "text"}],
            },
        },
    )
    merged = merge_datasets(first, second)
    assert merged is not None
    a = merged.facets["columnLineage"]["fields"]["a"]["inputFields"]
    assert a == [
        {**src("s", "x"), "transformations": [{"type": "DIRECT"}, {"type": "INDIRECT"}]},
        src("u", "y"),
    ]
    assert merged.facets["schema"]["fields"] == [
        {"name": "a", "type": "int"},
        {"name": "b", "type": "text"},
    ]
    assert merge_datasets(merged, second) is None  # nothing new: the same object stays
    assert merge_datasets(first, LineageDataset("ns", "t")) is None
    event = {
        "eventType": "COMPLETE",
        "eventTime": "2026-01-01T00:00:00Z",
        "producer": "https://example.com/p",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": "0190c9f6-0000-7000-8000-000000000000"},
        "job": {"namespace": "ns", "name": "j"},
        "inputs": [merged.to_dict()],
        "outputs": [merged.to_dict()],
    }
    validate_event(event)


# --- 2. conn.transaction() blocks in autocommit mode -----------------------------------------


def test_transaction_block_ends_its_run_when_it_exits(pg_db, captured, instrumented):
    instrumented(PsycopgInstrumentor, outside_run="run_per_transaction", job_name="blocks")
    with psycopg.connect(_dsn(pg_db), autocommit=True) as conn:
        with conn.transaction():
            conn.execute("SELECT * FROM orders").fetchall()
            with conn.transaction():  # a savepoint: the run goes on
                conn.execute("DELETE FROM order_report WHERE amount < 0")
            assert captured.final("blocks") == []
        [done] = captured.final("blocks")  # at the block's exit, before any other statement
        assert done["eventType"] == "COMPLETE"
        assert [d["name"] for d in done["inputs"]] == [f"{pg_db}.public.orders"]
        assert [d["name"] for d in done["outputs"]] == [f"{pg_db}.public.order_report"]

        def failing_block() -> None:
            with conn.transaction():
                conn.execute("SELECT * FROM customers").fetchall()
                _ = 1 / 0

        with pytest.raises(ZeroDivisionError):
            failing_block()
        with conn.transaction():
            conn.execute("SELECT id FROM customers").fetchall()
            raise psycopg.Rollback
        finals = captured.final("blocks")
        assert [e["eventType"] for e in finals] == ["COMPLETE", "FAIL", "FAIL"]
        assert "division by zero" in finals[1]["run"]["facets"]["errorMessage"]["message"]
        assert "rolled back" in finals[2]["run"]["facets"]["errorMessage"]["message"]
        assert PsycopgInstrumentor.kind.transactions == {}

    async def in_async() -> None:
        async with await psycopg.AsyncConnection.connect(_dsn(pg_db), autocommit=True) as aconn:
            async with aconn.transaction():
                await aconn.execute("SELECT * FROM orders")
            assert len(captured.final("blocks")) == 4

    asyncio.run(in_async())
    assert captured.final("blocks")[-1]["eventType"] == "COMPLETE"


# --- 3. a transaction open at exit: ABORT ----------------------------------------------------

OPEN_AT_EXIT = textwrap.dedent(
    """
    import sys
    import psycopg

    conn = psycopg.connect(sys.argv[1])
    conn.execute("INSERT INTO order_report (order_id, customer, amount) VALUES (%s, 'x', 1)", (-7,))
    failed = psycopg.connect(sys.argv[1])
    try:
        failed.execute("SELECT * FROM no_such_table_at_exit")
    except psycopg.errors.UndefinedTable:
        pass
    print("app done")
    """
)


def test_a_transaction_open_at_exit_ends_as_abort(tmp_path, pg_db):
    """Open at exit: ABORT (the database never committed it); one whose statement had failed: FAIL."""
    events = run_instrumented(tmp_path, pg_db, OPEN_AT_EXIT)
    for event in events:
        validate_event(event)
    by_run: dict[str, list[str]] = {}
    for event in events:
        by_run.setdefault(event["run"]["runId"], []).append(event["eventType"])
    assert sorted(by_run.values()) == [["START", "ABORT"], ["START", "FAIL"]]
    [abort] = [e for e in events if e["eventType"] == "ABORT"]
    assert [d["name"] for d in abort["outputs"]] == [f"{pg_db}.public.order_report"]
    assert "errorMessage" not in abort["run"]["facets"]
    [fail] = [e for e in events if e["eventType"] == "FAIL"]
    assert "no_such_table_at_exit" in fail["run"]["facets"]["errorMessage"]["message"]
    with psycopg.connect(_dsn(pg_db)) as conn:  # and indeed the database never committed it
        assert conn.execute("SELECT count(*) FROM order_report WHERE order_id = -7").fetchone() == (
            0,
        )


# --- 4. one parse per statement, across threads and connections ------------------------------


def test_a_statement_is_parsed_once_across_connections_and_threads(pg_db, captured, instrumented):
    instrumented(PsycopgInstrumentor)
    query = "SELECT c.name FROM customers c WHERE c.id = %s AND c.region <> 'threads'"
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    @track_lineage(job_name="threaded")
    def one_thread(conn: psycopg.Connection) -> None:
        barrier.wait(10)
        conn.execute(query, (1,)).fetchall()

    def worker() -> None:
        try:
            with psycopg.connect(_dsn(pg_db)) as conn:
                one_thread(conn)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    stats = sql_stats()
    assert stats.parsed == 1, stats  # six connections, six threads, one parse
    finals = captured.final("threaded")
    assert len(finals) == 6
    assert all([d["name"] for d in e["inputs"]] == [f"{pg_db}.public.customers"] for e in finals)


def test_concurrent_first_sights_wait_for_one_parse(monkeypatch):
    """The wait itself, made certain: a parse slowed down so that every thread meets it."""
    calls: list[str] = []
    real = _sql._analyze

    def slow(statement, target, producer):
        calls.append(statement)
        time.sleep(0.3)
        return real(statement, target, producer)

    monkeypatch.setattr(_sql, "_analyze", slow)
    _sql.clear_cache()
    target = postgres_target("127.0.0.1", 5432, "somewhere")
    statement = "INSERT INTO t (a) SELECT b AS a FROM s"
    barrier = threading.Barrier(8)
    results: list[object] = []

    def worker() -> None:
        barrier.wait(10)
        results.append(_sql.analyze(statement, target, "p"))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert calls == [statement]
    assert len(results) == 8
    assert all(r is results[0] for r in results)
    assert _sql.sql_stats().cache_hits == 7
    assert _sql._CACHE.pending == {}


# --- 5. the per-connection fast path ---------------------------------------------------------


def test_the_same_statement_object_is_recorded_in_every_run(pg_db, captured, instrumented):
    """The connection remembers its last (run, statement object); a new or nested run on the
    same connection with the same object still records it, each run once."""
    instrumented(PsycopgInstrumentor)
    query = "SELECT amount FROM orders WHERE id = %s"
    with psycopg.connect(_dsn(pg_db)) as conn:
        cur = conn.cursor()

        @track_lineage(job_name="inner_run")
        def inner() -> None:
            cur.execute(query, (10,))

        @track_lineage(job_name="outer_run")
        def outer() -> None:
            for _ in range(3):
                cur.execute(query, (10,))
            inner()
            cur.execute(query, (11,))
            cur.execute("SELECT name FROM customers WHERE id = %s", (1,))
            cur.execute(query, (12,))

        outer()
        outer()
    orders = f"{pg_db}.public.orders"
    for job in ("outer_run", "inner_run"):
        finals = captured.final(job)
        assert len(finals) == 2
        for event in finals:
            names = [d["name"] for d in event["inputs"]]
            assert names.count(orders) == 1
    assert [d["name"] for d in captured.final("outer_run")[1]["inputs"]] == [
        orders,
        f"{pg_db}.public.customers",
    ]
