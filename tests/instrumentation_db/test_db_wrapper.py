"""``lineage-instrument python app.py``: lineage from an app.py with no lineage code in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conformance import validate_event

from .conftest import PG_NAMESPACE

pytestmark = pytest.mark.postgres

APP = textwrap.dedent(
    """
    import sys
    import psycopg

    with psycopg.connect(sys.argv[1]) as conn:
        conn.execute(
            "INSERT INTO order_report (order_id, customer, amount) "
            "SELECT o.id AS order_id, c.name AS customer, o.amount AS amount "
            "FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.amount > %s",
            (0,),
        )
    print("app done")
    """
)


def _run(tmp_path, pg_db, app_text=APP, **extra):
    """Events of ``app_text`` run under ``lineage-instrument`` (to a file), checked to exit 0."""
    app = tmp_path / "app.py"
    app.write_text(app_text)
    events = tmp_path / "events.jsonl"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LINEAGE_", "OPENLINEAGE_")) and k != "PYTHONPATH"
    }
    env.update(
        LINEAGE_EXPORTERS="file",
        LINEAGE_FILE_PATH=str(events),
        LINEAGE_PRODUCER_JOB_NAMESPACE="tests.db.sub",
        LINEAGE_INSTRUMENTATION_PSYCOPG_OUTSIDE_RUN="run_per_transaction",
        **extra,
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "lineage_instrumentation.wrapper",
            sys.executable,
            str(app),
            f"host=127.0.0.1 port=5432 dbname={pg_db}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "app done"
    lines = events.read_text().splitlines() if events.exists() else []
    return [json.loads(line) for line in lines]


def test_lineage_instrument_records_an_uninstrumented_app(tmp_path, pg_db):
    events = _run(tmp_path, pg_db)
    for event in events:
        validate_event(event)
    [complete] = [e for e in events if e["eventType"] == "COMPLETE"]
    assert complete["job"] == {
        "namespace": "tests.db.sub",
        "name": "app",
        "facets": complete["job"]["facets"],
    }
    assert sorted(d["name"] for d in complete["inputs"]) == [
        f"{pg_db}.public.customers",
        f"{pg_db}.public.orders",
    ]
    [out] = complete["outputs"]
    assert (out["namespace"], out["name"]) == (PG_NAMESPACE, f"{pg_db}.public.order_report")
    assert set(out["facets"]["columnLineage"]["fields"]) == {"order_id", "customer", "amount"}


def test_disabled_instrumentation_records_nothing(tmp_path, pg_db):
    assert _run(tmp_path, pg_db, LINEAGE_DISABLED_INSTRUMENTATIONS="sqlite3,psycopg") == []
