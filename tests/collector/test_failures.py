"""A failing store: temporary failures are retried with delays until they succeed; permanent
refusals and exhausted retries park the events with the reason, and `dlq replay` brings them
back once the store works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from collector_helpers import (
    BATCH_CONTENT_TYPE,
    RABBIT_URL,
    drain,
    dumps,
    event_id,
    json_props,
    publish,
    queue_depth,
    run_event,
    running,
    wait_until,
)

from lineage_sdk.collector.dlq import DeadLetterQueue
from lineage_sdk.collector.topology import Topology

pytestmark = pytest.mark.rabbitmq


def _http_config(make_config, sink, **collector):
    return make_config(
        store={
            "backend": "openlineage_http",
            "openlineage_http": {"url": sink.url, "timeout_ms": 2000},
        },
        collector={"batch_size": 10, **collector},
    )


def test_temporary_failure_is_retried_with_delays_then_stored(make_config, sink):
    config = _http_config(make_config, sink, max_attempts=20)
    events = [run_event(job=f"flaky{i}") for i in range(5)]
    sink.fail_next = 10**9  # the endpoint is down...
    with running(config) as collector:
        publish(config.collector_topic, [(dumps(e), json_props()) for e in events])
        # ...long enough for each message to go through both retry queues (200 ms, 400 ms)
        wait_until(
            lambda: collector.metrics.messages_retried._value.get() >= 2 * len(events),
            30,
            message="retries",
        )
        assert not sink.events
        with sink.lock:
            sink.fail_next = 0  # ...and comes back
        wait_until(
            lambda: {event_id(e) for e in sink.events} == {event_id(e) for e in events},
            30,
            message="all events delivered after the outage",
        )
    assert queue_depth(Topology.from_config(config).dead_letter_queue) == 0


def test_store_that_keeps_failing_parks_after_max_attempts(make_config, sink):
    config = _http_config(make_config, sink, max_attempts=3)
    sink.fail_next = 10_000
    with running(config) as collector:
        publish(config.collector_topic, [(dumps(run_event(job="down")), json_props())])
        wait_until(
            lambda: collector.metrics.dead_lettered.labels("retries_exhausted")._value.get() >= 1,
            30,
            message="parked after retries",
        )
        assert collector.metrics.messages_retried._value.get() == 2
    [(props, _)] = drain(Topology.from_config(config).dead_letter_queue)
    assert props.headers["x-lineage-store"] == "openlineage_http"
    assert props.headers["x-lineage-attempts"] == 3
    assert "503" in props.headers["x-lineage-error"]


def _write_toml(path: Path, config) -> Path:
    c = config.section("collector")
    path.write_text(f"""
[lineage]
collector_topic = "{config.collector_topic}"
[lineage.rabbitmq]
url = "{RABBIT_URL}"
[lineage.store]
backend = "{config.section("store").backend}"
[lineage.store.openlineage_http]
url = "{config.section("store.openlineage_http").url}"
[lineage.store.sql]
url = "{config.section("store.sql").url}"
[lineage.collector]
retry_delays_ms = {list(c.retry_delays_ms)}
max_attempts = {c.max_attempts}
""")
    return path


def test_permanent_refusal_parks_at_once_and_replay_brings_it_back(make_config, sink, tmp_path):
    config = _http_config(make_config, sink)
    good = [run_event(job=f"fine{i}") for i in range(6)]
    refused = [run_event(job="refused", run_id=None) for _ in range(3)]
    sink.refuse.add("refused")
    with running(config) as collector:
        interleaved = [
            good[0],
            refused[0],
            good[1],
            good[2],
            refused[1],
            good[3],
            good[4],
            refused[2],
            good[5],
        ]
        publish(config.collector_topic, [(dumps(e), json_props()) for e in interleaved])
        wait_until(
            lambda: collector.metrics.dead_lettered.labels("store_rejected")._value.get() >= 3,
            30,
            message="refused events parked",
        )
        wait_until(lambda: {event_id(e) for e in sink.events} == {event_id(e) for e in good}, 10)
        assert collector.metrics.messages_retried._value.get() == 0
    dlq = DeadLetterQueue(config)
    parked = dlq.list(10)
    assert len(parked) == 3 and dlq.count() == 3  # listing leaves them parked
    for message in parked:
        assert message.reason == "store_rejected"
        assert message.store == "openlineage_http"
        assert "400" in message.error and "job refused" in message.error
        assert message.attempts == 1
    # the endpoint is fixed; replay with the command line while a collector runs
    sink.refuse.clear()
    toml = _write_toml(tmp_path / "lineage.toml", config)
    with running(config):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "lineage_sdk.collector.cli",
                "dlq",
                "replay",
                "--config",
                str(toml),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "COLUMNS": "120"},
        )
        assert result.returncode == 0, result.stderr
        assert "replayed 3 message(s)" in result.stdout
        wait_until(
            lambda: {event_id(e) for e in sink.events} >= {event_id(e) for e in refused},
            30,
            message="replayed events stored",
        )
    assert dlq.count() == 0


def test_dlq_list_and_purge_commands(make_config, tmp_path):
    config = make_config()
    with running(config) as collector:
        publish(config.collector_topic, [(b"garbage", json_props()), (b"{}", json_props())])
        wait_until(lambda: DeadLetterQueue(config).count() == 2, 20)
        assert collector.alive
    toml = tmp_path / "c.toml"
    toml.write_text(
        f'[lineage]\ncollector_topic = "{config.collector_topic}"\n'
        f'[lineage.rabbitmq]\nurl = "{RABBIT_URL}"\n'  # its private vhost, not the default "/"
    )
    env = {**os.environ, "COLUMNS": "200"}
    listed = subprocess.run(
        [
            sys.executable,
            "-m",
            "lineage_sdk.collector.cli",
            "dlq",
            "list",
            "--json",
            "-c",
            str(toml),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert listed.returncode == 0, listed.stderr
    assert sorted(
        line.split('"reason":"')[1].split('"')[0] for line in listed.stdout.splitlines()
    ) == ["invalid_event", "undecodable"]
    purged = subprocess.run(
        [
            sys.executable,
            "-m",
            "lineage_sdk.collector.cli",
            "dlq",
            "purge",
            "--yes",
            "-c",
            str(toml),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert purged.returncode == 0, purged.stderr
    assert "purged 2 message(s)" in purged.stdout
    assert DeadLetterQueue(config).count() == 0


def test_a_store_refusal_in_a_batch_names_its_place_in_the_message(make_config, sink):
    """The batch index of an event a store refuses counts the events refused before it by the
    decoder too (it used to be its place among the good events only)."""
    config = _http_config(make_config, sink)
    first, last = run_event(job="fine-first"), run_event(job="fine-last")
    invalid = run_event(job="invalid")
    invalid["run"]["runId"] = "not-a-uuid"
    refused = run_event(job="refused", run_id=None)
    sink.refuse.add("refused")
    batch = dumps([first, invalid, refused, last])
    with running(config) as collector:
        publish(config.collector_topic, [(batch, json_props(content_type=BATCH_CONTENT_TYPE))])
        wait_until(
            lambda: collector.metrics.dead_lettered.labels("store_rejected")._value.get() >= 1,
            30,
            message="the refused event parked",
        )
        wait_until(lambda: {event_id(e) for e in sink.events} == {event_id(first), event_id(last)})
    parked = {
        props.headers["x-lineage-reason"]: (props.headers["x-lineage-batch-index"], body)
        for props, body in drain(Topology.from_config(config).dead_letter_queue)
    }
    assert parked["invalid_event"][0] == 1
    assert parked["store_rejected"] == (2, dumps(refused))
