"""A separate process for the spool tests: ``fill`` spools events and waits to be killed;
``deliver`` starts on the same spool directory, publishes what it finds, and exits; ``run N``
is an application that exports N events (ids written to ``out``), flushes and exits cleanly.
A spool directory of ``default`` means the exporter's default folder (under XDG_CACHE_HOME)."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rabbitmq_support import make_events

from lineage_exporters.rabbitmq import RabbitMQExporter
from lineage_exporters.rabbitmq.config import RabbitMQConfig


def main() -> None:
    mode, url, exchange, spool_arg, out = sys.argv[1:6]
    spool_dir = None if spool_arg == "default" else spool_arg
    if mode == "run":
        run(url, exchange, spool_dir, out, int(sys.argv[6]))
    elif mode == "fill":
        n = int(sys.argv[6])
        exporter = RabbitMQExporter(
            RabbitMQConfig(
                url=url, spool_dir=spool_dir, memory_buffer_events=0, reconnect_initial_ms=50
            ),
            exchange=exchange,
        )
        events = make_events(n)
        Path(out).write_text("\n".join(e.event_id for e in events))
        for i in range(0, n, 100):
            exporter.export(events[i : i + 100])
        stats = exporter.stats()
        print(json.dumps({"spooled": stats.spooled, "dropped": stats.dropped}), flush=True)
        time.sleep(600)  # killed with SIGKILL by the test, nothing flushed or closed
    else:
        exporter = RabbitMQExporter(RabbitMQConfig(url=url, spool_dir=spool_dir), exchange=exchange)
        ok = exporter.force_flush(60)
        exporter.shutdown(10)
        stats = exporter.stats()
        print(
            json.dumps(
                {
                    "flushed": ok,
                    "replayed": stats.replayed,
                    "exported": stats.exported,
                    "spool_bytes": stats.spool_bytes,
                }
            ),
            flush=True,
        )


def run(url: str, exchange: str, spool_dir: str | None, out: str, n: int) -> None:
    """An application: export ``n`` events, flush (to the broker, or to the spool if it refuses
    us), shut down, and report; ``out`` gets each event's [runId, eventTime]."""
    exporter = RabbitMQExporter(
        RabbitMQConfig(url=url, spool_dir=spool_dir, reconnect_initial_ms=50), exchange=exchange
    )
    events = make_events(n, namespace=f"app-{uuid.uuid4().hex[:6]}")
    runs = [json.loads(e.payload) for e in events]
    Path(out).write_text(json.dumps([[r["run"]["runId"], r["eventTime"]] for r in runs]))
    exporter.export(events)
    flushed = exporter.force_flush(30)
    exporter.shutdown(10)
    stats = exporter.stats()
    report = {
        "flushed": flushed,
        "exported": stats.exported,
        "spooled": stats.spooled,
        "replayed": stats.replayed,
        "spool_bytes": stats.spool_bytes,
        "spool_dir": str(exporter.spool_dir),
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
