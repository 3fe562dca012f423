"""A run's derived state is a function of its set of events, not of their arrival order.

The same events of one run (and its parent) are written in every drawn order and batching,
duplicates included, straight into the engine over every backend (memory, sql on SQLite and on
PostgreSQL, document and graph; ``write_batch``, no broker), and folded by the HTTP API's Marquez
fold. Every store and every order must answer the same state, times and parent, and that answer
is the one ``lineage_sdk.models.run_state`` states.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nosql_events import BASE_TIME, records, run_event
from servers import GraphTarget, MongoTarget, postgres_schema

from lineage_sdk.collector.api.marquez import marquez_state, run_from_events
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.store import LineageRecord, RunSummary
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY, HEARTBEAT_FACET_SCHEMA_URL
from lineage_sdk.models.run_state import pick_link, state_key

pytestmark = [pytest.mark.mongodb, pytest.mark.neo4j]

NS = "order-tests"


def one_run(job: str, run_id: str, parent_id: str) -> list[dict[str, Any]]:
    """A run whose events disagree in every way the rule has to settle:

    * START later in time than RUNNING (rank wins over time: RUNNING beats START);
    * a RUNNING after the COMPLETE (a terminal state wins whatever the time);
    * a COMPLETE and a FAIL at the same, latest instant (the state's name settles it: FAIL);
    * two STARTs (the earliest is ``started_at``), an OTHER event, a second parent named once;
    * two heartbeat intervals (the greatest is the run's).
    """
    io = {"inputs": [(NS, f"{job}.in")], "outputs": [(NS, f"{job}.out")]}
    parent = (parent_id, NS, "parent")
    events = [
        run_event(job=job, namespace=NS, run_id=run_id, event_type="START", seconds=5, **io),
        run_event(job=job, namespace=NS, run_id=run_id, event_type="START", seconds=2),
        run_event(job=job, namespace=NS, run_id=run_id, event_type="RUNNING", seconds=3, **io),
        run_event(
            job=job, namespace=NS, run_id=run_id, event_type="OTHER", seconds=4, parent=parent
        ),
        run_event(job=job, namespace=NS, run_id=run_id, event_type="COMPLETE", seconds=10),
        run_event(job=job, namespace=NS, run_id=run_id, event_type="FAIL", seconds=10),
        run_event(job=job, namespace=NS, run_id=run_id, event_type="COMPLETE", seconds=7.5),
        run_event(job=job, namespace=NS, run_id=run_id, event_type="RUNNING", seconds=20),
        run_event(
            job=job,
            namespace=NS,
            run_id=run_id,
            event_type="RUNNING",
            seconds=6,
            parent=("ffffffff-0000-4000-8000-000000000000", NS, "parent"),
        ),
    ]
    for event, interval in ((events[0], 5), (events[2], 30.5)):
        event["run"]["facets"][HEARTBEAT_FACET_KEY] = {
            "_producer": event["producer"],
            "_schemaURL": HEARTBEAT_FACET_SCHEMA_URL,
            "intervalS": interval,
        }
    return events


def expected(run_id: str, job: str, parent_id: str) -> RunSummary:
    at = BASE_TIME
    return RunSummary(
        run_id=run_id,
        job_namespace=NS,
        job_name=job,
        state="FAIL",
        started_at=at + timedelta(seconds=2),
        ended_at=at + timedelta(seconds=10),
        parent_run_id=parent_id,
        state_time=at + timedelta(seconds=10),  # the winning FAIL's
        heartbeat_s=30.5,
    )


@pytest.fixture(scope="module")
def stores(
    mongo: MongoTarget, graph_target: GraphTarget, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The engine over one backend of each kind for the module (hypothesis refuses
    function-scoped fixtures); each example writes a run and a job of its own."""
    suffix = uuid.uuid4().hex[:12]
    tmp: Path = tmp_path_factory.mktemp("order")
    document = DocumentBackend(
        ConnectionConfig(uri=mongo.uri, database="lineage_tests", timeout_ms=5000),
        collection_name=f"t_{suffix}",
    )
    graph = graph_target.backend(f"t_{suffix}")
    with postgres_schema("lineage_order") as pg_url:
        opened = {
            "memory": EngineStore(MemoryBackend()),
            "sqlite": EngineStore(SqlBackend(f"sqlite:///{tmp}/order.db")),
            "postgres": EngineStore(SqlBackend(pg_url)),
            "document": EngineStore(document),
            "graph": EngineStore(graph),
        }
        for store in opened.values():
            store.open()
        try:
            yield opened
        finally:
            document.drop()
            drop = getattr(graph.runner, "drop", None)
            if drop is not None:
                drop()
            for store in opened.values():
                store.close()


def test_the_rule_itself() -> None:
    t = BASE_TIME
    later = t + timedelta(seconds=1)
    assert state_key("RUNNING", t, "a") > state_key("START", later, "b")  # type: ignore[operator]
    assert state_key("COMPLETE", t, "a") > state_key("RUNNING", later, "b")  # type: ignore[operator]
    assert state_key("COMPLETE", later, "a") > state_key("FAIL", t, "b")  # type: ignore[operator]
    assert state_key("FAIL", t, "a") > state_key("COMPLETE", t, "b")  # type: ignore[operator]
    assert state_key("OTHER", t, "a") is None and state_key(None, t, "a") is None
    assert pick_link([None, "b", "a", ""]) == "a" and pick_link([None]) is None


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_order_and_batching_gives_one_answer(
    stores: dict[str, Any], data: st.DataObject
) -> None:
    job = f"job-{uuid.uuid4().hex[:10]}"
    run_id, parent_id = str(uuid.uuid4()), "00000000-0000-4000-8000-000000000000"
    events = one_run(job, run_id, parent_id)
    # Redeliveries: any event may come twice, and anywhere in the order.
    duplicated = data.draw(st.lists(st.sampled_from(events), max_size=4), label="redelivered")
    order: list[dict[str, Any]] = data.draw(st.permutations(events + duplicated), label="order")
    cuts = sorted(
        data.draw(st.lists(st.integers(0, len(order)), max_size=4, unique=True), label="batch cuts")
    )
    batches: list[list[LineageRecord]] = []
    start = 0
    for cut in [*cuts, len(order)]:
        if cut > start:
            batches.append(records(*order[start:cut]))
            start = cut
    want = expected(run_id, job, parent_id)
    for kind, store in stores.items():
        for batch in batches:
            store.write_batch(batch)
        (got,) = store.runs_of_job(NS, job)
        assert got == want, kind
        assert len(store.events_of_run(run_id)) == len(events), kind
    folded = run_from_events(run_id, order)
    assert folded["state"] == marquez_state(want.state) == "FAILED"
    assert _time(folded["startedAt"]) == want.started_at
    assert _time(folded["endedAt"]) == want.ended_at


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
