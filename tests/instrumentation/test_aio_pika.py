"""The aio-pika instrumentor in this process, against the real broker (and PostgreSQL).

Covers both consumer styles in both modes, concurrent deliveries, publishes, a graph that mixes
pika and aio-pika services, and a consumer writing into a real PostgreSQL database.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aio_pika
import psycopg
import pytest
from leftovers import suite_name

from lineage_instrumentation.aio_pika import AioPikaInstrumentor
from lineage_instrumentation.db.psycopg3 import PsycopgInstrumentor
from lineage_sdk import LineageDataset, current_run, track_lineage
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.store import node_id
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.sdk.exporters import InMemoryExporter
from lineage_sdk.sdk.provider import STATE, configure, shutdown
from lineage_sdk.sdk.suppression import suppress_instrumentation

from .broker_helpers import BROKER_URL, Captured, Names, connect, validate_event
from .wrapper_services import clean_env, read_events, run_pair

pytestmark = pytest.mark.rabbitmq

NAMESPACE = "rabbitmq://127.0.0.1:5672"
PRODUCER_JOB = "test.aio.producer"
JOB_NAMESPACE = "tests.instr"
PG = "postgresql://127.0.0.1:5432"


@pytest.fixture
def aio_instrument(captured: Captured) -> Iterator[Any]:
    """Call ``aio_instrument(**kwargs)`` inside a test; always uninstrumented afterwards."""
    instrumentor = AioPikaInstrumentor()
    instrumentor.uninstrument()

    def do(**kwargs: Any) -> AioPikaInstrumentor:
        assert instrumentor.instrument(**kwargs)
        return instrumentor

    yield do
    instrumentor.uninstrument()


async def open_queue(
    names: Names, prefetch: int = 20, *, robust: bool = False
) -> tuple[Any, Any, Any]:
    """An aio-pika connection, channel and the test's queue (declared by the fixture)."""
    connection = await (aio_pika.connect_robust if robust else aio_pika.connect)(BROKER_URL)
    channel = await connection.channel()
    await channel.set_qos(prefetch_count=prefetch)
    queue = await channel.get_queue(names.queue)
    return connection, channel, queue


async def publish(names: Names, bodies: list[bytes], *, in_run: bool = True) -> str | None:
    """Publish with aio-pika, inside one @track_lineage run (returns its id) or outside any run."""
    connection = await aio_pika.connect(BROKER_URL)
    async with connection:
        channel = await connection.channel()
        exchange = await channel.get_exchange(names.exchange)

        async def send() -> str | None:
            for body in bodies:
                await exchange.publish(aio_pika.Message(body), routing_key=names.routing_key)
            return current_run().run_id

        if in_run:
            return await track_lineage(PRODUCER_JOB)(send)()
        await send()
    return None


async def consume_callback(
    queue: Any, count: int, handle: Any, *, exceptions: list[BaseException] | None = None
) -> None:
    """``queue.consume(callback)`` until ``count`` messages were handled, then cancel."""
    done = asyncio.Event()
    seen: list[bytes] = []

    async def on_message(message: Any) -> None:
        try:
            async with message.process(requeue=False):
                await handle(message)
        finally:
            seen.append(message.body)
            if len(seen) >= count:
                done.set()

    if exceptions is not None:  # what aio-pika's task callback saw of the callback's exception
        asyncio.get_running_loop().set_exception_handler(
            lambda _loop, ctx: exceptions.append(ctx["exception"])
        )
    tag = await queue.consume(on_message)
    await asyncio.wait_for(done.wait(), 15)
    await queue.cancel(tag)


async def consume_in_style(
    connection: Any, queue: Any, names: Names, style: str, handle: Any, count: int
) -> str:
    """Hand ``count`` deliveries to ``handle`` by ``queue.consume`` (style ``callback``) or
    ``queue.iterator()``, then close ``connection``; the consumer job's name for that style."""
    async with connection:
        if style == "callback":
            await consume_callback(queue, count, handle)
        else:
            handled = 0
            async with queue.iterator() as messages:
                async for message in messages:
                    await message.ack()
                    await handle(message)
                    handled += 1
                    if handled >= count:
                        break
    return f"{names.queue}.{'consume_callback.on_message' if style == 'callback' else 'iterator'}"


def events_by_run(captured: Captured, job: str) -> dict[str, list[dict[str, Any]]]:
    return captured.runs(job)


def graph_edges(events: list[dict[str, Any]], tmp_path: Path, root: str) -> set[tuple[str, str]]:
    """The lineage graph around ``root`` as the collector's sql store (the engine over the sql
    backend) answers it."""
    store = EngineStore(SqlBackend(f"sqlite:///{tmp_path}/lineage.db"))
    store.open()
    try:
        store.write_batch([build_record(e) for e in events])
        graph = store.lineage(root, depth=5)
    finally:
        store.close()
    return {(e.origin, e.destination) for n in graph.nodes.values() for e in n.out_edges}


def job(name: str) -> str:
    return node_id("JOB", JOB_NAMESPACE, name)


def dataset(namespace: str, name: str) -> str:
    return node_id("DATASET", namespace, name)


@pytest.mark.parametrize(
    ("style", "robust"), [("callback", False), ("iterator", False), ("iterator", True)]
)
async def test_per_message_run_per_delivery_linked_to_publisher(
    style, robust, names, captured, aio_instrument
):
    """Plain and robust connections (RobustQueueIterator has an ``__anext__`` of its own)."""
    aio_instrument(mode="per_message")
    producer_run = await publish(names, [b"0", b"1", b"2"])
    connection, _channel, queue = await open_queue(names, robust=robust)
    in_body: list[tuple[str | None, str | None]] = []

    async def handle(_message: Any) -> None:
        before = current_run().run_id
        await asyncio.sleep(0)  # the run stays current across awaits
        in_body.append((before, current_run().run_id))

    job_name = await consume_in_style(connection, queue, names, style, handle, 3)
    runs = events_by_run(captured, job_name)
    assert len(runs) == 3
    assert all(before == after for before, after in in_body)
    assert sorted(runs) == sorted(before for before, _ in in_body)
    (producer_events,) = events_by_run(captured, PRODUCER_JOB).values()
    (output,) = producer_events[-1]["outputs"]
    assert (output["namespace"], output["name"]) == (
        NAMESPACE,
        f"{names.exchange}:{names.routing_key}",
    )
    trace = producer_events[0]["run"]["facets"]["lineagesdk_trace"]["traceId"]
    for events in runs.values():
        assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
        (source,) = events[-1]["inputs"]
        assert (source["namespace"], source["name"]) == (output["namespace"], output["name"])
        facet = source["facets"]["lineagesdk_messaging"]
        assert facet["queue"] == names.queue
        assert facet["consumerTag"]
        parent = events[-1]["run"]["facets"]["parent"]
        assert parent["run"]["runId"] == producer_run
        assert parent["job"] == {"namespace": JOB_NAMESPACE, "name": PRODUCER_JOB}
        assert events[-1]["run"]["facets"]["lineagesdk_trace"]["traceId"] == trace
        assert events[-1]["job"]["facets"]["jobType"]["jobType"] == "CONSUMER"


async def test_concurrent_deliveries_each_keep_their_own_run(names, captured, aio_instrument):
    """Five deliveries in flight at once, each published by its own run: every callback sees
    its own run across awaits, its reply is that run's output and its parent is its publisher."""
    aio_instrument()
    # outside any run, each publish is a run of the program's job: five different parents
    await publish(names, [b"%d" % i for i in range(5)], in_run=False)
    connection, channel, queue = await open_queue(names)
    seen: dict[bytes, tuple[str | None, str | None]] = {}
    all_in = asyncio.Event()

    async def handle(message: Any) -> None:
        before = current_run().run_id
        seen[message.body] = (before, None)
        if len(seen) == 5:
            all_in.set()
        await asyncio.wait_for(all_in.wait(), 10)  # all five callbacks are inside at once
        exchange = await channel.get_exchange(names.exchange)
        await exchange.publish(
            aio_pika.Message(b"r" + message.body), f"billed.{message.body.decode()}"
        )
        seen[message.body] = (before, current_run().run_id)

    async with connection:
        await consume_callback(queue, 5, handle)
        await queue.purge()  # the replies do not match the queue's binding; nothing to drain
    assert all(before == after and before for before, after in seen.values())
    assert len({before for before, _ in seen.values()}) == 5
    program_runs = {
        e["run"]["runId"]: e
        for e in captured.events()
        if e["job"]["facets"]["jobType"]["jobType"] == "PRODUCER" and e["eventType"] == "COMPLETE"
    }
    assert len(program_runs) == 5
    runs = events_by_run(captured, f"{names.queue}.consume_callback.on_message")
    assert set(runs) == {before for before, _ in seen.values()}
    parents = set()
    for body, (run_id, _) in seen.items():
        complete = runs[run_id][-1]
        assert [o["name"] for o in complete["outputs"]] == [
            f"{names.exchange}:billed.{body.decode()}"
        ]
        parents.add(complete["run"]["facets"]["parent"]["run"]["runId"])
    assert parents == set(program_runs)


@pytest.mark.parametrize("style", ["callback", "iterator"])
async def test_streaming_one_run_per_consumer(style, names, captured, aio_instrument):
    aio_instrument(mode="streaming", streaming_interval_ms=1)
    await publish(names, [b"0", b"1", b"2"])
    # one delivery at a time, so the 1 ms interval passes between two of them
    connection, _channel, queue = await open_queue(names, prefetch=1)
    in_body: list[str | None] = []

    async def handle(_message: Any) -> None:
        in_body.append(current_run().run_id)
        await asyncio.sleep(0.002)  # > the 1 ms interval: the next delivery is due a RUNNING

    job_name = await consume_in_style(connection, queue, names, style, handle, 3)
    ((run_id, events),) = events_by_run(captured, job_name).items()
    kinds = [e["eventType"] for e in events]
    assert kinds[0] == "START"
    assert kinds[-1] == "COMPLETE"  # ended by the cancel (the iterator's close cancels too)
    assert set(kinds[1:-1]) == {"RUNNING"}
    assert set(in_body) == {run_id}
    for event in events[1:]:
        assert event["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
        assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [
            (NAMESPACE, f"{names.exchange}:{names.routing_key}")
        ]


async def test_a_channel_close_ends_the_streaming_run(names, captured, aio_instrument):
    """Closed by the application: COMPLETE; closed by the broker for an error: FAIL."""
    aio_instrument(mode="streaming")

    async def ignore(_message: Any) -> None:
        return None

    connection, channel, queue = await open_queue(names)
    async with connection:
        await queue.consume(ignore, consumer_tag="closed-by-app")
        await channel.close()
        broken = await connection.channel()
        queue = await broken.get_queue(names.queue)
        await queue.consume(ignore, consumer_tag="closed-by-error")
        with pytest.raises(aio_pika.exceptions.ChannelNotFoundEntity):
            await broken.declare_queue(f"{names.queue}.missing", passive=True)
        await asyncio.sleep(0.1)  # the close callbacks run as tasks
    kinds = sorted(e["eventType"] for e in captured.events() if e["eventType"] != "START")
    assert kinds == ["COMPLETE", "FAIL"]
    (failed,) = [e for e in captured.events() if e["eventType"] == "FAIL"]
    assert "NOT_FOUND" in failed["run"]["facets"]["errorMessage"]["message"]


async def test_streaming_consumer_heartbeats_while_idle_and_stops_at_its_end(
    names, captured, aio_instrument
):
    """RUNNING heartbeats from the SDK's thread while no message arrives, each with the datasets
    seen so far; none after the consumer is cancelled."""
    aio_instrument(mode="streaming", heartbeat_interval_ms=50)
    await publish(names, [b"one"], in_run=False)
    received = asyncio.Event()

    async def handle(_message: Any) -> None:
        received.set()

    connection, _channel, queue = await open_queue(names)
    async with connection:
        tag = await queue.consume(handle, no_ack=True)
        await asyncio.wait_for(received.wait(), 10)
        deadline = time.monotonic() + 10
        while True:  # the loop stays free: the beats come from another thread
            kinds = [e["eventType"] for e in captured.events()]
            if kinds.count("RUNNING") >= 3 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        await queue.cancel(tag)
    settled = captured.events()
    await asyncio.sleep(0.2)  # four intervals: a beat would have come by now
    events = captured.events()
    assert events == settled
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        if event["job"]["name"].startswith(names.queue):
            runs.setdefault(event["run"]["runId"], []).append(event)
    ((_, run),) = runs.items()
    kinds = [e["eventType"] for e in run]
    assert kinds[0] == "START" and kinds[-1] == "COMPLETE" and kinds.count("RUNNING") >= 3
    seen = (NAMESPACE, f"{names.exchange}:{names.routing_key}")
    for event in run[1:]:
        assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [seen]
        assert event["run"]["facets"]["lineagesdk_heartbeat"]["intervalS"] == 0.05
    assert all(e["eventTime"] <= run[-1]["eventTime"] for e in run)


async def test_failures_end_runs_with_fail_and_reach_the_application_unchanged(
    names, captured, aio_instrument
):
    aio_instrument()
    await publish(names, [b"0"])
    connection, _channel, queue = await open_queue(names)
    boom = ValueError("cannot bill order 0")
    seen_by_aio_pika: list[BaseException] = []

    async def handle(_message: Any) -> None:
        raise boom

    async with connection:
        await consume_callback(queue, 1, handle, exceptions=seen_by_aio_pika)
        await asyncio.sleep(0.05)  # the task's done callback reports the exception
        assert seen_by_aio_pika
        assert all(exc is boom for exc in seen_by_aio_pika)
        await publish(names, [b"1"])
        loop_error = ValueError("cannot bill order 1")

        async def iterate() -> None:
            async with queue.iterator() as messages:
                async for message in messages:
                    await message.reject()
                    raise loop_error

        with pytest.raises(ValueError, match="order 1") as raised:
            await iterate()
        assert raised.value is loop_error
    for job_name, text in (
        (f"{names.queue}.consume_callback.on_message", "ValueError: cannot bill order 0"),
        (f"{names.queue}.iterator", "ValueError: cannot bill order 1"),
    ):
        (events,) = events_by_run(captured, job_name).values()
        assert [e["eventType"] for e in events] == ["START", "FAIL"]
        assert events[-1]["run"]["facets"]["errorMessage"]["message"] == text


async def test_caller_message_unchanged_and_suppressed_traffic_unseen(
    names, captured, aio_instrument
):
    aio_instrument()
    reused = aio_pika.Message(b"x", headers={"app": "1"}, content_type="text/plain")
    connection, channel, queue = await open_queue(names)
    received: list[dict[str, Any]] = []

    async def handle(message: Any) -> None:
        received.append(dict(message.headers))

    async with connection:
        exchange = await channel.get_exchange(names.exchange)
        await track_lineage(PRODUCER_JOB)(exchange.publish)(reused, names.routing_key)
        assert reused.headers == {"app": "1"}
        await consume_callback(queue, 1, handle)
        assert received[0]["app"] == "1"
        assert "traceparent" in received[0] and "openlineage-parent-run-id" in received[0]
        before = len(captured.events())
        with suppress_instrumentation():
            await exchange.publish(aio_pika.Message(b"y"), names.routing_key)
            await consume_callback(queue, 1, handle)
    assert "openlineage-parent-run-id" not in received[1]
    assert captured.events()[before:] == []


async def test_instrument_is_idempotent_and_uninstrument_restores(names, captured, aio_instrument):
    from aio_pika.exchange import Exchange
    from aio_pika.queue import Queue, QueueIterator
    from aio_pika.robust_queue import RobustQueueIterator

    patched = [
        (Queue, "consume"),
        (Queue, "cancel"),
        (QueueIterator, "__anext__"),
        (RobustQueueIterator, "__anext__"),
        (QueueIterator, "__aexit__"),
        (QueueIterator, "close"),
        (Exchange, "publish"),
    ]
    originals = {key: key[0].__dict__[key[1]] for key in patched}
    instrumentor = aio_instrument()
    assert instrumentor.instrument() is False
    for (owner, name), original in originals.items():
        assert owner.__dict__[name].__wrapped__ is original
    assert instrumentor.uninstrument() is True
    assert instrumentor.uninstrument() is False
    for (owner, name), original in originals.items():
        assert owner.__dict__[name] is original
    await publish(names, [b"0"])
    connection, _channel, queue = await open_queue(names)
    async with connection:
        await consume_callback(queue, 1, lambda _m: asyncio.sleep(0))
    assert {e["job"]["name"] for e in captured.events()} == {PRODUCER_JOB}
    assert all(e["outputs"] == [] for e in captured.events())


async def test_publisher_job_names_come_from_configuration(
    names, captured, instrument, aio_instrument
):
    """Publishes outside any run: the configured job, for pika and aio-pika alike."""
    shutdown(5.0)
    exporter = InMemoryExporter()
    configure(
        LineageConfig.model_validate(
            {
                "exporters": ["memory"],
                "producer": {"job_namespace": JOB_NAMESPACE},
                "instrumentation": {
                    "pika_publisher_job_name": "shop.pika_publisher",
                    "aio_pika": {"publisher_job_name": "shop.aio_publisher"},
                },
            }
        ),
        exporters=[exporter],
        strict=True,
    )
    instrument()
    aio_instrument()
    await publish(names, [b"0"], in_run=False)

    def pika_publish() -> None:
        conn = connect()
        conn.channel().basic_publish(names.exchange, names.routing_key, b"1")
        conn.close()

    await asyncio.to_thread(pika_publish)
    assert STATE.sdk is not None and STATE.sdk.force_flush(10.0)
    for event in exporter.events:
        validate_event(event)
    assert {e["job"]["name"] for e in exporter.events} == {
        "shop.pika_publisher",
        "shop.aio_publisher",
    }


def test_bad_options_are_clear_errors(captured):
    instrumentor = AioPikaInstrumentor()
    instrumentor.uninstrument()
    with pytest.raises(ConfigError, match=r"instrumentation\.aio_pika\.mode"):
        instrumentor.instrument(mode="sometimes")
    assert not instrumentor.is_instrumented
    shutdown(5.0)
    configure(
        LineageConfig.model_validate(
            {"exporters": ["memory"], "instrumentation": {"aio_pika": {"mode": "sometimes"}}}
        ),
        exporters=[InMemoryExporter()],
        strict=True,
    )
    with pytest.raises(ConfigError, match=r"instrumentation\.aio_pika\.mode.*sometimes"):
        instrumentor.instrument()
    assert not instrumentor.is_instrumented


# --- one graph across pika and aio-pika services, and into PostgreSQL ----------------------------


@pytest.fixture
def second_queue(names: Names) -> Iterator[str]:
    """A queue bound to ``billed.*`` on the test's exchange; deleted afterwards."""
    queue = f"{names.queue}.billed"
    conn = connect()
    ch = conn.channel()
    ch.queue_declare(queue)
    ch.queue_bind(queue, names.exchange, routing_key="billed.*")
    conn.close()
    yield queue
    conn = connect()
    conn.channel().queue_delete(queue)
    conn.close()


async def test_pika_and_aio_pika_services_link_into_one_graph(
    names, second_queue, captured, instrument, aio_instrument, tmp_path
):
    """pika producer -> aio-pika consumer -> aio-pika publish -> pika consumer."""
    instrument()
    aio_instrument()

    @track_lineage(PRODUCER_JOB)
    def pika_produce() -> str | None:
        conn = connect()
        conn.channel().basic_publish(names.exchange, names.routing_key, b"7")
        conn.close()
        return current_run().run_id

    producer_run = await asyncio.to_thread(pika_produce)
    connection, channel, queue = await open_queue(names)

    async def forward(message: Any) -> None:
        exchange = await channel.get_exchange(names.exchange)
        await exchange.publish(aio_pika.Message(message.body), "billed.7")

    async with connection:
        await consume_callback(queue, 1, forward)

    def pika_consume() -> None:
        conn = connect()
        ch = conn.channel()
        for method, _props, _body in ch.consume(second_queue, inactivity_timeout=15):
            assert method is not None, "the forwarded message did not arrive"
            ch.basic_ack(method.delivery_tag)
            break
        ch.cancel()
        conn.close()

    await asyncio.to_thread(pika_consume)
    aio_job = f"{names.queue}.consume_callback.on_message"
    ((aio_run, aio_events),) = events_by_run(captured, aio_job).items()
    ((_pika_run, pika_events),) = events_by_run(captured, f"{second_queue}.consume").items()
    assert aio_events[-1]["run"]["facets"]["parent"]["run"]["runId"] == producer_run
    assert pika_events[-1]["run"]["facets"]["parent"]["run"]["runId"] == aio_run
    assert pika_events[-1]["run"]["facets"]["parent"]["root"]["run"]["runId"] == producer_run
    first = dataset(NAMESPACE, f"{names.exchange}:{names.routing_key}")
    second = dataset(NAMESPACE, f"{names.exchange}:billed.7")
    edges = graph_edges(captured.events(), tmp_path, job(PRODUCER_JOB))
    assert {
        (job(PRODUCER_JOB), first),
        (first, job(aio_job)),
        (job(aio_job), second),
        (second, job(f"{second_queue}.consume")),
    } <= edges


@pytest.fixture
def database() -> Iterator[str]:
    """A PostgreSQL database of the test's own on the shared server; dropped afterwards."""
    name = suite_name("test_aio")  # tagged: the session-end check finds a leftover
    with psycopg.connect(f"{PG}/test", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(f"{PG}/test", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_consumer_writing_to_postgres_links_producer_exchange_job_and_table(
    names, database, captured, aio_instrument, tmp_path
):
    """No dataset is declared: the psycopg instrumentor finds the table the delivery's run wrote."""
    aio_instrument()
    database_instrumentor = PsycopgInstrumentor()
    database_instrumentor.uninstrument()
    assert database_instrumentor.instrument()
    table = LineageDataset("postgres://127.0.0.1:5432", f"{database}.public.billed_orders")
    try:
        async with await psycopg.AsyncConnection.connect(f"{PG}/{database}", autocommit=True) as db:
            await db.execute("CREATE TABLE billed_orders (id integer PRIMARY KEY)")
            await publish(names, [b"1", b"2"])
            connection, _channel, queue = await open_queue(names)

            async def bill(message: Any) -> None:
                await db.execute("INSERT INTO billed_orders (id) VALUES (%s)", (int(message.body),))

            async with connection:
                await consume_callback(queue, 2, bill)
            rows = await (await db.execute("SELECT id FROM billed_orders ORDER BY id")).fetchall()
    finally:
        database_instrumentor.uninstrument()
    assert rows == [(1,), (2,)]
    consumer_job = f"{names.queue}.consume_callback.on_message"
    runs = events_by_run(captured, consumer_job)
    assert len(runs) == 2
    for events in runs.values():
        assert [(d["namespace"], d["name"]) for d in events[-1]["outputs"]] == [
            (table.namespace, table.name)
        ]
    exchange_node = dataset(NAMESPACE, f"{names.exchange}:{names.routing_key}")
    table_node = dataset(table.namespace, table.name)
    edges = graph_edges(captured.events(), tmp_path, table_node)
    assert {
        (job(PRODUCER_JOB), exchange_node),
        (exchange_node, job(consumer_job)),
        (job(consumer_job), table_node),
    } <= edges


# --- lineage-instrument python app.py: an aio-pika service with no lineage code -----------------


def run_services(env: dict[str, str], tmp_path: Path) -> tuple[Any, Any]:
    """The aio-pika consumer service, then (once subscribed) the pika producer service, both
    under ``lineage-instrument``; waits for both."""
    return run_pair(env, tmp_path, consumer_script="aio_pika_consumer_service.py")


@pytest.fixture
def services_env(names: Names, database: str, tmp_path: Path) -> dict[str, str]:
    return clean_env(
        EXCHANGE=names.exchange,
        QUEUE=names.queue,
        ROUTING_KEY=names.routing_key,
        COUNT="3",
        READY_FILE=str(tmp_path / "ready"),
        DATABASE_URL=f"{PG}/{database}",
        LINEAGE_EXPORTERS="file",
    )


@pytest.mark.parametrize(
    ("style", "mode"), [("callback", "per_message"), ("iterator", "streaming")]
)
def test_lineage_instrument_runs_an_aio_pika_service_without_lineage_code(
    style, mode, names, database, services_env, tmp_path
):
    env = {**services_env, "STYLE": style, "LINEAGE_INSTRUMENTATION_AIO_PIKA_MODE": mode}
    producer, consumer = run_services(env, tmp_path)
    assert (producer.returncode, consumer.returncode) == (0, 0), (producer.stderr, consumer.stderr)
    assert consumer.stdout == "billed orders [0, 1, 2]\n"
    assert producer.stderr == consumer.stderr == ""
    with psycopg.connect(f"{PG}/{database}") as db:
        assert db.execute("SELECT id FROM billed_orders ORDER BY id").fetchall() == [
            (0,),
            (1,),
            (2,),
        ]

    produced = read_events(tmp_path / "producer.jsonl")
    consumed = read_events(tmp_path / "consumer.jsonl")
    destination = (NAMESPACE, f"{names.exchange}:{names.routing_key}")
    assert {(d["namespace"], d["name"]) for e in produced for d in e["outputs"]} == {destination}
    ends = [e for e in consumed if e["eventType"] in ("COMPLETE", "FAIL")]
    assert {e["eventType"] for e in ends} == {"COMPLETE"}
    assert {(d["namespace"], d["name"]) for e in ends for d in e["inputs"]} == {destination}
    # The table the service wrote, found by the psycopg instrumentor (no lineage code in the app).
    table = ("postgres://127.0.0.1:5432", f"{database}.public.billed_orders")
    assert {(d["namespace"], d["name"]) for e in ends for d in e["outputs"]} == {table}
    callback = "main.on_order" if style == "callback" else "iterator"
    assert {e["job"]["name"] for e in consumed} == {f"{names.queue}.{callback}"}
    if mode == "per_message":  # each delivery's run is the child of the pika publish's run
        assert len(ends) == 3
        parents = {e["run"]["facets"]["parent"]["run"]["runId"] for e in ends}
        assert parents == {e["run"]["runId"] for e in produced}
    else:
        assert len(ends) == 1
        assert ends[0]["job"]["facets"]["jobType"]["processingType"] == "STREAMING"


def test_aio_pika_instrumentation_can_be_disabled(names, database, services_env, tmp_path):
    env = {**services_env, "LINEAGE_DISABLED_INSTRUMENTATIONS": "aio_pika"}
    producer, consumer = run_services(env, tmp_path)
    assert (producer.returncode, consumer.returncode) == (0, 0)
    assert consumer.stdout == "billed orders [0, 1, 2]\n"
    assert producer.stderr == consumer.stderr == ""
    assert read_events(tmp_path / "consumer.jsonl") == []
    assert len(read_events(tmp_path / "producer.jsonl")) == 6  # pika is still instrumented
