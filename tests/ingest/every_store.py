"""What the ingest round-trip tests share: one engine store of every backend (memory, SQLite,
PostgreSQL, SecantusDB, FalkorDB), each in tables, collections or a graph of its own, and a
JSON difference in which types count (an integer read back as a float differs)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from servers import FalkorDBRespRunner, FalkorDBServer, MongoTarget

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.collector.stores.sql_backend import SqlBackend

__all__ = ["differences", "every_store"]


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
