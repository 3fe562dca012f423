"""``GET /api/v1/runlineage/upstream`` (Marquez's getRunLineageUpstream) over real HTTP, from the
sql, document and graph stores (the helpers of ``test_api_marquez``), each answer validated by
``openapi_check`` and the three stores answering alike.

The history is a 3-step pipeline: ``ingest`` reads an external feed and writes ``stg.a`` (twice,
each time with its own ``version`` facet, and a third time failing), ``transform`` turns ``stg.a``
into ``stg.b`` (twice: once between the two ingests, once after both), ``report`` reads
``stg.b`` and ``stg.a`` (once by time, once naming ``stg.a``'s first version, once still running).
Dataset versions are keyed on content (the ``version`` facet, else the schema), not on runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_helpers import PRODUCER
from jsonschema import ValidationError
from openapi_check import validate_operation
from test_api_marquez import _q, open_apis

NS = "etl"
PG = "postgres://rl.example:5432"
SPEC = "https://openlineage.io/spec"
NAMES = ("i1", "i2", "i3", "t1", "t2", "rep_time", "rep_version", "rep_live")
RUNS = {name: str(uuid.UUID(int=0x1400 + i, version=4)) for i, name in enumerate(NAMES)}
URL = "/api/v1/runlineage/upstream"


def _ds(name: str, version: str | None = None) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if version is not None:
        facets["version"] = {
            "_producer": PRODUCER,
            "_schemaURL": f"{SPEC}/facets/1-0-1/DatasetVersionDatasetFacet.json",
            "datasetVersion": version,
        }
    return {"namespace": PG, "name": name, "facets": facets}


def _run(
    job: str,
    run: str,
    steps: list[tuple[str, str]],
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    return [
        {
            "eventType": kind,
            "eventTime": f"2025-05-01T{at}Z",
            "run": {"runId": RUNS[run], "facets": {}},
            "job": {"namespace": NS, "name": job, "facets": {}},
            "inputs": inputs,
            "outputs": outputs,
            "producer": PRODUCER,
            "schemaURL": f"{SPEC}/2-0-2/OpenLineage.json#/$defs/RunEvent",
        }
        for kind, at in steps
    ]


def pipeline() -> list[dict[str, Any]]:
    feed = _ds("ext.feed")  # an external source: no run writes it
    done = "COMPLETE"
    return [
        *_run("ingest", "i1", [("START", "01:00:00"), (done, "01:10:00")], [feed], [_ds("stg.a", "v1")]),
        *_run("transform", "t1", [("START", "01:30:00"), (done, "01:40:00")], [_ds("stg.a")], [_ds("stg.b")]),
        *_run("ingest", "i2", [("START", "02:00:00"), (done, "02:10:00")], [feed], [_ds("stg.a", "v2")]),
        # The latest writer before t2 starts, but it failed: t2 still reads i2's version.
        *_run("ingest", "i3", [("START", "02:15:00"), ("FAIL", "02:20:00")], [feed], [_ds("stg.a")]),
        *_run("transform", "t2", [("START", "02:30:00"), (done, "02:40:00")], [_ds("stg.a")], [_ds("stg.b")]),
        *_run("report", "rep_time", [("START", "03:00:00"), (done, "03:05:00")], [_ds("stg.b"), _ds("stg.a")], []),
        *_run("report", "rep_version", [("START", "03:30:00"), (done, "03:35:00")], [_ds("stg.b"), _ds("stg.a", "v1")], []),
        *_run("report", "rep_live", [("START", "04:00:00")], [_ds("stg.b")], []),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def apis(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, httpx.Client]]:
    with open_apis(request, tmp_path_factory, pipeline()) as clients:
        yield clients


def _upstream(client: httpx.Client, run: str, **params: Any) -> dict[str, Any]:
    response = client.get(URL, params={"runId": RUNS[run], **params})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    validate_operation("getRunLineageUpstream", body)
    return body


def _names(body: dict[str, Any]) -> list[str]:
    by_id = {v: k for k, v in RUNS.items()}
    return [by_id[r["run"]["id"]] for r in body["runs"]]


def _inputs(body: dict[str, Any], run: str) -> dict[str, str | None]:
    """dataset name -> the producing run's name, for ``run``'s entry in the answer."""
    by_id = {v: k for k, v in RUNS.items()}
    entry = next(r for r in body["runs"] if r["run"]["id"] == RUNS[run])
    return {i["name"]: by_id.get(i.get("producedByRunId", "")) for i in entry["inputs"]}


def test_each_consumer_reads_the_version_of_the_latest_completed_writer(apis):
    """Two runs of each of the first two jobs: each points at the producer of its time."""
    for kind, api in apis.items():
        first = _upstream(api, "t1")
        assert _names(first) == ["t1", "i1"], kind
        assert _inputs(first, "t1") == {"stg.a": "i1"}
        second = _upstream(api, "t2")
        assert _names(second) == ["t2", "i2"], kind  # not i1 (older), not i3 (failed)
        assert _inputs(second, "t2") == {"stg.a": "i2"}


def test_three_steps_in_topological_order_with_a_diamond(apis):
    """rep_time reads stg.b (from t2) and stg.a (from i2, which t2 read too): i2 is one hop away
    either way, yet is listed after t2, which consumed it."""
    body = _upstream(apis["sql"], "rep_time")
    assert _names(body) == ["rep_time", "t2", "i2"]
    assert _inputs(body, "rep_time") == {"stg.a": "i2", "stg.b": "t2"}
    assert _inputs(body, "i2") == {"ext.feed": None}
    root = body["runs"][0]
    assert root["job"]["name"] == "report"
    assert root["run"] == {
        "id": RUNS["rep_time"],
        "start": "2025-05-01T03:00:00Z",
        "end": "2025-05-01T03:05:00Z",
        "status": "COMPLETED",
    }


def test_a_version_facet_names_the_producing_run(apis):
    """rep_version reads stg.a as version v1: i1's, though i2 wrote it later."""
    body = _upstream(apis["document"], "rep_version")
    assert _inputs(body, "rep_version") == {"stg.a": "i1", "stg.b": "t2"}
    assert _names(body) == ["rep_version", "i1", "t2", "i2"]


def test_depth_limits_the_walk_not_the_inputs(apis):
    api = apis["graph"]
    assert _names(_upstream(api, "rep_version", depth=1)) == ["rep_version", "i1", "t2"]
    one = _upstream(api, "rep_version", depth=1)
    assert _inputs(one, "t2") == {"stg.a": "i2"}  # named, though beyond the depth
    alone = _upstream(api, "rep_version", depth=0)
    assert _names(alone) == ["rep_version"]
    assert _inputs(alone, "rep_version") == {"stg.a": "i1", "stg.b": "t2"}
    assert _upstream(api, "rep_version") == _upstream(api, "rep_version", depth=20)


def test_ids_are_the_versions_the_other_reads_serve(apis):
    """Dataset and job versions are the ids of getDatasetVersions and getRun, not new ones; an
    external source reads the one version its dataset has, with no producer."""
    api = apis["sql"]
    body = _upstream(api, "rep_time")
    versions = api.get(f"/api/v1/namespaces/{_q(PG)}/datasets/stg.a/versions").json()["versions"]
    made_by = {v["createdByRun"]["id"]: v["version"] for v in versions}
    root = {i["name"]: i for i in body["runs"][0]["inputs"]}
    assert root["stg.a"]["version"] == made_by[RUNS["i2"]]
    run = api.get(f"/api/v1/jobs/runs/{RUNS['rep_time']}").json()
    assert body["runs"][0]["job"] == run["jobVersion"]
    feed = api.get(f"/api/v1/namespaces/{_q(PG)}/datasets/ext.feed/versions").json()["versions"]
    (external,) = body["runs"][2]["inputs"]
    assert external == {"namespace": PG, "name": "ext.feed", "version": feed[0]["version"]}


def test_versions_are_keyed_on_content_not_on_runs(apis):
    """stg.a has the two versions its ``version`` facets name (the failed i3 sent none: it adds to
    v2, the version current before it); stg.b, written twice without version or schema, has one
    version, which both of its readers read. An input's own version facet names its version."""
    for kind, api in apis.items():
        base = f"/api/v1/namespaces/{_q(PG)}/datasets"
        a = api.get(f"{base}/stg.a/versions").json()["versions"]
        assert [v["createdByRun"]["id"] for v in a] == [RUNS["i2"], RUNS["i1"]], kind
        v2, v1 = (v["version"] for v in a)
        (b,) = api.get(f"{base}/stg.b/versions").json()["versions"]
        assert b["createdByRun"]["id"] == RUNS["t1"], kind  # its first writer
        read = {
            run: {i["name"]: i.get("version") for i in _upstream(api, run)["runs"][0]["inputs"]}
            for run in ("t1", "t2", "rep_time", "rep_version")
        }
        assert read["t1"] == {"stg.a": v1} and read["t2"] == {"stg.a": v2}, kind
        assert read["rep_time"] == {"stg.a": v2, "stg.b": b["version"]}, kind
        assert read["rep_version"] == {"stg.a": v1, "stg.b": b["version"]}, kind
        current = api.get(f"{base}/stg.a").json()["currentVersion"]
        assert current == v2, kind  # rep_version read v1 later, but named it: no new version


def test_a_running_run_has_no_end(apis):
    body = _upstream(apis["sql"], "rep_live")
    assert body["runs"][0]["run"] == {
        "id": RUNS["rep_live"],
        "start": "2025-05-01T04:00:00Z",
        "status": "RUNNING",
    }
    assert _names(body) == ["rep_live", "t2", "i2"]


def test_the_three_stores_answer_alike(apis):
    for run in NAMES:
        answers = {kind: _upstream(api, run) for kind, api in apis.items()}
        assert answers["document"] == answers["sql"], run
        assert answers["graph"] == answers["sql"], run


def test_unknown_run_is_404_and_malformed_is_422(apis):
    api = apis["sql"]
    missing = api.get(URL, params={"runId": str(uuid.UUID(int=7))})
    assert missing.status_code == 404
    assert missing.json()["reason"] == "not_found"
    for params in ({"runId": "not-a-uuid"}, {}, {"runId": RUNS["t1"], "depth": -1}):
        bad = api.get(URL, params=params)
        assert bad.status_code == 422, (params, bad.text)
    upper = api.get(URL, params={"runId": RUNS["t1"].upper()})
    assert upper.status_code == 200 and upper.json() == _upstream(api, "t1")


def test_the_check_fails_what_marquez_would_not_send():
    good = {
        "runs": [
            {
                "job": {"namespace": NS, "name": "t", "version": RUNS["i1"]},
                "run": {"id": RUNS["t1"], "status": "COMPLETED"},
                "inputs": [{"namespace": PG, "name": "a", "producedByRunId": RUNS["i1"]}],
            },
            {
                "job": {"namespace": NS, "name": "i", "version": RUNS["i2"]},
                "run": {"id": RUNS["i1"], "status": "COMPLETED"},
                "inputs": [],
            },
        ]
    }
    validate_operation("getRunLineageUpstream", good)
    wrong: list[dict[str, Any]] = [
        {"runs": [{**good["runs"][0], "run": {"id": RUNS["t1"], "state": "COMPLETED"}}]},
        {"runs": [{**good["runs"][0], "job": {"namespace": NS, "name": "t"}}]},
        {"runs": [{**good["runs"][0], "run": {"id": RUNS["t1"], "status": "DONE"}}]},
        {"runs": [{**good["runs"][0], "inputs": [{"namespace": PG, "name": "a", "version": "x"}]}]},
        {"runs": [good["runs"][1], good["runs"][0]]},  # a producer before its consumer
        {"runs": [good["runs"][0], good["runs"][0]]},
        {"run": []},
    ]
    for body in wrong:
        with pytest.raises(ValidationError):
            validate_operation("getRunLineageUpstream", body)


def test_marquez_python_has_no_run_lineage_method():
    """marquez-python (0.50) offers no call for this endpoint, so there is nothing to call as it
    would; if a release adds one, ``test_api_marquez`` fails until it is called there."""
    from marquez_client import MarquezClient

    assert not [n for n in dir(MarquezClient) if "upstream" in n or "run_lineage" in n]
