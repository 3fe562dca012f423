"""The fast validity check (lineage_sdk.models.fast) agrees with parse_event in both directions.

``check_event`` trusts a *yes* from the fast check without asking pydantic, so a fast *yes* for
an event the models refuse would let a bad event into the stores: that is what these tests look
for, on generated valid events (every known facet, nulls, unknown keys) and on the same events
broken at a random place in a random way. They also ask the reverse (a fast *no* for an event
the models accept would only cost speed, but the check is meant to be exact), and that
``check_event`` raises exactly parse_event's error.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from _model_helpers import RUN_ID, run_event
from budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage_sdk.exceptions import InvalidEventError
from lineage_sdk.models import (
    DATASET_EVENT_SCHEMA_URL,
    JOB_EVENT_SCHEMA_URL,
    RUN_EVENT_SCHEMA_URL,
    EventType,
    parse_event,
)
from lineage_sdk.models.codec import check_event
from lineage_sdk.models.fast import is_valid_event

SETTINGS = settings(
    derandomize=True,
    database=None,
    max_examples=examples(100),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
_keys = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=8)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=6,
)
_uri = st.sampled_from(
    ["https://a.example/p", "urn:x", "s3://bucket/key", "postgres://db:5432", "a+b.c-d:"]
)
_times = st.sampled_from(
    [
        "2024-05-01T12:00:00Z",
        "2024-05-01T12:00:00.1+02:00",
        "2024-05-01t12:00:00.123456789z",
        "2024-05-01 12:00:00",
        "2024-05-01T12:00:00-0530",
        "1999-12-31T23:59:59.999999+23:59",
    ]
)
_hex = "0123456789abcdef"


def _maybe(draw: st.DrawFn, target: dict[str, Any], key: str, value: Any) -> None:
    """Set ``key`` to ``value``, to null, or leave it out (the three forms an optional takes)."""
    choice = draw(st.integers(0, 2))
    if choice == 1:
        target[key] = value
    elif choice == 2:
        target[key] = None


def _extras(draw: st.DrawFn, target: dict[str, Any]) -> dict[str, Any]:
    for key, value in draw(st.dictionaries(_keys, _json, max_size=2)).items():
        target.setdefault("x" + key, value)
    return target


@st.composite
def _base(draw: st.DrawFn, deletable: bool = False) -> dict[str, Any]:
    facet = {"_producer": draw(_uri), "_schemaURL": draw(_uri)}
    if deletable:
        _maybe(draw, facet, "_deleted", draw(st.booleans()))
    return _extras(draw, facet)


@st.composite
def _unknown_facets(draw: st.DrawFn) -> dict[str, Any]:
    return {"x_" + k: draw(_base()) for k in draw(st.lists(_keys, max_size=2, unique=True))}


@st.composite
def _job(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    job: dict[str, Any] = {"namespace": draw(_text), "name": draw(_text)}
    if draw(st.integers(0, 3)):
        facets = draw(_unknown_facets())
        if draw(st.integers(0, 3)):
            job_type = draw(_base(deletable=True))
            job_type |= {"processingType": "BATCH", "integration": draw(_text)}
            _maybe(draw, job_type, "jobType", draw(_text))
            pattern = {"eventTrigger": draw(_text), "eventContentMode": draw(_text)}
            _maybe(draw, pattern, "windowDuration", draw(st.integers(1, 2**64 - 1)))
            _maybe(draw, job_type, "emissionPattern", pattern)
            facets["jobType"] = job_type
        job["facets"] = facets
    elif draw(st.booleans()):
        job["facets"] = None
    return _extras(draw, job)


@st.composite
def _run_facets(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    facets = draw(_unknown_facets())
    producer = draw(_uri)
    options: dict[str, Any] = {
        "errorMessage": {"message": draw(_text), "programmingLanguage": "python"},
        "processing_engine": {"version": draw(_text)},
        "nominalTime": {"nominalStartTime": draw(_times)},
        "lineagesdk_trace": {
            "traceId": draw(st.text(_hex, min_size=32, max_size=32)),
            "spanId": draw(st.text(_hex, min_size=16, max_size=16)),
        },
    }
    _maybe(draw, options["errorMessage"], "stackTrace", draw(_text))
    _maybe(draw, options["processing_engine"], "name", draw(_text))
    _maybe(draw, options["processing_engine"], "openlineageAdapterVersion", draw(_text))
    _maybe(draw, options["nominalTime"], "nominalEndTime", draw(_times))
    if depth < 2:
        parent: dict[str, Any] = {
            "run": {"runId": str(draw(st.uuids()))},
            "job": draw(_job(depth + 1)),
        }
        if draw(st.booleans()):
            parent["run"]["facets"] = draw(_run_facets(depth + 1))
        _maybe(draw, parent, "root", {"run": {"runId": str(draw(st.uuids()))}, "job": draw(_job())})
        options["parent"] = parent
    for key in sorted(options):
        if draw(st.integers(0, 3)) == 0:  # each known facet is there three times in four
            continue
        facets[key] = {"_producer": producer, "_schemaURL": draw(_uri), **options[key]}
    if draw(st.booleans()):
        facets["parent" if draw(st.booleans()) else "errorMessage"] = None
    return facets


@st.composite
def _schema_fields(draw: st.DrawFn, depth: int = 0) -> list[dict[str, Any]]:
    fields = []
    for _ in range(draw(st.integers(0, 2))):
        field: dict[str, Any] = {"name": draw(_text)}
        _maybe(draw, field, "type", draw(_text))
        _maybe(draw, field, "description", draw(_text))
        _maybe(draw, field, "ordinal_position", draw(st.integers(-5, 2**40)))
        if depth < 2:
            _maybe(draw, field, "fields", draw(_schema_fields(depth + 1)))
        fields.append(field)
    return fields


@st.composite
def _dataset(draw: st.DrawFn, role: str | None) -> dict[str, Any]:
    dataset: dict[str, Any] = {"namespace": draw(_text), "name": draw(_text)}
    if draw(st.integers(0, 3)):
        facets = draw(_unknown_facets())
        if draw(st.booleans()):
            schema = draw(_base(deletable=True))
            if draw(st.integers(0, 3)):
                schema["fields"] = draw(_schema_fields())
            facets["schema"] = schema
        if draw(st.booleans()):
            source = draw(_base(deletable=True))
            _maybe(draw, source, "name", draw(_text))
            _maybe(draw, source, "uri", draw(_uri))
            facets["dataSource"] = source
        if draw(st.booleans()):
            messaging = draw(_base(deletable=True)) | {"system": "rabbitmq"}
            for key in ("destination", "routingKey", "queue", "consumerTag"):
                _maybe(draw, messaging, key, draw(_text))
            facets["lineagesdk_messaging"] = messaging
        dataset["facets"] = facets
    if role is not None:
        _maybe(draw, dataset, role, draw(_unknown_facets()))
    return _extras(draw, dataset)


@st.composite
def valid_events(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["run", "run", "dataset", "job"]))
    event: dict[str, Any] = {"eventTime": draw(_times), "producer": draw(_uri)}
    if kind == "run":
        event["schemaURL"] = RUN_EVENT_SCHEMA_URL
        _maybe(draw, event, "eventType", draw(st.sampled_from([e.value for e in EventType])))
        run: dict[str, Any] = {"runId": str(draw(st.uuids())).upper()}
        if draw(st.integers(0, 3)):
            run["facets"] = draw(_run_facets())
        elif draw(st.booleans()):
            run["facets"] = None
        event["run"] = _extras(draw, run)
        event["job"] = draw(_job())
    elif kind == "dataset":
        event["schemaURL"] = DATASET_EVENT_SCHEMA_URL
        event["dataset"] = draw(_dataset(None))
    else:
        event["schemaURL"] = JOB_EVENT_SCHEMA_URL
        event["job"] = draw(_job())
    if kind != "dataset":
        for side, role in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
            _maybe(draw, event, side, draw(st.lists(_dataset(role), max_size=2)))
    return _extras(draw, event)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in the tree (dict keys and list positions), the root being ``()``."""
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out.extend(_paths(value, (*prefix, index)))
    return out


# Values that are valid somewhere and invalid elsewhere, so that a swap tests each rule.
_SWAP_VALUES: list[Any] = [
    None,
    "",
    "not a uri",
    "https://ok.example/x",
    "START",
    "start",
    "EXPLODE",
    "2024-05-01T12:00:00Z",
    "2024-13-01T12:00:00Z",
    "2024-05-01T12:00:00+24:00",
    "yesterday",
    "\u0662\u0660\u0662\u0664-05-01T12:00:00Z",
    RUN_ID,
    RUN_ID[:-1],
    RUN_ID.replace("-", ""),
    "0" * 32,
    "A" * 32,
    "0" * 16,
    "0" * 15 + "\n",
    0,
    1,
    -1,
    2**64 - 1,
    1.0,
    True,
    False,
    [],
    [{}],
    [{"name": "f"}],
    {},
    {"_producer": "https://p.example", "_schemaURL": "https://s.example"},
    {"_producer": "no uri", "_schemaURL": "https://s.example"},
    {"_producer": 1, "_schemaURL": "https://s.example"},
    {"namespace": "n", "name": "m"},
    {"runId": RUN_ID},
]
_SWAPS = st.sampled_from(_SWAP_VALUES)
_FIELD_NAME_LIST = [
    "runId",
    "facets",
    "parent",
    "root",
    "run",
    "job",
    "errorMessage",
    "nominalTime",
    "processing_engine",
    "lineagesdk_trace",
    "jobType",
    "schema",
    "dataSource",
    "lineagesdk_messaging",
    "_deleted",
    "_producer",
    "_schemaURL",
    "windowDuration",
    "emissionPattern",
    "fields",
    "ordinal_position",
    "inputFacets",
    "outputFacets",
    "eventType",
    "nominalEndTime",
    "uri",
    "namespace",
    "name",
    "inputs",
    "outputs",
    "dataset",
    "schemaURL",
    "producer",
    "eventTime",
]
_FIELD_NAMES = st.sampled_from(_FIELD_NAME_LIST)
_ADDED_VALUES: list[Any] = [None, "x", {"_producer": "https://p.example", "_schemaURL": "u:"}]


@st.composite
def broken_events(draw: st.DrawFn) -> dict[str, Any]:
    """A valid event changed in one to three places: a value swapped, a key removed or added."""
    event = copy.deepcopy(draw(valid_events()))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(event)))
        parent: Any = event
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["swap", "swap", "drop", "add"]))
        value = copy.deepcopy(draw(_SWAPS | _json))  # never mutate the constants
        if not path:  # the root: add or drop a top-level key
            if action == "drop" and event:
                del event[draw(st.sampled_from(sorted(event)))]
            else:
                event[draw(_FIELD_NAMES)] = value
        elif action == "swap":
            parent[path[-1]] = value
        elif action == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            target = parent[path[-1]]
            if isinstance(target, dict):
                target[draw(_FIELD_NAMES)] = value
            elif isinstance(target, list):
                target.append(value)
    return event


def _models_accept(event: Any) -> bool:
    try:
        parse_event(event)
    except InvalidEventError:
        return False
    return True


@SETTINGS
@given(valid_events())
def test_fast_check_accepts_generated_valid_events(event: dict[str, Any]) -> None:
    assert _models_accept(event)
    assert is_valid_event(event)


def _single_changes(event: dict[str, Any]) -> list[dict[str, Any]]:
    """Every event one change away: each value swapped for each of _SWAP_VALUES, each key
    dropped, each field name added to each object."""
    out = []
    for path in _paths(event):
        for change in ("swap", "drop", "add"):
            options = {"swap": _SWAP_VALUES, "drop": [None], "add": _ADDED_VALUES}[change]
            names = _FIELD_NAME_LIST if change == "add" else [None]
            for name in names:
                for value in options:
                    changed = copy.deepcopy(event)
                    parent: Any = changed
                    for part in path[:-1]:
                        parent = parent[part]
                    target = parent[path[-1]] if path else changed
                    if change == "add" and isinstance(target, dict):
                        target[name] = copy.deepcopy(value)
                    elif change == "swap" and path:
                        parent[path[-1]] = copy.deepcopy(value)
                    elif change == "drop" and path and isinstance(parent, dict):
                        del parent[path[-1]]
                    else:
                        continue
                    out.append(changed)
    return out


@settings(SETTINGS, max_examples=examples(12))
@given(valid_events())
def test_fast_check_agrees_with_the_models_on_every_single_change(
    event: dict[str, Any],
) -> None:
    for changed in _single_changes(event):
        assert is_valid_event(changed) == _models_accept(changed), changed


@SETTINGS
@given(broken_events())
def test_fast_check_agrees_with_the_models_on_broken_events(event: dict[str, Any]) -> None:
    assert is_valid_event(event) == _models_accept(event)


@SETTINGS
@given(broken_events())
def test_check_event_raises_exactly_what_parse_event_raises(event: dict[str, Any]) -> None:
    try:
        parse_event(event)
        expected = None
    except InvalidEventError as exc:
        expected = str(exc)
    try:
        check_event(event)
        got = None
    except InvalidEventError as exc:
        got = str(exc)
    assert got == expected


def _broken(**changes: Any) -> dict[str, Any]:
    event = run_event()
    event.update(changes)
    return event


_NAMED_BREAKAGES: dict[str, Any] = {
    "not an object": [1, 2],
    "no run, job or dataset": {"eventTime": "2024-05-01T12:00:00Z"},
    "missing runId": _broken(run={"facets": {}}),
    "non-UUID runId": _broken(run={"runId": "not-a-uuid"}),
    "runId not a string": _broken(run={"runId": 12}),
    "wrong eventType": _broken(eventType="EXPLODE"),
    "eventTime not a date": _broken(eventTime="yesterday at noon"),
    "eventTime impossible": _broken(eventTime="2024-02-30T12:00:00Z"),
    "producer not a URI": _broken(producer="not a uri"),
    "schemaURL missing": {k: v for k, v in run_event().items() if k != "schemaURL"},
    "job name not a string": _broken(job={"namespace": "n", "name": 3}),
    "job missing": {k: v for k, v in run_event().items() if k != "job"},
    "inputs not a list": _broken(inputs={"namespace": "n", "name": "m"}),
    "dataset without name": _broken(inputs=[{"namespace": "n"}]),
    "facet not an object": _broken(run={"runId": RUN_ID, "facets": {"x": [1]}}),
    "facet without _producer": _broken(
        run={"runId": RUN_ID, "facets": {"x": {"_schemaURL": "u:"}}}
    ),
    "unknown facet null": _broken(run={"runId": RUN_ID, "facets": {"x": None}}),
    "parent facet with a bad runId": _broken(
        run={
            "runId": RUN_ID,
            "facets": {
                "parent": {
                    "_producer": "https://p.example",
                    "_schemaURL": "https://s.example",
                    "run": {"runId": "nope"},
                    "job": {"namespace": "n", "name": "m"},
                }
            },
        }
    ),
}


@pytest.mark.parametrize("name", sorted(_NAMED_BREAKAGES))
def test_named_breakages_are_refused_with_parse_events_reason(name: str) -> None:
    event = _NAMED_BREAKAGES[name]
    assert not is_valid_event(event)
    with pytest.raises(InvalidEventError) as expected:
        parse_event(event)
    with pytest.raises(InvalidEventError) as got:
        check_event(event)
    assert str(got.value) == str(expected.value)


def test_check_event_still_rules_out_nul_bytes_and_deep_nesting_unless_told() -> None:
    nul = run_event(job={"namespace": "n", "name": "a\x00b"})
    assert is_valid_event(nul)  # the fast check leaves NUL bytes to the caller ...
    with pytest.raises(InvalidEventError, match="NUL"):
        check_event(nul)  # ... and check_event does it when the raw bytes were not checked
    deep: Any = {}
    for _ in range(70):
        deep = {"a": deep}
    with pytest.raises(InvalidEventError, match="nesting"):
        check_event(run_event(x=deep))
