"""A separate process for the restart test: ``fill`` spools events and waits to be killed;
``deliver`` starts on the same spool directory, publishes what it finds, and exits."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rabbitmq_support import make_events

from lineage_exporters.rabbitmq import RabbitMQExporter
from lineage_exporters.rabbitmq.config import RabbitMQConfig


def main() -> None:
    mode, url, exchange, spool_dir, out = sys.argv[1:6]
    if mode == "fill":
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


if __name__ == "__main__":
    main()
