"""Commands that say no: ``check`` checks every table and changes nothing, ``run`` and ``serve``
fail fast at start-up on what retrying cannot fix, and both log in one format.

Everything is real: the CLI runs as a subprocess against the shared RabbitMQ (in a private
vhost) and PostgreSQL (a private schema or a database name that does not exist). Each mistake
is asserted by its one line and its exit code: 2 for a refusal or a configuration error, 1 for
something missing or unreachable.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest
import sqlalchemy as sa
from serve_process import free_port, http_status
from servers import POSTGRES_URL, postgres_schema
from vhosts import Vhost, rabbitmqctl

pytestmark = [pytest.mark.rabbitmq, pytest.mark.postgres]

CLI = [sys.executable, "-m", "lineage_sdk.collector.cli"]
ERROR = "lineage-collector: error: "


def _env(tmp_path: Path, url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGE_", "OPENLINEAGE_"))}
    env.update(
        {
            "LINEAGE_COLLECTOR_TOPIC": f"test.safe.{secrets.token_hex(4)}",
            "LINEAGE_RABBITMQ_URL": url,
            "LINEAGE_STORE_BACKEND": "sql",
            "LINEAGE_STORE_SQL_URL": f"sqlite:///{tmp_path}/lineage.db",
            "COLUMNS": "1000",  # the table on one line a row
        }
    )
    env.update(extra)
    return env


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused start-up or configuration writes: nothing else on stderr."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(ERROR), lines
    assert "Traceback" not in result.stderr + result.stdout
    return lines[0]


def _table(result: subprocess.CompletedProcess[str]) -> str:
    return " ".join(result.stdout.split())  # the table wraps long cells


# -- check: every table, names with "did you mean", nothing changed ----------------------------


def test_check_refuses_a_misspelt_exporter_with_did_you_mean(tmp_path, vhost):
    result = _cli(
        "check", env=_env(tmp_path, vhost.url, LINEAGE_EXPORTERS="rabbitmg"), cwd=tmp_path
    )
    assert result.returncode == 2, result.stdout + result.stderr
    line = _one_error_line(result)
    assert "lineage.exporters='rabbitmg'" in line
    assert "unknown exporter 'rabbitmg' (did you mean 'rabbitmq'?)" in line


def test_check_refuses_a_misspelt_store_with_did_you_mean(tmp_path, vhost):
    env = _env(
        tmp_path,
        vhost.url,
        LINEAGE_STORE_BACKEND="composite",
        LINEAGE_STORE_BACKENDS="sql,logign",
    )
    result = _cli("check", env=env, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    line = _one_error_line(result)
    assert "store.backends='logign'" in line
    assert "unknown store 'logign' (did you mean 'logging'?)" in line


def test_lineage_instrument_refuses_a_misspelt_instrumentor_and_exporter(tmp_path):
    wrapper = [sys.executable, "-m", "lineage_instrumentation.wrapper"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGE_", "OPENLINEAGE_"))}
    marker = tmp_path / "ran"
    program = ["python", "-c", f"open({str(marker)!r}, 'w').close()"]
    cases = [
        (
            ["--disabled-instrumentations", "pikka"],
            "instrumentation.disabled_instrumentations: unknown instrumentor 'pikka'"
            " (did you mean 'pika'?)",
        ),
        (
            ["--exporters", "console,rabbitmg"],
            "unknown exporter 'rabbitmg' (did you mean 'rabbitmq'?)",
        ),
    ]
    for flags, expected in cases:
        result = subprocess.run(
            [*wrapper, *flags, *program], env=env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 2, result.stderr
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("lineage-instrument: error: "), lines
        assert expected in lines[0]
        assert not marker.exists()  # the program never started with the typo
    ok = subprocess.run(
        [*wrapper, "--disabled-instrumentations", "pika", "--exporters", "console", *program],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert marker.exists()


def test_check_reports_missing_queues_passively_and_declare_creates_them(
    tmp_path, tmp_path_factory: pytest.TempPathFactory, vhost: Vhost
):
    # The store's row shows its address: a database path without this test's name in it, so
    # "missing" below can only be a part's state.
    db = tmp_path_factory.mktemp("store") / "lineage.db"
    env = _env(tmp_path, vhost.url, LINEAGE_STORE_SQL_URL=f"sqlite:///{db}")
    topic = env["LINEAGE_COLLECTOR_TOPIC"]
    _cli("store", "init", env=env, cwd=tmp_path).check_returncode()  # only the broker is missing
    result = _cli("check", env=env, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    table = _table(result)
    assert f"missing exchange {topic}" in table and f"queue {topic}.collector" in table
    assert f"queue {topic}.dlq" in table
    assert "create with `lineage-collector topology declare`" in table
    assert "store sql │ ok" in table
    assert vhost.queues() == {}  # passive: check declared nothing
    declared = _cli("topology", "declare", env=env, cwd=tmp_path)
    assert declared.returncode == 0, declared.stderr
    assert f"{topic}.collector" in vhost.queues()
    again = _cli("check", env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "missing" not in again.stdout and "failed" not in again.stdout


def test_check_reports_missing_sql_tables_without_creating_them(tmp_path, vhost: Vhost):
    with postgres_schema("lineage_check") as url:
        env = _env(tmp_path, vhost.url, LINEAGE_STORE_SQL_URL=url)
        _cli("topology", "declare", env=env, cwd=tmp_path).check_returncode()
        result = _cli("check", env=env, cwd=tmp_path)
        assert result.returncode == 1, result.stdout + result.stderr
        table = _table(result)
        assert "store sql │ missing │ missing table lineage_ev" in table
        assert "create with `lineage-collector store init`" in table
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                assert sa.inspect(conn).get_table_names() == []  # check created nothing
            init = _cli("store", "init", env=env, cwd=tmp_path)
            assert init.returncode == 0, init.stderr
            with engine.connect() as conn:
                tables = sa.inspect(conn).get_table_names()
            assert "lineage_ev" in tables and "lineage_events" not in tables  # the engine's
        finally:
            engine.dispose()
        again = _cli("check", env=env, cwd=tmp_path)
        assert again.returncode == 0, again.stdout + again.stderr


def test_check_does_not_create_a_missing_sqlite_file(tmp_path, vhost: Vhost):
    env = _env(tmp_path, vhost.url)
    _cli("topology", "declare", env=env, cwd=tmp_path).check_returncode()
    result = _cli("check", env=env, cwd=tmp_path)
    assert result.returncode == 1
    assert f"missing database file {tmp_path}/lineage.db" in _table(result)
    assert not (tmp_path / "lineage.db").exists()


# -- run and serve fail fast on what retrying cannot fix ------------------------------------------


@pytest.fixture
def refused_user(vhost: Vhost):
    """A user of the shared broker that exists (with a password of its own), deleted after."""
    name = f"lineage-test-user-{secrets.token_hex(4)}"
    rabbitmqctl("add_user", name, secrets.token_hex(8))
    try:
        yield vhost.url_for(name, "Wr0ng-pa55word")
    finally:
        rabbitmqctl("delete_user", name)


def _timed(
    *args: str, env: dict[str, str], cwd: Path
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = _cli(*args, env=env, cwd=cwd)
    return result, time.monotonic() - started


def test_run_exits_at_once_when_the_broker_refuses_the_password(tmp_path, refused_user):
    env = _env(tmp_path, refused_user)
    result, took = _timed("run", "--wait-for-services", "30", env=env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result)
    assert "the broker refused the credentials of user 'lineage-test-user-" in line
    assert "check the user and password in lineage.rabbitmq.url" in line
    assert "Wr0ng-pa55word" not in result.stderr
    assert took < 20  # a refusal is not waited for, --wait-for-services or not


def test_run_exits_at_once_on_a_missing_vhost(tmp_path, vhost: Vhost):
    missing = Vhost(f"{vhost.name}-missing")
    result, took = _timed(
        "run", "--wait-for-services", "30", env=_env(tmp_path, missing.url), cwd=tmp_path
    )
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result)
    assert f"virtual host '{missing.name}' does not exist" in line
    assert took < 20


@pytest.mark.parametrize("command", ["run", "serve"])
def test_a_missing_database_stops_run_and_serve_at_once(tmp_path, vhost, command):
    name = f"does_not_exist_{secrets.token_hex(4)}"
    env = _env(
        tmp_path, vhost.url, LINEAGE_STORE_SQL_URL=f"{POSTGRES_URL.rsplit('/', 1)[0]}/{name}"
    )
    result = _cli(command, env=env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result)
    assert f'database "{name}" does not exist' in line and "cannot start: the stores" in line


@pytest.mark.parametrize("command", ["run", "serve"])
def test_a_refused_store_login_stops_run_and_serve_at_once(tmp_path, vhost, command):
    role = f"nobody_{secrets.token_hex(4)}"
    url = f"postgresql+psycopg://{role}:s3cret-pw@127.0.0.1:5432/test"
    result = _cli(
        command,
        "--wait-for-services",
        "30",
        env=_env(tmp_path, vhost.url, LINEAGE_STORE_SQL_URL=url),
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result)
    assert f'role "{role}" does not exist' in line
    assert "s3cret-pw" not in result.stderr


def test_run_without_wait_exits_at_once_on_an_unreachable_broker(tmp_path):
    port = free_port()
    env = _env(tmp_path, f"amqp://guest:guest@127.0.0.1:{port}/nobody-listens")
    result = _cli("run", env=env, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    line = _one_error_line(result)
    assert f"connection refused by 127.0.0.1:{port}" in line
    assert "pass --wait-for-services SECONDS" in line


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_wait_for_services_retries_an_unreachable_broker_then_gives_up(tmp_path, how):
    port = free_port()
    env = _env(tmp_path, f"amqp://guest:guest@127.0.0.1:{port}/nobody-listens")
    args = ["run", "--wait-for-services", "2"] if how == "flag" else ["run"]
    if how == "variable":
        env["LINEAGE_COLLECTOR_WAIT_FOR_SERVICES"] = "2"
    started = time.monotonic()
    proc = subprocess.Popen([*CLI, *args], env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - started
    assert proc.returncode == 1, err
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(ERROR)]
    assert len(errors) == 1 and f"connection refused by 127.0.0.1:{port}" in errors[0], err
    assert "gave up after waiting 2s" in errors[0]
    # the rest is the one log line saying that it waits (JSON, as every log line of run)
    [waiting] = [orjson.loads(line) for line in lines if line not in errors]
    assert str(waiting["message"]).startswith("waiting for the broker (--wait-for-services 2)")
    assert "Traceback" not in err
    assert 2.0 <= took < 20


def test_run_starts_when_one_node_of_a_cluster_answers(tmp_path, vhost: Vhost):
    down = f"amqp://guest:guest@127.0.0.1:{free_port()}/{vhost.name}"
    env = _env(tmp_path, vhost.url, LINEAGE_RABBITMQ_URLS=f"{down},{vhost.url}")
    del env["LINEAGE_RABBITMQ_URL"]
    proc, log = _started(["run"], env, tmp_path)
    try:
        _lines_until(proc, log, "consuming ")
    finally:
        _stop(proc)
    assert proc.returncode == 0, log.read_text()
    assert ERROR not in log.read_text()


def test_while_it_waits_run_is_live_and_not_ready(tmp_path):
    health = free_port()
    env = _env(
        tmp_path,
        f"amqp://guest:guest@127.0.0.1:{free_port()}/nobody-listens",
        LINEAGE_COLLECTOR_HEALTH_PORT=str(health),
    )
    proc = subprocess.Popen(
        [*CLI, "run", "--wait-for-services", "4"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while http_status(f"http://127.0.0.1:{health}/livez") != 200:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        assert http_status(f"http://127.0.0.1:{health}/readyz") == 503
    finally:
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err  # an orchestrator's liveness probe never killed it early
    assert http_status(f"http://127.0.0.1:{health}/livez") == 0  # closed when it gave up


def test_serve_waits_for_an_unreachable_store_then_gives_up(tmp_path, vhost):
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test"
    env = _env(tmp_path, vhost.url, LINEAGE_STORE_SQL_URL=url)
    result, took = _timed(
        "serve", "--wait-for-services", "2", "--log-format", "text", env=env, cwd=tmp_path
    )
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith(ERROR)]
    assert len(errors) == 1 and "gave up after waiting 2s" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert took >= 2.0


# -- one log format for run and serve -------------------------------------------------------------


def _lines_until(proc: subprocess.Popen[str], log: Path, needle: str) -> list[str]:
    deadline = time.monotonic() + 60
    while needle not in log.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
        time.sleep(0.05)
    return log.read_text().splitlines()


def _started(
    command: list[str], env: dict[str, str], tmp_path: Path
) -> tuple[subprocess.Popen[str], Path]:
    log = tmp_path / f"{command[0]}-{time.monotonic_ns()}.err"
    with open(log, "w") as stderr:
        proc = subprocess.Popen(
            [*CLI, *command],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
        )
    return proc, log


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_run_and_serve_log_in_one_format(tmp_path, vhost, log_format):
    env = _env(tmp_path, vhost.url)
    flags = [] if log_format == "json" else ["--log-format", "text"]
    run, run_log = _started(["run", *flags], env, tmp_path)
    port = free_port()
    serve, serve_log = _started(["serve", "--port", str(port), *flags], env, tmp_path)
    try:
        run_lines = _lines_until(run, run_log, "consuming ")
        _lines_until(serve, serve_log, "Uvicorn running on")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/namespaces", timeout=10):
            pass
        serve_lines = _lines_until(serve, serve_log, "/api/v1/namespaces")
    finally:
        _stop(run)
        _stop(serve)
    for lines in (run_lines, serve_lines):
        assert lines
        for line in lines:
            if log_format == "json":
                record = orjson.loads(line)
                assert {"time", "level", "logger", "message"} <= set(record)
                assert "color_message" not in record
            else:
                assert not line.startswith("{"), line
                stamp, level, logger = line.split(" ", 3)[:3]
                assert stamp[:4].isdigit() and level in ("INFO", "WARNING") and logger.endswith(":")
    access = [line for line in serve_lines if "/api/v1/namespaces" in line]
    assert len(access) == 1
    if log_format == "json":
        assert orjson.loads(access[0])["logger"] == "uvicorn.access"
    else:
        assert " INFO uvicorn.access: " in access[0]


def test_host_refusal_is_a_sentence(tmp_path, vhost):
    result = _cli("serve", "--host", "0.0.0.0", env=_env(tmp_path, vhost.url), cwd=tmp_path)
    assert result.returncode == 2
    line = _one_error_line(result)
    assert "refusing to listen on 0.0.0.0: serve binds only to a loopback address" in line


@pytest.mark.mongodb
def test_the_document_store_reports_a_missing_collection_without_creating_it(mongo):
    from lineage_sdk.collector.engine import EngineStore
    from lineage_sdk.collector.settings import ConnectionConfig
    from lineage_sdk.collector.stores.document_backend import DocumentBackend

    name = f"t_probe_{secrets.token_hex(6)}"
    backend = DocumentBackend(
        ConnectionConfig(uri=mongo.uri, database="lineage_tests", timeout_ms=5000), name
    )
    store = EngineStore(backend)
    kinds = ("events", "mentions", "edges", "runs", "columns", "nodes")
    try:
        assert store.missing() == [f"collection {name}_{kind}" for kind in kinds]
        listed = backend.connector.database.list_collection_names()
        assert not [c for c in listed if c.startswith(name)]  # read-only
        store.open()
        assert store.missing() == []
    finally:
        backend.drop()
        store.close()


# -- the memory store: serve with no database ------------------------------------------------------


def test_serve_on_the_memory_store_needs_no_database(tmp_path, vhost):
    """``backend = "memory"``: check reaches it, and serve stores and answers with no database
    file or server anywhere."""
    env = _env(tmp_path, vhost.url, LINEAGE_STORE_BACKEND="memory")
    del env["LINEAGE_STORE_SQL_URL"]
    assert _cli("topology", "declare", env=env, cwd=tmp_path).returncode == 0
    checked = _cli("check", env=env, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "memory" in _table(checked)
    port = free_port()
    serve, log = _started(["serve", "--port", str(port)], env, tmp_path)
    base = f"http://127.0.0.1:{port}/api/v1"
    event = {
        "eventType": "COMPLETE",
        "eventTime": "2026-12-04T10:00:00Z",
        "run": {"runId": "0190aaaa-0000-7000-8000-000000000001"},
        "job": {"namespace": "mem", "name": "load"},
        "inputs": [{"namespace": "mem", "name": "raw"}],
        "outputs": [{"namespace": "mem", "name": "clean"}],
        "producer": "https://example.com/test",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }
    try:
        _lines_until(serve, log, "Uvicorn running on")
        post = urllib.request.Request(
            f"{base}/lineage",
            data=orjson.dumps(event),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(post, timeout=10) as answer:
            assert answer.status == 201
        with urllib.request.urlopen(f"{base}/lineage?nodeId=dataset:mem:clean", timeout=10) as got:
            graph = orjson.loads(got.read())["graph"]
    finally:
        _stop(serve)
    edges = {(e["origin"], e["destination"]) for node in graph for e in node["outEdges"]}
    assert edges == {("dataset:mem:raw", "job:mem:load"), ("job:mem:load", "dataset:mem:clean")}
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".err")) == []
