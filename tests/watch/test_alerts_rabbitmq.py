"""The watch behind ``lineage-collector run`` (issue 34): a real ``run`` process consuming from
RabbitMQ (a private vhost on the shared broker) sends the ``run_failed`` alert of a FAIL event it
consumed to a receiver on loopback, signed as Standard Webhooks specify, with the impact exact;
and a ``run`` collector with a bad rule does not start."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pika
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "collector"))  # collector_helpers

from collector_helpers import wait_until
from serve_process import clean_env, free_port, http_status
from standardwebhooks import Webhook
from vhosts import Vhost
from webhook_receiver import assert_refuses_the_rule, receiver

from lineage_sdk.collector.watch.model import cause_id
from lineage_sdk.transport.unrouted import declare_event_exchange

pytestmark = pytest.mark.rabbitmq

SECRET = "whsec_" + base64.b64encode(bytes(range(130, 162))).decode()
PRODUCER = "https://example.com/watch-rabbitmq"
SOURCE = "https://example.com/watch-rabbitmq-collector"
RUN_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
LOAD_RUN = str(uuid.UUID(int=0x4AB0001, version=4))
REPORT_RUN = str(uuid.UUID(int=0x4AB0002, version=4))


def _event(
    job: str, run: str, kind: str, at: str, ins: list[str], outs: list[str]
) -> dict[str, Any]:
    error = {
        "errorMessage": {
            "_producer": PRODUCER,
            "_schemaURL": "https://example.com/facet.json",
            "message": "disk full",
            "programmingLanguage": "python",
        }
    }
    return {
        "eventType": kind,
        "eventTime": at,
        "run": {"runId": run, "facets": error if kind == "FAIL" else {}},
        "job": {"namespace": "shop", "name": job, "facets": {}},
        "inputs": [{"namespace": "pg", "name": n, "facets": {}} for n in ins],
        "outputs": [{"namespace": "pg", "name": n, "facets": {}} for n in outs],
        "producer": PRODUCER,
        "schemaURL": RUN_SCHEMA,
    }


def _config(folder: Path, url: str) -> Path:
    path = folder / "lineage.toml"
    path.write_text(
        f'[lineage.producer]\nproducer_uri = "{SOURCE}"\n'
        '[lineage.store]\nbackend = "sql"\n'
        f'[lineage.store.sql]\nurl = "sqlite:///{folder / "lineage.db"}"\n'
        f'[lineage.alerts]\nstore = "sqlite:///{folder / "watch.db"}"\n'
        f'[[lineage.alerts.webhook]]\nurl = "{url}"\nsecret = "{SECRET}"\ndepth = 10\n',
        encoding="utf-8",
    )
    return path


def _env(vhost: Vhost, topic: str, **more: str) -> dict[str, str]:
    return clean_env() | {
        "LINEAGE_RABBITMQ_URL": vhost.url,
        "LINEAGE_COLLECTOR_TOPIC": topic,
        "COLUMNS": "200",
        **more,
    }


@contextmanager
def _run(folder: Path, config: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """``lineage-collector run`` until it is ready; stopped with SIGTERM (exit 0) at the end."""
    port = free_port()
    log = folder / "collector.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "lineage_sdk.collector.cli", "run", "--config", str(config)],
            env=env | {"LINEAGE_COLLECTOR_HEALTH_PORT": str(port)},
            cwd=folder,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        ready = f"http://127.0.0.1:{port}/readyz"
        wait_until(lambda: proc.poll() is not None or http_status(ready) == 200, 60, 0.1, "ready")
        assert proc.poll() is None, log.read_text(encoding="utf-8", errors="replace")
        yield proc
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text(encoding="utf-8", errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def _publish(vhost: Vhost, topic: str, events: list[dict[str, Any]]) -> None:
    """Publish with confirms, in order, as a producer of the topic would."""
    conn = pika.BlockingConnection(pika.URLParameters(vhost.url))
    try:
        channel = conn.channel()
        declare_event_exchange(channel, topic)
        channel.confirm_delivery()
        for event in events:
            props = pika.BasicProperties(content_type="application/json", delivery_mode=2)
            key = f"{event['job']['namespace']}.{event['job']['name']}.{event['eventType']}"
            channel.basic_publish(topic, key, json.dumps(event).encode(), props, mandatory=True)
    finally:
        conn.close()


def test_a_run_collector_sends_a_run_failed_alert(tmp_path: Path, module_vhost: Vhost) -> None:
    topic = f"watch.{uuid.uuid4().hex[:10]}"
    events = [  # the failure last: everything downstream is stored before it
        _event("report", REPORT_RUN, "COMPLETE", "2026-04-02T01:00:00Z", ["stg"], ["mart"]),
        _event("load", LOAD_RUN, "START", "2026-04-02T02:00:00Z", ["src"], ["stg"]),
        _event("load", LOAD_RUN, "FAIL", "2026-04-02T02:05:00Z", ["src"], ["stg"]),
    ]
    with receiver() as hook:
        config = _config(tmp_path, hook.url)
        with _run(tmp_path, config, _env(module_vhost, topic)):
            _publish(module_vhost, topic, events)
            assert hook.wait_for(lambda: len(hook.received) >= 1, 60), "no alert arrived"
            time.sleep(1.0)  # time for a duplicate, were one to come
        received = hook.ok()
    assert len(received) == 1, [r.body for r in received]
    alert = received[0]
    Webhook(SECRET).verify(alert.body, alert.headers)  # raises on a bad signature
    assert alert.headers["content-type"] == "application/cloudevents+json"
    event = json.loads(alert.body)
    assert event["id"] == alert.webhook_id == cause_id("run_failed", LOAD_RUN, "shop", "load")
    assert event["type"] == "lineage.run_failed" and event["specversion"] == "1.0"
    assert event["source"] == SOURCE and event["subject"] == "job:shop:load"
    assert event["data"]["cause"]["state"] == "FAIL"
    assert event["data"]["cause"]["error"]["message"] == "disk full"
    assert [(i["nodeId"], i["distance"]) for i in event["data"]["impact"]] == [
        ("dataset:pg:stg", 1),
        ("job:shop:report", 2),
        ("dataset:pg:mart", 3),
    ]
    assert event["data"]["impact"][1]["latestRun"]["state"] == "COMPLETED"


@pytest.mark.parametrize("broker", ["answers", "unreachable"])
def test_a_run_collector_with_a_bad_rule_does_not_start(
    tmp_path: Path, module_vhost: Vhost, broker: str
) -> None:
    """The rule's URL is not HTTP(S): exit 2, one line naming the key, no traceback, never the
    secret; refused before the broker is reached (an unreachable broker is not what it says)."""
    config = _config(tmp_path, "ftp://hooks.example.com/lineage")
    more = (
        {} if broker == "answers" else {"LINEAGE_RABBITMQ_URL": f"amqp://127.0.0.1:{free_port()}"}
    )
    command = [sys.executable, "-m", "lineage_sdk.collector.cli", "run", "--config", str(config)]
    env = _env(module_vhost, f"watch.{uuid.uuid4().hex[:10]}", **more)
    assert_refuses_the_rule(command, env, tmp_path, SECRET)
