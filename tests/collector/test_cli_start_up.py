"""The commands start without importing what only their work needs.

Every configuration key is a flag of ``lineage-collector`` and ``lineage-instrument``, so their
help lists the table of every exporter, store and instrumentor. The tables are read from the
light modules the ``lineage_sdk.config_sections`` entry points name, never by importing the
components: help must not import a database driver, a broker or HTTP client, the engine or the
OpenTelemetry SDK (``lineage_sdk``'s public API loads the SDK on first use only). Each command
runs in a fresh interpreter, as users and the test suite start it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

# What help must not import: each costs tens of milliseconds, sqlalchemy some 200.
HEAVY = (
    "sqlalchemy",
    "pymongo",
    "neo4j",
    "httpx",
    "pika",
    "opentelemetry.sdk",
    "lineage_sdk.collector.engine",
)

# Runs a command's main() with argv, keeping what it prints, then says which of HEAVY it imported.
PROBE = """
import contextlib, io, json, sys
from {module} import main

with contextlib.redirect_stdout(io.StringIO()) as shown:
    try:
        main({argv!r})
    except SystemExit as exc:
        assert exc.code in (None, 0), exc.code
found = sorted(
    name for name in sys.modules if any(name == h or name.startswith(h + ".") for h in {heavy!r})
)
print(json.dumps({{"found": found, "help": shown.getvalue()}}))
"""


def _probe(module: str, argv: list[str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGE_", "OPENLINEAGE_"))}
    env["COLUMNS"] = "300"  # every flag's name on one line
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module, argv=argv, heavy=HEAVY)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    assert "usage" in answer["help"].lower(), answer["help"]
    return answer


@pytest.mark.parametrize(
    ("module", "argv"),
    [
        ("lineage_sdk.collector.cli", ["--help"]),
        ("lineage_sdk.collector.cli", ["run", "--help"]),
        ("lineage_sdk.cli", ["--help"]),
        ("lineage_instrumentation.wrapper", ["--help"]),
    ],
)
def test_help_imports_no_driver_client_engine_or_sdk(module: str, argv: list[str]) -> None:
    assert _probe(module, argv)["found"] == []


def test_the_flags_still_come_from_every_components_table() -> None:
    answer = _probe("lineage_sdk.collector.cli", ["check", "--help"])
    assert answer["found"] == []
    for flag in (
        "--store-sql-url",  # the tables of the stores that import a driver or the engine
        "--store-graph-graph-connection-name",
        "--store-document-collection-name",
        "--store-openlineage-http-url",
        "--store-logging-logger-name",
        "--rabbitmq-url",  # the rabbitmq exporter's (pika)
        "--alerts-retry-for",  # the collector's own
        "--collector-prefetch",
    ):
        assert flag in answer["help"], flag
