"""Building the stores from configuration: entry points, connection names, secrets kept out."""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

import pytest

from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.stores import document, graph, sql
from lineage_sdk.config import load_config
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError, StoreError


def config(**connections):
    return LineageConfig.model_validate(
        {
            "store": {
                "backend": "document",
                "document": {"document_connection_name": "audit", "collection_name": "events"},
                "graph": {"graph_connection_name": "impact"},
            },
            "connections": connections,
        }
    )


def test_entry_points_point_at_the_store_classes():
    eps = {ep.name: ep for ep in entry_points(group="lineage_sdk.stores")}
    assert eps["document"].load() is document.DocumentLineageStore
    assert eps["graph"].load() is graph.Neo4jLineageStore


def test_create_store_uses_the_named_connections():
    cfg = config(
        audit={"uri": "mongodb://127.0.0.1:1/auditdb"}, impact={"uri": "bolt://127.0.0.1:1"}
    )
    doc = document.DocumentLineageStore.from_config(cfg)
    assert doc.name == "document" and doc.collection.name == "events"
    assert doc.collection.database.name == "auditdb"
    doc.close()
    assert graph.Neo4jLineageStore.from_config(cfg).name == "graph"


@pytest.mark.parametrize(
    ("creator", "key", "default"),
    [
        (
            document.DocumentLineageStore.from_config,
            "document_connection_name",
            "mongodb://127.0.0.1:27017",
        ),
        (graph.Neo4jLineageStore.from_config, "graph_connection_name", "bolt://127.0.0.1:7687"),
    ],
)
def test_a_missing_connection_assumes_the_drivers_local_address(creator, key, default, caplog):
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.collector"):
        store = creator(config(other={"uri": "x://y"}))
    store.close()
    assert store.address.startswith(f"{'audit' if 'document' in key else 'impact'}: {default}")
    assert "(assumed: no [lineage.connections." in store.address
    (line,) = [r.getMessage() for r in caplog.records]
    assert key in line and default in line
    assert "LINEAGE_CONNECTIONS_AUDIT_URI" in line or "LINEAGE_CONNECTIONS_IMPACT_URI" in line


def test_a_connection_name_resolves_from_its_environment_variable(monkeypatch):
    cfg = load_config(
        environ={
            "LINEAGE_STORE_BACKEND": "document",
            "LINEAGE_CONNECTIONS_DEFAULT_MONGO_URI": "mongodb://auditor:pw-S3CRET@db.example:27017/audit",
        }
    )
    store = document.DocumentLineageStore.from_config(cfg)
    store.close()
    assert store.address == "default_mongo: mongodb://auditor:***@db.example:27017/audit"


def test_the_sql_store_still_refuses_a_missing_connection():
    cfg = LineageConfig.model_validate({"store": {"sql": {"connection_name": "warehouse"}}})
    with pytest.raises(ConfigError) as info:
        sql.SqlStore.from_config(cfg)
    assert info.value.key == "store.sql.connection_name" and "defined: none" in str(info.value)


def test_unreachable_servers_raise_store_error_without_the_password():
    conn = ConnectionConfig(
        uri="mongodb://127.0.0.1:1/db", username="u", password="s3cret-pw", timeout_ms=200
    )
    store = document.DocumentLineageStore(conn)
    with pytest.raises(StoreError) as info:
        store.check()
    assert "s3cret-pw" not in str(info.value) and not info.value.permanent
    store.close()
    gconn = ConnectionConfig(
        uri="bolt://127.0.0.1:1", username="neo4j", password="s3cret-pw", timeout_ms=200
    )
    gstore = graph.Neo4jLineageStore(gconn)
    with pytest.raises(StoreError) as ginfo:
        gstore.open()
    assert "s3cret-pw" not in str(ginfo.value) and not ginfo.value.permanent
    gstore.close()


def test_bad_uris_are_config_errors_without_the_password():
    with pytest.raises(ConfigError) as info:
        _ = document.DocumentLineageStore(ConnectionConfig(uri="mongodb://u:s3cret@/")).collection
    assert "s3cret" not in str(info.value)
    with pytest.raises(ConfigError) as ginfo:
        _ = graph.Neo4jLineageStore(ConnectionConfig(uri="ftp://u:s3cret@host:7687")).runner
    assert "s3cret" not in str(ginfo.value)
