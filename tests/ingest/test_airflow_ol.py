"""A real producer end to end: Apache Airflow 2.10 with its OpenLineage provider runs a DAG of
two SQL tasks on a PostgreSQL database of the test's own (``airflow dags test``, a SQLite
metadata database in the test's folder), sending its events through ``OPENLINEAGE_URL`` to the
API on loopback over a memory store.

The DAG ``ol_check``: ``create_totals`` creates ``totals``, then ``fill_totals`` fills it from
``src`` (seeded by the test). The provider names the task jobs ``ol_check.<task>`` with a
``parent`` facet naming the DAG's job, and parses each task's SQL for its datasets. Airflow runs
from a venv of its own (see producer_env.py for why).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import pytest
from fastapi import Request, Response
from producer_env import producer_bin
from servers import postgres_database

from lineage_sdk.collector.api import ApiServer, create_app
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.config.schema import LineageConfig

# The first test may build the venv itself when the nox session did not (~90 s, more when busy).
pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(420)]

NS = "airflow"  # OPENLINEAGE_NAMESPACE: the namespace of the provider's jobs
PG = "postgres://127.0.0.1:5432"  # the namespace the provider gives PostgreSQL datasets
DAG = "ol_check"
DAG_FILE = f'''
import pendulum
from airflow import DAG
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

with DAG("{DAG}", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), schedule=None):
    create = SQLExecuteQueryOperator(
        task_id="create_totals", conn_id="lineage_pg", sql="CREATE TABLE totals (cid int, total numeric)"
    )
    fill = SQLExecuteQueryOperator(
        task_id="fill_totals",
        conn_id="lineage_pg",
        sql="INSERT INTO totals SELECT cid, sum(amount) FROM src GROUP BY cid",
    )
    create >> fill
'''
SEED = """
create table src (cid int not null, amount numeric(10, 2) not null);
insert into src values (1, 2.50), (1, 3.00), (2, 4.25);
"""
#: What the provider logs for each event its transport delivered (type, run id).
EMITTED = re.compile(r"Successfully emitted OpenLineage `(\w+)` event of id `([0-9a-f-]+)`")


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """A database of its own holding ``src``; its name. Dropped afterwards."""
    with postgres_database("lineage_airflow") as url:
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{name}") as conn:
            conn.execute(SEED)
        yield name


class Served:
    """The API on a loopback port over a memory store, and every POST's (path, status)."""

    def __init__(self) -> None:
        manager = LineageManager(LineageConfig(), stores=[EngineStore(MemoryBackend())])
        manager.connect_sync()
        self.manager = manager
        self.posts: list[tuple[str, int]] = []
        app = create_app(manager)

        @app.middleware("http")
        async def record(
            request: Request, call_next: Callable[[Request], Awaitable[Response]]
        ) -> Response:
            response = await call_next(request)
            if request.method == "POST":
                self.posts.append((request.url.path, response.status_code))
            return response

        self.server = ApiServer(app).start()

    def get(self, path: str, **params: Any) -> Any:
        response = httpx.get(f"{self.server.url}{path}", params=params, timeout=30)
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    api = Served()
    try:
        yield api
    finally:
        api.server.stop()
        api.manager.close_sync()


@pytest.fixture(scope="module")
def dag_run(
    database: str, served: Served, tmp_path_factory: pytest.TempPathFactory
) -> subprocess.CompletedProcess[str]:
    """``airflow db migrate`` then ``airflow dags test ol_check`` in a fresh AIRFLOW_HOME."""
    home = tmp_path_factory.mktemp("airflow")
    (home / "dags").mkdir()
    (home / "dags" / f"{DAG}.py").write_text(DAG_FILE, encoding="utf-8")
    airflow = str(producer_bin("airflow") / "airflow")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LINEAGE_", "OPENLINEAGE_", "AIRFLOW"))
    } | {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_LINEAGE_PG": f"postgresql://postgres@127.0.0.1:5432/{database}",
        "OPENLINEAGE_URL": served.server.url,
        "OPENLINEAGE_NAMESPACE": NS,
        # No usage reports to the internet (Airflow 2.10 sends them by default).
        "AIRFLOW__USAGE_DATA_COLLECTION__ENABLED": "False",
        "SCARF_ANALYTICS": "false",
        "DO_NOT_TRACK": "1",
    }

    def airflow_run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [airflow, *args], cwd=home, env=env, capture_output=True, text=True, timeout=240
        )

    migrated = airflow_run("db", "migrate")
    assert migrated.returncode == 0, migrated.stdout[-3000:] + migrated.stderr[-3000:]
    return airflow_run("dags", "test", DAG)


def _output(run: subprocess.CompletedProcess[str]) -> str:
    return run.stdout + run.stderr


def _ran(run: subprocess.CompletedProcess[str]) -> None:
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "DagRun Finished" in _output(run) and "state=success" in _output(run)


def _job(name: str) -> str:
    return f"job:{NS}:{name}"


def _dataset(database: str, table: str) -> str:
    return f"dataset:{PG}:{database}.public.{table}"


def test_every_event_the_provider_emits_is_accepted(dag_run, served, database):
    _ran(dag_run)
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{database}") as conn:
        rows = conn.execute("select cid, total from totals order by cid").fetchall()
    assert [(cid, float(total)) for cid, total in rows] == [(1, 5.5), (2, 4.25)]
    emitted = set(EMITTED.findall(_output(dag_run)))
    assert "Failed to emit" not in _output(dag_run)
    # Each task's START and COMPLETE, and the DAG run's COMPLETE (`dags test` reports no DAG
    # START to listeners): each POSTed once and accepted.
    assert len(emitted) == 5, _output(dag_run)[-3000:]
    assert served.posts == [("/api/v1/lineage", 201)] * len(emitted)
    stored = set()
    jobs = served.get(f"/api/v1/namespaces/{NS}/jobs")["jobs"]
    assert sorted(j["name"] for j in jobs) == [DAG, f"{DAG}.create_totals", f"{DAG}.fill_totals"]
    for job in jobs:
        assert job["latestRun"]["state"] == "COMPLETED"
        for run in served.get(f"/api/v1/namespaces/{NS}/jobs/{quote(job['name'])}/runs")["runs"]:
            events = served.get(f"/api/v1/jobs/runs/{run['id']}/events")["events"]
            stored |= {(e["eventType"], e["run"]["runId"]) for e in events}
    assert stored == emitted


def test_task_jobs_carry_their_dag_as_parent(dag_run, served):
    _ran(dag_run)
    for task in ("create_totals", "fill_totals"):
        job = served.get(f"/api/v1/namespaces/{NS}/jobs/{DAG}.{task}")
        assert job.get("parentJobName") == DAG, sorted(job)
    assert served.get(f"/api/v1/namespaces/{NS}/jobs/{DAG}").get("parentJobName") is None


def _edges(graph: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (edge["origin"], edge["destination"])
        for node in graph["graph"]
        for edge in node["inEdges"] + node["outEdges"]
    }


def test_the_graph_from_a_task_is_marquez_walk(dag_run, served, database):
    """No ``direction``: Marquez's walk (``LineageDao.getLineage``) takes every job sharing a
    dataset with one already found, whichever way the data flows; so from ``fill_totals`` it
    reaches ``create_totals`` through ``totals``, which both write, and from ``create_totals``
    the same graph. The DAG's own job shares no dataset and is not in it."""
    _ran(dag_run)
    src, totals = _dataset(database, "src"), _dataset(database, "totals")
    create, fill = _job(f"{DAG}.create_totals"), _job(f"{DAG}.fill_totals")
    for start in (fill, create):
        graph = served.get("/api/v1/lineage", nodeId=start, depth=5)
        assert {n["id"] for n in graph["graph"]} == {src, totals, create, fill}, start
        assert _edges(graph) == {(src, fill), (fill, totals), (create, totals)}, start
    # A direction keeps the directed walk: nothing flows between the two tasks.
    both = served.get("/api/v1/lineage", nodeId=fill, depth=5, direction="both")
    assert {n["id"] for n in both["graph"]} == {src, totals, fill}
