"""An application for the crash-during-an-outage test, run as its own process.

``run URL TOPIC SPOOL IDS RATE``: records RATE runs a second through ``@track_lineage`` with the
default configuration (only the URL, topic and spool directory are set) and appends
``<run id> <wall time>`` to IDS as each run returns (an unbuffered write: it survives SIGKILL),
until it is killed. ``replay URL TOPIC SPOOL``: starts on the same spool, waits until everything
it found is confirmed, shuts down and prints the exporter's counters as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time

import lineage_sdk
from lineage_exporters.rabbitmq import RabbitMQExporter
from lineage_exporters.rabbitmq.config import RabbitMQConfig
from lineage_sdk import LineageDataset, current_run, track_lineage
from lineage_sdk.config.schema import LineageConfig

ORDERS = LineageDataset("postgres://db:5432", "shop.public.orders")


def _configure(url: str, topic: str, spool: str) -> RabbitMQExporter:
    config = LineageConfig(collector_topic=topic, rabbitmq=RabbitMQConfig(url=url, spool_dir=spool))
    sdk = lineage_sdk.configure(config)
    assert sdk is not None
    (exporter,) = sdk.exporters
    assert isinstance(exporter, RabbitMQExporter)
    return exporter


def run(url: str, topic: str, spool: str, ids: str, rate: float) -> None:
    _configure(url, topic, spool)

    @track_lineage(job_name="outage.step", inputs=[ORDERS])
    def step() -> str:
        return current_run().run_id

    fd = os.open(ids, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    period = 1.0 / rate
    next_at = time.monotonic()
    while True:
        run_id = step()
        os.write(fd, f"{run_id} {time.time():.6f}\n".encode())
        next_at += period
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def replay(url: str, topic: str, spool: str) -> None:
    exporter = _configure(url, topic, spool)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        stats = exporter.stats()
        if stats.connected and stats.buffered == 0 and stats.spool_bytes == 0:
            break
        time.sleep(0.1)
    lineage_sdk.shutdown(10)
    stats = exporter.stats()
    print(json.dumps({k: getattr(stats, k) for k in ("replayed", "exported", "spool_bytes")}))


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(*sys.argv[2:6], float(sys.argv[6]))
    else:
        replay(*sys.argv[2:5])
