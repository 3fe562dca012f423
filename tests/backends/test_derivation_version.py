"""A backend keeps the version of the rules its derived rows were made by, and the engine derives
them again at open when it is older (``DERIVATION_VERSION``).

On every backend that keeps rows across opens (SQLite, PostgreSQL, SecantusDB, FalkorDB): a new
store is marked with today's version; a store whose mark is older (or 0, a re-derivation a crash
interrupted) gets exactly the rows a fresh derivation of its events gives, whatever rows it held;
a store marked by newer rules is kept as it is.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from ingest.every_store import every_store
from servers import FalkorDBServer, MongoTarget, postgres_database
from stores_nosql.nosql_events import chain, column_lineage, records, run_event

from lineage_sdk.collector.backend import (
    EdgeRow,
    LineageBackend,
    NodeKind,
    Provisioned,
    Rows,
    Touched,
)
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.engine.derive import DERIVATION_VERSION
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.collector.stores.sql import SqlStore

PARENT_RUN = "0190aaaa-0000-7000-8000-000000000001"


def _events() -> list[dict[str, Any]]:
    """A chain of runs, a parent with a child, column lineage: every kind of derived row."""
    cols = column_lineage({"c": [("ns1", "d1", "a")]})
    return [
        *chain("ns1", 6),
        run_event(job="orchestrator", namespace="ns1", run_id=PARENT_RUN, seconds=0.5),
        run_event(
            job="task",
            namespace="ns1",
            parent=(PARENT_RUN, "ns1", "orchestrator"),
            inputs=[("ns1", "d1")],
            outputs=[("ns3", "wide")],
            dataset_facets={"columnLineage": cols},
            seconds=40.0,
        ),
    ]


def stored_rows(backend: LineageBackend) -> dict[str, list[str]]:
    """Every derived row the backend holds of the nodes it lists, as sorted text."""
    kinds: tuple[NodeKind, NodeKind] = ("JOB", "DATASET")
    nodes = [n for kind in kinds for n in backend.nodes(kind)]
    keys = {kind: [n.key for n in nodes if n.kind == kind] for kind in kinds}
    return {
        "nodes": sorted(map(repr, nodes)),
        "edges": sorted(
            repr(e) for io in ("in", "out") for e in backend.edges("JOB", keys["JOB"], io)
        ),
        "runs": sorted(map(repr, backend.runs())),
        "mentions": sorted(repr(m) for kind in kinds for m in backend.mentions(kind, keys[kind])),
        "columns": sorted(map(repr, backend.column_edges())),
    }


@pytest.fixture
def backends(
    tmp_path: Path, pg_url: str, mongo: MongoTarget, falkordb: FalkorDBServer
) -> Iterator[dict[str, EngineStore]]:
    with every_store(tmp_path, pg_url, mongo, falkordb, "dv") as stores:
        del stores["memory"]  # keeps nothing across opens: nothing to version
        yield stores


def _versioned(store: EngineStore) -> Provisioned:
    assert isinstance(store.backend, Provisioned)
    return store.backend


@pytest.mark.postgres
@pytest.mark.mongodb
@pytest.mark.neo4j
def test_rows_of_older_rules_are_derived_again_at_open(
    backends: dict[str, EngineStore], caplog: pytest.LogCaptureFixture
) -> None:
    events = _events()
    fresh = EngineStore(MemoryBackend())
    fresh.open()
    fresh.write_batch(records(*events))
    expected = stored_rows(fresh.backend)
    assert all(expected.values())  # the corpus makes rows of every type
    # Version 8's row: the task's run names its job in its parent mention (stored rows of an
    # earlier version lack it; they are derived again below).
    assert any("'parent'" in m and "task" in m for m in expected["mentions"])
    stale = EdgeRow(("ns1", "gone"), ("ns1", "d1"), "in", datetime(2020, 1, 1, tzinfo=UTC), None)
    for name, store in backends.items():
        store.open()
        assert _versioned(store).derivation() == DERIVATION_VERSION, name  # a new store
        store.write_batch(records(*events))
        assert stored_rows(store.backend) == expected, name
        # Rows of other rules: some lost, one that today's rules do not make; the mark older.
        store.backend.replace(Touched(every=True), Rows(edges=(stale,)))
        assert stored_rows(store.backend) != expected, name
        _versioned(store).mark_derivation(DERIVATION_VERSION - 1)
        store.close()

        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="lineage_sdk.collector.engine.store"):
            store.open()
        assert stored_rows(store.backend) == expected, name
        assert _versioned(store).derivation() == DERIVATION_VERSION, name
        said = [r.getMessage() for r in caplog.records]
        assert any(f"deriving them again by version {DERIVATION_VERSION}" in m for m in said), said

        # Marked 0: a re-derivation that a crash interrupted after removing the rows.
        store.backend.replace(Touched(every=True), Rows())
        _versioned(store).mark_derivation(0)
        store.close()
        store.open()
        assert stored_rows(store.backend) == expected, name

        # Opened again at today's version: nothing is derived again, nothing said.
        caplog.clear()
        store.close()
        with caplog.at_level(logging.WARNING, logger="lineage_sdk.collector.engine.store"):
            store.open()
        assert not caplog.records, name
        store.close()


@pytest.mark.postgres
@pytest.mark.mongodb
@pytest.mark.neo4j
def test_rows_of_newer_rules_are_kept_as_they_are(
    backends: dict[str, EngineStore], caplog: pytest.LogCaptureFixture
) -> None:
    events = _events()
    for name, store in backends.items():
        store.open()
        store.write_batch(records(*events))
        held = stored_rows(store.backend)
        _versioned(store).mark_derivation(DERIVATION_VERSION + 1)
        store.close()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="lineage_sdk.collector.engine.store"):
            store.open()
        assert stored_rows(store.backend) == held, name
        assert _versioned(store).derivation() == DERIVATION_VERSION + 1, name
        said = " ".join(r.getMessage() for r in caplog.records)
        assert f"newer rules (version {DERIVATION_VERSION + 1}" in said, name
        store.close()


def test_the_memory_backend_keeps_no_version() -> None:
    """Nothing survives its process, so nothing is derived again: it is no Provisioned."""
    assert not isinstance(MemoryBackend(), Provisioned)


#: Tables of the sql backend's earlier layouts, as they were made (version 7: mentions keyed by
#: source, and statements again in a table keyed by node; version 6: statements a row each).
_MENTION_BY = (
    "CREATE TABLE lineage_mention_by (source VARCHAR(5), source_id TEXT, kind VARCHAR(9), "
    "node_key VARCHAR(32), role VARCHAR(8), first_seen TEXT, "
    "PRIMARY KEY (source, source_id, kind, node_key, role))"
)
_EARLIER_LAYOUTS = {
    6: (
        _MENTION_BY,
        "CREATE TABLE lineage_stated (kind VARCHAR(9), node_key TEXT, first_seen TEXT, "
        "source_id TEXT, detail TEXT, PRIMARY KEY (kind, node_key, first_seen, source_id))",
    ),
    7: (
        _MENTION_BY,
        "CREATE TABLE lineage_statement (source VARCHAR(5), source_id TEXT, kind VARCHAR(9), "
        "node_key VARCHAR(32), role VARCHAR(8), first_seen TEXT, detail TEXT, "
        "PRIMARY KEY (kind, node_key, source, source_id, role))",
    ),
}


@pytest.mark.parametrize("version", sorted(_EARLIER_LAYOUTS))
@pytest.mark.parametrize(
    "dialect", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_sql_database_of_an_earlier_layout_is_derived_again_into_the_mentions_table(
    dialect: str, version: int, tmp_path: Path
) -> None:
    """Versions 6 and 7 kept statements apart from the mentions (``stated``, then
    ``statement``) beside a ``mention_by`` table: ``missing`` names the new ``mentions`` table,
    ``open`` drops the old ones and derives the rows again (the layout alone makes it derive
    again: version 7 was the derivation version of its day), the same rows a fresh derivation
    makes."""
    events = _events()
    fresh = EngineStore(MemoryBackend())
    fresh.open()
    fresh.write_batch(records(*events))
    expected = stored_rows(fresh.backend)
    with contextlib.ExitStack() as stack:
        if dialect == "sqlite":
            url = f"sqlite:///{tmp_path}/v{version}.db"
        else:
            url = stack.enter_context(postgres_database(f"lineage_v{version}"))
        store = SqlStore(url)
        store.open()
        store.write_batch(records(*events))
        _versioned(store).mark_derivation(version)
        store.close()
        engine = sa.create_engine(url)
        stack.callback(engine.dispose)
        with engine.begin() as conn:  # the earlier layout
            conn.exec_driver_sql("DROP TABLE lineage_mentions")
            for create in _EARLIER_LAYOUTS[version]:
                conn.exec_driver_sql(create)
        assert store.backend.missing() == ["table lineage_mentions"]

        store.open()
        try:
            assert stored_rows(store.backend) == expected
            assert _versioned(store).derivation() == DERIVATION_VERSION
            assert store.backend.missing() == []
        finally:
            store.close()
        with engine.connect() as conn:
            tables = set(sa.inspect(conn).get_table_names())
        assert not tables & {"lineage_mention_by", "lineage_stated", "lineage_statement"}
