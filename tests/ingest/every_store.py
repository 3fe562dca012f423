"""What the ingest round-trip tests share: one engine store of every backend (memory, SQLite,
PostgreSQL, SecantusDB, FalkorDB), each in tables, collections or a graph of its own, a manager
writing them all, a served API over it, the queue's config and clean-up, and a JSON difference in
which types count (an integer read back as a float differs)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from servers import FalkorDBRespRunner, FalkorDBServer, MongoTarget

from lineage_sdk.collector.api import ApiServer, create_app
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.collector.topology import Topology
from lineage_sdk.config.schema import LineageConfig

__all__ = [
    "api_client",
    "deleting_queues",
    "differences",
    "every_store",
    "managing",
    "queue_config",
]


@contextlib.contextmanager
def every_store(
    tmp: Path, pg_url: str, mongo: MongoTarget, falkordb: FalkorDBServer, prefix: str
) -> Iterator[dict[str, EngineStore]]:
    """The engine over each backend, not opened; the shared servers' collections and graph are
    dropped afterwards (the PostgreSQL database is the caller's, ``prefix`` names the rest)."""
    tag = f"{prefix}{uuid.uuid4().hex[:10]}"
    documents = DocumentBackend(
        ConnectionConfig(uri=mongo.uri, database="lineage_tests", timeout_ms=5000),
        collection_name=tag,
    )
    runner = FalkorDBRespRunner("127.0.0.1", falkordb.redis_port, tag)
    stores = {
        "memory": EngineStore(MemoryBackend()),
        "sqlite": EngineStore(SqlBackend(f"sqlite:///{tmp}/{tag}.db")),
        "postgres": EngineStore(SqlBackend(pg_url, table_prefix=f"{tag}_")),
        "document": EngineStore(documents),
        "graph": EngineStore(GraphBackend(runner=runner)),
    }
    try:
        yield stores
    finally:
        with contextlib.suppress(Exception):
            documents.drop()
        with contextlib.suppress(Exception):
            runner.drop()


@contextlib.contextmanager
def managing(
    stores: dict[str, EngineStore], config: LineageConfig | None = None
) -> Iterator[LineageManager]:
    """A manager writing every store, connected, as ``serve`` and the consumer run it; closed on
    exit (which closes the stores). ``config``: the queue's, or by default one with no queue."""
    if config is None:
        config = LineageConfig.model_validate({"store": {"backend": "memory"}})
    manager = LineageManager(config, stores=list(stores.values()))
    manager.connect_sync()
    try:
        yield manager
    finally:
        manager.close_sync()


@contextlib.contextmanager
def api_client(target: LineageManager | EngineStore) -> Iterator[httpx.Client]:
    """A client of a real server over loopback serving ``target``; the server stops on exit."""
    server = ApiServer(create_app(target)).start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            yield client
    finally:
        server.stop()


def queue_config(topic: str) -> LineageConfig:
    """A consumer of ``topic`` on this process's vhost, reconnecting and retrying fast."""
    # Imported here: tests/collector is on the path under tests/ingest only (its conftest), and
    # tests/backends imports this module for every_store.
    from collector_helpers import RABBIT_URL

    return LineageConfig.model_validate(
        {
            "store": {"backend": "memory"},
            "collector_topic": topic,
            "rabbitmq": {"url": RABBIT_URL, "reconnect_initial_ms": 100, "reconnect_max_ms": 1000},
            "collector": {"retry_delays_ms": [200], "max_attempts": 2, "batch_timeout_ms": 20},
        }
    )


@contextlib.contextmanager
def deleting_queues(config: LineageConfig) -> Iterator[None]:
    """On exit, the collector's queues and its topic's exchange are deleted (the topic is the
    test's own)."""
    from collector_helpers import connect, delete_queues  # see queue_config

    try:
        yield
    finally:
        topology = Topology.from_config(config)
        conn = connect()
        try:
            channel = conn.channel()
            delete_queues(channel, topology)
            channel.exchange_delete(topology.exchange)
        finally:
            conn.close()


def differences(sent: Any, got: Any, path: str = "") -> list[str]:
    """Where ``got`` differs from ``sent`` as JSON paths with both values, types counting."""
    if type(sent) is not type(got):
        return [f"{path or '(value)'}: sent {sent!r:.200}, got {got!r:.200}"]
    if isinstance(sent, dict):
        found: list[str] = []
        for key in sorted(set(sent) | set(got)):
            if key not in got:
                found.append(f"{path}.{key}: dropped")
            elif key not in sent:
                found.append(f"{path}.{key}: added {got[key]!r:.200}")
            else:
                found += differences(sent[key], got[key], f"{path}.{key}")
        return found
    if isinstance(sent, list):
        if len(sent) != len(got):
            return [f"{path}: {len(sent)} items sent, {len(got)} read back"]
        return [
            d
            for i, (a, b) in enumerate(zip(sent, got, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    return [] if sent == got else [f"{path}: sent {sent!r:.200}, got {got!r:.200}"]
