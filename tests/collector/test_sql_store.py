"""The sql store (the engine over the sql backend) on SQLite and PostgreSQL: idempotent writes,
convergent run state, lineage queries and the catalog, with hostile names."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from collector_helpers import PRODUCER, run_event

from lineage_sdk.collector.backend import EventRow, Rows
from lineage_sdk.collector.decode import validate_event
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.exceptions import StoreError


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request, tmp_path: Path) -> Iterator[EngineStore]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/lineage.db"
    else:
        url = request.getfixturevalue("pg_url")
    s = EngineStore(SqlBackend(url))
    s.open()
    s.open()  # opening again (another start) is harmless
    yield s
    s.close()


def _write(store: EngineStore, *events) -> None:
    store.write_batch([validate_event(e) for e in events])


def test_an_open_store_passes_its_check(store):
    store.check()


def test_writing_twice_leaves_one_copy(store):
    events = [run_event(job=f"j{i}", outputs=[("db", f"t{i}")]) for i in range(30)]
    _write(store, *events)
    _write(store, *events[:10], *events[:10])  # duplicates across and within batches
    assert store.count_events() == 30
    assert len(store.datasets("db")) == 30


def test_run_state_converges_whatever_the_order(store):
    run = str(uuid.uuid4())
    start = run_event(job="etl", run_id=run, event_type="START", seconds=0)
    running = run_event(job="etl", run_id=run, event_type="RUNNING", seconds=5)
    done = run_event(job="etl", run_id=run, event_type="FAIL", seconds=10)
    _write(store, done)
    _write(store, start, running)  # late arrivals do not undo the terminal state
    [summary] = store.runs_of_job("tests", "etl")
    assert summary.state == "FAIL"
    assert summary.started_at == datetime(2025, 1, 1, tzinfo=UTC)
    assert summary.ended_at == datetime(2025, 1, 1, 0, 0, 10, tzinfo=UTC)
    assert [e["eventType"] for e in store.events_of_run(run)] == ["START", "RUNNING", "FAIL"]
    [job] = store.jobs("tests")
    assert job.latest_run is not None and job.latest_run.run_id == run


def test_parent_runs_are_linked(store):
    parent = str(uuid.uuid4())
    child = str(uuid.uuid4())
    _write(
        store,
        run_event(job="dag", run_id=parent, event_type="START"),
        run_event(job="dag.task", run_id=child, parent=(parent, "tests", "dag")),
    )
    [summary] = store.runs_of_job("tests", "dag.task")
    assert summary.parent_run_id == parent


def _chain(store: EngineStore) -> None:
    # raw -> ingest -> staged -> transform -> mart -> report -> dashboard, plus a side input
    _write(
        store,
        run_event(job="ingest", inputs=[("s3", "raw")], outputs=[("pg", "staged")]),
        run_event(
            job="transform", inputs=[("pg", "staged"), ("pg", "dim")], outputs=[("pg", "mart")]
        ),
        run_event(job="report", inputs=[("pg", "mart")], outputs=[("bi", "dashboard")]),
    )


def test_lineage_upstream_and_downstream_to_depth(store):
    _chain(store)
    up1 = store.lineage("dataset:pg:mart", direction="upstream", depth=1)
    assert set(up1.nodes) == {
        "dataset:pg:mart",
        "job:tests:transform",
        "dataset:pg:staged",
        "dataset:pg:dim",
    }
    up3 = store.lineage("dataset:bi:dashboard", direction="upstream", depth=3)
    assert {n for n in up3.nodes if n.startswith("job:")} == {
        "job:tests:ingest",
        "job:tests:transform",
        "job:tests:report",
    }
    assert "dataset:s3:raw" in up3.nodes
    transform = up3.nodes["job:tests:transform"]
    assert {e.origin for e in transform.in_edges} == {"dataset:pg:staged", "dataset:pg:dim"}
    assert {e.destination for e in transform.out_edges} == {"dataset:pg:mart"}
    down = store.lineage("dataset:s3:raw", direction="downstream", depth=2)
    assert set(down.nodes) == {
        "dataset:s3:raw",
        "job:tests:ingest",
        "dataset:pg:staged",
        "job:tests:transform",
        "dataset:pg:mart",
    }
    both = store.lineage("job:tests:transform", direction="both", depth=0)
    assert set(both.nodes) == {
        "job:tests:transform",
        "dataset:pg:staged",
        "dataset:pg:dim",
        "dataset:pg:mart",
    }
    assert both.nodes["job:tests:transform"].data["latestRun"]["state"] == "COMPLETE"
    unknown = store.lineage("dataset:nowhere:nothing", depth=3)
    assert list(unknown.nodes) == ["dataset:nowhere:nothing"]


def test_catalog_queries(store):
    _chain(store)
    assert store.namespaces() == ["bi", "pg", "s3", "tests"]
    jobs = {j.name: j for j in store.jobs("tests")}
    assert set(jobs) == {"ingest", "transform", "report"}
    assert jobs["transform"].inputs == (("pg", "dim"), ("pg", "staged"))
    assert jobs["transform"].outputs == (("pg", "mart"),)
    assert store.datasets("pg") == [("pg", "dim"), ("pg", "mart"), ("pg", "staged")]
    assert store.search("MAR") == [("DATASET", "pg", "mart")]
    assert store.search("%") == []  # LIKE wildcards are literal text


def test_hostile_names_round_trip(store):
    long_name = "x" * 10_000
    names = [
        "$where",
        "a.b.c",
        'it\'s "quoted"',
        "`tick`",
        "名前 🚀",
        "MATCH (n) DELETE n",
        "<script>alert(1)</script>",
        long_name,
        "100%_done",
    ]
    _write(
        store,
        *[
            run_event(namespace="ns.$odd", job=f"job {name}", outputs=[("ds", name)])
            for name in names
        ],
    )
    assert {n for _, n in store.datasets("ds", limit=100)} == set(names)
    graph = store.lineage(f"dataset:ds:{long_name}", direction="upstream", depth=1)
    assert f"job:ns.$odd:job {long_name}" in graph.nodes
    assert store.search("100%_") == [
        ("JOB", "ns.$odd", "job 100%_done"),
        ("DATASET", "ds", "100%_done"),
    ]
    assert store.namespaces() == ["ds", "ns.$odd"]


def test_dataset_and_job_events_are_stored(store):
    dataset_event = {
        "eventTime": "2025-01-01T00:00:00Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {"namespace": "pg", "name": "static_table", "facets": {}},
    }
    job_event = {
        "eventTime": "2025-01-01T00:00:00Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
        "job": {"namespace": "tests", "name": "defined_job", "facets": {}},
        "inputs": [{"namespace": "pg", "name": "static_table", "facets": {}}],
        "outputs": [{"namespace": "pg", "name": "derived", "facets": {}}],
    }
    _write(store, dataset_event, job_event)
    assert store.count_events() == 2
    assert ("pg", "static_table") in store.datasets("pg")
    graph = store.lineage("dataset:pg:derived", direction="upstream", depth=1)
    assert "job:tests:defined_job" in graph.nodes and "dataset:pg:static_table" in graph.nodes


def test_unreachable_database_is_a_transient_store_error(tmp_path):
    s = EngineStore(SqlBackend("postgresql+psycopg://u:hunter2@127.0.0.1:1/x"))
    with pytest.raises(StoreError) as info:
        s.open()
    assert not info.value.permanent
    assert "hunter2" not in str(info.value)


def _backend(store: EngineStore) -> SqlBackend:
    assert isinstance(store.backend, SqlBackend)
    return store.backend


@pytest.mark.postgres
def test_postgres_connections_run_without_jit(pg_url):
    """Walk queries are short lookups; JIT compiling them (a planner misled by missing
    statistics) cost 37 ms each at a million events, so the store turns it off per connection."""
    store = EngineStore(SqlBackend(pg_url))
    store.open()
    try:
        with _backend(store)._db.connect() as conn:
            assert conn.exec_driver_sql("SHOW jit").scalar() == "off"
            conn.rollback()  # the setting is the session's, not a transaction's
            assert conn.exec_driver_sql("SHOW jit").scalar() == "off"
    finally:
        store.close()


@pytest.mark.postgres
@pytest.mark.parametrize(("default", "reads"), [(None, {"IDLE"}), ("serializable", {"INTRANS"})])
def test_postgres_reads_run_in_autocommit_at_read_committed(pg_url, default, reads):
    """At READ COMMITTED (PostgreSQL's default) a statement has a snapshot of its own in a
    transaction or not, so the backend reads in autocommit: no BEGIN and ROLLBACK round trips
    around each of the parent view's ~28 reads an answer (docs/design/engine.md section 12).
    The connection is out of a transaction after each read statement (psycopg's status), in one
    after each write statement. A server set to a stricter level keeps reads in transactions:
    a page and its count read in one snapshot."""
    from lineage_sdk.collector.api import queries

    url = pg_url if default is None else f"{pg_url}%20-cdefault_transaction_isolation%3D{default}"
    store = EngineStore(SqlBackend(url))
    store.open()
    seen: list[tuple[str, str]] = []

    def status(conn: sa.Connection, _cursor, statement: str, *_args) -> None:
        dbapi = conn.connection.dbapi_connection
        seen.append((statement.split()[0].upper(), dbapi.info.transaction_status.name))

    sa.event.listen(_backend(store)._db, "after_cursor_execute", status)
    try:
        app = str(uuid.uuid4())
        child = run_event(job="task", parent=(app, "tests", "app"), outputs=[("ns", "d")])
        _write(store, run_event(job="app", run_id=app), child)
        assert seen and {s for _, s in seen} == {"INTRANS"}, seen
        seen.clear()
        answer = queries.lineage(store, "job:tests:task", depth=10, granularity="parent")
        assert "job:tests:app" in str(answer["graph"])
        assert store.count_events() == 2
        assert len(seen) > 3 and {verb for verb, _ in seen} == {"SELECT"}, seen
        assert {s for _, s in seen} == reads, seen
    finally:
        store.close()


def _indexes_after_reopening(store: EngineStore, *ddl: str) -> set[str]:
    """Run ``ddl`` on a store holding one event (an older database), reopen it, and list the
    events table's indexes then; what it holds is checked untouched."""
    _write(store, run_event(job="j", inputs=[("ns", "a")], outputs=[("ns", "b")]))
    backend = _backend(store)
    with backend._db.begin() as conn:
        for statement in ddl:
            conn.exec_driver_sql(statement)
    url = backend._db.url.render_as_string(hide_password=False)
    store.close()
    reopened = EngineStore(SqlBackend(url))
    reopened.open()
    try:
        with _backend(reopened)._db.connect() as conn:
            names = {ix["name"] for ix in sa.inspect(conn).get_indexes(backend._t["ev"].name)}
        assert reopened.count_raw_events() == 1
        assert reopened.runs_of_job("tests", "j")
        return names
    finally:
        reopened.close()


def test_an_older_database_gets_the_missing_index_at_open(store):
    """A database made before the event-time index (export, rebuild and retention page by it)
    gets it when a collector opens it; what it holds is untouched."""
    index = f"ix_{_backend(store)._t['ev'].name}_time"
    assert index in _indexes_after_reopening(store, f"DROP INDEX {index}")


def _event_row(event_id: str, run_id: str) -> EventRow:
    at = datetime(2025, 1, 1, tzinfo=UTC)
    return EventRow(event_id, at, "run", "COMPLETE", run_id, ("ns", "j"), None, "ns", "{}")


def test_key_lists_holding_a_comma_or_an_empty_key_are_matched_exactly(store):
    """On PostgreSQL keys travel as one comma-joined text split by the server; a key holding a
    comma, or an empty key, cannot, and the list goes as an array instead: the same rows."""
    backend = _backend(store)
    ids = ["a,b", "", "a", "b"]
    backend.append(Rows(events=tuple(_event_row(i, f"run {i}" if i else "") for i in ids)))

    def found(**asked: list[str]) -> set[str]:
        return {row.event_id for row in backend.events(**asked)}

    assert found(ids=["a,b", "", "zz"]) == {"a,b", ""}
    assert found(ids=["a", "b", "zz"]) == {"a", "b"}
    assert found(run_ids=["run a,b", "", "zz"]) == {"a,b", ""}
    assert found(run_ids=["run a", "run b", "zz"]) == {"a", "b"}
