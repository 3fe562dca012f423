"""Live edges: START and RUNNING events make a job's edges and state at once, in every query store,
and a heartbeating run that went silent reads STALE, identically over every backend of the
engine: memory (the reference), sql (SQLite and PostgreSQL), document and graph, without anything
stored changing.

Events are written straight into each store (``write_batch``); the answers are read through the
same functions the HTTP API serves them with (``collector.api.queries`` and ``marquez``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from nosql_events import records, run_event

from lineage_sdk.collector.api import marquez, queries
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY, HEARTBEAT_FACET_SCHEMA_URL
from lineage_sdk.models.run_state import STALE, heartbeat_interval, is_stale

pytestmark = [pytest.mark.mongodb, pytest.mark.neo4j]

NS = "live-tests"


def heartbeat(interval: float) -> dict[str, Any]:
    return {
        HEARTBEAT_FACET_KEY: {
            "_producer": "https://example.com/live-tests",
            "_schemaURL": HEARTBEAT_FACET_SCHEMA_URL,
            "intervalS": interval,
        }
    }


def at(when: datetime) -> float:
    """``run_event``'s ``seconds`` (from its BASE_TIME) of an absolute time."""
    from nosql_events import BASE_TIME

    return (when - BASE_TIME).total_seconds()


@pytest.fixture
def every_store(
    memory_store: EngineStore,
    document_store: EngineStore,
    graph_store: EngineStore,
    tmp_path: Path,
    pg_url: str,
) -> Iterator[dict[str, Any]]:
    """The engine over every backend, the reference (memory) first; document and graph on
    collections and a graph of their own (conftest's fixtures drop them)."""
    sql = {
        "sqlite": EngineStore(SqlBackend(f"sqlite:///{tmp_path}/live.db")),
        "postgresql": EngineStore(SqlBackend(pg_url)),
    }
    for store in sql.values():
        store.open()
    try:
        yield {"memory": memory_store, **sql, "document": document_store, "graph": graph_store}
    finally:
        for store in sql.values():
            store.close()


def answers(store: Any, now: datetime) -> dict[str, Any]:
    """Everything the API would say about the test's jobs: lineage around each job, their runs,
    their summaries (inputs, outputs, latest run). ``liveness`` depends on the reading time, so
    it is compared separately."""
    out: dict[str, Any] = {}
    for job in ("stale-job", "live-job", "plain-job"):
        node = f"job:{NS}:{job}"
        out[f"lineage {job}"] = queries.lineage(store, node, depth=1)
        out[f"runs {job}"] = list(queries.runs(store, NS, job))
    out["jobs"] = [marquez.job_from_summary(j) for j in store.jobs(NS)]
    return out


def test_start_and_running_make_edges_and_state_alike_in_every_store(
    every_store: dict[str, Any],
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    stale_run, live_run, plain_run = (str(uuid.uuid4()) for _ in range(3))
    events = [
        # START only, heartbeat every 60 s, long ago: its edges show, and it reads STALE.
        run_event(
            job="stale-job",
            namespace=NS,
            run_id=stale_run,
            event_type="START",
            inputs=[(NS, "topic.orders")],
            outputs=[(NS, "table.orders")],
            run_facets=heartbeat(60),
        ),
        # START then RUNNING heartbeats, the latest just now: LIVE, RUNNING, edges of both.
        run_event(
            job="live-job",
            namespace=NS,
            run_id=live_run,
            event_type="START",
            seconds=at(now - timedelta(seconds=120)),
            inputs=[(NS, "table.orders")],
            run_facets=heartbeat(60),
        ),
        run_event(
            job="live-job",
            namespace=NS,
            run_id=live_run,
            event_type="RUNNING",
            seconds=at(now - timedelta(seconds=1)),
            inputs=[(NS, "table.orders")],
            outputs=[(NS, "report.daily")],
            run_facets=heartbeat(60),
        ),
        # START only, no heartbeat facet: edges and RUNNING, but never STALE.
        run_event(
            job="plain-job",
            namespace=NS,
            run_id=plain_run,
            event_type="START",
            inputs=[(NS, "report.daily")],
            outputs=[(NS, "mail.out")],
        ),
    ]
    stored_before: dict[str, list[list[dict[str, Any]]]] = {}
    for kind, store in every_store.items():
        store.write_batch(records(*events))
        stored_before[kind] = [store.events_of_run(r) for r in (stale_run, live_run, plain_run)]

    got = {kind: answers(store, now) for kind, store in every_store.items()}
    for kind in every_store:
        assert got[kind] == got["memory"], f"{kind} differs from memory"

    answer = got["memory"]
    # Edges from START alone (stale-job, plain-job) and from START + RUNNING (live-job).
    edges = {
        (e["origin"], e["destination"])
        for n in answer["lineage stale-job"]["graph"]
        for e in n["outEdges"]
    }
    assert edges == {
        (f"dataset:{NS}:topic.orders", f"job:{NS}:stale-job"),
        (f"job:{NS}:stale-job", f"dataset:{NS}:table.orders"),
        (f"dataset:{NS}:table.orders", f"job:{NS}:live-job"),
        (f"job:{NS}:live-job", f"dataset:{NS}:report.daily"),  # named by RUNNING only
    }
    jobs = {j["name"]: j for j in answer["jobs"]}
    assert jobs["live-job"]["outputs"] == [{"namespace": NS, "name": "report.daily"}]
    assert jobs["plain-job"]["inputs"] == [{"namespace": NS, "name": "report.daily"}]

    # State at once, and liveness only where a heartbeat facet is.
    stale = jobs["stale-job"]["latestRun"]
    live = jobs["live-job"]["latestRun"]
    plain = jobs["plain-job"]["latestRun"]
    assert (stale["state"], stale["liveness"], stale["heartbeatIntervalS"]) == (
        "RUNNING",
        STALE,
        60,
    )
    assert (live["state"], live["liveness"]) == ("RUNNING", "LIVE")
    assert live["lastHeartbeatAt"] == marquez.iso(now - timedelta(seconds=1))
    assert plain["state"] == "RUNNING" and "liveness" not in plain
    assert answer["runs live-job"][0]["liveness"] == "LIVE"
    assert answer["runs stale-job"][0]["liveness"] == STALE
    nodes = {n["id"]: n for n in answer["lineage stale-job"]["graph"]}
    assert nodes[f"job:{NS}:stale-job"]["data"]["latestRun"]["liveness"] == STALE
    assert nodes[f"job:{NS}:live-job"]["data"]["latestRun"]["liveness"] == "LIVE"
    # The run detail (folded from raw events) says the same.
    for kind, store in every_store.items():
        folded = marquez.run_from_events(stale_run, store.events_of_run(stale_run))
        assert folded["liveness"] == STALE, kind
        folded = marquez.run_from_events(live_run, store.events_of_run(live_run))
        assert folded["liveness"] == "LIVE", kind
        # Reading changed nothing that was stored.
        assert [store.events_of_run(r) for r in (stale_run, live_run, plain_run)] == (
            stored_before[kind]
        ), kind

    # A COMPLETE ends liveness: a terminal run is never stale, whatever its age.
    done = run_event(
        job="stale-job",
        namespace=NS,
        run_id=stale_run,
        event_type="COMPLETE",
        seconds=5,
        run_facets=heartbeat(60),
    )
    for kind, store in every_store.items():
        store.write_batch(records(done))
        (run,) = queries.runs(store, NS, "stale-job")
        assert run["state"] == "COMPLETED" and "liveness" not in run, kind


def test_the_staleness_rule() -> None:
    t = datetime(2026, 1, 1, tzinfo=UTC)
    assert is_stale("RUNNING", t, 10, t + timedelta(seconds=30.001))
    assert not is_stale("RUNNING", t, 10, t + timedelta(seconds=30))  # exactly 3 intervals
    assert is_stale("START", t, 10, t + timedelta(seconds=31))
    for state in ("COMPLETE", "FAIL", "ABORT", None):
        assert not is_stale(state, t, 10, t + timedelta(days=1))
    assert not is_stale("RUNNING", t, None, t + timedelta(days=1))  # no facet: never stale
    facet = heartbeat(0.5)
    assert heartbeat_interval({"run": {"facets": facet}}) == 0.5
    for bad in (0, -1, True, "5", float("inf"), float("nan"), None):
        facet[HEARTBEAT_FACET_KEY]["intervalS"] = bad
        assert heartbeat_interval({"run": {"facets": facet}}) is None, bad
    assert heartbeat_interval({"run": "not a run"}) is None
