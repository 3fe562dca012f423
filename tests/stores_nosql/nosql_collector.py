"""A collector fed from the real RabbitMQ, writing to the composite document + graph + sql store.

Used by ``test_collector_*.py``. Everything is real: the shared broker (with a unique exchange and
queues, deleted afterwards), the SDK's RabbitMQ exporter as the publisher, the MongoDB-wire and
graph servers of ``tests/servers.py`` and SQLite in a temporary directory. Each of the three
stores is the engine over its backend (``EngineStore(DocumentBackend | GraphBackend |
SqlBackend)``), built from the rig's configuration by creators injected with
``LineageManager(creators=...)``: the graph backend reaches FalkorDB through
:class:`servers.FalkorDBRespRunner` (FalkorDB's Bolt endpoint cannot carry real events, see
docs/stores.md); with ``LINEAGE_TEST_NEO4J_URI`` set, the backend's own neo4j driver is used.
"""

from __future__ import annotations

import collections
import contextlib
import json
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pika

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "collector"))  # collector_helpers

from collector_helpers import RABBIT_URL, delete_queues, running, wait_until
from servers import GraphTarget

from lineage_exporters.rabbitmq import RabbitMQExporter
from lineage_exporters.rabbitmq.config import RabbitMQConfig
from lineage_sdk.collector.consumer import LineageCollector
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.graph_runner import GraphRunner
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.collector.topology import Topology
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.models import event_id as model_event_id
from lineage_sdk.sdk.export import EncodedEvent

__all__ = [
    "BACKENDS",
    "CollectorRig",
    "collector_rig",
    "expected_graph",
    "graph_counts",
    "graph_runner",
    "graph_snapshot",
    "parked",
    "queue_depths",
    "running",
    "sample_value",
    "store_id",
    "stored_ids",
    "stored_json",
    "wait_until",
]

BACKENDS = ("document", "graph", "sql")
DATABASE = "lineage_tests"


@dataclass
class CollectorRig:
    """One collector configuration (unique exchange, collection, graph and SQLite file) and
    readers on what it wrote, each on connections of its own."""

    config: LineageConfig
    mongo_uri: str
    graph: GraphTarget
    graph_name: str
    tmp_path: Path
    mongo_timeout_ms: int = 5000
    _readers: list[EngineStore] = field(default_factory=list)
    _waiters: tuple[EngineStore, EngineStore] | None = None

    @property
    def topic(self) -> str:
        return self.config.collector_topic

    @property
    def topology(self) -> Topology:
        return Topology.from_config(self.config)

    def manager(self) -> LineageManager:
        """A manager building the configured stores, each the engine over its backend: the
        document one on this rig's server and collections, the graph one on this rig's graph,
        the sql one on ``[lineage.store.sql] url``."""
        return LineageManager(
            self.config,
            creators={
                "document": lambda config: self._document(),
                "graph": lambda config: self._graph(),
                "sql": lambda config: EngineStore(SqlBackend(config.section("store.sql").url)),
            },
        )

    def _document(self) -> EngineStore:
        connection = ConnectionConfig(
            uri=self.mongo_uri, database=DATABASE, timeout_ms=self.mongo_timeout_ms
        )
        name = self.config.section("store.document").collection_name
        return EngineStore(DocumentBackend(connection, collection_name=name))

    def _graph(self) -> EngineStore:
        runner = self.graph.runner(self.graph_name)
        if runner is not None:
            return EngineStore(GraphBackend(runner=runner))
        return EngineStore(GraphBackend(_graph_connection(self.graph)))

    # -- readers: stores of their own on what the collector wrote

    def _reader(self, store: EngineStore) -> EngineStore:
        store.open()
        self._readers.append(store)
        return store

    def document(self) -> EngineStore:
        return self._reader(self._document())

    def graph_store(self) -> EngineStore:
        return self._reader(self._graph())

    def sql(self) -> EngineStore:
        return self._reader(EngineStore(SqlBackend(self.config.section("store.sql").url)))

    def readers(self) -> dict[str, Any]:
        return {"document": self.document(), "graph": self.graph_store(), "sql": self.sql()}

    # -- publishing

    def declare(self) -> None:
        """The collector's topology, so that nothing published before it starts is unroutable."""
        conn = pika.BlockingConnection(pika.URLParameters(RABBIT_URL))
        try:
            self.topology.declare(conn.channel())
        finally:
            conn.close()

    def exporter(self, *, events_per_message: int = 1) -> RabbitMQExporter:
        """The SDK's RabbitMQ exporter, publishing to this rig's exchange."""
        settings = RabbitMQConfig(
            url=RABBIT_URL,
            spool_dir=str(self.tmp_path / f"spool-{uuid.uuid4().hex[:6]}"),
            reconnect_initial_ms=100,
            reconnect_max_ms=1000,
            events_per_message=events_per_message,
        )
        return RabbitMQExporter(settings, exchange=self.topic)

    def publish(self, events: Sequence[EncodedEvent], *, events_per_message: int = 1) -> None:
        """Publish through the SDK's exporter and wait for the broker's confirms."""
        exporter = self.exporter(events_per_message=events_per_message)
        try:
            for start in range(0, len(events), 200):
                exporter.export(events[start : start + 200])
            assert exporter.force_flush(30), "the exporter did not deliver in time"
            stats = exporter.stats()
            assert stats.dropped == 0 and stats.unroutable == 0, stats
        finally:
            exporter.shutdown(10)

    # -- checks

    def sql_ids(self, sql: EngineStore) -> Counter[str]:
        return stored_ids(sql)

    def document_ids(self, document: EngineStore) -> Counter[str]:
        return stored_ids(document)

    def wait_stored(
        self,
        sql: EngineStore,
        count: int,
        timeout: float = 45.0,
        *,
        graph_events: int | None = None,
    ) -> None:
        """Until every store of the composite holds ``count`` events (the graph ``graph_events``
        where it is known to hold fewer, e.g. after a crash). The composite writes its stores
        concurrently, so one store being complete says nothing about the others."""
        if self._waiters is None:
            self._waiters = (self.document(), self.graph_store())
        document, graph = self._waiters
        graph_wanted = count if graph_events is None else graph_events

        def stored() -> bool:
            try:
                return (
                    sql.count_events() >= count
                    and document.count_events() >= count
                    and graph.count_events() >= graph_wanted
                )
            except Exception:  # a server restarting: ask again
                return False

        wait_until(stored, timeout, interval=0.1, message=f"{count} events in every store")

    def close(self) -> None:
        for store in self._readers:
            with contextlib.suppress(Exception):
                store.close()
        self._readers.clear()


def _graph_connection(target: GraphTarget) -> ConnectionConfig:
    return ConnectionConfig(
        uri=target.uri,
        username=target.username,
        password=target.password,
        database=target.database,
        timeout_ms=5000,
    )


@contextlib.contextmanager
def collector_rig(
    mongo_uri: str,
    graph: GraphTarget,
    tmp_path: Path,
    *,
    mongo_timeout_ms: int = 5000,
    collector: dict[str, Any] | None = None,
    sql_url: str | None = None,
) -> Iterator[CollectorRig]:
    """A rig on fresh names; the broker objects, collection, graph and SQLite file go afterwards.
    ``sql_url`` replaces the SQLite file (its owner creates and drops that database)."""
    suffix = uuid.uuid4().hex[:10]
    topic = f"test.lineage.nosql.{suffix}"
    connections: dict[str, Any] = {
        "mongo": {"uri": mongo_uri, "database": DATABASE, "timeout_ms": mongo_timeout_ms},
    }
    if graph.kind != "falkordb":
        connections["graph"] = _graph_connection(graph).model_dump()
    collector_cfg: dict[str, Any] = {
        "retry_delays_ms": [100, 200],
        "max_attempts": 10,
        "prefetch": 200,
        "batch_size": 50,
        "batch_timeout_ms": 20,
    }
    collector_cfg.update(collector or {})
    config = LineageConfig.model_validate(
        {
            "collector_topic": topic,
            "rabbitmq": {"url": RABBIT_URL, "reconnect_initial_ms": 100, "reconnect_max_ms": 1000},
            "store": {
                "backend": "composite",
                "backends": list(BACKENDS),
                "document": {"collection_name": f"c_{suffix}", "document_connection_name": "mongo"},
                "graph": {"graph_connection_name": "graph"},
                "sql": {"url": sql_url or f"sqlite:///{tmp_path}/lineage-{suffix}.db"},
            },
            "connections": connections,
            "collector": collector_cfg,
        }
    )
    rig = CollectorRig(
        config=config,
        mongo_uri=mongo_uri,
        graph=graph,
        graph_name=f"t_{suffix}",
        tmp_path=tmp_path,
        mongo_timeout_ms=mongo_timeout_ms,
    )
    rig.declare()
    try:
        yield rig
    finally:
        rig.close()
        _cleanup(rig)


def _cleanup(rig: CollectorRig) -> None:
    with contextlib.suppress(Exception):
        conn = pika.BlockingConnection(pika.URLParameters(RABBIT_URL))
        try:
            ch = conn.channel()
            delete_queues(ch, rig.topology)
            ch.exchange_delete(rig.topic)
        finally:
            conn.close()
    with contextlib.suppress(Exception):
        document = rig.document().backend
        assert isinstance(document, DocumentBackend)
        document.drop()
    with contextlib.suppress(Exception):
        runner = graph_runner(rig.graph_store())
        drop = getattr(runner, "drop", None)
        if drop is not None:
            drop()
        else:  # a real Neo4j: the (throwaway) database is wiped, as in conftest.py
            runner.run("MATCH (n) DETACH DELETE n")
    rig.close()


def stored_ids(store: EngineStore) -> Counter[str]:
    """How many times each event id is stored: every event row the backend holds."""
    return Counter(row.event_id for row in store.backend.events())


def stored_json(store: EngineStore) -> dict[str, str]:
    """Each stored event's JSON text, by event id (what was received, to compare with what was
    sent)."""
    return {row.event_id: row.json for row in store.backend.events()}


def graph_runner(store: EngineStore) -> GraphRunner:
    backend = store.backend
    assert isinstance(backend, GraphBackend)
    return backend.runner


def parked(collector: LineageCollector) -> float:
    """Messages or events the collector sent to the dead-letter queue, whatever the reason."""
    return sum(
        s.value
        for metric in collector.metrics.dead_lettered.collect()
        for s in metric.samples
        if s.name.endswith("_total")
    )


def store_id(payload: bytes) -> str:
    """The id the stores key an event on (the collector's definition, a content hash of the
    event), computed from the bytes that were published."""
    return model_event_id(orjson.loads(payload))


def queue_depths(rig: CollectorRig) -> dict[str, int]:
    """Messages waiting in the main, retry and dead-letter queues."""
    topo = rig.topology
    names = [topo.queue, topo.dead_letter_queue, *(r.name for r in topo.retry_queues)]
    conn = pika.BlockingConnection(pika.URLParameters(RABBIT_URL))
    try:
        ch = conn.channel()
        return {n: int(ch.queue_declare(n, passive=True).method.message_count) for n in names}
    finally:
        conn.close()


GRAPH_COUNTS = {
    "Job": "MATCH (n:Job) RETURN count(n) AS c",
    "Dataset": "MATCH (n:Dataset) RETURN count(n) AS c",
    "Run": "MATCH (n:Run) RETURN count(n) AS c",
    "Event": "MATCH (n:Event) RETURN count(n) AS c",
    "Mention": "MATCH (n:Mention) RETURN count(n) AS c",
    "ColumnEdge": "MATCH (n:ColumnEdge) RETURN count(n) AS c",
    "READS": "MATCH ()-[r:READS]->() RETURN count(r) AS c",
    "WRITES": "MATCH ()-[r:WRITES]->() RETURN count(r) AS c",
}


def graph_counts(store: EngineStore) -> dict[str, int]:
    """Vertices per label and relationships per type of the graph backend."""
    runner = graph_runner(store)
    return {name: int(runner.run(q)[0]["c"]) for name, q in GRAPH_COUNTS.items()}


def expected_graph(events: Sequence[dict[str, Any]]) -> dict[str, int]:
    """The graph backend's model computed independently from run events (the model in
    lineage_sdk/collector/stores/graph_backend.py): a Job per job and parent job, a Dataset per
    input and output, a Run per (run, job), an Event per event, a Mention per (run, dataset,
    role) and (job, parent job), a statement Mention per (run, its job) for START and end
    events and per (event, dataset it names) and (event, its job) for others, a ColumnEdge per
    (output field, input field, job), a READS or WRITES per (job, dataset)."""
    jobs: set[Any] = set()
    datasets: set[Any] = set()
    runs: set[Any] = set()
    mentions: set[Any] = set()
    columns: set[Any] = set()
    rels: dict[str, set[Any]] = collections.defaultdict(set)
    for e in events:
        job = (e["job"]["namespace"], e["job"]["name"])
        run = e["run"]["runId"]
        event_id = store_id(orjson.dumps(e))
        named = [(ds["namespace"], ds["name"]) for side in ("inputs", "outputs") for ds in e[side]]
        # A run's START and end state of a dataset in its input and output Mentions and of its
        # job in a Mention of (run, job); any other event apart, in Mentions of its own.
        if e.get("eventType") in ("START", "COMPLETE", "FAIL", "ABORT"):
            mentions.add((run, "JOB", job, "stated"))
        else:
            mentions.update((event_id, "DATASET", key, "stated") for key in named)
            mentions.add((event_id, "JOB", job, "stated"))
        jobs.add(job)
        runs.add((run, job))
        parent = e["run"].get("facets", {}).get("parent")
        if parent:
            parent_job = (parent["job"]["namespace"], parent["job"]["name"])
            jobs.add(parent_job)
            mentions.add((job, "JOB", parent_job, "parent"))  # one a (child, parent)
        for side, rel, role in (("inputs", "READS", "input"), ("outputs", "WRITES", "output")):
            for ds in e[side]:
                key = (ds["namespace"], ds["name"])
                datasets.add(key)
                rels[rel].add((job, key))
                mentions.add((run, "DATASET", key, role))
                cl = ds.get("facets", {}).get("columnLineage")
                for out, spec in (cl or {}).get("fields", {}).items():
                    for src in spec["inputFields"]:
                        source = (src["namespace"], src["name"], src["field"])
                        columns.add(((*key, out), source, job))
    return {
        "Job": len(jobs),
        "Dataset": len(datasets),
        "Run": len(runs),
        "Event": len({store_id(orjson.dumps(e)) for e in events}),
        "Mention": len(mentions),
        "ColumnEdge": len(columns),
        "READS": len(rels["READS"]),
        "WRITES": len(rels["WRITES"]),
    }


def graph_snapshot(store: EngineStore) -> tuple[list[Any], list[Any]]:
    """The whole graph as comparable data: every node's labels and properties, every relationship
    with its ends (no internal ids), sorted."""
    runner = graph_runner(store)
    nodes = runner.run("MATCH (n) RETURN labels(n) AS labels, properties(n) AS props")
    rels = runner.run(
        "MATCH (a)-[r]->(b) RETURN labels(a) AS a, properties(a) AS ap, type(r) AS t,"
        " labels(b) AS b, properties(b) AS bp"
    )

    def key(props: Any) -> str:
        # A set (the union rule: a node's holds, a statement's entries) is a list in the order
        # its writes came: compared as a set.
        sets = {name: sorted(props[name]) for name in ("holds", "detail") if props.get(name)}
        return json.dumps(dict(props) | sets, sort_keys=True)

    return (
        sorted((sorted(n["labels"]), key(n["props"])) for n in nodes),
        sorted((sorted(r["a"]), key(r["ap"]), r["t"], sorted(r["b"]), key(r["bp"])) for r in rels),
    )


def wait_settled(
    rig: CollectorRig, collector: LineageCollector, quiet_s: float = 1.5, timeout: float = 60.0
) -> None:
    """Until every queue is empty and the collector has taken no message for ``quiet_s``
    (longer than a retry delay and a batch's wait): every copy of a retried message answered.
    A store holding every event says nothing of copies still on their way through a retry
    queue, and stopping the collector then hands its unacknowledged ones back to the queue."""
    deadline = time.monotonic() + timeout
    last: tuple[float, tuple[int, ...]] | None = None
    since = time.monotonic()
    while time.monotonic() < deadline:
        now = (
            sample_value(collector, "lineage_collector_messages_consumed_total"),
            tuple(queue_depths(rig).values()),
        )
        if now != last:
            last, since = now, time.monotonic()
        elif not any(now[1]) and time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.1)
    raise AssertionError(f"the collector did not settle in {timeout:.0f} s: {last}")


def sample_value(collector: LineageCollector, name: str, **labels: str) -> float:
    """A collector metric's current value (0 when never set)."""
    value = collector.metrics.registry.get_sample_value(name, labels or None)
    return value or 0.0
