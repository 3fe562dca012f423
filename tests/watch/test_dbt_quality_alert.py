"""A real producer's failing data test becomes a ``quality_failed`` alert (issue 34): ``dbt-ol run``
then ``dbt-ol test`` on a copy of tests/ingest/dbt_project whose ``stg_customers.country`` has a
NULL and a ``not_null`` test, against the PostgreSQL on 127.0.0.1:5432 (a scratch database of its
own, dropped after), sending their events through ``OPENLINEAGE_URL`` to a real
``lineage-collector serve`` subprocess with one ``[[lineage.alerts.webhook]]`` rule (its secret
made by ``lineage-collector alerts secret``) pointing at a loopback receiver.

What dbt-ol (openlineage-dbt 1.54, local-artifacts mode, the default) sends for ``dbt test``:
per model (or source) with tests, one run of the job ``<db>.<schema>.<project>.<model>.test``
(START, then FAIL when one of its assertions failed, as here; COMPLETE when all passed), both
sent after dbt finished. The tested model's table is that run's only *input*, on the START and
on the FAIL alike, and the assertions sit twice on it: in the input's
``inputFacets.dataQualityAssertions`` and, for older consumers, in its
``facets.dataQualityAssertions`` (both ``{"assertions": [{"assertion": "not_null", "name":
"not_null_stg_customers_country", "column": "country", "success": false, "severity": "error",
"actual": "1", "expected": "0", "params": {}}]}``). The run has no output. ``dbt test`` itself
exits 1; dbt-ol still emits the events. So the watch sees the failed assertion four times (two
events, two places each): one cause, one alert, the assertion once in it. The FAIL also ends the
test job's run (a ``run_failed`` cause), so the rule here asks for ``quality_failed`` only.

The alert's subject is the tested table; its impact is what lies downstream of it: the test job
(it reads the table), the ``customer_orders`` model's job and, one hop further, its table.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import pytest
from ingest.producer_env import producer_bin
from serve_process import clean_env, serve_process
from standardwebhooks import Webhook
from webhook_receiver import Receiver, receiver

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

PROJECT = Path(__file__).resolve().parents[1] / "ingest" / "dbt_project"
PG = "postgres://127.0.0.1:5432"  # the namespace dbt-ol gives PostgreSQL datasets
ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
# As test_dbt_ol.py's sources, but one customer has no country.
SEED = """
create schema raw;
create table raw.customers (id int primary key, name text not null, country text);
create table raw.orders (id int primary key, customer_id int not null, amount numeric(10, 2));
insert into raw.customers values (1, 'Ada', 'UK'), (2, 'Grace', 'US'), (3, 'Linus', null);
insert into raw.orders values (10, 1, 5.00), (11, 1, 7.50), (12, 2, 3.25), (13, 3, 1.00);
"""
# Added to the project's copy: the data test that fails.
QUALITY_YML = """version: 2
models:
  - name: stg_customers
    columns:
      - name: country
        data_tests:
          - not_null
"""


@contextmanager
def scratch_database() -> Iterator[str]:
    """A database of its own with the two source tables; dropped afterwards."""
    name = f"lineage_dbtq_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    try:
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{name}") as conn:
            conn.execute(SEED)
        yield name
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')


def new_secret() -> str:
    """A signing secret as an operator makes one: ``lineage-collector alerts secret``."""
    made = subprocess.run(
        [sys.executable, "-m", "lineage_sdk.collector.cli", "alerts", "secret"],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    secret = made.stdout.strip()
    assert secret.startswith("whsec_"), made.stdout
    return secret


@contextmanager
def serve(folder: Path, hook: str, secret: str) -> Iterator[str]:
    """``lineage-collector serve`` on a loopback port, its sql store and the watch's store on
    SQLite in ``folder``, one rule sending ``quality_failed`` alerts to ``hook``; its URL."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "lineage.toml"
    config.write_text(
        '[lineage.store]\nbackend = "sql"\n'
        f'[lineage.store.sql]\nurl = "sqlite:///{folder / "lineage.db"}"\n'
        f'[lineage.alerts]\nstore = "sqlite:///{folder / "watch.db"}"\n'
        f'[[lineage.alerts.webhook]]\nurl = "{hook}"\nsecret = "{secret}"\n'
        'on = ["quality_failed"]\ndepth = 5\n',
        encoding="utf-8",
    )
    with serve_process(folder, config=config, wait_s=30) as (url, _):
        yield url


def dbt_ol(
    project: Path, database: str, url: str, *command: str
) -> subprocess.CompletedProcess[str]:
    """``dbt-ol <command>`` in ``project``, its events sent to ``url``."""
    bin_dir = producer_bin("dbt")
    env = clean_env() | {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",  # dbt-ol runs `dbt`
        "OPENLINEAGE_URL": url,
        "DBT_DATABASE": database,
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",  # no tracking calls to the internet
        "DO_NOT_TRACK": "1",
    }
    return subprocess.run(
        [str(bin_dir / "dbt-ol"), *command, "--profiles-dir", ".", "--project-dir", "."],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )


def project_copy(folder: Path) -> Path:
    """tests/ingest/dbt_project with the ``not_null`` test on ``stg_customers.country``."""
    project = folder / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("target", "logs"))
    (project / "models" / "quality.yml").write_text(QUALITY_YML, encoding="utf-8")
    return project


@dataclass
class Outcome:
    database: str
    url: str
    secret: str
    hook: Receiver
    run: subprocess.CompletedProcess[str]
    test: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    """``dbt-ol run`` then ``dbt-ol test`` against ``serve``; the receiver stays up for the
    module's tests."""
    tmp = tmp_path_factory.mktemp("dbt_quality")
    secret = new_secret()
    with (
        scratch_database() as database,
        receiver() as hook,
        serve(tmp / "serve", hook.url, secret) as url,
    ):
        project = project_copy(tmp)
        run = dbt_ol(project, database, url, "run")
        test = dbt_ol(project, database, url, "test")
        yield Outcome(database, url, secret, hook, run, test)


def _get(url: str, path: str, **params: Any) -> Any:
    response = httpx.get(f"{url}{path}", params=params, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def _names(database: str) -> tuple[str, str, str, str]:
    """The tested table, its test job, the downstream model's job and table (node ids)."""
    schema = f"{database}.analytics"
    return (
        f"dataset:{PG}:{schema}.stg_customers",
        f"job:dbt:{schema}.shop.stg_customers.test",
        f"job:dbt:{schema}.shop.customer_orders",
        f"dataset:{PG}:{schema}.customer_orders",
    )


def test_dbt_runs_then_its_test_fails(outcome: Outcome) -> None:
    run, test = outcome.run, outcome.test
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    output = test.stdout + test.stderr
    assert test.returncode == 1, output[-3000:]
    assert "FAIL 1 not_null_stg_customers_country" in output, output[-3000:]
    assert "Emitted" in output and "OpenLineage events" in output, output[-3000:]


def test_the_assertions_sit_on_the_test_runs_input(outcome: Outcome) -> None:
    """Where dbt-ol puts them, as the serve stored them (see the module's docstring)."""
    job = f"{outcome.database}.analytics.shop.stg_customers.test"
    runs = _get(outcome.url, f"/api/v1/namespaces/dbt/jobs/{quote(job, safe='')}/runs")["runs"]
    assert len(runs) == 1
    events = _get(outcome.url, f"/api/v1/jobs/runs/{runs[0]['id']}/events")["events"]
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    for event in events:
        assert event["outputs"] == []
        (table,) = event["inputs"]
        assert (table["namespace"], table["name"]) == (
            PG,
            f"{outcome.database}.analytics.stg_customers",
        )
        for facets in (table["inputFacets"], table["facets"]):
            (assertion,) = facets["dataQualityAssertions"]["assertions"]
            assert {k: assertion[k] for k in ("assertion", "column", "success")} == {
                "assertion": "not_null",
                "column": "country",
                "success": False,
            }


def test_one_quality_failed_alert_naming_the_downstream_model(outcome: Outcome) -> None:
    hook = outcome.hook

    def arrived() -> bool:  # called with the receiver's lock held: read its list directly
        return any(200 <= r.status < 300 for r in hook.received)

    assert hook.wait_for(arrived, 30), [r.body for r in hook.received]
    time.sleep(2.0)  # a second alert, were one coming, would be sent within the worker's loops
    (item,) = hook.ok()
    Webhook(outcome.secret).verify(item.body, item.headers)  # raises on a bad signature
    assert item.headers["content-type"] == "application/cloudevents+json"
    alert = json.loads(item.body)
    assert alert["type"] == "lineage.quality_failed"
    assert alert["id"] == item.webhook_id
    tested, test_job, model_job, model_table = _names(outcome.database)
    assert alert["subject"] == tested

    cause = alert["data"]["cause"]
    assert cause["dataset"] == {
        "namespace": PG,
        "name": f"{outcome.database}.analytics.stg_customers",
    }
    assert cause["job"] == {"namespace": "dbt", "name": test_job.split(":", 2)[2]}
    (assertion,) = cause["assertions"]
    assert assertion["assertion"] == "not_null"
    assert assertion["column"] == "country"
    assert assertion["name"] == "not_null_stg_customers_country"
    assert assertion["success"] is False

    impact = [(i["nodeId"], i["distance"]) for i in alert["data"]["impact"]]
    assert impact == [(model_job, 1), (test_job, 1), (model_table, 2)]
    by_id = {i["nodeId"]: i for i in alert["data"]["impact"]}
    assert by_id[model_job]["latestRun"]["state"] == "COMPLETED"
    assert by_id[test_job]["latestRun"]["state"] == "FAILED"
