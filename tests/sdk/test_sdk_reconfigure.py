"""Configuring lineage again: each run is exported exactly once, and ``stats()`` counts it."""

from __future__ import annotations

import time

import pytest
from opentelemetry.sdk.trace import TracerProvider
from sdk_helpers import flushed_events

import lineage_sdk
from lineage_sdk import LineageSDK, track_lineage
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.sdk.exporters import InMemoryExporter
from lineage_sdk.sdk.processor import ATTR_JOB_NAME
from lineage_sdk.sdk.records import RunStarted
from lineage_sdk.sdk.runs import LineageRun
from lineage_sdk.sdk.scope import RunScope


@track_lineage(job_name="reconfigured")
def work() -> None:
    return None


def _configure(provider: TracerProvider | None) -> tuple[LineageSDK, InMemoryExporter]:
    exporter = InMemoryExporter()
    sdk = lineage_sdk.configure(
        LineageConfig(exporters=["memory"]),
        exporters=[exporter],
        tracer_provider=provider,
        strict=True,
    )
    assert sdk is not None
    return sdk, exporter


def _assert_one_run_exported(sdk: LineageSDK, exporter: InMemoryExporter, job: str) -> None:
    events = flushed_events(exporter)
    assert [(e["job"]["name"], e["eventType"]) for e in events] == [
        (job, "START"),
        (job, "COMPLETE"),
    ]
    stats = sdk.stats()
    assert (stats.queued, stats.exported, stats.dropped_after_shutdown) == (2, 2, 0)


@pytest.fixture(autouse=True)
def _shut_down_afterwards():
    yield
    lineage_sdk.shutdown(10)


def test_configuring_twice_with_the_same_application_provider():
    app_provider = TracerProvider(shutdown_on_exit=False)
    first, first_exporter = _configure(app_provider)
    second, second_exporter = _configure(app_provider)
    work()
    _assert_one_run_exported(second, second_exporter, "reconfigured")
    assert first_exporter.events == []
    assert first.processor is second.processor  # one lineage processor per provider
    # A span made by the application's own tracer is a lineage run exactly once as well.
    tracer = app_provider.get_tracer("app")
    second_exporter.clear()
    with tracer.start_as_current_span("manual", attributes={ATTR_JOB_NAME: "manual"}):
        pass
    events = flushed_events(second_exporter)
    assert [(e["job"]["name"], e["eventType"]) for e in events] == [
        ("manual", "START"),
        ("manual", "COMPLETE"),
    ]


def test_configuring_twice_on_the_sdks_own_provider():
    first, first_exporter = _configure(None)
    second, second_exporter = _configure(None)
    # Instrumentation keeps the SDK it started with (the pika consumers do): its runs still reach
    # the configured pipeline once, instead of a shut-down one that counts them nowhere visible.
    scope = RunScope(first, "kept_sdk", None, (), (), {}, {})
    scope.end()
    _assert_one_run_exported(second, second_exporter, "kept_sdk")
    assert first_exporter.events == []
    assert first.tracer_provider is second.tracer_provider  # the SDK's one provider


def test_a_run_open_across_a_reconfiguration_is_exported_once():
    first, first_exporter = _configure(None)
    scope = RunScope(first, "straddling", None, (), (), {}, {})
    second, second_exporter = _configure(None)
    scope.end()
    # START went out through the first pipeline (flushed at reconfiguration), COMPLETE through
    # the second: each event once.
    assert [e["eventType"] for e in first_exporter.events] == ["START"]
    assert [e["eventType"] for e in flushed_events(second_exporter)] == ["COMPLETE"]
    assert first.stats().exported == 1 and second.stats().exported == 1


def test_interleaved_configurations_export_every_run_once():
    app_provider = TracerProvider(shutdown_on_exit=False)
    other_provider = TracerProvider(shutdown_on_exit=False)
    rounds = [app_provider, None, app_provider, other_provider, None, app_provider, app_provider]
    for round_number, provider in enumerate(rounds):
        sdk, exporter = _configure(provider)
        job = f"round_{round_number}"
        RunScope(sdk, job, None, (), (), {}, {}).end()
        _assert_one_run_exported(sdk, exporter, job)
        # A span naming its job is a lineage run on every provider lineage was ever configured
        # with, and the configured pipeline counts it.
        exporter.clear()
        with_lineage = [
            p for p in (app_provider, other_provider) if p in rounds[: round_number + 1]
        ]
        for traced in (app_provider, other_provider):
            with traced.get_tracer("app").start_as_current_span(
                "manual", attributes={ATTR_JOB_NAME: f"manual_{round_number}"}
            ):
                pass
        assert [e["job"]["name"] for e in flushed_events(exporter)] == [
            f"manual_{round_number}"
        ] * (2 * len(with_lineage))
        stats = sdk.stats()
        assert stats.queued == stats.exported == 2 + 2 * len(with_lineage)


def test_a_record_reaching_a_retired_pipeline_is_handed_on_and_counted():
    first, _ = _configure(None)
    second, second_exporter = _configure(None)
    # An application thread that read the old pipeline just before the swap submits to it late.
    run = LineageRun("01890a5d-ac96-774b-bcce-b302099a8057", "ns", "late", [], [], {}, {}, None)
    first.pipeline.submit(RunStarted(run, time.time_ns(), 0, 0))
    assert [e["job"]["name"] for e in flushed_events(second_exporter)] == ["late"]
    assert (second.stats().queued, first.stats().dropped_after_shutdown) == (1, 0)
    # With nothing configured after it, a retired pipeline counts what it could not take.
    lineage_sdk.shutdown(10)
    second.pipeline.submit(RunStarted(run, time.time_ns(), 0, 0))
    assert second.stats().dropped_after_shutdown == 1
