"""Fixtures for the Data Lineage API tests: the real servers behind the documented file's two
connection names, the file as the process's configuration, and a reader of the exchange.

The connection addresses come from ``LINEAGE_CONNECTIONS_<NAME>_URI``, as a deployment of the
documented file gives them (the file itself names no address).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # documented_helpers, for the test module

from documented_helpers import DOCUMENTED_TOML, RABBIT_URL, ExchangeReader, GraphServer
from servers import MongoTarget, falkordb_server, neo4j_from_env

import lineage_sdk

_OURS = (
    "LINEAGE_CONFIG",
    "LINEAGE_RABBITMQ_URL",
    "LINEAGE_CONNECTIONS_DEFAULT_MONGO_URI",
    "LINEAGE_CONNECTIONS_ANALYTICS_GRAPH_URI",
    "LINEAGE_CONNECTIONS_ANALYTICS_GRAPH_USERNAME",
    "LINEAGE_CONNECTIONS_ANALYTICS_GRAPH_PASSWORD",
)


@pytest.fixture(scope="session")
def mongo_server(mongo: MongoTarget) -> MongoTarget:
    """The session's MongoDB-wire server (tests/conftest.py)."""
    return mongo


@pytest.fixture(scope="session")
def graph_server() -> Iterator[GraphServer]:
    """A real Neo4j when LINEAGE_TEST_NEO4J_URI is set, else FalkorDB's Bolt endpoint (user-less,
    no ``database``, as the Bolt tests of tests/stores_nosql connect)."""
    env = neo4j_from_env()
    if env is not None:
        uri, user, password, _database = env
        yield GraphServer(uri, user, password)
        return
    with falkordb_server(persistent=False) as server:
        yield GraphServer(server.bolt_uri, falkordb=server)


@pytest.fixture
def documented_file(tmp_path: Path) -> Path:
    path = tmp_path / "lineage.toml"
    path.write_text(DOCUMENTED_TOML)
    return path


@pytest.fixture
def documented_env(
    monkeypatch: pytest.MonkeyPatch,
    documented_file: Path,
    mongo_server: MongoTarget,
    graph_server: GraphServer,
) -> Path:
    """The documented file as the process's configuration, its connections from the environment."""
    monkeypatch.setenv("LINEAGE_CONFIG", str(documented_file))
    monkeypatch.setenv("LINEAGE_RABBITMQ_URL", RABBIT_URL)  # a private vhost, never "/"
    monkeypatch.setenv("LINEAGE_CONNECTIONS_DEFAULT_MONGO_URI", mongo_server.uri)
    monkeypatch.setenv("LINEAGE_CONNECTIONS_ANALYTICS_GRAPH_URI", graph_server.uri)
    if graph_server.username is not None:
        monkeypatch.setenv("LINEAGE_CONNECTIONS_ANALYTICS_GRAPH_USERNAME", graph_server.username)
        monkeypatch.setenv(
            "LINEAGE_CONNECTIONS_ANALYTICS_GRAPH_PASSWORD", graph_server.password or ""
        )
    for name in [n for n in os.environ if n.startswith("LINEAGE_")]:
        if name not in _OURS and not name.startswith("LINEAGE_TEST_"):
            monkeypatch.delenv(name)  # only the file and the connections configure these tests
    graph_server.warm_up()
    return documented_file


@pytest.fixture
def lineage_from_documented_file(documented_env: Path) -> Iterator[Path]:
    """Lineage set up afresh from the documented file (another test may have set it up before in
    this process), shut down afterwards like every SDK test."""
    lineage_sdk.configure(strict=True)
    try:
        yield documented_env
    finally:
        lineage_sdk.shutdown(10)


@pytest.fixture
def exchange_reader() -> Iterator[ExchangeReader]:
    reader = ExchangeReader()
    try:
        yield reader
    finally:
        reader.close()
