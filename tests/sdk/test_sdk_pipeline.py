"""The batch pipeline: overflow policies, flush, shutdown, fork, exit, failing exporters."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Sequence

import orjson
import pytest
from sdk_helpers import flushed_events

import lineage_sdk
from lineage_sdk import LineageDataset, track_lineage
from lineage_sdk.config.schema import LineageConfig, PipelineConfig
from lineage_sdk.sdk.export import EncodedEvent, ExportResult, LineageExporter
from lineage_sdk.sdk.exporters import InMemoryExporter
from lineage_sdk.sdk.pipeline import BatchPipeline


class GatedExporter(LineageExporter):
    """Blocks in export() until released, so the queue can be filled deterministically."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.received: list[EncodedEvent] = []

    def export(self, batch: Sequence[EncodedEvent]) -> ExportResult:
        self.entered.set()
        self.gate.wait(30)
        self.received.extend(batch)
        return ExportResult.SUCCESS

    def shutdown(self, timeout: float = 30.0) -> None:
        self.gate.set()


def _event(i: int) -> EncodedEvent:
    payload = orjson.dumps({"i": i})
    return EncodedEvent(payload, str(i), "START", "", "ns", "job", None, "p", "s")


def _pipeline(exporter: LineageExporter, **kwargs) -> BatchPipeline[int]:
    return BatchPipeline([exporter], lambda i: (_event(i),), flush_at_exit=False, **kwargs)


def _fill_while_blocked(policy: str, total: int = 20) -> tuple[BatchPipeline[int], GatedExporter]:
    exporter = GatedExporter()
    pipeline = _pipeline(
        exporter, max_queue_size=5, max_export_batch_size=1, overflow=policy, block_timeout=0.05
    )
    pipeline.submit(0)
    assert exporter.entered.wait(10), "worker never called export"
    for i in range(1, total):
        pipeline.submit(i)
    return pipeline, exporter


@pytest.mark.parametrize("policy", ["drop_newest", "block"])
def test_full_queue_drops_newest_and_counts(policy):
    pipeline, exporter = _fill_while_blocked(policy)
    stats = pipeline.stats()
    assert stats.dropped_queue_full == 14  # 1 in export, 5 queued, 14 dropped
    exporter.gate.set()
    assert pipeline.force_flush(10)
    assert [int(e.event_id) for e in exporter.received] == [0, 1, 2, 3, 4, 5]
    pipeline.shutdown(5)


def test_full_queue_drop_oldest_keeps_the_newest():
    pipeline, exporter = _fill_while_blocked("drop_oldest")
    assert pipeline.stats().dropped_queue_full == 14
    exporter.gate.set()
    assert pipeline.force_flush(10)
    assert [int(e.event_id) for e in exporter.received] == [0, 15, 16, 17, 18, 19]
    pipeline.shutdown(5)


def test_block_policy_waits_for_room_instead_of_dropping():
    exporter = InMemoryExporter()
    pipeline = _pipeline(
        exporter, max_queue_size=10, max_export_batch_size=5, overflow="block", block_timeout=5.0
    )
    for i in range(5000):
        pipeline.submit(i)
    assert pipeline.force_flush(30)
    assert pipeline.stats().dropped_queue_full == 0
    assert len(exporter.encoded) == 5000
    pipeline.shutdown(5)


class FailingExporter(LineageExporter):
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.calls = 0

    def export(self, batch: Sequence[EncodedEvent]) -> ExportResult:
        self.calls += 1
        if self.mode == "raise":
            raise RuntimeError("exporter bug")
        return ExportResult.FAILURE

    def force_flush(self, timeout: float = 30.0) -> bool:
        raise RuntimeError("flush bug")

    def shutdown(self, timeout: float = 30.0) -> None:
        raise RuntimeError("shutdown bug")


@pytest.mark.parametrize("mode", ["raise", "failure"])
def test_failing_exporter_never_reaches_the_application(mode, caplog):
    bad = FailingExporter(mode)
    good = InMemoryExporter()
    lineage_sdk.configure(LineageConfig(exporters=["memory"]), exporters=[bad, good], strict=True)
    try:

        @track_lineage(job_name="survives")
        def work() -> int:
            return 7

        assert [work() for _ in range(3)] == [7, 7, 7]
        events = flushed_events(good)
        assert len(events) == 6  # the good exporter still gets everything
        stats = lineage_sdk.get_sdk().stats()
        assert stats.export_failures == 6
        assert bad.calls >= 1
    finally:
        lineage_sdk.shutdown(5)  # exporter.shutdown raising must not escape either


def test_encoder_failure_is_counted_and_the_rest_goes_on():
    exporter = InMemoryExporter()

    def encoder(i: int) -> tuple[EncodedEvent, ...]:
        if i == 3:
            raise ValueError("cannot build")
        return (_event(i),)

    pipeline: BatchPipeline[int] = BatchPipeline([exporter], encoder, flush_at_exit=False)
    for i in range(6):
        pipeline.submit(i)
    assert pipeline.force_flush(10)
    assert [e.event_id for e in exporter.encoded] == ["0", "1", "2", "4", "5"]
    assert pipeline.stats().encode_failures == 1
    pipeline.shutdown(5)


def test_flush_and_shutdown_are_idempotent_and_late_events_are_counted():
    exporter = InMemoryExporter()
    pipeline = _pipeline(exporter)
    pipeline.submit(1)
    assert pipeline.force_flush(5)
    assert pipeline.force_flush(5)
    pipeline.shutdown(5)
    pipeline.shutdown(5)
    pipeline.submit(2)
    assert pipeline.stats().dropped_after_shutdown == 1
    assert [e.event_id for e in exporter.encoded] == ["1"]
    assert pipeline.force_flush(1)


def test_disabled_mode_records_nothing_and_calls_through():
    exporter = InMemoryExporter()
    lineage_sdk.configure(LineageConfig(enabled=False), exporters=[exporter])
    try:
        assert lineage_sdk.get_sdk() is None

        @track_lineage(job_name="off", outputs=[LineageDataset("s3://b", "k")])
        def work(x: int) -> int:
            lineage_sdk.current_run().add_output(LineageDataset("s3://b", "other"))
            return x * 2

        assert work(21) == 42
        assert exporter.encoded == []
    finally:
        lineage_sdk.shutdown()


def test_openlineage_disabled_env_turns_lineage_off(monkeypatch):
    monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")
    monkeypatch.setenv("LINEAGE_EXPORTERS", "memory")
    assert lineage_sdk.configure() is None
    lineage_sdk.shutdown()


def test_bad_configuration_disables_lineage_and_logs_once(monkeypatch, caplog):
    monkeypatch.setenv("LINEAGE_PIPELINE_OVERFLOW", "sideways")
    caplog.set_level("ERROR", logger="lineage_sdk")
    assert lineage_sdk.configure() is None

    @track_lineage(job_name="still_runs")
    def work() -> str:
        return "ok"

    assert work() == "ok"
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1
    message = errors[0].getMessage()
    assert (
        "lineage.pipeline.overflow" in message
        and "sideways" in message
        and "drop_newest" in message
    )
    assert errors[0].exc_info is None
    lineage_sdk.shutdown()


def test_unknown_exporter_kind_disables_with_clear_message(caplog):
    caplog.set_level("ERROR", logger="lineage_sdk")
    assert lineage_sdk.configure(LineageConfig(exporters=["carrier-pigeon"])) is None
    assert "carrier-pigeon" in caplog.text and "console" in caplog.text
    with pytest.raises(lineage_sdk.exceptions.ConfigError, match="carrier-pigeon"):
        lineage_sdk.configure(LineageConfig(exporters=["carrier-pigeon"]), strict=True)
    lineage_sdk.shutdown()


def _run_script(
    code: str, tmp_path, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_queue_is_flushed_at_interpreter_exit(tmp_path):
    out = tmp_path / "events.jsonl"
    result = _run_script(
        """
        import lineage_sdk
        from lineage_sdk import track_lineage

        @track_lineage(job_name="at_exit")
        def work():
            pass

        for _ in range(1000):
            work()
        # no flush, no shutdown: the atexit hook must deliver everything
        """,
        tmp_path,
        {
            "LINEAGE_EXPORTERS": "file",
            "LINEAGE_FILE_PATH": str(out),
            "LINEAGE_PIPELINE_SCHEDULE_DELAY_MS": "60000",
        },
    )
    assert result.returncode == 0, result.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == 2000
    assert {orjson.loads(line)["eventType"] for line in lines} == {"START", "COMPLETE"}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_pipeline_survives_fork(tmp_path):
    out = tmp_path / "events.jsonl"
    result = _run_script(
        """
        import os
        import lineage_sdk
        from lineage_sdk import track_lineage

        @track_lineage(job_name="before_fork")
        def before():
            pass

        @track_lineage(job_name="in_child")
        def child():
            pass

        @track_lineage(job_name="in_parent")
        def parent():
            pass

        before()
        pid = os.fork()
        if pid == 0:
            for _ in range(50):
                child()
            lineage_sdk.shutdown(10)
            os._exit(0)
        for _ in range(50):
            parent()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        lineage_sdk.shutdown(10)
        """,
        tmp_path,
        {"LINEAGE_EXPORTERS": "file", "LINEAGE_FILE_PATH": str(out)},
    )
    assert result.returncode == 0, result.stderr
    events = [orjson.loads(line) for line in out.read_text().splitlines()]
    counts: dict[str, int] = {}
    for event in events:
        counts[event["job"]["name"]] = counts.get(event["job"]["name"], 0) + 1
    # The child's worker thread was re-created after fork; the parent's events are not doubled.
    assert counts == {"before_fork": 2, "in_child": 100, "in_parent": 100}


def test_burst_of_decorated_calls_loses_nothing_with_defaults():
    exporter = InMemoryExporter()
    lineage_sdk.configure(
        LineageConfig(exporters=["memory"], pipeline=PipelineConfig()),
        exporters=[exporter],
        strict=True,
    )
    try:

        @track_lineage(job_name="burst")
        def work() -> None:
            return None

        for _ in range(20_000):
            work()
        assert lineage_sdk.force_flush(60)
        assert len(exporter.encoded) == 40_000
        assert lineage_sdk.get_sdk().stats().dropped_queue_full == 0
    finally:
        lineage_sdk.shutdown()


def test_shutdown_flushes_the_exporters_before_shutting_them_down():
    calls: list[str] = []

    class Recording(InMemoryExporter):
        def force_flush(self, timeout: float = 30.0) -> bool:
            calls.append(f"flush after {len(self.encoded)} events")
            return True

        def shutdown(self, timeout: float = 30.0) -> None:
            calls.append("shutdown")

    pipeline = _pipeline(Recording(), schedule_delay=60.0)
    for i in range(3):
        pipeline.submit(i)
    pipeline.shutdown(10)
    assert calls == ["flush after 3 events", "shutdown"]


def test_exported_counts_only_events_every_exporter_confirmed():
    good = InMemoryExporter()
    pipeline = BatchPipeline(
        [good, FailingExporter("failure")], lambda i: (_event(i),), flush_at_exit=False
    )
    alone = _pipeline(FailingExporter("failure"))
    for i in range(4):
        pipeline.submit(i)
        alone.submit(i)
    assert pipeline.force_flush(10) and alone.force_flush(10)
    assert len(good.encoded) == 4  # delivered by one exporter, refused by the other
    assert (pipeline.stats().exported, pipeline.stats().export_failures) == (0, 4)
    assert (alone.stats().exported, alone.stats().export_failures) == (0, 4)
    confirmed = _pipeline(InMemoryExporter())
    for i in range(4):
        confirmed.submit(i)
    assert confirmed.force_flush(10)
    assert (confirmed.stats().exported, confirmed.stats().export_failures) == (4, 0)
    for p in (pipeline, alone, confirmed):
        p.shutdown(5)


def test_counters_are_exact_with_many_submitting_threads():
    threads_n, per_thread = 8, 20_000
    pipeline = _pipeline(InMemoryExporter(), max_queue_size=threads_n * per_thread + 1)
    start = threading.Barrier(threads_n)

    def submit_many() -> None:
        start.wait()
        for i in range(per_thread):
            pipeline.submit(i)

    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # thread switches anywhere, as on a busy server
    try:
        threads = [threading.Thread(target=submit_many) for _ in range(threads_n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(previous)
    assert pipeline.force_flush(60)
    stats = pipeline.stats()
    assert stats.queued == threads_n * per_thread
    assert stats.exported == threads_n * per_thread
    pipeline.shutdown(5)
    for _ in range(3):
        pipeline.submit(0)
    assert pipeline.stats().dropped_after_shutdown == 3
