"""Whole collectors (real ``lineage-collector serve`` processes) sharing one PostgreSQL database
for their store and their watch: three of them, each sent the same failing events (a fleet
consuming redeliveries), send each alert once; one killed with SIGKILL while alerts wait for a
receiver that is down sends them after it is started again."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_process import serve_process
from servers import postgres_database
from standardwebhooks import Webhook
from webhook_receiver import Receiver, receiver

SECRET = "whsec_" + base64.b64encode(bytes(range(90, 122))).decode()
PRODUCER = "https://example.com/watch-fleet"
RUN_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


def _failed_runs(count: int) -> list[dict[str, Any]]:
    """``count`` runs of one job, each reading ``src`` and failing."""
    return [
        {
            "eventType": "FAIL",
            "eventTime": f"2026-04-01T00:{i:02d}:00Z",
            "run": {"runId": str(uuid.UUID(int=0xF1EE7000 + i, version=4)), "facets": {}},
            "job": {"namespace": "fleet", "name": "load", "facets": {}},
            "inputs": [{"namespace": "pg", "name": "src", "facets": {}}],
            "outputs": [{"namespace": "pg", "name": "dst", "facets": {}}],
            "producer": PRODUCER,
            "schemaURL": RUN_SCHEMA,
        }
        for i in range(count)
    ]


@contextmanager
def _serve(folder: Path, database: str, hook: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """One collector: ``serve`` with the sql store and the watch in ``database``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lineage.toml").write_text(
        '[lineage.store]\nbackend = "sql"\n'
        f'[lineage.store.sql]\nurl = "{database}"\n'
        '[lineage.alerts]\ntimeout_ms = 2000\nretry_for = "10m"\n'
        f'[[lineage.alerts.webhook]]\nurl = "{hook}"\nsecret = "{SECRET}"\n',
        encoding="utf-8",
    )
    with serve_process(folder, config=folder / "lineage.toml") as served:
        yield served


def _post(url: str, events: list[dict[str, Any]]) -> None:
    answer = httpx.post(f"{url}/api/v1/lineage/batch", json=events, timeout=30)
    assert answer.status_code == 200, answer.text


def _delivered(hook: Receiver) -> list[str]:
    """The webhook ids of the 2xx deliveries, each signature checked."""
    ids = []
    for item in hook.ok():
        Webhook(SECRET).verify(item.body, item.headers)
        ids.append(json.loads(item.body)["id"])
    return ids


def _wait(hook: Receiver, count: int, timeout: float) -> None:
    def enough() -> bool:
        return len({r.webhook_id for r in hook.received if 200 <= r.status < 300}) >= count

    assert hook.wait_for(enough, timeout), [r.status for r in hook.received]


@pytest.mark.timeout(300)
def test_three_collectors_send_each_alert_once(tmp_path: Path) -> None:
    events = _failed_runs(12)
    with postgres_database("watch_fleet") as database, receiver() as hook, ExitStack() as stack:
        urls = [
            stack.enter_context(_serve(tmp_path / f"c{i}", database, hook.url))[0] for i in range(3)
        ]
        for url in urls:  # every collector stores every event: each notices every cause
            _post(url, events)
        _wait(hook, len(events), 60)
        time.sleep(3.0)  # time for a duplicate, were one to come
        ids = _delivered(hook)
        assert len(ids) == len(events) == len(set(ids)), ids


@pytest.mark.timeout(300)
def test_a_collector_killed_with_alerts_pending_sends_them_after_restart(
    tmp_path: Path,
) -> None:
    events = _failed_runs(5)
    with postgres_database("watch_kill") as database, receiver() as hook:
        hook.status = 503  # the receiver is down: every alert waits for a retry
        with _serve(tmp_path / "first", database, hook.url) as (url, proc):
            _post(url, events)
            assert hook.wait_for(
                lambda: len({r.webhook_id for r in hook.received}) >= len(events), 60
            )
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        assert _delivered(hook) == []
        hook.status = 200
        with _serve(tmp_path / "second", database, hook.url):
            _wait(hook, len(events), 120)
        ids = _delivered(hook)
        assert sorted(ids) == sorted(set(ids)) and len(ids) == len(events)
