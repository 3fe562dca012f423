"""Opening and closing a lineage run on the application thread: the hot path.

A ``RunScope`` starts the run's span (the processor queues START), makes the run current in both
the OpenTelemetry context and the lineage context while the code runs, and ends the span with the
outcome (the processor queues COMPLETE or FAIL). Nothing else happens on the caller's thread.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import uuid_utils
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Status, StatusCode

from lineage_sdk.models.dataset import LineageDataset
from lineage_sdk.sdk.processor import RUN_HANDOFF
from lineage_sdk.sdk.provider import LineageSDK
from lineage_sdk.sdk.runs import CURRENT_RUN, LineageRun, ParentRef

__all__ = ["RunScope"]

T = TypeVar("T")
_ERROR_STATUS = Status(StatusCode.ERROR)
_NO_PARENT: Any = object()


class RunScope:
    """One run's span and context. ``start`` once, ``activate``/``deactivate`` around each
    stretch of the run's own code (once for a function, once per step for a generator), then
    ``end`` once. ``call``/``acall`` do all three around one call: the sequence every wrapper of a
    function, a callback or a coroutine shares."""

    __slots__ = ("_ctx_token", "_run_token", "context", "run", "span")

    def __init__(
        self,
        sdk: LineageSDK,
        job_name: str,
        job_namespace: str | None,
        inputs: Sequence[LineageDataset],
        outputs: Sequence[LineageDataset],
        run_facets: Mapping[str, Any],
        job_facets: Mapping[str, Any],
        *,
        parent: ParentRef | None = _NO_PARENT,
        parent_context: Context | None = None,
        span_name: str | None = None,
        span_kind: trace.SpanKind = trace.SpanKind.INTERNAL,
        span_attributes: Mapping[str, Any] | None = None,
    ) -> None:
        if parent is _NO_PARENT:
            enclosing = CURRENT_RUN.get()
            parent = enclosing.as_parent() if enclosing is not None else None
        namespace = job_namespace or sdk.job_namespace
        run = LineageRun(
            str(uuid_utils.uuid7()),
            namespace,
            job_name,
            tuple(inputs),  # no copy for the decorator's tuples; see LineageRun
            tuple(outputs),
            run_facets,
            job_facets,
            parent,
        )
        # No lineage attributes by default: each costs ~1.3 µs in the OpenTelemetry SDK, and the
        # run already records its trace and span id in the lineagesdk_trace facet.
        RUN_HANDOFF.run = run
        try:
            # Positional: keyword parsing is measurable on this path (name, context, kind, attrs).
            span = sdk.tracer.start_span(
                span_name or job_name, parent_context, span_kind, span_attributes
            )
        finally:
            RUN_HANDOFF.run = None
        self.run = run
        self.span = span
        self.context = trace.set_span_in_context(span, parent_context)
        # _ctx_token and _run_token are set by activate(), which always comes before deactivate().

    def activate(self) -> None:
        self._ctx_token: Any = otel_context.attach(self.context)
        self._run_token: Any = CURRENT_RUN.set(self.run)

    def deactivate(self) -> None:
        CURRENT_RUN.reset(self._run_token)
        otel_context.detach(self._ctx_token)

    def end(self, error: BaseException | None = None) -> None:
        """End the run: COMPLETE, or FAIL with ``error`` (its traceback is formatted later)."""
        if error is not None:
            self.run.error = (type(error), error, error.__traceback__)
            self.span.set_status(_ERROR_STATUS)
        self.span.end()

    def call(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``func(*args, **kwargs)`` as this run: current while it runs, then ended with what it
        raised (FAIL) or COMPLETE; the exception reaches the caller unchanged."""
        self.activate()
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            self.deactivate()
            self.end(exc)
            raise
        self.deactivate()
        self.end()
        return result

    async def acall(self, func: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """``await func(*args, **kwargs)`` as this run (see ``call``). The run stays current
        across the awaits: they run in the awaiting task's context."""
        self.activate()
        try:
            result = await func(*args, **kwargs)
        except BaseException as exc:
            self.deactivate()
            self.end(exc)
            raise
        self.deactivate()
        self.end()
        return result
