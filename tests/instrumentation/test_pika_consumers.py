"""The pika instrumentor in this process, against the real broker: every consumer style, both modes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pika
import pytest
from pika.adapters.asyncio_connection import AsyncioConnection

from lineage_sdk import LineageDataset, current_run, track_lineage
from lineage_sdk.sdk.suppression import suppress_instrumentation

from .broker_helpers import BROKER_URL, Names, connect

pytestmark = pytest.mark.rabbitmq

NAMESPACE = "rabbitmq://127.0.0.1:5672"
PRODUCER_JOB = "test.producer"


def publish_in_run(names: Names, count: int, properties: Any = None) -> str:
    """Publish ``count`` messages inside one @track_lineage run; returns its run id."""
    run_ids: list[str] = []

    @track_lineage(PRODUCER_JOB)
    def produce() -> None:
        run_ids.append(current_run().run_id or "")
        conn = connect()
        ch = conn.channel()
        for i in range(count):
            ch.basic_publish(names.exchange, names.routing_key, b"%d" % i, properties)
        conn.close()

    produce()
    return run_ids[0]


Handler = Callable[[Any, Any, Any, bytes], None]


def consume_callback(names: Names, count: int, handle: Handler) -> None:
    conn = connect()
    ch = conn.channel()
    seen = []

    def on_message(channel: Any, method: Any, properties: Any, body: bytes) -> None:
        handle(channel, method, properties, body)
        channel.basic_ack(method.delivery_tag)
        seen.append(body)
        if len(seen) >= count:
            channel.stop_consuming()

    ch.basic_consume(names.queue, on_message)
    conn.call_later(15, ch.stop_consuming)  # a safety net, never reached when things work
    ch.start_consuming()
    conn.close()
    assert len(seen) == count


def consume_generator(names: Names, count: int, handle: Handler) -> None:
    conn = connect()
    ch = conn.channel()
    seen = []
    for method, properties, body in ch.consume(names.queue, inactivity_timeout=15):
        assert method is not None, "timed out"
        handle(ch, method, properties, body)
        ch.basic_ack(method.delivery_tag)
        seen.append(body)
        if len(seen) >= count:
            break
    ch.cancel()
    conn.close()
    assert len(seen) == count


def _async_consume(
    names: Names,
    count: int,
    handle: Handler,
    make: Callable[..., Any],
    run_loop: Callable[[Any], None],
    stop_loop: Callable[[Any], None],
) -> None:
    seen: list[bytes] = []
    problems: list[BaseException] = []

    def on_message(channel: Any, method: Any, properties: Any, body: bytes) -> None:
        try:
            handle(channel, method, properties, body)
        except BaseException as exc:  # surfaced after the loop, so a failure names itself
            problems.append(exc)
        channel.basic_ack(method.delivery_tag)
        seen.append(body)
        if len(seen) >= count:
            channel.basic_cancel(method.consumer_tag, callback=lambda _f: channel.close())

    def on_channel(channel: Any) -> None:
        channel.add_on_close_callback(lambda *_: connection.close())
        channel.basic_consume(names.queue, on_message)

    connection = make(
        pika.URLParameters(BROKER_URL),
        on_open_callback=lambda conn: conn.channel(on_open_callback=on_channel),
        on_open_error_callback=lambda _c, exc: (problems.append(exc), stop_loop(connection)),
        on_close_callback=lambda *_: stop_loop(connection),
    )
    run_loop(connection)
    if problems:
        raise problems[0]
    assert len(seen) == count


def consume_select(names: Names, count: int, handle: Handler) -> None:
    def run(connection: Any) -> None:
        connection.ioloop.call_later(15, connection.ioloop.stop)
        connection.ioloop.start()

    _async_consume(
        names,
        count,
        handle,
        pika.SelectConnection,
        run,
        lambda connection: connection.ioloop.stop(),
    )


def consume_asyncio(names: Names, count: int, handle: Handler) -> None:
    loop = asyncio.new_event_loop()
    try:

        def run(_connection: Any) -> None:
            loop.call_later(15, loop.stop)
            loop.run_forever()

        _async_consume(
            names,
            count,
            handle,
            lambda *a, **kw: AsyncioConnection(*a, custom_ioloop=loop, **kw),
            run,
            lambda _connection: loop.stop(),
        )
    finally:
        loop.close()


STYLES = {
    # job names default to <queue>.<callback's qualified name without "<locals>.">
    "callback": (consume_callback, "consume_callback.on_message"),
    "generator": (consume_generator, "consume"),
    "select": (consume_select, "_async_consume.on_message"),
    "asyncio": (consume_asyncio, "_async_consume.on_message"),
}


def messaging_facet(dataset: dict[str, Any]) -> dict[str, Any]:
    facet: dict[str, Any] = dataset["facets"]["lineagesdk_messaging"]
    return facet


@pytest.mark.parametrize("style", list(STYLES))
def test_per_message_run_per_delivery_linked_to_publisher(style, names, captured, instrument):
    instrument(mode="per_message")
    consume, callback_name = STYLES[style]
    producer_run = publish_in_run(names, 3)
    runs_in_callback: list[str | None] = []
    consume(names, 3, lambda *_: runs_in_callback.append(current_run().run_id))

    job = f"{names.queue}.{callback_name}"
    runs = captured.runs(job)
    assert len(runs) == 3
    assert sorted(runs) == sorted(r for r in runs_in_callback if r)  # the callback ran in its run
    producer_events = captured.runs(PRODUCER_JOB)[producer_run]
    (output,) = producer_events[-1]["outputs"]
    assert output["namespace"] == NAMESPACE
    assert output["name"] == f"{names.exchange}:{names.routing_key}"
    assert messaging_facet(output)["destination"] == names.exchange
    producer_trace = producer_events[0]["run"]["facets"]["lineagesdk_trace"]["traceId"]
    for events in runs.values():
        assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
        complete = events[-1]
        (dataset,) = complete["inputs"]
        assert (dataset["namespace"], dataset["name"]) == (output["namespace"], output["name"])
        facet = messaging_facet(dataset)
        assert facet["queue"] == names.queue
        assert facet["routingKey"] == names.routing_key
        assert facet["consumerTag"]
        parent = complete["run"]["facets"]["parent"]
        assert parent["run"]["runId"] == producer_run
        assert parent["job"] == {"namespace": "tests.instr", "name": PRODUCER_JOB}
        assert parent["root"]["run"]["runId"] == producer_run
        # one trace across both services
        assert complete["run"]["facets"]["lineagesdk_trace"]["traceId"] == producer_trace


@pytest.mark.parametrize("style", list(STYLES))
def test_streaming_one_run_per_consumer(style, names, captured, instrument):
    instrument(mode="streaming", streaming_interval_ms=1)
    consume, callback_name = STYLES[style]
    publish_in_run(names, 3)
    runs_in_callback: list[str | None] = []

    def handle(*_: Any) -> None:
        runs_in_callback.append(current_run().run_id)
        time.sleep(0.002)  # > the 1 ms interval: the next delivery is due a RUNNING event

    consume(names, 3, handle)
    runs = captured.runs(f"{names.queue}.{callback_name}")
    assert len(runs) == 1
    ((run_id, events),) = runs.items()
    kinds = [e["eventType"] for e in events]
    assert kinds[0] == "START"
    assert kinds[-1] == "COMPLETE"
    assert "RUNNING" in kinds
    assert set(kinds[1:-1]) == {"RUNNING"}
    assert set(runs_in_callback) == {run_id}
    expected = (NAMESPACE, f"{names.exchange}:{names.routing_key}")
    for event in events:
        assert event["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
        if event["eventType"] in ("RUNNING", "COMPLETE"):
            assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [expected]


def test_callback_exception_fails_run_and_reaches_pika_unchanged(names, captured, instrument):
    instrument(mode="per_message")
    publish_in_run(names, 1)
    boom = ValueError("cannot bill order 0")

    def handle(*_: Any) -> None:
        raise boom

    with pytest.raises(ValueError, match="cannot bill") as raised:
        consume_callback(names, 1, handle)
    assert raised.value is boom
    (events,) = captured.runs(f"{names.queue}.consume_callback.on_message").values()
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    error = events[-1]["run"]["facets"]["errorMessage"]
    assert error["message"] == "ValueError: cannot bill order 0"
    assert "handle" in error["stackTrace"]


def test_nested_runs_and_publishes_attach_to_the_delivery_run(names, captured, instrument):
    instrument()  # per_message is the default
    publish_in_run(names, 1)
    out = LineageDataset("postgres://db:5432", "billing.public.invoices")

    @track_lineage("test.write_invoice", outputs=[out])
    def write_invoice() -> None:
        pass

    def handle(channel: Any, *_: Any) -> None:
        write_invoice()
        channel.basic_publish(names.exchange, "orders.billed", b"done")

    consume_callback(names, 1, handle)
    ((consumer_run, consumer_events),) = captured.runs(
        f"{names.queue}.consume_callback.on_message"
    ).items()
    (nested_events,) = captured.runs("test.write_invoice").values()
    assert nested_events[0]["run"]["facets"]["parent"]["run"]["runId"] == consumer_run
    outputs = [o["name"] for o in consumer_events[-1]["outputs"]]
    assert outputs == [f"{names.exchange}:orders.billed"]


def test_publish_outside_a_run_is_a_run_of_the_program(names, captured, instrument):
    instrument()
    conn = connect()
    conn.channel().basic_publish(names.exchange, names.routing_key, b"x")
    conn.close()
    consume_callback(names, 1, lambda *_: None)
    program_runs = [
        e for e in captured.events() if e["job"]["facets"]["jobType"]["jobType"] == "PRODUCER"
    ]
    assert [e["eventType"] for e in program_runs] == ["START", "COMPLETE"]
    (consumer_events,) = captured.runs(f"{names.queue}.consume_callback.on_message").values()
    parent = consumer_events[-1]["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == program_runs[0]["run"]["runId"]


def test_caller_properties_are_not_mutated(names, captured, instrument):
    instrument()
    props = pika.BasicProperties(content_type="text/plain", headers={"app": "1"})
    bare = pika.BasicProperties(content_type="text/plain")
    received: list[Any] = []
    publish_in_run(names, 1, props)
    publish_in_run(names, 1, bare)
    consume_callback(names, 2, lambda _c, _m, p, _b: received.append(p))
    assert props.headers == {"app": "1"}
    assert bare.headers is None
    assert received[0].headers["app"] == "1"
    assert received[0].content_type == "text/plain"
    assert all(
        "openlineage-parent-run-id" in p.headers and "traceparent" in p.headers for p in received
    )


def test_suppressed_traffic_is_not_instrumented(names, captured, instrument):
    instrument()
    received: list[Any] = []
    with suppress_instrumentation():
        conn = connect()
        conn.channel().basic_publish(names.exchange, names.routing_key, b"x")
        conn.close()
        consume_callback(names, 1, lambda _c, _m, p, _b: received.append(p))
    assert received[0].headers is None
    assert captured.events() == []


def test_instrument_twice_is_harmless_and_uninstrument_restores(names, captured, instrument):
    from pika.adapters.blocking_connection import BlockingChannel
    from pika.channel import Channel

    originals = {
        (BlockingChannel, "basic_consume"): BlockingChannel.__dict__["basic_consume"],
        (BlockingChannel, "consume"): BlockingChannel.__dict__["consume"],
        (Channel, "basic_consume"): Channel.__dict__["basic_consume"],
        (Channel, "basic_publish"): Channel.__dict__["basic_publish"],
        (Channel, "basic_cancel"): Channel.__dict__["basic_cancel"],
    }
    instrumentor = instrument()
    assert instrumentor.is_instrumented
    assert instrumentor.instrument() is False  # second call: no-op
    for (owner, name), original in originals.items():
        assert owner.__dict__[name] is not original
        assert owner.__dict__[name].__wrapped__ is original
    publish_in_run(names, 1)
    consume_callback(names, 1, lambda *_: None)
    assert (
        len(captured.runs(f"{names.queue}.consume_callback.on_message")) == 1
    )  # wrapped once, not twice

    assert instrumentor.uninstrument() is True
    assert instrumentor.uninstrument() is False
    for (owner, name), original in originals.items():
        assert owner.__dict__[name] is original
    before = len(captured.events())
    publish_in_run(names, 1)
    consume_callback(names, 1, lambda *_: None)
    after = captured.events()[before:]
    assert {e["job"]["name"] for e in after} == {PRODUCER_JOB}  # no consumer run any more
    assert all(e["outputs"] == [] for e in after)  # and no output recorded by publish


def test_streaming_heartbeat_facet_and_its_switch(names, captured, instrument):
    from lineage_sdk.exceptions import ConfigError
    from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY
    from lineage_sdk.sdk.heartbeat import HEARTBEATS

    with pytest.raises(ConfigError, match="heartbeat_interval_ms"):
        instrument(mode="streaming", heartbeat_interval_ms=-1)
    for interval_ms, facet in ((0, None), (60_000, 60.0)):
        instrumentor = instrument(mode="streaming", heartbeat_interval_ms=interval_ms)
        publish_in_run(names, 1)
        beats: list[int] = []
        consume_callback(names, 1, lambda *_, seen=beats: seen.append(HEARTBEATS.active()))
        assert beats == [0 if facet is None else 1]  # a beat only while the run lives
        (events,) = captured.runs(f"{names.queue}.consume_callback.on_message").values()
        captured.exporter.clear()
        for event in events:  # every event of the run names the interval, or none does
            named = event["run"]["facets"].get(HEARTBEAT_FACET_KEY)
            assert (named and named["intervalS"]) == facet
        instrumentor.uninstrument()
    assert HEARTBEATS.active() == 0
