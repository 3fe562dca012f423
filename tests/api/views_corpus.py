"""The events the views tests share (issue 33): a known graph over three days.

Day 1 (2026-01-01) and day 2 (2026-01-02), the #3093 shape: ``etl.load`` reads ``a`` in its
day-1 run and ``b`` in its day-2 run, writing ``t`` both times (``t.id`` from ``a.id``, then from
``b.id``: column lineage); ``report`` reads ``t`` and writes
``r`` on day 2. Day 3: an Airflow-shaped DAG ``dag`` whose tasks ``dag.t1`` (reads ``r``, writes
``s``) and ``dag.t2`` (reads ``s``, writes ``u``) name its run as their parent. ``stream`` runs from
day 1 to day 3 with events at its two ends only, reading ``x`` and writing ``y`` (no event of it
on day 2). ``decl`` is declared by a JobEvent on day 2 to read ``t`` and write ``v``.

::

    a --(day 1)--\\                                  x -> [stream] -> y
                  [etl.load] -> t -> [report] -> r -> [dag: dag.t1 -> s -> dag.t2] -> u
    b --(day 2)--/                \\-> [decl] -> v (declared)
"""

from __future__ import annotations

import uuid
from typing import Any

from api_helpers import PRODUCER, column_facet, run_event

NS = "views"
DAY1, DAY2, DAY3, DAY4 = "2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04"
RUNS = {
    name: str(uuid.UUID(int=0xA000 + i, version=4))
    for i, name in enumerate(("load1", "load2", "report", "dag", "t1", "t2", "stream"))
}
JOB_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/JobEvent"


def ds(name: str) -> tuple[str, str]:
    return (NS, name)


def _run(
    job: str,
    run: str,
    times: list[tuple[str, str]],
    inputs: list[str],
    outputs: list[str],
    parent: str | None = None,
) -> list[dict[str, Any]]:
    events = []
    for event_type, at in times:
        event = run_event(
            job,
            namespace=NS,
            event_type=event_type,
            run_id=RUNS[run],
            inputs=[ds(n) for n in inputs],
            outputs=[ds(n) for n in outputs],
        )
        event["eventTime"] = at
        if parent is not None:
            event["run"]["facets"]["parent"] = {
                "_producer": PRODUCER,
                "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json",
                "run": {"runId": RUNS[parent]},
                "job": {"namespace": NS, "name": "dag"},
            }
        events.append(event)
    return events


def _columns(events: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    """``etl.load``'s run writes ``t.id`` from ``<source>.id`` (column lineage)."""
    for event in events:
        facet = column_facet({"id": [(NS, source, "id")]})
        event["outputs"][0]["facets"]["columnLineage"] = facet
    return events


def events() -> list[dict[str, Any]]:
    """Every event of the corpus (see the module docstring)."""
    found = [
        *_columns(
            _run(
                "etl.load",
                "load1",
                [("START", f"{DAY1}T10:00:00Z"), ("COMPLETE", f"{DAY1}T10:05:00Z")],
                ["a"],
                ["t"],
            ),
            "a",
        ),
        *_columns(
            _run(
                "etl.load",
                "load2",
                [("START", f"{DAY2}T10:00:00Z"), ("COMPLETE", f"{DAY2}T10:05:00Z")],
                ["b"],
                ["t"],
            ),
            "b",
        ),
        *_run("report", "report", [("COMPLETE", f"{DAY2}T11:00:00Z")], ["t"], ["r"]),
        *_run(
            "dag",
            "dag",
            [("START", f"{DAY3}T01:00:00Z"), ("COMPLETE", f"{DAY3}T01:30:00Z")],
            [],
            [],
        ),
        *_run("dag.t1", "t1", [("COMPLETE", f"{DAY3}T01:10:00Z")], ["r"], ["s"], parent="dag"),
        *_run("dag.t2", "t2", [("COMPLETE", f"{DAY3}T01:20:00Z")], ["s"], ["u"], parent="dag"),
        *_run(
            "stream",
            "stream",
            [("START", f"{DAY1}T00:00:00Z"), ("COMPLETE", f"{DAY3}T00:00:00Z")],
            ["x"],
            ["y"],
        ),
    ]
    found.append(
        {
            "eventTime": f"{DAY2}T09:00:00Z",
            "job": {"namespace": NS, "name": "decl", "facets": {}},
            "inputs": [{"namespace": NS, "name": "t", "facets": {}}],
            "outputs": [{"namespace": NS, "name": "v", "facets": {}}],
            "producer": PRODUCER,
            "schemaURL": JOB_EVENT_SCHEMA,
        }
    )
    return found
