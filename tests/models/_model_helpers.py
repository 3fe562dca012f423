"""Shared helpers for the model tests: a valid base event, and JSON normalisation."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/tree/0.1.0"
RUN_ID = "01890a5d-ac96-774b-bcce-b302099a8057"

_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")


def run_event(**overrides: Any) -> dict[str, Any]:
    """A minimal valid 2-0-2 RunEvent as a dict."""
    event: dict[str, Any] = {
        "eventType": "START",
        "eventTime": "2024-05-01T12:00:00.123456+00:00",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": RUN_ID, "facets": {}},
        "job": {"namespace": "tests", "name": "job", "facets": {}},
        "inputs": [],
        "outputs": [],
    }
    event.update(overrides)
    return event


def normalise(value: Any) -> Any:
    """JSON with every RFC 3339 timestamp replaced by (instant, offset), for lossless comparisons.

    The models re-render times (``.001Z`` comes back as ``.001000Z``), which is the same instant
    in the same offset: that is not a loss, any other difference is.
    """
    if isinstance(value, dict):
        return {key: normalise(item) for key, item in value.items()}
    if isinstance(value, list):
        return [normalise(item) for item in value]
    if isinstance(value, str) and _DATE_TIME.fullmatch(value):
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return ("datetime", parsed, parsed.utcoffset())
    return value
