"""LineageSpanProcessor: the SDK's own provider, an application's provider, and sampling."""

from __future__ import annotations

import contextlib
import time

import orjson
import pytest
from conformance import validate_event
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from sdk_helpers import flushed_events

import lineage_sdk
from lineage_sdk import LineageDataset, LineageProducer, current_run, track_lineage
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.sdk.events import EventBuilder, encode_event
from lineage_sdk.sdk.exporters import InMemoryExporter
from lineage_sdk.sdk.processor import ATTR_JOB_NAME, ATTR_JOB_NAMESPACE, ATTR_RUN_ID
from lineage_sdk.sdk.runs import LineageRun, ParentRef


def test_lineage_is_recorded_under_an_unsampled_application_trace(memory_exporter):
    app_provider = TracerProvider(sampler=ALWAYS_OFF, shutdown_on_exit=False)
    app_tracer = app_provider.get_tracer("app")

    @track_lineage(job_name="sampled_out_app")
    def work() -> None:
        return None

    with app_tracer.start_as_current_span("request") as app_span:
        assert not app_span.is_recording()
        work()
        app_trace_id = app_span.get_span_context().trace_id
    events = flushed_events(memory_exporter)
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    # The lineage run nests in the application's trace, although that trace is not sampled.
    assert events[0]["run"]["facets"]["lineagesdk_trace"]["traceId"] == format(app_trace_id, "032x")


def test_processor_on_the_applications_own_provider():
    app_provider = TracerProvider(shutdown_on_exit=False)
    exporter = InMemoryExporter()
    sdk = lineage_sdk.configure(
        LineageConfig(exporters=["memory"]),
        exporters=[exporter],
        tracer_provider=app_provider,
        strict=True,
    )
    try:
        assert sdk is not None and sdk.tracer_provider is app_provider and not sdk.owns_provider
        app_tracer = app_provider.get_tracer("app")

        @track_lineage(job_name="via_app_provider", outputs=[LineageDataset("s3://b", "k")])
        def work() -> None:
            return None

        # Plain application spans are not lineage runs and produce nothing.
        with app_tracer.start_as_current_span("plain"):
            work()
        # Any tracer can make a lineage run by naming the job in the span's attributes.
        with (
            app_tracer.start_as_current_span(
                "manual",
                attributes={
                    ATTR_JOB_NAME: "manual_job",
                    ATTR_JOB_NAMESPACE: "manual-ns",
                    ATTR_RUN_ID: "01890a5d-ac96-774b-bcce-b302099a8057",
                },
            ),
            app_tracer.start_as_current_span("child", attributes={ATTR_JOB_NAME: "manual_child"}),
        ):
            pass
        with (
            pytest.raises(ZeroDivisionError),
            app_tracer.start_as_current_span(
                "manual_fail", attributes={ATTR_JOB_NAME: "manual_fail"}
            ),
        ):
            1 / 0  # noqa: B018
        events = flushed_events(exporter)
    finally:
        lineage_sdk.shutdown()
    names = [(e["job"]["name"], e["eventType"]) for e in events]
    assert names == [
        ("via_app_provider", "START"),
        ("via_app_provider", "COMPLETE"),
        ("manual_job", "START"),
        ("manual_child", "START"),
        ("manual_child", "COMPLETE"),
        ("manual_job", "COMPLETE"),
        ("manual_fail", "START"),
        ("manual_fail", "FAIL"),
    ]
    manual = events[2]
    assert manual["job"]["namespace"] == "manual-ns"
    assert manual["run"]["runId"] == "01890a5d-ac96-774b-bcce-b302099a8057"
    assert events[3]["run"]["facets"]["parent"]["run"]["runId"] == manual["run"]["runId"]
    fail = events[7]["run"]["facets"]["errorMessage"]
    assert fail["message"].startswith("ZeroDivisionError")
    assert "1 / 0" in fail["stackTrace"]
    for event in events:
        validate_event(event)


def test_fast_encoder_matches_the_dict_path_byte_for_byte():
    builder = EventBuilder("https://example.com/producer")
    parent = ParentRef(
        "01890a5d-ac96-774b-bcce-b302099a8057",
        "ns",
        "parent",
        ParentRef("01890a5d-ac96-774b-bcce-b302099a8058", "ns", "root"),
    )
    ds_facets = {
        "schema": {
            "_producer": "https://example.com/p",
            "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
            "fields": [{"name": "id", "type": "int"}],
        }
    }
    inputs = [
        LineageDataset("postgres://h:5432", "db.s.t", ds_facets),
        LineageDataset("kafka://k:9092", "topic"),
    ]
    outputs = [LineageDataset("s3://b", 'k/ü/"quoted"'), LineageDataset("s3://b", 'k/ü/"quoted"')]
    run = LineageRun(
        "01890a5d-ac96-774b-bcce-b302099a8059", "ns", "job", inputs, outputs, {}, {}, parent
    )
    run.trace_id, run.span_id = 0x1234, 0x42
    now = time.time_ns()
    try:
        raise ValueError("boom")
    except ValueError as exc:
        error = exc
    for event_type, kwargs in [
        ("START", {}),
        ("COMPLETE", {}),
        ("RUNNING", {}),
        ("FAIL", {"error": error, "error_traceback": error.__traceback__}),
    ]:
        fast = builder.encode_run_event(event_type, run, now, inputs, outputs, **kwargs)
        slow = encode_event(builder.run_event(event_type, run, now, inputs, outputs, **kwargs))
        assert fast == slow
        event = orjson.loads(fast.payload)
        assert len(event["outputs"]) == 1  # a dataset named twice is one dataset
        validate_event(event)


async def test_lineage_producer_events_conform(memory_exporter):
    producer = LineageProducer(
        producer_uri="https://github.com/acme/orders-service", job_namespace="orders"
    )
    run_id = await producer.record_consumption(
        "START", "ingest", inputs=[LineageDataset("kafka://k:9092", "orders")]
    )
    same = producer.record_consumption_sync(
        "COMPLETE", "ingest", run_id=run_id, outputs=[LineageDataset("s3://lake", "orders")]
    )
    assert same == run_id
    for event_type in ("RUNNING", "ABORT", "FAIL", "OTHER"):
        producer.record_consumption_sync(event_type, "other_job", job_namespace="elsewhere")
    msg_run = await producer.record_message_consumption(
        "orders.created", "billing-consumers", "kafka://k:9092"
    )

    @track_lineage(job_name="outer")
    def outer() -> str:
        return producer.record_message_consumption_sync("t", "g", "rabbitmq://h:5672") or ""

    nested_run = outer()
    events = flushed_events(memory_exporter)
    for event in events:
        validate_event(event)
    ingest = [e for e in events if e["job"]["name"] == "ingest"]
    assert [e["eventType"] for e in ingest] == ["START", "COMPLETE"]
    assert {e["producer"] for e in ingest} == {"https://github.com/acme/orders-service"}
    assert ingest[0]["job"]["namespace"] == "orders"
    other = [e for e in events if e["job"]["name"] == "other_job"]
    assert [e["eventType"] for e in other] == ["RUNNING", "ABORT", "FAIL", "OTHER"]
    assert {e["job"]["namespace"] for e in other} == {"elsewhere"}
    (consumption,) = [e for e in events if e["run"]["runId"] == msg_run]
    assert consumption["job"]["name"] == "billing-consumers"
    assert consumption["inputs"] == [
        {"namespace": "kafka://k:9092", "name": "orders.created", "facets": {}}
    ]
    (nested,) = [e for e in events if e["run"]["runId"] == nested_run]
    assert nested["run"]["facets"]["parent"]["job"]["name"] == "outer"
    with pytest.raises(ValueError, match="event_type must be one of"):
        producer.record_consumption_sync("DONE", "x")  # type: ignore[arg-type]


def test_every_event_kind_the_sdk_makes_conforms(memory_exporter):
    """One of each: START/COMPLETE/FAIL, nested with root, RUNNING, runtime datasets, facets."""
    sdk = lineage_sdk.get_sdk()
    assert sdk is not None

    @track_lineage(job_name="child", inputs=[LineageDataset("postgres://h:5432", "db.s.t")])
    def child() -> None:
        current_run().add_run_facets(
            {
                "externalQuery": {
                    "_producer": "https://x",
                    "_schemaURL": "https://openlineage.io/spec/facets/1-0-2/ExternalQueryRunFacet.json#/$defs/ExternalQueryRunFacet",
                    "externalQueryId": "q1",
                    "source": "bigquery",
                }
            }
        )
        raise RuntimeError("child failed")

    @track_lineage(job_name="parent")
    def parent() -> None:
        run = current_run()
        assert isinstance(run, LineageRun)
        sdk.processor.emit_running(
            run, time.time_ns(), run.inputs, [LineageDataset("s3://b", "partial")]
        )
        with contextlib.suppress(RuntimeError):
            child()

    parent()
    events = flushed_events(memory_exporter)
    kinds = sorted((e["job"]["name"], e["eventType"]) for e in events)
    assert kinds == [
        ("child", "FAIL"),
        ("child", "START"),
        ("parent", "COMPLETE"),
        ("parent", "RUNNING"),
        ("parent", "START"),
    ]
    for event in events:
        validate_event(event)
    trace.get_tracer_provider()  # the global provider is untouched by lineage_sdk


def test_sdk_facet_urls_agree_with_the_models():
    """The worker keeps its own copies of the URLs so that recording never imports pydantic models."""
    from lineage_sdk import models
    from lineage_sdk.sdk import events

    assert events.OPENLINEAGE_RUN_EVENT_SCHEMA_URL == models.RUN_EVENT_SCHEMA_URL
    assert events.PARENT_FACET_URL == models.ParentRunFacet.SCHEMA_URL
    assert events.ERROR_MESSAGE_FACET_URL == models.ErrorMessageRunFacet.SCHEMA_URL
    assert events.JOB_TYPE_FACET_URL == models.JobTypeJobFacet.SCHEMA_URL
    assert events.PROCESSING_ENGINE_FACET_URL == models.ProcessingEngineRunFacet.SCHEMA_URL
    assert events.TRACE_FACET_URL == models.TRACE_FACET_SCHEMA_URL
    assert events.TRACE_FACET_KEY == models.TRACE_FACET_KEY


@pytest.mark.parametrize("with_trace", [True, False])
@pytest.mark.parametrize("with_parent", [True, False])
def test_fast_encoder_matches_the_dict_path_with_or_without_trace_and_parent(
    with_trace, with_parent
):
    """The run's common facets are spliced from a template: every combination, byte for byte."""
    builder = EventBuilder("https://example.com/producer")
    parent = ParentRef("01890a5d-ac96-774b-bcce-b302099a8057", "ns", "parent")
    run = LineageRun(
        "01890a5d-ac96-774b-bcce-b302099a8059",
        "ns",
        "job",
        [LineageDataset("s3://b", "in")],
        [],
        {},
        {},
        parent if with_parent else None,
    )
    if with_trace:
        run.trace_id, run.span_id = 0x0123456789ABCDEF0123456789ABCDEF, 0x1
    now = 1_764_500_000_123_456_789
    for event_type in ("START", "COMPLETE", "RUNNING"):
        fast = builder.encode_run_event(event_type, run, now, run.inputs, run.outputs)
        slow = encode_event(builder.run_event(event_type, run, now, run.inputs, run.outputs))
        assert fast == slow
        validate_event(orjson.loads(fast.payload))
