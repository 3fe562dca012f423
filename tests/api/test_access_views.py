"""Access in every view of issue 33: a key sees no node of a namespace it may not read in any
granularity or window, and nothing reached only through one (as ``prune_graph`` answers the
job view), on every access store. The corpus, all on one day::

    pg://db:5432:src -> [team_a:a.load] -> team_a:mid -> [team_b:b.use] -> team_b:out
                                                            -> [team_a:a.final] -> team_a:end

Key A reads ``team_a`` and the shared namespace: ``team_b`` is hidden from it, and so is
``team_a:end``, which only a walk through ``team_b`` reaches.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_helpers import ACCESS_KINDS, ADMIN, KEY_A, KEYS, SHARED, Served, access_api, client_of
from api_helpers import run_event as _event

SRC, MID, OUT, END = (SHARED, "src"), ("team_a", "mid"), ("team_b", "out"), ("team_a", "end")
RUN_A, RUN_B, RUN_F = (str(uuid.UUID(int=0xACC0 + i, version=4)) for i in range(3))
SINCE, UNTIL = "2020-01-01", "2100-01-01"


def _run(job: str, namespace: str, run_id: str, inputs: Any, outputs: Any) -> dict[str, Any]:
    return _event(job, namespace=namespace, run_id=run_id, inputs=inputs, outputs=outputs)


def corpus() -> list[dict[str, Any]]:
    return [
        _run("a.load", "team_a", RUN_A, [SRC], [MID]),
        _run("b.use", "team_b", RUN_B, [MID], [OUT]),
        _run("a.final", "team_a", RUN_F, [OUT], [END]),
    ]


@pytest.fixture(scope="module", params=ACCESS_KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("views-access")
    with access_api(request, folder, api_key=ADMIN, keys=KEYS, posts=[(ADMIN, corpus())]) as made:
        yield made


team_a = client_of(KEY_A)
admin = client_of(ADMIN)

VIEWS: list[dict[str, str]] = [
    {"granularity": g, **w}
    for g in ("job", "dataset", "run", "parent")
    for w in ({}, {"since": SINCE, "until": UNTIL})
    if g != "job" or w
]


def _ids(client: httpx.Client, **params: Any) -> set[str]:
    response = client.get("/api/v1/lineage", params={"depth": 10, **params})
    assert response.status_code == 200, (params, response.text)
    return {n["id"] for n in response.json()["graph"]}


@pytest.mark.parametrize("view", VIEWS, ids=lambda v: "-".join(v.values()))
def test_a_key_sees_no_hidden_node_in_any_view(
    team_a: httpx.Client, admin: httpx.Client, view: dict[str, str]
) -> None:
    root = f"dataset:{SRC[0]}:{SRC[1]}"
    everything = _ids(admin, nodeId=root, **view)
    assert f"dataset:{END[0]}:{END[1]}" in everything  # the admin walks through team_b
    seen = _ids(team_a, nodeId=root, **view)
    assert f"dataset:{MID[0]}:{MID[1]}" in seen
    assert not any("team_b" in nid or nid.endswith(":end") for nid in seen), seen
    if view["granularity"] == "run":
        assert f"run:{RUN_A}" in seen and f"run:{RUN_B}" not in seen


@pytest.mark.parametrize("view", VIEWS, ids=lambda v: "-".join(v.values()))
def test_a_hidden_root_answers_as_an_unknown_one(
    team_a: httpx.Client, view: dict[str, str]
) -> None:
    for node in (f"dataset:{OUT[0]}:{OUT[1]}", "dataset:team_b:never-recorded"):
        found = team_a.get("/api/v1/lineage", params={"nodeId": node, **view})
        assert found.status_code == 404, (node, view, found.text)
    if view["granularity"] == "run":
        hidden_run = team_a.get("/api/v1/lineage", params={"nodeId": f"run:{RUN_B}", **view})
        assert hidden_run.status_code == 404, hidden_run.text
