"""Events real producers send: generated from the shape of the spec's ``OpenLineage.json``.

:func:`spec_events` is a hypothesis strategy written by hand after the core schema (2-0-2):
RunEvent, DatasetEvent and JobEvent, with facets of every container, unknown keys, and string
values where the schema only *annotates* a ``format`` (``producer``, ``schemaURL``,
``_producer``, ``_schemaURL``, a ``dataSource`` facet's ``uri``) drawn from any text, Spark's
``file`` and ``bigquery`` among them. What the ingest rule of issue 14 checks is drawn valid: a
UUID ``runId``, an RFC 3339 ``eventTime`` with an offset, an ``eventType`` from the enum (or
none), non-empty job and dataset names. :func:`schema_violations` checks each event against the
schema with formats off (JSON Schema's default), so the generator cannot drift from the spec.

Two things the schema allows stay out, on purpose: NUL characters (refused at ingest as a
defence, and PostgreSQL cannot store them) and nesting past the collector's depth limit.
"""

from __future__ import annotations

import functools
import json
import uuid
from datetime import datetime
from typing import Any

from conformance import spec_dir
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from lineage_sdk.models import OPENLINEAGE_SPEC_VERSION

__all__ = ["CORE_SCHEMA", "SPARK_NAMESPACES", "schema_violations", "spec_events"]

CORE_SCHEMA = f"https://openlineage.io/spec/{OPENLINEAGE_SPEC_VERSION}/OpenLineage.json"
#: Namespaces and ``dataSource.uri`` values of OpenLineage's Spark integration (naming spec).
SPARK_NAMESPACES = ["file", "bigquery", "hdfs://namenode:8020", "s3a://bucket", "gs://bucket"]
_EVENT_TYPES = ["START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"]

# Any text but NUL and lone surrogates (not representable in UTF-8 JSON).
_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)
_name = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=30)
# A format-annotated string: anything, often what real producers send.
_annotated = st.one_of(
    _text,
    st.sampled_from(
        [
            *SPARK_NAMESPACES,
            "spark",
            "https://github.com/OpenLineage/OpenLineage/tree/1.23.0/integration/spark",
            "",
            "not a uri",
            "/relative/path",
        ]
    ),
)
_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
)
_json = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
# Facet keys a producer may invent; the models' known keys are drawn by their own strategies.
_custom_key = st.text(
    st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=15
).map(lambda key: f"x_{key}")


def _uuid_text(value: uuid.UUID, upper: bool) -> str:
    return str(value).upper() if upper else str(value)


_run_id = st.builds(_uuid_text, st.uuids(), st.booleans())
_event_time = st.builds(
    lambda when, fraction, offset: when.isoformat() + fraction + offset,
    st.datetimes(datetime(1900, 1, 1), datetime(2200, 1, 1)).map(
        lambda d: d.replace(microsecond=0)
    ),
    st.sampled_from(["", ".1", ".123", ".123456", ".123456789"]),
    st.sampled_from(["Z", "z", "+00:00", "+05:30", "-08:00", "+14:00"]),
)


@st.composite
def _facet(draw: st.DrawFn) -> dict[str, Any]:
    """A BaseFacet: ``_producer`` and ``_schemaURL`` strings, any other keys."""
    facet: dict[str, Any] = draw(st.dictionaries(_custom_key, _json, max_size=3))
    facet["_producer"] = draw(_annotated)
    facet["_schemaURL"] = draw(_annotated)
    return facet


def _facets(extra: dict[str, st.SearchStrategy[dict[str, Any]]] | None = None) -> Any:
    """A facets object: invented keys, plus (sometimes) each known facet in ``extra``."""

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        facets: dict[str, Any] = draw(st.dictionaries(_custom_key, _facet(), max_size=2))
        for key, strategy in (extra or {}).items():
            if draw(st.booleans()):
                facets[key] = draw(strategy)
        return facets

    return build()


@st.composite
def _datasource(draw: st.DrawFn) -> dict[str, Any]:
    """The ``dataSource`` facet as Spark sends it: ``uri`` need not be a URI."""
    facet = draw(_facet())
    facet["name"] = draw(_annotated)
    facet["uri"] = draw(_annotated)
    return facet


@st.composite
def _job(draw: st.DrawFn) -> dict[str, Any]:
    job: dict[str, Any] = {"namespace": draw(_name), "name": draw(_name)}
    if draw(st.booleans()):
        job["facets"] = draw(_facets())
    return job


@st.composite
def _parent(draw: st.DrawFn) -> dict[str, Any]:
    """A ``parent`` run facet: its run is a run, so its ``runId`` is a UUID."""
    facet = draw(_facet())
    facet["run"] = {"runId": draw(_run_id)}
    facet["job"] = {"namespace": draw(_name), "name": draw(_name)}
    return facet


@st.composite
def _dataset(draw: st.DrawFn, role_facets: str | None) -> dict[str, Any]:
    namespace = draw(st.sampled_from(SPARK_NAMESPACES) | _name)
    dataset: dict[str, Any] = {"namespace": namespace, "name": draw(_name)}
    if draw(st.booleans()):
        dataset["facets"] = draw(_facets({"dataSource": _datasource()}))
    if role_facets is not None and draw(st.booleans()):
        dataset[role_facets] = draw(_facets())
    return dataset


@st.composite
def spec_events(draw: st.DrawFn) -> dict[str, Any]:
    """One RunEvent, DatasetEvent or JobEvent that validates against ``OpenLineage.json``."""
    kind = draw(st.sampled_from(["RunEvent", "RunEvent", "DatasetEvent", "JobEvent"]))
    event: dict[str, Any] = {
        "eventTime": draw(_event_time),
        "producer": draw(_annotated),
        "schemaURL": draw(st.sampled_from([f"{CORE_SCHEMA}#/$defs/{kind}"]) | _annotated),
    }
    if kind == "DatasetEvent":
        event["dataset"] = draw(_dataset(None))
    else:
        if kind == "RunEvent":
            event_type = draw(st.sampled_from([None, *_EVENT_TYPES]))
            if event_type is not None:
                event["eventType"] = event_type
            run: dict[str, Any] = {"runId": draw(_run_id)}
            if draw(st.booleans()):
                run["facets"] = draw(_facets({"parent": _parent()}))
            event["run"] = run
        event["job"] = draw(_job())
        for side, role in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
            if draw(st.booleans()):
                event[side] = draw(st.lists(_dataset(role), max_size=2))
    event.update(draw(st.dictionaries(_custom_key, _json, max_size=2)))  # keys of newer specs
    return event


@functools.cache
def _validator() -> Draft202012Validator:
    path = spec_dir() / OPENLINEAGE_SPEC_VERSION / "OpenLineage.json"
    schema = json.loads(path.read_bytes())
    registry: Registry[Any] = Registry().with_resource(  # type: ignore[call-arg]
        CORE_SCHEMA, Resource.from_contents(schema, default_specification=DRAFT202012)
    )
    return Draft202012Validator({"$ref": CORE_SCHEMA}, registry=registry)  # no format checker


def schema_violations(event: Any) -> list[str]:
    """What ``OpenLineage.json`` (formats as annotations) finds wrong with ``event``."""
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in _validator().iter_errors(event)
    ]
