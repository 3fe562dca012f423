"""Every store behind one manager, and how to read an event back from each, exactly as stored.

A :class:`StoreRig` holds the engine over the sql backend (SQLite), a logging store (its lines
captured), the engine over the document backend (collections of its own) and over the graph
backend (its own FalkorDB graph, through the Redis protocol) behind a :class:`LineageManager`, which writes them as a composite: the answer to an
HTTP post, or the ack of a broker message, comes only once every store has written the event.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from servers import FalkorDBRespRunner, FalkorDBServer, MongoTarget

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.logging import LoggingLineageStore
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.config.schema import LineageConfig

__all__ = ["StoreRig", "store_rig"]


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@dataclass
class StoreRig:
    """The four stores, the manager over them, and the logging store's captured lines."""

    config: LineageConfig
    manager: LineageManager
    sql: EngineStore
    document: EngineStore
    graph: EngineStore
    log: _Lines = field(default_factory=_Lines)

    def stored(self, event_id: str) -> dict[str, Any]:
        """store name -> the event that store holds under ``event_id`` (absent if none).

        The sql store's event is compared as text: it must be the JSON as sent.
        """
        found: dict[str, Any] = {}
        for name, store in (("sql", self.sql), ("document", self.document), ("graph", self.graph)):
            rows = list(store.backend.events(ids=[event_id]))
            if rows:
                (row,) = rows
                found[name] = row.json if name == "sql" else json.loads(row.json)
        for line in self.log.lines:
            logged = orjson.loads(line)
            if logged["event_id"] == event_id:
                found["logging"] = logged["event"]
        return found

    def holds_as_sent(self, event: dict[str, Any], body: bytes, event_id: str) -> bool:
        """True once every store holds ``event`` unchanged (sql: the very JSON text sent)."""
        return self.stored(event_id) == {
            "sql": body.decode(),
            "document": event,
            "graph": event,
            "logging": event,
        }


@contextlib.contextmanager
def store_rig(
    tmp: Path, mongo: MongoTarget, falkordb: FalkorDBServer, extra: dict[str, Any] | None = None
) -> Iterator[StoreRig]:
    """Open the four stores (fresh SQLite file, collection, graph and logger) and close them."""
    tag = uuid.uuid4().hex[:12]
    tmp.mkdir(parents=True, exist_ok=True)
    config = LineageConfig.model_validate(
        {"store": {"backend": "sql", "sql": {"url": f"sqlite:///{tmp}/{tag}.db"}}, **(extra or {})}
    )
    sql = EngineStore(SqlBackend(f"sqlite:///{tmp}/{tag}.db"))
    logger_name = f"lineage.events.ingest_test.{tag}"
    logging_store = LoggingLineageStore(logger_name)
    documents = DocumentBackend(
        ConnectionConfig(uri=mongo.uri, database="lineage_tests", timeout_ms=5000),
        collection_name=f"t_{tag}",
    )
    document = EngineStore(documents)
    runner = FalkorDBRespRunner("127.0.0.1", falkordb.redis_port, f"t_{tag}")
    graph = EngineStore(GraphBackend(runner=runner))
    manager = LineageManager(config, stores=[sql, logging_store, document, graph])
    rig = StoreRig(config, manager, sql, document, graph)
    logger = logging.getLogger(logger_name)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(rig.log)
    manager.connect_sync()
    try:
        yield rig
    finally:
        with contextlib.suppress(Exception):
            documents.drop()
        runner.drop()
        manager.close_sync()
        logger.removeHandler(rig.log)
