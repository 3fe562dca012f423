"""A real producer end to end: ``dbt-ol run`` on a small dbt project (tests/ingest/dbt_project)
against the PostgreSQL on 127.0.0.1:5432, sending its events through ``OPENLINEAGE_URL`` to a
real ``lineage-collector serve`` on loopback.

The project has two source tables, two staging models and a model joining them, so dbt-ol emits
table lineage for every model and a ``columnLineage`` facet (parsed by openlineage-sql from the
compiled SQL) for the join. dbt runs from a venv of its own (see producer_env.py for why).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import pytest
from producer_env import producer_bin
from serve_process import clean_env, serve_process

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

PROJECT = Path(__file__).resolve().parent / "dbt_project"
PG = "postgres://127.0.0.1:5432"  # the namespace dbt-ol gives PostgreSQL datasets
SEED = """
create schema raw;
create table raw.customers (id int primary key, name text not null, country text);
create table raw.orders (id int primary key, customer_id int not null, amount numeric(10, 2));
insert into raw.customers values (1, 'Ada', 'UK'), (2, 'Grace', 'US');
insert into raw.orders values (10, 1, 5.00), (11, 1, 7.50), (12, 2, 3.25);
"""


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """A database of its own with the two source tables; dropped afterwards."""
    name = f"lineage_dbt_{uuid.uuid4().hex[:10]}"
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    try:
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{name}") as conn:
            conn.execute(SEED)
        yield name
    finally:
        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``lineage-collector serve`` on a loopback port over a fresh SQLite store; its URL."""
    tmp = tmp_path_factory.mktemp("dbt_serve")
    env = {"LINEAGE_STORE_BACKEND": "sql", "LINEAGE_STORE_SQL_URL": f"sqlite:///{tmp}/lineage.db"}
    with serve_process(tmp, env=env, wait_s=30) as (url, _):
        yield url


@pytest.fixture(scope="module")
def dbt_run(
    database: str, serve: str, tmp_path_factory: pytest.TempPathFactory
) -> subprocess.CompletedProcess[str]:
    """``dbt-ol run`` over a copy of the project (dbt writes target/ and logs/ beside it)."""
    project = tmp_path_factory.mktemp("dbt") / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("target", "logs"))
    bin_dir = producer_bin("dbt")
    env = clean_env() | {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",  # dbt-ol runs `dbt`
        "OPENLINEAGE_URL": serve,
        "DBT_DATABASE": database,
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",  # no tracking calls to the internet
        "DO_NOT_TRACK": "1",
    }
    return subprocess.run(
        [str(bin_dir / "dbt-ol"), "run", "--profiles-dir", ".", "--project-dir", "."],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )


def _get(url: str, path: str, **params: Any) -> Any:
    response = httpx.get(f"{url}{path}", params=params, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def _jobs_upstream(graph: dict[str, Any], job: str) -> set[str]:
    """Names of the datasets the graph shows flowing into ``job``."""
    node = next(n for n in graph["graph"] if n["id"] == job)
    return {edge["origin"].split(":", 1)[1].rsplit(":", 1)[1] for edge in node["inEdges"]}


def test_dbt_ol_run_lands_every_event(dbt_run, serve):
    assert dbt_run.returncode == 0, dbt_run.stdout[-3000:] + dbt_run.stderr[-3000:]
    output = dbt_run.stdout + dbt_run.stderr
    assert "PASS=3" in output and "Emitted 8 OpenLineage events" in output
    # One START and one COMPLETE per model and for the whole dbt run: all accepted and stored.
    jobs = _get(serve, f"/api/v1/namespaces/{quote('dbt', safe='')}/jobs")["jobs"]
    models = {j["name"].rsplit(".", 1)[1]: j for j in jobs if ".shop." in j["name"]}
    assert sorted(models) == ["customer_orders", "stg_customers", "stg_orders"]
    for job in models.values():
        assert job["latestRun"]["state"] == "COMPLETED"


def test_upstream_lineage_of_the_models(dbt_run, serve, database):
    assert dbt_run.returncode == 0, dbt_run.stdout[-3000:]
    target = f"dataset:{PG}:{database}.analytics.customer_orders"
    graph = _get(serve, "/api/v1/lineage", nodeId=target, direction="upstream", depth=5)
    ids = {n["id"] for n in graph["graph"]}
    model = f"job:dbt:{database}.analytics.shop."
    assert {
        target,
        f"{model}customer_orders",
        f"dataset:{PG}:{database}.analytics.stg_customers",
        f"dataset:{PG}:{database}.analytics.stg_orders",
        f"{model}stg_customers",
        f"{model}stg_orders",
        f"dataset:{PG}:{database}.raw.customers",
        f"dataset:{PG}:{database}.raw.orders",
    } <= ids
    assert _jobs_upstream(graph, f"{model}customer_orders") == {
        f"{database}.analytics.stg_customers",
        f"{database}.analytics.stg_orders",
    }
    assert _jobs_upstream(graph, f"{model}stg_customers") == {f"{database}.raw.customers"}
    assert _jobs_upstream(graph, f"{model}stg_orders") == {f"{database}.raw.orders"}
    # Upstream only: nothing downstream of the joined model is in the answer.
    root = next(n for n in graph["graph"] if n["id"] == target)
    assert root["outEdges"] == []


def test_column_lineage_of_the_join_is_stored_as_sent(dbt_run, serve, database):
    assert dbt_run.returncode == 0, dbt_run.stdout[-3000:]
    job = f"{database}.analytics.shop.customer_orders"
    runs = _get(serve, f"/api/v1/namespaces/dbt/jobs/{quote(job, safe='')}/runs")["runs"]
    assert len(runs) == 1
    events = _get(serve, f"/api/v1/jobs/runs/{runs[0]['id']}/events")["events"]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    (output,) = events[1]["outputs"]
    assert (output["namespace"], output["name"]) == (PG, f"{database}.analytics.customer_orders")
    facet = output["facets"]["columnLineage"]

    def came_from(table: str, field: str) -> dict[str, Any]:
        return {
            "inputFields": [
                {
                    "namespace": PG,
                    "name": f"{database}.analytics.{table}",
                    "field": field,
                    "transformations": [],
                }
            ]
        }

    assert facet["fields"] == {
        "customer_id": came_from("stg_customers", "customer_id"),
        "customer_name": came_from("stg_customers", "customer_name"),
        "order_count": came_from("stg_orders", "order_id"),
        "total_amount": came_from("stg_orders", "amount"),
    }
    assert facet["_schemaURL"].endswith(
        "ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet"
    )
    # The schema facet the page and the dataset API read fields from came along too.
    assert [f["name"] for f in output["facets"]["schema"]["fields"]] == [
        "customer_id",
        "customer_name",
        "order_count",
        "total_amount",
    ]


def test_column_lineage_of_the_join_through_the_api(dbt_run, serve, database):
    """Through ``GET /api/v1/column-lineage`` (Marquez's shape), where the server has it."""
    assert dbt_run.returncode == 0, dbt_run.stdout[-3000:]
    if "/api/v1/column-lineage" not in _get(serve, "/openapi.json")["paths"]:
        pytest.skip("this server has no GET /api/v1/column-lineage")
    field = f"datasetField:{PG}:{database}.analytics.customer_orders:total_amount"
    graph = _get(serve, "/api/v1/column-lineage", nodeId=field, depth=5)["graph"]
    by_id = {node["id"]: node for node in graph}

    def upstream(node_id: str) -> set[str]:
        edges = by_id[node_id]["inEdges"]
        return {e["destination"] if e["origin"] == node_id else e["origin"] for e in edges}

    stg = f"datasetField:{PG}:{database}.analytics.stg_orders:amount"
    raw = f"datasetField:{PG}:{database}.raw.orders:amount"
    assert upstream(field) == {stg}
    assert upstream(stg) == {raw}  # two column hops: the staging model's own facet
