"""Issue 32 item 4: streaming consumers (pika and aio-pika in streaming mode) send ``jobType``
2-0-4 with ``processingType: STREAMING`` and an ``emissionPattern`` saying how their events come:
PERIODIC (the RUNNING heartbeats, every ``windowDuration`` seconds) and ACCUMULATIVE (each event
adds to the datasets the run has seen; every heartbeat lists all of them so far).

Against the real broker, in this process's private vhost (tests/vhosts.py); every captured event
is validated against the official schemas (tests/memory_capture.py), and the facet on its own
against JobTypeJobFacet 2-0-4.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import aio_pika
import conformance
import pytest

from lineage_instrumentation.aio_pika import AioPikaInstrumentor

from .broker_helpers import BROKER_URL, Captured, Names, connect

pytestmark = pytest.mark.rabbitmq

NAMESPACE = "rabbitmq://127.0.0.1:5672"
JOB_TYPE_2_0_4 = "https://openlineage.io/spec/facets/2-0-4/JobTypeJobFacet.json"


def _publish(names: Names, count: int) -> None:
    """Publish with plain pika, outside any run (the consumer's run is what is looked at)."""
    conn = connect()
    try:
        ch = conn.channel()
        for i in range(count):
            ch.basic_publish(names.exchange, names.routing_key, b"%d" % i)
    finally:
        conn.close()


def _expected(job_type: str, window_s: int) -> dict[str, Any]:
    return {
        "processingType": "STREAMING",
        "integration": "LINEAGE_SDK",
        "jobType": job_type,
        "emissionPattern": {
            "eventTrigger": "PERIODIC",
            "eventContentMode": "ACCUMULATIVE",
            "windowDuration": window_s,
        },
    }


def _check_job_type(events: list[dict[str, Any]], job_type: str, window_s: int) -> None:
    assert events
    for event in events:
        facet = event["job"]["facets"]["jobType"]
        assert facet["_schemaURL"].startswith(f"{JOB_TYPE_2_0_4}#")
        body = {k: v for k, v in facet.items() if not k.startswith("_")}
        assert body == _expected(job_type, window_s)
        assert conformance.facet_violations("jobType", facet) == []


def _consumer_run(captured: Captured, queue: str) -> list[dict[str, Any]]:
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in captured.events():  # each validated against the schemas
        if event["job"]["name"].startswith(f"{queue}."):
            runs.setdefault(event["run"]["runId"], []).append(event)
    ((_, run),) = runs.items()
    return run


def _wait_for_heartbeats(captured: Captured, count: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if [e["eventType"] for e in captured.events()].count("RUNNING") >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} RUNNING heartbeats in 10 s")


def _check_heartbeats_carry_what_was_seen(run: list[dict[str, Any]], names: Names) -> None:
    kinds = [e["eventType"] for e in run]
    assert kinds[0] == "START" and kinds[-1] == "COMPLETE" and kinds.count("RUNNING") >= 2
    seen = [(NAMESPACE, f"{names.exchange}:{names.routing_key}")]
    for event in run[1:]:  # every heartbeat (and the end) lists every dataset seen so far
        assert [(d["namespace"], d["name"]) for d in event["inputs"]] == seen


# ------------------------------------------------------------------------------------- pika


def test_a_pika_streaming_consumer_says_its_heartbeats_carry_the_datasets_seen(
    names: Names, captured: Captured, instrument: Any
) -> None:
    instrument(mode="streaming", heartbeat_interval_ms=50)
    _publish(names, 2)
    conn = connect()
    try:
        ch = conn.channel()
        got: list[bytes] = []

        def on_message(channel: Any, method: Any, _props: Any, body: bytes) -> None:
            channel.basic_ack(method.delivery_tag)
            got.append(body)

        tag = ch.basic_consume(names.queue, on_message)
        deadline = time.monotonic() + 10
        while len(got) < 2 and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.1)
        assert len(got) == 2
        _wait_for_heartbeats(captured, 2)  # from the SDK's heartbeat thread, while idle
        ch.basic_cancel(tag)
    finally:
        conn.close()
    run = _consumer_run(captured, names.queue)
    _check_heartbeats_carry_what_was_seen(run, names)
    _check_job_type(run, "CONSUMER", 1)  # 50 ms, in whole seconds (the schema's minimum is 1)


@pytest.mark.parametrize(
    ("options", "window_s"),
    [
        ({}, 60),  # the default heartbeat, 60 s
        ({"heartbeat_interval_ms": 90_500}, 91),  # rounded up to whole seconds
        # no heartbeats: the RUNNING events of the streaming interval are the periodic ones
        ({"heartbeat_interval_ms": 0, "streaming_interval_ms": 5_000}, 5),
    ],
)
def test_the_window_is_the_heartbeat_interval_or_else_the_streaming_interval(
    names: Names, captured: Captured, instrument: Any, options: dict[str, Any], window_s: int
) -> None:
    instrument(mode="streaming", **options)
    _publish(names, 1)
    conn = connect()
    try:
        ch = conn.channel()
        for method, _props, _body in ch.consume(names.queue, inactivity_timeout=10):
            assert method is not None, "timed out"
            ch.basic_ack(method.delivery_tag)
            break
        ch.cancel()
    finally:
        conn.close()
    _check_job_type(_consumer_run(captured, names.queue), "CONSUMER", window_s)


def test_per_message_runs_stay_batch_without_an_emission_pattern(
    names: Names, captured: Captured, instrument: Any
) -> None:
    instrument(mode="per_message")
    _publish(names, 1)
    conn = connect()
    try:
        ch = conn.channel()
        for method, _props, _body in ch.consume(names.queue, inactivity_timeout=10):
            assert method is not None, "timed out"
            ch.basic_ack(method.delivery_tag)
            break
        ch.cancel()
    finally:
        conn.close()
    for event in _consumer_run(captured, names.queue):
        facet = event["job"]["facets"]["jobType"]
        assert facet["processingType"] == "BATCH" and "emissionPattern" not in facet


def test_the_streaming_publisher_run_says_how_it_emits_too(
    names: Names, captured: Captured, instrument: Any
) -> None:
    instrumentor = instrument(mode="streaming", streaming_interval_ms=2_500)
    _publish(names, 1)
    instrumentor.uninstrument()  # COMPLETEs the process's publisher run
    publisher = [
        e
        for e in captured.events()
        if e["job"]["facets"]["jobType"]["jobType"] == "PRODUCER"
        and any(o["name"] == f"{names.exchange}:{names.routing_key}" for o in e["outputs"])
    ]
    assert publisher
    runs = {e["run"]["runId"] for e in publisher}
    assert len(runs) == 1
    every = [e for e in captured.events() if e["run"]["runId"] in runs]
    assert [e["eventType"] for e in every][:: len(every) - 1] == ["START", "COMPLETE"]
    _check_job_type(every, "PRODUCER", 3)


# --------------------------------------------------------------------------------- aio-pika


@pytest.fixture
def aio_instrument(captured: Captured) -> Iterator[Any]:
    instrumentor = AioPikaInstrumentor()
    instrumentor.uninstrument()

    def do(**kwargs: Any) -> AioPikaInstrumentor:
        assert instrumentor.instrument(**kwargs)
        return instrumentor

    yield do
    instrumentor.uninstrument()


async def test_an_aio_pika_streaming_consumer_says_its_heartbeats_carry_the_datasets_seen(
    names: Names, captured: Captured, aio_instrument: Any
) -> None:
    aio_instrument(mode="streaming", heartbeat_interval_ms=50)
    await asyncio.to_thread(_publish, names, 2)
    received: list[bytes] = []
    both = asyncio.Event()

    async def handle(message: Any) -> None:
        received.append(message.body)
        if len(received) == 2:
            both.set()

    connection = await aio_pika.connect(BROKER_URL)
    async with connection:
        channel = await connection.channel()
        queue = await channel.get_queue(names.queue)
        tag = await queue.consume(handle, no_ack=True)
        await asyncio.wait_for(both.wait(), 10)
        await asyncio.to_thread(_wait_for_heartbeats, captured, 2)
        await queue.cancel(tag)
    run = _consumer_run(captured, names.queue)
    _check_heartbeats_carry_what_was_seen(run, names)
    _check_job_type(run, "CONSUMER", 1)
