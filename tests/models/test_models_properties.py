"""Property tests: generated events round-trip losslessly; built events always conform."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import conformance
import orjson
from _model_helpers import normalise
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage_sdk.models import (
    DATASET_EVENT_SCHEMA_URL,
    JOB_EVENT_SCHEMA_URL,
    RUN_EVENT_SCHEMA_URL,
    DatasetFacets,
    ErrorMessageRunFacet,
    EventType,
    InputDataset,
    Job,
    JobFacets,
    JobTypeJobFacet,
    MessagingDatasetFacet,
    OutputDataset,
    ParentJob,
    ParentRoot,
    ParentRun,
    ParentRunFacet,
    Run,
    RunEvent,
    RunFacets,
    TraceRunFacet,
    event_id,
    parse_event,
    to_dict,
)

# Deterministic: the same examples on every run and machine.
SETTINGS = settings(
    derandomize=True,
    database=None,
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)
_keys = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=12)
_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
)
_json = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=8,
)
_uri = st.from_regex(r"https://[a-z]{1,10}\.example/[a-z0-9/._-]{0,16}", fullmatch=True)
_offsets = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(
    lambda m: timezone(timedelta(minutes=m))
)
_aware = st.datetimes(
    min_value=datetime(1970, 1, 2),
    max_value=datetime(2200, 1, 1),
    timezones=st.just(UTC) | _offsets,
)
_time_text = st.one_of(
    _aware.map(lambda d: d.isoformat()),
    _aware.map(lambda d: d.isoformat().replace("+00:00", "Z")),
)
_hex = "0123456789abcdef"


def _extras(reserved: set[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(_keys.filter(lambda k: k not in reserved), _json, max_size=2)


@st.composite
def _raw_facet(draw: st.DrawFn) -> dict[str, Any]:
    facet = draw(_extras({"_producer", "_schemaURL", "_deleted"}))
    facet["_producer"] = draw(_uri)
    facet["_schemaURL"] = draw(_uri)
    return facet


@st.composite
def _parent(draw: st.DrawFn) -> dict[str, Any]:
    facet: dict[str, Any] = {
        "_producer": draw(_uri),
        "_schemaURL": ParentRunFacet.SCHEMA_URL,
        "run": {"runId": str(draw(st.uuids()))},
        "job": {"namespace": draw(_text), "name": draw(_text)},
    }
    if draw(st.booleans()):
        facet["root"] = {
            "run": {"runId": str(draw(st.uuids()))},
            "job": {"namespace": draw(_text), "name": draw(_text)},
        }
    facet.update(draw(_extras({"_producer", "_schemaURL", "run", "job", "root"})))
    return facet


@st.composite
def _known_run_facets(draw: st.DrawFn) -> dict[str, Any]:
    producer = draw(_uri)
    options: dict[str, Any] = {
        "parent": draw(_parent()),
        "errorMessage": {
            "_producer": producer,
            "_schemaURL": ErrorMessageRunFacet.SCHEMA_URL,
            "message": draw(_text),
            "programmingLanguage": "python",
            **({"stackTrace": draw(_text)} if draw(st.booleans()) else {}),
        },
        "nominalTime": {
            "_producer": producer,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/NominalTimeRunFacet.json",
            "nominalStartTime": draw(_time_text),
            "unknownField": draw(_json),
        },
        "lineagesdk_trace": {
            "_producer": producer,
            "_schemaURL": TraceRunFacet.SCHEMA_URL,
            "traceId": draw(st.text(_hex, min_size=32, max_size=32)),
            "spanId": draw(st.text(_hex, min_size=16, max_size=16)),
        },
    }
    chosen = draw(st.lists(st.sampled_from(sorted(options)), unique=True))
    return {key: options[key] for key in chosen}


def _facets(known: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    unknown = st.dictionaries(_keys.filter(lambda k: k.startswith("x_")), _raw_facet(), max_size=2)
    return st.builds(lambda a, b: {**b, **a}, known, unknown)


_no_known: st.SearchStrategy[dict[str, Any]] = st.just({})


@st.composite
def _dataset(draw: st.DrawFn, side: str | None) -> dict[str, Any]:
    dataset: dict[str, Any] = {"namespace": draw(_text), "name": draw(_text)}
    if draw(st.booleans()):
        dataset["facets"] = draw(_facets(_no_known))
    if side is not None and draw(st.booleans()):
        dataset[side] = draw(_facets(_no_known))
    dataset.update(draw(_extras({"namespace", "name", "facets", "inputFacets", "outputFacets"})))
    return dataset


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["run", "dataset", "job"]))
    event: dict[str, Any] = {"eventTime": draw(_time_text), "producer": draw(_uri)}
    job: dict[str, Any] = {"namespace": draw(_text), "name": draw(_text)}
    if draw(st.booleans()):
        job["facets"] = draw(_facets(_no_known))
    if kind == "run":
        event["schemaURL"] = RUN_EVENT_SCHEMA_URL
        if draw(st.booleans()):
            event["eventType"] = draw(st.sampled_from([e.value for e in EventType]))
        run: dict[str, Any] = {"runId": str(draw(st.uuids()))}
        if draw(st.booleans()):
            run["facets"] = draw(_facets(_known_run_facets()))
        event["run"] = run
        event["job"] = job
    elif kind == "dataset":
        event["schemaURL"] = DATASET_EVENT_SCHEMA_URL
        event["dataset"] = draw(_dataset(None))
    else:
        event["schemaURL"] = JOB_EVENT_SCHEMA_URL
        event["job"] = job
    if kind != "dataset":
        for side, extra in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
            if draw(st.booleans()):
                event[side] = draw(st.lists(_dataset(extra), max_size=2))
    reserved = {
        "eventTime",
        "producer",
        "schemaURL",
        "eventType",
        "run",
        "job",
        "dataset",
        "inputs",
        "outputs",
    }
    event.update(draw(_extras(reserved)))
    return event


@SETTINGS
@given(events())
def test_generated_events_round_trip_losslessly(event: dict[str, Any]) -> None:
    from_bytes = parse_event(orjson.dumps(event))
    from_mapping = parse_event(event)
    assert normalise(to_dict(from_bytes)) == normalise(event)
    assert to_dict(from_mapping) == to_dict(from_bytes)
    again = to_dict(parse_event(orjson.dumps(to_dict(from_bytes))))
    assert again == to_dict(from_bytes)  # a fixed point after one round


@SETTINGS
@given(events(), st.randoms(use_true_random=False))
def test_event_id_does_not_depend_on_key_order(event: dict[str, Any], random: Any) -> None:
    def shuffled(value: Any) -> Any:
        if isinstance(value, dict):
            items = list(value.items())
            random.shuffle(items)
            return {key: shuffled(item) for key, item in items}
        if isinstance(value, list):
            return [shuffled(item) for item in value]
        return value

    assert event_id(shuffled(event)) == event_id(event)


def _uuid7(bits: int) -> uuid.UUID:
    """A UUID with version 7 and the RFC 4122 variant (stdlib 3.11 cannot make one)."""
    bits = (bits & ~(0xF << 76)) | (0x7 << 76)
    bits = (bits & ~(0x3 << 62)) | (0x2 << 62)
    return uuid.UUID(int=bits)


@st.composite
def built_events(draw: st.DrawFn) -> RunEvent:
    """Events built from the typed models the way the SDK builds them."""
    producer = draw(_uri)
    names = st.text(
        st.characters(codec="utf-8", exclude_characters="\x00"),
        min_size=1,
        max_size=20,
    )
    parent = None
    if draw(st.booleans()):
        root = ParentRun(run_id=draw(st.uuids()))
        parent = ParentRunFacet(
            producer=producer,
            run=ParentRun(run_id=draw(st.uuids())),
            job=ParentJob(namespace=draw(names), name=draw(names)),
            root=ParentRoot(run=root, job=ParentJob(namespace=draw(names), name=draw(names))),
        )
    error = None
    if draw(st.booleans()):
        error = ErrorMessageRunFacet(
            producer=producer,
            message=draw(names),
            programming_language="python",
            stack_trace=draw(st.none() | names),
        )
    trace = TraceRunFacet(
        producer=producer,
        trace_id=draw(st.text(_hex, min_size=32, max_size=32)),
        span_id=draw(st.text(_hex, min_size=16, max_size=16)),
    )
    messaging = MessagingDatasetFacet(
        producer=producer,
        system="rabbitmq",
        destination=draw(st.none() | st.just("") | names),
        routing_key=draw(st.none() | names),
        queue=draw(st.none() | names),
        consumer_tag=draw(st.none() | names),
    )
    return RunEvent(
        event_time=draw(_aware),
        producer=producer,
        event_type=draw(st.sampled_from(list(EventType))),
        run=Run(
            run_id=_uuid7(draw(st.integers(0, 2**128 - 1))),
            facets=RunFacets(parent=parent, error_message=error, lineagesdk_trace=trace),
        ),
        job=Job(
            namespace=draw(names),
            name=draw(names),
            facets=JobFacets(
                job_type=JobTypeJobFacet(
                    producer=producer, processing_type="BATCH", integration="LINEAGE_SDK"
                )
            ),
        ),
        inputs=[
            InputDataset(
                namespace="rabbitmq://broker:5672",
                name=draw(names),
                facets=DatasetFacets(lineagesdk_messaging=messaging),
            )
        ],
        outputs=draw(st.none() | st.just([OutputDataset(namespace="file", name="/tmp/x")])),
    )


@settings(derandomize=True, database=None, max_examples=40, deadline=None)
@given(built_events())
def test_events_built_from_models_conform(event: RunEvent) -> None:
    data = to_dict(event)
    conformance.validate_event(data)
    assert to_dict(parse_event(orjson.dumps(data))) == data
