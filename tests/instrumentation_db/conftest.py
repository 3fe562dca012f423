"""Fixtures for the database instrumentors: lineage to memory, a PostgreSQL database of our own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from leftovers import suite_name

from lineage_instrumentation.db import clear_cache
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.sdk.exporters import InMemoryExporter
from lineage_sdk.sdk.provider import configure, shutdown

from .db_helpers import PG_ADMIN, Captured


@pytest.fixture
def captured() -> Iterator[Captured]:
    """Lineage configured to memory (namespace ``tests.db``); shut down afterwards."""
    exporter = InMemoryExporter()
    config = LineageConfig.model_validate(
        {"exporters": ["memory"], "producer": {"job_namespace": "tests.db"}}
    )
    configure(config, exporters=[exporter], strict=True)
    clear_cache()
    yield Captured(exporter)
    shutdown(10.0)


@pytest.fixture
def instrumented(captured: Captured) -> Iterator[Any]:
    """``instrumented(Instrumentor, **kwargs)`` instruments for this test only."""
    done: list[Any] = []

    def do(cls: Any, **kwargs: Any) -> Any:
        instrumentor = cls()
        instrumentor.uninstrument()
        assert instrumentor.instrument(**kwargs)
        done.append(instrumentor)
        return instrumentor

    yield do
    for instrumentor in done:
        instrumentor.uninstrument()


@pytest.fixture(scope="session")
def pg_db() -> Iterator[str]:
    """A database of our own on the shared PostgreSQL, with two source tables; dropped after."""
    import psycopg

    name = suite_name("lineage_i15")  # tagged: the session-end check finds a leftover
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    dsn = f"host=127.0.0.1 port=5432 dbname={name}"
    try:
        with psycopg.connect(dsn) as conn:
            conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, region text)")
            conn.execute("CREATE TABLE orders (id int PRIMARY KEY, customer_id int, amount int)")
            conn.execute("CREATE TABLE order_report (order_id int, customer text, amount int)")
            conn.execute("INSERT INTO customers VALUES (1, 'ann', 'eu'), (2, 'bob', 'us')")
            conn.execute("INSERT INTO orders VALUES (10, 1, 5), (11, 2, 7), (12, 1, 9)")
        yield name
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
