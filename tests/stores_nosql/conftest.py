"""Session-scoped servers for the document and graph stores, and fresh, isolated stores per test.

Servers come from tests/servers.py through the session fixtures ``mongo`` and ``falkordb`` of
tests/conftest.py: SecantusDB and FalkorDB started on free loopback ports, or a real MongoDB /
Neo4j when LINEAGE_TEST_MONGODB_URI / LINEAGE_TEST_NEO4J_URI are set.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # nosql_events, for the test modules

from nosql_events import StoreFactory, uid
from servers import (
    FalkorDBServer,
    GraphTarget,
    MongoTarget,
    drop_tables,
    neo4j_from_env,
    postgres_database,
    postgres_schema,
)

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.stores.document import DocumentLineageStore
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.graph import Neo4jLineageStore
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.collector.stores.sql import SqlStore
from lineage_sdk.collector.stores.sql_backend import SqlBackend


@pytest.fixture(scope="session")
def graph_target(request: pytest.FixtureRequest) -> GraphTarget:
    """Real Neo4j when LINEAGE_TEST_NEO4J_URI is set, else FalkorDB through its native protocol."""
    env = neo4j_from_env()
    if env is not None:
        uri, user, password, database = env
        return GraphTarget(
            kind="neo4j", uri=uri, username=user, password=password, database=database
        )
    server: FalkorDBServer = request.getfixturevalue("falkordb")
    return GraphTarget(kind="falkordb", uri=server.bolt_uri, server=server)


@pytest.fixture(scope="session")
def bolt_target(falkordb: FalkorDBServer) -> GraphTarget:
    return GraphTarget(kind="falkordb-bolt", uri=falkordb.bolt_uri, server=falkordb)


@pytest.fixture(scope="session")
def bolt_store(bolt_target: GraphTarget) -> Iterator[Neo4jLineageStore]:
    """One store (one neo4j driver) over FalkorDB's Bolt for the session: FalkorDB may stall a new
    connection after a client disconnects, so the Bolt smoke tests share one long-lived driver."""
    store = Neo4jLineageStore(ConnectionConfig(uri=bolt_target.uri, timeout_ms=5000))
    store.open()
    yield store
    store.close()


def mongo_connection(target: MongoTarget, *, timeout_ms: int = 5000) -> ConnectionConfig:
    return ConnectionConfig(uri=target.uri, database="lineage_tests", timeout_ms=timeout_ms)


@pytest.fixture
def document_store(mongo: MongoTarget) -> Iterator[DocumentLineageStore]:
    """A store on a collection of its own, dropped afterwards."""
    import uuid

    store = DocumentLineageStore(
        mongo_connection(mongo), collection_name=f"t_{uuid.uuid4().hex[:12]}"
    )
    store.open()
    try:
        yield store
    finally:
        store.drop()
        store.close()


def _wipe(store: Neo4jLineageStore) -> None:
    store.runner.run("MATCH (n) DETACH DELETE n")


@pytest.fixture
def graph_store(graph_target: GraphTarget) -> Iterator[Neo4jLineageStore]:
    """A store on an empty graph: a graph of its own on FalkorDB; on a real Neo4j, the (throwaway!)
    database is wiped before and after."""
    import uuid

    if graph_target.kind == "falkordb":
        runner = graph_target.runner(f"t_{uuid.uuid4().hex[:12]}")
        store = Neo4jLineageStore(runner=runner)
    else:
        store = Neo4jLineageStore(
            ConnectionConfig(
                uri=graph_target.uri,
                username=graph_target.username,
                password=graph_target.password,
                database=graph_target.database,
                timeout_ms=5000,
            )
        )
        store.open()
        _wipe(store)
    store.open()
    try:
        yield store
    finally:
        runner = store.runner
        drop = getattr(runner, "drop", None)
        if drop is not None:
            drop()
        else:
            _wipe(store)
        store.close()


@pytest.fixture
def memory_store() -> Iterator[EngineStore]:
    """The memory backend under the engine (what entry point ``memory`` makes)."""
    store = EngineStore(MemoryBackend())
    store.open()
    yield store
    store.close()


@pytest.fixture(params=["document", "graph", "memory"])
def query_store(request: pytest.FixtureRequest) -> Any:
    """The same questions asked of every querying store."""
    return request.getfixturevalue(f"{request.param}_store")


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    """A PostgreSQL database of the requesting module's own, dropped afterwards."""
    with postgres_database("lineage_port") as url:
        yield url


@pytest.fixture
def make_store(
    tmp_path: Path, pg_database: str, mongo: MongoTarget, graph_target: GraphTarget
) -> Iterator[StoreFactory]:
    """``make_store(kind)``: a fresh, open, empty store (memory, sqlite, postgres, document or
    graph; sqlite-rows, postgres-rows, document-rows and graph-rows: the engine over the new
    backends), removed after the test."""
    cleanups: list[Callable[[], None]] = []

    def make(kind: str) -> Any:
        store: Any
        extra: list[Callable[[], None]] = []  # run before the store is closed
        if kind == "memory":
            store = EngineStore(MemoryBackend())
        elif kind == "sqlite":
            store = SqlStore(f"sqlite:///{tmp_path}/{uid()}.db")
        elif kind == "postgres":
            store = SqlStore(pg_database, table_prefix=f"p{uid()}_")
            extra.append(lambda: store.metadata.drop_all(store.engine))
        elif kind == "sqlite-rows":
            store = EngineStore(SqlBackend(f"sqlite:///{tmp_path}/{uid()}.db"))
        elif kind == "postgres-rows":
            prefix = f"r{uid()}_"
            store = EngineStore(SqlBackend(pg_database, table_prefix=prefix))
            extra.append(lambda: drop_tables(pg_database, prefix))
        elif kind == "document-rows":
            document = DocumentBackend(
                ConnectionConfig(uri=mongo.uri, database="lineage_tests", timeout_ms=5000),
                collection_name=f"b_{uid()}",
            )
            store = EngineStore(document)
            extra.append(document.drop)
        elif kind == "graph-rows":
            if graph_target.kind != "falkordb":
                pytest.skip("needs a graph per store (FalkorDB)")
            runner = graph_target.runner(f"gb_{uid()}")
            store = EngineStore(GraphBackend(runner=runner))
            extra.append(runner.drop)  # type: ignore[attr-defined]
        elif kind == "document":
            store = DocumentLineageStore(
                ConnectionConfig(uri=mongo.uri, database="lineage_tests", timeout_ms=5000),
                collection_name=f"port_{uid()}",
            )
            extra.append(lambda: store.drop())
        else:
            if graph_target.kind != "falkordb":
                pytest.skip("needs a graph per store (FalkorDB)")
            store = Neo4jLineageStore(runner=graph_target.runner(f"port_{uid()}"))
            extra.append(lambda: store.runner.drop())
        store.open()
        cleanups.append(store.close)
        cleanups.extend(extra)  # cleanups run last first
        return store

    yield make
    for cleanup in reversed(cleanups):
        cleanup()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped afterwards."""
    with postgres_schema("lineage_nosql") as url:
        yield url
