"""The collector's fast decode path gives the verdicts, reasons and records the models give.

decode_message validates with check_event (a plain-Python check, parse_event only for the
reason); these tests hold it to what parse_event says for every kind of bad event, inside
single and batch messages, and check that accepted events become records losslessly. The
sql store's prepared statements are checked to store times exactly as SQLAlchemy would.
"""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import sqlalchemy as sa
from collector_helpers import BATCH_CONTENT_TYPE, PRODUCER, run_event

from lineage_sdk.collector.decode import PoisonMessage, decode_message
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.stores.sql_backend import SqlBackend, UTCDateTime
from lineage_sdk.exceptions import InvalidEventError
from lineage_sdk.models import event_id, parse_event


def _with(event: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(event)
    target = out
    for part in path[:-1]:
        target = target[part]
    if value is _DROP:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


_DROP = object()
_GOOD = run_event(
    inputs=[("postgres://db:5432", "public.a")],
    outputs=[("s3://bucket", "b")],
    parent=(str(uuid.uuid4()), "ns", "parent.job"),
    extra_run_facets={
        "processing_engine": {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/ProcessingEngineRunFacet.json",
            "version": "0.1.0",
            "name": "lineage-sdk",
        }
    },
)
_BAD_EVENTS: dict[str, Any] = {
    "not an event object": {"hello": "world"},
    "missing runId": _with(_GOOD, ("run", "runId"), _DROP),
    "non-UUID runId": _with(_GOOD, ("run", "runId"), "not-a-uuid"),
    "numeric runId": _with(_GOOD, ("run", "runId"), 42),
    "wrong eventType": _with(_GOOD, ("eventType",), "EXPLODE"),
    "eventTime not a date": _with(_GOOD, ("eventTime",), "yesterday at noon"),
    "eventTime missing": _with(_GOOD, ("eventTime",), _DROP),
    "schemaURL missing": _with(_GOOD, ("schemaURL",), _DROP),
    "job without a name": _with(_GOOD, ("job", "name"), _DROP),
    "job namespace a number": _with(_GOOD, ("job", "namespace"), 7),
    "inputs an object": _with(_GOOD, ("inputs",), {"namespace": "n", "name": "m"}),
    "output without namespace": _with(_GOOD, ("outputs", 0, "namespace"), _DROP),
    "facet not an object": _with(_GOOD, ("run", "facets", "x"), "text"),
    "facet without _schemaURL": _with(
        _GOOD, ("run", "facets", "processing_engine", "_schemaURL"), _DROP
    ),
    "known facet missing a field": _with(
        _GOOD, ("run", "facets", "processing_engine", "version"), _DROP
    ),
    "parent facet with a bad runId": _with(
        _GOOD, ("run", "facets", "parent", "run", "runId"), "nope"
    ),
}


def _models_reason(event: Any) -> str | None:
    try:
        parse_event(event)
    except InvalidEventError as exc:
        return str(exc)
    return None


def test_good_event_becomes_the_same_record_as_before() -> None:
    body = orjson.dumps(_GOOD)
    [record] = decode_message(body, "application/json").records
    assert record == build_record(_GOOD, event_id=event_id(_GOOD))
    assert record.event == _GOOD  # lossless: the event as it arrived
    assert record.parent_job_name == "parent.job"


@pytest.mark.parametrize("name", sorted(_BAD_EVENTS))
def test_each_bad_event_is_refused_with_parse_events_reason(name: str) -> None:
    event = _BAD_EVENTS[name]
    expected = _models_reason(event)
    assert expected is not None, "the models must refuse this event"
    with pytest.raises(PoisonMessage) as single:
        decode_message(orjson.dumps(event), "application/json")
    assert (single.value.reason, single.value.detail) == ("invalid_event", expected)
    # the same event inside a batch, between good ones: parked alone, with the same reason
    batch = [_GOOD, event, _with(_GOOD, ("job", "name"), "other")]
    decoded = decode_message(orjson.dumps(batch), BATCH_CONTENT_TYPE)
    assert [r.event for r in decoded.records] == [batch[0], batch[2]]
    [rejected] = decoded.rejected
    assert (rejected.index, rejected.reason, rejected.detail) == (1, "invalid_event", expected)
    assert orjson.loads(rejected.body) == event


_DATASOURCE = {
    "_producer": PRODUCER,
    "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DatasourceDatasetFacet.json",
    "name": "bigquery",
}


def test_uri_formats_are_annotations_and_the_event_is_kept_as_sent() -> None:
    """Issue 14: ``format: uri`` is an annotation at ingest; the models stay strict."""
    spark = _with(_GOOD, ("producer",), "not a uri")  # was refused as "producer: not a URI"
    spark = _with(spark, ("schemaURL",), "OpenLineage.json#/$defs/RunEvent")
    spark = _with(spark, ("run", "facets", "processing_engine", "_producer"), "spark")
    spark = _with(
        spark,
        ("outputs", 0, "facets"),
        {
            "dataSource": {
                "_producer": "spark",
                "_schemaURL": "DatasourceDatasetFacet.json",
                "name": "file",
                "uri": "file",
            }
        },
    )
    spark = _with(
        spark, ("inputs", 0, "facets"), {"dataSource": {**_DATASOURCE, "uri": "bigquery"}}
    )
    assert _models_reason(spark) is not None  # parse_event is as strict as ever
    body = orjson.dumps(spark)
    [record] = decode_message(body, "application/json").records
    assert record.event == spark and orjson.dumps(record.event) == body
    assert record.event_id == event_id(spark) and record.producer == "not a uri"
    decoded = decode_message(orjson.dumps([spark, _GOOD]), BATCH_CONTENT_TYPE)
    assert [r.event for r in decoded.records] == [spark, _GOOD] and not decoded.rejected


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        (("job", "name"), "job.name: must not be empty"),
        (("job", "namespace"), "job.namespace: must not be empty"),
        (("inputs", 0, "name"), "inputs[0].name: must not be empty"),
        (("outputs", 0, "namespace"), "outputs[0].namespace: must not be empty"),
        (
            ("run", "facets", "parent", "job", "name"),
            "run.facets.parent.job.name: must not be empty",
        ),
    ],
)
def test_an_empty_name_is_refused_naming_the_field(path: tuple[Any, ...], reason: str) -> None:
    """The stores key jobs and datasets on namespace and name: empty ones are refused."""
    event = _with(_GOOD, path, "")
    with pytest.raises(PoisonMessage) as single:
        decode_message(orjson.dumps(event), "application/json")
    assert (single.value.reason, single.value.detail) == ("invalid_event", reason)
    decoded = decode_message(orjson.dumps([_GOOD, event]), BATCH_CONTENT_TYPE)
    assert [r.event for r in decoded.records] == [_GOOD]
    assert [(r.index, r.detail) for r in decoded.rejected] == [(1, reason)]


def test_unusual_but_valid_content_is_accepted() -> None:
    odd = _with(_GOOD, ("job", "name"), "we$ird.name\u2603")
    odd = _with(odd, ("eventTime",), "2025-01-01T00:00:00.123456789")  # nanoseconds, no offset
    odd = _with(odd, ("run", "facets", "x_custom"), {"_producer": "p", "_schemaURL": "s"})
    assert _models_reason(odd) is None
    [record] = decode_message(orjson.dumps(odd), "application/json").records
    assert record.job_name == "we$ird.name\u2603"
    assert record.event_time == datetime(2025, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)


def test_sql_store_binds_times_as_sqlalchemy_does(tmp_path: Path) -> None:
    backend = SqlBackend(f"sqlite:///{tmp_path}/t.db")
    store = EngineStore(backend)
    store.open()
    try:
        event = _with(_GOOD, ("eventTime",), "2025-03-01T01:02:03.5+02:00")
        [record] = decode_message(orjson.dumps(event), "application/json").records
        store.write_batch([record])
        with backend._db.connect() as conn:
            raw = conn.exec_driver_sql("SELECT event_time FROM lineage_ev").scalar_one()
            started = conn.exec_driver_sql("SELECT first_event FROM lineage_run").scalar_one()
        dialect = backend._db.dialect
        bind = UTCDateTime().dialect_impl(dialect).bind_processor(dialect)
        assert bind is not None
        assert raw == started == bind(record.event_time) == "2025-02-28 23:02:03.500000"
        run = backend._t["run"]
        with backend._db.connect() as conn:
            first_event = conn.execute(sa.select(run.c.first_event)).scalar_one()
        assert first_event == datetime(2025, 2, 28, 23, 2, 3, 500000, tzinfo=UTC)
    finally:
        store.close()
