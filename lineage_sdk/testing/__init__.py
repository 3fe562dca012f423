"""Helpers for users' own tests, in the style of structlog's ``capture_logs``."""

from lineage_sdk.testing.capture import CapturedLineage, capture_lineage

__all__ = ["CapturedLineage", "capture_lineage"]
