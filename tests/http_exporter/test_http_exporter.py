"""The http exporter against a real HTTP server on loopback."""

from __future__ import annotations

import logging
import socket
import sys
import uuid
from pathlib import Path

import orjson
import pytest

from lineage_exporters.http import HttpExporter, HttpExporterConfig
from lineage_sdk import LineageDataset, configure, shutdown, track_lineage
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.sdk.events import encode_event
from lineage_sdk.sdk.export import EncodedEvent, ExportResult

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conformance import validate_event
from http_recorder import Recorder

TOKEN = "tok-3f9a-very-secret"


def _event(i: int) -> EncodedEvent:
    return encode_event(
        {
            "eventType": "COMPLETE",
            "eventTime": f"2024-05-01T12:00:00.{i:06d}+00:00",
            "producer": "https://github.com/lineage-sdk/lineage-sdk",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": str(uuid.uuid4())},
            "job": {"namespace": "tests", "name": f"job{i}"},
            "inputs": [],
            "outputs": [],
        }
    )


def _url(srv: Recorder) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def test_posts_each_event_with_bearer_token(server: Recorder) -> None:
    exporter = HttpExporter(HttpExporterConfig(url=_url(server) + "/", api_key=TOKEN))
    events = [_event(i) for i in range(5)]
    assert exporter.export(events) is ExportResult.SUCCESS
    exporter.shutdown()
    assert [body for _, _, body in server.requests] == [e.payload for e in events]
    path, headers, _ = server.requests[0]
    assert path == "/api/v1/lineage"
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    assert headers["Content-Type"] == "application/json"
    assert exporter.stats().sent == 5


def test_custom_endpoint_and_no_token(server: Recorder) -> None:
    exporter = HttpExporter(HttpExporterConfig(url=_url(server), endpoint="/custom/ingest"))
    assert exporter.export([_event(1)]) is ExportResult.SUCCESS
    path, headers, _ = server.requests[0]
    assert path == "/custom/ingest"
    assert "Authorization" not in headers
    exporter.shutdown()


def test_server_errors_are_counted_and_logged_once(server: Recorder, caplog) -> None:
    server.status = 500
    exporter = HttpExporter(HttpExporterConfig(url=_url(server), api_key=TOKEN))
    with caplog.at_level(logging.WARNING, logger="lineage_exporters.http"):
        assert exporter.export([_event(i) for i in range(3)]) is ExportResult.FAILURE
        assert exporter.export([_event(3)]) is ExportResult.FAILURE
    assert exporter.stats().failed == 4
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "HTTP 500" in lines[0]
    assert TOKEN not in caplog.text
    exporter.shutdown()


def test_unreachable_endpoint_never_raises_and_fails_fast(caplog) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    exporter = HttpExporter(HttpExporterConfig(url=f"http://user:{TOKEN}@127.0.0.1:{port}"))
    with caplog.at_level(logging.WARNING, logger="lineage_exporters.http"):
        assert exporter.export([_event(i) for i in range(50)]) is ExportResult.FAILURE
    stats = exporter.stats()
    assert stats.failed == 50 and stats.sent == 0
    assert len(caplog.records) == 1
    assert TOKEN not in caplog.text
    exporter.shutdown()


def test_timeout_is_a_failure_not_a_hang(server: Recorder) -> None:
    server.delay = 1.0
    exporter = HttpExporter(HttpExporterConfig(url=_url(server), timeout_ms=100))
    assert exporter.export([_event(0)]) is ExportResult.FAILURE
    assert exporter.stats().failed == 1
    exporter.shutdown()


def test_bad_urls_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"lineage\.http\.url"):
        HttpExporter(HttpExporterConfig())
    with pytest.raises(ConfigError) as info:
        HttpExporter(
            HttpExporterConfig.model_construct(
                url=f"ftp://u:{TOKEN}@host/", endpoint="x", api_key=None, timeout_ms=100
            )
        )
    assert TOKEN not in str(info.value)


def test_decorated_functions_through_the_sdk(server: Recorder) -> None:
    config = LineageConfig(exporters=["http"], http=HttpExporterConfig(url=_url(server)))
    assert configure(config) is not None
    try:

        @track_lineage(job_name="http.job", inputs=[LineageDataset("file", "/in")])
        def work() -> int:
            return 1

        assert work() == 1
        assert work() == 1
    finally:
        shutdown(10)
    events = [orjson.loads(body) for _, _, body in server.requests]
    assert [e["eventType"] for e in events].count("START") == 2
    assert [e["eventType"] for e in events].count("COMPLETE") == 2
    for event in events:
        validate_event(event)
