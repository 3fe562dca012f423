"""The views of issue 33 (time windows; dataset, run and parent granularity; bounded answers) on
every backend, through the HTTP API: memory, SQLite and PostgreSQL (sql), SecantusDB (document)
and FalkorDB (graph) answer each question alike, and each answer is the one the corpus
(:mod:`views_corpus`) says."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openapi_check import validate_operation
from test_api_static import agreed, serve_stores
from views_corpus import DAY1, DAY2, DAY3, DAY4, NS, RUNS, events

KINDS = ("memory", "sql", "postgres", "document", "graph")


@pytest.fixture(scope="module")
def apis(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, httpx.Client]]:
    with contextlib.ExitStack() as stack:
        yield serve_stores(stack, request, tmp_path_factory, KINDS, lambda _: events())


def _ask(apis: dict[str, httpx.Client], **params: Any) -> dict[str, Any]:
    """The answer every backend gives, after checking they all give it."""
    return agreed(apis, "/api/v1/lineage", **params)


def _edges(answer: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["origin"], e["destination"]) for n in answer["graph"] for e in n["outEdges"]}


def _ids(answer: dict[str, Any]) -> set[str]:
    return {n["id"] for n in answer["graph"]}


def d(name: str) -> str:
    return f"dataset:{NS}:{name}"


def j(name: str) -> str:
    return f"job:{NS}:{name}"


def r(name: str) -> str:
    return f"run:{RUNS[name]}"


def test_each_run_of_a_job_in_its_own_window(apis: dict[str, httpx.Client]) -> None:
    """The #3093 shape: both inputs in the job view, each in its own day's window."""
    whole = _ask(apis, nodeId=d("t"), direction="upstream")
    assert _edges(whole) == {
        (d("a"), j("etl.load")),
        (d("b"), j("etl.load")),
        (j("etl.load"), d("t")),
    }
    validate_operation("getLineage", whole)
    day1 = _ask(apis, nodeId=d("t"), direction="upstream", since=DAY1, until=DAY2)
    assert _edges(day1) == {(d("a"), j("etl.load")), (j("etl.load"), d("t"))}
    assert (day1["granularity"], day1["since"], day1["until"]) == (
        "job",
        f"{DAY1}T00:00:00Z",
        f"{DAY2}T00:00:00Z",
    )
    day2 = _ask(apis, nodeId=d("t"), direction="upstream", since=DAY2, until=DAY3)
    assert _edges(day2) == {(d("b"), j("etl.load")), (j("etl.load"), d("t"))}
    validate_operation("getLineage", day2)
    latest = next(n for n in day1["graph"] if n["id"] == j("etl.load"))["data"]["latestRun"]
    assert latest["id"] == RUNS["load1"]  # the latest run before the window's end


def test_a_window_keeps_the_root_and_drops_what_has_no_edge_in_it(
    apis: dict[str, httpx.Client],
) -> None:
    answer = _ask(apis, nodeId=d("u"), direction="upstream", since=DAY4, until="2026-01-05")
    assert _ids(answer) == {d("u")} and _edges(answer) == set()
    # u was first named on day 3: a window ending before it does not know it, as asOf does not.
    for kind, client in apis.items():
        for params in ({"until": DAY2}, {"since": DAY1, "until": DAY2}):
            early = client.get("/api/v1/lineage", params={"nodeId": d("u"), **params})
            assert early.status_code == 404, (kind, params, early.text)


def test_a_run_spanning_the_window_counts_only_with_an_event_in_it(
    apis: dict[str, httpx.Client],
) -> None:
    """``stream`` runs from day 1 to day 3 with events at its two ends only."""
    quiet = _ask(apis, nodeId=d("y"), direction="upstream", since=DAY2, until=f"{DAY2}T23:00:00Z")
    assert _edges(quiet) == set()
    ending = _ask(
        apis,
        nodeId=d("y"),
        direction="upstream",
        since=f"{DAY2}T12:00:00Z",
        until=f"{DAY3}T12:00:00Z",
    )
    assert _edges(ending) == {(d("x"), j("stream")), (j("stream"), d("y"))}


def test_a_declared_edge_counts_from_its_declaration(apis: dict[str, httpx.Client]) -> None:
    before = _ask(apis, nodeId=d("t"), direction="downstream", since=DAY1, until=DAY2)
    assert (d("t"), j("decl")) not in _edges(before)
    after = _ask(apis, nodeId=d("t"), direction="downstream", since=DAY3, until=DAY4)
    assert {(d("t"), j("decl")), (j("decl"), d("v"))} <= _edges(after)
    declared = [e for n in after["graph"] for e in n["outEdges"] if e["destination"] == d("v")]
    assert declared and all(e.get("declared") for e in declared)


def test_until_alone_is_as_of(apis: dict[str, httpx.Client]) -> None:
    """``asOf`` stays as it is: ``until`` with no ``since`` is ``asOf`` a microsecond before."""
    by_until = _ask(apis, nodeId=d("t"), direction="upstream", until=DAY2)
    by_as_of = _ask(apis, nodeId=d("t"), direction="upstream", asOf="2026-01-01T23:59:59.999999Z")
    assert (
        _edges(by_until) == _edges(by_as_of) == {(d("a"), j("etl.load")), (j("etl.load"), d("t"))}
    )


def test_dataset_view(apis: dict[str, httpx.Client]) -> None:
    answer = _ask(apis, nodeId=d("t"), granularity="dataset", direction="both", depth=1)
    assert {n["type"] for n in answer["graph"]} == {"DATASET"}
    edges = {
        (e["origin"], e["destination"]): e["data"]["jobs"]
        for n in answer["graph"]
        for e in n["outEdges"]
    }
    load = [{"namespace": NS, "name": "etl.load"}]
    assert edges == {
        (d("a"), d("t")): load,
        (d("b"), d("t")): load,
        (d("t"), d("r")): [{"namespace": NS, "name": "report"}],
        (d("t"), d("v")): [{"namespace": NS, "name": "decl"}],
    }
    assert answer["granularity"] == "dataset"
    day1 = _ask(
        apis, nodeId=d("t"), granularity="dataset", direction="upstream", since=DAY1, until=DAY2
    )
    assert _edges(day1) == {(d("a"), d("t"))}


def test_dataset_view_from_a_job(apis: dict[str, httpx.Client]) -> None:
    """A job root answers the datasets it touched and their lineage; it is no node itself."""
    answer = _ask(
        apis, nodeId=j("etl.load"), granularity="dataset", direction="downstream", depth=1
    )
    assert j("etl.load") not in _ids(answer)
    assert _edges(answer) == {
        (d("a"), d("t")),
        (d("b"), d("t")),
        (d("t"), d("r")),
        (d("t"), d("v")),
    }


def test_run_view_in_a_window(apis: dict[str, httpx.Client]) -> None:
    """Which runs produced t on day 2, and what they read."""
    answer = _ask(
        apis, nodeId=d("t"), granularity="run", direction="upstream", since=DAY2, until=DAY3
    )
    assert _edges(answer) == {(d("b"), r("load2")), (r("load2"), d("t"))}
    run = next(n for n in answer["graph"] if n["id"] == r("load2"))
    assert run["type"] == "RUN"
    assert run["data"] == {
        "runId": RUNS["load2"],
        "job": {"namespace": NS, "name": "etl.load"},
        "state": "COMPLETED",
        "startedAt": f"{DAY2}T10:00:00Z",
        "endedAt": f"{DAY2}T10:05:00Z",
        "parentRunId": None,
    }
    whole = _ask(apis, nodeId=d("t"), granularity="run", direction="upstream")
    assert {r("load1"), r("load2")} <= _ids(whole)


def test_run_view_from_a_run_links_its_parent(apis: dict[str, httpx.Client]) -> None:
    answer = _ask(apis, nodeId=r("t2"), granularity="run", direction="upstream", depth=1)
    edges = {
        (e["origin"], e["destination"]): e.get("data")
        for n in answer["graph"]
        for e in n["outEdges"]
    }
    assert edges[(r("dag"), r("t2"))] == {"link": "parent"}
    assert (d("s"), r("t2")) in edges and (r("t1"), d("s")) in edges
    assert (
        next(n for n in answer["graph"] if n["id"] == r("t2"))["data"]["parentRunId"] == RUNS["dag"]
    )


def test_parent_view_folds_tasks_into_their_dag(apis: dict[str, httpx.Client]) -> None:
    answer = _ask(apis, nodeId=d("u"), granularity="parent", direction="upstream", depth=2)
    assert j("dag.t1") not in _ids(answer) and j("dag.t2") not in _ids(answer)
    dag = next(n for n in answer["graph"] if n["id"] == j("dag"))
    assert dag["data"]["children"] == [
        {"namespace": NS, "name": "dag.t1"},
        {"namespace": NS, "name": "dag.t2"},
    ]
    assert {(d("r"), j("dag")), (j("dag"), d("u"))} <= _edges(answer)
    from_task = _ask(apis, nodeId=j("dag.t1"), granularity="parent", direction="upstream", depth=1)
    assert from_task["nodeId"] == j("dag")
    assert (d("r"), j("dag")) in _edges(from_task)


def test_parent_view_nodes_carry_the_job_views_latest_runs(
    apis: dict[str, httpx.Client],
) -> None:
    """A parent view's job nodes carry the ``latestRun`` the job view gives the same job (the
    fold's own reads of the latest runs serve them when there is no window), in a window too,
    and in one that ends while the DAG's run is running."""
    windows: list[dict[str, str]] = [
        {},
        {"since": DAY2, "until": DAY4},
        {"since": DAY2, "until": f"{DAY3}T01:25:00Z"},
    ]
    for window in windows:
        answer = _ask(
            apis, nodeId=d("u"), granularity="parent", direction="upstream", depth=2, **window
        )
        jobs = [n for n in answer["graph"] if n["type"] == "JOB"]
        assert jobs, window
        for node in jobs:
            alone = _ask(apis, nodeId=node["id"], direction="both", depth=0, **window)
            (same,) = [n for n in alone["graph"] if n["id"] == node["id"]]
            assert node["data"].get("latestRun") == same["data"].get("latestRun"), node["id"]
        dag = next(n for n in jobs if n["id"] == j("dag"))
        running = window.get("until", "").endswith("01:25:00Z")
        assert dag["data"]["latestRun"]["state"] == ("RUNNING" if running else "COMPLETED")


def test_parent_view_both_ways_is_the_union_of_each_way(apis: dict[str, httpx.Client]) -> None:
    """Unbounded, a ``both`` answer is its upstream and downstream answers together (each way
    walks on its own): so it stays when the fold reads for both ways at once."""
    for node in (d("s"), d("r"), j("dag.t1"), j("report"), d("u")):
        for depth in (1, 3):
            asked = {"nodeId": node, "granularity": "parent", "depth": depth}
            both = _ask(apis, direction="both", **asked)
            up = _ask(apis, direction="upstream", **asked)
            down = _ask(apis, direction="downstream", **asked)
            assert _ids(both) == _ids(up) | _ids(down), (node, depth)
            assert _edges(both) == _edges(up) | _edges(down), (node, depth)
            assert j("dag.t1") not in _ids(both) and j("dag.t2") not in _ids(both)


def test_a_bounded_parent_view_is_a_cut_of_the_whole(apis: dict[str, httpx.Client]) -> None:
    """At every limit, a parent view keeps nodes of its unbounded answer, a cut of it (each limit's
    nodes among the next one's) with every edge among them: the closing step, which asks the
    roots of no jobs but the kept roots' members, loses no edge."""
    for node in (d("u"), d("s"), j("dag.t1"), j("report")):
        for direction in ("upstream", "downstream", "both"):
            asked = {"nodeId": node, "granularity": "parent", "direction": direction, "depth": 10}
            whole = _ask(apis, **asked)
            edges, kept_before = _edges(whole), set[str]()
            for limit in range(1, len(whole["graph"]) + 1):
                cut = _ask(apis, nodeLimit=limit, **asked)
                kept = _ids(cut)
                assert len(kept) == limit and kept_before <= kept <= _ids(whole), (asked, limit)
                among = {(o, t) for o, t in edges if o in kept and t in kept}
                assert _edges(cut) == among, (asked, limit)
                kept_before = kept


def test_every_view_is_bounded(apis: dict[str, httpx.Client]) -> None:
    for granularity in ("job", "dataset", "run", "parent"):
        answer = _ask(apis, nodeId=d("t"), granularity=granularity, nodeLimit=2, depth=10)
        assert len(answer["graph"]) == 2, granularity
        assert answer["truncated"] is True and answer["nodeLimit"] == 2
        assert answer["omittedNodes"] >= 1, granularity
        whole = _ask(apis, nodeId=d("t"), granularity=granularity, depth=10)
        assert whole["truncated"] is False and whole["omittedNodes"] == 0
        assert answer["omittedNodes"] <= len(whole["graph"]) - 2


def test_column_lineage_takes_a_window(apis: dict[str, httpx.Client]) -> None:
    """A column edge is in the window when its job wrote the output's dataset in it."""

    def inputs(**params: Any) -> dict[str, set[str]]:
        answers = []
        for kind, client in apis.items():
            found = client.get(
                "/api/v1/column-lineage", params={"nodeId": f"datasetField:{NS}:t:id", **params}
            )
            assert found.status_code == 200, (kind, params, found.text)
            answers.append(found.json())
        assert all(a == answers[0] for a in answers), params
        return {
            n["id"]: {f"{i['dataset']}.{i['field']}" for i in n["data"]["inputFields"]}
            for n in answers[0]["graph"]
        }

    assert inputs()[f"datasetField:{NS}:t:id"] == {"a.id", "b.id"}
    assert inputs(since=DAY1, until=DAY2)[f"datasetField:{NS}:t:id"] == {"a.id"}
    assert inputs(since=DAY2, until=DAY3)[f"datasetField:{NS}:t:id"] == {"b.id"}
    for kind, client in apis.items():  # no column lineage in the window: 404, no schema fields
        found = client.get(
            "/api/v1/column-lineage",
            params={"nodeId": d("t"), "since": DAY4, "until": "2026-01-05"},
        )
        assert found.status_code == 404, (kind, found.text)
