"""What a stored batch says to the watch (``watch.causes``): pure logic, so plain records."""

from __future__ import annotations

import uuid
from typing import Any

from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.watch.causes import breaking_changes, noticed
from lineage_sdk.collector.watch.model import Cause, Noticed
from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY

PRODUCER = "https://example.com/watch-tests"
RUN_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


def _event(
    event_type: str,
    *,
    run_id: str,
    at: str = "2026-02-01T00:00:00Z",
    inputs: list[dict[str, Any]] | None = None,
    outputs: list[dict[str, Any]] | None = None,
    run_facets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "eventType": event_type,
        "eventTime": at,
        "run": {"runId": run_id, "facets": run_facets or {}},
        "job": {"namespace": "shop", "name": "load", "facets": {}},
        "inputs": inputs or [],
        "outputs": outputs or [],
        "producer": PRODUCER,
        "schemaURL": RUN_SCHEMA,
    }


def _facet(**fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": "https://example.com/facet.json", **fields}


def _schema(*fields: tuple[str, str]) -> dict[str, Any]:
    return {"schema": _facet(fields=[{"name": n, "type": t} for n, t in fields])}


def test_a_failed_run_is_one_cause_whatever_repeats_it() -> None:
    run = str(uuid.uuid4())
    error = {"errorMessage": _facet(message="division by zero", programmingLanguage="python")}
    fail = build_record(_event("FAIL", run_id=run, run_facets=error))
    again = build_record(_event("FAIL", run_id=run, at="2026-02-01T00:01:00Z"))
    first = noticed([fail])
    assert [c.kind for c in first.causes] == ["run_failed"]
    cause = first.causes[0]
    assert cause.subject == "job:shop:load" and cause.namespace == "shop"
    assert cause.data["error"] == {"message": "division by zero", "programmingLanguage": "python"}
    assert cause.data["runId"] == run and cause.data["state"] == "FAIL"
    assert noticed([again]).causes[0].id == cause.id  # the same run: the same cause
    assert first.ended == (run,)
    abort = noticed([build_record(_event("ABORT", run_id=str(uuid.uuid4())))])
    assert [c.kind for c in abort.causes] == ["run_failed"]
    assert not noticed([build_record(_event("COMPLETE", run_id=run))]).causes


def test_a_failed_assertion_on_an_input_or_an_output_is_a_cause() -> None:
    assertions = _facet(
        assertions=[
            {"assertion": "not_null", "column": "id", "success": False},
            {"assertion": "unique", "column": "id", "success": True},
        ]
    )
    tested = {
        "namespace": "pg",
        "name": "stg.orders",
        "facets": {},
        "inputFacets": {"dataQualityAssertions": assertions},
    }
    record = build_record(_event("COMPLETE", run_id=str(uuid.uuid4()), inputs=[tested]))
    (cause,) = noticed([record]).causes
    assert cause.kind == "quality_failed" and cause.subject == "dataset:pg:stg.orders"
    assert cause.namespace == "pg"
    assert cause.data["assertions"] == [{"assertion": "not_null", "column": "id", "success": False}]
    passing = _facet(assertions=[{"assertion": "unique", "success": True}])
    out = {
        "namespace": "pg",
        "name": "t",
        "facets": {},
        "outputFacets": {"dataQualityAssertions": passing},
    }
    assert not noticed(
        [build_record(_event("COMPLETE", run_id=str(uuid.uuid4()), outputs=[out]))]
    ).causes


def _quality(found: Noticed) -> list[Cause]:
    return [c for c in found.causes if c.kind == "quality_failed"]


def test_a_failed_assertion_repeated_by_its_run_is_one_cause() -> None:
    """As dbt-ol sends ``dbt test``: the assertion in both ``inputFacets`` and ``facets``, on
    the run's START and on its FAIL."""
    failed = {"assertion": "not_null", "column": "country", "success": False}
    checks = _facet(assertions=[failed])
    tested = {
        "namespace": "pg",
        "name": "stg.customers",
        "facets": {"dataQualityAssertions": checks},
        "inputFacets": {"dataQualityAssertions": checks},
    }
    run = str(uuid.uuid4())
    start = build_record(_event("START", run_id=run, inputs=[tested]))
    fail = build_record(_event("FAIL", run_id=run, at="2026-02-01T00:00:01Z", inputs=[tested]))
    both = noticed([start, fail])
    assert sorted(c.kind for c in both.causes) == ["quality_failed", "run_failed"]
    (quality,) = _quality(both)
    assert quality.data["assertions"] == [failed]  # once, though sent in two places
    assert _quality(noticed([fail]))[0].id == quality.id  # the end alone: the same cause
    # Another run failing the same assertion, or the same run failing another: a new cause.
    other = build_record(_event("FAIL", run_id=str(uuid.uuid4()), inputs=[tested]))
    assert _quality(noticed([other]))[0].id != quality.id
    worse = {
        **tested,
        "inputFacets": {
            "dataQualityAssertions": _facet(
                assertions=[failed, {"assertion": "unique", "column": "id", "success": False}]
            )
        },
    }
    later = build_record(_event("COMPLETE", run_id=run, inputs=[worse]))
    assert _quality(noticed([later]))[0].id != quality.id


def test_schemas_and_heartbeats_are_noticed_for_the_worker() -> None:
    run = str(uuid.uuid4())
    out = {"namespace": "pg", "name": "t", "facets": _schema(("id", "BIGINT"), ("name", "TEXT"))}
    beat = {HEARTBEAT_FACET_KEY: _facet(intervalS=30)}
    found = noticed([build_record(_event("RUNNING", run_id=run, outputs=[out], run_facets=beat))])
    (seen,) = found.schemas
    assert seen.dataset == ("pg", "t") and seen.fields == {"id": "BIGINT", "name": "TEXT"}
    assert seen.job == ("shop", "load") and seen.run_id == run
    (live,) = found.beats
    assert (live.run_id, live.interval_s) == (run, 30.0)
    ended = noticed(
        [
            build_record(_event("RUNNING", run_id=run, run_facets=beat)),
            build_record(_event("COMPLETE", run_id=run, at="2026-02-01T00:05:00Z")),
        ]
    )
    assert not ended.beats and ended.ended == (run,)


def test_breaking_changes() -> None:
    old = {"id": "BIGINT", "name": "TEXT", "note": None, "v": "varchar"}
    new = {"id": "TEXT", "note": "TEXT", "v": "VARCHAR", "added": "INT"}
    assert breaking_changes(old, new) == [
        {"name": "id", "change": "type", "oldType": "BIGINT", "newType": "TEXT"},
        {"name": "name", "change": "removed", "oldType": "TEXT", "newType": None},
    ]
    assert breaking_changes(old, {**old, "added": "INT"}) == []


def test_only_written_schemas_are_candidates_and_odd_facet_maps_are_skipped() -> None:
    """An input's schema is no candidate, a DatasetEvent's dataset's is; an assertion in the
    entry's ``facets`` alone is a cause; facet maps that are not objects say nothing (the
    checks look for the facets' keys before reading them)."""
    failed = _facet(assertions=[{"assertion": "positive", "success": False}])
    read = {
        "namespace": "pg",
        "name": "src",
        "facets": {**_schema(("id", "INT")), "dataQualityAssertions": failed},
    }
    odd = [
        {"namespace": "pg", "name": "a", "facets": ["schema"], "inputFacets": "x"},
        {"namespace": "pg", "name": "b", "facets": None, "outputFacets": [1, 2]},
    ]
    found = noticed([build_record(_event("COMPLETE", run_id=str(uuid.uuid4()), inputs=[read]))])
    assert not found.schemas
    assert [c.subject for c in found.causes] == ["dataset:pg:src"]
    odd_found = noticed(
        [build_record(_event("COMPLETE", run_id=str(uuid.uuid4()), inputs=odd, outputs=odd))]
    )
    assert not odd_found.schemas and not odd_found.causes
    dataset_event = {
        "eventTime": "2026-02-01T00:00:00Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {"namespace": "pg", "name": "dim", "facets": _schema(("k", "TEXT"))},
    }
    (seen,) = noticed([build_record(dataset_event)]).schemas
    assert seen.dataset == ("pg", "dim") and seen.fields == {"k": "TEXT"} and seen.job is None
