"""A producer for the cluster failover test, run as its own process.

``URLS TOPIC SPOOL IDS RUNS RATE``: records RUNS runs (RATE a second) through ``@track_lineage``
with the RabbitMQ exporter given every broker address (URLS, comma-separated), appends each run
id to IDS as it returns, then waits until everything is confirmed and prints the exporter's
counters as JSON.
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


def main(urls: str, topic: str, spool: str, ids: str, runs: int, rate: float) -> None:
    config = LineageConfig(
        collector_topic=topic, rabbitmq=RabbitMQConfig(urls=urls.split(","), spool_dir=spool)
    )
    sdk = lineage_sdk.configure(config)
    assert sdk is not None
    (exporter,) = sdk.exporters
    assert isinstance(exporter, RabbitMQExporter)

    @track_lineage(job_name="cluster.step", inputs=[ORDERS])
    def step() -> str:
        return current_run().run_id

    fd = os.open(ids, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    period, next_at = 1.0 / rate, time.monotonic()
    for _ in range(runs):
        os.write(fd, f"{step()}\n".encode())
        next_at += period
        time.sleep(max(0.0, next_at - time.monotonic()))
    lineage_sdk.force_flush()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        stats = exporter.stats()
        if stats.connected and not (stats.buffered or stats.in_flight or stats.spool_bytes):
            break
        print(stats, file=sys.stderr, flush=True)
        time.sleep(1.0)
    lineage_sdk.shutdown(20)
    stats = exporter.stats()
    print(
        json.dumps(
            {k: getattr(stats, k) for k in ("exported", "retried", "replayed", "spool_bytes")}
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:5], int(sys.argv[5]), float(sys.argv[6]))
