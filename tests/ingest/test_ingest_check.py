"""The collector's ingest check (``check_ingest_event``) against the models read with
``INGEST_CONTEXT``: its fast *yes* is never given to an event they refuse, and it refuses only
what they refuse, plus empty names.

The events are test_models_fast's: every known facet, nulls and unknown keys, then broken at
random places in random ways, so each rule of the fast walk is exercised in both directions.
"""

from __future__ import annotations

from typing import Any

import pytest
from _model_helpers import run_event
from hypothesis import given, settings
from test_models_fast import SETTINGS, broken_events, valid_events

from lineage_sdk.exceptions import InvalidEventError
from lineage_sdk.models import parse_event
from lineage_sdk.models._base import INGEST_CONTEXT
from lineage_sdk.models.codec import check_ingest_event, event_kind
from lineage_sdk.models.fast import is_acceptable_event


def _names(event: dict[str, Any]) -> list[Any]:
    """Every job and dataset namespace and name the stores key on."""
    objects = [event.get("job"), event.get("dataset"), *(event.get("inputs") or ())]
    objects += list(event.get("outputs") or ())
    runs = [event.get("run")]
    while runs:
        run = runs.pop()
        facets = run.get("facets") if isinstance(run, dict) else None
        parent = facets.get("parent") if isinstance(facets, dict) else None
        if isinstance(parent, dict):
            root = parent.get("root") if isinstance(parent.get("root"), dict) else {}
            objects += [parent.get("job"), root.get("job")]
            runs += [parent.get("run"), root.get("run")]
    return [o.get(k) for o in objects if isinstance(o, dict) for k in ("namespace", "name")]


def _models_accept(event: dict[str, Any]) -> bool:
    """The models' verdict with URIs as annotations, and the stores' need for names."""
    try:
        kind = event_kind(event)
        if "schemaURL" not in event:
            return False
        kind.model_validate(event, context=INGEST_CONTEXT, by_alias=True, by_name=False)
    except (InvalidEventError, ValueError):
        return False
    return "" not in _names(event)


def _ingest_accepts(event: dict[str, Any]) -> bool:
    try:
        check_ingest_event(event)
    except InvalidEventError:
        return False
    return True


def _parse_accepts(event: dict[str, Any]) -> bool:
    try:
        parse_event(event)
    except InvalidEventError:
        return False
    return True


@settings(SETTINGS, max_examples=100)
@given(valid_events())
def test_valid_events_are_accepted_unless_a_name_is_empty(event: dict[str, Any]) -> None:
    expected = "" not in _names(event)
    assert is_acceptable_event(event) == expected
    assert _ingest_accepts(event) == expected


@settings(SETTINGS, max_examples=100)
@given(broken_events())
def test_the_fast_yes_is_never_given_to_an_event_the_models_refuse(event: dict[str, Any]) -> None:
    accepted = _models_accept(event)
    if is_acceptable_event(event):
        assert accepted, event
    assert _ingest_accepts(event) == accepted, event
    if _parse_accepts(event) and "" not in _names(event):
        assert _ingest_accepts(event), event  # never stricter than parse_event, but for names


def _event_at(event_time: str) -> dict[str, Any]:
    event = run_event()
    event["eventTime"] = event_time
    return event


def test_an_offset_less_event_time_is_accepted_and_read_as_utc() -> None:
    """Marquez accepts these (older Great Expectations and dbt-ol events sent them)."""
    check_ingest_event(_event_at("2024-05-01T12:00:00.123456"))
    parsed = parse_event(_event_at("2024-05-01T12:00:00.123456"))
    assert parsed.event_time.isoformat() == "2024-05-01T12:00:00.123456+00:00"


@pytest.mark.parametrize(
    "bad", ["2021-11-05T10:28:18.969066Z[Europe/London]", "yesterday", "2024-13-01T00:00:00Z"]
)
def test_event_times_marquez_refuses_are_refused_naming_the_field(bad: str) -> None:
    with pytest.raises(InvalidEventError, match=r"^eventTime"):
        check_ingest_event(_event_at(bad))
