"""The logging store: one JSON line per event, the event inside it unchanged, once per process."""

from __future__ import annotations

import logging

import orjson
import pytest
from collector_helpers import run_event

from lineage_sdk.collector.decode import validate_event
from lineage_sdk.collector.stores.logging import LoggingLineageStore


def test_one_json_line_per_event_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    events = [run_event(job=f"j{i}") for i in range(3)]
    records = [validate_event(e) for e in events]
    store = LoggingLineageStore("test.lineage.logging_store")
    caplog.set_level(logging.INFO, logger="test.lineage.logging_store")
    store.write_batch(records)
    store.write_batch(records[:2])  # a redelivery within the process is not logged again
    logged = [r for r in caplog.records if r.name == "test.lineage.logging_store"]
    assert len(logged) == 3
    for log_record, record, event in zip(logged, records, events, strict=True):
        assert log_record.levelno == logging.INFO
        line = log_record.getMessage()
        assert "\n" not in line
        data = orjson.loads(line)
        assert data["event_id"] == record.event_id
        assert data["event"] == event
        assert (data["eventType"], data["job"], data["runId"]) == (
            "COMPLETE",
            f"tests:{record.job_name}",
            event["run"]["runId"],
        )


def test_nothing_is_built_when_the_logger_is_off(caplog: pytest.LogCaptureFixture) -> None:
    store = LoggingLineageStore("test.lineage.logging_store_off")
    caplog.set_level(logging.WARNING, logger="test.lineage.logging_store_off")
    store.write_batch([validate_event(run_event())])
    assert not [r for r in caplog.records if r.name == "test.lineage.logging_store_off"]
