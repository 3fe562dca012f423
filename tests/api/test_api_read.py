"""The read API over a known pipeline: Marquez's shapes (validated against shared/marquez/
openapi.yml), lineage directions and depth, jobs with latest run and state, runs, events, search."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from api_helpers import HOSTILE_DATASET, HOSTILE_JOB, PG, validate_marquez


def _lineage(api, node, **params):
    response = api.client.get("/api/v1/lineage", params={"nodeId": node, **params})
    assert response.status_code == 200, response.text
    body = response.json()
    validate_marquez("LineageGraph", body)
    return body


def _ids(body):
    return {n["id"] for n in body["graph"]}


def test_lineage_both_directions_in_marquez_shape(api, loaded):
    # direction=both: the directed walks (without it the API walks as Marquez does, undirected:
    # tests/api/test_api_marquez_walk.py)
    body = _lineage(api, f"dataset:{PG}:stg.orders", depth=20, direction="both")
    assert body["graph"][0]["id"] == f"dataset:{PG}:stg.orders"  # the root first
    assert _ids(body) == {
        f"dataset:{PG}:raw.orders",
        "job:shop:extract",
        f"dataset:{PG}:stg.orders",
        "job:shop:clean",
        f"dataset:{PG}:clean.orders",
        "job:shop:audit",
        f"dataset:{PG}:audit.log",
        "job:shop:report",
        f"dataset:{PG}:mart.daily",
        f"job:shop:{HOSTILE_JOB}",
        f"dataset:{PG}:export.csv",
    }
    nodes = {n["id"]: n for n in body["graph"]}
    stg = nodes[f"dataset:{PG}:stg.orders"]
    assert stg["type"] == "DATASET"
    assert stg["data"]["id"] == {"namespace": PG, "name": "stg.orders"}
    assert stg["inEdges"] == [{"origin": "job:shop:extract", "destination": stg["id"]}]
    assert sorted(e["destination"] for e in stg["outEdges"]) == ["job:shop:audit", "job:shop:clean"]
    # Every edge appears on both of its ends.
    for node in body["graph"]:
        for edge in node["outEdges"]:
            if edge["destination"] in nodes:
                assert edge in nodes[edge["destination"]]["inEdges"]
    assert nodes["job:shop:clean"]["data"]["latestRun"]["state"] == "FAILED"
    assert nodes["job:shop:extract"]["data"]["latestRun"]["state"] == "COMPLETED"


def test_lineage_direction_and_depth(api, loaded):
    up = _lineage(api, f"dataset:{PG}:mart.daily", direction="upstream", depth=1)
    assert _ids(up) == {
        f"dataset:{PG}:mart.daily",
        "job:shop:report",
        f"dataset:{PG}:clean.orders",
        f"dataset:{PG}:{HOSTILE_DATASET}",
    }
    up2 = _lineage(api, f"dataset:{PG}:mart.daily", direction="upstream", depth=2)
    assert _ids(up2) == _ids(up) | {"job:shop:clean", f"dataset:{PG}:stg.orders"}
    down = _lineage(api, "job:shop:extract", direction="downstream", depth=1)
    assert "job:shop:report" not in _ids(down)
    assert {"job:shop:clean", "job:shop:audit", f"dataset:{PG}:clean.orders"} <= _ids(down)
    assert f"dataset:{PG}:raw.orders" not in _ids(down)
    deep = _lineage(api, "job:shop:extract", direction="downstream", depth=10)
    assert {f"job:shop:{HOSTILE_JOB}", f"dataset:{PG}:export.csv"} <= _ids(deep)


def test_unknown_node_is_404_and_bad_node_id_is_400(api, loaded):
    missing = api.client.get("/api/v1/lineage", params={"nodeId": "dataset:nowhere:nothing"})
    assert missing.status_code == 404
    assert missing.json()["reason"] == "not_found"
    for bad in ("orders", "table:ns:x", "dataset:onlyone", "datasetField:ns:t:col"):
        response = api.client.get("/api/v1/lineage", params={"nodeId": bad})
        assert response.status_code == 400, bad
        assert response.json()["reason"] == "invalid_node_id"


def test_namespaces_jobs_and_datasets(api, loaded):
    namespaces = api.client.get("/api/v1/namespaces").json()
    validate_marquez("NamespaceList", namespaces)
    assert [n["name"] for n in namespaces["namespaces"]] == sorted([PG, "shop"])

    jobs = api.client.get("/api/v1/namespaces/shop/jobs").json()
    validate_marquez("JobList", jobs)
    by_name = {j["name"]: j for j in jobs["jobs"]}
    assert set(by_name) == {"extract", "clean", "audit", "report", HOSTILE_JOB}
    assert by_name["clean"]["latestRun"]["state"] == "FAILED"
    assert by_name["clean"]["latestRun"]["durationMs"] == 12000
    assert by_name["clean"]["latestRun"]["id"] == loaded["runs"]["clean"]
    assert sorted(by_name["report"]["inputs"], key=lambda d: d["name"]) == sorted(
        [{"namespace": PG, "name": HOSTILE_DATASET}, {"namespace": PG, "name": "clean.orders"}],
        key=lambda d: d["name"],
    )
    assert by_name["report"]["outputs"] == [{"namespace": PG, "name": "mart.daily"}]
    for job in jobs["jobs"]:
        validate_marquez("Job", job)

    paged = api.client.get("/api/v1/namespaces/shop/jobs", params={"limit": 2, "offset": 1})
    assert [j["name"] for j in paged.json()["jobs"]] == [j["name"] for j in jobs["jobs"]][1:3]

    # A namespace holding '/' and ':' works URL-encoded in the path, as Marquez clients send it.
    datasets = api.client.get(f"/api/v1/namespaces/{quote(PG, safe='')}/datasets").json()
    validate_marquez("DatasetList", datasets)
    assert {d["name"] for d in datasets["datasets"]} == {
        "raw.orders",
        "stg.orders",
        "clean.orders",
        "audit.log",
        "mart.daily",
        "export.csv",
        HOSTILE_DATASET,
    }
    assert api.client.get("/api/v1/namespaces/none/jobs").json() == {"jobs": [], "totalCount": 0}


def test_one_job_with_runs_and_io(api, loaded):
    job = api.client.get("/api/v1/namespaces/shop/jobs/audit").json()
    validate_marquez("Job", job)
    assert job["inputs"] == [{"namespace": PG, "name": "stg.orders"}]
    assert job["outputs"] == [{"namespace": PG, "name": "audit.log"}]
    assert job["latestRun"]["state"] == "COMPLETED"
    hostile = api.client.get(f"/api/v1/namespaces/shop/jobs/{quote(HOSTILE_JOB, safe='')}")
    assert hostile.status_code == 200
    assert hostile.json()["name"] == HOSTILE_JOB
    assert api.client.get("/api/v1/namespaces/shop/jobs/nope").status_code == 404


def test_runs_of_a_job_and_one_run(api, loaded):
    runs = api.client.get("/api/v1/namespaces/shop/jobs/extract/runs").json()
    validate_marquez("RunList", runs)
    (run,) = runs["runs"]
    assert run["id"] == loaded["runs"]["extract"]
    assert run["state"] == "COMPLETED"
    assert run["startedAt"] == "2025-03-01T00:00:00Z"
    assert run["endedAt"] == "2025-03-01T00:01:05Z"
    assert run["durationMs"] == 65000

    one = api.client.get(f"/api/v1/jobs/runs/{loaded['runs']['clean']}").json()
    validate_marquez("Run", one)
    assert one["state"] == "FAILED" and one["durationMs"] == 12000


def test_events_of_a_run_in_time_order(api, loaded):
    run_id = loaded["runs"]["report"]
    body = api.client.get(f"/api/v1/jobs/runs/{run_id}/events").json()
    validate_marquez("LineageEventList", body)
    assert body["totalCount"] == 2
    assert [e["eventType"] for e in body["events"]] == ["START", "COMPLETE"]
    sent = [e for e in loaded["events"] if e["run"]["runId"] == run_id]
    assert body["events"] == sent  # exactly as received, unknown keys and all
    upper = api.client.get(f"/api/v1/jobs/runs/{run_id.upper()}/events")
    assert upper.status_code == 200 and upper.json() == body
    missing = api.client.get("/api/v1/jobs/runs/00000000-0000-4000-8000-000000000000/events")
    assert missing.status_code == 404


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"q": "orders"}, {"raw.orders", "stg.orders", "clean.orders"}),
        ({"q": "ORDERS", "filter": "dataset"}, {"raw.orders", "stg.orders", "clean.orders"}),
        ({"q": "a", "filter": "job"}, {"extract", "clean", "audit"}),
        ({"q": "<script>"}, {HOSTILE_JOB}),
        ({"q": "s_g%rs"}, {"stg.orders"}),  # Marquez's wildcards: '_' one character, '%' any
    ],
)
def test_search_by_name(api, loaded, params, expected):
    body = api.client.get("/api/v1/search", params=params).json()
    validate_marquez("SearchResultList", body)
    assert {r["name"] for r in body["results"]} == expected
    assert body["totalCount"] == len(body["results"])
    for result in body["results"]:
        prefix = "job" if result["type"] == "JOB" else "dataset"
        assert result["nodeId"] == f"{prefix}:{result['namespace']}:{result['name']}"


def test_health_names_the_query_store(api):
    assert api.client.get("/api/v1/health").json() == {
        "status": "ok",
        "ingest": True,
        "query_store": "sql",
    }
