"""A fleet of collectors converges: the same events, shuffled through three collectors sharing one
queue or in order through one, leave the sql, document and graph stores (each the engine over its
backend) answering the same, and as the memory backend fed the same events does.

Everything is real: the shared RabbitMQ (a unique exchange and queue per rig), three in-process
``LineageCollector`` consumers competing on one queue, PostgreSQL for the fleet (a schema of its
own, dropped afterwards) and SQLite for the single collector, SecantusDB and FalkorDB. The event
set has nested runs (a parent, four children, a grandchild), START/RUNNING/COMPLETE/FAIL/OTHER,
a START later in time than its RUNNING, a RUNNING after the COMPLETE, a COMPLETE and a FAIL at the
same instant, and redeliveries: the same event twice, and old events after newer ones.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from nosql_collector import CollectorRig, collector_rig, queue_depths, running, sample_value
from nosql_events import run_event, uid
from servers import GraphTarget, MongoTarget

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "collector"))  # collector_helpers

from collector_helpers import publish_fast, wait_until

from lineage_sdk.collector.api.marquez import run_from_events
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.store import LineageGraph, node_id
from lineage_sdk.collector.stores.memory import MemoryBackend

pytestmark = [pytest.mark.rabbitmq, pytest.mark.mongodb, pytest.mark.neo4j, pytest.mark.postgres]


KINDS = ("sql", "document", "graph")
STAGES = (("extract", 0, 1), ("transform", 1, 2), ("load", 2, 3), ("report", 3, 4))
JOBS = ("orchestrator", *(name for name, _, _ in STAGES), "check")
DATASETS = tuple(f"d{i}" for i in range(6))
# Small batches and prefetch so that the three collectors really share the queue.
FLEET_SETTINGS = {"prefetch": 10, "batch_size": 10, "batch_timeout_ms": 20}


@dataclasses.dataclass
class EventSet:
    namespace: str
    events: list[dict[str, Any]]  # every distinct event, once
    expected_state: dict[str, str]  # run id -> the state the rule must give
    parents: dict[str, str]  # run id -> its parent run id


def build(namespace: str, pipelines: int = 16) -> EventSet:
    """``pipelines`` runs of: orchestrator ─┬─ extract d0->d1, transform d1->d2, load d2->d3
    └─ report d3->d4 ── check d4->d5 (a grandchild), with an oddity or two in each."""
    events: list[dict[str, Any]] = []
    expected: dict[str, str] = {}
    parents: dict[str, str] = {}
    ns = namespace

    def run(
        job: str,
        at: int,
        *,
        parent: tuple[str, str] | None = None,
        io: tuple[int, int] | None = None,
        oddity: str = "",
        fail: bool = False,
    ) -> str:
        run_id = str(uuid.uuid4())
        kw: dict[str, Any] = {"job": job, "namespace": ns, "run_id": run_id}
        if parent is not None:
            kw["parent"] = (parent[0], ns, parent[1])
            parents[run_id] = parent[0]
        if io is not None:
            kw["inputs"] = [(ns, f"d{io[0]}")]
            kw["outputs"] = [(ns, f"d{io[1]}")]
        start, running_at, end = at, at + 1, at + 5
        if "start-after-running" in oddity:  # rank beats time: RUNNING beats a later START
            start, running_at = at + 2, at + 1
        events.append(run_event(event_type="START", seconds=start, **kw))
        events.append(run_event(event_type="RUNNING", seconds=running_at, **kw))
        if "still-running" in oddity:
            expected[run_id] = "RUNNING"
            return run_id
        final = "FAIL" if fail else "COMPLETE"
        events.append(run_event(event_type=final, seconds=end, **kw))
        expected[run_id] = final
        if oddity == "late-heartbeat":  # a RUNNING after the end: terminal wins whatever the time
            events.append(run_event(event_type="RUNNING", seconds=end + 30, **kw))
        if oddity == "tie":  # COMPLETE and FAIL at the same instant: FAIL, by the state's name
            other = "COMPLETE" if fail else "FAIL"
            events.append(run_event(event_type=other, seconds=end, **kw))
            expected[run_id] = "FAIL"
        if oddity == "other":
            events.append(run_event(event_type="OTHER", seconds=at + 3, **kw))
        return run_id

    oddities = (
        "",
        "start-after-running",
        "late-heartbeat",
        "tie",
        "other",
        "still-running",
        "start-after-running still-running",
    )
    for i in range(pipelines):
        at = 1000 * i
        top = run("orchestrator", at, oddity=oddities[i % len(oddities)], fail=i % 5 == 4)
        for k, (job, src, dst) in enumerate(STAGES):
            child = run(
                job,
                at + 10 * (k + 1),
                parent=(top, "orchestrator"),
                io=(src, dst),
                oddity=oddities[(i + k + 1) % len(oddities)],
                fail=(i + k) % 7 == 3,
            )
        run("check", at + 60, parent=(child, "report"), io=(4, 5), oddity=oddities[i % 3])
    return EventSet(ns, events, expected, parents)


def dumps(event: dict[str, Any]) -> bytes:
    return orjson.dumps(event, option=orjson.OPT_SORT_KEYS)


def in_order(events: list[dict[str, Any]], rng: random.Random) -> list[bytes]:
    """Event-time order, some events delivered twice in a row (a plain redelivery)."""
    out: list[bytes] = []
    for event in sorted(events, key=lambda e: (e["eventTime"], dumps(e))):
        out.append(dumps(event))
        if rng.random() < 0.08:
            out.append(dumps(event))
    return out


def shuffled(events: list[dict[str, Any]], rng: random.Random) -> list[bytes]:
    """Any order (children before parents, COMPLETE before START), some events twice, and a
    tail of the oldest events retried after all the newer ones."""
    bodies = [dumps(e) for e in events]
    bodies += rng.sample(bodies, len(bodies) // 10)
    rng.shuffle(bodies)
    oldest = sorted(events, key=lambda e: e["eventTime"])[:15]
    return bodies + [dumps(e) for e in oldest]


# ------------------------------------------------------------------------------------- answers


def graph_shape(graph: LineageGraph, *, with_data: bool) -> dict[str, Any]:
    return {
        nid: (
            n.type,
            n.namespace,
            n.name,
            n.data if with_data else None,
            sorted((e.origin, e.destination) for e in n.in_edges),
            sorted((e.origin, e.destination) for e in n.out_edges),
        )
        for nid, n in graph.nodes.items()
    }


def answers(store: Any, event_set: EventSet, *, with_data: bool) -> dict[str, Any]:
    """Everything the store says about the event set, through its own read API."""
    ns = event_set.namespace
    runs = {job: [dataclasses.astuple(r) for r in store.runs_of_job(ns, job)] for job in JOBS}
    run_ids = sorted(event_set.expected_state)
    events = {r: [dumps(e) for e in store.events_of_run(r)] for r in run_ids}
    folded = {r: run_from_events(r, store.events_of_run(r)) for r in run_ids}
    nodes = [node_id("JOB", ns, j) for j in JOBS] + [node_id("DATASET", ns, d) for d in DATASETS]
    lineage = {
        f"{node} {direction} {depth}": graph_shape(
            store.lineage(node, direction=direction, depth=depth), with_data=with_data
        )
        for node in nodes
        for direction in ("upstream", "downstream")
        for depth in (1, 5)
    }
    jobs = [dataclasses.astuple(j) for j in store.jobs(ns)]
    return {"runs": runs, "events": events, "folded": folded, "lineage": lineage, "jobs": jobs}


# --------------------------------------------------------------------------------------- test


@pytest.fixture
def rigs(
    mongo: MongoTarget, graph_target: GraphTarget, tmp_path: Path, pg_url: str
) -> Iterator[tuple[CollectorRig, CollectorRig]]:
    with (
        collector_rig(
            mongo.uri, graph_target, tmp_path, collector=FLEET_SETTINGS, sql_url=pg_url
        ) as fleet,
        collector_rig(mongo.uri, graph_target, tmp_path) as single,
    ):
        yield fleet, single


def deliver(rig: CollectorRig, bodies: list[bytes], distinct: int, collectors: int) -> list[float]:
    """Publish ``bodies`` to ``collectors`` consumers of the rig's queue; wait until every store
    holds ``distinct`` events and the queue is empty. The events each collector consumed."""
    with contextlib.ExitStack() as stack:
        running_collectors = [
            stack.enter_context(running(rig.config, rig.manager())) for _ in range(collectors)
        ]
        publish_fast(rig.topic, bodies)
        sql = rig.sql()
        rig.wait_stored(sql, distinct, timeout=60)

        def consumed() -> float:
            return sum(
                sample_value(c, "lineage_collector_events_consumed_total")
                for c in running_collectors
            )

        try:
            wait_until(
                lambda: sum(queue_depths(rig).values()) == 0 and consumed() >= len(bodies),
                90,  # a loaded machine may send a batch through the retry queues first
                message="every delivery consumed",
            )
        except AssertionError as exc:  # say what was left, so a failure explains itself
            raise AssertionError(
                f"{exc}: queues {queue_depths(rig)}, consumed {consumed()} of {len(bodies)}"
            ) from None
        return [
            sample_value(c, "lineage_collector_events_consumed_total") for c in running_collectors
        ]


def test_three_collectors_shuffled_match_one_in_order(
    rigs: tuple[CollectorRig, CollectorRig],
) -> None:
    fleet, single = rigs
    rng = random.Random(13)
    event_set = build(f"fleet-{uid()}")
    distinct = len(event_set.events)
    assert 250 <= distinct <= 400

    consumed = deliver(single, in_order(event_set.events, rng), distinct, 1)
    shuffled_bodies = shuffled(event_set.events, rng)
    per_collector = deliver(fleet, shuffled_bodies, distinct, 3)
    assert all(n > 0 for n in per_collector), per_collector  # the three shared the queue
    # More than published when a batch was retried (e.g. a PostgreSQL deadlock between two
    # collectors upserting the same runs): the retry must converge all the same.
    assert sum(per_collector) >= len(shuffled_bodies) and consumed

    single_stores, fleet_stores = single.readers(), fleet.readers()
    for kind in KINDS:
        got = answers(fleet_stores[kind], event_set, with_data=True)
        want = answers(single_stores[kind], event_set, with_data=True)
        for part in want:
            assert got[part] == want[part], f"{kind}: {part} differs between fleet and single"

    # The three kinds agree with each other and with the reference, the memory backend fed every
    # distinct event once (lineage nodes with their data: every store puts the latest run in a
    # job node), and with the rule.
    reference = EngineStore(MemoryBackend())
    reference.open()
    reference.write_batch([build_record(e) for e in event_set.events])
    want = answers(reference, event_set, with_data=True)
    reference.close()
    by_kind = {kind: answers(single_stores[kind], event_set, with_data=True) for kind in KINDS}
    for kind in KINDS:
        for part in want:
            assert by_kind[kind][part] == want[part], f"{kind} vs memory: {part}"

    runs = [r for rows in by_kind["sql"]["runs"].values() for r in rows]
    assert len(runs) == len(event_set.expected_state)
    for run_id, _ns, _job, state, started, ended, parent, *_live in runs:
        assert state == event_set.expected_state[run_id], run_id
        assert parent == event_set.parents.get(run_id), run_id
        assert started is not None and (ended is not None) == (state != "RUNNING"), run_id
