"""``GET /api/v1/lineage`` without ``direction`` walks as Marquez does (issue 32, item 5): every job
sharing any dataset with a job walked, whichever way the data flows, to ``depth``; with
``direction`` the walks stay directed. Over real HTTP, on the sql (SQLite), document, graph and
memory backends, for an admin and for a key that reads some namespaces only.

The data, Airflow's shape (``ol_check`` tasks on one database)::

    SHARED:src -> [team_a:fill_totals] -> SHARED:totals -> [team_a:report] -> team_a:report_out
                  [team_b:create_totals] -> SHARED:totals, SHARED:side
                  SHARED:side -> [team_a:side_reader]
    SHARED:other -> [team_a:elsewhere]                  (shares nothing: never reached)

``create_totals`` writes ``totals`` too: no directed path from ``fill_totals`` reaches it, the
undirected walk does (one job hop), and ``side_reader`` two hops further through it.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from api_helpers import (
    ACCESS_KINDS,
    ADMIN,
    KEY_A,
    KEY_B,
    KEYS,
    SHARED,
    Served,
    access_api,
    client_of,
    run_event,
    validate_marquez,
)

ROOT = "job:team_a:fill_totals"
CREATE = "job:team_b:create_totals"
REPORT = "job:team_a:report"
SIDE_READER = "job:team_a:side_reader"


def _events() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    a = [
        run_event(
            "fill_totals",
            namespace="team_a",
            inputs=[(SHARED, "src")],
            outputs=[(SHARED, "totals")],
        ),
        run_event(
            "report",
            namespace="team_a",
            inputs=[(SHARED, "totals")],
            outputs=[("team_a", "report_out")],
            seconds=10,
        ),
        run_event("side_reader", namespace="team_a", inputs=[(SHARED, "side")], seconds=20),
        run_event("elsewhere", namespace="team_a", inputs=[(SHARED, "other")], seconds=30),
    ]
    b = [
        run_event(
            "create_totals",
            namespace="team_b",
            outputs=[(SHARED, "totals"), (SHARED, "side")],
            seconds=-10,
        )
    ]
    return a, b


@pytest.fixture(scope="module", params=ACCESS_KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    a, b = _events()
    posts = [(KEY_A, a), (KEY_B, b)]
    folder = tmp_path_factory.mktemp("marquez_walk")
    with access_api(request, folder, api_key=ADMIN, keys=KEYS, posts=posts) as served:
        yield served


admin = client_of(ADMIN)
team_a = client_of(KEY_A)


def _ids(client: httpx.Client, **params: object) -> set[str]:
    answer = client.get("/api/v1/lineage", params={"nodeId": ROOT, **params})
    assert answer.status_code == 200, answer.text
    validate_marquez("LineageGraph", answer.json())
    return {node["id"] for node in answer.json()["graph"]}


def test_without_direction_jobs_sharing_a_dataset_are_walked(admin: httpx.Client) -> None:
    assert _ids(admin, depth=0) == {ROOT, f"dataset:{SHARED}:src", f"dataset:{SHARED}:totals"}
    one_hop = _ids(admin, depth=1)
    assert {CREATE, REPORT} <= one_hop
    assert f"dataset:{SHARED}:side" in one_hop and SIDE_READER not in one_hop
    assert SIDE_READER in _ids(admin, depth=2)
    assert "job:team_a:elsewhere" not in _ids(admin, depth=20)


def test_a_direction_keeps_the_directed_walks(admin: httpx.Client) -> None:
    both = _ids(admin, depth=20, direction="both")
    assert CREATE not in both and SIDE_READER not in both
    assert {ROOT, REPORT, f"dataset:{SHARED}:src", "dataset:team_a:report_out"} <= both
    assert REPORT not in _ids(admin, depth=20, direction="upstream")
    assert REPORT in _ids(admin, depth=20, direction="downstream")


def test_the_edges_keep_the_data_flow(admin: httpx.Client) -> None:
    graph = admin.get("/api/v1/lineage", params={"nodeId": ROOT, "depth": 1}).json()["graph"]
    create = next(n for n in graph if n["id"] == CREATE)
    assert {(e["origin"], e["destination"]) for e in create["outEdges"]} == {
        (CREATE, f"dataset:{SHARED}:totals"),
        (CREATE, f"dataset:{SHARED}:side"),
    }
    assert create["inEdges"] == []


def test_a_key_sees_nothing_through_a_hidden_job(team_a: httpx.Client) -> None:
    """team_a may not read team_b: create_totals is not there, and side_reader, reached only
    through it, is not either, at any depth."""
    seen = _ids(team_a, depth=20)
    assert CREATE not in seen and SIDE_READER not in seen
    assert {ROOT, REPORT, f"dataset:{SHARED}:totals"} <= seen


def test_the_node_limit_cuts_the_undirected_walk(admin: httpx.Client) -> None:
    answer = admin.get("/api/v1/lineage", params={"nodeId": ROOT, "depth": 20, "nodeLimit": 3})
    body = answer.json()
    assert body["truncated"] is True and body["nodeLimit"] == 3
    assert {n["id"] for n in body["graph"]} == {
        ROOT,
        f"dataset:{SHARED}:src",
        f"dataset:{SHARED}:totals",
    }


def test_an_unknown_direction_is_refused_naming_it(admin: httpx.Client) -> None:
    answer = admin.get("/api/v1/lineage", params={"nodeId": ROOT, "direction": "sideways"})
    assert answer.status_code in (400, 422)
    assert "direction" in answer.text
