"""Live edges end to end: a streaming pika consumer on the real broker heartbeats every 0.2 s
through the http exporter into the real API (SQLite store). Its edges and RUNNING state show
while it runs; the heartbeats stop when it completes; a consumer process that is SIGKILLed reads
STALE after 3 intervals, while what was stored stays as it was. Answers are checked against
Marquez's openapi.yml (``liveness`` is an extra property beside Marquez's ``state``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pika
import pytest
from api_helpers import Api
from openapi_check import validate_operation
from vhosts import session_vhost

from lineage_instrumentation.pika import PikaInstrumentor
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY
from lineage_sdk.sdk.heartbeat import HEARTBEATS
from lineage_sdk.sdk.provider import STATE, configure, shutdown

BROKER_URL = session_vhost().url  # this process's private vhost, never the shared "/"
BROKER_NS = "rabbitmq://127.0.0.1:5672"
JOB_NS = "tests.live"
HEARTBEAT_S = 0.2
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def queue() -> Iterator[tuple[str, str]]:
    """A unique exchange and queue (bound with ``orders.*``), deleted afterwards."""
    suffix = uuid.uuid4().hex[:10]
    exchange, name = f"test.live.ex.{suffix}", f"test.live.q.{suffix}"
    conn = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    ch = conn.channel()
    ch.exchange_declare(exchange, exchange_type="topic")
    ch.queue_declare(name)
    ch.queue_bind(name, exchange, routing_key="orders.*")
    for i in range(2):
        ch.basic_publish(exchange, "orders.created", f"order {i}".encode())
    conn.close()
    yield exchange, name
    conn = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    ch = conn.channel()
    ch.queue_delete(name)
    ch.exchange_delete(exchange)
    conn.close()


@pytest.fixture
def instrumentor() -> Iterator[PikaInstrumentor]:
    """The pika instrumentor; uninstrumented, and the SDK shut down, afterwards."""
    found = PikaInstrumentor()
    yield found
    found.uninstrument()
    shutdown(10)


def wait_for(what: str, check: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Poll ``check`` until it returns something truthy (no fixed sleeps: the machine is slow)."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def job_answer(api: Api, job: str) -> dict[str, Any]:
    response = api.client.get(f"/api/v1/namespaces/{quote(JOB_NS, safe='')}/jobs/{job}")
    if response.status_code == 404:
        return {}
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    validate_operation("getJob", body)
    return body


def run_events(api: Api, run_id: str) -> list[dict[str, Any]]:
    response = api.client.get(f"/api/v1/jobs/runs/{run_id}/events")
    assert response.status_code == 200, response.text
    events: list[dict[str, Any]] = response.json()["events"]
    return events


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["eventType"] for e in events]


def test_streaming_consumer_shows_edges_and_liveness_while_it_runs(
    make_api: Callable[..., Api], queue: tuple[str, str], instrumentor: PikaInstrumentor
) -> None:
    api = make_api()
    exchange, name = queue
    job = f"live-consumer-{uuid.uuid4().hex[:8]}"
    config = LineageConfig.model_validate(
        {
            "exporters": ["http"],
            "http": {"url": api.url},
            "producer": {"job_namespace": JOB_NS},
        }
    )
    configure(config, strict=True)
    instrumentor.instrument(
        mode="streaming", consumer_job_name=job, heartbeat_interval_ms=int(HEARTBEAT_S * 1000)
    )
    stop, received = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            conn = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
            ch = conn.channel()
            tag = ch.basic_consume(name, lambda *_: received.set(), auto_ack=True)
            while not stop.is_set():
                conn.process_data_events(time_limit=0.05)
            ch.basic_cancel(tag)  # the stream's COMPLETE
            conn.close()
        except BaseException as exc:
            errors.append(exc)

    consumer = threading.Thread(target=consume)
    consumer.start()
    try:
        assert received.wait(20)
        # Edges and state while it runs, from heartbeats: no message arrives after the first two.
        dataset = {"namespace": BROKER_NS, "name": f"{exchange}:orders.created"}

        def live_with_edges() -> dict[str, Any] | None:
            found = job_answer(api, job)
            latest = found.get("latestRun") or {}
            ok = latest.get("liveness") == "LIVE" and dataset in found.get("inputs", [])
            return found if ok else None

        answer = wait_for("a LIVE run with its input", live_with_edges)
        run = answer["latestRun"]
        assert run["state"] == "RUNNING" and run["heartbeatIntervalS"] == HEARTBEAT_S
        run_id = run["id"]
        # Heartbeats keep coming without deliveries, each with every dataset seen so far.
        running = wait_for(
            "three heartbeats",
            lambda: [e for e in run_events(api, run_id) if e["eventType"] == "RUNNING"][2:],
        )
        for event in running:
            assert [{"namespace": d["namespace"], "name": d["name"]} for d in event["inputs"]] == [
                dataset
            ]
            assert event["run"]["facets"][HEARTBEAT_FACET_KEY]["intervalS"] == HEARTBEAT_S
        lineage = api.client.get("/api/v1/lineage", params={"nodeId": f"job:{JOB_NS}:{job}"})
        assert lineage.status_code == 200
        validate_operation("getLineage", lineage.json())
        nodes = {n["id"]: n for n in lineage.json()["graph"]}
        job_node = nodes[f"job:{JOB_NS}:{job}"]
        assert job_node["inEdges"] == [
            {
                "origin": f"dataset:{BROKER_NS}:{exchange}:orders.created",
                "destination": job_node["id"],
            }
        ]
        assert job_node["data"]["latestRun"]["liveness"] == "LIVE"
        runs = api.client.get(f"/api/v1/namespaces/{quote(JOB_NS, safe='')}/jobs/{job}/runs")
        validate_operation("getRuns", runs.json())
        assert runs.json()["runs"][0]["liveness"] == "LIVE"
    finally:
        stop.set()
        consumer.join(20)
    assert not errors, errors
    # After COMPLETE: no liveness, and no heartbeat after it, even three intervals later.
    assert STATE.sdk is not None and STATE.sdk.force_flush(10)
    done = wait_for(
        "COMPLETED", lambda: (r := job_answer(api, job)["latestRun"])["state"] == "COMPLETED" and r
    )
    assert "liveness" not in done
    assert HEARTBEATS.active() == 0
    settled = run_events(api, run_id)
    time.sleep(HEARTBEAT_S * 3)
    assert STATE.sdk.force_flush(10)
    after = run_events(api, run_id)
    assert after == settled
    assert kinds(after)[0] == "START" and kinds(after)[-1] == "COMPLETE"
    assert set(kinds(after)[1:-1]) == {"RUNNING"}
    complete_time = after[-1]["eventTime"]
    assert all(e["eventTime"] <= complete_time for e in after)
    detail = api.client.get(f"/api/v1/jobs/runs/{run_id}")
    validate_operation("getRun", detail.json())
    assert detail.json()["state"] == "COMPLETED" and "liveness" not in detail.json()


_KILLED_CONSUMER = textwrap.dedent(
    """
    import sys, pika
    from lineage_instrumentation.pika import PikaInstrumentor
    from lineage_sdk.config.schema import LineageConfig
    from lineage_sdk.sdk.provider import configure

    url, queue, job, interval = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    broker = sys.argv[5]
    configure(LineageConfig.model_validate({
        "exporters": ["http"], "http": {"url": url}, "producer": {"job_namespace": "tests.live"},
        "instrumentation": {"pika_mode": "streaming", "pika_consumer_job_name": job,
                            "pika_heartbeat_interval_ms": int(interval * 1000)},
    }), strict=True)
    PikaInstrumentor().instrument()
    conn = pika.BlockingConnection(pika.URLParameters(broker))
    ch = conn.channel()
    ch.basic_consume(queue, lambda *_: None, auto_ack=True)
    print("consuming", flush=True)
    ch.start_consuming()
    """
)


def test_a_killed_consumer_reads_stale_and_its_events_stay(
    make_api: Callable[..., Api], queue: tuple[str, str]
) -> None:
    api = make_api()
    _, name = queue
    job = f"killed-consumer-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "instrumentation")])}
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_CONSUMER, api.url, name, job, str(HEARTBEAT_S), BROKER_URL],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        answer = wait_for(
            "the consumer's heartbeats",
            lambda: (
                (r := job_answer(api, job).get("latestRun")) and r.get("liveness") == "LIVE" and r
            ),
            timeout=60,
        )
        run_id = answer["id"]
        wait_for("a heartbeat", lambda: "RUNNING" in kinds(run_events(api, run_id)))
    finally:
        proc.send_signal(signal.SIGKILL)
        _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == -signal.SIGKILL, stderr.decode()[-2000:]
    stored = run_events(api, run_id)
    assert "COMPLETE" not in kinds(stored)  # killed: nothing said it ended
    stale = wait_for(
        "STALE",
        lambda: (r := job_answer(api, job)["latestRun"]).get("liveness") == "STALE" and r,
        timeout=HEARTBEAT_S * 3 + 10,
    )
    assert stale["state"] == "RUNNING"  # Marquez's state is unchanged; liveness says STALE
    detail = api.client.get(f"/api/v1/jobs/runs/{run_id}").json()
    validate_operation("getRun", detail)
    assert detail["liveness"] == "STALE"
    runs = api.client.get(f"/api/v1/namespaces/{quote(JOB_NS, safe='')}/jobs/{job}/runs").json()
    validate_operation("getRuns", runs)
    assert runs["runs"][0]["liveness"] == "STALE"
    # Reading STALE changed nothing that was stored.
    assert run_events(api, run_id) == stored
    (row,) = api.store.runs_of_job(JOB_NS, job)
    assert row.state == "RUNNING"
