"""Helpers shared by the benchmarks (one copy; the throwaway PostgreSQL database is tests/servers.py's). Each benchmark runs as ``python bench/x.py``, so its
own folder is on ``sys.path`` and ``from _bench_common import ...`` finds this module."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

import lineage_sdk
from lineage_instrumentation.propagation import inject
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.sdk.export import EncodedEvent, ExportResult, LineageExporter
from lineage_sdk.sdk.runs import LineageRun

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # servers.py
from servers import free_port, postgres_database
from vhosts import session_vhost

__all__ = [  # and AMQP_URL, made on first use (__getattr__)
    "BODY",
    "TARGET_STREAMING",
    "NoopLineageExporter",
    "configure_noop",
    "consume_arguments",
    "lineage_headers",
    "load_average",
    "postgres_database",
    "report_consume_costs",
    "serving",
]


def __getattr__(name: str) -> str:
    """``AMQP_URL``, made on first import: $LINEAGE_BENCH_AMQP_URL, else a vhost of this run's own
    on the machine's shared broker (tests/vhosts.py; deleted at exit), never its ``/``: a bench
    declares and fills queues, which must not land where other people work."""
    if name == "AMQP_URL":
        return os.environ.get("LINEAGE_BENCH_AMQP_URL") or session_vhost().url
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


TARGET_STREAMING = 1.3  # streaming mode's cost per consumed message, times the uninstrumented
BODY = b'{"order": 1, "amount": 12.5}'


class NoopLineageExporter(LineageExporter):
    """Events are built and serialized by the pipeline, then counted and dropped."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, batch: Sequence[EncodedEvent]) -> ExportResult:
        self.count += len(batch)
        return ExportResult.SUCCESS

    def shutdown(self, timeout: float = 30.0) -> None:
        return None


def configure_noop() -> NoopLineageExporter:
    """Lineage configured (namespace ``bench``) to send to a no-op exporter, which is returned."""
    exporter = NoopLineageExporter()
    lineage_sdk.configure(
        LineageConfig.model_validate(
            {"exporters": ["memory"], "producer": {"job_namespace": "bench"}}
        ),
        exporters=[exporter],
        strict=True,
    )
    return exporter


def consume_arguments(description: str, argv: Sequence[str] | None) -> argparse.Namespace:
    """``--messages``, ``--rounds`` and ``--json`` of the consume benchmarks."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--messages", type=int, default=5000, help="messages per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each variant")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    return parser.parse_args(argv)


def lineage_headers() -> dict[str, Any]:
    """Message headers as an instrumented producer's run would send them."""
    headers: dict[str, Any] = {}
    inject(headers, LineageRun(str(uuid.uuid4()), "bench", "bench.producer", [], [], {}, {}, None))
    return headers


def load_average() -> str:
    """The 1, 5 and 15 minute load averages (as ``uptime`` prints them), to report beside figures
    measured on a shared machine."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def report_consume_costs(
    results: Mapping[str, list[float]],
    args: argparse.Namespace,
    how: str,
    exporter: NoopLineageExporter,
) -> int:
    """Print each variant's median cost per message and its ratio to ``uninstrumented`` (and the
    figures as JSON with ``--json``); ``how`` names the consume loop in the heading."""
    base = statistics.median(results["uninstrumented"])
    figures: dict[str, Any] = {"messages_per_round": args.messages, "rounds": args.rounds}
    print(
        f"consume-and-ack cost per message, median of {args.rounds} rounds "
        f"of {args.messages} messages ({how}):"
    )
    for variant, costs in results.items():
        cost = statistics.median(costs)
        ratio = cost / base
        figures[variant] = {"us_per_message": round(cost * 1e6, 2), "ratio": round(ratio, 3)}
        note = ""
        if variant == "streaming":
            verdict = "met" if ratio <= TARGET_STREAMING else "NOT met"
            note = f"  (target <= {TARGET_STREAMING:.1f}x: {verdict})"
        print(f"  {variant:15s} {cost * 1e6:8.2f} us   {ratio:5.2f}x{note}")
    print(f"  events exported: {exporter.count}")
    if args.json:
        print(json.dumps(figures))
    return 0


@contextmanager
def serving(config_text: str, folder: Path) -> Iterator[str]:
    """``lineage-collector serve`` as its own process on a free loopback port; its base URL."""
    config = folder / "lineage.toml"
    config.write_text(config_text, encoding="utf-8")
    port = free_port()
    exe = (
        shutil.which("lineage-collector", path=str(Path(sys.executable).parent))
        or "lineage-collector"
    )
    log = (folder / "serve.log").open("wb")
    proc = subprocess.Popen(
        [
            exe,
            "serve",
            "--config",
            str(config),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "WARNING",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"serve exited: {(folder / 'serve.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/api/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("serve did not answer within 120 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
