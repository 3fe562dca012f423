"""History over HTTP and in the ``lineage`` CLI (issue 16, item 1): ``asOf`` and ``runId`` on
the lineage, column-lineage, job, dataset and versions reads, access by namespace kept, bad input
named; ``lineage graph`` and ``lineage columns`` ``--as-of`` and ``--run`` through the API (--url)
and the store (--config). The equality of the stores is tested in
tests/stores_nosql/test_history.py and tests/api/test_api_history_stores.py; this is the sql
store behind a real server::

    t=0   run RA: lake:raw -> [alpha:ja] -> lake:mid
    t=10  run RB: lake:mid -> [beta:jb]  -> lake:b_out      (beta: the reader may not read it)
    t=20  run RC: lake:mid -> [alpha:jc] -> lake:c_out
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from api_helpers import API_KEY, Api, column_facet, run_cli, run_event, when

from lineage_sdk.collector.api.access import hash_key
from lineage_sdk.collector.settings import ApiKeyConfig

READER_KEY = "lsk_history-reader-0123456789abcdef0123"
RA, RB, RC = (f"0190{i}000-0000-7000-8000-00000000000a" for i in range(1, 4))
RUN_COL = RC.replace("000a", "000c")
MID = "dataset:lake:mid"


@pytest.fixture
def history_api(make_api: Callable[..., Api]) -> Api:
    keys = {"reader": ApiKeyConfig(key_hash=hash_key(READER_KEY), read=["alpha", "lake"])}
    api = make_api(api_key=API_KEY, keys=keys)
    events = []
    for run_id, job, ns, out, at in (
        (RA, "ja", "alpha", "mid", 0),
        (RB, "jb", "beta", "b_out", 10),
        (RC, "jc", "alpha", "c_out", 20),
    ):
        inputs = [("lake", "raw")] if job == "ja" else [("lake", "mid")]
        for kind, delta in (("START", 0), ("COMPLETE", 1)):
            events.append(
                run_event(
                    job,
                    namespace=ns,
                    event_type=kind,
                    run_id=run_id,
                    inputs=inputs,
                    outputs=[("lake", out)],
                    seconds=at + delta,
                )
            )
    answer = api.client.post("/api/v1/lineage/batch", json=events)
    assert answer.status_code == 200, answer.text
    return api


def _ids(response: httpx.Response) -> set[str]:
    assert response.status_code == 200, response.text
    return {node["id"] for node in response.json()["graph"]}


def _lineage(api: Api, **params: Any) -> httpx.Response:
    return api.client.get("/api/v1/lineage", params={"nodeId": MID, **params})


def test_as_of_answers_the_past_and_now_the_present(history_api: Api) -> None:
    early = _ids(_lineage(history_api, asOf=when(15), direction="downstream"))
    assert "job:beta:jb" in early and "job:alpha:jc" not in early
    late = _ids(_lineage(history_api, asOf=when(25), direction="downstream"))
    assert {"job:beta:jb", "job:alpha:jc", "dataset:lake:c_out"} <= late
    now = _lineage(history_api, asOf="2100-01-01").json()
    assert now == _lineage(history_api).json()
    # Before anything was recorded, the node is unknown.
    missing = _lineage(history_api, asOf="2024-01-01")
    assert missing.status_code == 404 and "nothing is recorded" in missing.text


def test_run_id_answers_one_run_and_unknown_runs_are_404(history_api: Api) -> None:
    answer = history_api.client.get(
        "/api/v1/lineage", params={"nodeId": "job:alpha:ja", "runId": RA}
    )
    assert _ids(answer) == {"job:alpha:ja", "dataset:lake:raw", "dataset:lake:mid"}
    run = next(n for n in answer.json()["graph"] if n["id"] == "job:alpha:ja")
    assert run["data"]["latestRun"]["id"] == RA
    unknown = _lineage(history_api, runId="no-such-run")
    assert unknown.status_code == 404 and "no-such-run" in unknown.text


def test_bad_as_of_is_422_naming_it(history_api: Api) -> None:
    answer = _lineage(history_api, asOf="last tuesday")
    assert answer.status_code == 422
    assert "asOf must be an RFC 3339 time" in answer.text


def test_history_keeps_access_by_namespace(history_api: Api) -> None:
    with httpx.Client(
        base_url=history_api.url, headers={"Authorization": f"Bearer {READER_KEY}"}, timeout=30
    ) as reader:
        ids = _ids(reader.get("/api/v1/lineage", params={"nodeId": MID, "asOf": when(25)}))
        assert "job:alpha:jc" in ids
        assert not {"job:beta:jb", "dataset:lake:b_out"} & ids
        # A run of a hidden job answers as an unknown run (issue 30), not as a pruned graph.
        ran = reader.get("/api/v1/lineage", params={"nodeId": MID, "runId": RB})
        assert ran.status_code == 404 and "no events recorded for run" in ran.text
        hidden = reader.get("/api/v1/lineage", params={"nodeId": "job:beta:jb", "asOf": when(25)})
        assert hidden.status_code == 404


@pytest.mark.parametrize("source", ["http", "store"])
def test_cli_as_of_and_run(history_api: Api, source: str) -> None:
    where = (
        ["--url", history_api.url, "--api-key", API_KEY]
        if source == "http"
        else ["--config", str(history_api.config_path)]
    )
    early = run_cli(*where, "graph", MID, "--as-of", when(15), "-f", "json")
    assert early.returncode == 0, early.stderr
    ids = {n["id"] for n in orjson.loads(early.stdout)["graph"]}
    assert "job:beta:jb" in ids and "job:alpha:jc" not in ids
    run = run_cli(*where, "graph", "job:alpha:jc", "--run", RC, "--upstream")
    assert run.returncode == 0, run.stderr
    assert "lake:mid" in run.stdout and "ja" not in run.stdout
    bad = run_cli(*where, "graph", MID, "--as-of", "soon")
    assert bad.returncode == 2 and "must be an RFC 3339 time" in bad.stderr
    unknown = run_cli(*where, "graph", MID, "--run", "no-such-run")
    assert unknown.returncode == 1 and "no-such-run" in unknown.stderr


def test_column_lineage_takes_as_of(history_api: Api) -> None:
    params = {"nodeId": "dataset:lake:mid"}
    bad = history_api.client.get("/api/v1/column-lineage", params={**params, "asOf": "then"})
    assert bad.status_code == 422 and "asOf must be" in bad.text
    # No event of this corpus states column lineage: nothing to answer, then or now.
    past = history_api.client.get("/api/v1/column-lineage", params={**params, "asOf": when(25)})
    assert past.status_code == 404 and "no column lineage" in past.text


def test_dataset_read_takes_as_of(history_api: Api) -> None:
    path = "/api/v1/namespaces/lake/datasets/c_out"
    before = history_api.client.get(path, params={"asOf": when(15)})
    assert before.status_code == 404 and "up to" in before.text
    after = history_api.client.get(path, params={"asOf": when(25)})
    assert after.status_code == 200 and after.json()["name"] == "c_out"
    assert history_api.client.get(path, params={"asOf": "2100-01-01"}).json() == (
        history_api.client.get(path).json()
    )
    bad = history_api.client.get(path, params={"asOf": "never"})
    assert bad.status_code == 422 and "asOf must be" in bad.text


def test_job_read_as_of_answers_the_job_then(history_api: Api) -> None:
    # ja's run RA: START at t=0, COMPLETE at t=1. At t=0 it is running; at t=1 it completed.
    path = "/api/v1/namespaces/alpha/jobs/ja"
    running = history_api.client.get(path, params={"asOf": when(0)})
    assert running.status_code == 200, running.text
    job = running.json()
    assert job["latestRun"]["id"] == RA and job["latestRun"]["state"] == "RUNNING"
    assert job["inputs"] == [{"namespace": "lake", "name": "raw"}]
    assert job["outputs"] == [{"namespace": "lake", "name": "mid"}]
    assert job["updatedAt"] == job["createdAt"]
    done = history_api.client.get(path, params={"asOf": when(1)}).json()
    assert done["latestRun"]["state"] == "COMPLETED"
    # At or after the newest event: the plain read, field for field.
    assert history_api.client.get(path, params={"asOf": "2100-01-01"}).json() == (
        history_api.client.get(path).json()
    )
    # jc's first event is at t=20: before it, the job is unknown then; a bad time is named.
    before = history_api.client.get("/api/v1/namespaces/alpha/jobs/jc", params={"asOf": when(19)})
    assert before.status_code == 404 and "up to" in before.text
    bad = history_api.client.get(path, params={"asOf": "yesterday"})
    assert bad.status_code == 422 and "asOf" in bad.text


def test_job_dataset_and_versions_of_a_run_keep_access_by_namespace(history_api: Api) -> None:
    jb, b_out = "/api/v1/namespaces/beta/jobs/jb", "/api/v1/namespaces/lake/datasets/b_out"
    admin = history_api.client
    assert admin.get(jb, params={"runId": RB}).json()["latestRun"]["id"] == RB
    assert admin.get(b_out, params={"runId": RB}).json()["name"] == "b_out"
    elsewhere = admin.get(jb, params={"runId": RA})
    assert elsewhere.status_code == 404 and RA in elsewhere.text and "name no job" in elsewhere.text
    with httpx.Client(
        base_url=history_api.url, headers={"Authorization": f"Bearer {READER_KEY}"}, timeout=30
    ) as reader:
        for path in (jb, f"{jb}/versions"):
            for params in ({"runId": RB}, {"asOf": when(25)}, {"runId": RB, "asOf": when(25)}):
                hidden = reader.get(path, params=params)
                assert hidden.status_code == 404, (path, params, hidden.text)
        # b_out is readable, but only beta's hidden run wrote it: answered as an unknown run.
        unknown_run = RB[:-1] + ("0" if RB[-1] != "0" else "1")
        for path in (b_out, f"{b_out}/versions"):
            hidden = reader.get(path, params={"runId": RB})
            unknown = reader.get(path, params={"runId": unknown_run})
            assert hidden.status_code == unknown.status_code == 404
            assert hidden.text == unknown.text.replace(unknown_run, RB)
        ja = reader.get("/api/v1/namespaces/alpha/jobs/ja", params={"runId": RA})
        assert ja.status_code == 200 and ja.json()["latestRun"]["id"] == RA
        versions = reader.get("/api/v1/namespaces/alpha/jobs/ja/versions", params={"runId": RA})
        assert versions.status_code == 200 and versions.json()["totalCount"] == 1
        mid = reader.get("/api/v1/namespaces/lake/datasets/mid/versions", params={"asOf": when(5)})
        assert mid.status_code == 200 and mid.json()["totalCount"] >= 1


@pytest.mark.parametrize("source", ["http", "store"])
def test_cli_columns_as_of_and_run(history_api: Api, source: str) -> None:
    event = run_event(
        "jcol",
        namespace="alpha",
        run_id=RUN_COL,
        inputs=[("lake", "colin")],
        seconds=30,
    )
    event["outputs"] = [
        {
            "namespace": "lake",
            "name": "colout",
            "facets": {"columnLineage": column_facet({"x": [("lake", "colin", "a")]})},
        }
    ]
    assert history_api.client.post("/api/v1/lineage", json=event).status_code in (200, 201)
    where = (
        ["--url", history_api.url, "--api-key", API_KEY]
        if source == "http"
        else ["--config", str(history_api.config_path)]
    )
    target = "dataset:lake:colout:x"
    then = run_cli(*where, "columns", target, "--as-of", when(35), "--json")
    assert then.returncode == 0, then.stderr
    assert "datasetField:lake:colin:a" in {n["id"] for n in orjson.loads(then.stdout)["graph"]}
    before = run_cli(*where, "columns", target, "--as-of", when(25))
    assert before.returncode == 1, before.stdout
    bad = run_cli(*where, "columns", target, "--as-of", "soon")
    assert bad.returncode == 2 and "must be an RFC 3339 time" in bad.stderr
    ran = run_cli(*where, "columns", target, "--run", RUN_COL, "--json")
    assert ran.returncode == 0, ran.stderr
    assert "datasetField:lake:colin:a" in {n["id"] for n in orjson.loads(ran.stdout)["graph"]}
    other = run_cli(*where, "columns", target, "--run", RA)
    assert other.returncode == 1 and "no column lineage" in other.stderr
    unknown = run_cli(*where, "columns", target, "--run", "no-such-run")
    assert unknown.returncode == 1 and "no-such-run" in unknown.stderr
    before = run_cli(*where, "columns", target, "--run", RUN_COL, "--as-of", when(25))
    assert before.returncode == 1 and "up to" in before.stderr
