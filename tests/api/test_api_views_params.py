"""The views' parameters (issue 33) at the edges: ``since``, ``until`` and ``granularity`` on
``GET /api/v1/lineage`` and ``GET /api/v1/column-lineage``, and ``lineage graph --since/--until/
--granularity`` through the API (--url) and the store (--config), over the SQLite store behind a
real server with the views corpus (:mod:`views_corpus`, the #3093 shape among it).

Every refused input answers 400 naming the parameter and changes nothing; the parameters reach
the engine (a window of day 1 answers day 1's run alone); every view's answer matches the
OpenAPI document we serve, and the job view stays Marquez's ``getLineage``. The views' answers
themselves are tested on every backend in tests/api/test_api_views.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from api_helpers import API_KEY, Api, run_cli, validate_openapi_response
from openapi_check import validate_operation
from views_corpus import DAY1, DAY2, DAY3, NS, RUNS, events

LOAD = f"job:{NS}:etl.load"
T = f"dataset:{NS}:t"
A, B = f"dataset:{NS}:a", f"dataset:{NS}:b"
RUN1 = f"run:{RUNS['load1']}"


@pytest.fixture
def views_api(make_api: Callable[..., Api]) -> Api:
    api = make_api(api_key=API_KEY)
    answer = api.client.post("/api/v1/lineage/batch", json=events())
    assert answer.status_code == 200, answer.text
    assert answer.json()["summary"]["failed"] == 0, answer.text
    return api


def _get(api: Api, path: str = "/api/v1/lineage", **params: Any) -> dict[str, Any]:
    response = api.client.get(path, params=params)
    assert response.status_code == 200, (params, response.text)
    body: dict[str, Any] = response.json()
    return body


def _ids(answer: dict[str, Any]) -> set[str]:
    return {node["id"] for node in answer["graph"]}


# -------------------------------------------------------------------------- refused input: 400

LINEAGE_REFUSED: list[tuple[dict[str, str], str]] = [
    ({"granularity": "sideways"}, "granularity"),
    ({"granularity": ""}, "granularity"),
    ({"granularity": "JOB"}, "granularity"),
    ({"since": "last tuesday"}, "since"),
    ({"until": "2026-13-45"}, "until"),
    ({"since": "x" * 500}, "since"),
    ({"since": DAY2, "until": DAY1}, "since"),
    ({"since": DAY1, "until": DAY1}, "since"),
    ({"since": f"{DAY1}T12:00:00+02:00", "until": f"{DAY1}T10:00:00Z"}, "since"),
    ({"asOf": DAY2, "since": DAY1}, "asOf"),
    ({"asOf": DAY2, "until": DAY3}, "asOf"),
    ({"runId": RUNS["load1"], "since": DAY1}, "runId"),
    ({"runId": RUNS["load1"], "until": DAY2}, "runId"),
    ({"runId": RUNS["load1"], "granularity": "dataset"}, "runId"),
    ({"runId": RUNS["load1"], "granularity": "run"}, "runId"),
    ({"nodeId": RUN1}, "nodeId"),
    ({"nodeId": RUN1, "granularity": "dataset"}, "nodeId"),
    ({"nodeId": RUN1, "granularity": "parent"}, "nodeId"),
    ({"nodeId": "run:not-a-uuid", "granularity": "run"}, "nodeId"),
    ({"nodeId": "run:", "granularity": "run"}, "nodeId"),
    ({"nodeId": LOAD, "granularity": "run"}, "nodeId"),
]


@pytest.mark.parametrize(("params", "named"), LINEAGE_REFUSED)
def test_lineage_refuses_bad_views_with_400_naming_the_parameter(
    views_api: Api, params: dict[str, str], named: str
) -> None:
    before = _get(views_api, nodeId=T)
    count = views_api.count()
    response = views_api.client.get("/api/v1/lineage", params={"nodeId": T, **params})
    assert response.status_code == 400, (params, response.text)
    body = response.json()
    assert set(body) == {"detail", "reason"}
    assert named in body["detail"], body
    # Nothing else changes: the store and the plain answer are as they were.
    assert views_api.count() == count
    assert _get(views_api, nodeId=T) == before


COLUMNS_REFUSED: list[tuple[dict[str, str], str]] = [
    ({"granularity": "dataset"}, "granularity"),
    ({"granularity": "run"}, "granularity"),
    ({"granularity": "nope"}, "granularity"),
    ({"since": "soon"}, "since"),
    ({"until": "later"}, "until"),
    ({"since": DAY3, "until": DAY2}, "since"),
    ({"asOf": DAY2, "since": DAY1}, "asOf"),
    ({"runId": RUNS["load1"], "until": DAY2}, "runId"),
]


@pytest.mark.parametrize(("params", "named"), COLUMNS_REFUSED)
def test_column_lineage_refuses_bad_views_with_400_naming_the_parameter(
    views_api: Api, params: dict[str, str], named: str
) -> None:
    response = views_api.client.get(
        "/api/v1/column-lineage", params={"nodeId": f"datasetField:{NS}:t:x", **params}
    )
    assert response.status_code == 400, (params, response.text)
    assert set(response.json()) == {"detail", "reason"}
    assert named in response.json()["detail"], response.text


def test_what_was_refused_before_is_refused_as_before(views_api: Api) -> None:
    """The old checks keep their statuses: a bad asOf and a bad depth are 422, a bad node id 400,
    and column lineage still takes granularity=job and no window."""
    assert (
        views_api.client.get("/api/v1/lineage", params={"nodeId": T, "asOf": "x"}).status_code
        == 422
    )
    assert (
        views_api.client.get("/api/v1/lineage", params={"nodeId": T, "depth": -1}).status_code
        == 422
    )
    bad_node = views_api.client.get("/api/v1/lineage", params={"nodeId": "table:x"})
    assert bad_node.status_code == 400 and bad_node.json()["reason"] == "invalid_node_id"
    for granularity in ("job", "dataset", "run", "parent"):
        bad = views_api.client.get(
            "/api/v1/lineage", params={"nodeId": "table:x", "granularity": granularity}
        )
        assert bad.status_code == 400 and bad.json()["reason"] == "invalid_node_id"
    plain = views_api.client.get("/api/v1/column-lineage", params={"nodeId": f"dataset:{NS}:t"})
    as_job = views_api.client.get(
        "/api/v1/column-lineage", params={"nodeId": f"dataset:{NS}:t", "granularity": "job"}
    )
    assert (plain.status_code, plain.json()) == (as_job.status_code, as_job.json())


# ----------------------------------------------------------------- the parameters reach the engine


def test_window_parameters_reach_the_engine(views_api: Api) -> None:
    """#3093: etl.load read a on day 1 and b on day 2; each window answers its own run's input."""
    both = _ids(_get(views_api, nodeId=LOAD, depth=1))
    assert {A, B, T} <= both
    day1 = _get(views_api, nodeId=LOAD, depth=1, since=DAY1, until=DAY2)
    assert A in _ids(day1) and B not in _ids(day1)
    assert day1["since"].startswith(DAY1) and day1["until"].startswith(DAY2)
    assert day1["granularity"] == "job"
    day2 = _ids(_get(views_api, nodeId=LOAD, depth=1, since=DAY2))
    assert B in day2 and A not in day2
    until_day2 = _get(views_api, nodeId=LOAD, depth=1, until=DAY2)
    assert A in _ids(until_day2) and B not in _ids(until_day2)
    assert "since" not in until_day2
    # RFC 3339 with offsets reads as the same instants.
    shifted = _get(
        views_api,
        nodeId=LOAD,
        depth=1,
        since=f"{DAY1}T02:00:00+02:00",
        until=f"{DAY1}T23:00:00-01:00",
    )
    assert _ids(shifted) == _ids(day1)


def test_granularity_reaches_the_engine(views_api: Api) -> None:
    dataset = _get(views_api, nodeId=T, granularity="dataset", direction="upstream", depth=1)
    assert dataset["granularity"] == "dataset"
    assert {n["type"] for n in dataset["graph"]} == {"DATASET"}
    (edge,) = [e for n in dataset["graph"] for e in n["outEdges"] if e["origin"] == A]
    assert edge["destination"] == T
    assert edge["data"]["jobs"] == [{"namespace": NS, "name": "etl.load"}]
    day2 = _get(
        views_api, nodeId=T, granularity="dataset", direction="upstream", depth=1, since=DAY2
    )
    assert B in _ids(day2) and A not in _ids(day2)

    runs = _get(views_api, nodeId=T, granularity="run", direction="upstream", depth=1, until=DAY2)
    run_ids = {n["id"] for n in runs["graph"] if n["type"] == "RUN"}
    assert run_ids == {RUN1}
    from_run = _get(views_api, nodeId=RUN1, granularity="run", depth=1)
    assert RUN1 in _ids(from_run) and A in _ids(from_run)

    parent = _get(views_api, nodeId=f"job:{NS}:dag.t1", granularity="parent", depth=1)
    assert parent["granularity"] == "parent" and parent["nodeId"] == f"job:{NS}:dag"


def test_every_view_matches_the_served_document(views_api: Api) -> None:
    openapi = views_api.client.get("/openapi.json").json()
    asked: list[dict[str, Any]] = [
        {"nodeId": LOAD},
        {"nodeId": LOAD, "since": DAY1, "until": DAY2},
        {"nodeId": T, "granularity": "dataset"},
        {"nodeId": LOAD, "granularity": "dataset", "since": DAY2},
        {"nodeId": T, "granularity": "run"},
        {"nodeId": RUN1, "granularity": "run"},
        {"nodeId": f"dataset:{NS}:s", "granularity": "run"},
        {"nodeId": f"job:{NS}:dag.t2", "granularity": "parent"},
        {"nodeId": T, "granularity": "dataset", "nodeLimit": 2},
    ]
    for params in asked:
        body = _get(views_api, **params)
        validate_openapi_response(openapi, "/api/v1/lineage", "get", 200, body)
    # The job view, windowed or not, stays Marquez's getLineage answer.
    for params in asked[:2]:
        validate_operation("getLineage", _get(views_api, **params))
    lineage = openapi["paths"]["/api/v1/lineage"]["get"]
    params_doc = {p["name"]: p for p in lineage["parameters"]}
    for name in ("since", "until", "granularity"):
        assert "lineage-sdk extension" in params_doc[name]["description"], name
    assert params_doc["granularity"]["schema"]["enum"] == ["job", "dataset", "run", "parent"]
    columns = openapi["paths"]["/api/v1/column-lineage"]["get"]
    assert {"since", "until", "granularity"} <= {p["name"] for p in columns["parameters"]}
    assert "400" in lineage["responses"] and "400" in columns["responses"]


# ---------------------------------------------------------------------------------------- the CLI


def _where(api: Api, source: str) -> list[str]:
    if source == "http":
        return ["--url", api.url, "--api-key", API_KEY]
    return ["--config", str(api.config_path)]


@pytest.mark.parametrize("source", ["http", "store"])
def test_cli_graph_window_and_granularity(views_api: Api, source: str) -> None:
    where = _where(views_api, source)
    day1 = run_cli(
        *where, "graph", LOAD, "--depth", "1", "--since", DAY1, "--until", DAY2, "-f", "json"
    )
    assert day1.returncode == 0, day1.stderr
    answer = orjson.loads(day1.stdout)
    assert answer == _get(views_api, nodeId=LOAD, depth=1, since=DAY1, until=DAY2, direction="both")
    assert A in _ids(answer) and B not in _ids(answer)

    tree = run_cli(*where, "graph", T, "--upstream", "-d", "1", "-g", "run", "--since", DAY2)
    assert tree.returncode == 0, tree.stderr
    assert tree.stdout.startswith("upstream of dataset")
    assert f"run     {NS}:etl.load {RUNS['load2']}" in tree.stdout
    assert RUNS["load1"] not in tree.stdout and "Traceback" not in tree.stderr

    from_run = run_cli(*where, "graph", RUN1, "--granularity", "run", "-d", "1")
    assert from_run.returncode == 0, from_run.stderr
    assert f"downstream of run     {NS}:etl.load {RUNS['load1']}" in from_run.stdout
    assert f"dataset {NS}:a" in from_run.stdout

    dot = run_cli(*where, "graph", T, "--upstream", "-d", "1", "-g", "dataset", "-f", "dot")
    assert dot.returncode == 0, dot.stderr
    assert f'"{A}" -> "{T}" [label="job:{NS}:etl.load"];' in dot.stdout

    runs_dot = run_cli(*where, "graph", RUN1, "-g", "run", "-f", "dot")
    assert runs_dot.returncode == 0, runs_dot.stderr
    assert f'"{RUN1}" [label="etl.load {RUNS["load1"]}"' in runs_dot.stdout
    assert "peripheries=2" in runs_dot.stdout

    mermaid = run_cli(*where, "graph", T, "--upstream", "-d", "1", "-g", "run", "-f", "mermaid")
    assert mermaid.returncode == 0, mermaid.stderr
    assert '(["etl.load ' in mermaid.stdout and "classDef run" in mermaid.stdout
    assert "  class " in mermaid.stdout and " run\n" in mermaid.stdout

    dataset_tree = run_cli(*where, "graph", LOAD, "-d", "1", "-g", "dataset")
    assert dataset_tree.returncode == 0, dataset_tree.stderr
    up, _, down = dataset_tree.stdout.partition("downstream of")
    assert f"dataset {NS}:a" in up and f"dataset {NS}:b" in up and f"dataset {NS}:t" in down

    folded = run_cli(*where, "graph", f"job:{NS}:dag.t1", "-g", "parent", "-d", "1")
    assert folded.returncode == 0, folded.stderr
    assert f"job:{NS}:dag.t1 is folded into job:{NS}:dag" in folded.stderr
    assert "child job(s)" in folded.stdout


@pytest.mark.parametrize("source", ["http", "store"])
def test_cli_cut_note_counts_the_omitted_nodes(views_api: Api, source: str) -> None:
    where = _where(views_api, source)
    cut = run_cli(*where, "graph", T, "-g", "dataset", "--node-limit", "2", "-f", "json")
    assert cut.returncode == 0, cut.stderr
    answer = orjson.loads(cut.stdout)
    assert answer["truncated"] and answer["omittedNodes"] > 0
    assert (
        f"showing 2 nodes; the graph was cut at --node-limit 2 "
        f"({answer['omittedNodes']} more nodes found were left out)"
    ) in cut.stderr


CLI_REFUSED: list[tuple[list[str], str]] = [
    ([T, "--since", "last tuesday"], "--since"),
    ([T, "--until", "2026-13-45"], "--until"),
    ([T, "--since", DAY2, "--until", DAY1], "--since"),
    ([T, "--since", DAY1, "--until", DAY1], "--since"),
    ([T, "--as-of", DAY2, "--since", DAY1], "--as-of"),
    ([T, "--run", RUNS["load1"], "--until", DAY2], "--run"),
    ([T, "--run", RUNS["load1"], "-g", "parent"], "--run"),
    ([RUN1], "--granularity"),
    ([RUN1, "-g", "dataset"], "--granularity"),
    (["run:nope", "-g", "run"], "run:<uuid>"),
    ([LOAD, "-g", "run"], "--granularity run"),
]


@pytest.mark.parametrize(("args", "named"), CLI_REFUSED)
def test_cli_refuses_bad_views_in_one_line(views_api: Api, args: list[str], named: str) -> None:
    """Refused before either source is opened (``read_view`` runs first), so each case runs
    once, against the API; ``test_cli_columns_take_a_window`` refuses through both sources."""
    result = run_cli(*_where(views_api, "http"), "graph", *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.startswith("lineage: ") and result.stderr.count("\n") == 1, result.stderr
    assert named in result.stderr and "Traceback" not in result.stderr


def test_cli_unknown_granularity_is_a_usage_error(views_api: Api) -> None:
    result = run_cli("--url", views_api.url, "graph", T, "--granularity", "sideways")
    assert result.returncode == 2 and "--granularity" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("source", ["http", "store"])
def test_cli_columns_take_a_window(views_api: Api, source: str) -> None:
    where = _where(views_api, source)
    bad = run_cli(*where, "columns", f"{NS}:t", "--since", DAY2, "--until", DAY1)
    assert bad.returncode == 2 and "--since" in bad.stderr and bad.stderr.count("\n") == 1
    mixed = run_cli(*where, "columns", f"{NS}:t", "--as-of", DAY2, "--until", DAY3)
    assert mixed.returncode == 2 and "--as-of" in mixed.stderr
