"""Retention and hard deletion (issue 16, item 5) against the real servers.

The engine over every backend: memory, SQLite, PostgreSQL (a database made for the module and
dropped after; the fixtures of stores_nosql/conftest.py), SecantusDB (MongoDB wire) and FalkorDB.
The reference for correctness: after a purge, every answer of a store (lineage, column lineage,
search, lists, runs, raw events) equals the answers of a fresh store of its kind fed only the
remaining events; and every store agrees with the memory backend's.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from nosql_events import (
    BASE_TIME,
    PRODUCER,
    SPEC,
    STORE_KINDS,
    StoreFactory,
    column_lineage,
    run_event,
    uid,
)
from pymongo import MongoClient
from servers import MongoTarget
from typer.testing import CliRunner

from lineage_sdk.collector.api import marquez
from lineage_sdk.collector.api.history import history_lineage
from lineage_sdk.collector.backend import Rows, Touched
from lineage_sdk.collector.cli import app
from lineage_sdk.collector.decode import validate_event
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.records import compute_event_id
from lineage_sdk.collector.retention import (
    RetentionTask,
    names_target,
    parse_age,
    purge_mentioning,
    purge_older_than,
)
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.store import LineageRecord
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.exceptions import ConfigError

pytestmark = [pytest.mark.postgres, pytest.mark.mongodb, pytest.mark.neo4j]

KINDS = STORE_KINDS
DAY = 86400.0
NOW = BASE_TIME + timedelta(days=100)  # "now" of the retention runs: cutoff at day 10 for 90d


def _source(name: str, uri: str) -> dict[str, Any]:
    """A ``dataSource`` facet: Marquez's sources (SOURCE nodes) that retention derives again."""
    schema = "https://openlineage.io/spec/facets/1-0-1/DatasourceDatasetFacet.json"
    facet = {"_producer": PRODUCER, "_schemaURL": schema}
    return {"dataSource": {**facet, "name": name, "uri": uri}}


def _corpus() -> list[dict[str, Any]]:
    """Old (day 0) and new (day 20) events sharing jobs, runs, datasets and column edges."""
    spans = "6f3b2a1c-0000-4000-8000-000000000001"  # START old, COMPLETE new
    parent = "6f3b2a1c-0000-4000-8000-000000000002"
    cols = {"columnLineage": column_lineage({"c": [("ns1", "a", "x")]})}
    old_cols = {
        "columnLineage": column_lineage({"c": [("ns1", "a", "y")], "k": [("ns1", "a", "z")]})
    }
    return [
        # ns1: a -> load -> b -> report -> c; only old events name "legacy" and "gone"
        run_event(job="load", namespace="ns1", inputs=[("ns1", "a")], outputs=[("ns1", "b")]),
        run_event(
            job="load",
            namespace="ns1",
            inputs=[("ns1", "a")],
            outputs=[("ns1", "b")],
            seconds=20 * DAY,
            dataset_facets=cols,
        ),
        run_event(
            job="report",
            namespace="ns1",
            event_type="START",
            run_id=spans,
            inputs=[("ns1", "b")],
            outputs=[("ns1", "legacy")],
            seconds=1,
        ),
        run_event(
            job="report",
            namespace="ns1",
            run_id=spans,
            inputs=[("ns1", "b")],
            outputs=[("ns1", "c")],
            seconds=20 * DAY + 1,
        ),
        run_event(
            job="old_only",
            namespace="ns1",
            inputs=[("ns1", "c")],
            outputs=[("ns1", "gone")],
            seconds=2,
            dataset_facets={**old_cols, **_source("oldsrc", "pg://gone")},
        ),
        # an older statement of load's column edge b.c <- a.x: it wins again when load goes
        run_event(
            job="backfill",
            namespace="ns1",
            outputs=[("ns1", "b")],
            seconds=5 * DAY,
            dataset_facets=cols,
        ),
        # a parent run (old) and its child (new)
        run_event(
            job="orchestrator", namespace="ns1", run_id=parent, event_type="START", seconds=3
        ),
        run_event(
            job="child",
            namespace="ns1",
            parent=(parent, "ns1", "orchestrator"),
            inputs=[("ns1", "c")],
            outputs=[("ns2", "shared")],
            seconds=20 * DAY + 2,
        ),
        # ns2: an old producer of "shared", a new consumer of it (the Marquez #1271 shape)
        run_event(
            job="writer",
            namespace="ns2",
            outputs=[("ns2", "shared")],
            seconds=4,
            dataset_facets=_source("warehouse", "pg://old"),
        ),
        run_event(
            job="reader",
            namespace="ns2",
            inputs=[("ns2", "shared")],
            outputs=[("ns2", "out")],
            seconds=20 * DAY + 3,
        ),
        run_event(
            job="writer2",
            namespace="ns2",
            outputs=[("ns2", "shared")],
            seconds=20 * DAY + 4,
            dataset_facets=_source("warehouse", "pg://new"),
        ),
        # static lineage: an old DatasetEvent, a new JobEvent
        {
            "eventTime": "2025-03-01T12:00:09Z",
            "producer": PRODUCER,
            "schemaURL": SPEC + "DatasetEvent",
            "dataset": {"namespace": "ns1", "name": "declared", "facets": {}},
        },
        {
            "eventTime": "2025-03-21T12:00:09Z",
            "producer": PRODUCER,
            "schemaURL": SPEC + "JobEvent",
            "job": {"namespace": "ns1", "name": "static", "facets": {}},
            "inputs": [{"namespace": "ns1", "name": "b", "facets": {}}],
            "outputs": [{"namespace": "ns1", "name": "s", "facets": {}}],
        },
    ]


CORPUS = _corpus()
RECORDS = [validate_event(e) for e in CORPUS]
NODES = sorted(
    {f"job:{r.job_namespace}:{r.job_name}" for r in RECORDS}
    | {f"dataset:{d.namespace}:{d.name}" for r in RECORDS for d in (*r.inputs, *r.outputs)}
    | {"job:ns1:orchestrator"}
)
CUTOFF = NOW - timedelta(days=90)


def snapshot(store: Any, *, cross_check: bool = True) -> dict[str, Any]:
    """Every answer the reads give about the corpus's nodes, as comparable data; with
    ``cross_check``, each ``asOf`` answer is also checked against the generic fold
    (:func:`as_of_answer`)."""
    out: dict[str, Any] = {"raw": sorted(e.event_id for e in store.iter_raw_events())}
    for node in NODES:
        graph = store.lineage(node, depth=10)
        out[node] = sorted(
            (
                n.id,
                n.data.get("latestRun", {}).get("state"),
                sorted((e.origin, e.destination) for e in n.out_edges),
            )
            for n in graph.nodes.values()
        )
        if node.startswith("dataset:"):
            cols = store.column_lineage(node, depth=10, with_downstream=True)
            out["col " + node] = sorted((o.id, i.id, info) for (o, i), info in cols.edges.items())
        else:
            _, ns, name = node.split(":", 2)
            out["runs " + node] = sorted(
                (r.run_id, r.state, r.started_at, r.ended_at, r.parent_run_id)
                for r in store.runs_of_job(ns, name)
            )
    # asOf lineage, every store's from its dated edges (checked against the generic fold of
    # the raw events here).
    for i, as_of in enumerate(AS_OF):
        for node in NODES:
            out[f"asof {i} {node}"] = as_of_answer(store, node, as_of, cross_check)
    out["search"] = sorted(store.search("", limit=1000)) if hasattr(store, "search") else None
    for what in ("namespaces", "datasets"):
        out[what] = sorted(map(tuple, getattr(store, what)(limit=1000)))
    out["jobs"] = sorted((j.namespace, j.name) for j in store.jobs(limit=1000))
    out["dataset namespaces"] = store.dataset_namespaces()
    assert out["dataset namespaces"] == sorted({ns for ns, _ in out["datasets"]})
    # Marquez's sources: how each dataset's entries name theirs, with first and last times.
    out["sources"] = store.sources() if hasattr(store, "sources") else None
    # Static lineage: what the JobEvents and DatasetEvents of every node still say.
    jobs = [tuple(n.split(":", 2)[1:]) for n in NODES if n.startswith("job:")]
    jobs.append(("ns1", "static"))
    datasets = [tuple(n.split(":", 2)[1:]) for n in NODES if n.startswith("dataset:")]
    datasets.append(("ns1", "declared"))
    out["static"] = sorted(
        compute_event_id(e) for e in store.static_events(jobs=jobs, datasets=datasets)
    )
    return out


#: asOf times: among the old events, between the new ones, and after every event.
AS_OF = [
    BASE_TIME + timedelta(seconds=2.5),
    BASE_TIME + timedelta(days=20, seconds=1.5),
    BASE_TIME + timedelta(days=20, seconds=3.5),
    NOW,
]


def as_of_answer(store: Any, node: str, as_of: datetime, cross_check: bool = True) -> Any:
    """The ``asOf`` lineage answer (nodes, latest runs, edges, declared edges) or the 404's
    message; for a store with its own ``lineage_as_of`` (the engine's, from the backend's dated
    edges), checked equal to the generic path's unless not ``cross_check``."""

    def asked(indexed: bool) -> Any:
        try:
            graph, declared = history_lineage(store, node, depth=10, as_of=as_of, indexed=indexed)
        except LookupError as exc:
            return str(exc)
        return marquez.lineage_graph(graph), sorted(declared)

    found = asked(True)
    if cross_check and hasattr(store, "lineage_as_of"):
        assert found == asked(False), (node, as_of)
        if not isinstance(found, str):
            assert store.lineage_as_of(node, depth=10, as_of=as_of) is not None, (node, as_of)
    return found


def named_in(answers: dict[str, Any], namespace: str, name: str | None) -> bool:
    """Whether an answer names the node (or, with no name, the namespace); the answers to
    questions about the node itself (its own lineage answer holds it as the root) are skipped."""
    if name is None:
        needles = [f":{namespace}:", f"('{namespace}',", f"'{namespace}'"]
    else:
        needles = [f":{namespace}:{name}'", f":{namespace}:{name}:", f"('{namespace}', '{name}')"]
    asked = f":{namespace}:" if name is None else f":{namespace}:{name}"
    text = str([v for k, v in answers.items() if not k.endswith(asked) and f"{asked}" not in k])
    return any(needle in text for needle in needles)


def fresh(make_store: StoreFactory, kind: str, records: list[LineageRecord]) -> dict[str, Any]:
    """The snapshot of a fresh store fed ``records``: the oracle a store that forgot the others
    must equal. Its ``asOf`` answers are not cross-checked against the generic fold: the store
    under test checks its own, and equals these, so each snapshot pair folds the raw events once."""
    store = make_store(kind)
    store.write_batch(records)
    return snapshot(store, cross_check=False)


def _written(make_store: StoreFactory, kind: str) -> Any:
    store = make_store(kind)
    store.write_batch(RECORDS[::2])  # two batches: nothing depends on arrival order
    store.write_batch(RECORDS[1::2])
    return store


@pytest.mark.parametrize("kind", KINDS)
def test_retention_leaves_what_the_remaining_events_derive(
    make_store: StoreFactory, kind: str
) -> None:
    """Events before the cutoff go, with the runs, edges, column edges and nodes only they
    supported; a run spanning the cutoff keeps what its new event says; a second run removes
    nothing; a dry run counts without removing."""
    store = _written(make_store, kind)
    old = [r for r in RECORDS if r.event_time < CUTOFF]
    kept = [r for r in RECORDS if r.event_time >= CUTOFF]
    dry = purge_older_than([store], timedelta(days=90), now=NOW, dry_run=True, batch_size=2)
    assert dry.removed == {store.name: len(old)}
    assert len(list(store.iter_raw_events())) == len(RECORDS)

    report = purge_older_than([store], timedelta(days=90), now=NOW, batch_size=2)
    assert report.removed == {store.name: len(old)}
    after = snapshot(store)
    assert after == fresh(make_store, kind, kept)
    # what only old events named is gone from every read
    for ns, name in (("ns1", "old_only"), ("ns1", "gone"), ("ns1", "legacy"), ("ns2", "writer")):
        assert not named_in(after, ns, name), name
    again = purge_older_than([store], timedelta(days=90), now=NOW)
    assert again.removed == {store.name: 0}
    assert snapshot(store) == after


@pytest.mark.parametrize("kind", KINDS)
def test_retention_of_one_namespace(make_store: StoreFactory, kind: str) -> None:
    store = _written(make_store, kind)
    purge_older_than([store], timedelta(days=90), now=NOW, namespace="ns2")
    kept = [r for r in RECORDS if r.event_time >= CUTOFF or r.job_namespace != "ns2"]
    assert snapshot(store) == fresh(make_store, kind, kept)


DELETES: list[tuple[Any, str, str | None]] = [
    ("job", "ns1", "load"),
    ("job", "ns1", "orchestrator"),  # named only as a parent by the child's events
    ("dataset", "ns2", "shared"),
    ("dataset", "ns1", "a"),  # named by column lineage too
    ("namespace", "ns2", None),
    ("dataset", "ns1", "declared"),  # named by a DatasetEvent only
    ("job", "ns1", "static"),  # a JobEvent's job
]


@pytest.mark.parametrize("kind", KINDS)
def test_hard_delete_equals_a_store_without_those_events(
    make_store: StoreFactory, kind: str
) -> None:
    """delete job|dataset|namespace removes every event naming it; the store then answers as a
    fresh store fed the others, and no read names what was deleted."""
    for target, namespace, name in DELETES:
        store = _written(make_store, kind)
        report = purge_mentioning([store], target, namespace, name, batch_size=1)
        kept = [r for r in RECORDS if not names_target(r.event, target, namespace, name)]
        assert report.removed == {store.name: len(RECORDS) - len(kept)}, target
        after = snapshot(store)
        assert after == fresh(make_store, kind, kept), (target, namespace, name)
        assert not named_in(after, namespace, name), (target, namespace, name)
        again = purge_mentioning([store], target, namespace, name)
        assert again.removed == {store.name: 0}


def _static(kind: str, seconds: float, **body: Any) -> dict[str, Any]:
    """A JobEvent or DatasetEvent (``kind``) at ``seconds`` after BASE_TIME."""
    when = (BASE_TIME + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")
    return {"eventTime": when, "producer": PRODUCER, "schemaURL": SPEC + kind, **body}


@pytest.mark.parametrize("kind", KINDS)
def test_retention_keeps_the_static_lineage_of_what_it_touched(
    make_store: StoreFactory, kind: str
) -> None:
    """Removing an old run of a job that also has a JobEvent, and an old run naming a dataset
    that a DatasetEvent states column lineage for, leaves the JobEvent's edges (and their
    first times: asOf) and the DatasetEvent's column edges as a fresh store of the remaining
    events has them (the engine re-derives the touched jobs and datasets from their static
    events too)."""
    cols = {"columnLineage": column_lineage({"c": [("s", "in", "x")]})}
    events = [
        _static(
            "JobEvent",
            20 * DAY,
            job={"namespace": "s", "name": "declared", "facets": {}},
            inputs=[{"namespace": "s", "name": "in", "facets": {}}],
            outputs=[{"namespace": "s", "name": "out", "facets": {}}],
        ),
        run_event(job="declared", namespace="s", inputs=[("s", "old_in")], seconds=1),
        _static(
            "DatasetEvent", 20 * DAY + 1, dataset={"namespace": "s", "name": "out", "facets": cols}
        ),
        run_event(job="other", namespace="s", outputs=[("s", "out")], seconds=2),
        run_event(
            job="reader",
            namespace="s",
            inputs=[("s", "out")],
            outputs=[("s", "end")],
            seconds=20 * DAY + 2,
        ),
        run_event(job="declared", namespace="s", outputs=[("s", "out")], seconds=20 * DAY + 3),
    ]
    written = [validate_event(e) for e in events]
    nodes = [
        "job:s:declared",
        "job:s:reader",
        "dataset:s:in",
        "dataset:s:out",
        "dataset:s:end",
        "dataset:s:old_in",
    ]
    times = [BASE_TIME + timedelta(days=20, seconds=s) for s in (-1, 0.5, 1.5, 2.5, 10)]

    def answers(store: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for node in nodes:
            graph = store.lineage(node, depth=5)
            out[node] = sorted(
                (n.id, sorted((e.origin, e.destination) for e in n.out_edges))
                for n in graph.nodes.values()
            )
            for at in times:
                out[f"asof {at} {node}"] = as_of_answer(store, node, at)
        cols = store.column_lineage("dataset:s:out", depth=5, with_downstream=True)
        out["columns"] = sorted((o.id, i.id, info) for (o, i), info in cols.edges.items())
        # each job edge's least event time and declaring time (the backend's edge rows)
        jobs = [row.key for row in store.backend.nodes("JOB")]
        out["firstSeen"] = sorted(
            (e.job, e.io, e.dataset, e.first_seen, e.declared)
            for io in ("in", "out")
            for e in store.backend.edges("JOB", jobs, io)
        )
        return out

    store = make_store(kind)
    store.write_batch(written)
    purge_older_than([store], timedelta(days=90), now=NOW)
    after = answers(store)
    assert after == answers_of_fresh(make_store, kind, written, answers)
    declared = dict(after["job:s:declared"])  # node id -> its out edges
    assert declared["dataset:s:in"] == [("dataset:s:in", "job:s:declared")]
    assert after["columns"], "the DatasetEvent's column edge"


def answers_of_fresh(
    make_store: StoreFactory, kind: str, written: list[LineageRecord], answers: Any
) -> Any:
    """``answers`` of a fresh store of ``kind`` fed the events retention keeps."""
    store = make_store(kind)
    store.write_batch([r for r in written if r.event_time >= CUTOFF])
    return answers(store)


def test_deleting_a_job_unlinks_the_jobs_around_it(make_store: StoreFactory) -> None:
    """Marquez #1271/#1736/#3085: after deleting the middle job, its input and output datasets no
    longer connect the jobs on either side (in every store)."""
    chain = [
        run_event(job="up", namespace="m", outputs=[("m", "d1")]),
        run_event(job="mid", namespace="m", inputs=[("m", "d1")], outputs=[("m", "d2")], seconds=1),
        run_event(job="down", namespace="m", inputs=[("m", "d2")], seconds=2),
    ]
    records = [validate_event(e) for e in chain]
    for kind in KINDS:
        store = make_store(kind)
        store.write_batch(records)
        assert "job:m:down" in store.lineage("job:m:up", direction="downstream", depth=5).nodes
        purge_mentioning([store], "job", "m", "mid")
        down = store.lineage("job:m:up", direction="downstream", depth=5)
        assert set(down.nodes) == {"job:m:up", "dataset:m:d1"}, kind
        up = store.lineage("job:m:down", direction="upstream", depth=5)
        assert set(up.nodes) == {"job:m:down", "dataset:m:d2"}, kind
        assert ("m", "mid") not in {(j.namespace, j.name) for j in store.jobs(limit=100)}


def test_stores_agree_after_retention_and_deletes(make_store: StoreFactory) -> None:
    """The same events, the same purges: every store gives the same lineage, column lineage,
    runs and lists."""
    answers: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        store = _written(make_store, kind)
        purge_older_than([store], timedelta(days=90), now=NOW)
        purge_mentioning([store], "dataset", "ns1", "a")
        answers[kind] = snapshot(store)

    # (The old stores differed here in what only events older than retention said: the
    # document store's lineage nodes carried no latestRun, the graph listed a parent run known
    # only from its child's parent facet. The engine answers alike over every backend.)
    reference = answers["memory"]
    for kind, got in answers.items():
        differ = [k for k in reference if got.get(k) != reference[k]]
        assert got.keys() == reference.keys() and not differ, (kind, differ[:5])


@pytest.mark.parametrize("writer", ["same engine", "another engine"])
@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres", "document"])
def test_retention_while_the_collector_writes(
    make_store: StoreFactory, kind: str, writer: str
) -> None:
    """Batches written during a retention all land, and the end state is what the events
    present derive. The same engine's writes wait for each deletion batch (its write lock);
    another engine's over the same database (another collector of a fleet) interleave with
    the batches, and the deletion appends what they wrote meanwhile again."""
    store = _written(make_store, kind)
    writing = store if writer == "same engine" else EngineStore(store.backend)
    extra = [
        validate_event(
            run_event(
                job=f"live{i}",
                namespace="ns1",
                inputs=[("ns1", "b")],
                outputs=[("ns1", f"live{i}")],
                seconds=(30 if i % 2 else 1) * DAY + i,  # half of them old already
            )
        )
        for i in range(60)
    ]
    done = threading.Event()

    def write() -> None:
        for start in range(0, len(extra), 5):
            writing.write_batch(extra[start : start + 5])
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    purge_older_than([store], timedelta(days=90), now=NOW, batch_size=1)
    writer.join(30)
    assert done.is_set()
    purge_older_than([store], timedelta(days=90), now=NOW)  # the old ones written late
    kept = [r for r in (*RECORDS, *extra) if r.event_time >= CUTOFF]
    assert snapshot(store) == fresh(make_store, kind, kept)


class _WrittenBeforeReplace(MemoryBackend):
    """The memory backend, where another engine (another collector of a fleet, which the
    deleting engine's lock does not hold back) writes ``late`` right before the first
    ``replace`` of job ``load``'s rows: between the deletion's reads and its replace, where
    their rows would be replaced away."""

    def __init__(self, late: list[LineageRecord]) -> None:
        super().__init__()
        self.late = late

    def replace(self, touched: Touched, rows: Rows) -> None:
        if self.late and ("ns1", "load") in touched.jobs:
            EngineStore(self).write_batch(self.late)
            self.late = []
        super().replace(touched, rows)


def test_retention_keeps_what_another_engine_wrote_during_a_batch(
    make_store: StoreFactory,
) -> None:
    """A deletion appends again the rows of the events another engine wrote over the same
    database while it ran (the lock holds back only its own engine's writers)."""
    late = [
        validate_event(
            run_event(
                job="load",  # a job the old events name: its rows are replaced
                namespace="ns1",
                inputs=[("ns1", "a")],
                outputs=[("ns1", f"late{i}")],
                seconds=30 * DAY + i,
            )
        )
        for i in range(5)
    ]
    backend = _WrittenBeforeReplace(list(late))
    store = EngineStore(backend)
    store.open()
    try:
        store.write_batch(RECORDS)
        purge_older_than([store], timedelta(days=90), now=NOW, batch_size=1)
        assert not backend.late  # written during a deletion
        kept = [r for r in (*RECORDS, *late) if r.event_time >= CUTOFF]
        assert snapshot(store) == fresh(make_store, "memory", kept)
    finally:
        store.close()


def test_document_retention_reads_each_old_event_a_bounded_number_of_times(
    mongo: MongoTarget,
) -> None:
    """Retention asks the store again from where its last batch stopped, once a batch. The
    document backend answers each ask with a time window of about a batch, not the rest of the
    range up to the cutoff, which SecantusDB materialises whole (hinted or not) before it
    returns the first document: quadratic, and 200,000 events did not finish in 20 minutes.
    Seen on the server: its profiler records every find the purge sent, and each find's time
    range (``event_time``, microseconds) is counted against the events it spans."""
    database = f"lineage_profile_{uid()}"
    backend = DocumentBackend(
        ConnectionConfig(uri=mongo.uri, database=database, timeout_ms=5000),
        collection_name="t",
    )
    store = EngineStore(backend)
    store.open()
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    try:
        events = [
            run_event(
                job=f"j{i % 7}", namespace="ns1", outputs=[("ns1", f"d{i % 5}")], seconds=60 * i
            )
            for i in range(300)
        ]
        store.write_batch([validate_event(e) for e in events])
        times = [BASE_TIME + timedelta(minutes=i) for i in range(300)]
        client[database].command("profile", 2)
        try:
            report = purge_older_than(
                [store], timedelta(days=1), now=times[200] + timedelta(days=1), batch_size=10
            )
        finally:
            client[database].command("profile", 0)
        assert report.removed[store.name] == 200
        assert [e.event_time for e in store.iter_raw_events()] == times[200:]
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        micros = [(t - epoch) // timedelta(microseconds=1) for t in times]

        def spanned(times_filter: dict[str, int] | int) -> int:
            if isinstance(times_filter, int):  # one instant (ids after a position in it)
                times_filter = {"$gte": times_filter, "$lte": times_filter}
            low = times_filter.get("$gte", micros[0])
            return sum(
                low <= t
                and ("$lt" not in times_filter or t < times_filter["$lt"])
                and ("$lte" not in times_filter or t <= times_filter["$lte"])
                for t in micros
            )

        reads = [
            entry["command"]
            for entry in client[database]["system.profile"].find()
            if entry.get("command", {}).get("find") == "t_events"
            and "event_time" in entry["command"].get("filter", {})
        ]
        assert len(reads) >= 20  # a read (at least) for each of the 20 batches
        # Each of the 200 old events is read a few times at most (a window that outgrew its
        # batch is read again by the next); the range to the cutoff every batch spans 2,100.
        assert sum(spanned(r["filter"]["event_time"]) for r in reads) <= 4 * 200
    finally:
        client.drop_database(database)
        client.close()
        store.close()


def test_periodic_task_and_age_parsing(make_store: StoreFactory) -> None:
    store = _written(make_store, "sqlite")
    task = RetentionTask([store], timedelta(days=36500), interval_s=3600)
    assert task.run_once() is not None  # nothing is a century old
    assert len(list(store.iter_raw_events())) == len(RECORDS)
    assert parse_age("90d") == timedelta(days=90)
    assert parse_age("1.5h") == timedelta(minutes=90)
    for bad in ("90", "0d", "-1d", "3y", ""):
        with pytest.raises(ConfigError, match="--older-than"):
            parse_age(bad)


def test_periodic_retention_from_configuration(tmp_path: Path) -> None:
    """collector.retention_older_than turns the task of `lineage-collector run` on; it removes
    old events at its interval; a bad age is a ConfigError naming the key."""
    from lineage_sdk.collector.cli import _retention_task
    from lineage_sdk.collector.manager import LineageManager
    from lineage_sdk.collector.settings import CollectorConfig
    from lineage_sdk.config import load_config

    db = tmp_path / "periodic.db"
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    overrides = {"store.backend": "sql", "store.sql.url": f"sqlite:///{db}"}
    off = load_config(path=empty, environ={}, overrides=overrides)
    assert _retention_task([], off.section("collector", CollectorConfig)) is None
    config = load_config(
        path=empty,
        environ={},
        overrides={
            **overrides,
            "collector.retention_older_than": "1d",
            "collector.retention_interval_ms": "50",
        },
    )
    stores = LineageManager(config).build()
    stores[0].open()
    try:
        stores[0].write_batch(RECORDS)
        task = _retention_task(stores, config.section("collector", CollectorConfig))
        try:
            for _ in range(200):
                if not list(stores[0].iter_raw_events()):
                    break
                threading.Event().wait(0.05)
        finally:
            task.stop()
        assert task.passes >= 1
        assert list(stores[0].iter_raw_events()) == []
    finally:
        stores[0].close()
    bad = load_config(
        path=empty,
        environ={},
        overrides={"collector.retention_older_than": "soon"},
    )
    with pytest.raises(ConfigError, match=r"collector\.retention_older_than"):
        bad.section("collector", CollectorConfig)


def test_cli_retention_and_delete(tmp_path: Path) -> None:
    """Thin commands: a dry run, a retention, a delete, and clear usage errors (exit 2)."""
    from lineage_sdk.collector.manager import LineageManager
    from lineage_sdk.config import load_config

    db = tmp_path / "cli.db"
    config = tmp_path / "lineage.toml"
    config.write_text(
        f'[lineage.store]\nbackend = "sql"\n\n[lineage.store.sql]\nurl = "sqlite:///{db}"\n'
    )
    # the store the commands open: what the configuration builds (entry point ``sql``)
    store: Any
    (store,) = LineageManager(load_config(path=config)).build()
    store.open()
    store.write_batch(RECORDS)
    store.close()
    runner = CliRunner()
    base = ["--config", str(config)]
    # Far-future events are never "old": everything in the corpus is older than 1 day now.
    result = runner.invoke(app, ["retention", *base, "--older-than", "1d", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert f"would remove {len(RECORDS)} event(s) from sql" in result.output
    result = runner.invoke(app, ["delete", "job", "ns1", "load", *base])
    assert result.exit_code == 0, result.output
    assert "removed 2 event(s) from sql" in result.output
    result = runner.invoke(app, ["delete", "namespace", "ns2", *base])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["retention", *base, "--older-than", "1d"])
    assert result.exit_code == 0, result.output
    store.open()
    try:
        assert list(store.iter_raw_events()) == []
        assert store.jobs(limit=10) == [] and store.datasets(limit=10) == []
    finally:
        store.close()
    bad = runner.invoke(app, ["retention", *base, "--older-than", "soon"])
    assert bad.exit_code == 2
    assert "--older-than" in bad.output and "Traceback" not in bad.output
    bad = runner.invoke(app, ["delete", "job", "ns1", *base])
    assert bad.exit_code == 2
    assert "name" in bad.output.lower()
