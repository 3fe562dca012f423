"""Helpers for the SDK tests (a module of its own: every test folder has a conftest.py)."""

from __future__ import annotations

from typing import Any

import lineage_sdk
from lineage_sdk.sdk.exporters import InMemoryExporter


def flushed_events(exporter: InMemoryExporter) -> list[dict[str, Any]]:
    """Wait for the pipeline, then return what ``exporter`` received, as dicts."""
    assert lineage_sdk.force_flush(30), "pipeline did not flush within 30 s"
    return exporter.events
