"""The parent view (issue 33) over nested parents, on every backend: an Airflow DAG whose task
starts a Spark application whose job is its child, as real producers nest them, folds into the
DAG, whether a run names only its parent (the chain climbed run by run) or also its ``root``.

::

    raw -> [dag: dag.task -> spark.app -> spark.app.job1] -> out -> [report] -> final
                         (spark.app writes mid, spark.app.job1 reads it)

``spark.app`` names ``dag.task`` as its parent and ``dag`` as its root; ``spark.app.job1`` names
``spark.app`` only. ``odd`` (reads ``out``, writes ``odd_out``) names ``ghost``, a job never
run, as its parent job, but with the run id of ``spark.app``'s run (a producer's inconsistent
facet): the fold follows the runs, so ``odd`` folds into ``dag``, and ``dag`` lists it among its
children where its edges went (it did not before: found by the name alone, no job listed it).
``odd.child`` (reads ``odd_out``, writes ``odd_child_out``) names ``odd`` and its run: it folds
into ``dag`` too, through ``odd``, which no ``parent`` mention of a ``dag`` member names. Asked
from ``odd.child`` or from beside ``odd``, the answer is the same: ``dag`` lists both and holds
both one's edges (before, asked from ``odd.child``, ``odd`` and its edges were missing; asked
from ``out``, ``odd.child`` and its edges were).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_helpers import PRODUCER, run_event
from test_api_static import agreed, serve_stores

KINDS = ("memory", "sql", "postgres", "document", "graph")
NS = "chain"
RUNS = {n: str(uuid.UUID(int=0xC000 + i, version=4)) for i, n in enumerate(
    ("dag", "dag.task", "spark.app", "spark.app.job1", "report", "odd", "odd.child")
)}  # fmt: skip
PARENT_FACET = "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json"


def _ref(job: str, run: str) -> dict[str, Any]:
    return {"run": {"runId": RUNS[run]}, "job": {"namespace": NS, "name": job}}


def _run(
    job: str,
    minute: int,
    inputs: list[str],
    outputs: list[str],
    parent: tuple[str, str] | None = None,
    root: str | None = None,
) -> list[dict[str, Any]]:
    """START and COMPLETE of ``job``'s one run; ``parent``: (the job named, the run whose id it
    gives)."""
    out = []
    for event_type, at in (("START", minute), ("COMPLETE", minute + 1)):
        event = run_event(
            job,
            namespace=NS,
            event_type=event_type,
            run_id=RUNS[job],
            inputs=[(NS, n) for n in inputs],
            outputs=[(NS, n) for n in outputs],
        )
        event["eventTime"] = f"2026-02-01T10:{at:02d}:00Z"
        if parent is not None:
            facet = {"_producer": PRODUCER, "_schemaURL": PARENT_FACET, **_ref(*parent)}
            if root is not None:
                facet["root"] = _ref(root, root)
            event["run"]["facets"]["parent"] = facet
        out += [event]
    return out


def events() -> list[dict[str, Any]]:
    return [
        *_run("dag", 0, [], []),
        *_run("dag.task", 2, ["raw"], [], parent=("dag", "dag")),
        *_run("spark.app", 4, ["raw"], ["mid"], parent=("dag.task", "dag.task"), root="dag"),
        *_run("spark.app.job1", 6, ["mid"], ["out"], parent=("spark.app", "spark.app")),
        *_run("report", 8, ["out"], ["final"]),
        *_run("odd", 10, ["out"], ["odd_out"], parent=("ghost", "spark.app")),
        *_run("odd.child", 12, ["odd_out"], ["odd_child_out"], parent=("odd", "odd")),
    ]


@pytest.fixture(scope="module")
def apis(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, httpx.Client]]:
    with contextlib.ExitStack() as stack:
        yield serve_stores(stack, request, tmp_path_factory, KINDS, lambda _: events())


def _ask(apis: dict[str, httpx.Client], node: str, **params: Any) -> dict[str, Any]:
    return agreed(apis, "/api/v1/lineage", nodeId=node, granularity="parent", depth=10, **params)


def _node(answer: dict[str, Any], node: str) -> dict[str, Any]:
    (found,) = [n for n in answer["graph"] if n["id"] == node]
    return found


def _children(answer: dict[str, Any], node: str) -> list[str]:
    return [c["name"] for c in _node(answer, node)["data"].get("children", [])]


def _edges(answer: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["origin"], e["destination"]) for n in answer["graph"] for e in n["outEdges"]}


def job(name: str) -> str:
    return f"job:{NS}:{name}"


def dataset(name: str) -> str:
    return f"dataset:{NS}:{name}"


def test_a_nested_chain_folds_into_its_top_job(apis: dict[str, httpx.Client]) -> None:
    """Three levels under the DAG, climbed by parent runs (job1), or by the root (spark.app)."""
    answer = _ask(apis, dataset("final"), direction="upstream")
    assert {n["id"] for n in answer["graph"]} == {
        dataset("final"),
        job("report"),
        dataset("out"),
        job("dag"),
        dataset("mid"),
        dataset("raw"),
    }
    assert _children(answer, job("dag")) == ["dag.task", "spark.app", "spark.app.job1"]
    assert {
        (dataset("raw"), job("dag")),
        (job("dag"), dataset("mid")),
        (dataset("mid"), job("dag")),
        (job("dag"), dataset("out")),
        (dataset("out"), job("report")),
    } <= _edges(answer)


@pytest.mark.parametrize("member", ["dag.task", "spark.app", "spark.app.job1"])
def test_any_member_as_root_answers_from_the_top_job(
    apis: dict[str, httpx.Client], member: str
) -> None:
    answer = _ask(apis, job(member), direction="upstream")
    assert answer["nodeId"] == job("dag")
    assert job(member) not in {n["id"] for n in answer["graph"]}
    assert (dataset("raw"), job("dag")) in _edges(answer)


def test_a_job_folds_where_its_runs_lead_and_is_listed_there(
    apis: dict[str, httpx.Client],
) -> None:
    """``odd`` names ``ghost`` but gives ``spark.app``'s run: it folds into ``dag`` (its edges
    are ``dag``'s), which lists it; ``ghost`` is no node."""
    for node, direction in ((dataset("odd_out"), "upstream"), (dataset("out"), "downstream")):
        answer = _ask(apis, node, direction=direction)
        ids = {n["id"] for n in answer["graph"]}
        assert job("odd") not in ids and job("ghost") not in ids, ids
        assert (job("dag"), dataset("odd_out")) in _edges(answer)
        assert _children(answer, job("dag")) == [
            "dag.task",
            "odd",
            "odd.child",
            "spark.app",
            "spark.app.job1",
        ]


@pytest.mark.parametrize(
    ("node", "direction"),
    [
        (job("odd.child"), "both"),
        (job("odd.child"), "upstream"),
        (dataset("odd_child_out"), "upstream"),
        (dataset("out"), "downstream"),
        (job("odd"), "both"),
    ],
)
def test_the_jobs_between_a_member_and_its_root_fold_there_too(
    apis: dict[str, httpx.Client], node: str, direction: str
) -> None:
    """``odd.child``'s runs lead to ``dag`` through ``odd``'s run: asked from either side,
    ``dag`` lists both, and holds the edges of both the way it is walked (``odd`` reads
    ``out`` and writes ``odd_out``, ``odd.child`` reads ``odd_out`` and writes
    ``odd_child_out``)."""
    answer = _ask(apis, node, direction=direction)
    ids = {n["id"] for n in answer["graph"]}
    assert not {job("odd"), job("odd.child"), job("ghost")} & ids, ids
    assert {"odd", "odd.child"} <= set(_children(answer, job("dag"))), node
    edges, dag = _edges(answer), job("dag")
    if direction != "downstream":
        assert {(dataset("out"), dag), (dataset("odd_out"), dag)} <= edges, node
    if direction != "upstream":
        assert {(dag, dataset("odd_out")), (dag, dataset("odd_child_out"))} <= edges, node
