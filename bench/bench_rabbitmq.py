"""Benchmark of the rabbitmq exporter (issue 3): throughput against raw pika, latency while away.

    python bench/bench_rabbitmq.py            # about a minute
    python bench/bench_rabbitmq.py --quick    # a smoke run with few events (figures meaningless)

Throughput is events per second from the first decorated call to the moment the broker has
confirmed every event, against raw pika publishing the same messages (same bodies, routing keys
and properties) in the same run: one confirm at a time (BlockingConnection), and 100 confirms in
flight (SelectConnection), in single-event mode and in batch mode (20 events per message).

Latency: per-call cost of a decorated function (START + COMPLETE, one input, one output) while
the broker is up, and while it is away (a loopback proxy in front of the real broker is closed,
so the shared broker itself is not disturbed), once with events waiting in memory
(``outage_buffer = "memory"``) and once going to the spool (the default). Target: "away" within
2x of "up".

Cost per event of the exporter itself (issue 13), pre-encoded events handed to ``export()`` in
chunks of 512 as the pipeline does: while connected, and while spooling during an outage (the
default ``outage_buffer = "spool"``). Two figures each: the time inside ``export()`` (what the
SDK's worker thread pays), and the process CPU time until the events are confirmed (connected)
or written and fsynced (outage), which includes the exporter's I/O thread. Ratios are outage
against connected, from the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pika
from _bench_common import AMQP_URL

import lineage_sdk
from lineage_exporters.rabbitmq import RabbitMQExporter
from lineage_exporters.rabbitmq._messages import OutboundMessage, build_messages
from lineage_exporters.rabbitmq.config import RabbitMQConfig
from lineage_sdk import LineageDataset, track_lineage
from lineage_sdk.config.schema import LineageConfig, PipelineConfig
from lineage_sdk.sdk.export import EncodedEvent
from lineage_sdk.sdk.exporters import InMemoryExporter
from lineage_sdk.transport.unrouted import declare_event_exchange, holding_queue, unrouted_exchange

BROKER = AMQP_URL  # a vhost of the run's own (_bench_common)
ORDERS = LineageDataset("postgres://db:5432", "shop.public.orders")
REPORT = LineageDataset("s3://bucket", "reports/daily.parquet")


# -- broker topology ---------------------------------------------------------------------------


class Topology:
    """A unique exchange and a capped queue bound with '#', deleted at the end."""

    def __init__(self) -> None:
        self.exchange = f"bench.lineage.rmq.{uuid.uuid4().hex[:8]}"
        self.queue = f"{self.exchange}.all"
        conn = pika.BlockingConnection(pika.URLParameters(BROKER))
        ch = conn.channel()
        declare_event_exchange(ch, self.exchange)  # as the exporter does
        # Capped so a long run does not fill the broker's memory; confirms are unaffected.
        ch.queue_declare(self.queue, durable=True, arguments={"x-max-length": 20_000})
        ch.queue_bind(self.queue, self.exchange, "#")
        conn.close()

    def purge(self) -> None:
        conn = pika.BlockingConnection(pika.URLParameters(BROKER))
        conn.channel().queue_purge(self.queue)
        conn.close()

    def delete(self) -> None:
        conn = pika.BlockingConnection(pika.URLParameters(BROKER))
        ch = conn.channel()
        ch.queue_delete(self.queue)
        ch.queue_delete(holding_queue(self.exchange))
        ch.exchange_delete(self.exchange)
        ch.exchange_delete(unrouted_exchange(self.exchange))
        conn.close()


# -- raw pika baselines --------------------------------------------------------------------------


def _props(msg: OutboundMessage) -> Any:
    return pika.BasicProperties(
        content_type=msg.content_type,
        delivery_mode=2,
        message_id=msg.message_id,
        headers=msg.amqp_headers(),
    )


def raw_blocking(exchange: str, messages: Sequence[OutboundMessage]) -> float:
    """One confirm at a time: BlockingConnection with confirm_delivery. Returns seconds."""
    conn = pika.BlockingConnection(pika.URLParameters(BROKER))
    ch = conn.channel()
    ch.confirm_delivery()
    start = time.perf_counter()
    for msg in messages:
        ch.basic_publish(exchange, msg.routing_key, msg.body, _props(msg), mandatory=True)
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def raw_pipelined(exchange: str, messages: Sequence[OutboundMessage], window: int = 100) -> float:
    """``window`` confirms in flight: SelectConnection, publishing more as acks arrive."""
    state = {"next": 0, "acked": 0}
    clock = {"start": 0.0, "end": 0.0}
    holder: dict[str, Any] = {}

    def publish_more() -> None:
        ch = holder["channel"]
        while state["next"] < len(messages) and state["next"] - state["acked"] < window:
            msg = messages[state["next"]]
            ch.basic_publish(exchange, msg.routing_key, msg.body, _props(msg), mandatory=True)
            state["next"] += 1

    def on_confirm(frame: Any) -> None:
        tag = frame.method.delivery_tag
        state["acked"] = tag if frame.method.multiple else max(state["acked"], tag)
        if state["acked"] >= len(messages):
            clock["end"] = time.perf_counter()
            holder["conn"].close()
            return
        publish_more()

    def on_confirm_mode(_frame: Any) -> None:
        clock["start"] = time.perf_counter()
        publish_more()

    def on_channel(ch: Any) -> None:
        holder["channel"] = ch
        ch.confirm_delivery(ack_nack_callback=on_confirm, callback=on_confirm_mode)

    conn = pika.SelectConnection(
        pika.URLParameters(BROKER),
        on_open_callback=lambda c: c.channel(on_open_callback=on_channel),
        on_close_callback=lambda c, e: c.ioloop.stop(),
    )
    holder["conn"] = conn
    conn.ioloop.start()
    return clock["end"] - clock["start"]


# -- the exporter, fed by decorated calls --------------------------------------------------------


@track_lineage(job_name="bench.step", inputs=[ORDERS], outputs=[REPORT])
def step(i: int) -> int:
    return i


def exporter_run(
    exchange: str, calls: int, spool: Path, **rabbit: Any
) -> tuple[float, list[EncodedEvent], RabbitMQExporter]:
    """Seconds from the first decorated call until every event is confirmed."""
    config = LineageConfig(
        collector_topic=exchange,
        rabbitmq=RabbitMQConfig(spool_dir=str(spool), **rabbit),
        pipeline=PipelineConfig(max_queue_size=max(65536, 2 * calls + 10)),
    )
    exporter = RabbitMQExporter.from_config(config)
    witness = InMemoryExporter()
    lineage_sdk.configure(config, exporters=[exporter, witness])
    exporter.export([])  # nothing; the connection opens in the background
    deadline = time.monotonic() + 10
    while not exporter.stats().connected and time.monotonic() < deadline:
        time.sleep(0.01)
    total = 2 * calls
    start = time.perf_counter()
    for i in range(calls):
        step(i)
    while exporter.stats().exported < total:
        time.sleep(0.0005)
        if time.perf_counter() - start > 120:
            raise RuntimeError(f"only {exporter.stats()} after 120 s")
    elapsed = time.perf_counter() - start
    lineage_sdk.shutdown(10)
    return elapsed, witness.encoded, exporter


def exporter_only(
    exchange: str, events: Sequence[EncodedEvent], spool: Path, **rabbit: Any
) -> float:
    """Seconds for the exporter alone: export() of already-encoded events until all confirmed."""
    exporter = RabbitMQExporter(RabbitMQConfig(spool_dir=str(spool), **rabbit), exchange=exchange)
    deadline = time.monotonic() + 10
    while not exporter.stats().connected and time.monotonic() < deadline:
        time.sleep(0.01)
    start = time.perf_counter()
    for i in range(0, len(events), 512):
        exporter.export(events[i : i + 512])
    while exporter.stats().exported < len(events):
        time.sleep(0.0005)
        if time.perf_counter() - start > 120:
            raise RuntimeError(f"only {exporter.stats()} after 120 s")
    elapsed = time.perf_counter() - start
    exporter.shutdown(10)
    return elapsed


# -- latency while away ----------------------------------------------------------------------


class Proxy:
    """Loopback TCP proxy to the broker; ``stop()`` makes the broker look away."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: list[socket.socket] = []
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._stopped:  # accepted while stop() ran: refuse it, as a dead broker would
                client.close()
                return
            upstream = socket.create_connection(("127.0.0.1", 5672))
            self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := a.recv(65536):
                b.sendall(data)
        with contextlib.suppress(OSError):
            b.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        self._listener.close()
        for s in self._open:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


def export_cost(
    exchange: str, events: Sequence[EncodedEvent], spool: Path
) -> list[tuple[str, float, float]]:
    """(phase, microseconds in export() per event, process CPU microseconds per event)."""
    proxy = Proxy()
    exporter = RabbitMQExporter(
        RabbitMQConfig(url=f"amqp://guest:guest@127.0.0.1:{proxy.port}/%2F", spool_dir=str(spool)),
        exchange=exchange,
    )
    rows: list[tuple[str, float, float]] = []

    def measure(label: str, done: Any) -> None:
        cpu = time.process_time()
        inside = 0.0
        for i in range(0, len(events), 512):
            t = time.perf_counter()
            exporter.export(events[i : i + 512])
            inside += time.perf_counter() - t
        done()
        cpu = time.process_time() - cpu
        rows.append((label, inside / len(events) * 1e6, cpu / len(events) * 1e6))

    def confirmed(target: int) -> Any:
        def wait() -> None:
            while exporter.stats().exported < target:
                time.sleep(0.0005)

        return wait

    try:
        while not exporter.stats().connected:
            time.sleep(0.01)
        warm = events[:2048]
        exporter.export(warm)  # warm-up
        confirmed(len(warm))()
        measure("connected", confirmed(len(warm) + len(events)))
        proxy.stop()
        deadline = time.monotonic() + 30
        while exporter.stats().connection_failures < 2:  # lost, and a retry refused: offline
            if time.monotonic() > deadline:
                raise RuntimeError(f"the exporter never noticed the outage: {exporter.stats()}")
            time.sleep(0.01)
        measure("outage (spooling)", lambda: exporter.force_flush(30))
        stats = exporter.stats()
        print(f"  outage: {stats.spooled} events spooled, {stats.buffered} in memory")
    finally:
        exporter.shutdown(5)
    return rows


def _time_calls(n: int) -> list[float]:
    out = []
    clock = time.perf_counter_ns
    for i in range(n):
        t = clock()
        step(i)
        out.append((clock() - t) / 1000)
        if i % 50 == 0:
            time.sleep(0.001)  # a steady stream, not a burst: the worker and I/O thread keep up
    return out


def latency(exchange: str, calls: int, spool: Path) -> list[tuple[str, list[float]]]:
    rows: list[tuple[str, list[float]]] = []
    for label, memory in (("memory", 1_000_000), ("spool", 0)):
        proxy = Proxy()
        config = LineageConfig(
            collector_topic=exchange,
            rabbitmq=RabbitMQConfig(
                url=f"amqp://guest:guest@127.0.0.1:{proxy.port}/%2F",
                spool_dir=str(spool / label),
                memory_buffer_events=memory,
                outage_buffer="memory" if label == "memory" else "spool",
            ),
        )
        sdk = lineage_sdk.configure(config)
        assert sdk is not None
        (exporter,) = sdk.exporters
        assert isinstance(exporter, RabbitMQExporter)
        while not exporter.stats().connected:
            time.sleep(0.01)
        _time_calls(2000)  # warm-up
        lineage_sdk.force_flush(30)
        if label == "memory":
            rows.append(("broker up", _time_calls(calls)))
            lineage_sdk.force_flush(30)
        proxy.stop()
        while exporter.stats().connected:
            time.sleep(0.01)
        rows.append((f"broker away ({label})", _time_calls(calls)))
        stats = exporter.stats()
        where = "spooled" if label == "spool" else "buffered"
        print(f"  away ({label}): {getattr(stats, where)} events {where}, dropped {stats.dropped}")
        lineage_sdk.shutdown(10)
    return rows


# -- main --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="few events: checks the script runs")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    scale = 0.05 if args.quick else 1.0
    single_calls = int(10_000 * scale)  # 20,000 events
    batch_calls = int(40_000 * scale)  # 80,000 events
    blocking_msgs = int(4_000 * scale)  # events for the one-at-a-time baseline
    latency_calls = int(20_000 * scale)

    topo = Topology()
    rows: list[tuple[str, float, float, float, float]] = []
    single_events: list[EncodedEvent] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            spool = Path(tmp)
            for mode, calls, per_msg in (
                ("single event per message", single_calls, 1),
                ("batch, 20 events per message", batch_calls, 20),
            ):
                print(f"{mode}: exporter fed by {calls:,} decorated calls ...", flush=True)
                seconds, events, _ = exporter_run(
                    topo.exchange,
                    calls,
                    spool / f"d{per_msg}",
                    events_per_message=per_msg,
                    max_in_flight=100,
                )
                decorated_rate = len(events) / seconds
                if per_msg == 1:
                    single_events = events
                topo.purge()
                print(f"{mode}: exporter alone, pre-encoded events ...", flush=True)
                alone = exporter_only(
                    topo.exchange,
                    events,
                    spool / f"a{per_msg}",
                    events_per_message=per_msg,
                    max_in_flight=100,
                )
                alone_rate = len(events) / alone
                # Raw pika publishes the same messages as the exporter built (chunks of 512 events
                # per export call, as the pipeline hands them over).
                messages = [
                    m
                    for i in range(0, len(events), 512)
                    for m in build_messages(events[i : i + 512], per_msg)
                ]
                topo.purge()
                print(f"{mode}: raw pika, 100 confirms in flight ...", flush=True)
                raw100 = len(events) / raw_pipelined(topo.exchange, messages, window=100)
                topo.purge()
                print(f"{mode}: raw pika, one confirm at a time ...", flush=True)
                part = messages[: max(1, blocking_msgs // per_msg)]
                raw1 = sum(m.event_count for m in part) / raw_blocking(topo.exchange, part)
                topo.purge()
                rows.append((mode, raw1, raw100, decorated_rate, alone_rate))
            print("latency of decorated calls, broker up and away ...", flush=True)
            lat = latency(topo.exchange, latency_calls, spool / "latency")
            print("exporter cost per event, connected and spooling during an outage ...")
            cost = export_cost(topo.exchange, single_events, spool / "cost")
    finally:
        topo.delete()

    print()
    print(
        "Throughput, events/s until confirmed (exporter: max_in_flight=100). Ratios are against "
        "raw pika with 100 confirms in flight."
    )
    print(
        f"{'mode':30} {'raw 1 at a time':>15} {'raw 100 in flight':>17} "
        f"{'from decorated calls':>21} {'ratio':>6} {'exporter alone':>15} {'ratio':>6}"
    )
    for mode, raw1, raw100, decorated, alone in rows:
        print(
            f"{mode:30} {raw1:15,.0f} {raw100:17,.0f} {decorated:21,.0f} "
            f"{decorated / raw100:6.2f} {alone:15,.0f} {alone / raw100:6.2f}"
        )
    print()
    print("Latency of one decorated call (START + COMPLETE), microseconds")
    print(f"{'phase':24} {'mean':>8} {'p50':>8} {'p99':>8} {'vs up (mean)':>13}")
    up = statistics.fmean(lat[0][1])
    for label, values in lat:
        values = sorted(values)
        p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
        mean = statistics.fmean(values)
        print(
            f"{label:24} {mean:8.1f} {statistics.median(values):8.1f} {p99:8.1f} {mean / up:13.2f}"
        )
    print()
    print(
        f"Exporter cost per event ({len(single_events):,} pre-encoded events, single mode), "
        "microseconds"
    )
    print(f"{'phase':20} {'in export()':>12} {'ratio':>6} {'process CPU':>12} {'ratio':>6}")
    base_inside, base_cpu = cost[0][1], cost[0][2]
    for label, inside, cpu in cost:
        print(
            f"{label:20} {inside:12.2f} {inside / base_inside:6.2f} {cpu:12.2f} "
            f"{cpu / base_cpu:6.2f}"
        )
    print(
        "\nTargets: exporter >= 0.8x raw pika with 100 confirms in flight in each mode; "
        "latency away <= 2x latency up."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
