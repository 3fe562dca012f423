"""Document and graph store throughput, and lineage latency over a 100,000-event graph.

Every store is the engine (``EngineStore``) over a backend: ``DocumentBackend``,
``GraphBackend`` and ``SqlBackend`` (SQLite), what ``store.type`` ``document``, ``graph`` and
``sql`` open.

    python bench/bench_stores.py [--events 5000] [--graph-events 100000] [--json PATH]
                                 [--skip-collector] [--skip-lineage]

Measures, in one run, against the servers this machine can run (SecantusDB for MongoDB, FalkorDB
for the graph, both started here on loopback; see tests/servers.py):

1. collector throughput from a pre-filled queue into ``document``, ``graph`` and the composite
   ``document + graph`` (issue 5 target: composite >= 3,000 events/s), each set against raw pika
   consume+ack (prefetch 100) of the same messages measured just before it, in the same run;
2. direct ``write_batch`` throughput (batches of 200) into each store, without the broker, with the
   CPU time split between this process (the store's client side) and the server process, and the
   document server's cost without its secondary indexes, to show where the time goes;
3. what the neo4j driver spends packing a batch's parameters (PackStream), its pure-Python codec
   against the Rust one from ``neo4j-rust-ext`` (the ``neo4j`` extra installs it), per event;
4. a graph of ``--graph-events`` events (50 pipelines of 20 stages, so depth 10 is real) built in
   the graph store and in the sql store (SQLite), then upstream lineage latency at depths 1, 5 and
   10 (target: depth 10 < 100 ms) through FalkorDB's native protocol, through the neo4j driver
   over Bolt, and from the sql store for comparison.

The graph store writes to FalkorDB through tests/servers.FalkorDBRespRunner: FalkorDB's Bolt
endpoint crashes on parameters past ~4 KB (see docs/stores.md). SecantusDB is a MongoDB-compatible
server written in Python: the figures are theirs, not mongod's or Neo4j's. The document server's
CPU per event, measured here, bounds what any client can reach; the report prints that ceiling.
``--json PATH`` writes every figure; the nox ``bench`` session keeps the printed report in
``.bench-results/``. About 2 minutes with the defaults; take figures only on a quiet machine.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # servers.py
sys.path.insert(0, str(HERE))  # bench_collector

import orjson  # noqa: E402
import pika  # noqa: E402
from bench_collector import URL, delete_queues, make_events, prefill, raw_pika  # noqa: E402
from servers import FalkorDBRespRunner, falkordb_server, secantus_server  # noqa: E402

from lineage_sdk.collector.consumer import LineageCollector  # noqa: E402
from lineage_sdk.collector.engine import EngineStore  # noqa: E402
from lineage_sdk.collector.manager import LineageManager  # noqa: E402
from lineage_sdk.collector.records import build_record  # noqa: E402
from lineage_sdk.collector.settings import ConnectionConfig  # noqa: E402
from lineage_sdk.collector.store import LineageRecord, node_id  # noqa: E402
from lineage_sdk.collector.stores.document_backend import DocumentBackend  # noqa: E402
from lineage_sdk.collector.stores.graph_backend import GraphBackend  # noqa: E402
from lineage_sdk.collector.stores.graph_runner import GraphRunner  # noqa: E402
from lineage_sdk.collector.stores.sql_backend import SqlBackend  # noqa: E402
from lineage_sdk.collector.topology import Topology  # noqa: E402
from lineage_sdk.config.schema import LineageConfig  # noqa: E402

PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/bench"
COMPOSITE_TARGET = 3000.0  # events/s
DEPTH10_TARGET_MS = 100.0
DEPTHS = (1, 5, 10)


# ------------------------------------------------------------------------------------- measuring


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc), to tell server time from ours."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def cpu_split(server_pid: int | None) -> Iterator[dict[str, float]]:
    """Wall time, this process's CPU and the server's CPU over the block."""
    out: dict[str, float] = {}
    wall, ours = time.perf_counter(), time.process_time()
    theirs = process_cpu(server_pid) if server_pid else 0.0
    yield out
    out["wall_s"] = time.perf_counter() - wall
    out["client_cpu_s"] = time.process_time() - ours
    out["server_cpu_s"] = (process_cpu(server_pid) - theirs) if server_pid else 0.0


def collector_rate(
    bodies: list[bytes], backends: list[str], mongo_uri: str, redis_port: int
) -> float:
    """Events/s from a pre-filled queue through a collector into ``backends``."""
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

    def graph_creator(_cfg: LineageConfig) -> EngineStore:
        return EngineStore(
            GraphBackend(
                runner=FalkorDBRespRunner("127.0.0.1", redis_port, graph_name, timeout_s=60)
            )
        )

    def document_creator(_cfg: LineageConfig) -> EngineStore:
        connection = ConnectionConfig(uri=mongo_uri, database="bench")
        return EngineStore(DocumentBackend(connection, store["document"]["collection_name"]))

    creators = {"graph": graph_creator, "document": document_creator}
    manager = LineageManager(config, creators=creators)
    topo = Topology.from_config(config)
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    ch = conn.channel()
    collector = LineageCollector(config, manager=manager)
    try:
        topo.declare(ch)
        prefill(topic, topo.queue, bodies)
        collector.manager.connect_sync()  # indexes and schema exist before timing starts
        thread = threading.Thread(target=collector.run, daemon=True)
        last = collector.manager.stores[-1].name
        registry = collector.metrics.registry

        def stored() -> float:
            labels = {"store": last}
            return registry.get_sample_value("lineage_collector_events_stored_total", labels) or 0

        start = time.perf_counter()
        thread.start()
        while stored() < len(bodies):
            if not thread.is_alive():
                raise RuntimeError("collector stopped")
            time.sleep(0.002)
        elapsed = time.perf_counter() - start
        collector.stop()
        thread.join(30)
        return len(bodies) / elapsed
    finally:
        collector.stop()
        cleanup = LineageManager(config, creators=creators)
        for s in cleanup.stores:
            backend = s.backend if isinstance(s, EngineStore) else None
            if isinstance(backend, DocumentBackend):
                backend.drop()
            if isinstance(backend, GraphBackend) and isinstance(backend.runner, FalkorDBRespRunner):
                backend.runner.drop()
            s.close()
        delete_queues(ch, topo)
        ch.exchange_delete(topic)
        conn.close()


def write_all(store: Any, records: list[LineageRecord], batch: int = 200) -> None:
    for i in range(0, len(records), batch):
        store.write_batch(records[i : i + batch])


def direct(store: Any, records: list[LineageRecord], server_pid: int | None) -> dict[str, float]:
    """Direct write_batch throughput, with the CPU split between client and server."""
    with cpu_split(server_pid) as split:
        write_all(store, records)
    n = len(records)
    return {
        "events_per_s": n / split["wall_s"],
        "client_cpu_ms_per_event": split["client_cpu_s"] * 1000 / n,
        "server_cpu_ms_per_event": split["server_cpu_s"] * 1000 / n,
        "wall_ms_per_event": split["wall_s"] * 1000 / n,
    }


def document_without_indexes(
    mongo_uri: str, records: list[LineageRecord], server_pid: int | None, indexed: EngineStore
) -> dict[str, float]:
    """The same rows, written the same way (``write_batch``, the ``indexed`` store's tactics),
    into collections with only ``_id`` (the backend is never opened, so it makes no index): the
    server cost of the backend's secondary indexes is the difference."""
    assert isinstance(indexed.backend, DocumentBackend)
    connection = ConnectionConfig(uri=mongo_uri, database="bench")
    backend = DocumentBackend(connection, "no_indexes", tactics=indexed.backend.tactics)
    store = EngineStore(backend)
    try:
        with cpu_split(server_pid) as split:
            write_all(store, records)
        n = len(records)
        return {
            "events_per_s": n / split["wall_s"],
            "server_cpu_ms_per_event": split["server_cpu_s"] * 1000 / n,
        }
    finally:
        backend.drop()
        store.close()


class _Recorder(GraphRunner):
    """A graph runner that keeps every statement's parameters and sends nothing."""

    def __init__(self) -> None:
        self.parameters: list[dict[str, Any]] = []

    def run(self, query: str, parameters: Any = None) -> list[dict[str, Any]]:
        self.parameters.append(dict(parameters or {}))
        return []

    def verify(self) -> None:
        pass

    def close(self) -> None:
        pass


def packstream_figures(
    records: list[LineageRecord], tactics: Any, batch: int = 200
) -> dict[str, float]:
    """µs per event the driver spends packing the graph backend's statement parameters (the
    engine's ``write_batch`` of ``records`` in batches of ``batch``, with ``tactics``, recorded
    instead of sent), with its pure-Python codec and (when ``neo4j-rust-ext`` is installed) its
    Rust one, in one process.

    Reaches into the driver's private ``neo4j._codec`` (a bench, not product code): the Python
    codec is always there as ``Packer._py_pack``; ``_rust_pack`` is None without the extension.
    """
    from neo4j._codec.packstream import v1

    recorder = _Recorder()
    write_all(EngineStore(GraphBackend(runner=recorder, tactics=tactics)), records, batch)
    params = recorder.parameters

    def best_us(pack: Callable[[Any], object]) -> float:
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            for p in params:
                pack(p)
            best = min(best, time.perf_counter() - started)
        return best * 1e6 / len(records)

    hooks = v1.Packer._inject_hooks()
    out = {"python_us_per_event": best_us(lambda p: v1.Packer(io.BytesIO())._py_pack(p, hooks))}
    if v1._rust_pack is not None:
        rust = v1._rust_pack
        out["rust_us_per_event"] = best_us(lambda p: rust(p, hooks))
        out["rust_to_python"] = out["rust_us_per_event"] / out["python_us_per_event"]
    return out


def pipeline_events(total: int, pipelines: int = 50, stages: int = 20) -> list[dict[str, Any]]:
    """``pipelines`` chains of ``stages`` jobs (d0 -> stage1 -> d1 -> ... -> stage20 -> d20), each
    job also reading a shared reference table; START/COMPLETE pairs of runs until ``total``."""
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


def latency_ms(store: Any, node: str, depth: int, repeat: int) -> tuple[float, float, int]:
    """(median ms, max ms, nodes returned) of an upstream lineage query, after one warm-up."""
    store.lineage(node, direction="upstream", depth=depth)
    times, size = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        graph = store.lineage(node, direction="upstream", depth=depth)
        times.append((time.perf_counter() - start) * 1000)
        size = len(graph.nodes)
    return statistics.median(times), max(times), size


def timed(label: str, fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - start
    print(f"  {label}: {elapsed:.1f} s")
    return elapsed


# ------------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000, help="events per throughput set")
    parser.add_argument("--graph-events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=15, help="lineage queries per depth")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument(
        "--skip-collector", action="store_true", help="no broker: direct writes only"
    )
    parser.add_argument("--skip-lineage", action="store_true", help="no big graph")
    args = parser.parse_args()
    started = time.perf_counter()
    figures: dict[str, Any] = {
        "bench": "bench_stores",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "servers": {
            "document": "SecantusDB (MongoDB wire protocol, written in Python), started here",
            "graph": "FalkorDB (redis-server + falkordb.so), native protocol and Bolt",
            "sql": "SQLite (the engine over the sql backend) in a temporary directory",
        },
        "events": args.events,
        "targets": {
            "composite_events_per_s": COMPOSITE_TARGET,
            "depth10_upstream_ms": DEPTH10_TARGET_MS,
        },
    }
    bodies = make_events(args.events)
    records = [build_record(orjson.loads(b)) for b in bodies]
    print(f"{args.events} events of ~{sum(map(len, bodies)) // len(bodies)} bytes")
    print("servers: SecantusDB (MongoDB wire) and FalkorDB (graph), started here on loopback")
    with (
        secantus_server() as mongo,
        falkordb_server(persistent=False) as falkor,
        tempfile.TemporaryDirectory() as tmp,
    ):
        mongo_pid = mongo.proc.pid if mongo.proc else None
        falkor_pid = falkor.proc.pid if falkor.proc else None
        if not args.skip_collector:
            sets: dict[str, Any] = {}
            for label, backends in (
                ("document", ["document"]),
                ("graph", ["graph"]),
                ("composite", ["document", "graph"]),
            ):
                raw = raw_pika(bodies)
                rate = collector_rate(bodies, backends, mongo.uri, falkor.redis_port)
                sets[label] = {
                    "backends": backends,
                    "events_per_s": rate,
                    "raw_pika_msg_per_s": raw,
                    "ratio_to_raw": rate / raw,
                }
                target = f"  (target >= {COMPOSITE_TARGET:.0f})" if label == "composite" else ""
                print(
                    f"collector -> {'+'.join(backends):16s} {rate:8.0f} events/s = "
                    f"{rate / raw:.2f}x raw pika ({raw:.0f} msg/s){target}"
                )
            figures["collector"] = sets
            figures["targets"]["composite_met"] = sets["composite"]["events_per_s"] >= (
                COMPOSITE_TARGET
            )

        doc_backend = DocumentBackend(ConnectionConfig(uri=mongo.uri, database="bench"), "direct")
        doc = EngineStore(doc_backend)
        doc.open()
        graph_backend = GraphBackend(
            runner=FalkorDBRespRunner("127.0.0.1", falkor.redis_port, "direct", timeout_s=60)
        )
        graph = EngineStore(graph_backend)
        graph.open()
        sql = EngineStore(SqlBackend(f"sqlite:///{tmp}/direct.db"))
        sql.open()
        try:
            figures["direct"] = {
                "document": direct(doc, records, mongo_pid),
                "document_secondary_indexes_off": document_without_indexes(
                    mongo.uri, records, mongo_pid, doc
                ),
                "graph": direct(graph, records, falkor_pid),
                "sql": direct(sql, records, None),
            }
        finally:
            doc_backend.drop()
            doc.close()
            graph_backend.runner.run("MATCH (n) DETACH DELETE n")
            graph.close()
            sql.close()
        for name, f in figures["direct"].items():
            cpu = ""
            if name != "sql" and "client_cpu_ms_per_event" in f:
                cpu = (
                    f" (client {f['client_cpu_ms_per_event']:.3f} ms, server "
                    f"{f['server_cpu_ms_per_event']:.3f} ms CPU per event)"
                )
            elif name != "sql" and "server_cpu_ms_per_event" in f:
                cpu = f" (server {f['server_cpu_ms_per_event']:.3f} ms CPU per event)"
            print(f"direct write_batch -> {name:30s} {f['events_per_s']:8.0f} events/s{cpu}")
        # A single-process server cannot take events faster than one core spends on each: the
        # ceiling any client, the collector included, can reach into this document server.
        server_ms = figures["direct"]["document"]["server_cpu_ms_per_event"]
        if server_ms > 0:
            ceiling = 1000.0 / server_ms
            figures["document_server_ceiling_events_per_s"] = ceiling
            print(
                f"document server ceiling: {ceiling:8.0f} events/s "
                f"(1 / {server_ms:.3f} ms of its CPU per event, with the store's indexes)"
            )

        figures["packstream"] = pack = packstream_figures(records, graph_backend.tactics)
        rust = (
            f", Rust {pack['rust_us_per_event']:.1f} µs = {pack['rust_to_python']:.3f}x"
            if "rust_us_per_event" in pack
            else ", Rust codec not installed (pip install neo4j-rust-ext)"
        )
        print(
            f"neo4j driver packing the graph parameters: Python "
            f"{pack['python_us_per_event']:.1f} µs per event{rust}"
        )

        if not args.skip_lineage:
            figures["lineage"] = lineage_figures(args, falkor, Path(tmp))
    figures["elapsed_s"] = time.perf_counter() - started
    print(f"done in {figures['elapsed_s']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")


def lineage_figures(args: argparse.Namespace, falkor: Any, tmp: Path) -> dict[str, Any]:
    """Build the big graph in the graph and sql stores, then time upstream lineage queries."""
    out: dict[str, Any] = {"graph_events": args.graph_events, "repeat": args.repeat}
    big = [build_record(e) for e in pipeline_events(args.graph_events)]
    print(f"lineage: {len(big)} events, 50 pipelines of 20 stages")
    # The big graph goes into "falkordb", the graph FalkorDB's Bolt endpoint serves, so the same
    # data is queried through the native protocol and through the neo4j driver.
    native_backend = GraphBackend(
        runner=FalkorDBRespRunner("127.0.0.1", falkor.redis_port, "falkordb", timeout_s=120)
    )
    native = EngineStore(native_backend)
    native.open()
    sql = EngineStore(SqlBackend(f"sqlite:///{tmp}/lineage.db"))
    sql.open()
    bolt = EngineStore(GraphBackend(ConnectionConfig(uri=falkor.bolt_uri, timeout_ms=10_000)))
    try:
        out["build_s"] = {
            "graph": timed("built the graph store", lambda: write_all(native, big, batch=500)),
            "sql": timed("built the sql store", lambda: write_all(sql, big, batch=500)),
        }
        counts = native_backend.runner.run("MATCH (n) RETURN labels(n)[0] AS l, count(n) AS c")
        out["graph_nodes"] = {r["l"]: r["c"] for r in counts}
        print("  nodes: " + ", ".join(f"{k}={v}" for k, v in sorted(out["graph_nodes"].items())))
        bolt.open()
        root = node_id("DATASET", "warehouse", "p7.d20")
        out["root"] = root
        latencies: dict[str, Any] = {}
        for label, store in (
            ("graph_native", native),
            ("graph_bolt", bolt),
            ("sql", sql),
        ):
            latencies[label] = {}
            for depth in DEPTHS:
                median, worst, size = latency_ms(store, root, depth, args.repeat)
                latencies[label][str(depth)] = {"median_ms": median, "max_ms": worst, "nodes": size}
                target = f"  (target < {DEPTH10_TARGET_MS:.0f} ms)" if depth == 10 else ""
                print(
                    f"upstream depth {depth:2d} {label:13s} {median:8.2f} ms median, "
                    f"{worst:8.2f} ms max, {size} nodes{target}"
                )
        out["latency"] = latencies
        for label in ("graph_native", "graph_bolt"):
            out[f"depth10_met_{label}"] = latencies[label]["10"]["median_ms"] < DEPTH10_TARGET_MS
    finally:
        bolt.close()
        native_backend.runner.run("MATCH (n) DETACH DELETE n")
        native.close()
        sql.close()
    return out


if __name__ == "__main__":
    main()
