"""``LineageSpanProcessor``: lineage spans in, OpenLineage events out, off the application thread.

A span is a lineage run when the SDK's own API started it (it hands its ``LineageRun`` over in a
thread-local slot, which costs nothing to look up) or when it carries the ``openlineage.job.name``
attribute (spans made with any tracer). ``on_start`` and ``on_end`` only queue references; the
worker builds START, COMPLETE and FAIL events from them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import uuid_utils
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode

from lineage_sdk.api.dataset import LineageDataset
from lineage_sdk.sdk.events import EventBuilder
from lineage_sdk.sdk.export import EncodedEvent
from lineage_sdk.sdk.pipeline import BatchPipeline
from lineage_sdk.sdk.runs import CURRENT_RUN, LineageRun

__all__ = [
    "ATTR_JOB_NAME",
    "ATTR_JOB_NAMESPACE",
    "ATTR_RUN_ID",
    "LineageSpanProcessor",
    "handoff_run",
]

ATTR_JOB_NAME = "openlineage.job.name"
ATTR_JOB_NAMESPACE = "openlineage.job.namespace"
ATTR_RUN_ID = "openlineage.run.id"

_handoff = threading.local()

# Queue items: (kind, run, time_ns, inputs, outputs, extra); kind 0 = start, 1 = end, 2 = running,
# 3 = one explicit event (extra = (eventType, EventBuilder)) from LineageProducer.
_START, _END, _RUNNING, _EXPLICIT = 0, 1, 2, 3
# For START, inputs/outputs are the counts of the run's datasets at start instead of the lists.
_Item = tuple[int, LineageRun, int, Any, Any, Any]


def handoff_run(run: LineageRun | None) -> None:
    """Give the next span started on this thread its ``LineageRun`` (the SDK API's fast path)."""
    _handoff.run = run


class LineageSpanProcessor(SpanProcessor):
    """Turns lineage spans into OpenLineage RunEvents; add it to any TracerProvider."""

    def __init__(
        self, pipeline: BatchPipeline[Any], builder: EventBuilder, default_namespace: str
    ) -> None:
        self._pipeline = pipeline
        self._builder = builder
        self._default_namespace = default_namespace
        self._active: dict[int, LineageRun] = {}

    # --- application thread ---------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        run: LineageRun | None = getattr(_handoff, "run", None)
        if run is not None:
            _handoff.run = None
        else:
            run = self._run_from_attributes(span)
            if run is None:
                return
        ctx = span.get_span_context()
        run.trace_id = ctx.trace_id
        run.span_id = ctx.span_id
        self._active[ctx.span_id] = run
        # Datasets are only ever appended, so their counts now mark what START reports.
        self._pipeline.submit(
            (_START, run, span.start_time or 0, len(run.inputs), len(run.outputs), None)
        )

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.context
        if ctx is None:
            return
        run = self._active.pop(ctx.span_id, None)
        if run is None:
            return
        error: Any = run.error
        if error is None and span.status.status_code is StatusCode.ERROR:
            error = _error_from_span_events(span)
        self._pipeline.submit((_END, run, span.end_time or 0, run.inputs, run.outputs, error))

    def emit_running(
        self,
        run: LineageRun,
        time_ns: int,
        inputs: Sequence[LineageDataset],
        outputs: Sequence[LineageDataset],
        processing_type: str = "BATCH",
    ) -> None:
        """Queue a RUNNING event for a long run (streaming instrumentation passes STREAMING)."""
        self._pipeline.submit(
            (_RUNNING, run, time_ns, tuple(inputs), tuple(outputs), processing_type)
        )

    def emit_event(
        self, event_type: str, run: LineageRun, time_ns: int, builder: EventBuilder | None = None
    ) -> None:
        """Queue one event of ``event_type`` for ``run`` without a span (LineageProducer)."""
        self._pipeline.submit(
            (
                _EXPLICIT,
                run,
                time_ns,
                tuple(run.inputs),
                tuple(run.outputs),
                (event_type, builder or self._builder),
            )
        )

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

    # --- worker thread ----------------------------------------------------------------------

    def encode(self, item: _Item) -> Sequence[EncodedEvent]:
        """The pipeline's encoder: one queued record to one encoded event."""
        kind, run, time_ns, inputs, outputs, extra = item
        if kind == _START:
            return (
                self._builder.encode_run_event(
                    "START", run, time_ns, run.inputs[:inputs], run.outputs[:outputs]
                ),
            )
        if kind == _RUNNING:
            return (
                self._builder.encode_run_event(
                    "RUNNING", run, time_ns, inputs, outputs, processing_type=extra
                ),
            )
        if kind == _EXPLICIT:
            event_type, builder = extra
            return (builder.encode_run_event(event_type, run, time_ns, inputs, outputs),)
        if extra is None:
            return (self._builder.encode_run_event("COMPLETE", run, time_ns, inputs, outputs),)
        _, exc, tb = extra
        return (
            self._builder.encode_run_event(
                "FAIL", run, time_ns, inputs, outputs, error=exc, error_traceback=tb
            ),
        )

    # --- lifecycle ----------------------------------------------------------------------------

    def shutdown(self) -> None:
        self._pipeline.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._pipeline.force_flush(timeout_millis / 1000)


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
