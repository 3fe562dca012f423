"""Helpers of the database instrumentation tests: names, captured events, an app run under
``lineage-instrument``. Kept out of ``conftest.py`` so tests import them from a module of their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from memory_capture import CapturedEvents

PG_ADMIN = "host=127.0.0.1 port=5432 dbname=test"
PG_NAMESPACE = "postgres://127.0.0.1:5432"

__all__ = ["IDENTITY", "PG_ADMIN", "PG_NAMESPACE", "Captured", "by_name", "run_instrumented"]

# ``transformations`` of an input field copied as is (``INSERT ... SELECT c.x``)
IDENTITY = [{"type": "DIRECT", "subtype": "IDENTITY", "masking": False}]


class Captured(CapturedEvents):
    def final(self, job_name: str) -> list[dict[str, Any]]:
        """The COMPLETE/FAIL events of ``job_name``."""
        return [
            e
            for e in self.events()
            if e["job"]["name"] == job_name and e["eventType"] in ("COMPLETE", "FAIL")
        ]


def by_name(datasets: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in datasets}


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


def run_instrumented(tmp_path, pg_db, app_text=APP, **extra):
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
