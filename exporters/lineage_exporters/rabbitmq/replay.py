"""Deliver a spool folder on purpose: ``python -m lineage_exporters.rabbitmq.replay FOLDER``.

Spools written by older versions record no destination, so no exporter adopts them by itself
(their events might belong to another broker or tenant). Run this with the configuration of the
application that wrote them (``LINEAGE_RABBITMQ_URL``, ``lineage.toml``, ... as that application
reads it): it labels every unlabelled spool in FOLDER with the destination that configuration
names, then publishes them, and what FOLDER holds for that destination already, and exits.
What cannot be delivered now stays in FOLDER, labelled, for the next run (or for an exporter with
the same destination and ``spool_dir = FOLDER``).

Exit status: 0 when FOLDER holds nothing more for this destination, 1 when some events are
still waiting in it, 2 for a bad argument or configuration (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lineage_exporters.rabbitmq._spool import unlabelled_instances
from lineage_exporters.rabbitmq.config import RabbitMQConfig
from lineage_exporters.rabbitmq.exporter import RabbitMQExporter, destination_for
from lineage_sdk.config import load_config
from lineage_sdk.exceptions import ConfigError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Label, publish and report; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m lineage_exporters.rabbitmq.replay",
        description="Publish the spool folder FOLDER to the RabbitMQ destination that the "
        "current lineage configuration names, including spools of older versions.",
    )
    parser.add_argument("folder", type=Path, help="the spool folder a warning named")
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the broker (60)"
    )
    args = parser.parse_args(argv)
    folder: Path = args.folder
    if not folder.is_dir():
        print(f"replay: {folder} is not a directory", file=sys.stderr)
        return 2
    try:
        config = load_config()
        settings = config.section("rabbitmq", RabbitMQConfig)
        destination = destination_for(settings, config.collector_topic)
    except ConfigError as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    claimed = unlabelled_instances(folder, claim_for=destination)
    target = destination.describe()
    print(f"replay: labelled {len(claimed)} old spool folder(s) in {folder} for {target}")
    exporter = RabbitMQExporter(
        settings.model_copy(update={"spool_dir": str(folder)}),
        exchange=config.collector_topic,
        job_namespace=config.producer.job_namespace,
    )
    exporter.force_flush(args.timeout)
    exporter.shutdown(10.0)
    stats = exporter.stats()
    if stats.spool_bytes or stats.buffered:
        print(
            f"replay: {stats.exported} event(s) delivered; the rest are still waiting in "
            f"{folder} (the broker did not confirm them, see the log above); run this again",
            file=sys.stderr,
        )
        return 1
    print(f"replay: {stats.exported} event(s) delivered to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
