"""Bounded queries over HTTP and in the CLI (issue 16, item 8): ``nodeLimit`` on the three graph
reads, ``truncated``/``nodeLimit`` in their answers (validated against Marquez's document), bad
limits named, access kept on a cut graph, ``lineage graph|columns --node-limit`` and its note.
The cut itself, the same in every store and in history, is tested in
tests/stores_nosql/test_bounded.py; this is the sql store behind a real server::

    lake:src0 -> [alpha:c1] -> lake:src1 -> [alpha:c2] -> lake:hub
    lake:hub -> [alpha:fan00 .. fan11] -> lake:out00 .. out11
    lake:hub -> [beta:peek] -> lake:peeked                  (beta: the reader may not read it)
    lake:s0 -> [alpha:s1] -> lake:s1 -> ... -> [alpha:s6] -> lake:s6   (one run each, in order)
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from api_helpers import API_KEY, Api, column_facet, run_cli, run_event
from openapi_check import validate_operation

from lineage_sdk.collector.api.access import hash_key
from lineage_sdk.collector.settings import ApiKeyConfig

READER_KEY = "lsk_bounded-reader-0123456789abcdef01234"
HUB = "dataset:lake:hub"
RUNS = [str(uuid.UUID(int=0xB00 + i, version=4)) for i in range(1, 7)]
FULL_SIZE = 5 + 12 * 2 + 2  # upstream chain and hub, the fan, beta's job and output


def _events() -> list[dict[str, Any]]:
    events = [
        run_event("c1", namespace="alpha", inputs=[("lake", "src0")], outputs=[("lake", "src1")]),
        run_event("c2", namespace="alpha", inputs=[("lake", "src1")], outputs=[("lake", "hub")]),
        run_event("peek", namespace="beta", inputs=[("lake", "hub")], outputs=[("lake", "peeked")]),
    ]
    events += [
        run_event(
            f"fan{i:02}",
            namespace="alpha",
            inputs=[("lake", "hub")],
            outputs=[("lake", f"out{i:02}")],
        )
        for i in range(12)
    ]
    for i, run_id in enumerate(RUNS, start=1):
        for kind, delta in (("START", 0), ("COMPLETE", 1)):
            events.append(
                run_event(
                    f"s{i}",
                    namespace="alpha",
                    event_type=kind,
                    run_id=run_id,
                    inputs=[("lake", f"s{i - 1}")],
                    outputs=[("lake", f"s{i}")],
                    seconds=100 + 10 * i + delta,
                )
            )
    wide = run_event("widen", namespace="alpha", inputs=[("lake", "narrow")], seconds=200)
    wide["outputs"] = [
        {
            "namespace": "lake",
            "name": "wide",
            "facets": {
                "columnLineage": column_facet(
                    {
                        "x": [("lake", "narrow", f"a{i}") for i in range(6)],
                        "y": [("lake", "narrow", "a0")],
                    }
                )
            },
        }
    ]
    return [*events, wide]


@pytest.fixture
def bounded_api(make_api: Callable[..., Api]) -> Api:
    keys = {"reader": ApiKeyConfig(key_hash=hash_key(READER_KEY), read=["alpha", "lake"])}
    api = make_api(api_key=API_KEY, keys=keys)
    answer = api.client.post("/api/v1/lineage/batch", json=_events())
    assert answer.status_code == 200, answer.text
    return api


def _get(client: httpx.Client, path: str, **params: Any) -> dict[str, Any]:
    answer = client.get(path, params=params)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _ids(body: dict[str, Any]) -> set[str]:
    return {node["id"] for node in body["graph"]}


def _connected(body: dict[str, Any], root: str) -> bool:
    """Every node reaches the root through the answer's own edges (either way)."""
    near: dict[str, set[str]] = {}
    for node in body["graph"]:
        for edge in (*node["inEdges"], *node["outEdges"]):
            near.setdefault(edge["origin"], set()).add(edge["destination"])
            near.setdefault(edge["destination"], set()).add(edge["origin"])
    seen, queue = {root}, [root]
    for current in queue:
        for nxt in near.get(current, ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return _ids(body) <= seen


def test_lineage_is_cut_at_node_limit_and_says_so(bounded_api: Api) -> None:
    client = bounded_api.client
    full = _get(client, "/api/v1/lineage", nodeId=HUB)
    assert (full["truncated"], full["nodeLimit"], len(full["graph"])) == (False, 1000, FULL_SIZE)
    validate_operation("getLineage", full)
    cut = _get(client, "/api/v1/lineage", nodeId=HUB, nodeLimit=5)
    validate_operation("getLineage", cut)
    assert (cut["truncated"], cut["nodeLimit"], len(cut["graph"])) == (True, 5, 5)
    # Nearest first, ties by id: the hub, then its jobs at one edge, by id.
    assert _ids(cut) == {
        HUB,
        "job:alpha:c2",
        "job:alpha:fan00",
        "job:alpha:fan01",
        "job:alpha:fan02",
    }
    assert _connected(cut, HUB)
    kept = _ids(cut)
    for node in cut["graph"]:
        for edge in (*node["inEdges"], *node["outEdges"]):
            assert {edge["origin"], edge["destination"]} <= kept
    # The boundary: exactly the limit is not a cut, one node fewer is.
    exact = _get(client, "/api/v1/lineage", nodeId=HUB, nodeLimit=FULL_SIZE)
    assert exact["truncated"] is False and len(exact["graph"]) == FULL_SIZE
    short = _get(client, "/api/v1/lineage", nodeId=HUB, nodeLimit=FULL_SIZE - 1)
    assert short["truncated"] is True and len(short["graph"]) == FULL_SIZE - 1


def test_history_paths_are_cut_alike(bounded_api: Api) -> None:
    client = bounded_api.client
    now = _get(client, "/api/v1/lineage", nodeId=HUB, nodeLimit=7)
    past = _get(client, "/api/v1/lineage", nodeId=HUB, nodeLimit=7, asOf="2100-01-01")
    assert past == now and past["truncated"] is True
    run = _get(client, "/api/v1/lineage", nodeId="job:alpha:s3", runId=RUNS[2], nodeLimit=2)
    assert run["truncated"] is True and run["nodeLimit"] == 2
    assert _ids(run) == {"job:alpha:s3", "dataset:lake:s2"}


@pytest.mark.parametrize(
    "path", ["/api/v1/lineage", "/api/v1/column-lineage", "/api/v1/runlineage/upstream"]
)
@pytest.mark.parametrize("bad", ["0", "100001", "many"])
def test_bad_node_limit_is_named(bounded_api: Api, path: str, bad: str) -> None:
    params = {"runId": RUNS[0]} if "runlineage" in path else {"nodeId": HUB}
    answer = bounded_api.client.get(path, params={**params, "nodeLimit": bad})
    assert answer.status_code in (400, 422) and "nodeLimit" in answer.text, answer.text
    assert "Traceback" not in answer.text


def test_column_lineage_is_cut(bounded_api: Api) -> None:
    client = bounded_api.client
    path = "/api/v1/column-lineage"
    full = _get(client, path, nodeId="datasetField:lake:wide:x")
    assert (full["truncated"], full["nodeLimit"], len(full["graph"])) == (False, 1000, 7)
    cut = _get(client, path, nodeId="datasetField:lake:wide:x", nodeLimit=3)
    validate_operation("getColumnLineage", cut)
    assert cut["truncated"] is True and cut["nodeLimit"] == 3
    assert _ids(cut) == {
        "datasetField:lake:wide:x",
        "datasetField:lake:narrow:a0",
        "datasetField:lake:narrow:a1",
    }
    root = next(n for n in cut["graph"] if n["id"] == "datasetField:lake:wide:x")
    assert [f["field"] for f in root["data"]["inputFields"]] == ["a0", "a1"]
    # Every field of a dataset is a root: past the limit, the roots are cut too (by id).
    roots = _get(client, path, nodeId="dataset:lake:wide", nodeLimit=1)
    assert _ids(roots) == {"datasetField:lake:wide:x"} and roots["truncated"] is True
    past = _get(client, path, nodeId="datasetField:lake:wide:x", nodeLimit=3, asOf="2100-01-01")
    assert past == cut


def test_run_lineage_is_cut(bounded_api: Api) -> None:
    client = bounded_api.client
    path = "/api/v1/runlineage/upstream"
    full = _get(client, path, runId=RUNS[-1])
    validate_operation("getRunLineageUpstream", full)
    assert [r["run"]["id"] for r in full["runs"]] == RUNS[::-1]
    assert full["truncated"] is False and full["nodeLimit"] == 1000
    cut = _get(client, path, runId=RUNS[-1], nodeLimit=3)
    validate_operation("getRunLineageUpstream", cut)
    assert [r["run"]["id"] for r in cut["runs"]] == RUNS[:-4:-1]
    assert cut["truncated"] is True and cut["nodeLimit"] == 3
    exact = _get(client, path, runId=RUNS[-1], nodeLimit=len(RUNS))
    assert exact["truncated"] is False and len(exact["runs"]) == len(RUNS)


def test_access_holds_on_a_cut_graph(bounded_api: Api) -> None:
    with httpx.Client(
        base_url=bounded_api.url, headers={"Authorization": f"Bearer {READER_KEY}"}, timeout=30
    ) as reader:
        for limit in (3, 8, 20, 1000):
            body = _get(reader, "/api/v1/lineage", nodeId=HUB, nodeLimit=limit)
            assert not {"job:beta:peek", "dataset:lake:peeked"} & _ids(body)
            assert len(body["graph"]) <= limit and _connected(body, HUB)
            assert body["nodeLimit"] == limit


def test_openapi_documents_node_limit(bounded_api: Api) -> None:
    paths = bounded_api.client.get("/openapi.json").json()["paths"]
    for path in ("/api/v1/lineage", "/api/v1/column-lineage", "/api/v1/runlineage/upstream"):
        (param,) = [p for p in paths[path]["get"]["parameters"] if p["name"] == "nodeLimit"]
        assert "lineage-sdk extension" in param["description"]
        assert param["schema"]["minimum"] == 1 and param["schema"]["maximum"] == 100_000
        assert param["schema"]["default"] == 1000


@pytest.mark.parametrize("source", ["http", "store"])
def test_cli_node_limit_and_note(bounded_api: Api, source: str) -> None:
    where = (
        ["--url", bounded_api.url, "--api-key", API_KEY]
        if source == "http"
        else ["--config", str(bounded_api.config_path)]
    )
    cut = run_cli(*where, "graph", HUB, "--node-limit", "3", "-f", "json")
    assert cut.returncode == 0, cut.stderr
    assert len(orjson.loads(cut.stdout)["graph"]) == 3
    assert "showing 3 nodes; the graph was cut at --node-limit 3" in cut.stderr
    whole = run_cli(*where, "graph", HUB, "--depth", "20")
    assert whole.returncode == 0, whole.stderr
    assert "cut at" not in whole.stderr and "fan11" in whole.stdout
    columns = run_cli(*where, "columns", "dataset:lake:wide:x", "--node-limit", "2")
    assert columns.returncode == 0, columns.stderr
    assert "showing 2 fields; the graph was cut at --node-limit 2" in columns.stderr
    impact = run_cli(*where, "impact", HUB, "--node-limit", "4", "-f", "json")
    assert impact.returncode == 0, impact.stderr
    assert len(orjson.loads(impact.stdout)) == 3  # the hub itself is not listed
    assert "showing 4 nodes; the graph was cut at --node-limit 4" in impact.stderr
    bad = run_cli(*where, "graph", HUB, "--node-limit", "0")
    assert bad.returncode == 2 and "--node-limit" in bad.stderr
