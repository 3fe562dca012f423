"""Broker errors a person can read: once running, ``lineage-collector run`` writes one line per
change of state, naming the cause, with no pika records and no traceback; ``check`` names the
cause."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from lineage_sdk.transport.amqp import ConnectionStateLog

pytestmark = pytest.mark.rabbitmq

WRONG_PASSWORD = "Wr0ng-pa55word"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the socket is


def _env(topic: str, tmp_path: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGE_", "OPENLINEAGE_"))}
    env.update(
        {
            "LINEAGE_COLLECTOR_TOPIC": topic,
            "LINEAGE_RABBITMQ_URL": url,
            "LINEAGE_RABBITMQ_RECONNECT_INITIAL_MS": "100",
            "LINEAGE_RABBITMQ_RECONNECT_MAX_MS": "400",
            "LINEAGE_STORE_BACKEND": "sql",
            "LINEAGE_STORE_SQL_URL": f"sqlite:///{tmp_path}/lineage.db",
            "COLUMNS": "200",
        }
    )
    return env


def _records(lines: list[str]) -> list[dict[str, object]]:
    records = [orjson.loads(line) for line in lines]
    assert not [r for r in records if str(r["logger"]).startswith("pika")], lines
    return records


# At start-up a refused password, a missing vhost or an unreachable broker end `run` with one
# line (tests/collector/test_cli_safe_defaults.py); once running, a lost broker is retried with
# one line per change of state (below).


@pytest.mark.parametrize(
    ("url", "cause"),
    [
        ("amqp://guest:guest@127.0.0.1:{closed}/%2F", "connection refused by 127.0.0.1:{closed}"),
        (
            f"amqp://guest:{WRONG_PASSWORD}@127.0.0.1:5672/%2F",
            "the broker refused the credentials of user 'guest'",
        ),
    ],
    ids=["closed-port", "wrong-password"],
)
def test_check_names_what_failed(topic, tmp_path, url, cause):
    closed = _closed_port()
    url, cause = url.format(closed=closed), cause.format(closed=closed)
    result = subprocess.run(
        [sys.executable, "-m", "lineage_sdk.collector.cli", "check"],
        env=_env(topic, tmp_path, url),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    text = " ".join(result.stdout.split())  # the table wraps long cells
    assert cause in text, result.stdout
    assert "AMQPConnectionError" not in text and WRONG_PASSWORD not in text
    assert result.stderr.strip() == "", result.stderr


def test_an_outage_writes_one_line_when_lost_one_while_down_and_one_when_back(topic, tmp_path):
    # The outage is a proxy in front of the shared broker that stops accepting and cuts its
    # connections; the broker itself is never touched.
    sys.path.insert(0, str(Path(__file__).parents[1] / "rabbitmq_exporter"))
    from rabbitmq_support import TcpProxy

    proxy = TcpProxy()
    log = tmp_path / "collector.err"
    with open(log, "w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "lineage_sdk.collector.cli", "run"],
            env=_env(topic, tmp_path, proxy.url),
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )

    def read_until(needle: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while needle not in log.read_text():
            assert time.monotonic() < deadline, f"no {needle!r} in {log.read_text()}"
            time.sleep(0.05)

    try:
        read_until('"message":"consuming ')
        proxy.stop()
        read_until("lost the broker connection")
        time.sleep(3)  # about ten refused attempts
        proxy.start()
        read_until("connected to the broker")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        proxy.stop()
    lines = log.read_text().splitlines()
    assert "Traceback" not in log.read_text()
    messages = [str(r["message"]) for r in _records([line for line in lines if line.strip()])]
    down = [m for m in messages if "broker" in m and not m.startswith("consuming")]
    assert len(down) == 3, messages
    assert down[0].startswith(
        f"lost the broker connection at amqp://guest:***@127.0.0.1:{proxy.port}"
    )
    assert down[1].startswith("cannot connect to the broker") and "connection refused" in down[1]
    assert down[2].startswith("connected to the broker") and "failed attempt(s)" in down[2]
    assert sum(m.startswith("consuming ") for m in messages) == 2


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_state_log_reminds_with_the_count_and_reports_recovery_and_loss(caplog):
    clock = _Clock()
    state = ConnectionStateLog(
        logging.getLogger("test.state"), "amqp://u:***@h:1/%2F", reminder_s=60, clock=clock
    )
    caplog.set_level(logging.INFO, logger="test.state")
    for _ in range(30):  # 30 refused attempts within a minute: one line
        state.failed("connection refused by h:1", 1.0)
        clock.now += 1
    assert [r.getMessage() for r in caplog.records] == [
        "cannot connect to the broker at amqp://u:***@h:1/%2F: connection refused by h:1"
        " (retrying quietly with backoff)"
    ]
    clock.now += 31
    state.failed("connection refused by h:1", 1.0)  # a minute on: a reminder with the count
    assert caplog.records[-1].getMessage() == (
        "still cannot connect to the broker at amqp://u:***@h:1/%2F after 31 attempt(s)"
        " over 61s: connection refused by h:1"
    )
    state.failed("the broker refused the credentials of user 'u'", 1.0)  # a new cause: a line
    assert "credentials" in caplog.records[-1].getMessage()
    state.connected()
    assert caplog.records[-1].getMessage() == (
        "connected to the broker at amqp://u:***@h:1/%2F after 32 failed attempt(s) over 61s"
    )
    count = len(caplog.records)
    state.connected()  # still up: nothing
    state.failed("connection to h:1 lost (EOF)", 0.5)
    assert caplog.records[-1].getMessage() == (
        "lost the broker connection at amqp://u:***@h:1/%2F: connection to h:1 lost (EOF);"
        " reconnecting in 0.5s"
    )
    state.failed("connection to h:1 lost (EOF)", 0.5)  # the same again: quiet
    assert len(caplog.records) == count + 1
