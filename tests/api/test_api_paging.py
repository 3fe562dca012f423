"""List routes page in the store: ``limit``/``offset`` pick the right items, and ``totalCount`` is
the size of the whole answer, not of the page. Asked of the engine over every backend (sql on
SQLite, document on SecantusDB, graph on FalkorDB, memory), over real HTTP."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from api_helpers import (
    ACCESS_KINDS,
    access_store,
    run_event,
    validate_marquez,
    validate_openapi_response,
)
from servers import FalkorDBServer, falkordb_server

from lineage_sdk.collector.api import ApiServer, create_app
from lineage_sdk.collector.engine import EngineStore

NS = "paged"
JOBS = [f"job{i}" for i in range(5)]  # job0 ran four times, the others once
DATASETS = [f"table{i}" for i in range(5)]  # jobI writes tableI


@pytest.fixture(scope="module")
def falkordb() -> Iterator[FalkorDBServer]:
    with falkordb_server(persistent=False) as server:
        yield server


@pytest.fixture(params=ACCESS_KINDS)
def store(request: pytest.FixtureRequest, tmp_path) -> Iterator[EngineStore]:
    with access_store(request, tmp_path) as opened:
        yield opened


@pytest.fixture
def client(store: EngineStore) -> Iterator[httpx.Client]:
    """The API over ``store``, holding five jobs and five datasets in ``paged``, one job in
    ``other``, and four runs of job0 (newest last)."""
    with ApiServer(create_app(store)) as server, httpx.Client(base_url=server.url) as http:
        events = []
        for i, job in enumerate(JOBS):
            for n in range(4 if i == 0 else 1):
                run_id = str(uuid.UUID(int=(i << 8) + n + 1, version=4))
                for kind, at in (("START", 10 * n), ("COMPLETE", 10 * n + 5)):
                    events.append(
                        run_event(
                            job,
                            namespace=NS,
                            event_type=kind,
                            run_id=run_id,
                            outputs=[(NS, DATASETS[i])],
                            seconds=at,
                        )
                    )
        events.append(run_event("lonely", namespace="other"))
        posted = http.post("/api/v1/lineage/batch", json=events)
        assert posted.status_code == 200, posted.text
        yield http


def _names(body: dict, key: str) -> list[str]:
    return [item["name"] for item in body[key]]


def test_jobs_page_and_total(client):
    page = client.get(f"/api/v1/namespaces/{NS}/jobs", params={"limit": 2, "offset": 1}).json()
    validate_marquez("JobList", page)
    assert _names(page, "jobs") == JOBS[1:3]
    assert page["totalCount"] == len(JOBS)

    last = client.get(f"/api/v1/namespaces/{NS}/jobs", params={"limit": 2, "offset": 4}).json()
    assert (_names(last, "jobs"), last["totalCount"]) == (JOBS[4:], len(JOBS))
    past = client.get(f"/api/v1/namespaces/{NS}/jobs", params={"limit": 2, "offset": 9}).json()
    assert past == {"jobs": [], "totalCount": len(JOBS)}
    whole = client.get(f"/api/v1/namespaces/{NS}/jobs").json()
    assert (_names(whole, "jobs"), whole["totalCount"]) == (JOBS, len(JOBS))


def test_datasets_page_and_total(client):
    url = f"/api/v1/namespaces/{NS}/datasets"
    page = client.get(url, params={"limit": 2, "offset": 1}).json()
    validate_marquez("DatasetList", page)
    assert _names(page, "datasets") == DATASETS[1:3]
    assert page["totalCount"] == len(DATASETS)
    full = client.get(url, params={"limit": 5}).json()
    assert (_names(full, "datasets"), full["totalCount"]) == (DATASETS, len(DATASETS))
    past = client.get(url, params={"offset": 5}).json()
    assert past == {"datasets": [], "totalCount": len(DATASETS)}


def test_runs_page_and_total(client):
    url = f"/api/v1/namespaces/{NS}/jobs/{JOBS[0]}/runs"
    newest_first = [str(uuid.UUID(int=n + 1, version=4)) for n in (3, 2, 1, 0)]
    page = client.get(url, params={"limit": 2, "offset": 1}).json()
    validate_marquez("RunList", page)
    assert [run["id"] for run in page["runs"]] == newest_first[1:3]
    assert page["totalCount"] == 4
    tail = client.get(url, params={"limit": 2, "offset": 3}).json()
    assert ([run["id"] for run in tail["runs"]], tail["totalCount"]) == (newest_first[3:], 4)
    openapi = client.get("/openapi.json").json()
    validate_openapi_response(
        openapi, "/api/v1/namespaces/{namespace}/jobs/{job}/runs", "get", 200, page
    )


def test_namespaces_page(client):
    owner = {"ownerName": "anonymous"}  # Marquez's owner of namespaces made from events
    assert client.get("/api/v1/namespaces").json() == {
        "namespaces": [{"name": "other", **owner}, {"name": NS, **owner}]
    }
    page = client.get("/api/v1/namespaces", params={"limit": 1, "offset": 1}).json()
    assert page == {"namespaces": [{"name": NS, **owner}]}
