"""Document and graph store throughput, and graph lineage latency over a 100,000-event graph.

    python bench/bench_stores.py [--events 5000] [--graph-events 100000] [--skip-collector]

Measures, in one run, against the servers this machine can run (SecantusDB for MongoDB, FalkorDB
for the graph; see tests/servers.py):

1. raw pika consume+ack (prefetch 100) of the same messages, as the reference;
2. collector throughput from a pre-filled queue into ``document``, ``graph`` and the composite
   ``document + graph`` (issue 5 target: composite >= 3,000 events/s);
3. direct ``write_batch`` throughput (batches of 200) into each store, without the broker;
4. a graph of ``--graph-events`` events (long pipelines, so depth 10 is real), then upstream
   lineage latency at depths 1, 5 and 10 (target: depth 10 < 100 ms), through FalkorDB's native
   protocol and through the neo4j driver over Bolt.

The graph store writes to FalkorDB through tests/servers.FalkorDBRespRunner: FalkorDB's Bolt
endpoint crashes on parameters past ~4 KB (see docs/stores.md). Takes about 2 minutes; take
figures only on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # servers.py
sys.path.insert(0, str(HERE))  # bench_collector

import orjson  # noqa: E402
from bench_collector import URL, make_events, prefill, raw_pika  # noqa: E402
from servers import FalkorDBRespRunner, falkordb_server, secantus_server  # noqa: E402

from lineage_sdk.collector.records import build_record  # noqa: E402
from lineage_sdk.collector.store import node_id  # noqa: E402
from lineage_sdk.collector.stores.document import DocumentLineageStore  # noqa: E402
from lineage_sdk.collector.stores.graph import GraphLineageStore  # noqa: E402
from lineage_sdk.config.schema import ConnectionConfig, LineageConfig  # noqa: E402

PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/bench"


def collector_rate(
    bodies: list[bytes], backends: list[str], mongo_uri: str, redis_port: int
) -> float:
    import threading

    import pika

    from lineage_sdk.collector.consumer import LineageCollector
    from lineage_sdk.collector.manager import LineageManager
    from lineage_sdk.collector.topology import Topology

    topic = f"bench.lineage.{uuid.uuid4().hex[:8]}"
    graph_name = f"bench_{uuid.uuid4().hex[:8]}"
    store: dict[str, Any] = {
        "backend": backends[0] if len(backends) == 1 else "composite",
        "backends": backends if len(backends) > 1 else [],
        "document": {
            "collection_name": f"bench_{uuid.uuid4().hex[:8]}",
            "document_connection_name": "mongo",
        },
    }
    config = LineageConfig.model_validate(
        {
            "collector_topic": topic,
            "rabbitmq": {"url": URL},
            "store": store,
            "collector": {"retry_delays_ms": [1000]},
            "connections": {"mongo": {"uri": mongo_uri, "database": "bench"}},
        }
    )

    def graph_creator(_cfg: LineageConfig) -> GraphLineageStore:
        return GraphLineageStore(
            runner=FalkorDBRespRunner("127.0.0.1", redis_port, graph_name, timeout_s=60)
        )

    manager = LineageManager(config, creators={"graph": graph_creator})
    topo = Topology.from_config(config)
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    ch = conn.channel()
    try:
        topo.declare(ch)
        prefill(topic, topo.queue, bodies)
        collector = LineageCollector(config, manager=manager)
        collector.manager.open()
        thread = threading.Thread(target=collector.run, daemon=True)
        start = time.perf_counter()
        thread.start()
        stored = collector.metrics.events_stored
        last = collector.manager.stores[-1].name
        while stored.labels(last)._value.get() < len(bodies):
            if not thread.is_alive():
                raise RuntimeError("collector stopped")
            time.sleep(0.002)
        elapsed = time.perf_counter() - start
        collector.stop()
        thread.join(30)
        for s in collector.manager.stores:
            if isinstance(s, DocumentLineageStore):
                s.collection.drop()
            if isinstance(s, GraphLineageStore) and isinstance(s.runner, FalkorDBRespRunner):
                s.runner.drop()
        collector.manager.close()
        return len(bodies) / elapsed
    finally:
        topo.delete(ch)
        ch.exchange_delete(topic)
        conn.close()


def direct_rate(store: Any, records: list[Any], batch: int = 200) -> float:
    start = time.perf_counter()
    for i in range(0, len(records), batch):
        store.write_batch(records[i : i + batch])
    return len(records) / (time.perf_counter() - start)


def pipeline_events(total: int, pipelines: int = 50, stages: int = 20) -> list[dict[str, Any]]:
    """``pipelines`` chains of ``stages`` jobs (d0 -> job1 -> d1 -> ... -> job20 -> d20), each job
    also reading a shared reference table; START/COMPLETE pairs of runs until ``total`` events."""
    events: list[dict[str, Any]] = []
    n = 0
    while len(events) < total:
        p, s = (n // stages) % pipelines, n % stages + 1
        run_id = str(uuid.UUID(int=n + 1, version=4))
        for etype, sec in (("START", 0), ("COMPLETE", 1)):
            t = n * 2 + sec
            events.append(
                {
                    "eventType": etype,
                    "eventTime": f"2025-01-{1 + (t // 86400) % 28:02d}T{(t // 3600) % 24:02d}:{(t // 60) % 60:02d}:{t % 60:02d}Z",
                    "producer": PRODUCER,
                    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                    "run": {"runId": run_id, "facets": {}},
                    "job": {"namespace": "bench", "name": f"p{p}.stage{s}", "facets": {}},
                    "inputs": [
                        {"namespace": "warehouse", "name": f"p{p}.d{s - 1}", "facets": {}},
                        {"namespace": "warehouse", "name": "ref.calendar", "facets": {}},
                    ],
                    "outputs": [{"namespace": "warehouse", "name": f"p{p}.d{s}", "facets": {}}],
                }
            )
        n += 1
    return events[:total]


def latency_ms(
    store: GraphLineageStore, node: str, depth: int, repeat: int = 15
) -> tuple[float, int]:
    store.lineage(node, direction="upstream", depth=depth)  # warm
    times, size = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        graph = store.lineage(node, direction="upstream", depth=depth)
        times.append((time.perf_counter() - start) * 1000)
        size = len(graph.nodes)
    return statistics.median(times), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--events", type=int, default=5000, help="events per throughput measurement"
    )
    parser.add_argument("--graph-events", type=int, default=100_000)
    parser.add_argument(
        "--skip-collector", action="store_true", help="no broker: direct writes only"
    )
    args = parser.parse_args()
    bodies = make_events(args.events)
    records = [build_record(orjson.loads(b)) for b in bodies]
    print("servers: SecantusDB (MongoDB wire) and FalkorDB (graph), started here on loopback")
    with secantus_server() as mongo, falkordb_server(persistent=False) as falkor:
        if not args.skip_collector:
            raw = raw_pika(bodies)
            print(f"raw pika consume+ack (prefetch 100):       {raw:8.0f} msg/s")
            for label, backends in (
                ("document", ["document"]),
                ("graph", ["graph"]),
                ("composite document+graph", ["document", "graph"]),
            ):
                rate = collector_rate(bodies, backends, mongo.uri, falkor.redis_port)
                target = "  (target >= 3000 events/s)" if len(backends) > 1 else ""
                print(
                    f"collector -> {label:28s} {rate:8.0f} events/s = {rate / raw:.2f}x raw{target}"
                )
        doc = DocumentLineageStore(ConnectionConfig(uri=mongo.uri, database="bench"), "direct")
        doc.open()
        print(
            f"direct write_batch -> document:            {direct_rate(doc, records):8.0f} events/s"
        )
        doc.collection.drop()
        doc.close()
        graph = GraphLineageStore(
            runner=FalkorDBRespRunner("127.0.0.1", falkor.redis_port, "direct", timeout_s=60)
        )
        graph.open()
        print(
            f"direct write_batch -> graph:               {direct_rate(graph, records):8.0f} events/s"
        )
        graph.runner.run("MATCH (n) DETACH DELETE n")

        graph.close()

        # The big graph goes into "falkordb", the graph FalkorDB's Bolt endpoint serves, so the
        # same data is queried through the native protocol and through the neo4j driver.
        big = [build_record(e) for e in pipeline_events(args.graph_events)]
        native = GraphLineageStore(
            runner=FalkorDBRespRunner("127.0.0.1", falkor.redis_port, "falkordb", timeout_s=120)
        )
        native.open()
        start = time.perf_counter()
        rate = direct_rate(native, big, batch=500)
        print(
            f"built a graph of {len(big)} events in {time.perf_counter() - start:.1f} s ({rate:.0f} events/s)"
        )
        counts = native.runner.run("MATCH (n) RETURN labels(n)[0] AS l, count(n) AS c")
        print(
            "  nodes: "
            + ", ".join(f"{r['l']}={r['c']}" for r in sorted(counts, key=lambda r: r["l"]))
        )
        root = node_id("DATASET", "warehouse", "p7.d20")
        bolt = GraphLineageStore(ConnectionConfig(uri=falkor.bolt_uri, timeout_ms=10_000))
        bolt.open()
        for label, store in (("native protocol", native), ("neo4j driver, Bolt", bolt)):
            for depth in (1, 5, 10):
                ms, size = latency_ms(store, root, depth)
                target = "  (target < 100 ms)" if depth == 10 else ""
                print(
                    f"upstream lineage depth {depth:2d} ({label}): {ms:7.2f} ms median, {size} nodes{target}"
                )
        bolt.close()
        native.close()


if __name__ == "__main__":
    main()
