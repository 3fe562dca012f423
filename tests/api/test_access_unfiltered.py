"""Access by namespace through the store methods the key's view does not filter, probed as an
attacker would over real HTTP (the sequel of ``test_access_attacker.py``: same keys, same rule).

A restricted key's reads go through ``access.visible``; what it does not filter (``child_runs``,
``latest_runs``, the run summaries of ``runs_of_job``/``jobs`` and of the stores' graph walks)
must still say nothing of a hidden namespace. Two ways in:

* a hidden child run (B's job, naming A's run as its parent): A's run reads, its ``runId``
  lineage and run lineage must answer as for a run of A without children;
* a run id shared with a hidden run: A knows B's run id (as ``test_access_attacker`` assumes)
  and files a run of its own job under it. The stores keep one row per run id, folded from every
  event of that id whatever its job; A's answers about its own job's run (its runs, its latest
  run in the job, the job list and the lineage, now and ``asOf``) must be those of a run id B
  never used, byte for byte.

The data::

    pg:hub -> [team_a:a_parent] -> team_a:a_parent_out -> [team_b:b_child] -> team_b:b_child_out
               runs P_A (B's child C_B names it as parent) and P_X (the control: no child)
    [team_b:b_secret] run R_B: START, then COMPLETE much later
    [team_a:probe_1] run R_B (A's START)  -> team_a:probe_1_out
    [team_a:probe_2] run R_X (A's START)  -> team_a:probe_2_out   (the control)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

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
)

from lineage_sdk.collector.api.access import (
    FILTERED,
    PASS_THROUGH,
    AccessPolicy,
    ClosedAttribute,
    Sight,
    visible,
)
from lineage_sdk.collector.engine import Engine

P_A = str(uuid.UUID(int=0xA1, version=4))  # A's run with B's hidden child
P_X = str(uuid.UUID(int=0xA2, version=4))  # A's run without children: the control
C_B = str(uuid.UUID(int=0xB1, version=4))  # B's child run
R_B = str(uuid.UUID(int=0xB2, version=4))  # B's run, whose id A reuses
R_X = str(uuid.UUID(int=0xC2, version=4))  # an id B never used: the control
SECRET_OUT = "b_child_out"


def _parent(event: dict[str, Any], run_id: str, job: tuple[str, str]) -> dict[str, Any]:
    event["run"]["facets"]["parent"] = {
        "_producer": "https://example.com",
        "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json",
        "run": {"runId": run_id},
        "job": {"namespace": job[0], "name": job[1]},
    }
    return event


def _a_events() -> list[dict[str, Any]]:
    events = []
    for run_id in (P_A, P_X):
        for kind, at in (("START", 0), ("COMPLETE", 10)):
            events.append(
                run_event(
                    "a_parent",
                    namespace="team_a",
                    event_type=kind,
                    run_id=run_id,
                    inputs=[(SHARED, "hub")],
                    outputs=[("team_a", "a_parent_out")],
                    seconds=at,
                )
            )
    for job, run_id in (("probe_1", R_B), ("probe_2", R_X)):
        events.append(
            run_event(
                job,
                namespace="team_a",
                event_type="START",
                run_id=run_id,
                outputs=[("team_a", f"{job}_out")],
                seconds=50,
            )
        )
    return events


def _b_events() -> list[dict[str, Any]]:
    child = [
        _parent(
            run_event(
                "b_child",
                namespace="team_b",
                event_type=kind,
                run_id=C_B,
                inputs=[(SHARED, "hub"), ("team_a", "a_parent_out")],
                outputs=[("team_b", SECRET_OUT)],
                seconds=at,
            ),
            P_A,
            ("team_a", "a_parent"),
        )
        for kind, at in (("START", 2), ("COMPLETE", 8))
    ]
    secret = [
        run_event("b_secret", namespace="team_b", event_type=kind, run_id=R_B, seconds=at)
        for kind, at in (("START", 20), ("COMPLETE", 900))
    ]
    return [*child, *secret]


@pytest.fixture(scope="module", params=ACCESS_KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """One API per store, holding A's and B's data, each posted with its own key (B first: the
    run id A reuses is B's before it is A's)."""
    posts = [(KEY_B, _b_events()), (KEY_A, _a_events())]
    folder = tmp_path_factory.mktemp("unfiltered")
    with access_api(request, folder, api_key=ADMIN, keys=KEYS, posts=posts) as served:
        yield served


a = client_of(KEY_A)


admin = client_of(ADMIN)


def _swapped(data: bytes, swaps: list[tuple[str, str]]) -> bytes:
    for name, other in swaps:
        data = data.replace(other.encode(), name.encode())
    return data


def assert_alike(
    hidden: httpx.Response, unknown: httpx.Response, swaps: list[tuple[str, str]]
) -> None:
    """``hidden`` answers exactly as ``unknown`` does once each (hidden, unknown) pair of one
    length is swapped in the unknown answer: status, bytes, headers but the date."""
    for name, other in swaps:
        assert len(name) == len(other), (name, other)
    assert hidden.status_code == unknown.status_code, (hidden.text, unknown.text)
    assert hidden.content == _swapped(unknown.content, swaps), (hidden.text, unknown.text)
    drop = {"date"}
    assert {k: v for k, v in hidden.headers.items() if k not in drop} == {
        k: v for k, v in unknown.headers.items() if k not in drop
    }


# ------------------------------------------------------------------- child_runs: a hidden child


def _parent_probes(run_id: str) -> list[tuple[str, dict[str, str]]]:
    return [
        (f"/api/v1/jobs/runs/{run_id}", {}),
        (f"/api/v1/jobs/runs/{run_id}/events", {}),
        (f"/api/v1/jobs/runs/{run_id}/facets", {}),
        (f"/api/v1/jobs/runs/{run_id}/facets", {"type": "job"}),
        ("/api/v1/runlineage/upstream", {"runId": run_id}),
        ("/api/v1/lineage", {"nodeId": "job:team_a:a_parent", "runId": run_id}),
        ("/api/v1/lineage", {"nodeId": f"dataset:{SHARED}:hub", "runId": run_id}),
        ("/api/v1/lineage", {"nodeId": "dataset:team_a:a_parent_out", "runId": run_id}),
        ("/api/v1/column-lineage", {"nodeId": "job:team_a:a_parent", "runId": run_id}),
        ("/api/v1/namespaces/team_a/jobs/a_parent", {"runId": run_id}),
        ("/api/v1/namespaces/team_a/jobs/a_parent/versions", {"runId": run_id}),
        (f"/api/v1/namespaces/{SHARED}/datasets/hub", {"runId": run_id}),
        (f"/api/v1/namespaces/{SHARED}/datasets/hub/versions", {"runId": run_id}),
    ]


def test_the_hidden_child_is_in_the_store(admin):
    """The premise: the admin's runId reads do find B's child under A's run."""
    found = admin.get("/api/v1/lineage", params={"nodeId": "job:team_a:a_parent", "runId": P_A})
    assert found.status_code == 200 and "b_child" in found.text and SECRET_OUT in found.text


@pytest.mark.parametrize("probe", range(len(_parent_probes(P_A))))
def test_a_run_with_a_hidden_child_answers_as_a_run_without_children(a, probe):
    path, params = _parent_probes(P_A)[probe]
    other, other_params = _parent_probes(P_X)[probe]
    hidden, unknown = a.get(path, params=params), a.get(other, params=other_params)
    for secret in (C_B, "b_child", SECRET_OUT, "team_b"):
        assert secret not in hidden.text, (path, params)
    assert_alike(hidden, unknown, [(P_A, P_X)])


def test_the_hidden_child_run_answers_as_an_unknown_run(a):
    unknown = str(uuid.UUID(int=0xC1, version=4))
    for path in ("", "/events", "/facets"):
        assert_alike(
            a.get(f"/api/v1/jobs/runs/{C_B}{path}"),
            a.get(f"/api/v1/jobs/runs/{unknown}{path}"),
            [(C_B, unknown)],
        )
    assert_alike(
        a.get("/api/v1/lineage", params={"nodeId": "job:team_a:a_parent", "runId": C_B}),
        a.get("/api/v1/lineage", params={"nodeId": "job:team_a:a_parent", "runId": unknown}),
        [(C_B, unknown)],
    )


# ---------------------------------------------------- latest_runs and run summaries: a shared id


def test_the_shared_run_id_is_folded_with_the_hidden_run(admin):
    """The premise: the store's row of the run id A reused holds B's COMPLETE at t=900."""
    seen = admin.get("/api/v1/namespaces/team_b/jobs/b_secret/runs").json()
    assert [r["state"] for r in seen["runs"] if r["id"] == R_B] in (["COMPLETED"], [])


SHARED_ID_PROBES = [
    ("/api/v1/namespaces/team_a/jobs/{job}/runs", {}),
    ("/api/v1/namespaces/team_a/jobs/{job}/runs", {"limit": "1", "offset": "0"}),
    ("/api/v1/lineage", {"nodeId": "job:team_a:{job}"}),
    ("/api/v1/lineage", {"nodeId": "dataset:team_a:{job}_out"}),
    ("/api/v1/lineage", {"nodeId": "job:team_a:{job}", "asOf": "2030-01-01"}),
    ("/api/v1/lineage", {"nodeId": "job:team_a:{job}", "runId": "{run}"}),
]


@pytest.mark.parametrize(("path", "params"), SHARED_ID_PROBES)
def test_a_run_id_shared_with_a_hidden_run_answers_as_a_fresh_one(a, path, params):
    def ask(job: str, run: str) -> httpx.Response:
        filled = {k: v.format(job=job, run=run) for k, v in params.items()}
        return a.get(path.format(job=job, run=run), params=filled)

    hidden, unknown = ask("probe_1", R_B), ask("probe_2", R_X)
    assert hidden.status_code == 200, hidden.text
    assert_alike(hidden, unknown, [("probe_1", "probe_2"), (R_B, R_X)])


def _latest(job: dict[str, Any]) -> Any:
    return {k: job.get(k) for k in ("latestRun", "latestRuns")}


def test_a_job_read_and_the_job_list_show_the_shared_run_as_a_fresh_one(a):
    """The job and run reads carry a version id derived from the job's name, so their run parts
    compare."""
    swaps = [("probe_1", "probe_2"), (R_B, R_X)]
    hidden, unknown = a.get(f"/api/v1/jobs/runs/{R_B}"), a.get(f"/api/v1/jobs/runs/{R_X}")
    assert hidden.status_code == unknown.status_code == 200, (hidden.text, unknown.text)
    runs = [
        r.json() for r in (hidden, httpx.Response(200, content=_swapped(unknown.content, swaps)))
    ]
    for run in runs:
        run["jobVersion"].pop("version")
    assert runs[0] == runs[1]
    for suffix in ("", "?asOf=2030-01-01"):
        hidden = a.get(f"/api/v1/namespaces/team_a/jobs/probe_1{suffix}")
        unknown = a.get(f"/api/v1/namespaces/team_a/jobs/probe_2{suffix}")
        assert hidden.status_code == unknown.status_code == 200, (hidden.text, unknown.text)
        swapped = httpx.Response(200, content=_swapped(unknown.content, swaps))
        assert _latest(hidden.json()) == _latest(swapped.json()), suffix
    for namespace in ("team_a", None):
        listed = a.get(
            f"/api/v1/namespaces/{namespace}/jobs" if namespace else "/api/v1/jobs",
            params={"limit": 1000},
        )
        if listed.status_code == 404:  # no store-wide job list in this API
            continue
        assert listed.status_code == 200, listed.text
        by_name = {j["name"]: j for j in listed.json()["jobs"]}
        swapped = httpx.Response(
            200, content=_swapped(httpx.Response(200, json=by_name["probe_2"]).content, swaps)
        )
        assert _latest(by_name["probe_1"]) == _latest(swapped.json())


def test_nothing_a_key_reads_names_the_hidden_runs_jobs(a):
    for path in (
        "/api/v1/namespaces/team_a/jobs",
        "/api/v1/namespaces/team_a/jobs/probe_1",
        "/api/v1/namespaces/team_a/jobs/probe_1/runs",
        "/api/v1/namespaces/team_a/jobs/a_parent",
        "/api/v1/namespaces/team_a/jobs/a_parent/runs",
        f"/api/v1/namespaces/{SHARED}/datasets/hub",
        "/api/v1/namespaces",
        "/api/v1/sources",
        "/api/v1/events/lineage",
    ):
        seen = a.get(path)
        assert seen.status_code == 200, (path, seen.text)
        for secret in ("team_b", "b_secret", "b_child", C_B):
            assert secret not in seen.text, (path, secret)
    searched = a.get("/api/v1/search", params={"q": "b_", "sort": "updated_at"})
    assert searched.status_code == 200 and "team_b" not in searched.text


b = client_of(KEY_B)


def test_the_hidden_runs_owner_sees_its_run_as_its_own_events_state_it(b):
    """B, whose run id A reused, reads its job and run as if A had not: the reads answer (the sql
    store's ``latest_runs`` fails on a run filed under another job: the view does not ask it for
    the jobs the walk gave a latest run) and say nothing of A's run."""
    for path, params in (
        ("/api/v1/lineage", {"nodeId": "job:team_b:b_secret"}),
        ("/api/v1/lineage", {"nodeId": "job:team_b:b_secret", "asOf": "2030-01-01"}),
        ("/api/v1/namespaces/team_b/jobs/b_secret", {}),
        ("/api/v1/namespaces/team_b/jobs", {}),
        (f"/api/v1/jobs/runs/{R_B}", {}),
    ):
        seen = b.get(path, params=params)
        assert seen.status_code == 200, (path, seen.text)
        assert "team_a" not in seen.text and "probe_1" not in seen.text, (path, seen.text)
    run = b.get(f"/api/v1/jobs/runs/{R_B}").json()
    assert (run["state"], run["startedAt"]) == ("COMPLETED", "2025-03-01T00:00:20Z")


def test_the_hidden_runs_owner_still_lists_its_run(served, b):
    """Not a read leak but the write side of a reused id: the old sql store filed a run under
    the least job key its events named, so A's run under B's id took it out of B's list (B's
    key sorts after A's here). The engine keys a run by its id and its job, on every backend."""
    listed = b.get("/api/v1/namespaces/team_b/jobs/b_secret/runs").json()
    assert [r["id"] for r in listed["runs"]] == [R_B]


def test_the_view_is_closed_to_what_it_does_not_filter(served):
    """Fail-closed: every engine read the key's sight neither filters nor knows to be safe
    raises; the store's writes and its backend are not there at all. (Until the API asked the
    engine only, the view forwarded any store attribute and closed the unknown ones; now it is
    an Engine whose every public read is filtered or closed.)"""
    grant = AccessPolicy(api_key=ADMIN, keys=KEYS).authenticate(KEY_A)
    assert grant is not None
    store = served.store
    view = visible(store, grant)
    assert isinstance(view, Sight) and view.name == store.name
    reads = {n for n, v in vars(Engine).items() if callable(v) and not n.startswith("_")}
    closed = sorted(reads - FILTERED - PASS_THROUGH)
    assert {"child_runs", "latest_runs", "runs_of_job"}.isdisjoint(closed)
    assert {"delete_events", "count_raw_events", "stored_event_ids"} <= set(closed)
    for name in closed:
        with pytest.raises(ClosedAttribute, match=repr(name)):
            getattr(view, name)()
    for name in ("write_batch", "delete_events", "backend"):
        assert hasattr(store, name)
    assert not hasattr(view, "write_batch") and not hasattr(view, "backend")
