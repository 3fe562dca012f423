"""Fixtures shared by every test folder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from brokers import RabbitNode, one_node
from servers import FalkorDBServer, MongoTarget, falkordb_server, mongo_target

import lineage_sdk
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.sdk.exporters import InMemoryExporter


@pytest.fixture
def memory_exporter() -> Iterator[InMemoryExporter]:
    """Lineage configured for this test only, sending to memory; shut down afterwards."""
    exporter = InMemoryExporter()
    lineage_sdk.configure(LineageConfig(exporters=["memory"]), exporters=[exporter], strict=True)
    try:
        yield exporter
    finally:
        lineage_sdk.shutdown(10)


@pytest.fixture
def rabbit_node() -> Iterator[RabbitNode]:
    """A private RabbitMQ node for this test, to stop, kill and restart at will (~10 s to start);
    never the machine's shared broker. Killed and removed afterwards, even if the test fails."""
    with one_node() as node:
        yield node


@pytest.fixture(scope="session")
def mongo() -> Iterator[MongoTarget]:
    """A MongoDB-wire server for the whole session (SecantusDB unless LINEAGE_TEST_MONGODB_URI),
    shared by every folder that needs one."""
    with mongo_target() as target:
        yield target


@pytest.fixture(scope="session")
def falkordb() -> Iterator[FalkorDBServer]:
    """One FalkorDB for the session: its Redis protocol for the full store suites, its Bolt
    endpoint for the driver smoke tests (tests/servers.py says why)."""
    with falkordb_server(persistent=False) as server:
        yield server


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``-n 2 --dist loadgroup``, as ``./dev -s tests`` runs it), a module's
    tests stay on one worker, so module-scoped servers, browsers and dbt runs start once; the
    heavy tests (private RabbitMQ nodes and clusters, and the other ``slow`` scenarios) share one
    group, so two Erlang clusters never compete for the two cores."""

    def heavy(item: pytest.Item) -> bool:
        return bool(
            item.get_closest_marker("slow") or "rabbit_node" in getattr(item, "fixturenames", ())
        )

    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    heavy_modules = {module(item) for item in items if heavy(item)}
    for item in items:
        group = "heavy" if module(item) in heavy_modules else module(item)
        item.add_marker(pytest.mark.xdist_group(group))
