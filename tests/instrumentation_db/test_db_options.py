"""Options of the database instrumentors, async psycopg, and runs that are spans of another tracer."""

from __future__ import annotations

import asyncio
from importlib.metadata import entry_points

import psycopg
import pytest
from opentelemetry.sdk.trace import TracerProvider

from lineage_instrumentation.auto import ENTRY_POINT_GROUP, load_instrumentors
from lineage_instrumentation.db import DbInstrumentationConfig
from lineage_instrumentation.db.psycopg3 import PsycopgInstrumentor
from lineage_instrumentation.db.sqlite import Sqlite3Instrumentor
from lineage_sdk.config.loader import load_config
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.sdk.exporters import InMemoryExporter
from lineage_sdk.sdk.provider import configure, shutdown

from .db_helpers import Captured


def test_bad_outside_run_is_a_clear_error(captured):
    instrumentor = PsycopgInstrumentor()
    instrumentor.uninstrument()
    with pytest.raises(
        ConfigError, match=r"instrumentation\.psycopg\.outside_run.*ignore or run_per_transaction"
    ):
        instrumentor.instrument(outside_run="sometimes")
    assert not instrumentor.is_instrumented
    config = load_config(
        environ={
            "LINEAGE_EXPORTERS": "memory",
            "LINEAGE_INSTRUMENTATION_SQLITE3_OUTSIDE_RUN": "always",
        }
    )
    with pytest.raises(ConfigError) as info:
        config.section("instrumentation.sqlite3", DbInstrumentationConfig)
    assert "LINEAGE_INSTRUMENTATION_SQLITE3_OUTSIDE_RUN" in str(info.value)
    assert "run_per_transaction" in str(info.value)


def test_the_table_sets_the_mode_and_the_switch_turns_one_off(tmp_path):
    config = load_config(
        environ={
            "LINEAGE_EXPORTERS": "memory",
            "LINEAGE_INSTRUMENTATION_SQLITE3_OUTSIDE_RUN": "run_per_transaction",
            "LINEAGE_INSTRUMENTATION_SQLITE3_JOB_NAME": "from_env",
        }
    )
    exporter = InMemoryExporter()
    configure(config, exporters=[exporter], strict=True)
    loaded: list[str] = []
    try:
        loaded = load_instrumentors(["psycopg", "sqlalchemy", "pymongo", "pika"])
        assert "sqlite3" in loaded
        assert not {"psycopg", "sqlalchemy", "pymongo", "pika"} & set(loaded)
        import sqlite3

        conn = sqlite3.connect(tmp_path / "t.db")
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.commit()
        conn.close()
        events = Captured(exporter).events()
        assert [e["eventType"] for e in events if e["job"]["name"] == "from_env"][-1] == "COMPLETE"
        assert [d["name"] for d in events[-1]["outputs"]] == ["main.t"]
    finally:
        for entry_point in entry_points(group=ENTRY_POINT_GROUP):
            if entry_point.name in loaded:
                entry_point.load()().uninstrument()
        shutdown(5.0)


@pytest.mark.postgres
def test_async_psycopg_and_a_span_of_another_tracer(pg_db, captured, instrumented):
    instrumented(PsycopgInstrumentor)
    # The application's own tracer provider: lineage runs on it (spans naming a job are runs).
    provider = TracerProvider()
    configure(
        LineageConfig.model_validate(
            {"exporters": ["memory"], "producer": {"job_namespace": "tests.db"}}
        ),
        exporters=[captured.exporter],
        tracer_provider=provider,
        strict=True,
    )
    tracer = provider.get_tracer("app")

    async def work() -> int:
        async with await psycopg.AsyncConnection.connect(
            f"host=127.0.0.1 port=5432 dbname={pg_db}"
        ) as conn:
            cur = await conn.execute("SELECT count(*) FROM customers")
            return (await cur.fetchone())[0]

    with tracer.start_as_current_span("nightly", attributes={"openlineage.job.name": "otel_job"}):
        assert asyncio.run(work()) == 2
    [complete] = captured.final("otel_job")
    assert [d["name"] for d in complete["inputs"]] == [f"{pg_db}.public.customers"]


def test_a_bad_table_skips_that_instrumentor_with_one_clear_line(caplog):
    config = load_config(
        environ={
            "LINEAGE_EXPORTERS": "memory",
            "LINEAGE_INSTRUMENTATION_SQLITE3_OUTSIDE_RUN": "always",
        }
    )
    configure(config, exporters=[InMemoryExporter()], strict=True)
    loaded: list[str] = []
    try:
        loaded = load_instrumentors(["psycopg", "sqlalchemy", "pymongo", "pika"])
        assert "sqlite3" not in loaded
        assert not Sqlite3Instrumentor().is_instrumented
        [line] = [r.getMessage() for r in caplog.records if "sqlite3" in r.getMessage()]
        assert "LINEAGE_INSTRUMENTATION_SQLITE3_OUTSIDE_RUN" in line and "always" in line
    finally:
        for entry_point in entry_points(group=ENTRY_POINT_GROUP):
            if entry_point.name in loaded:
                entry_point.load()().uninstrument()
        shutdown(5.0)


def test_libraries_are_patched_when_the_program_imports_them():
    """Instrumenting imports nothing: SQLAlchemy and pymongo are patched on their first import."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from lineage_instrumentation.db.pymongo_monitor import PymongoInstrumentor as P\n"
        "from lineage_instrumentation.db.sqlalchemy_events import SQLAlchemyInstrumentor as S\n"
        "assert S().instrument() and P().instrument()\n"
        "assert 'sqlalchemy' not in sys.modules and 'pymongo' not in sys.modules\n"
        "assert not S().is_patched\n"
        "import sqlalchemy, sqlalchemy.event\n"
        "assert S().is_patched and not P().is_patched\n"
        "assert sqlalchemy.event.contains(sqlalchemy.engine.Engine, 'commit', "
        "sys.modules['lineage_instrumentation.db.sqlalchemy_events']._commit)\n"
        "assert S().uninstrument() and P().uninstrument()\n"
        "import pymongo\n"
        "assert not P().is_patched\n"
        "print('ok')\n"
    )
    env = {"LINEAGE_ENABLED": "false", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
