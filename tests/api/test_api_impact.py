"""Impact on demand (issue 34, item 5): ``GET /api/v1/impact`` exact on a known graph on every
backend, with latest runs and owners; its 400s and 404s; a key sees no hidden node and nothing
reached through one. The corpus::

    shop:raw -> [load] -> shop:stage -> [clean] (FAIL) -> shop:clean_t -> [report] -> shop:mart
                                     \\-> [audit] (running, heartbeats) -> shop:audit_log

``clean`` states its owners (job ``ownership``), ``clean_t`` its own (dataset ``ownership``, on
the output), and ``report`` states two owner lists, the later one winning.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_helpers import (
    ACCESS_KINDS,
    ADMIN,
    KEY_A,
    KEYS,
    PRODUCER,
    SHARED,
    Served,
    access_api,
    client_of,
    run_event,
    validate_openapi_response,
    when,
)
from test_api_static import agreed, serve_stores

KINDS = ("memory", "sql", "postgres", "document", "graph")
RUNS = {
    name: str(uuid.UUID(int=0x1A0 + i, version=4))
    for i, name in enumerate(("load", "clean", "audit", "report"))
}
OWNERSHIP = "https://openlineage.io/spec/facets/1-0-1/OwnershipJobFacet.json"


def _owners(*owners: tuple[str, str | None]) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": OWNERSHIP,
        "owners": [{"name": n, **({"type": t} if t else {})} for n, t in owners],
    }


def _ds(name: str) -> tuple[str, str]:
    return ("shop", name)


def corpus() -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []

    def run(job: str, kind: str, at: float, ins: list[str], outs: list[str]) -> dict[str, Any]:
        event = run_event(
            job,
            event_type=kind,
            run_id=RUNS[job],
            inputs=[_ds(n) for n in ins],
            outputs=[_ds(n) for n in outs],
            seconds=at,
        )
        events.append(event)
        return event

    run("load", "START", 0, ["raw"], ["stage"])
    run("load", "COMPLETE", 10, ["raw"], ["stage"])
    clean = run("clean", "START", 20, ["stage"], ["clean_t"])
    clean["job"]["facets"]["ownership"] = _owners(("team:data", "MAINTAINER"))
    failed = run("clean", "FAIL", 30, ["stage"], ["clean_t"])
    failed["outputs"][0]["facets"]["ownership"] = _owners(("user:jdoe", None))
    audit = run("audit", "START", 25, ["stage"], ["audit_log"])
    # A heartbeat interval of a year: still LIVE whenever the test runs.
    audit["run"]["facets"]["lineagesdk_heartbeat"] = {
        "_producer": PRODUCER,
        "_schemaURL": "https://lineage-sdk.dev/facets/heartbeat.json",
        "intervalS": 3.2e7 * 100,
    }
    first = run("report", "START", 40, ["clean_t"], ["mart"])
    first["job"]["facets"]["ownership"] = _owners(("team:old", None))
    last = run("report", "COMPLETE", 50, ["clean_t"], ["mart"])
    last["job"]["facets"]["ownership"] = _owners(("team:bi", "OWNER"), ("user:ann", None))
    return events


def _run(job: str, state: str, start: float, end: float | None, **more: Any) -> dict[str, Any]:
    run: dict[str, Any] = {"id": RUNS[job], "state": state, "startedAt": when(start)}
    if end is not None:
        run["endedAt"] = when(end)
    return {**run, **more}


def _of(job: str, run: dict[str, Any]) -> dict[str, Any]:
    return {**run, "job": {"namespace": "shop", "name": job}}


LOAD = _run("load", "COMPLETED", 0, 10)
CLEAN = _run("clean", "FAILED", 20, 30)
AUDIT = _run("audit", "RUNNING", 25, None, liveness="LIVE")
REPORT = _run("report", "COMPLETED", 40, 50)


def _item(kind: str, name: str, distance: int, run: Any, owners: Any = ()) -> dict[str, Any]:
    return {
        "nodeId": f"{kind.lower()}:shop:{name}",
        "type": kind,
        "namespace": "shop",
        "name": name,
        "distance": distance,
        "latestRun": run,
        "owners": [{"name": n, "type": t} for n, t in owners],
    }


FROM_RAW = [
    _item("JOB", "load", 1, LOAD),
    _item("DATASET", "stage", 2, _of("load", LOAD)),
    _item("JOB", "audit", 3, AUDIT),
    _item("JOB", "clean", 3, CLEAN, [("team:data", "MAINTAINER")]),
    _item("DATASET", "audit_log", 4, _of("audit", AUDIT)),
    _item("DATASET", "clean_t", 4, _of("clean", CLEAN), [("user:jdoe", None)]),
    _item("JOB", "report", 5, REPORT, [("team:bi", "OWNER"), ("user:ann", None)]),
    _item("DATASET", "mart", 6, _of("report", REPORT)),
]


@pytest.fixture(scope="module")
def apis(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, httpx.Client]]:
    with contextlib.ExitStack() as stack:
        yield serve_stores(stack, request, tmp_path_factory, KINDS, lambda _: corpus())


def _ask(apis: dict[str, httpx.Client], **params: Any) -> dict[str, Any]:
    """The answer every backend gives, after checking they all give it."""
    return agreed(apis, "/api/v1/impact", **params)


def test_impact_is_exact_on_every_backend(apis: dict[str, httpx.Client]) -> None:
    whole = _ask(apis, nodeId="dataset:shop:raw", depth=20)
    assert whole["impact"] == FROM_RAW
    assert whole["nodeId"] == "dataset:shop:raw" and whole["depth"] == 20
    assert whole["truncated"] is False and whole["omittedNodes"] == 0
    openapi = apis["sql"].get("/openapi.json").json()
    validate_openapi_response(openapi, "/api/v1/impact", "get", 200, whole)


def test_depth_counts_job_hops_and_distance_counts_edges(apis: dict[str, httpx.Client]) -> None:
    one = _ask(apis, nodeId="dataset:shop:raw", depth=1)["impact"]
    assert [i["nodeId"] for i in one] == ["job:shop:load", "dataset:shop:stage"]
    none = _ask(apis, nodeId="dataset:shop:raw", depth=0)["impact"]
    assert none == []
    from_job = _ask(apis, nodeId="job:shop:load", depth=0)["impact"]
    assert from_job == [{**FROM_RAW[1], "distance": 1}]
    from_clean = _ask(apis, nodeId="job:shop:clean", depth=20)["impact"]
    assert [(i["nodeId"], i["distance"]) for i in from_clean] == [
        ("dataset:shop:clean_t", 1),
        ("job:shop:report", 2),
        ("dataset:shop:mart", 3),
    ]


def test_node_limit_cuts_nearest_first(apis: dict[str, httpx.Client]) -> None:
    cut = _ask(apis, nodeId="dataset:shop:raw", depth=20, nodeLimit=4)
    assert cut["impact"] == FROM_RAW[:3]  # the root counts as one of the four
    assert cut["truncated"] is True and cut["nodeLimit"] == 4
    assert 1 <= cut["omittedNodes"] <= 5  # the walk stops one level past the limit


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"nodeId": "nonsense"}, 400),
        ({"nodeId": "datasetField:shop:raw:id"}, 400),
        ({"nodeId": "dataset:shop:never"}, 404),
        ({"nodeId": "job:shop:never"}, 404),
        ({"nodeId": "dataset:shop:raw", "depth": -1}, 422),
        ({"nodeId": "dataset:shop:raw", "depth": 101}, 422),
        ({}, 422),
    ],
)
def test_bad_and_unknown_nodes(
    apis: dict[str, httpx.Client], params: dict[str, Any], status: int
) -> None:
    for kind, client in apis.items():
        response = client.get("/api/v1/impact", params=params)
        assert response.status_code == status, (kind, response.text)
        assert isinstance(response.json()["detail"], (str, list))


# ---------------------------------------------------------------------------------- access

SRC, MID, OUT, END = (SHARED, "src"), ("team_a", "mid"), ("team_b", "out"), ("team_a", "end")
ACCESS_RUNS = [str(uuid.UUID(int=0x1AC0 + i, version=4)) for i in range(4)]


def access_corpus() -> list[dict[str, Any]]:
    """src -> [team_a:a.load] -> team_a:mid -> [team_b:b.use] -> team_b:out -> [team_a:a.final]
    -> team_a:end, and mid -> [team_a:a.side] -> team_a:side."""

    def run(job: str, ns: str, i: int, ins: Any, outs: Any) -> dict[str, Any]:
        return run_event(job, namespace=ns, run_id=ACCESS_RUNS[i], inputs=ins, outputs=outs)

    return [
        run("a.load", "team_a", 0, [SRC], [MID]),
        run("b.use", "team_b", 1, [MID], [OUT]),
        run("a.final", "team_a", 2, [OUT], [END]),
        run("a.side", "team_a", 3, [MID], [("team_a", "side")]),
    ]


@pytest.fixture(scope="module", params=ACCESS_KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("impact-access")
    posts = [(ADMIN, access_corpus())]
    with access_api(request, folder, api_key=ADMIN, keys=KEYS, posts=posts) as made:
        yield made


team_a = client_of(KEY_A)
admin = client_of(ADMIN)


def _ids(client: httpx.Client, node: str) -> list[str]:
    response = client.get("/api/v1/impact", params={"nodeId": node, "depth": 10})
    assert response.status_code == 200, response.text
    return [i["nodeId"] for i in response.json()["impact"]]


def test_a_key_neither_lists_nor_walks_through_a_hidden_namespace(
    team_a: httpx.Client, admin: httpx.Client
) -> None:
    root = f"dataset:{SRC[0]}:{SRC[1]}"
    assert _ids(admin, root) == [
        "job:team_a:a.load",
        "dataset:team_a:mid",
        "job:team_a:a.side",
        "job:team_b:b.use",
        "dataset:team_a:side",
        "dataset:team_b:out",
        "job:team_a:a.final",
        "dataset:team_a:end",
    ]
    assert _ids(team_a, root) == [
        "job:team_a:a.load",
        "dataset:team_a:mid",
        "job:team_a:a.side",
        "dataset:team_a:side",
    ]
    hidden = team_a.get("/api/v1/impact", params={"nodeId": "dataset:team_b:out"})
    assert hidden.status_code == 404, hidden.text
