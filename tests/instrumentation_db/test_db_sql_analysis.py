"""The SQL analysis alone (pure logic): naming, placeholders, facets, the cache and its counters."""

from __future__ import annotations

import pytest
from conformance import validate_facet

from lineage_instrumentation.db import _sql
from lineage_instrumentation.db._naming import postgres_target, sqlite_target
from lineage_instrumentation.db._sql import analyze, clear_cache, sql_stats

PG = postgres_target("db.example", None, "shop")
PRODUCER = "https://example.com/test"


@pytest.fixture(autouse=True)
def fresh_cache():
    clear_cache()
    yield
    clear_cache()


def names(datasets):
    return [d.name for d in datasets]


def test_postgres_names_placeholders_and_case():
    found = analyze(
        'UPDATE Sales.Totals SET n = %(n)s WHERE id IN (SELECT id FROM "Raw"."Events" '
        "WHERE tag LIKE 'a%%' AND x = %s)",
        PG,
        PRODUCER,
    )
    assert found.error is None
    assert names(found.inputs) == ["shop.Raw.Events"]  # quoted: kept as written
    assert names(found.outputs) == ["shop.sales.totals"]  # unquoted: folded, as PostgreSQL does
    assert found.outputs[0].namespace == "postgres://db.example:5432"


def test_system_catalogs_are_not_datasets():
    found = analyze(
        "SELECT t.oid FROM pg_type t JOIN information_schema.columns c ON true JOIN orders o ON true",
        PG,
        PRODUCER,
    )
    assert names(found.inputs) == ["shop.public.orders"]


def test_column_lineage_and_schema_facets_conform():
    found = analyze(
        "INSERT INTO report (id, total) SELECT o.id, o.a + c.b AS nope "
        "FROM orders o JOIN customers c ON c.id = o.cid",
        PG,
        PRODUCER,
    )
    [out] = found.outputs
    lineage = out.facets["columnLineage"]
    validate_facet("columnLineage", lineage)
    validate_facet("schema", out.facets["schema"])
    # by position: the second expression writes "total", whatever its alias
    assert set(lineage["fields"]) == {"id", "total"}
    assert {f["name"] for f in lineage["fields"]["total"]["inputFields"]} == {
        "shop.public.orders",
        "shop.public.customers",
    }


def test_unreadable_statements_are_counted_once_and_cached(monkeypatch):
    monkeypatch.setattr(_sql, "CACHE_SIZE", 3)
    assert analyze("DO $$ BEGIN PERFORM 1; END $$", PG, PRODUCER).error is not None
    assert analyze("DO $$ BEGIN PERFORM 1; END $$", PG, PRODUCER).error is not None
    for n in range(5):
        analyze(f"SELECT * FROM t{n}", PG, PRODUCER)
    stats = sql_stats()
    assert (stats.unparseable, stats.parsed, stats.cache_hits, stats.cached) == (1, 5, 1, 3)


def test_sqlite_naming(tmp_path):
    target = sqlite_target(str(tmp_path / "a.db"))
    assert target is not None
    found = analyze("INSERT INTO aux.t SELECT * FROM s WHERE x = ?", target, PRODUCER)
    assert found.outputs[0].namespace == f"sqlite://{tmp_path / 'a.db'}"
    assert names(found.inputs) == ["main.s"] and names(found.outputs) == ["aux.t"]
    assert sqlite_target(":memory:") is None and sqlite_target("file::memory:?cache=shared") is None
