"""Nesting depth is judged on the parsed tree with the same limit and reason as on raw bytes:
objects and arrays count, brackets inside strings do not, and a batch counts from its array."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from collector_helpers import BATCH_CONTENT_TYPE, run_event

from lineage_sdk.collector.decode import (
    JSON_CONTENT_TYPE,
    MAX_NESTING_DEPTH,
    PoisonMessage,
    decode_message,
)


def _nested(levels: int) -> Any:
    """``levels`` objects and arrays, alternating, one inside the other."""
    value: Any = 1
    for level in range(levels):
        value = {"a": value} if level % 2 else [value]
    return value


def _event_nesting(total: int) -> dict[str, Any]:
    """A valid event whose deepest value sits ``total`` levels down, the event itself included."""
    event = run_event()
    # event (1) > run (2) > facets (3) > custom facet (4) > deep: 4 levels before the value
    event["run"]["facets"]["custom"] = {"_producer": "https://x", "_schemaURL": "https://x"}
    event["run"]["facets"]["custom"]["deep"] = _nested(total - 4)
    return event


def _reason(body: bytes, content_type: str = JSON_CONTENT_TYPE) -> str | None:
    try:
        decode_message(body, content_type)
    except PoisonMessage as exc:
        return exc.reason
    return None


def test_an_event_at_the_limit_is_stored_one_level_more_is_too_deep() -> None:
    assert _reason(orjson.dumps(_event_nesting(MAX_NESTING_DEPTH))) is None
    assert _reason(orjson.dumps(_event_nesting(MAX_NESTING_DEPTH + 1))) == "too_deep"


def test_a_batch_counts_its_array_and_one_deep_event_makes_the_message_too_deep() -> None:
    at_limit = [run_event(), _event_nesting(MAX_NESTING_DEPTH - 1)]
    assert _reason(orjson.dumps(at_limit), BATCH_CONTENT_TYPE) is None
    over = [run_event(), _event_nesting(MAX_NESTING_DEPTH)]
    assert _reason(orjson.dumps(over), BATCH_CONTENT_TYPE) == "too_deep"


def test_brackets_inside_strings_do_not_count() -> None:
    event = run_event()
    event["job"]["facets"] = {
        "sql": {
            "_producer": "https://x",
            "_schemaURL": "https://x",
            "query": "[" * 500 + "{" * 500 + '\\"[{',
        }
    }
    assert _reason(orjson.dumps(event)) is None


def test_past_orjsons_own_limit_the_reason_is_still_too_deep() -> None:
    bomb = b'{"a":' * 5000 + b"1" + b"}" * 5000
    with pytest.raises(PoisonMessage) as info:
        decode_message(bomb, JSON_CONTENT_TYPE)
    assert info.value.reason == "too_deep"
    assert info.value.detail == f"JSON nests deeper than {MAX_NESTING_DEPTH} levels"
    assert _reason(b"[" * 100 + b"]" * 100) == "too_deep"
