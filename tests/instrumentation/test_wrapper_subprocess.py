"""``lineage-instrument`` end to end: separate producer and consumer processes, the real broker."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .broker_helpers import Names, connect, validate_event
from .wrapper_services import WRAPPER, clean_env, read_events, run_pair

pytestmark = pytest.mark.rabbitmq

NAMESPACE = "rabbitmq://127.0.0.1:5672"


@pytest.fixture
def service_env(names: Names, tmp_path: Path) -> dict[str, str]:
    return clean_env(
        EXCHANGE=names.exchange,
        QUEUE=names.queue,
        ROUTING_KEY=names.routing_key,
        COUNT="3",
        READY_FILE=str(tmp_path / "ready"),
        LINEAGE_EXPORTERS="file",
    )


@pytest.mark.parametrize(
    ("mode", "style"),
    [
        ("per_message", "callback"),
        ("per_message", "generator"),
        ("per_message", "select"),
        ("streaming", "callback"),
    ],
)
def test_producer_and_consumer_services_are_linked(mode, style, names, service_env, tmp_path):
    env = {**service_env, "LINEAGE_INSTRUMENTATION_PIKA_MODE": mode, "STYLE": style}
    producer, consumer = run_pair(env, tmp_path)
    assert (producer.returncode, consumer.returncode) == (0, 0), (producer.stderr, consumer.stderr)
    assert producer.stdout == f"published 3 orders to {names.exchange}:{names.routing_key}\n"
    assert consumer.stdout == "billed orders [0, 1, 2]\n"
    assert producer.stderr == consumer.stderr == ""

    produced = read_events(tmp_path / "producer.jsonl")
    consumed = read_events(tmp_path / "consumer.jsonl")
    expected = {(NAMESPACE, f"{names.exchange}:{names.routing_key}")}
    assert {(d["namespace"], d["name"]) for e in produced for d in e["outputs"]} == expected
    consumer_runs = [e for e in consumed if e["eventType"] in ("COMPLETE", "FAIL")]
    assert {(d["namespace"], d["name"]) for e in consumer_runs for d in e["inputs"]} == expected
    assert {e["job"]["name"] for e in produced} == {"producer_service"}
    callback = (
        "consume"
        if style == "generator"
        else ("run_select.on_message" if style == "select" else "on_order")
    )
    assert {e["job"]["name"] for e in consumed} == {f"{names.queue}.{callback}"}
    assert {e["job"]["namespace"] for e in produced + consumed} == {"tests.instr.sub"}
    producer_runs = {e["run"]["runId"] for e in produced}
    if mode == "per_message":
        assert len(producer_runs) == 3
        assert len(consumer_runs) == 3
        parents = {e["run"]["facets"]["parent"]["run"]["runId"] for e in consumer_runs}
        assert parents == producer_runs  # each delivery's run is the child of its publish
        assert all(
            e["run"]["facets"]["parent"]["job"]["name"] == "producer_service" for e in consumer_runs
        )
    else:
        assert len(producer_runs) == 1
        assert len(consumer_runs) == 1
        assert consumer_runs[0]["job"]["facets"]["jobType"]["processingType"] == "STREAMING"


def test_events_travel_through_the_rabbitmq_exporter(names, service_env, tmp_path):
    """The same services, their events collected from a test queue behind the exporter."""
    topic = f"test.instr.lineage.{uuid.uuid4().hex[:10]}"
    conn = connect()
    ch = conn.channel()
    ch.exchange_declare(topic, exchange_type="topic", durable=True)
    collected = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(collected, topic, routing_key="#")
    try:
        env = {
            **service_env,
            "LINEAGE_EXPORTERS": "rabbitmq",
            "LINEAGE_COLLECTOR_TOPIC": topic,
            "LINEAGE_RABBITMQ_SPOOL_DIR": str(tmp_path / "spool"),
        }
        producer, consumer = run_pair(env, tmp_path)
        assert (producer.returncode, consumer.returncode) == (0, 0), (
            producer.stderr,
            consumer.stderr,
        )
        events = []
        deadline = time.monotonic() + 20
        while len(events) < 12 and time.monotonic() < deadline:
            method, _props, body = ch.basic_get(collected, auto_ack=True)
            if method is None:
                conn.sleep(0.05)
                continue
            events.append(json.loads(body))
        for event in events:
            validate_event(event)
        # 3 publish runs and 3 delivery runs, START and COMPLETE each; the exporter's own
        # publishes made no runs.
        assert len(events) == 12
        produced = [e for e in events if e["job"]["name"] == "producer_service"]
        consumed = [e for e in events if e["job"]["name"] == f"{names.queue}.on_order"]
        assert len(produced) == len(consumed) == 6
        producer_runs = {e["run"]["runId"] for e in produced}
        assert {e["run"]["facets"]["parent"]["run"]["runId"] for e in consumed} == producer_runs
        outputs = {d["name"] for e in produced for d in e["outputs"]}
        inputs = {d["name"] for e in consumed for d in e["inputs"]}
        assert outputs == inputs == {f"{names.exchange}:{names.routing_key}"}
    finally:
        ch.exchange_delete(topic)
        conn.close()


def test_program_behaves_the_same_with_pika_instrumentation_disabled(names, service_env, tmp_path):
    env = {**service_env, "LINEAGE_DISABLED_INSTRUMENTATIONS": "pika"}
    producer, consumer = run_pair(env, tmp_path)
    assert (producer.returncode, consumer.returncode) == (0, 0)
    assert consumer.stdout == "billed orders [0, 1, 2]\n"
    assert producer.stderr == consumer.stderr == ""
    assert read_events(tmp_path / "producer.jsonl") == []
    assert read_events(tmp_path / "consumer.jsonl") == []


def test_bad_configuration_one_log_line_and_program_unchanged(names, service_env, tmp_path):
    env = {**service_env, "LINEAGE_INSTRUMENTATION_PIKA_MODE": "sometimes", "FAIL_ON": "1"}
    reference = run_pair(env, tmp_path, wrapped=False)
    Path(env["READY_FILE"]).unlink()
    producer, consumer = run_pair(env, tmp_path)
    # FAIL_ON makes the consumer die of its own exception: exit code and output are its own.
    assert consumer.returncode == reference[1].returncode == 1
    assert "ValueError: cannot bill order 1" in consumer.stderr
    assert producer.returncode == reference[0].returncode == 0
    assert producer.stdout == reference[0].stdout
    assert consumer.stdout == reference[1].stdout
    (line,) = producer.stderr.splitlines()
    assert "instrumentation.pika_mode" in line and "sometimes" in line
    assert consumer.stderr.count("pika_mode") == 1
    assert read_events(tmp_path / "producer.jsonl") == []


def run_python(code: str, env: dict[str, str], *, wrapped: bool = True) -> Any:
    prefix = WRAPPER if wrapped else []
    return subprocess.run(
        [*prefix, sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


PROBE = (
    "import sys; from lineage_instrumentation.pika import PikaInstrumentor; "
    "print(PikaInstrumentor().is_instrumented, 'pika' in sys.modules)"
)


def test_missing_pika_is_skipped_quietly(tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    # The application's sitecustomize hides pika, as if it were not installed.
    (app / "sitecustomize.py").write_text(
        "import sys\n"
        "class _NoPika:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pika' or name.startswith('pika.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, _NoPika())\n"
    )
    env = clean_env(
        PYTHONPATH=str(app), LINEAGE_EXPORTERS="file", LINEAGE_FILE_PATH=str(tmp_path / "e.jsonl")
    )
    result = run_python(PROBE + "; import pika", env)
    assert result.stdout == "False False\n"
    assert result.returncode == 1
    assert result.stderr.strip().endswith("ModuleNotFoundError: No module named 'pika'")
    assert "lineage" not in result.stderr


def test_application_sitecustomize_still_runs(tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    (app / "sitecustomize.py").write_text(
        "import os\nos.environ['APP_SITE'] = 'ran'\nMARKER = 42\n"
    )
    env = clean_env(
        PYTHONPATH=str(app), LINEAGE_EXPORTERS="file", LINEAGE_FILE_PATH=str(tmp_path / "e.jsonl")
    )
    code = PROBE + "; import os, sitecustomize; print(os.environ['APP_SITE'], sitecustomize.MARKER)"
    result = run_python(code, env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "True True\nran 42\n"
    assert result.stderr == ""


def test_exit_code_and_pid_are_the_programs(tmp_path):
    env = clean_env(LINEAGE_EXPORTERS="file", LINEAGE_FILE_PATH=str(tmp_path / "e.jsonl"))
    proc = subprocess.Popen(
        [
            *WRAPPER,
            sys.executable,
            "-c",
            "import os, sys; print(os.getpid(), flush=True); sys.stdin.readline(); sys.exit(7)",
        ],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = proc.communicate("\n", timeout=60)
    assert int(out) == proc.pid  # exec: the wrapper became the program
    assert proc.returncode == 7


def test_signals_reach_the_program(tmp_path):
    env = clean_env(LINEAGE_EXPORTERS="file", LINEAGE_FILE_PATH=str(tmp_path / "e.jsonl"))
    proc = subprocess.Popen(
        [*WRAPPER, sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()


def test_flags_become_environment_variables(tmp_path):
    events = tmp_path / "flags.jsonl"
    code = (
        "import os; print(os.environ['LINEAGE_EXPORTERS'], os.environ['LINEAGE_FILE_PATH'] == "
        f"{str(events)!r}, os.environ['LINEAGE_INSTRUMENTATION_DISABLED_INSTRUMENTATIONS'])"
    )
    result = subprocess.run(
        [
            *WRAPPER,
            "--exporters",
            "file",
            f"--file-path={events}",
            "--disabled-instrumentations",
            "pika",
            sys.executable,
            "-c",
            code,
        ],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "file True pika\n"


def test_unknown_flag_is_a_clear_error_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    result = subprocess.run(
        [*WRAPPER, "--exporter", "file", sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--exporter" in result.stderr and "did you mean --exporters" in result.stderr
    assert "Traceback" not in result.stderr
    assert not marker.exists()


def test_help_and_missing_command():
    shown = subprocess.run([*WRAPPER, "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0
    assert "--exporters" in shown.stdout and "LINEAGE_RABBITMQ_URL" in shown.stdout
    missing = subprocess.run(
        [*WRAPPER, "no-such-command-xyz"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert missing.returncode == 127
    assert missing.stderr == "lineage-instrument: error: command not found: no-such-command-xyz\n"


def test_wrapper_imports_little():
    code = (
        "import sys, lineage_instrumentation.wrapper as w; "
        "print(sorted(m for m in sys.modules if m.startswith(('lineage_sdk', 'pydantic', "
        "'opentelemetry'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=clean_env()
    )
    assert result.stdout == "[]\n", result.stderr


@pytest.fixture(autouse=True)
def _no_stray_ready(tmp_path: Path) -> Iterator[None]:
    yield
    (tmp_path / "ready").unlink(missing_ok=True)
