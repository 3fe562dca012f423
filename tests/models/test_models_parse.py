"""parse_event on good and hostile input, strict construction, to_dict and event_id."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import OrderedDict
from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any

import orjson
import pytest
from _model_helpers import PRODUCER, RUN_ID, normalise, run_event
from pydantic import ValidationError

from lineage_sdk.exceptions import InvalidEventError
from lineage_sdk.models import (
    DATASET_EVENT_SCHEMA_URL,
    JOB_EVENT_SCHEMA_URL,
    MAX_DEPTH,
    RUN_EVENT_SCHEMA_URL,
    SCHEMAS_DIR,
    TRACE_FACET_KEY,
    TRACE_FACET_SCHEMA_URL,
    DatasetEvent,
    ErrorMessageRunFacet,
    EventType,
    Job,
    JobEvent,
    Run,
    RunEvent,
    RunFacets,
    TraceRunFacet,
    custom_schema_path,
    event_id,
    parse_event,
    to_dict,
    to_json,
)


def _error(data: Any) -> str:
    with pytest.raises(InvalidEventError) as caught:
        parse_event(data)
    return str(caught.value)


# --- kinds ---------------------------------------------------------------------------------


def test_run_event_is_parsed_and_typed() -> None:
    event = parse_event(orjson.dumps(run_event()))
    assert isinstance(event, RunEvent)
    assert event.event_type is EventType.START
    assert event.run.run_id == uuid.UUID(RUN_ID)
    assert event.event_time == datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    assert event.event_time.tzinfo is not None


def test_dataset_event_and_job_event_are_told_apart() -> None:
    base = {"eventTime": "2024-05-01T12:00:00Z", "producer": PRODUCER}
    dataset_event = {
        **base,
        "schemaURL": DATASET_EVENT_SCHEMA_URL,
        "dataset": {"namespace": "s3://bucket", "name": "path/to/data"},
    }
    job_event = {
        **base,
        "schemaURL": JOB_EVENT_SCHEMA_URL,
        "job": {"namespace": "ns", "name": "job"},
        "inputs": [{"namespace": "s3://bucket", "name": "in"}],
    }
    parsed_dataset = parse_event(json.dumps(dataset_event))
    parsed_job = parse_event(job_event)
    assert isinstance(parsed_dataset, DatasetEvent)
    assert parsed_dataset.dataset.name == "path/to/data"
    assert isinstance(parsed_job, JobEvent)
    assert parsed_job.inputs is not None
    assert parsed_job.inputs[0].name == "in"
    assert to_dict(parsed_dataset) == dataset_event
    assert to_dict(parsed_job) == job_event


def test_job_with_run_is_a_run_event() -> None:
    assert isinstance(parse_event(run_event()), RunEvent)


def test_bytearray_memoryview_and_mapping_proxy_are_accepted() -> None:
    raw = orjson.dumps(run_event())
    assert isinstance(parse_event(bytearray(raw)), RunEvent)
    assert isinstance(parse_event(memoryview(raw)), RunEvent)
    assert isinstance(parse_event(MappingProxyType(run_event())), RunEvent)


# --- error messages ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (run_event(run={"runId": "abc"}), "run.runId: not a UUID: 'abc'"),
        (
            run_event(eventType="BOGUS"),
            "eventType: must be one of START, RUNNING, COMPLETE, ABORT, FAIL, OTHER, got 'BOGUS'",
        ),
        (run_event(producer="not a uri"), "producer: not a URI: 'not a uri'"),
        (run_event(schemaURL=""), "schemaURL: not a URI: ''"),
        ({k: v for k, v in run_event().items() if k != "schemaURL"}, "schemaURL: required"),
        ({k: v for k, v in run_event().items() if k != "producer"}, "producer: required"),
        ({k: v for k, v in run_event().items() if k != "eventTime"}, "eventTime: required"),
        (run_event(eventTime="yesterday"), "eventTime: not a date-time: 'yesterday'"),
        (run_event(eventTime=1714564800), "eventTime: not a date-time: 1714564800"),
        (run_event(eventTime="2024-05-01"), "eventTime: not a date-time: '2024-05-01'"),
        (run_event(eventTime="2024-13-01T00:00:00Z"), "eventTime: not a date-time"),
        (run_event(job={"namespace": "n"}), "job.name: required"),
        (run_event(job={"namespace": "n", "name": 5}), "job.name: must be a string, got 5"),
        (run_event(run="r"), "run: must be an object, got 'r'"),
        (run_event(inputs={}), "inputs: must be an array"),
        (
            run_event(inputs=[{"namespace": "n", "name": "a"}, {"namespace": "n"}]),
            "inputs[1].name: required",
        ),
        (
            run_event(run={"runId": RUN_ID, "facets": {"custom_x": {"_producer": PRODUCER}}}),
            "run.facets: facet 'custom_x': _schemaURL is required",
        ),
        (
            run_event(run={"runId": RUN_ID, "facets": {"custom_x": 3}}),
            "run.facets: facet 'custom_x': must be an object",
        ),
        (
            run_event(
                run={
                    "runId": RUN_ID,
                    "facets": {
                        "parent": {
                            "_producer": PRODUCER,
                            "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ParentRunFacet.json",
                            "run": {"runId": "nope"},
                            "job": {"namespace": "n", "name": "p"},
                        }
                    },
                }
            ),
            "run.facets.parent.run.runId: not a UUID: 'nope'",
        ),
        (
            run_event(
                run={
                    "runId": RUN_ID,
                    "facets": {
                        TRACE_FACET_KEY: {
                            "_producer": PRODUCER,
                            "_schemaURL": TRACE_FACET_SCHEMA_URL,
                            "traceId": "XYZ",
                            "spanId": "0" * 16,
                        }
                    },
                }
            ),
            "run.facets.lineagesdk_trace.traceId: must match ^[0-9a-f]{32}$, got 'XYZ'",
        ),
        ({"eventTime": "2024-05-01T00:00:00Z"}, "not an OpenLineage event"),
        (b"{not json", "not JSON: "),
        (b"", "not JSON: "),
        (b"\xff\xfe{}", "not JSON: "),
        (b"[1, 2]", "not a JSON object: got an array"),
        (b'"event"', "not a JSON object: got a string"),
        (b"null", "not a JSON object: got null"),
        (b'{"run": "\x00"}', "contains NUL bytes"),
        ('{"run": {"runId": "a\\u0000b"}}', "contains NUL bytes"),
        (b"{" + b'"a":{' * 70 + b"}" * 71, f"nesting deeper than {MAX_DEPTH} levels"),
        (b"[" * 100_000, f"nesting deeper than {MAX_DEPTH} levels"),
        (12, "not an event: expected JSON bytes, str or a mapping, got int"),
    ],
    ids=lambda v: repr(v)[:40] if not isinstance(v, dict) else None,
)
def test_error_messages_name_the_problem(data: Any, expected: str) -> None:
    message = _error(data)
    assert message.startswith(expected), message
    assert "\n" not in message  # one readable line, no pydantic dump
    assert len(message) < 300


def test_several_problems_are_summarised() -> None:
    message = _error(run_event(run={"runId": "x"}, producer="?", eventTime="t", job={}))
    assert message.count(";") >= 2
    assert "more" in message or message.count(";") == 3


def test_nul_in_a_mapping_is_rejected() -> None:
    assert _error(run_event(job={"namespace": "n", "name": "a\x00b"})) == "contains NUL bytes"
    assert _error(run_event(extra={"k\x00": 1})) == "contains NUL bytes"


def test_deep_mapping_is_rejected_without_recursion() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(10_000):  # deeper than the interpreter's recursion limit
        node["x"] = {}
        node = node["x"]
    assert _error(run_event(extra=deep)) == f"nesting deeper than {MAX_DEPTH} levels"


def test_nesting_at_the_limit_is_accepted() -> None:
    # event (1) > extra (2) > ... : 64 levels in all.
    value: Any = 1
    for _ in range(MAX_DEPTH - 1):
        value = [value]
    parsed = parse_event(orjson.dumps(run_event(extra=value)))
    assert to_dict(parsed)["extra"] == value
    assert _error(orjson.dumps(run_event(extra=[value]))).startswith("nesting deeper")


def test_escaped_backslash_u0000_text_is_not_a_nul() -> None:
    # The JSON text "\\u0000" is a backslash followed by "u0000", not a NUL character.
    raw = orjson.dumps(run_event(job={"namespace": "n", "name": "\\u0000"}))
    assert b"\\\\u0000" in raw
    assert parse_event(raw).job.name == "\\u0000"  # type: ignore[union-attr]


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    name = "[" * 200 + "{" * 200
    parsed = parse_event(orjson.dumps(run_event(job={"namespace": "n", "name": name})))
    assert isinstance(parsed, RunEvent)
    assert parsed.job.name == name


# --- tolerant parsing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-01T12:00:00", datetime(2024, 5, 1, 12, tzinfo=UTC)),
        ("2024-05-01T12:00:00.5", datetime(2024, 5, 1, 12, 0, 0, 500000, tzinfo=UTC)),
        ("2024-05-01 12:00:00", datetime(2024, 5, 1, 12, tzinfo=UTC)),
        ("2024-05-01T12:00:00Z", datetime(2024, 5, 1, 12, tzinfo=UTC)),
        ("2024-05-01t12:00:00z", datetime(2024, 5, 1, 12, tzinfo=UTC)),
        (
            "2024-05-01T12:00:00.123456789+02:00",
            datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2))),
        ),
        (
            "2024-05-01T12:00:00-0530",
            datetime(2024, 5, 1, 12, tzinfo=timezone(-timedelta(hours=5, minutes=30))),
        ),
    ],
)
def test_timestamps_are_read_tolerantly(text: str, expected: datetime) -> None:
    event = parse_event(run_event(eventTime=text))
    assert event.event_time == expected
    assert event.event_time.utcoffset() == expected.utcoffset()
    out = to_dict(event)["eventTime"]
    assert datetime.fromisoformat(out) == expected
    assert out.endswith(("Z", "+02:00", "-05:30"))  # always emitted with an offset


def test_offset_less_nominal_time_is_utc() -> None:
    facet = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/NominalTimeRunFacet.json",
        "nominalStartTime": "2024-05-01T00:00:00",
    }
    event = parse_event(run_event(run={"runId": RUN_ID, "facets": {"nominalTime": facet}}))
    assert isinstance(event, RunEvent)
    assert event.run.facets is not None
    assert event.run.facets.nominal_time is not None
    assert event.run.facets.nominal_time.nominal_start_time == datetime(2024, 5, 1, tzinfo=UTC)


def test_unknown_keys_named_like_python_fields_stay_unknown() -> None:
    data = run_event(event_time="not a time", run={"runId": RUN_ID, "run_id": "x"})
    out = to_dict(parse_event(data))
    assert out["event_time"] == "not a time"
    assert out["run"] == {"runId": RUN_ID, "run_id": "x"}


def test_explicit_nulls_are_kept_when_parsing() -> None:
    data = run_event(inputs=None, extra=None)
    data["job"]["facets"] = None
    assert normalise(to_dict(parse_event(data))) == normalise(data)


def test_uppercase_uuid_is_accepted_and_emitted_canonically() -> None:
    event = parse_event(run_event(run={"runId": RUN_ID.upper()}))
    assert to_dict(event)["run"]["runId"] == RUN_ID


@pytest.mark.parametrize(
    "bad", ["01890a5dac96774bbcceb302099a8057", "{" + RUN_ID + "}", "urn:uuid:" + RUN_ID]
)
def test_non_canonical_uuid_spellings_are_rejected(bad: str) -> None:
    assert _error(run_event(run={"runId": bad})).startswith("run.runId: not a UUID")


# --- strict construction -------------------------------------------------------------------


def test_uuid_utils_uuid7_is_accepted() -> None:
    uuid_utils = pytest.importorskip("uuid_utils")
    run_id = uuid_utils.uuid7()
    run = Run(run_id=run_id)
    assert run.run_id == uuid.UUID(str(run_id))
    assert run.run_id.version == 7


def test_naive_datetime_is_rejected_when_emitting() -> None:
    with pytest.raises(ValidationError, match="naive date-time"):
        RunEvent(
            event_time=datetime(2024, 5, 1),  # naive: the point of the test
            producer=PRODUCER,
            run=Run(run_id=uuid.UUID(RUN_ID)),
            job=Job(namespace="n", name="j"),
        )
    with pytest.raises(ValidationError, match="naive date-time"):
        RunEvent.model_validate({**run_event(), "eventTime": "2024-05-01T00:00:00"})


def test_built_event_has_defaults_and_no_nulls() -> None:
    trace = TraceRunFacet(
        producer=PRODUCER, trace_id="0af7651916cd43dd8448eb211c80319c", span_id="b7ad6b7169203331"
    )
    error = ErrorMessageRunFacet(
        producer=PRODUCER, message="boom", programming_language="python", stack_trace=None
    )
    event = RunEvent(
        event_time=datetime(2024, 5, 1, tzinfo=UTC),
        producer=PRODUCER,
        event_type=EventType.FAIL,
        run=Run(
            run_id=uuid.UUID(RUN_ID), facets=RunFacets(lineagesdk_trace=trace, error_message=error)
        ),
        job=Job(namespace="n", name="j", facets=None),
        inputs=None,
    )
    out = to_dict(event)
    assert out == {
        "eventTime": "2024-05-01T00:00:00Z",
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT_SCHEMA_URL,
        "eventType": "FAIL",
        "run": {
            "runId": RUN_ID,
            "facets": {
                "errorMessage": {
                    "_producer": PRODUCER,
                    "_schemaURL": ErrorMessageRunFacet.SCHEMA_URL,
                    "message": "boom",
                    "programmingLanguage": "python",
                },
                TRACE_FACET_KEY: {
                    "_producer": PRODUCER,
                    "_schemaURL": TRACE_FACET_SCHEMA_URL,
                    "traceId": "0af7651916cd43dd8448eb211c80319c",
                    "spanId": "b7ad6b7169203331",
                },
            },
        },
        "job": {"namespace": "n", "name": "j"},
    }
    assert to_dict(parse_event(to_json(event))) == out


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"trace_id": "0" * 31, "span_id": "0" * 16}, "trace_id"),
        ({"trace_id": "A" * 32, "span_id": "0" * 16}, "trace_id"),
        ({"trace_id": "0" * 32, "span_id": "0" * 17}, "span_id"),
        ({"trace_id": "0" * 32, "span_id": "0" * 16, "producer": "no uri"}, "not a URI"),
    ],
)
def test_trace_facet_is_strict(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        TraceRunFacet(**{"producer": PRODUCER, **kwargs})


# --- to_dict / event_id ------------------------------------------------------------------------


def test_event_id_is_sha256_of_sorted_key_orjson() -> None:
    data = run_event()
    expected = hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]
    assert event_id(data) == expected
    assert len(expected) == 32
    assert all(c in "0123456789abcdef" for c in expected)


def test_event_id_ignores_key_order() -> None:
    data = run_event(run={"runId": RUN_ID, "facets": {"b": 1, "a": 2}})
    reordered = json.loads(json.dumps(data, sort_keys=True))
    reversed_order = OrderedDict(reversed(list(data.items())))
    assert list(reordered) != list(data)
    assert event_id(data) == event_id(reordered) == event_id(reversed_order)
    assert event_id(MappingProxyType(data)) == event_id(data)


def test_event_id_changes_with_content() -> None:
    assert event_id(run_event()) != event_id(run_event(eventType="COMPLETE"))


def test_event_id_matches_the_wire_payload() -> None:
    # What the SDK sends: payload = sorted-key orjson, id = sha256(payload)[:32].
    payload = orjson.dumps(run_event(), option=orjson.OPT_SORT_KEYS)
    assert event_id(orjson.loads(payload)) == hashlib.sha256(payload).hexdigest()[:32]


def test_event_id_of_a_model_is_the_id_of_its_dict() -> None:
    event = parse_event(run_event())
    assert event_id(event) == event_id(to_dict(event))
    assert to_json(event) == orjson.dumps(to_dict(event), option=orjson.OPT_SORT_KEYS)


# --- custom facet schemas ------------------------------------------------------------------------


def test_custom_schema_path_maps_our_urls_only() -> None:
    path = custom_schema_path(TRACE_FACET_SCHEMA_URL)
    assert path == SCHEMAS_DIR / "facets" / "1-0-0" / "TraceRunFacet.json"
    schema = json.loads(path.read_text())
    assert schema["$id"] == TRACE_FACET_SCHEMA_URL.split("#")[0]
    assert "TraceRunFacet" in schema["$defs"]
    assert custom_schema_path("https://lineage-sdk.github.io/spec/facets/1-0-0/Nope.json") is None
    assert custom_schema_path("https://lineage-sdk.github.io/spec/../../pyproject.toml") is None
    assert custom_schema_path("https://openlineage.io/spec/2-0-2/OpenLineage.json") is None
