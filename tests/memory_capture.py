"""Events an in-memory exporter received, flushed and validated: one copy for the fixtures of
tests/instrumentation and tests/instrumentation_db (a module of its own: helpers are never
imported from a conftest)."""

from __future__ import annotations

from typing import Any

from conformance import validate_event

from lineage_sdk.sdk.exporters import InMemoryExporter
from lineage_sdk.sdk.provider import STATE

__all__ = ["CapturedEvents"]


class CapturedEvents:
    """What ``exporter`` received; each folder's ``Captured`` adds its own views."""

    def __init__(self, exporter: InMemoryExporter) -> None:
        self.exporter = exporter

    def events(self) -> list[dict[str, Any]]:
        """Every event so far, each validated against the OpenLineage schemas."""
        assert STATE.sdk is not None
        assert STATE.sdk.force_flush(10.0)
        events = list(self.exporter.events)
        for event in events:
            validate_event(event)
        return events
