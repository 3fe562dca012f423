"""Building the stores from configuration: entry points, connection names, secrets kept out.

What a user configures: ``[lineage.store] backend = "document" | "graph" | "sql"`` and the named
connections; the manager builds the store through the entry point of that name, an
:class:`~lineage_sdk.collector.engine.EngineStore` over the matching backend.
"""

from __future__ import annotations

import logging
from importlib.metadata import entry_points
from typing import Any

import pytest

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.stores.document import DocumentLineageStore
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.graph import Neo4jLineageStore
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.sql import SqlStore
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.config import load_config
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError, StoreError


def config(backend: str = "document", **connections: Any) -> LineageConfig:
    return LineageConfig.model_validate(
        {
            "store": {
                "backend": backend,
                "document": {"document_connection_name": "audit", "collection_name": "events"},
                "graph": {"graph_connection_name": "impact"},
            },
            "connections": connections,
        }
    )


def built(cfg: LineageConfig) -> EngineStore:
    """The store the manager builds for ``cfg`` (not opened), through its entry point."""
    (store,) = LineageManager(cfg).build()
    assert isinstance(store, EngineStore), store
    return store


def test_entry_points_make_the_engine_over_each_backend() -> None:
    eps = {ep.name: ep for ep in entry_points(group="lineage_sdk.stores")}
    # The documented names (docs/data-lineage-api.md) are the engine over each backend.
    assert eps["document"].load() is DocumentLineageStore
    assert eps["graph"].load() is Neo4jLineageStore
    assert eps["sql"].load() is SqlStore
    for store in (DocumentLineageStore, Neo4jLineageStore, SqlStore):
        assert issubclass(store, EngineStore)


def test_create_store_uses_the_named_connections() -> None:
    connections = {
        "audit": {"uri": "mongodb://127.0.0.1:1/auditdb"},
        "impact": {"uri": "bolt://127.0.0.1:1"},
    }
    doc = built(config("document", **connections))
    assert doc.name == "document" and isinstance(doc.backend, DocumentBackend)
    events = doc.backend._coll("events")  # the collection prefix is collection_name
    assert events.name == "events_events" and events.database.name == "auditdb"
    doc.close()
    graph = built(config("graph", **connections))
    assert graph.name == "graph" and isinstance(graph.backend, GraphBackend)
    graph.close()


@pytest.mark.parametrize(
    ("backend", "key", "default"),
    [
        ("document", "document_connection_name", "mongodb://127.0.0.1:27017"),
        ("graph", "graph_connection_name", "bolt://127.0.0.1:7687"),
    ],
)
def test_a_missing_connection_assumes_the_drivers_local_address(
    backend: str, key: str, default: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.collector"):
        store = built(config(backend, other={"uri": "x://y"}))
    store.close()
    assert store.address.startswith(f"{'audit' if backend == 'document' else 'impact'}: {default}")
    assert "(assumed: no [lineage.connections." in store.address
    (line,) = [r.getMessage() for r in caplog.records]
    assert key in line and default in line
    assert "LINEAGE_CONNECTIONS_AUDIT_URI" in line or "LINEAGE_CONNECTIONS_IMPACT_URI" in line


def test_a_connection_name_resolves_from_its_environment_variable() -> None:
    cfg = load_config(
        environ={
            "LINEAGE_STORE_BACKEND": "document",
            "LINEAGE_CONNECTIONS_DEFAULT_MONGO_URI": "mongodb://auditor:pw-S3CRET@db.example:27017/audit",
        }
    )
    store = built(cfg)
    store.close()
    assert isinstance(store.backend, DocumentBackend)
    assert store.address == "default_mongo: mongodb://auditor:***@db.example:27017/audit"


def test_the_sql_store_still_refuses_a_missing_connection() -> None:
    cfg = LineageConfig.model_validate(
        {"store": {"backend": "sql", "sql": {"connection_name": "warehouse"}}}
    )
    with pytest.raises(ConfigError) as info:
        LineageManager(cfg).build()
    assert info.value.key == "store.sql.connection_name" and "defined: none" in str(info.value)


def test_the_sql_store_is_the_engine_over_the_sql_backend(tmp_path: Any) -> None:
    cfg = LineageConfig.model_validate(
        {"store": {"backend": "sql", "sql": {"url": f"sqlite:///{tmp_path}/c.db"}}}
    )
    store = built(cfg)
    assert store.name == "sql" and isinstance(store.backend, SqlBackend)
    store.close()


def test_unreachable_servers_raise_store_error_without_the_password() -> None:
    conn = ConnectionConfig(
        uri="mongodb://127.0.0.1:1/db", username="u", password="s3cret-pw", timeout_ms=200
    )
    store = EngineStore(DocumentBackend(conn))
    with pytest.raises(StoreError) as info:
        store.check()
    assert "s3cret-pw" not in str(info.value) and not info.value.permanent
    store.close()
    gconn = ConnectionConfig(
        uri="bolt://127.0.0.1:1", username="neo4j", password="s3cret-pw", timeout_ms=200
    )
    gstore = EngineStore(GraphBackend(gconn))
    with pytest.raises(StoreError) as ginfo:
        gstore.open()
    assert "s3cret-pw" not in str(ginfo.value) and not ginfo.value.permanent
    gstore.close()


def test_bad_uris_are_config_errors_without_the_password() -> None:
    store = EngineStore(DocumentBackend(ConnectionConfig(uri="mongodb://u:s3cret@/")))
    with pytest.raises(ConfigError) as info:
        store.open()
    assert "s3cret" not in str(info.value)
    gstore = EngineStore(GraphBackend(ConnectionConfig(uri="ftp://u:s3cret@host:7687")))
    with pytest.raises(ConfigError) as ginfo:
        gstore.open()
    assert "s3cret" not in str(ginfo.value)
