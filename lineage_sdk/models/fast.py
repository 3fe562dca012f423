"""A plain-Python validity check of decoded events that agrees with :func:`parse_event`.

The collector validates every event it consumes. Building pydantic models for that costs
20-30 µs per event, most of it spent creating objects the collector then throws away: it only
needs a yes or no, and a readable reason for a no. :func:`is_valid_event` walks the decoded
JSON once and checks exactly what the models check (the same regular expressions for times,
UUIDs and URIs, the same rules for facets, known facets checked field by field), in a few
microseconds. :func:`lineage_sdk.models.codec.check_event` runs it first and asks
:func:`parse_event` only when it says no, to produce the error message; so the combined check
accepts exactly what :func:`parse_event` accepts even if this module were stricter than the
models somewhere (a *no* here is never trusted on its own), and a *yes* here must never be
given to something the models refuse (``tests/models/test_models_fast.py`` checks both
directions on generated events).

:func:`is_acceptable_event` is the same walk with the collector's ingest rule (issue 14): URIs
are annotations, names must be non-empty; :func:`lineage_sdk.models.codec.check_ingest_event`
pairs it with the models' reason the same way.

Keep this module in step with ``events.py``, ``facets.py`` and ``_base.py``: a new model field
or facet needs a line here too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from lineage_sdk.models._base import _DATE_TIME, _URI, _UUID
from lineage_sdk.models.constants import (
    DATASOURCE_FACET_KEY,
    ERROR_MESSAGE_FACET_KEY,
    HEARTBEAT_FACET_KEY,
    JOB_TYPE_FACET_KEY,
    MESSAGING_FACET_KEY,
    NOMINAL_TIME_FACET_KEY,
    PARENT_FACET_KEY,
    PROCESSING_ENGINE_FACET_KEY,
    SCHEMA_FACET_KEY,
    TRACE_FACET_KEY,
)
from lineage_sdk.models.events import EventType

__all__ = ["is_acceptable_event", "is_valid_event"]

_Check = Callable[[dict[str, Any]], bool]

_EVENT_TYPES = frozenset(member.value for member in EventType)
_HEX = frozenset("0123456789abcdef")
_uri_match = _URI.fullmatch
_uuid_match = _UUID.fullmatch
_time_match = _DATE_TIME.fullmatch
_fromisoformat = datetime.fromisoformat


def _time(value: Any) -> bool:
    """``Timestamp`` read tolerantly: what ``_base._to_datetime`` accepts for a string."""
    if type(value) is not str:
        return False
    match = _time_match(value)
    if match is None:
        return False
    date, time, fraction, offset = match.groups()
    if fraction and len(fraction) > 7:
        fraction = fraction[:7]
    if offset in ("Z", "z"):
        offset = "+00:00"
    try:
        _fromisoformat(f"{date}T{time}{fraction or ''}{offset or ''}")
    except ValueError:
        return False
    return True  # an offset-less time is read as UTC when parsing


def _uri(value: Any) -> bool:
    return type(value) is str and _uri_match(value) is not None


def _uuid(value: Any) -> bool:
    return type(value) is str and _uuid_match(value) is not None


def _str(value: Any) -> bool:
    return type(value) is str


def _non_empty_str(value: Any) -> bool:
    return type(value) is str and value != ""


def _opt_str(value: Any) -> bool:
    return value is None or type(value) is str


def _hex(value: Any, size: int) -> bool:
    return type(value) is str and len(value) == size and _HEX.issuperset(value)


def _strict_int(value: Any, minimum: int | None = None) -> bool:
    return type(value) is int and (minimum is None or value >= minimum)


def _checker(uri: Callable[[Any], bool], name: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """Build an event check that reads ``format: uri`` values with ``uri`` and names with ``name``.

    Two checks share this one walk: :func:`is_valid_event` (URIs checked, names any string: what
    the models accept) and :func:`is_acceptable_event` (the collector's ingest rule).
    """

    # -- facets ---------------------------------------------------------------------------------

    def _facets(value: Any, known: dict[str, _Check]) -> bool:
        """A facet container (``_FacetContainer``): objects with str ``_producer``/``_schemaURL``.

        A known key is checked by its model (and may be null); any other key must be an object.
        """
        if value is None:
            return True
        if type(value) is not dict:
            return False
        for key, facet in value.items():
            if type(facet) is dict:
                if (
                    type(facet.get("_producer")) is not str
                    or type(facet.get("_schemaURL")) is not str
                ):
                    return False
                check = known.get(key)
                if check is not None and not check(facet):
                    return False
            elif facet is not None or key not in known:
                return False
        return True

    def _base_facet(facet: dict[str, Any]) -> bool:
        return uri(facet.get("_producer")) and uri(facet.get("_schemaURL"))

    def _deletable_facet(facet: dict[str, Any]) -> bool:
        deleted = facet.get("_deleted")
        return _base_facet(facet) and (deleted is None or type(deleted) is bool)

    def _parent_run(value: Any) -> bool:
        return (
            type(value) is dict and _uuid(value.get("runId")) and _facets(value.get("facets"), _RUN)
        )

    def _job(value: Any) -> bool:
        return (
            type(value) is dict
            and name(value.get("namespace"))
            and name(value.get("name"))
            and _facets(value.get("facets"), _JOB)
        )

    def _parent_facet(f: dict[str, Any]) -> bool:
        if not (_base_facet(f) and _parent_run(f.get("run")) and _job(f.get("job"))):
            return False
        root = f.get("root")
        return root is None or (
            type(root) is dict and _parent_run(root.get("run")) and _job(root.get("job"))
        )

    def _error_message_facet(f: dict[str, Any]) -> bool:
        return (
            _base_facet(f)
            and type(f.get("message")) is str
            and type(f.get("programmingLanguage")) is str
            and _opt_str(f.get("stackTrace"))
        )

    def _processing_engine_facet(f: dict[str, Any]) -> bool:
        return (
            _base_facet(f)
            and type(f.get("version")) is str
            and _opt_str(f.get("name"))
            and _opt_str(f.get("openlineageAdapterVersion"))
        )

    def _nominal_time_facet(f: dict[str, Any]) -> bool:
        end = f.get("nominalEndTime")
        return _base_facet(f) and _time(f.get("nominalStartTime")) and (end is None or _time(end))

    def _trace_facet(f: dict[str, Any]) -> bool:
        return _base_facet(f) and _hex(f.get("traceId"), 32) and _hex(f.get("spanId"), 16)

    def _heartbeat_facet(f: dict[str, Any]) -> bool:
        interval = f.get("intervalS")
        if type(interval) is not int and type(interval) is not float:
            return False  # bool, str, missing
        return _base_facet(f) and interval > 0

    def _emission_pattern(value: Any) -> bool:
        if value is None:
            return True
        if type(value) is not dict:
            return False
        window = value.get("windowDuration")
        return (
            type(value.get("eventTrigger")) is str
            and type(value.get("eventContentMode")) is str
            and (window is None or _strict_int(window, 1))
        )

    def _job_type_facet(f: dict[str, Any]) -> bool:
        return (
            _deletable_facet(f)
            and type(f.get("processingType")) is str
            and type(f.get("integration")) is str
            and _opt_str(f.get("jobType"))
            and _emission_pattern(f.get("emissionPattern"))
        )

    def _schema_fields(value: Any) -> bool:
        if value is None:
            return True
        if type(value) is not list:
            return False
        for field in value:
            if type(field) is not dict:
                return False
            position = field.get("ordinal_position")
            if not (
                type(field.get("name")) is str
                and _opt_str(field.get("type"))
                and _opt_str(field.get("description"))
                and (position is None or _strict_int(position))
                and _schema_fields(field.get("fields"))
            ):
                return False
        return True

    def _schema_facet(f: dict[str, Any]) -> bool:
        return _deletable_facet(f) and _schema_fields(f.get("fields"))

    def _datasource_facet(f: dict[str, Any]) -> bool:
        source = f.get("uri")
        return _deletable_facet(f) and _opt_str(f.get("name")) and (source is None or uri(source))

    def _messaging_facet(f: dict[str, Any]) -> bool:
        return (
            _deletable_facet(f)
            and type(f.get("system")) is str
            and _opt_str(f.get("destination"))
            and _opt_str(f.get("routingKey"))
            and _opt_str(f.get("queue"))
            and _opt_str(f.get("consumerTag"))
        )

    _RUN: dict[str, _Check] = {
        PARENT_FACET_KEY: _parent_facet,
        ERROR_MESSAGE_FACET_KEY: _error_message_facet,
        PROCESSING_ENGINE_FACET_KEY: _processing_engine_facet,
        NOMINAL_TIME_FACET_KEY: _nominal_time_facet,
        TRACE_FACET_KEY: _trace_facet,
        HEARTBEAT_FACET_KEY: _heartbeat_facet,
    }
    _JOB: dict[str, _Check] = {JOB_TYPE_FACET_KEY: _job_type_facet}
    _DATASET: dict[str, _Check] = {
        SCHEMA_FACET_KEY: _schema_facet,
        DATASOURCE_FACET_KEY: _datasource_facet,
        MESSAGING_FACET_KEY: _messaging_facet,
    }
    _NONE: dict[str, _Check] = {}

    # -- runs, jobs, datasets, events -----------------------------------------------------------

    def _dataset(value: Any, role_facets: str | None) -> bool:
        return (
            type(value) is dict
            and name(value.get("namespace"))
            and name(value.get("name"))
            and _facets(value.get("facets"), _DATASET)
            and (role_facets is None or _facets(value.get(role_facets), _NONE))
        )

    def _datasets(value: Any, role_facets: str) -> bool:
        if value is None:
            return True
        if type(value) is not list:
            return False
        return all(_dataset(item, role_facets) for item in value)

    def check(obj: Any) -> bool:
        """The verdict for ``obj``, a JSON-decoded event (see the two public checks)."""
        if type(obj) is not dict:
            return False
        if "run" in obj:
            kind = "run"
        elif "dataset" in obj:
            kind = "dataset"
        elif "job" in obj:
            kind = "job"
        else:
            return False
        if not (
            "schemaURL" in obj
            and uri(obj["schemaURL"])
            and uri(obj.get("producer"))
            and _time(obj.get("eventTime"))
        ):
            return False
        if kind == "dataset":
            return _dataset(obj["dataset"], None)
        if kind == "run":
            event_type = obj.get("eventType")
            if event_type is not None and (
                type(event_type) is not str or event_type not in _EVENT_TYPES
            ):
                return False
            run = obj["run"]
            if not (
                type(run) is dict and _uuid(run.get("runId")) and _facets(run.get("facets"), _RUN)
            ):
                return False
        return (
            _job(obj.get("job"))
            and _datasets(obj.get("inputs"), "inputFacets")
            and _datasets(obj.get("outputs"), "outputFacets")
        )

    return check


_valid = _checker(_uri, _str)
_acceptable = _checker(_str, _non_empty_str)


def is_valid_event(obj: Any) -> bool:
    """True only if :func:`parse_event` accepts ``obj`` (a JSON-decoded event).

    Checks the models' rules, not NUL bytes or nesting depth: the caller has ruled those out
    (the collector does so on the raw bytes). False means "invalid, or not plain JSON data";
    ask :func:`parse_event` for the reason.
    """
    return _valid(obj)


def is_acceptable_event(obj: Any) -> bool:
    """True if the collector ingests ``obj`` (issue 14: accept what Marquez accepts).

    The models' rules with two differences: every ``format: uri`` is an annotation (a string is
    enough: ``dataSource.uri`` may be ``file`` or ``bigquery``, as OpenLineage's Spark
    integration sends, and ``producer`` need not be absolute), and job and dataset namespaces
    and names must be non-empty (the stores key on them). Run ids, ``eventType`` and
    ``eventTime`` are checked as strictly as ever. False means "ask
    :func:`lineage_sdk.models.codec.check_ingest_event` for the reason".
    """
    return _acceptable(obj)
