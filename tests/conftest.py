"""Fixtures shared by every test folder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import lineage_sdk
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.sdk.exporters import InMemoryExporter


@pytest.fixture
def memory_exporter() -> Iterator[InMemoryExporter]:
    """Lineage configured for this test only, sending to memory; shut down afterwards."""
    exporter = InMemoryExporter()
    lineage_sdk.configure(LineageConfig(exporters=["memory"]), exporters=[exporter], strict=True)
    try:
        yield exporter
    finally:
        lineage_sdk.shutdown(10)
