"""psycopg 3 and SQLAlchemy on the real PostgreSQL: datasets without declaring any."""

from __future__ import annotations

import psycopg
import pytest

from lineage_instrumentation.db import sql_stats
from lineage_instrumentation.db.psycopg3 import PsycopgInstrumentor
from lineage_instrumentation.db.sqlalchemy_events import SQLAlchemyInstrumentor, _after
from lineage_sdk import track_lineage

from .db_helpers import IDENTITY, PG_NAMESPACE, by_name

pytestmark = pytest.mark.postgres

REPORT = (
    "INSERT INTO order_report (order_id, customer, amount) "
    "SELECT o.id AS order_id, c.name AS customer, o.amount * %s AS amount "
    "FROM orders o JOIN customers c ON c.id = o.customer_id"
)


def test_insert_select_join_gives_inputs_output_and_column_lineage(pg_db, captured, instrumented):
    instrumented(PsycopgInstrumentor)

    @track_lineage(job_name="build_report")
    def build_report() -> int:
        with psycopg.connect(f"host=127.0.0.1 port=5432 dbname={pg_db}") as conn:
            rows = 0
            for _ in range(3):  # the same statement again: one parse, no duplicate datasets
                rows += conn.execute(REPORT, (2,)).rowcount
            return rows

    assert build_report() == 9
    [complete] = captured.final("build_report")
    assert complete["eventType"] == "COMPLETE"
    inputs = by_name(complete["inputs"])
    outputs = by_name(complete["outputs"])
    db = pg_db
    assert set(inputs) == {f"{db}.public.orders", f"{db}.public.customers"}
    assert set(outputs) == {f"{db}.public.order_report"}
    assert {d["namespace"] for d in complete["inputs"] + complete["outputs"]} == {PG_NAMESPACE}
    output = outputs[f"{db}.public.order_report"]
    fields = output["facets"]["columnLineage"]["fields"]
    assert fields["customer"]["inputFields"] == [
        {
            "namespace": PG_NAMESPACE,
            "name": f"{db}.public.customers",
            "field": "name",
            "transformations": IDENTITY,
        }
    ]
    assert {f["field"] for f in fields["amount"]["inputFields"]} == {"amount"}
    assert fields["order_id"]["inputFields"][0]["name"] == f"{db}.public.orders"
    assert [f["name"] for f in output["facets"]["schema"]["fields"]] == [
        "order_id",
        "customer",
        "amount",
    ]
    assert sql_stats().parsed == 1  # parsed once, however often it ran


def test_unreadable_statement_and_driver_error_reach_the_application(pg_db, captured, instrumented):
    instrumented(PsycopgInstrumentor)
    before = sql_stats().unparseable

    @track_lineage(job_name="odd_sql")
    def odd_sql() -> list[tuple[int, str]]:
        with psycopg.connect(f"host=127.0.0.1 port=5432 dbname={pg_db}") as conn:
            rows = conn.execute("TABLE customers").fetchall()  # PostgreSQL reads it, the parser not
            conn.execute("SELECT * FROM no_such_table")
            return rows

    with pytest.raises(psycopg.errors.UndefinedTable, match="no_such_table"):
        odd_sql()
    assert sql_stats().unparseable == before + 1
    [fail] = captured.final("odd_sql")
    assert fail["eventType"] == "FAIL"
    assert "no_such_table" in fail["run"]["facets"]["errorMessage"]["message"]
    extraction = fail["run"]["facets"]["extractionError"]
    assert extraction["failedTasks"] == 1
    assert extraction["errors"][0]["task"] == "TABLE customers"

    @track_lineage(job_name="odd_sql_ok")
    def only_unreadable() -> int:
        with psycopg.connect(f"host=127.0.0.1 port=5432 dbname={pg_db}") as conn:
            return len(conn.execute("TABLE customers").fetchall())

    assert only_unreadable() == 2  # unchanged result, counted once (cached), not raised
    assert sql_stats().unparseable == before + 1


def test_outside_a_run_nothing_by_default_or_a_run_per_transaction(pg_db, captured, instrumented):
    dsn = f"host=127.0.0.1 port=5432 dbname={pg_db}"
    instrumented(PsycopgInstrumentor)
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT * FROM orders").fetchall()
    assert captured.events() == []

    instrumented(PsycopgInstrumentor, outside_run="run_per_transaction", job_name="nightly")
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT * FROM customers").fetchall()
        conn.execute("DELETE FROM order_report WHERE amount < 0")
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE order_report SET amount = amount")
        conn.rollback()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT * FROM orders").fetchall()
        conn.execute("SELECT * FROM customers").fetchall()
    finals = captured.final("nightly")
    assert [e["eventType"] for e in finals] == ["COMPLETE", "FAIL", "COMPLETE", "COMPLETE"]
    first, rolled_back, auto1, auto2 = finals
    assert [d["name"] for d in first["inputs"]] == [f"{pg_db}.public.customers"]
    assert [d["name"] for d in first["outputs"]] == [f"{pg_db}.public.order_report"]
    assert "rolled back" in rolled_back["run"]["facets"]["errorMessage"]["message"]
    assert [d["name"] for d in auto1["inputs"]] == [f"{pg_db}.public.orders"]
    assert [d["name"] for d in auto2["inputs"]] == [f"{pg_db}.public.customers"]
    assert len({e["run"]["runId"] for e in finals}) == 4


def test_sqlalchemy_engine_on_postgres_and_uninstrument(pg_db, captured, instrumented):
    import sqlalchemy as sa

    original = psycopg.Cursor.execute
    instrumented(PsycopgInstrumentor)
    sa_instr = instrumented(SQLAlchemyInstrumentor)
    engine = sa.create_engine(f"postgresql+psycopg://127.0.0.1:5432/{pg_db}")

    @track_lineage(job_name="sa_job")
    def sa_job() -> None:
        with engine.begin() as conn:
            conn.execute(sa.text(REPORT.replace("%s", ":factor")), {"factor": 1})

    sa_job()
    assert sa.event.contains(sa.engine.Engine, "after_cursor_execute", _after)
    [complete] = captured.final("sa_job")
    assert sorted(d["name"] for d in complete["inputs"]) == [
        f"{pg_db}.public.customers",
        f"{pg_db}.public.orders",
    ]
    assert [d["name"] for d in complete["outputs"]] == [f"{pg_db}.public.order_report"]
    assert "columnLineage" in complete["outputs"][0]["facets"]
    engine.dispose()

    assert sa_instr.uninstrument()
    assert not sa.event.contains(sa.engine.Engine, "after_cursor_execute", _after)
    PsycopgInstrumentor().uninstrument()
    assert psycopg.Cursor.execute is original
    assert not PsycopgInstrumentor().uninstrument()  # idempotent
