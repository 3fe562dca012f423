"""The collector as a process: graceful SIGTERM, SIGKILL crashes, `check`, bad configuration,
the health endpoint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from collector_helpers import (
    BATCH_CONTENT_TYPE,
    RABBIT_URL,
    dumps,
    event_id,
    many_events,
    publish,
    publish_fast,
    queue_depth,
    wait_until,
)
from serve_process import free_port, http_status

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.collector.topology import Topology

pytestmark = pytest.mark.rabbitmq


def _env(config, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGE_", "OPENLINEAGE_"))}
    env.update(
        {
            "LINEAGE_COLLECTOR_TOPIC": config.collector_topic,
            "LINEAGE_RABBITMQ_URL": RABBIT_URL,
            "LINEAGE_STORE_BACKEND": "sql",
            "LINEAGE_STORE_SQL_URL": config.section("store.sql").url,
            "LINEAGE_COLLECTOR_RETRY_DELAYS_MS": "200,400",
            "COLUMNS": "200",
        }
    )
    env.update(extra)
    return env


def _start(env: dict[str, str], tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    log = open(tmp_path / f"collector-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "lineage_sdk.collector.cli", *args],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )


def _count(url: str) -> int:
    store = EngineStore(SqlBackend(url))
    try:
        store.open()
        return store.count_events()
    except Exception:
        return -1
    finally:
        store.close()


def test_sigterm_mid_stream_loses_nothing_and_exits_zero(make_config, tmp_path):
    config = make_config()
    topo = Topology.from_config(config)
    port = free_port()
    env = _env(
        config,
        tmp_path,
        LINEAGE_COLLECTOR_HEALTH_PORT=str(port),
        LINEAGE_COLLECTOR_BATCH_SIZE="100",
    )
    from collector_helpers import connect

    conn = connect()
    topo.declare(conn.channel())
    conn.close()
    events = many_events(10_000)
    publish_fast(config.collector_topic, [dumps(e) for e in events])
    wait_until(lambda: queue_depth(topo.queue) == len(events), 30, message="messages queued")
    proc = _start(env, tmp_path)
    try:
        wait_until(
            lambda: http_status(f"http://127.0.0.1:{port}/readyz") == 200, 30, message="readiness"
        )
        wait_until(
            lambda: _count(config.section("store.sql").url) > 200, 30, message="first events stored"
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    stored, queued = _count(config.section("store.sql").url), queue_depth(topo.queue)
    # nothing lost: what is not stored is still in the queue (acked == stored)
    assert stored + queued >= len(events)
    assert stored < len(events), "SIGTERM came after the stream"
    proc = _start(env, tmp_path)
    try:
        wait_until(
            lambda: _count(config.section("store.sql").url) == len(events), 60, message="all stored"
        )
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
        assert b"lineage_collector_events_stored_total" in metrics
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert queue_depth(topo.queue) == 0


@pytest.mark.slow
def test_sigkill_three_times_during_20000_events(make_config, tmp_path):
    config = make_config()
    topo = Topology.from_config(config)
    events = many_events(20_000, prefix="crash")
    env = _env(
        config, tmp_path, LINEAGE_COLLECTOR_BATCH_SIZE="200", LINEAGE_COLLECTOR_PREFETCH="400"
    )
    # Publish first and check the broker holds every message, so that a loss can only be the
    # collector's (other engineers' outage tests may close connections at any time).
    from collector_helpers import connect

    conn = connect()
    topo.declare(conn.channel())
    conn.close()
    singles = [dumps(e) for e in events[:10_000]]
    batches = [dumps(events[i : i + 25]) for i in range(10_000, 20_000, 25)]
    publish_fast(config.collector_topic, singles)
    publish_fast(config.collector_topic, batches, content_type=BATCH_CONTENT_TYPE)
    wait_until(  # quorum queues write to their log first: give a loaded machine time
        lambda: queue_depth(topo.queue) == len(singles) + len(batches),
        120,
        message="all messages in the queue",
    )
    proc = _start(env, tmp_path)
    try:
        kills = 0
        for threshold in (2_000, 7_000, 12_000):
            wait_until(
                lambda t=threshold: _count(config.section("store.sql").url) >= t,
                60,
                message=f"{threshold} events stored",
            )
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            assert _count(config.section("store.sql").url) < len(events), (
                "the kill came after the stream"
            )
            kills += 1
            proc = _start(env, tmp_path)
        try:
            wait_until(
                lambda: _count(config.section("store.sql").url) >= len(events),
                60,
                message="all stored",
            )
        except AssertionError:
            logs = sorted(tmp_path.glob("collector-*.log"))
            tail = "".join(p.read_text()[-3000:] for p in logs)
            raise AssertionError(
                f"stored {_count(config.section('store.sql').url)}, queued {queue_depth(topo.queue)}, "
                f"parked {queue_depth(topo.dead_letter_queue)}, retrying "
                f"{[queue_depth(r.name) for r in topo.retry_queues]}\n{tail}"
            ) from None
        wait_until(lambda: queue_depth(topo.queue) == 0, 30, message="queue drained")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert kills == 3
    backend = SqlBackend(config.section("store.sql").url)
    store = EngineStore(backend)
    store.open()
    try:
        import sqlalchemy as sa

        ev, run, mention = backend._t["ev"], backend._t["run"], backend._t["mentions"]
        with backend._db.connect() as conn:
            ids = conn.execute(sa.select(ev.c.event_id)).scalars().all()
            runs = conn.execute(sa.select(sa.func.count()).select_from(run)).scalar()
            run_ids = conn.execute(sa.select(sa.func.count(sa.distinct(run.c.run_id)))).scalar()
            io = conn.execute(  # a run's datasets: its mentions as input or output
                sa.select(sa.func.count())
                .select_from(mention)
                .where(mention.c.source == "run", mention.c.role.in_(["input", "output"]))
            ).scalar()
        assert len(ids) == len(set(ids)) == 20_000
        assert set(ids) == {event_id(e) for e in events}
        assert run_ids == 10_000
        # The engine keys a run row by run id and job: each run here names two jobs (its START's
        # and its COMPLETE's), each pair stored once.
        assert runs == len({(e["run"]["runId"], e["job"]["name"]) for e in events}) == 20_000
        expected_io = {
            (e["run"]["runId"], d["name"], role)
            for e in events
            for role in ("inputs", "outputs")
            for d in e[role]
        }
        assert io == len(expected_io)  # each run-dataset edge once
        # Every run folded from all its events: as the memory backend answers for the same events.
        crash3 = store.runs_of_job("tests", "crash3", limit=50)
        reference = EngineStore(MemoryBackend())
        reference.open()
        reference.write_batch([build_record(e) for e in events])
        assert crash3 == reference.runs_of_job("tests", "crash3", limit=50)
        completed = {
            e["run"]["runId"]
            for e in events
            if e["job"]["name"] == "crash3" and e["eventType"] == "COMPLETE"
        }
        assert any(r.run_id in completed for r in crash3)
        assert all(r.state == "COMPLETE" for r in crash3 if r.run_id in completed)
    finally:
        store.close()
    assert queue_depth(topo.dead_letter_queue) == 0


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lineage_sdk.collector.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_succeeds_and_fails_with_exit_codes(make_config, tmp_path):
    config = make_config()
    env = _env(config, tmp_path)
    for create in (("topology", "declare"), ("store", "init")):  # check itself creates nothing
        made = _cli(*create, env=env, cwd=tmp_path)
        assert made.returncode == 0, made.stdout + made.stderr
    ok = _cli("check", env=env, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "store sql" in ok.stdout and "failed" not in ok.stdout
    bad_store = _cli(
        "check",
        "--store-sql-url",
        "postgresql+psycopg://nobody:hunter2@127.0.0.1:1/x",
        env=env,
        cwd=tmp_path,
    )
    assert bad_store.returncode == 1
    assert "failed" in bad_store.stdout
    assert "hunter2" not in bad_store.stdout + bad_store.stderr
    bad_broker = _cli(
        "check", "--rabbitmq-url", "amqp://guest:hunter2@127.0.0.1:1/%2F", env=env, cwd=tmp_path
    )
    assert bad_broker.returncode == 1
    assert "broker" in bad_broker.stdout and "hunter2" not in bad_broker.stdout


@pytest.mark.parametrize(
    ("args", "extra_env", "needle"),
    [
        (["check", "--collector-prefetch", "many"], {}, "collector.prefetch"),
        (["check"], {"LINEAGE_STORE_BACKEND": "cassandra"}, "store.backend"),
        (["--store-backend", "composite"], {}, "store.backends"),
        (["check", "--rabbitmq-url", "http://example"], {}, "rabbitmq.url"),
        (["check", "--config", "/nonexistent/lineage.toml"], {}, "--config"),
        (["check"], {"LINEAGE_COLLECTOR_MAX_ATTEMPTS": "0"}, "collector.max_attempts"),
        (["check", "--store-backend", "openlineage_http"], {}, "store.openlineage_http.url"),
    ],
)
def test_invalid_configuration_exits_nonzero_with_one_clear_line(
    make_config, tmp_path, args, extra_env, needle
):
    config = make_config()
    result = _cli(*args, env=_env(config, tmp_path, **extra_env), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]
    assert "Traceback" not in result.stderr + result.stdout


def test_topology_declaration_is_idempotent(make_config):
    config = make_config()
    topo = Topology.from_config(config)
    from collector_helpers import connect

    conn = connect()
    try:
        ch = conn.channel()
        topo.declare(ch)
        topo.declare(ch)  # again: harmless
        publish(config.collector_topic, [b"{}"], routing_key="any.key")
        assert queue_depth(topo.queue) == 1
        assert [r.delay_ms for r in topo.retry_queues] == [200, 400]
        assert topo.dead_letter_queue == f"{config.collector_topic}.dlq"
        assert topo.queue == f"{config.collector_topic}.collector"
    finally:
        conn.close()
