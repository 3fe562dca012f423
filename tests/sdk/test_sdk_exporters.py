"""console, file and memory exporters; discovery by kind through entry points; capture_lineage."""

from __future__ import annotations

import io
import sys
import textwrap

import orjson
import pytest
from conformance import validate_event

import lineage_sdk
from lineage_sdk import LineageDataset, track_lineage
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.sdk.exporters import (
    ConsoleExporter,
    ConsoleExporterConfig,
    FileExporter,
    FileExporterConfig,
    InMemoryExporter,
    available_exporters,
    create_exporter,
)
from lineage_sdk.testing import capture_lineage


@track_lineage(job_name="exported", outputs=[LineageDataset("s3://b", "k")])
def exported() -> None:
    return None


def test_console_exporter_writes_json_lines(capsys):
    lineage_sdk.configure(LineageConfig(exporters=["console"]), strict=True)
    try:
        exported()
        assert lineage_sdk.force_flush(10)
    finally:
        lineage_sdk.shutdown()
    lines = capsys.readouterr().out.splitlines()
    events = [orjson.loads(line) for line in lines]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    for event in events:
        validate_event(event)


def test_console_exporter_to_stderr_and_closed_stream():
    exporter = create_exporter(
        "console", LineageConfig(console=ConsoleExporterConfig(stream="stderr"))
    )
    assert isinstance(exporter, ConsoleExporter)
    closed = io.StringIO()
    closed.close()
    assert ConsoleExporter(closed).export([]).name == "FAILURE"


def test_file_exporter_appends_across_processes_and_restarts(tmp_path):
    path = tmp_path / "sub" / "events.jsonl"
    path.parent.mkdir()
    for _ in range(2):  # two configurations in a row append to the same file
        lineage_sdk.configure(
            LineageConfig(exporters=["file"], file=FileExporterConfig(path=str(path))), strict=True
        )
        exported()
        lineage_sdk.shutdown()
    events = [orjson.loads(line) for line in path.read_text().splitlines()]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"] * 2
    assert len({e["run"]["runId"] for e in events}) == 2


def test_file_exporter_unwritable_path_fails_without_raising(tmp_path):
    from lineage_sdk.sdk.events import EventBuilder, encode_event
    from lineage_sdk.sdk.runs import LineageRun

    exporter = FileExporter(tmp_path / "missing-dir" / "x.jsonl")
    run = LineageRun("01890a5d-ac96-774b-bcce-b302099a8057", "ns", "j", [], [], {}, {}, None)
    event = encode_event(EventBuilder("https://p").run_event("START", run, 0, [], []))
    assert exporter.export([event]).name == "FAILURE"
    exporter.shutdown()


def test_capture_lineage_restores_the_previous_setup():
    outer = InMemoryExporter()
    before = lineage_sdk.configure(
        LineageConfig(exporters=["memory"]), exporters=[outer], strict=True
    )
    try:
        with capture_lineage() as captured:
            exported()
        assert [e["eventType"] for e in captured.events] == ["START", "COMPLETE"]
        assert len(captured.of_type("COMPLETE")) == 1
        assert len(captured.runs("exported")) == 2
        assert lineage_sdk.get_sdk() is before  # the very same setup, with its own exporter
        exported()  # goes to the restored setup, not to the capture
        assert lineage_sdk.force_flush(10)
        assert len(captured.events) == 2
        assert [e["eventType"] for e in outer.events] == ["START", "COMPLETE"]
    finally:
        lineage_sdk.shutdown()


def test_capture_lineage_without_a_previous_setup_leaves_none():
    lineage_sdk.shutdown()
    with capture_lineage() as captured:
        exported()
    assert len(captured.events) == 2
    assert lineage_sdk.sdk.provider.STATE.sdk is None
    assert lineage_sdk.get_sdk() is None  # still shut down: nothing configures itself


def test_exporters_are_discovered_through_entry_points(tmp_path, monkeypatch):
    """A third-party package registers an exporter kind; configuration can then name it."""
    package = tmp_path / "pigeon_exporter.py"
    package.write_text(
        textwrap.dedent(
            """
        from lineage_sdk.sdk.exporters import InMemoryExporter

        SENT = []

        class PigeonExporter(InMemoryExporter):
            @classmethod
            def from_config(cls, config):
                exporter = cls()
                SENT.append(exporter)
                return exporter
        """
        )
    )
    dist = tmp_path / "pigeon_exporter-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pigeon-exporter\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[lineage_sdk.exporters]\npigeon = pigeon_exporter:PigeonExporter\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "pigeon" in available_exporters()
    lineage_sdk.configure(LineageConfig(exporters=["pigeon", "memory"]), strict=True)
    try:
        exported()
        assert lineage_sdk.force_flush(10)
        (pigeon,) = sys.modules["pigeon_exporter"].SENT
        assert [e["eventType"] for e in pigeon.events] == ["START", "COMPLETE"]
    finally:
        lineage_sdk.shutdown()


def test_entry_point_that_cannot_import_names_the_extra(tmp_path, monkeypatch):
    dist = tmp_path / "broken_exporter-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-exporter\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[lineage_sdk.exporters]\nbroken = not_installed_module_xyz:Exporter\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        ConfigError, match=r"lineage.exporters.*broken.*not_installed_module_xyz"
    ) as caught:
        create_exporter("broken", LineageConfig())
    assert str(caught.value).endswith("pip install 'otel-lineage[broken]'")  # not lineage-sdk's
