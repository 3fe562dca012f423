"""A crash during a broker outage loses at most the stated window (issue 13, item 2).

The application records 200 runs a second with the default configuration against a private
node. The node is SIGKILLed; 15 s into the outage the application is SIGKILLed too; the node
comes back after 30 s and the application is started again on the same spool. Every run that
returned more than the window before the application died must be on the broker, START and
COMPLETE. The window is the pipeline's ``schedule_delay_ms`` (events wait there before the
exporter sees them) plus ``spool_fsync_interval_ms`` (docs/rabbitmq-exporter.md).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from brokers import RabbitNode
from rabbitmq_support import unique_topology

from lineage_exporters.rabbitmq.config import RabbitMQConfig
from lineage_sdk.config.schema import PipelineConfig

pytestmark = [pytest.mark.rabbitmq, pytest.mark.slow, pytest.mark.timeout(170)]

APP = str(Path(__file__).resolve().parent / "outage_app.py")
RATE = 200
OUTAGE_S = 30.0
CRASH_AFTER_S = 15.0


def _recorded(ids_file: Path) -> list[tuple[str, float]]:
    """The lines the app finished writing.

    SIGKILL can cut a write that crosses a page boundary short (the kernel checks for a fatal
    signal between pages), so the last line may be torn: ``<id> 1796`` for ``<id> 1796628630.6``.
    That run returned within the window; its time is unknown, so it is left out.
    """
    text = ids_file.read_text()
    out = []
    for line in text[: text.rfind("\n") + 1].splitlines():
        parts = line.split()
        if len(parts) == 2:
            out.append((parts[0], float(parts[1])))
    return out


def test_crash_during_an_outage_loses_only_the_window(
    rabbit_node: RabbitNode, tmp_path: Path
) -> None:
    window_s = (
        PipelineConfig().schedule_delay_ms + RabbitMQConfig().spool_fsync_interval_ms
    ) / 1000
    spool, ids_file = tmp_path / "spool", tmp_path / "ids.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with unique_topology(rabbit_node.url) as topo:
        app = subprocess.Popen(
            [
                sys.executable,
                APP,
                "run",
                rabbit_node.url,
                topo.exchange,
                str(spool),
                str(ids_file),
                str(RATE),
            ],
            env=env,
        )
        try:
            deadline = time.monotonic() + 30
            while not ids_file.exists() or len(_recorded(ids_file)) < RATE * 2:
                assert app.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
            outage_started = time.monotonic()
            rabbit_node.kill()
            time.sleep(CRASH_AFTER_S)
            killed_at = time.time()
            app.send_signal(signal.SIGKILL)
            app.wait(10)
        finally:
            if app.poll() is None:
                app.kill()
                app.wait(10)
        recorded = _recorded(ids_file)
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - outage_started)))
        rabbit_node.start()

        replay = subprocess.run(
            [sys.executable, APP, "replay", rabbit_node.url, topo.exchange, str(spool)],
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
            check=True,
        )
        stats = json.loads(replay.stdout.strip().splitlines()[-1])
        got: dict[str, set[str]] = {}
        for _, _, body in topo.drain(idle=1.0, timeout=60):
            event = orjson.loads(body)
            got.setdefault(event["run"]["runId"], set()).add(event["eventType"])

    must_have = [(rid, t) for rid, t in recorded if t < killed_at - window_s]
    lost = [(rid, t) for rid, t in must_have if got.get(rid) != {"START", "COMPLETE"}]
    during_outage = [rid for rid, t in recorded if t >= killed_at - CRASH_AFTER_S]
    lost_any = [t for rid, t in recorded if got.get(rid) != {"START", "COMPLETE"}]
    print(
        f"recorded {len(recorded)} runs, {len(during_outage)} during the outage; replayed "
        f"{stats['replayed']} events; lost {len(lost_any)} run(s), the oldest "
        f"{(killed_at - min(lost_any)) if lost_any else 0:.3f} s before the kill"
    )
    assert len(during_outage) > RATE * CRASH_AFTER_S * 0.8  # the app really ran on
    assert stats["replayed"] > 0 and stats["spool_bytes"] == 0
    assert lost == [], f"{len(lost)} run(s) older than {window_s} s were lost"
