"""Session-scoped servers for the document and graph backends, and fresh, isolated stores per
test: every store here is the engine (:class:`EngineStore`) over a backend, ``.backend`` it.

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
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.memory import MemoryBackend
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
def bolt_store(bolt_target: GraphTarget) -> Iterator[EngineStore]:
    """The engine over one graph backend (one neo4j driver) on FalkorDB's Bolt for the session:
    FalkorDB may stall a new connection after a client disconnects, so the Bolt smoke tests
    share one long-lived driver. ``.backend`` is the :class:`GraphBackend`."""
    store = EngineStore(GraphBackend(ConnectionConfig(uri=bolt_target.uri, timeout_ms=5000)))
    store.open()
    yield store
    store.close()


def mongo_connection(target: MongoTarget, *, timeout_ms: int = 5000) -> ConnectionConfig:
    return ConnectionConfig(uri=target.uri, database="lineage_tests", timeout_ms=timeout_ms)


@pytest.fixture
def document_store(mongo: MongoTarget) -> Iterator[EngineStore]:
    """The engine over a document backend on collections of its own (prefix ``t_<random>``),
    dropped afterwards; ``.backend`` is the :class:`DocumentBackend`."""
    backend = DocumentBackend(mongo_connection(mongo), collection_name=f"t_{uid()}")
    store = EngineStore(backend)
    store.open()
    try:
        yield store
    finally:
        backend.drop()
        store.close()


def _wipe(backend: GraphBackend) -> None:
    backend.runner.run("MATCH (n) DETACH DELETE n")


@pytest.fixture
def graph_store(graph_target: GraphTarget) -> Iterator[EngineStore]:
    """The engine over a graph backend on an empty graph: a graph of its own on FalkorDB; on a
    real Neo4j, the (throwaway!) database is wiped before and after. ``.backend`` is the
    :class:`GraphBackend`."""
    backend = graph_target.backend(f"t_{uid()}")
    store = EngineStore(backend)
    store.open()
    drop = getattr(backend.runner, "drop", None)  # a FalkorDB graph of its own
    if drop is None:
        _wipe(backend)
    try:
        yield store
    finally:
        if drop is not None:
            drop()
        else:
            _wipe(backend)
        store.close()


@pytest.fixture
def memory_store() -> Iterator[EngineStore]:
    """The memory backend under the engine (what entry point ``memory`` makes)."""
    store = EngineStore(MemoryBackend())
    store.open()
    yield store
    store.close()


@pytest.fixture(params=["document", "graph", "memory"])
def query_store(request: pytest.FixtureRequest) -> EngineStore:
    """The same questions asked of every querying store."""
    store: EngineStore = request.getfixturevalue(f"{request.param}_store")
    return store


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    """A PostgreSQL database of the requesting module's own, dropped afterwards."""
    with postgres_database("lineage_port") as url:
        yield url


@pytest.fixture
def make_store(
    tmp_path: Path, pg_database: str, mongo: MongoTarget, graph_target: GraphTarget
) -> Iterator[StoreFactory]:
    """``make_store(kind)``: a fresh, open, empty store, the engine over a backend of its own,
    removed after the test. Kinds (:data:`nosql_events.STORE_KINDS`): ``memory`` (the reference
    backend), ``sqlite`` (a SQLite file), ``postgres`` (tables of their own prefix in the
    module's database), ``document`` (collections of their own prefix) and ``graph`` (a FalkorDB
    graph of its own; skipped on a real Neo4j, which has one database)."""
    cleanups: list[Callable[[], None]] = []

    def make(kind: str) -> EngineStore:
        backend: Any
        extra: list[Callable[[], None]] = []  # run before the store is closed
        if kind == "memory":
            backend = MemoryBackend()
        elif kind == "sqlite":
            backend = SqlBackend(f"sqlite:///{tmp_path}/{uid()}.db")
        elif kind == "postgres":
            prefix = f"p{uid()}_"
            backend = SqlBackend(pg_database, table_prefix=prefix)
            extra.append(lambda: drop_tables(pg_database, prefix))
        elif kind == "document":
            backend = DocumentBackend(mongo_connection(mongo), collection_name=f"port_{uid()}")
            extra.append(backend.drop)
        elif kind == "graph":
            if graph_target.kind != "falkordb":
                pytest.skip("needs a graph per store (FalkorDB)")
            runner = graph_target.runner(f"port_{uid()}")
            backend = GraphBackend(runner=runner)
            extra.append(runner.drop)  # type: ignore[union-attr]
        else:
            raise ValueError(f"no store kind {kind!r}")
        store = EngineStore(backend)
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
