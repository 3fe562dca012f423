"""Fixtures for the ingest tests: the document and graph servers for the session, and stores of
every kind (sql on SQLite, logging, document on SecantusDB, graph on FalkorDB through its Redis
protocol) behind a :class:`LineageManager`, as ``lineage-collector serve`` and the consumer use
them. Everything is real; nothing is mocked."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# collector_helpers (broker helpers, collector thread), test_models_fast (its event generators)
# and this folder's modules.
_TESTS = Path(__file__).resolve().parents[1]
for _folder in (_TESTS / "collector", _TESTS / "models", Path(__file__).resolve().parent):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

from servers import FalkorDBServer, MongoTarget, falkordb_server, mongo_target  # noqa: E402


@pytest.fixture(scope="session")
def mongo() -> Iterator[MongoTarget]:
    """A MongoDB-wire server for the session (SecantusDB unless LINEAGE_TEST_MONGODB_URI)."""
    with mongo_target() as target:
        yield target


@pytest.fixture(scope="session")
def falkordb() -> Iterator[FalkorDBServer]:
    """FalkorDB for the session, written through its Redis protocol (Bolt crashes on big
    parameters, see tests/servers.py)."""
    with falkordb_server(persistent=False) as server:
        yield server
