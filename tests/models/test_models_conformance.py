"""The conformance helper must pass good events and fail each kind of broken one."""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import conformance
import pytest
from _model_helpers import PRODUCER, RUN_ID, run_event

from lineage_sdk.models import (
    DATASET_EVENT_SCHEMA_URL,
    HEARTBEAT_FACET_KEY,
    JOB_EVENT_SCHEMA_URL,
    MESSAGING_FACET_KEY,
    MESSAGING_FACET_SCHEMA_URL,
    TRACE_FACET_KEY,
    TRACE_FACET_SCHEMA_URL,
    DatasetFacets,
    DatasourceDatasetFacet,
    ErrorMessageRunFacet,
    EventType,
    HeartbeatRunFacet,
    InputDataset,
    Job,
    JobFacets,
    JobTypeJobFacet,
    MessagingDatasetFacet,
    NominalTimeRunFacet,
    OutputDataset,
    OutputDatasetFacets,
    ParentJob,
    ParentRoot,
    ParentRun,
    ParentRunFacet,
    ProcessingEngineRunFacet,
    Run,
    RunEvent,
    RunFacets,
    SchemaDatasetFacet,
    SchemaField,
    TraceRunFacet,
    to_dict,
)

_PARENT_URL = "https://openlineage.io/spec/facets/1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet"


def _trace(**overrides: Any) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": TRACE_FACET_SCHEMA_URL,
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        **overrides,
    }


def _full_model_event() -> RunEvent:
    """Every typed facet, built in Python the way the SDK would."""
    parent_run = uuid.uuid4()
    return RunEvent(
        event_time=datetime(2024, 5, 1, 12, tzinfo=UTC),
        producer=PRODUCER,
        event_type=EventType.COMPLETE,
        run=Run(
            run_id=uuid.UUID(RUN_ID),
            facets=RunFacets(
                parent=ParentRunFacet(
                    producer=PRODUCER,
                    run=ParentRun(run_id=parent_run),
                    job=ParentJob(namespace="ns", name="parent"),
                    root=ParentRoot(
                        run=ParentRun(run_id=parent_run),
                        job=ParentJob(namespace="ns", name="parent"),
                    ),
                ),
                error_message=ErrorMessageRunFacet(
                    producer=PRODUCER,
                    message="ValueError: x",
                    programming_language="python",
                    stack_trace="tb",
                ),
                processing_engine=ProcessingEngineRunFacet(
                    producer=PRODUCER,
                    version="0.1.0",
                    name="lineage-sdk",
                    openlineage_adapter_version="0.1.0",
                ),
                nominal_time=NominalTimeRunFacet(
                    producer=PRODUCER,
                    nominal_start_time=datetime(2024, 5, 1, tzinfo=UTC),
                    nominal_end_time=datetime(2024, 5, 2, tzinfo=UTC),
                ),
                lineagesdk_trace=TraceRunFacet(
                    producer=PRODUCER,
                    trace_id="0af7651916cd43dd8448eb211c80319c",
                    span_id="b7ad6b7169203331",
                ),
                lineagesdk_heartbeat=HeartbeatRunFacet(producer=PRODUCER, interval_s=0.2),
            ),
        ),
        job=Job(
            namespace="ns",
            name="child",
            facets=JobFacets(
                job_type=JobTypeJobFacet(
                    producer=PRODUCER,
                    processing_type="BATCH",
                    integration="LINEAGE_SDK",
                    job_type="TASK",
                )
            ),
        ),
        inputs=[
            InputDataset(
                namespace="rabbitmq://broker:5672",
                name="orders",
                facets=DatasetFacets(
                    lineagesdk_messaging=MessagingDatasetFacet(
                        producer=PRODUCER,
                        system="rabbitmq",
                        destination="orders",
                        routing_key="created",
                        queue="billing",
                        consumer_tag="ctag1",
                    ),
                    data_source=DatasourceDatasetFacet(
                        producer=PRODUCER, name="broker", uri="amqp://broker:5672/%2F"
                    ),
                ),
            )
        ],
        outputs=[
            OutputDataset(
                namespace="postgres://db:5432",
                name="shop.public.orders",
                facets=DatasetFacets(
                    schema_=SchemaDatasetFacet(
                        producer=PRODUCER,
                        fields=[
                            SchemaField(name="id", type="int", ordinal_position=1),
                            SchemaField(
                                name="address",
                                type="struct",
                                fields=[SchemaField(name="zip", type="text")],
                            ),
                        ],
                    )
                ),
                output_facets=OutputDatasetFacets.model_validate(
                    {
                        "outputStatistics": {
                            "_producer": PRODUCER,
                            "_schemaURL": "https://openlineage.io/spec/facets/1-0-2/OutputStatisticsOutputDatasetFacet.json",
                            "rowCount": 10,
                        }
                    }
                ),
            )
        ],
    )


def test_model_built_event_with_every_typed_facet_conforms() -> None:
    event = to_dict(_full_model_event())
    conformance.validate_event(event)
    assert set(event["run"]["facets"]) == {
        "parent",
        "errorMessage",
        "processing_engine",
        "nominalTime",
        TRACE_FACET_KEY,
        HEARTBEAT_FACET_KEY,
    }
    assert MESSAGING_FACET_KEY in event["inputs"][0]["facets"]


def test_base_event_conforms() -> None:
    conformance.validate_event(run_event())


def _violations(event: dict[str, Any]) -> list[str]:
    problems: list[str] = conformance.event_violations(event)
    with pytest.raises(AssertionError):
        conformance.validate_event(event)
    return problems


def _mutated(path: list[Any], value: Any) -> dict[str, Any]:
    event = to_dict(_full_model_event())
    node = event
    for part in path[:-1]:
        node = node[part]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return event


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (["run", "runId"], "abc", "run.runId: 'abc' is not a 'uuid'"),
        (["run", "runId"], RUN_ID.replace("-", ""), "is not a 'uuid'"),
        (["producer"], "not a uri", "producer: 'not a uri' is not a 'uri'"),
        (
            ["eventTime"],
            "2024-05-01T12:00:00",
            "eventTime: '2024-05-01T12:00:00' is not a 'date-time'",
        ),
        (["eventTime"], "2024-05-01", "is not a 'date-time'"),
        (["eventType"], "BOGUS", "eventType: 'BOGUS' is not one of"),
        (["job", "name"], _DELETE, "job: 'name' is a required property"),
        (["run", "facets", "parent", "_schemaURL"], _DELETE, "missing _schemaURL"),
        (["run", "facets", "parent", "_producer"], _DELETE, "'_producer' is a required property"),
        (["run", "facets", "parent", "_producer"], "no uri", "'no uri' is not a 'uri'"),
        (
            ["run", "facets", "parent", "root", "run", "runId"],
            "nope",
            "run.facets.parent.root.run.runId",
        ),
        (
            ["run", "facets", "nominalTime", "nominalStartTime"],
            "2024-05-01T00:00:00",
            "is not a 'date-time'",
        ),
        (
            ["run", "facets", "errorMessage", "programmingLanguage"],
            _DELETE,
            "'programmingLanguage' is a required",
        ),
        (["run", "facets", TRACE_FACET_KEY, "traceId"], "XYZ", "'XYZ' does not match"),
        (["run", "facets", TRACE_FACET_KEY, "spanId"], _DELETE, "'spanId' is a required property"),
        (["run", "facets", HEARTBEAT_FACET_KEY, "intervalS"], 0, "0 is less than or equal"),
        (["run", "facets", HEARTBEAT_FACET_KEY, "intervalS"], "60", "'60' is not of type"),
        (
            ["run", "facets", HEARTBEAT_FACET_KEY, "intervalS"],
            _DELETE,
            "'intervalS' is a required property",
        ),
        (
            ["inputs", 0, "facets", MESSAGING_FACET_KEY, "system"],
            _DELETE,
            "'system' is a required property",
        ),
        (["inputs", 0, "facets", MESSAGING_FACET_KEY, "queue"], 5, "5 is not of type 'string'"),
        (["inputs", 0, "facets", "dataSource", "uri"], "not a uri", "is not a 'uri'"),
        (
            ["outputs", 0, "outputFacets", "outputStatistics", "rowCount"],
            "ten",
            "'ten' is not of type 'integer'",
        ),
        (
            ["job", "facets", "jobType", "integration"],
            _DELETE,
            "'integration' is a required property",
        ),
        (
            ["job", "facets", "jobType", "_schemaURL"],
            "https://example.com/mine.json",
            "resolves to no known schema",
        ),
        (
            ["job", "facets", "jobType", "_schemaURL"],
            "not a url at all",
            "resolves to no known schema",
        ),
        (
            ["job", "facets", "jobType", "_schemaURL"],
            "https://openlineage.io/spec/facets/1-0-0/SQLJobFacet.json",
            "does not define the facet key 'jobType'",
        ),
        (
            ["job", "facets", "jobType", "_schemaURL"],
            "https://openlineage.io/spec/facets/2-0-4/JobTypeJobFacet.json#/$defs/Nope",
            "fragment #/$defs/Nope does not exist",
        ),
        (
            ["schemaURL"],
            "https://openlineage.io/spec/1-0-5/OpenLineage.json#/$defs/RunEvent",
            "schemaURL: expected",
        ),
        (
            ["schemaURL"],
            "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
            "names JobEvent",
        ),
        (["schemaURL"], "https://example.com/schema", "is not an OpenLineage core schema URL"),
    ],
)
def test_broken_events_are_rejected(path: list[Any], value: Any, expected: str) -> None:
    problems = _violations(_mutated(path, value))
    assert any(expected in problem for problem in problems), problems


def test_every_violation_is_listed() -> None:
    event = _mutated(["run", "runId"], "abc")
    event["producer"] = "not a uri"
    event["job"]["facets"]["jobType"]["_schemaURL"] = "https://example.com/x.json"
    problems = conformance.event_violations(event)
    assert len(problems) == 3, problems
    with pytest.raises(AssertionError, match="3 problems"):
        conformance.validate_event(event)


def test_forwarded_facets_in_parent_are_checked() -> None:
    event = run_event()
    event["run"]["facets"]["parent"] = {
        "_producer": PRODUCER,
        "_schemaURL": _PARENT_URL,
        "run": {"runId": RUN_ID, "facets": {TRACE_FACET_KEY: _trace(spanId="short")}},
        "job": {"namespace": "n", "name": "p"},
    }
    problems = _violations(event)
    assert any(
        "run.facets.parent.run.facets" in p and "'short' does not match" in p for p in problems
    ), problems


def test_ambiguous_event_fails_the_exclusive_one_of() -> None:
    # Both dataset and job, no run: a DatasetEvent and a JobEvent at once.
    event = {
        "eventTime": "2024-05-01T12:00:00Z",
        "producer": PRODUCER,
        "schemaURL": DATASET_EVENT_SCHEMA_URL,
        "dataset": {"namespace": "n", "name": "d"},
        "job": {"namespace": "n", "name": "j"},
    }
    problems = _violations(event)
    assert any("exclusive" in p for p in problems), problems


def test_dataset_and_job_events_conform() -> None:
    base = {"eventTime": "2024-05-01T12:00:00Z", "producer": PRODUCER}
    conformance.validate_event(
        {**base, "schemaURL": DATASET_EVENT_SCHEMA_URL, "dataset": {"namespace": "n", "name": "d"}}
    )
    conformance.validate_event(
        {**base, "schemaURL": JOB_EVENT_SCHEMA_URL, "job": {"namespace": "n", "name": "j"}}
    )


def test_custom_facets_validate_against_our_schemas() -> None:
    assert conformance.facet_violations(TRACE_FACET_KEY, _trace()) == []
    messaging = {
        "_producer": PRODUCER,
        "_schemaURL": MESSAGING_FACET_SCHEMA_URL,
        "system": "rabbitmq",
    }
    assert conformance.facet_violations(MESSAGING_FACET_KEY, messaging) == []
    assert conformance.facet_violations(TRACE_FACET_KEY, _trace(traceId="0" * 33)) != []
    assert conformance.facet_violations(MESSAGING_FACET_KEY, {**messaging, "system": None}) != []
    schema_path = conformance.schema_path(TRACE_FACET_SCHEMA_URL)
    assert schema_path is not None
    assert schema_path.name == "TraceRunFacet.json"


def test_non_mapping_inputs_are_violations() -> None:
    assert conformance.event_violations([]) == ["(event): must be a JSON object, got list"]
    assert conformance.event_violations({"producer": PRODUCER}) != []
    assert conformance.facet_violations("x", 3) == ["x: a facet must be an object, got int"]


def test_formats_are_really_checked() -> None:
    checker = conformance.FORMAT_CHECKER
    assert not checker.conforms("2024-05-01T00:00:00", "date-time")
    assert checker.conforms("2024-05-01T00:00:00Z", "date-time")
    assert not checker.conforms("not a uri", "uri")
    assert not checker.conforms("abc", "uuid")


def test_schema_path_stays_inside_the_mirror() -> None:
    assert conformance.schema_path("https://openlineage.io/spec/2-0-2/OpenLineage.json") is not None
    assert conformance.schema_path("https://openlineage.io/spec/../README.md") is None
    assert conformance.schema_path("https://openlineage.io/spec/") is None
    assert conformance.schema_path("file:///etc/passwd") is None


def test_shared_dir_honours_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LINEAGE_SHARED_DIR", str(tmp_path))
    assert conformance.shared_dir.__wrapped__() == tmp_path.resolve()
    monkeypatch.delenv("LINEAGE_SHARED_DIR")
    found = conformance.shared_dir.__wrapped__()
    assert (found / "openlineage-spec" / "published").is_dir()
    assert found.name == "shared"


def test_validation_does_not_mutate_the_event() -> None:
    event = to_dict(_full_model_event())
    before = copy.deepcopy(event)
    conformance.validate_event(event)
    assert event == before


@pytest.mark.parametrize("interval", [0.2, 60, 0, -1, "60", True, None])
def test_heartbeat_facet_fast_check_agrees_with_the_models(interval: Any) -> None:
    from lineage_sdk.exceptions import InvalidEventError
    from lineage_sdk.models import HEARTBEAT_FACET_SCHEMA_URL, parse_event
    from lineage_sdk.models.fast import is_valid_event

    facet: dict[str, Any] = {"_producer": PRODUCER, "_schemaURL": HEARTBEAT_FACET_SCHEMA_URL}
    if interval is not None:
        facet["intervalS"] = interval
    event = run_event()
    event["run"]["facets"] = {HEARTBEAT_FACET_KEY: facet}
    good = interval in (0.2, 60) and interval is not True
    assert is_valid_event(event) is good
    if good:
        parse_event(event)
    else:
        with pytest.raises(InvalidEventError, match=HEARTBEAT_FACET_KEY):  # names what was wrong
            parse_event(event)
