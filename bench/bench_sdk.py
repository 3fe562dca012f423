"""Benchmark of the core SDK (issues 2 and 11): per-call overhead, disabled mode, and a burst.

Every figure is a ratio against a baseline measured in the same run, because these machines are
noisy. The baseline is a bare OpenTelemetry span with a BatchSpanProcessor and a no-op exporter.
Three costs are compared:

- caller-thread CPU (``time.thread_time`` in the calling thread): what the application pays;
- whole-process CPU (``time.process_time`` around a burst *and* its drain): the caller plus the
  worker thread that builds and exports (lineage events, or the baseline's span batches);
- wall clock per call.

Run with ``nox -s bench`` or ``python bench/bench_sdk.py`` (``--calls 5000 --repeats 3
--rounds 2 --burst 20000`` for a quick look).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable, Sequence

from _bench_common import NoopLineageExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import lineage_sdk
from lineage_sdk import LineageDataset, track_lineage
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.sdk.exporters import InMemoryExporter


class _NoopSpanExporter(SpanExporter):
    def export(self, spans: Sequence[object]) -> SpanExportResult:  # type: ignore[override]
        return SpanExportResult.SUCCESS


def per_call_us(
    fn: Callable[[], object],
    calls: int,
    repeats: int,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Median over ``repeats`` of the mean per-call time in µs (GC off during each timing).

    With ``clock=time.thread_time`` it is the CPU time of the calling thread alone: the cost the
    caller pays, without the worker thread's share of the GIL.
    """
    samples = []
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        start = clock()
        for _ in range(calls):
            fn()
        samples.append((clock() - start) / calls * 1e6)
        gc.enable()
    return statistics.median(samples)


def burst_costs(
    fn: Callable[[], object], drain: Callable[[], object], calls: int
) -> tuple[float, float, float]:
    """(caller CPU, whole-process CPU, wall) per call in µs, for one burst of ``calls``.

    The burst is followed by ``drain()`` (the worker finishing what the burst queued), so the
    process CPU includes the worker's whole share of the work.
    """
    drain()
    gc.collect()
    gc.disable()
    p0, t0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.thread_time()
    drain()
    p1, w1 = time.process_time(), time.perf_counter()
    gc.enable()
    return (t1 - t0) / calls * 1e6, (p1 - p0) / calls * 1e6, (w1 - w0) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--burst", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of timings")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()

    # Baseline 1: an undecorated call.
    def bare() -> None:
        return None

    # Baseline 2: a bare OpenTelemetry SDK span with a BatchSpanProcessor and a no-op exporter.
    # Its queue is as large as the lineage pipeline's, so that it drops nothing in a burst either.
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(_NoopSpanExporter(), max_queue_size=65536))
    tracer = provider.get_tracer("bench")

    def otel_span() -> None:
        with tracer.start_as_current_span("bare"):
            pass

    inputs = [LineageDataset("postgres://db:5432", "shop.public.orders")]
    outputs = [LineageDataset("s3://warehouse", "orders/daily")]

    @track_lineage(job_name="bench.decorated", inputs=inputs, outputs=outputs)
    def decorated() -> None:
        return None

    noop = NoopLineageExporter()
    lineage_sdk.configure(LineageConfig(exporters=["memory"]), exporters=[noop], strict=True)
    # Interleave the measurements so drift on a noisy machine hits all of them alike.
    # Wall clock includes the worker thread's share of the GIL (it builds and serializes the
    # events while the loop runs); thread CPU time is what the calling thread itself spends.
    bare_us, span_us, deco_us, span_cpu, deco_cpu = [], [], [], [], []
    # Burst pairs (baseline and decorated back to back, in alternating order): the ratio of each
    # pair cancels the drift of a shared machine; the medians of the pairs' ratios are reported.
    span_bursts: list[tuple[float, float, float]] = []
    deco_bursts: list[tuple[float, float, float]] = []
    pair_ratios: list[tuple[float, float, float]] = []

    def drain_spans() -> None:
        provider.force_flush(60_000)

    def drain_lineage() -> None:
        lineage_sdk.force_flush(60)

    for _ in range(args.rounds):
        bare_us.append(per_call_us(bare, args.calls, args.repeats))
        span_us.append(per_call_us(otel_span, args.calls, args.repeats))
        deco_us.append(per_call_us(decorated, args.calls, args.repeats))
        lineage_sdk.force_flush(60)
        span_cpu.append(per_call_us(otel_span, args.calls, args.repeats, time.thread_time))
        deco_cpu.append(per_call_us(decorated, args.calls, args.repeats, time.thread_time))
        lineage_sdk.force_flush(60)
        for i in range(args.repeats):
            if i % 2:
                deco = burst_costs(decorated, drain_lineage, args.calls)
                span = burst_costs(otel_span, drain_spans, args.calls)
            else:
                span = burst_costs(otel_span, drain_spans, args.calls)
                deco = burst_costs(decorated, drain_lineage, args.calls)
            span_bursts.append(span)
            deco_bursts.append(deco)
            pair_ratios.append((deco[0] / span[0], deco[1] / span[1], deco[2] / span[2]))
    b, s, d, sc, dc = (
        statistics.median(x) for x in (bare_us, span_us, deco_us, span_cpu, deco_cpu)
    )
    sbc, sp, sw = (statistics.median(x) for x in zip(*span_bursts, strict=True))
    dbc, dp, dw = (statistics.median(x) for x in zip(*deco_bursts, strict=True))
    caller_ratio, process_ratio, wall_ratio = (
        statistics.median(x) for x in zip(*pair_ratios, strict=True)
    )
    expected = 2 * 3 * args.rounds * args.calls * args.repeats  # 2 events x 3 timings x rounds
    assert noop.count == expected, f"benchmark lost events: {noop.count} != {expected}"

    lineage_sdk.configure(LineageConfig(enabled=False))
    disabled_us = per_call_us(decorated, args.calls * 5, args.repeats)
    disabled_ratio = disabled_us - b

    # Burst: default settings, memory exporter, every event must arrive.
    exporter = InMemoryExporter()
    lineage_sdk.configure(LineageConfig(exporters=["memory"]), exporters=[exporter], strict=True)
    start = time.perf_counter()
    for _ in range(args.burst):
        decorated()
    produced_s = time.perf_counter() - start
    lineage_sdk.force_flush(120)
    drained_s = time.perf_counter() - start
    delivered = len(exporter.encoded)
    stats = lineage_sdk.get_sdk().stats()  # type: ignore[union-attr]
    lineage_sdk.shutdown()

    figures = {
        "undecorated_call_us": round(b, 3),
        "bare_otel_span_us": round(s, 3),
        "decorated_call_us": round(d, 3),
        "decorated_vs_bare_span": round(d / s, 3),
        "bare_otel_span_caller_cpu_us": round(sc, 3),
        "decorated_caller_cpu_us": round(dc, 3),
        "decorated_vs_bare_span_caller_cpu": round(dc / sc, 3),
        "bare_otel_span_process_cpu_us": round(sp, 3),
        "decorated_process_cpu_us": round(dp, 3),
        "decorated_vs_bare_span_process_cpu": round(process_ratio, 3),
        "bare_otel_span_burst_caller_cpu_us": round(sbc, 3),
        "decorated_burst_caller_cpu_us": round(dbc, 3),
        "decorated_vs_bare_span_burst_caller_cpu": round(caller_ratio, 3),
        "bare_otel_span_burst_wall_us": round(sw, 3),
        "decorated_burst_wall_us": round(dw, 3),
        "decorated_vs_bare_span_burst_wall": round(wall_ratio, 3),
        "decorated_minus_undecorated_us": round(d - b, 3),
        "disabled_call_us": round(disabled_us, 3),
        "disabled_overhead_us": round(disabled_ratio, 3),
        "burst_calls": args.burst,
        "burst_events_expected": 2 * args.burst,
        "burst_events_delivered": delivered,
        "burst_dropped": stats.dropped_queue_full,
        "burst_produce_s": round(produced_s, 3),
        "burst_drain_s": round(drained_s, 3),
    }
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    print()
    print(
        f"target decorated/bare-span <= 1.0, caller thread CPU:        {'PASS' if dc / sc <= 1.0 else 'FAIL'} ({dc / sc:.2f}x: {dc:.2f} vs {sc:.2f} us)"
    )
    print(
        f"target decorated/bare-span <= 1.0, caller CPU in bursts:     {'PASS' if caller_ratio <= 1.0 else 'FAIL'} ({caller_ratio:.2f}x: {dbc:.2f} vs {sbc:.2f} us)"
    )
    print(
        f"target decorated/bare-span <= 1.4, whole-process CPU+drain:  {'PASS' if process_ratio <= 1.4 else 'FAIL'} ({process_ratio:.2f}x: {dp:.2f} vs {sp:.2f} us)"
    )
    print(
        f"(info) decorated/bare-span, wall clock incl. worker:         {d / s:.2f}x: {d:.2f} vs {s:.2f} us"
    )
    print(
        f"target disabled < 1 us:            {'PASS' if disabled_us < 1 else 'FAIL'} ({disabled_us:.3f} us)"
    )
    print(
        f"target burst all delivered:        {'PASS' if delivered == 2 * args.burst else 'FAIL'} ({delivered}/{2 * args.burst})"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=2)


if __name__ == "__main__":
    main()
