"""The exporter contract: what the batch pipeline hands to an exporter, and what it gets back."""

from __future__ import annotations

import abc
import enum
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["EncodedEvent", "ExportResult", "LineageExporter"]


class ExportResult(enum.Enum):
    """Outcome of one ``export`` call; the pipeline counts failures and never raises them."""

    SUCCESS = 0
    FAILURE = 1


class EncodedEvent(NamedTuple):
    """One OpenLineage event, already serialized off the application thread.

    ``payload`` is the event as JSON bytes (orjson, keys sorted, so equal events have equal bytes);
    ``event_id`` identifies the event (for a RunEvent: run id, event type and time), so a consumer
    can drop a redelivered duplicate.
    The other fields are copies from the event that exporters use for routing and headers.
    A NamedTuple because the worker makes two per decorated call: it is the cheapest immutable
    record Python has.
    """

    payload: bytes
    event_id: str
    event_type: str
    event_time: str
    job_namespace: str
    job_name: str
    run_id: str | None
    producer: str
    schema_url: str


class LineageExporter(abc.ABC):
    """Sends encoded events somewhere. Called only from the pipeline's worker thread."""

    @abc.abstractmethod
    def export(self, batch: Sequence[EncodedEvent]) -> ExportResult:
        """Deliver ``batch``; must not raise (the pipeline treats a raise as FAILURE)."""

    def force_flush(self, timeout: float = 30.0) -> bool:
        """Block until buffered events are delivered or ``timeout`` seconds pass."""
        return True

    @abc.abstractmethod
    def shutdown(self, timeout: float = 30.0) -> None:
        """Release resources; called once, after the last ``export``."""
