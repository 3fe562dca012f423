"""A flag that keeps the lineage pipeline's own traffic out of auto-instrumentation.

The worker thread sets it for its whole life, so the RabbitMQ exporter's publishes are never seen
by the pika instrumentor; anything else that must stay invisible can use the context manager.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

__all__ = ["is_instrumentation_suppressed", "suppress_instrumentation"]

_SUPPRESSED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "lineage_sdk_suppress_instrumentation", default=False
)


def is_instrumentation_suppressed() -> bool:
    """True inside the pipeline's worker or a ``suppress_instrumentation()`` block."""
    return _SUPPRESSED.get()


@contextlib.contextmanager
def suppress_instrumentation() -> Iterator[None]:
    """Hide what runs inside from every instrumentor."""
    token = _SUPPRESSED.set(True)
    try:
        yield
    finally:
        _SUPPRESSED.reset(token)


def suppress_for_current_thread() -> None:
    """Set the flag for the rest of this thread; used once by the worker thread at start."""
    _SUPPRESSED.set(True)
