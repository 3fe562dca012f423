"""``capture_lineage()``: record the events of a block of code in memory and hand them back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.sdk.exporters import InMemoryExporter
from lineage_sdk.sdk.provider import STATE, configure, shutdown

__all__ = ["CapturedLineage", "capture_lineage"]


class CapturedLineage:
    """The events captured so far; reading ``events`` waits for the worker to catch up."""

    def __init__(self, exporter: InMemoryExporter) -> None:
        self.exporter = exporter

    @property
    def events(self) -> list[dict[str, Any]]:
        sdk = STATE.sdk
        if sdk is not None:
            sdk.force_flush(10.0)
        return self.exporter.events

    def of_type(self, event_type: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("eventType") == event_type]

    def runs(self, job_name: str) -> list[dict[str, Any]]:
        """Events of one job, in the order they were recorded."""
        return [e for e in self.events if e.get("job", {}).get("name") == job_name]

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.events)


@contextlib.contextmanager
def capture_lineage(config: LineageConfig | None = None) -> Iterator[CapturedLineage]:
    """Send lineage to memory inside the block; the previous setup is restored afterwards.

    ``config`` defaults to the current one (or the defaults), with the exporters replaced.
    """
    previous = STATE.sdk
    previous_config = previous.config if previous is not None else None
    base = config or previous_config or LineageConfig()
    exporter = InMemoryExporter()
    configure(
        base.model_copy(update={"enabled": True, "exporters": ["memory"]}),
        exporters=[exporter],
        strict=True,
    )
    captured = CapturedLineage(exporter)
    try:
        yield captured
    finally:
        if STATE.sdk is not None:
            STATE.sdk.force_flush(10.0)
        shutdown(10.0)  # the in-memory exporter keeps its events after shutdown
        if previous_config is not None:
            configure(previous_config)
