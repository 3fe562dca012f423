"""``LineageSpanProcessor``: lineage spans in, OpenLineage events out, off the application thread.

A span is a lineage run when the SDK's own API started it (it hands its ``LineageRun`` over in a
thread-local slot, which costs nothing to look up) or when it carries the ``openlineage.job.name``
attribute (spans made with any tracer). ``on_start`` and ``on_end`` only queue small records
(:mod:`lineage_sdk.sdk.records`); the pipeline's encoder builds START, COMPLETE and FAIL events from
them on the worker thread.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

import uuid_utils
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.trace import StatusCode

from lineage_sdk.models.dataset import LineageDataset
from lineage_sdk.sdk.events import EventBuilder
from lineage_sdk.sdk.pipeline import BatchPipeline
from lineage_sdk.sdk.records import (
    ExcInfo,
    ExplicitEvent,
    LineageRecord,
    RunEnded,
    RunRunning,
    RunStarted,
)
from lineage_sdk.sdk.runs import CURRENT_RUN, LineageRun

__all__ = [
    "ATTR_JOB_NAME",
    "ATTR_JOB_NAMESPACE",
    "ATTR_RUN_ID",
    "RUN_HANDOFF",
    "LineageSpanProcessor",
    "handoff_run",
    "lineage_processor_for",
]

ATTR_JOB_NAME = "openlineage.job.name"
ATTR_JOB_NAMESPACE = "openlineage.job.namespace"
ATTR_RUN_ID = "openlineage.run.id"

# ``RUN_HANDOFF.run``: the LineageRun of the next span started on this thread. The SDK's own API
# sets it around ``start_span`` (an attribute write, cheaper than span attributes or a call).
RUN_HANDOFF = threading.local()
_handoff = RUN_HANDOFF


def handoff_run(run: LineageRun | None) -> None:
    """Give the next span started on this thread its ``LineageRun`` (the SDK API's fast path)."""
    _handoff.run = run


class LineageSpanProcessor(SpanProcessor):
    """Turns lineage spans into queued records for the pipeline it is attached to.

    There is one per TracerProvider (see :func:`lineage_processor_for`): configuring lineage
    again swaps the pipeline instead of adding a second processor, which would take every run's
    handoff first. Until a pipeline is attached, spans are ignored.
    """

    def __init__(self, default_namespace: str = "default") -> None:
        self._pipeline: BatchPipeline[LineageRecord] | None = None
        self._default_namespace = default_namespace
        self._active: dict[int, LineageRun] = {}

    def attach(self, pipeline: BatchPipeline[LineageRecord], default_namespace: str) -> None:
        """Send this provider's lineage to ``pipeline`` from now on (one reference swap)."""
        self._default_namespace = default_namespace
        self._pipeline = pipeline

    @property
    def pipeline(self) -> BatchPipeline[LineageRecord] | None:
        return self._pipeline

    # --- application thread ---------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        run: LineageRun | None = getattr(_handoff, "run", None)
        if run is not None:
            _handoff.run = None
        pipeline = self._pipeline
        if pipeline is None:
            return
        if run is None:
            run = self._run_from_attributes(span)
            if run is None:
                return
        ctx = span.get_span_context()
        run.trace_id = ctx.trace_id
        run.span_id = span_id = ctx.span_id
        self._active[span_id] = run
        pipeline.submit(RunStarted(run, span.start_time or 0, len(run.inputs), len(run.outputs)))

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.context
        if ctx is None:
            return
        run = self._active.pop(ctx.span_id, None)
        if run is None:
            return
        error: ExcInfo | None = run.error
        if error is None and span.status.status_code is StatusCode.ERROR:
            error = _error_from_span_events(span)
        self._submit(RunEnded(run, span.end_time or 0, run.inputs, run.outputs, error))

    def emit_running(
        self,
        run: LineageRun,
        time_ns: int,
        inputs: Sequence[LineageDataset],
        outputs: Sequence[LineageDataset],
        processing_type: str = "BATCH",
    ) -> None:
        """Queue a RUNNING event for a long run (streaming instrumentation passes STREAMING)."""
        self._submit(RunRunning(run, time_ns, tuple(inputs), tuple(outputs), processing_type))

    def emit_event(
        self, event_type: str, run: LineageRun, time_ns: int, builder: EventBuilder | None = None
    ) -> None:
        """Queue one event of ``event_type`` for ``run`` without a span (LineageProducer)."""
        self._submit(
            ExplicitEvent(event_type, run, time_ns, tuple(run.inputs), tuple(run.outputs), builder)
        )

    def active_run(self, span_id: int) -> LineageRun | None:
        """The run of the open span ``span_id``, or None: how instrumentation finds the run of a
        span another tracer started (it is not in ``current_run()``)."""
        return self._active.get(span_id)

    def active_run_count(self) -> int:
        """How many runs are open now (instrumentation skips its span lookup when none is)."""
        return len(self._active)

    def abort_run(self, span_id: int, time_ns: int) -> bool:
        """End the open run of span ``span_id`` as ABORT (it was abandoned: neither completed nor
        failed), so that its span's end later queues nothing more. False if no such run is open."""
        run = self._active.pop(span_id, None)
        if run is None:
            return False
        self._submit(
            ExplicitEvent("ABORT", run, time_ns, tuple(run.inputs), tuple(run.outputs), None)
        )
        return True

    def _submit(self, record: LineageRecord) -> None:
        pipeline = self._pipeline
        if pipeline is not None:
            pipeline.submit(record)

    def _run_from_attributes(self, span: Span) -> LineageRun | None:
        """A span made by any tracer is a lineage run if it names its job in its attributes."""
        attributes = span.attributes or {}
        job_name = attributes.get(ATTR_JOB_NAME)
        if not isinstance(job_name, str) or not job_name:
            return None
        namespace = attributes.get(ATTR_JOB_NAMESPACE)
        run_id = attributes.get(ATTR_RUN_ID)
        parent_run = CURRENT_RUN.get()
        parent_ctx = span.parent
        if parent_ctx is not None and parent_ctx.span_id in self._active:
            parent_run = self._active[parent_ctx.span_id]
        return LineageRun(
            run_id=run_id if isinstance(run_id, str) and run_id else str(uuid_utils.uuid7()),
            job_namespace=namespace
            if isinstance(namespace, str) and namespace
            else self._default_namespace,
            job_name=job_name,
            inputs=[],
            outputs=[],
            run_facets={},
            job_facets={},
            parent=parent_run.as_parent() if parent_run is not None else None,
        )

    # --- lifecycle ----------------------------------------------------------------------------

    def shutdown(self) -> None:
        """The provider is shutting down: so does the pipeline attached now (it may be shared)."""
        pipeline = self._pipeline
        if pipeline is not None:
            pipeline.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        pipeline = self._pipeline
        return True if pipeline is None else pipeline.force_flush(timeout_millis / 1000)


_PROCESSORS: weakref.WeakKeyDictionary[TracerProvider, LineageSpanProcessor] = (
    weakref.WeakKeyDictionary()
)
_PROCESSORS_LOCK = threading.Lock()


def lineage_processor_for(provider: TracerProvider) -> LineageSpanProcessor:
    """The provider's one lineage processor, added to it on first use."""
    with _PROCESSORS_LOCK:
        processor = _PROCESSORS.get(provider)
        if processor is None:
            processor = LineageSpanProcessor()
            provider.add_span_processor(processor)
            _PROCESSORS[provider] = processor
        return processor


class _SpanError(Exception):
    """Stands in for an exception known only from a span's ``exception`` event."""

    def __init__(self, type_name: str, message: str, stacktrace: str) -> None:
        super().__init__(message)
        self.lineage_type_name = type_name
        self.lineage_stacktrace = stacktrace


def _error_from_span_events(span: ReadableSpan) -> tuple[type[BaseException], BaseException, None]:
    for event in reversed(span.events):
        if event.name == "exception" and event.attributes:
            attrs = event.attributes
            err = _SpanError(
                str(attrs.get("exception.type", "Exception")),
                str(attrs.get("exception.message", "")),
                str(attrs.get("exception.stacktrace", "")),
            )
            return (_SpanError, err, None)
    description = span.status.description or "span ended with status ERROR"
    err = _SpanError("Error", description, "")
    return (_SpanError, err, None)
