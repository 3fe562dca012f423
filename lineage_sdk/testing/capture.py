"""``capture_lineage()``: record the events of a block of code in memory and hand them back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.sdk.exporters import InMemoryExporter
from lineage_sdk.sdk.provider import (
    _CONFIGURE_LOCK,
    STATE,
    LineageSDK,
    _disabled,
    _mark_disabled,
    _mark_enabled,
)

__all__ = ["CapturedLineage", "capture_lineage"]


class CapturedLineage:
    """The events captured so far; reading ``events`` waits for the worker to catch up."""

    def __init__(self, exporter: InMemoryExporter, sdk: LineageSDK) -> None:
        self.exporter = exporter
        self._sdk = sdk

    @property
    def events(self) -> list[dict[str, Any]]:
        self._sdk.force_flush(10.0)
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
    """Send lineage to memory inside the block; the previous setup is untouched and restored.

    ``config`` defaults to the current one (or the defaults), with the exporters replaced. The
    setup in place before the block keeps its own exporters and pipeline; it just records nothing
    while the block runs.
    """
    with _CONFIGURE_LOCK:
        previous = STATE.sdk
        was_disabled = _disabled.is_set()
        base = config or (previous.config if previous is not None else LineageConfig())
        exporter = InMemoryExporter()
        sdk = LineageSDK(
            base.model_copy(update={"enabled": True, "exporters": ["memory"]}), [exporter]
        )
        STATE.sdk = sdk
        _mark_enabled(sdk)
    try:
        yield CapturedLineage(exporter, sdk)
    finally:
        with _CONFIGURE_LOCK:
            if previous is not None:
                previous.activate()  # the processor of a shared provider goes back to it
            sdk.shutdown(10.0)  # the in-memory exporter keeps its events after shutdown
            STATE.sdk = previous
            if previous is not None:
                _mark_enabled(previous)
            elif was_disabled:
                _mark_disabled()
            else:
                _disabled.clear()  # not configured yet: the next run configures from the env
