"""sqlite3 (a C module, instrumented through a connection factory) and SQLAlchemy on SQLite files."""

from __future__ import annotations

import sqlite3

import pytest

from lineage_instrumentation.db.sqlalchemy_events import SQLAlchemyInstrumentor
from lineage_instrumentation.db.sqlite import Sqlite3Instrumentor
from lineage_sdk import track_lineage

from .db_helpers import IDENTITY, by_name


@pytest.fixture
def db_file(tmp_path):
    path = tmp_path / "shop.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE items (id INTEGER, price INTEGER);"
        "CREATE TABLE totals (id INTEGER, total INTEGER);"
        "INSERT INTO items VALUES (1, 3), (2, 4);"
    )
    conn.commit()
    conn.close()
    return path


def test_sqlite_file_statements_join_the_run(db_file, captured, instrumented):
    original = sqlite3.connect
    instrumented(Sqlite3Instrumentor)

    class MyConnection(sqlite3.Connection):
        pass

    @track_lineage(job_name="sqlite_job")
    def job() -> int:
        conn = sqlite3.connect(db_file, factory=MyConnection)
        assert isinstance(conn, MyConnection)  # the caller's factory is kept
        cur = conn.cursor()
        cur.execute("INSERT INTO totals (id, total) SELECT id, price * ? AS total FROM items", (2,))
        n = conn.execute("SELECT count(*) FROM totals").fetchone()[0]
        conn.commit()
        conn.close()
        return n

    assert job() == 2
    [complete] = captured.final("sqlite_job")
    namespace = f"sqlite://{db_file}"
    assert {(d["namespace"], d["name"]) for d in complete["inputs"]} == {
        (namespace, "main.items"),
        (namespace, "main.totals"),
    }
    [out] = complete["outputs"]
    assert (out["namespace"], out["name"]) == (namespace, "main.totals")
    assert out["facets"]["columnLineage"]["fields"]["id"]["inputFields"] == [
        {"namespace": namespace, "name": "main.items", "field": "id", "transformations": IDENTITY}
    ]
    Sqlite3Instrumentor().uninstrument()
    assert sqlite3.connect is original


def test_sqlite_run_per_transaction_and_driver_error(db_file, captured, instrumented):
    instrumented(Sqlite3Instrumentor, outside_run="run_per_transaction", job_name="sqlite_tx")
    with sqlite3.connect(db_file) as conn:
        conn.execute("UPDATE items SET price = price + 1")
    conn.close()
    conn = sqlite3.connect(db_file)
    conn.execute("DELETE FROM totals")
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        conn.execute("INSERT INTO nowhere SELECT * FROM items")
    conn.rollback()
    conn.close()
    committed, failed = captured.final("sqlite_tx")
    assert committed["eventType"] == "COMPLETE"
    assert [d["name"] for d in committed["outputs"]] == ["main.items"]
    assert failed["eventType"] == "FAIL"
    assert "no such table" in failed["run"]["facets"]["errorMessage"]["message"]
    assert [d["name"] for d in failed["outputs"]] == ["main.totals"]


def test_in_memory_database_is_not_a_dataset(captured, instrumented):
    instrumented(Sqlite3Instrumentor)

    @track_lineage(job_name="memory_job")
    def job() -> None:
        conn = sqlite3.connect(":memory:")
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.close()

    job()
    [complete] = captured.final("memory_job")
    assert complete["inputs"] == [] and complete["outputs"] == []


def test_sqlalchemy_on_sqlite_is_recorded_once(db_file, captured, instrumented):
    import sqlalchemy as sa

    instrumented(Sqlite3Instrumentor)
    instrumented(SQLAlchemyInstrumentor)
    engine = sa.create_engine(f"sqlite:///{db_file}")

    @track_lineage(job_name="sa_sqlite")
    def job() -> None:
        with engine.begin() as conn:
            conn.execute(
                sa.text("INSERT INTO totals SELECT id, price FROM items WHERE id = :i"), {"i": 1}
            )

    job()
    engine.dispose()
    [complete] = captured.final("sa_sqlite")
    assert set(by_name(complete["inputs"])) == {"main.items"}
    assert set(by_name(complete["outputs"])) == {"main.totals"}
    assert complete["outputs"][0]["namespace"] == f"sqlite://{db_file}"


def test_sqlalchemy_driver_error_fails_the_transaction_run(db_file, captured, instrumented):
    import sqlalchemy as sa

    instrumented(SQLAlchemyInstrumentor, outside_run="run_per_transaction", job_name="sa_tx")
    engine = sa.create_engine(f"sqlite:///{db_file}")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE items SET price = price"))

    def failing() -> None:
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM totals"))
            conn.execute(sa.text("SELECT * FROM nowhere"))

    with pytest.raises(sa.exc.OperationalError) as info:
        failing()
    assert isinstance(info.value.orig, sqlite3.OperationalError)
    engine.dispose()
    committed, failed = captured.final("sa_tx")
    assert committed["eventType"] == "COMPLETE"
    assert [d["name"] for d in committed["outputs"]] == ["main.items"]
    assert failed["eventType"] == "FAIL"
    assert "no such table: nowhere" in failed["run"]["facets"]["errorMessage"]["message"]
    assert [d["name"] for d in failed["outputs"]] == ["main.totals"]
