"""Column lineage by position (issue 32, item 3): ``INSERT ... SELECT`` with and without a column
list, ``*``, ``UPDATE ... SET ... FROM``, ``CREATE TABLE ... AS``, and the transformation of
each input field, from the SQL analysis alone and from real PostgreSQL and SQLite programs."""

from __future__ import annotations

import sqlite3
import textwrap

import psycopg
import pytest
from conformance import validate_event, validate_facet

from lineage_instrumentation.db._naming import postgres_target, sqlite_target
from lineage_instrumentation.db._sql import analyze, clear_cache
from lineage_instrumentation.db.sqlalchemy_events import SQLAlchemyInstrumentor
from lineage_instrumentation.db.sqlite import Sqlite3Instrumentor
from lineage_sdk import track_lineage

from .db_helpers import IDENTITY, PG_NAMESPACE, by_name, run_instrumented

PG = postgres_target("db.example", None, "shop")
PRODUCER = "https://example.com/test"
ISSUE = (
    "INSERT INTO s.totals (cid, total) SELECT c.id, sum(o.amount) FROM s.customers c "
    "JOIN s.orders o ON o.cid = c.id GROUP BY c.id"
)
SUM = [
    {"type": "DIRECT", "subtype": "AGGREGATION", "description": "sum(o.amount)", "masking": False}
]


@pytest.fixture(autouse=True)
def fresh_cache():
    clear_cache()
    yield
    clear_cache()


def summary(facet: dict) -> dict[str, list[tuple[str, str, str]]]:
    """``{column: [(table, field, subtype), ...]}`` of a ``columnLineage`` facet, validated."""
    validate_facet("columnLineage", facet)
    return {
        column: [
            (f["name"].rsplit(".", 1)[-1], f["field"], f["transformations"][0]["subtype"])
            for f in value["inputFields"]
        ]
        for column, value in facet["fields"].items()
    }


def lineage(statement: str, target=PG) -> dict[str, list[tuple[str, str, str]]] | None:
    """:func:`summary` of the ``columnLineage`` of the statement's one output; None without."""
    found = analyze(statement, target, PRODUCER)
    assert found.error is None
    [out] = found.outputs
    facet = out.facets.get("columnLineage")
    return None if facet is None else summary(facet)


# --- the analysis alone -------------------------------------------------------------------------


def test_the_issue_statement_maps_by_position_with_its_transformations():
    found = analyze(ISSUE, PG, PRODUCER)
    [out] = found.outputs
    facet = out.facets["columnLineage"]
    validate_facet("columnLineage", facet)
    assert facet["fields"] == {
        "cid": {
            "inputFields": [
                {
                    "namespace": "postgres://db.example:5432",
                    "name": "shop.s.customers",
                    "field": "id",
                    "transformations": IDENTITY,
                }
            ]
        },
        "total": {
            "inputFields": [
                {
                    "namespace": "postgres://db.example:5432",
                    "name": "shop.s.orders",
                    "field": "amount",
                    "transformations": SUM,
                }
            ]
        },
    }


def test_position_wins_over_names_and_every_expression_kind_is_read():
    # the names say the opposite of the positions: positions are what SQL writes
    assert lineage("INSERT INTO t (a, b) SELECT b, a FROM u") == {
        "a": [("u", "b", "IDENTITY")],
        "b": [("u", "a", "IDENTITY")],
    }
    assert lineage(
        "INSERT INTO t (a, b, c, d) SELECT DISTINCT 1 + x, count(DISTINCT y) FILTER (WHERE z > 0),"
        " lower(z) zz, sum(w) OVER (PARTITION BY k) FROM u"
    ) == {
        "a": [("u", "x", "TRANSFORMATION")],
        "b": [("u", "y", "AGGREGATION"), ("u", "z", "AGGREGATION")],
        "c": [("u", "z", "TRANSFORMATION")],
        "d": [("u", "k", "TRANSFORMATION"), ("u", "w", "TRANSFORMATION")],  # a window keeps rows
    }
    found = analyze("INSERT INTO t (n) SELECT count(x) FROM u", PG, PRODUCER)
    [field] = found.outputs[0].facets["columnLineage"]["fields"]["n"]["inputFields"]
    assert field["transformations"][0]["masking"] is True  # a count does not carry the values
    # two sources of one name, a leading WITH, UNION branches, ON CONFLICT and RETURNING
    assert lineage("INSERT INTO t (a, b) SELECT u.x, v.x FROM u JOIN v ON u.k = v.k") == {
        "a": [("u", "x", "IDENTITY")],
        "b": [("v", "x", "IDENTITY")],
    }
    assert lineage(
        "WITH w AS (SELECT x, y FROM u) INSERT INTO t (a, b) SELECT w.y, w.x FROM w "
        "ON CONFLICT (a) DO UPDATE SET b = excluded.b RETURNING *"
    ) == {"a": [("u", "y", "IDENTITY")], "b": [("u", "x", "IDENTITY")]}
    # each branch's expression read on its own: u.x copied, v.y transformed
    assert lineage("INSERT INTO t (a) SELECT x FROM u UNION ALL SELECT y + 1 FROM v") == {
        "a": [("u", "x", "IDENTITY"), ("v", "y", "TRANSFORMATION")]
    }
    # one field read by two branches in two ways keeps both
    found = analyze("INSERT INTO t (a) SELECT x FROM u UNION SELECT sum(x) FROM u", PG, PRODUCER)
    [field] = found.outputs[0].facets["columnLineage"]["fields"]["a"]["inputFields"]
    assert [t["subtype"] for t in field["transformations"]] == ["IDENTITY", "AGGREGATION"]


def test_a_statement_the_database_refuses_or_that_is_not_read_gets_no_guess():
    # three expressions for two columns: PostgreSQL refuses it; no column is guessed
    found = analyze("INSERT INTO t (a, b) SELECT x, y, z FROM u", PG, PRODUCER)
    assert "columnLineage" not in found.outputs[0].facets
    assert [f["name"] for f in found.outputs[0].facets["schema"]["fields"]] == ["a", "b"]
    # ``*`` of a table whose columns are unknown
    assert lineage("INSERT INTO t (a, b) SELECT * FROM u") is None
    # ``*`` of a sub-query is not the columns of the table it reads, even when those are known
    analyze("CREATE TABLE u (x int, y int)", PG, PRODUCER)
    assert lineage("INSERT INTO t (a) SELECT * FROM (SELECT y FROM u) q") is None


def test_without_a_column_list_the_target_columns_come_from_its_create_table():
    no_list = "INSERT INTO t SELECT x, sum(y) FROM u GROUP BY x"
    assert lineage(no_list) is None  # t's columns unknown: nothing rather than a guess
    analyze("CREATE TABLE t (a int PRIMARY KEY, b numeric NOT NULL, c text, UNIQUE (c))", PG, "p")
    # the same statement again: re-read, since what is known of t changed
    assert lineage(no_list) == {"a": [("u", "x", "IDENTITY")], "b": [("u", "y", "AGGREGATION")]}
    analyze("ALTER TABLE t ADD COLUMN d int", PG, PRODUCER)
    assert lineage(no_list) is None  # altered: t's columns are unknown again
    # a CREATE TABLE IF NOT EXISTS may have met an older table: it teaches nothing
    analyze("CREATE TABLE IF NOT EXISTS t (p int, q int)", PG, PRODUCER)
    assert lineage(no_list) is None


def test_star_is_expanded_when_the_one_source_table_is_known():
    analyze("CREATE TABLE u (x int, Y int, z int)", PG, PRODUCER)
    analyze("CREATE TABLE t (a int, b int, c int)", PG, PRODUCER)
    expected = {
        "a": [("u", "x", "IDENTITY")],
        "b": [("u", "y", "IDENTITY")],
        "c": [("u", "z", "IDENTITY")],
    }
    assert lineage("INSERT INTO t SELECT * FROM u") == expected
    assert lineage("INSERT INTO t (a, b, c) SELECT q.* FROM u AS q WHERE q.x > 1") == expected
    assert lineage("INSERT INTO t SELECT * FROM u JOIN v ON true") is None  # two tables
    assert lineage("INSERT INTO t SELECT * FROM v") is None  # v unknown
    analyze("DROP TABLE u", PG, PRODUCER)
    assert lineage("INSERT INTO t SELECT * FROM u") is None


def test_create_table_as_and_update_set_from():
    analyze("CREATE TABLE u (x int, y int)", PG, PRODUCER)
    assert lineage("CREATE TABLE w AS SELECT x, y + 1 AS y1, count(*) AS n, max(y) FROM u") == {
        "x": [("u", "x", "IDENTITY")],
        "y1": [("u", "y", "TRANSFORMATION")],
        # max(y) has no name of its own (PostgreSQL calls it "max", SQLite "max(y)"): left out
    }
    # w's columns are not all known, but u's still are (its ``*`` is expanded)
    assert lineage("INSERT INTO t2 (a, b) SELECT * FROM u") == {
        "a": [("u", "x", "IDENTITY")],
        "b": [("u", "y", "IDENTITY")],
    }
    # a column list, which the parser alone cannot read: the names come from the list
    found = analyze("CREATE TABLE w2 (a, b) AS SELECT y, x * 2 FROM u", PG, PRODUCER)
    assert [d.name for d in found.inputs] == ["shop.public.u"]
    assert [f["name"] for f in found.outputs[0].facets["schema"]["fields"]] == ["a", "b"]
    assert lineage("CREATE TABLE w2 (a, b) AS SELECT y, x * 2 FROM u") == {
        "a": [("u", "y", "IDENTITY")],
        "b": [("u", "x", "TRANSFORMATION")],
    }
    # and the new table's columns are known to a later INSERT without a list
    assert lineage("INSERT INTO w2 SELECT 1, x FROM u") == {"b": [("u", "x", "IDENTITY")]}
    assert lineage(
        "UPDATE t AS d SET a = u.x + 1, b = u.y, c = DEFAULT FROM u WHERE d.id = u.id"
    ) == {"a": [("u", "x", "TRANSFORMATION")], "b": [("u", "y", "IDENTITY")]}


def test_sqlite_min_max_of_two_arguments_are_not_aggregates(tmp_path):
    target = sqlite_target(str(tmp_path / "a.db"))
    assert lineage("INSERT INTO t (a, b) SELECT max(x, y), max(x) FROM s", target) == {
        "a": [("s", "x", "TRANSFORMATION"), ("s", "y", "TRANSFORMATION")],
        "b": [("s", "x", "AGGREGATION")],
    }


# --- real programs ------------------------------------------------------------------------------

APP = textwrap.dedent(
    """
    import sys
    import psycopg

    with psycopg.connect(sys.argv[1]) as conn:
        conn.execute(
            "INSERT INTO s.totals (cid, total) SELECT c.id, sum(o.amount) FROM s.customers c "
            "JOIN s.orders o ON o.cid = c.id GROUP BY c.id"
        )
    with psycopg.connect(sys.argv[1]) as conn:
        conn.execute("CREATE TABLE s.by_region (region text, n bigint)")
        conn.execute(
            "INSERT INTO s.by_region SELECT c.region, count(*) FROM s.customers c GROUP BY 1"
        )
        conn.execute(
            "UPDATE s.totals t SET total = t.total + o.amount FROM s.orders o WHERE o.cid = t.cid"
        )
    print("app done")
    """
)


@pytest.mark.postgres
def test_the_issue_statement_under_lineage_instrument_on_postgres(tmp_path, pg_db):
    dsn = f"host=127.0.0.1 port=5432 dbname={pg_db}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA s")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE s.customers (id int PRIMARY KEY, region text)")
            conn.execute("CREATE TABLE s.orders (id int PRIMARY KEY, cid int, amount int)")
            conn.execute("CREATE TABLE s.totals (cid int, total bigint)")
            conn.execute("INSERT INTO s.customers VALUES (1, 'eu'), (2, 'us')")
            conn.execute("INSERT INTO s.orders VALUES (10, 1, 5), (11, 2, 7), (12, 1, 9)")
        events = run_instrumented(tmp_path, pg_db, APP)
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT count(*) FROM s.totals").fetchone() == (2,)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA s CASCADE")
    for event in events:
        validate_event(event)
    finals = [e for e in events if e["eventType"] == "COMPLETE"]
    assert len(finals) == 2  # one run per transaction
    first, second = finals
    db = pg_db
    [totals] = first["outputs"]
    assert totals["name"] == f"{db}.s.totals"
    assert totals["facets"]["columnLineage"]["fields"] == {
        "cid": {
            "inputFields": [
                {
                    "namespace": PG_NAMESPACE,
                    "name": f"{db}.s.customers",
                    "field": "id",
                    "transformations": IDENTITY,
                }
            ]
        },
        "total": {
            "inputFields": [
                {
                    "namespace": PG_NAMESPACE,
                    "name": f"{db}.s.orders",
                    "field": "amount",
                    "transformations": SUM,
                }
            ]
        },
    }
    # no column list: the CREATE TABLE seen before gives the target's columns; the UPDATE's
    # lineage joins the first statement's for the same table
    outputs = by_name(second["outputs"])
    region = outputs[f"{db}.s.by_region"]["facets"]["columnLineage"]["fields"]
    assert region["region"]["inputFields"][0]["field"] == "region"
    assert region["region"]["inputFields"][0]["transformations"] == IDENTITY
    assert "n" not in region  # count(*) reads no column
    update = outputs[f"{db}.s.totals"]["facets"]["columnLineage"]["fields"]
    assert {(f["name"], f["field"]) for f in update["total"]["inputFields"]} == {
        (f"{db}.s.totals", "total"),
        (f"{db}.s.orders", "amount"),
    }
    assert {f["transformations"][0]["subtype"] for f in update["total"]["inputFields"]} == {
        "TRANSFORMATION"
    }


@pytest.mark.postgres
def test_sqlalchemy_on_postgres_maps_by_position(pg_db, captured, instrumented):
    import sqlalchemy as sa

    instrumented(SQLAlchemyInstrumentor)
    engine = sa.create_engine(f"postgresql+psycopg://127.0.0.1:5432/{pg_db}")

    @track_lineage(job_name="sa_positional")
    def job() -> None:
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO order_report (order_id, customer, amount) "
                    "SELECT o.id, upper(c.name), sum(o.amount) FROM orders o "
                    "JOIN customers c ON c.id = o.customer_id WHERE o.amount < :cap "
                    "GROUP BY o.id, c.name"
                ),
                {"cap": 0},
            )

    job()
    engine.dispose()
    [complete] = captured.final("sa_positional")
    [out] = complete["outputs"]
    got = summary(out["facets"]["columnLineage"])
    assert got == {
        "order_id": [("orders", "id", "IDENTITY")],
        "customer": [("customers", "name", "TRANSFORMATION")],
        "amount": [("orders", "amount", "AGGREGATION")],
    }


def test_sqlite3_program_with_its_own_tables(tmp_path, captured, instrumented):
    instrumented(Sqlite3Instrumentor)
    path = tmp_path / "shop.db"

    @track_lineage(job_name="sqlite_positional")
    def job() -> list[tuple[int, int]]:
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE orders (id INTEGER, cid INTEGER, amount INTEGER)")
        conn.execute("CREATE TABLE totals (cid INTEGER, total INTEGER)")
        conn.execute("INSERT INTO orders VALUES (1, 1, 5), (2, 1, 6), (3, 2, 7)")
        conn.execute("INSERT INTO totals SELECT cid, sum(amount) FROM orders GROUP BY cid")
        conn.execute(
            "UPDATE totals SET total = totals.total * o.n "
            "FROM (SELECT cid, count(*) AS n FROM orders GROUP BY cid) AS o WHERE o.cid = totals.cid"
        )
        conn.commit()
        rows = conn.execute("SELECT cid, total FROM totals ORDER BY cid").fetchall()
        conn.close()
        return rows

    assert job() == [(1, 22), (2, 7)]
    [complete] = captured.final("sqlite_positional")
    outputs = by_name(complete["outputs"])
    fields = outputs["main.totals"]["facets"]["columnLineage"]["fields"]
    namespace = f"sqlite://{path}"
    assert fields["cid"]["inputFields"] == [
        {"namespace": namespace, "name": "main.orders", "field": "cid", "transformations": IDENTITY}
    ]
    total = {
        (f["name"], f["field"], f["transformations"][0]["subtype"])
        for f in fields["total"]["inputFields"]
    }
    # the INSERT's sum(amount), merged with the UPDATE's totals.total * o.n
    assert ("main.orders", "amount", "AGGREGATION") in total
    assert ("main.totals", "total", "TRANSFORMATION") in total
