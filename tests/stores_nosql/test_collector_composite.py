"""The composite store (document + graph + sql) fed by the collector from the real RabbitMQ.

Events come from the SDK itself: nested ``@track_lineage`` functions publishing through the
RabbitMQ exporter, plus hand-made events (column lineage, a batch message format, redeliveries)
published through the same exporter. Each of the three stores is then read back on connections
of its own and must agree with what was sent.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from nosql_collector import (
    CollectorRig,
    collector_rig,
    expected_graph,
    graph_counts,
    graph_runner,
    parked,
    queue_depths,
    running,
    store_id,
    stored_ids,
    stored_json,
    wait_settled,
)
from nosql_events import column_lineage, run_event, uid
from servers import GraphTarget, MongoTarget

import lineage_sdk
from lineage_exporters.rabbitmq import RabbitMQExporter
from lineage_exporters.rabbitmq.config import RabbitMQConfig
from lineage_sdk import LineageDataset, configure, track_lineage
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.store import LineageGraph, node_id
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.config.schema import LineageConfig, PipelineConfig
from lineage_sdk.sdk.events import encode_event
from lineage_sdk.sdk.export import EncodedEvent
from lineage_sdk.sdk.exporters import InMemoryExporter

pytestmark = [pytest.mark.rabbitmq, pytest.mark.mongodb, pytest.mark.neo4j]


@pytest.fixture
def rig(mongo: MongoTarget, graph_target: GraphTarget, tmp_path: Path) -> Iterator[CollectorRig]:
    with collector_rig(mongo.uri, graph_target, tmp_path) as r:
        yield r


def canonical(event: Any) -> bytes:
    """The SDK's wire form: sorted-key JSON; equal bytes mean an exact copy of the sent event."""
    return orjson.dumps(event, option=orjson.OPT_SORT_KEYS)


def sdk_events(rig: CollectorRig, ns: str) -> list[EncodedEvent]:
    """A pipeline of nested runs through the real SDK -> RabbitMQ exporter path.

    pipeline ─┬─ t1: wh/d0 -> wh/d1
              ├─ t2: wh/d1 -> wh/d2
              ├─ t3: wh/d2 -> wh/d3
              ├─ t4: wh/d3 -> wh/d4 ── check (reads wh/d4), a grandchild
              └─ broken (FAIL, caught by pipeline)
    """
    config = LineageConfig(
        collector_topic=rig.topic,
        rabbitmq=RabbitMQConfig(
            url=rig.config.section("rabbitmq").url,
            spool_dir=str(rig.tmp_path / "sdk-spool"),
            reconnect_initial_ms=100,
            reconnect_max_ms=1000,
        ),
        pipeline=PipelineConfig(max_queue_size=10_000),
    )
    witness = InMemoryExporter()
    sdk = configure(config, exporters=[RabbitMQExporter.from_config(config), witness], strict=True)
    assert sdk is not None
    d = [LineageDataset("wh", f"{ns}.d{i}") for i in range(5)]
    try:

        @track_lineage(job_name="check", job_namespace=ns, inputs=[d[4]])
        def check() -> None:
            pass

        def task(i: int) -> Any:
            @track_lineage(job_name=f"t{i}", job_namespace=ns, inputs=[d[i - 1]], outputs=[d[i]])
            def run() -> None:
                if i == 4:
                    check()

            return run

        @track_lineage(job_name="broken", job_namespace=ns)
        def broken() -> None:
            raise RuntimeError("bad row")

        @track_lineage(job_name="pipeline", job_namespace=ns)
        def pipeline() -> None:
            for i in range(1, 5):
                task(i)()
            with pytest.raises(RuntimeError):
                broken()

        pipeline()
        assert lineage_sdk.force_flush(30)
    finally:
        lineage_sdk.shutdown(10)
    assert len(witness.encoded) == 14
    return list(witness.encoded)


def hand_events(ns: str) -> list[EncodedEvent]:
    """Column lineage on a report read from d4, and ten runs of a side job."""
    report = run_event(
        job="report",
        namespace=ns,
        inputs=[("wh", f"{ns}.d4")],
        outputs=[("wh", f"{ns}.report")],
        seconds=1,
    )
    report["outputs"][0]["facets"] = {
        "columnLineage": column_lineage(
            {
                "total": [("wh", f"{ns}.d4", "amount"), ("wh", f"{ns}.d4", "fx")],
                "id": [("wh", f"{ns}.d4", "id")],
            }
        )
    }
    side = []
    for i in range(10):
        run = f"5ade0000-0000-4000-8000-{i:012d}"
        for j, etype in enumerate(("START", "COMPLETE")):
            side.append(
                run_event(
                    job="side",
                    namespace=ns,
                    run_id=run,
                    event_type=etype,
                    inputs=[("wh", f"{ns}.d0")],
                    outputs=[("wh", f"{ns}.side{i}")],
                    seconds=10 + i * 2 + j,
                )
            )
    return [encode_event(e) for e in (report, *side)]


def names(graph: LineageGraph, kind: str) -> set[str]:
    return {n.name for n in graph.nodes.values() if n.type == kind}


def edges(graph: LineageGraph) -> set[tuple[str, str]]:
    return {(e.origin, e.destination) for n in graph.nodes.values() for e in n.out_edges}


def shape(graph: LineageGraph) -> dict[str, Any]:
    """A lineage answer as comparable data: each node with its data and edges."""
    return {
        nid: (
            n.type,
            n.namespace,
            n.name,
            n.data,
            sorted((e.origin, e.destination) for e in n.in_edges),
            sorted((e.origin, e.destination) for e in n.out_edges),
        )
        for nid, n in graph.nodes.items()
    }


def test_composite_fed_by_the_collector_stores_every_event_once_in_every_store(
    rig: CollectorRig,
) -> None:
    ns = f"cq{uid()}"
    with running(rig.config, rig.manager()) as collector:
        sent = sdk_events(rig, ns)
        extra = hand_events(ns)
        rig.publish(extra, events_per_message=7)  # batch messages (the exporter's batch mode)
        rig.publish(sent[:6] + extra[:5])  # redeliveries: the same events again
        sent += extra
        stores = rig.readers()
        rig.wait_stored(stores["sql"], len(sent))
        wait_settled(rig, collector)  # the redelivered copies answered too
    assert parked(collector) == 0
    depths = queue_depths(rig)
    assert set(depths.values()) == {0}, depths

    payloads = {store_id(e.payload): e.payload for e in sent}
    assert len(payloads) == len(sent) == 35
    events = [orjson.loads(p) for p in payloads.values()]

    # Every store: every event exactly once, its stored JSON the event sent, byte-for-byte in
    # the wire form; and each run's events given back exactly.
    for name, store in stores.items():
        assert stored_ids(store) == collections.Counter(list(payloads)), name
        for event_id, text in stored_json(store).items():
            assert canonical(orjson.loads(text)) == payloads[event_id], (name, event_id)
    by_run = collections.defaultdict(list)
    for e in events:
        by_run[e["run"]["runId"]].append(canonical(e))
    for name, store in stores.items():
        for run_id, expected in by_run.items():
            got = sorted(canonical(e) for e in store.events_of_run(run_id))
            assert got == sorted(expected), (name, run_id)

    # Graph: the right vertices and relationships, nothing duplicated.
    graph = stores["graph"]
    assert graph_counts(graph) == expected_graph(events)
    derived = graph_runner(graph).run(
        "MATCH (x:ColumnEdge) RETURN x.oDs AS od, x.oField AS o, x.iDs AS idd, x.iField AS i"
    )
    column_edges = [
        (f"{ns}.report", "id", f"{ns}.d4", "id"),
        (f"{ns}.report", "total", f"{ns}.d4", "amount"),
        (f"{ns}.report", "total", f"{ns}.d4", "fx"),
    ]
    assert sorted((r["od"], r["o"], r["idd"], r["i"]) for r in derived) == column_edges
    # The same column edges, stated by the report job, in every store.
    for name, store in stores.items():
        found = list(store.backend.column_edges(datasets=[("wh", f"{ns}.report")]))
        assert sorted((e.output[1], e.output[2], e.input[1], e.input[2]) for e in found) == (
            column_edges
        ), name
        assert {e.job for e in found} == {(ns, "report")}, name

    # Parent and child runs are linked, in every store.
    run_of: dict[str, str] = {}
    for e in events:
        run_of.setdefault(e["job"]["name"], e["run"]["runId"])
    children = {
        "t1": "pipeline",
        "t2": "pipeline",
        "t3": "pipeline",
        "t4": "pipeline",
        "broken": "pipeline",
        "check": "t4",
    }
    linked = graph_runner(graph).run(
        "MATCH (c:Run) WHERE c.parentRunId IS NOT NULL RETURN c.runId AS c, c.parentRunId AS p"
    )
    assert sorted((r["c"], r["p"]) for r in linked) == sorted(
        (run_of[c], run_of[p]) for c, p in children.items()
    )
    for name, store in stores.items():
        for parent in set(children.values()):
            kids = sorted(run_of[c] for c, p in children.items() if p == parent)
            assert store.child_runs(run_of[parent]) == kids, (name, parent)
        for child, parent in children.items():
            (summary,) = store.runs_of_job(ns, child)
            assert summary.run_id == run_of[child], name
            assert summary.parent_run_id == run_of[parent], (name, child)
            assert summary.state == ("FAIL" if child == "broken" else "COMPLETE"), (name, child)
        (top,) = store.runs_of_job(ns, "pipeline")
        assert top.parent_run_id is None and top.state == "COMPLETE", name
        assert len(store.runs_of_job(ns, "side")) == 10, name

    # Upstream three hops deep from d4: the same datasets, jobs and edges from each store.
    def d(i: int) -> str:
        return node_id("DATASET", "wh", f"{ns}.d{i}")

    def j(i: int) -> str:
        return node_id("JOB", ns, f"t{i}")

    for name, store in stores.items():
        up = store.lineage(d(4), direction="upstream", depth=3)
        assert names(up, "JOB") == {"t4", "t3", "t2"}, name
        assert names(up, "DATASET") == {f"{ns}.d{i}" for i in (1, 2, 3, 4)}, name
        assert edges(up) == {
            (d(1), j(2)),
            (j(2), d(2)),
            (d(2), j(3)),
            (j(3), d(3)),
            (d(3), j(4)),
            (j(4), d(4)),
        }, name
        down = store.lineage(d(4), direction="downstream", depth=1)
        assert names(down, "JOB") == {"check", "report"}, name

    # Every store answers as the reference (the memory backend) fed the same events does.
    reference = EngineStore(MemoryBackend())
    reference.open()
    reference.write_batch([build_record(orjson.loads(p)) for p in payloads.values()])
    for node in [d(i) for i in range(5)] + [j(i) for i in range(1, 5)]:
        for direction in ("upstream", "downstream"):
            want = shape(reference.lineage(node, direction=direction, depth=5))
            for name, store in stores.items():
                got = shape(store.lineage(node, direction=direction, depth=5))
                assert got == want, (name, node, direction)
    reference.close()
