"""Running the example services as separate processes under ``lineage-instrument``: shared by
test_wrapper_subprocess and test_aio_pika (a module of its own: helpers are never imported from a
conftest or a test module)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from conformance import validate_event
from vhosts import session_vhost

__all__ = ["EXAMPLES", "WRAPPER", "clean_env", "read_events", "run_pair"]

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
_SCRIPT = Path(sys.executable).parent / "lineage-instrument"
WRAPPER = (
    [str(_SCRIPT)]
    if _SCRIPT.exists()
    else [sys.executable, "-m", "lineage_instrumentation.wrapper"]
)


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LINEAGE_", "OPENLINEAGE_")) and k != "PYTHONPATH"
    }
    env["LINEAGE_PRODUCER_JOB_NAMESPACE"] = "tests.instr.sub"
    # The examples' broker and the RabbitMQ exporter's (the default exporter): a private vhost,
    # never the shared broker's "/".
    env["AMQP_URL"] = env["LINEAGE_RABBITMQ_URL"] = session_vhost().url
    env.update(extra)
    return env


def read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for event in events:
        validate_event(event)
    return events


def run_pair(
    env: dict[str, str],
    tmp_path: Path,
    *,
    wrapped: bool = True,
    consumer_env: dict[str, str] | None = None,
    consumer_script: str = "consumer_service.py",
) -> tuple[Any, Any]:
    """Start the consumer (``examples/<consumer_script>``), wait until it is subscribed, run the
    pika producer service, wait for both; both under ``lineage-instrument`` when ``wrapped``."""
    prefix = WRAPPER if wrapped else []
    consumer = subprocess.Popen(
        [*prefix, sys.executable, str(EXAMPLES / consumer_script)],
        env={**env, "LINEAGE_FILE_PATH": str(tmp_path / "consumer.jsonl"), **(consumer_env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not Path(env["READY_FILE"]).exists():
            assert consumer.poll() is None, consumer.communicate()
            assert time.monotonic() < deadline, "consumer did not subscribe"
            time.sleep(0.05)
        producer = subprocess.run(
            [*prefix, sys.executable, str(EXAMPLES / "producer_service.py")],
            env={**env, "LINEAGE_FILE_PATH": str(tmp_path / "producer.jsonl")},
            capture_output=True,
            text=True,
            timeout=60,
        )
        out, err = consumer.communicate(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    return producer, subprocess.CompletedProcess(consumer.args, consumer.returncode, out, err)
