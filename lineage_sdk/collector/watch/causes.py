"""What a stored batch says to the watch, decided from the events alone (pure CPU, on the ingest
path: no read, no I/O).

* ``run_failed``: a run event of type FAIL or ABORT; one cause per run and job (a redelivered
  or repeated terminal event is the same cause). Its ``errorMessage`` run facet is the error.
* ``quality_failed``: an input or output with a ``dataQualityAssertions`` facet (in its
  ``inputFacets``, ``outputFacets`` or ``facets``) holding an assertion with ``success: false``;
  one cause per run, dataset and failed assertions (a producer that repeats them on the run's
  START and its end, as dbt-ol does for ``dbt test``, is one cause; an event without a run: per
  event). An assertion sent in two of those places (dbt-ol puts it in both ``inputFacets`` and
  ``facets``) counts once.
* Schema candidates: each output's (or a DatasetEvent's dataset's) ``schema`` facet, which the
  worker compares with the dataset's previous schema (``schema_breaking`` needs state a batch
  does not have).
* Live runs: a run event with a heartbeat interval (the ``lineagesdk_heartbeat`` run facet) that
  does not end the run keeps the run live; a terminal event ends it (``run_stale`` is decided by
  the worker's sweep).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

from lineage_sdk.collector.records import json_object
from lineage_sdk.collector.store import LineageRecord, node_id
from lineage_sdk.collector.symlinks import entry_name
from lineage_sdk.collector.watch.model import Beat, Cause, Noticed, SchemaSeen, cause_id
from lineage_sdk.models.json_exact import dumps_exact
from lineage_sdk.models.run_state import TERMINAL_STATES, heartbeat_interval, run_state

__all__ = [
    "breaking_changes",
    "failed_assertions",
    "noticed",
    "schema_fields",
    "stated_schemas",
]

_FAILED = ("FAIL", "ABORT")
_QUALITY = "dataQualityAssertions"
#: Where an entry may carry its quality facet (dbt-ol sends it in two of them).
_QUALITY_PLACES = ("inputFacets", "outputFacets", "facets")


def noticed(records: Sequence[LineageRecord]) -> Noticed:
    """Causes, schema candidates and live runs of a stored batch (see the module)."""
    causes: dict[str, Cause] = {}
    schemas: list[SchemaSeen] = []
    beats: dict[str, Beat] = {}
    ended: set[str] = set()
    for rec in records:
        job = (rec.job_namespace, rec.job_name) if rec.job_namespace and rec.job_name else None
        state = run_state(rec.event_type) if rec.kind == "run" else None
        run_id = rec.run_id
        if state in _FAILED and run_id and job is not None:
            cause = _run_failed(rec, job, run_id, state or "")
            causes.setdefault(cause.id, cause)
        for item, writes in _entries(rec.event):
            # Most entries carry neither facet: a look for the keys first (the full reads of
            # every entry were two thirds of this function's time).
            failed = failed_assertions(item) if _states_quality(item) else None
            dataset = entry_name(item) if failed else None  # named only when it failed
            if failed and dataset is not None:
                cause = _quality_failed(rec, job, dataset, failed)
                causes.setdefault(cause.id, cause)
            stated = _stated_schema(item) if writes else None
            if stated is not None:
                dataset, fields = stated
                schemas.append(
                    SchemaSeen(dataset, rec.event_id, rec.event_time, job, run_id, fields)
                )
        if run_id and job is not None and state is not None:
            if state in TERMINAL_STATES:
                ended.add(run_id)
                beats.pop(run_id, None)
                continue
            interval = heartbeat_interval(rec.event)
            if interval is not None and run_id not in ended:
                old = beats.get(run_id)
                if old is None or old.last_event < rec.event_time:
                    beats[run_id] = Beat(run_id, job, interval, rec.event_time)
    return Noticed(tuple(causes.values()), tuple(schemas), tuple(beats.values()), tuple(ended))


def _run_failed(rec: LineageRecord, job: tuple[str, str], run_id: str, state: str) -> Cause:
    run_facets = json_object(json_object(rec.event.get("run")).get("facets"))
    error = json_object(run_facets.get("errorMessage"))
    data: dict[str, Any] = {
        "job": {"namespace": job[0], "name": job[1]},
        "runId": run_id,
        "dataset": None,
        "what": f"run {run_id} of job {job[0]}:{job[1]} ended {state}",
        "state": state,
    }
    if error:
        data["error"] = {
            key: error[key]
            for key in ("message", "programmingLanguage", "stackTrace")
            if isinstance(error.get(key), str)
        }
    return Cause(
        cause_id("run_failed", run_id, *job),
        "run_failed",
        node_id("JOB", *job),
        job[0],
        rec.event_time,
        data,
    )


def _quality_failed(
    rec: LineageRecord,
    job: tuple[str, str] | None,
    dataset: tuple[str, str],
    failed: list[dict[str, Any]],
) -> Cause:
    names = ", ".join(str(a.get("assertion")) for a in failed)
    data: dict[str, Any] = {
        "job": None if job is None else {"namespace": job[0], "name": job[1]},
        "runId": rec.run_id,
        "dataset": {"namespace": dataset[0], "name": dataset[1]},
        "what": f"{len(failed)} quality assertion(s) failed on {dataset[0]}:{dataset[1]}: {names}",
        "assertions": failed,
    }
    return Cause(
        cause_id("quality_failed", rec.run_id or rec.event_id, *dataset, _canonical(failed)),
        "quality_failed",
        node_id("DATASET", *dataset),
        dataset[0],
        rec.event_time,
        data,
    )


def failed_assertions(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The assertions with ``success: false`` of a dataset entry's ``dataQualityAssertions``
    facets (input, output or dataset facets), as sent; one sent in two of them counts once."""
    found: dict[str, dict[str, Any]] = {}
    for key in _QUALITY_PLACES:
        facet = json_object(json_object(item.get(key)).get(_QUALITY))
        assertions = facet.get("assertions")
        if isinstance(assertions, list):
            for a in assertions:
                if isinstance(a, Mapping) and a.get("success") is False:
                    found.setdefault(_canonical(a), dict(a))
    return list(found.values())


def _canonical(value: Any) -> str:
    """Sorted-key JSON text of an assertion (the project's exact writer: a big integer too)."""
    return dumps_exact(value, option=orjson.OPT_SORT_KEYS).decode()


def schema_fields(facets: Mapping[str, Any]) -> dict[str, str | None] | None:
    """A ``schema`` facet's top-level fields, name -> type (None: no type); None without one."""
    fields = json_object(facets.get("schema")).get("fields")
    if not isinstance(fields, list):
        return None
    found: dict[str, str | None] = {}
    for spec in fields:
        spec = json_object(spec)
        name = spec.get("name")
        if isinstance(name, str):
            kind = spec.get("type")
            found[name] = kind if isinstance(kind, str) else None
    return found


def stated_schemas(
    event: Mapping[str, Any],
) -> Iterator[tuple[tuple[str, str], dict[str, str | None]]]:
    """Each dataset an event states the schema of (its outputs, a DatasetEvent's dataset), with
    the schema's fields. An entry is named only when it states one (naming is the cost)."""
    outputs = event.get("outputs")
    items = list(outputs) if isinstance(outputs, list) else []
    items.append(event.get("dataset"))
    for item in items:
        stated = _stated_schema(item) if isinstance(item, Mapping) else None
        if stated is not None:
            yield stated


def _stated_schema(
    item: Mapping[str, Any],
) -> tuple[tuple[str, str], dict[str, str | None]] | None:
    """The dataset entry's name and its ``schema`` facet's fields, when it has one (looked for
    before it is read: most entries have none; an entry is named only when it has)."""
    facets = json_object(item.get("facets"))
    fields = schema_fields(facets) if "schema" in facets else None
    dataset = entry_name(item) if fields is not None else None
    return None if fields is None or dataset is None else (dataset, fields)


def _entries(event: Mapping[str, Any]) -> Iterator[tuple[Mapping[str, Any], bool]]:
    """Each dataset entry of an event, and whether the event states its schema (its outputs
    and a DatasetEvent's dataset do, its inputs do not): the inputs, outputs and dataset."""
    for key, writes in (("inputs", False), ("outputs", True)):
        items = event.get(key)
        for item in items if type(items) is list else ():
            if type(item) is dict or isinstance(item, Mapping):
                yield item, writes
    dataset = event.get("dataset")
    if dataset is not None and isinstance(dataset, Mapping):
        yield dataset, True


def _states_quality(item: Mapping[str, Any]) -> bool:
    """Whether one of the entry's facet maps has a ``dataQualityAssertions`` key."""
    for key in _QUALITY_PLACES:
        facets = item.get(key)
        if facets is not None and _QUALITY in json_object(facets):
            return True
    return False


def breaking_changes(
    old: Mapping[str, str | None], new: Mapping[str, str | None]
) -> list[dict[str, Any]]:
    """What a new schema breaks against the previous one: each field removed, and each field
    whose stated type changed (a type stated on one side only is no change, nor is a change of
    case: ``varchar`` is ``VARCHAR``), by name."""
    found: list[dict[str, Any]] = []
    for name in sorted(old):
        if name not in new:
            found.append({"name": name, "change": "removed", "oldType": old[name], "newType": None})
        elif _type_changed(old[name], new[name]):
            found.append(
                {"name": name, "change": "type", "oldType": old[name], "newType": new[name]}
            )
    return found


def _type_changed(old: str | None, new: str | None) -> bool:
    return old is not None and new is not None and old.casefold() != new.casefold()
