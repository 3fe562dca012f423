"""``asOf`` for a restricted key: the answer is the present one (Marquez's node facts) only when
no event *the key reads* is later than the time asked, on every backend.

The data: team_a's job runs twice (t=10 and t=30) writing ``pg:.../a.out``; team_b's job runs
last (t=40), hidden from team_a. Asked ``asOf`` t=20, team_a's answer is a past one: its run at
t=30 is later. Deciding that from the store's newest event alone (team_b's, which team_a cannot
read) took the hidden event for "nothing later" and answered the present: the job node carried
Marquez's facts of now (``updatedAt`` t=30, after the time asked).
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
    KEYS,
    SHARED,
    Served,
    access_api,
    client_of,
    run_event,
    when,
)

A_RUNS = [str(uuid.UUID(int=0xA10 + n, version=4)) for n in (1, 2)]
B_RUN = str(uuid.UUID(int=0xB10, version=4))
A_JOB = "job:team_a:a.write"


def _corpus() -> list[dict[str, Any]]:
    source = (SHARED, "src")
    return [
        run_event(
            "a.write",
            namespace="team_a",
            run_id=run_id,
            inputs=[source],
            outputs=[(SHARED, "a.out")],
            seconds=seconds,
        )
        for run_id, seconds in zip(A_RUNS, (10, 30), strict=True)
    ] + [
        run_event(
            "b.write",
            namespace="team_b",
            run_id=B_RUN,
            inputs=[source],
            outputs=[(SHARED, "b.out")],
            seconds=40,
        )
    ]


@pytest.fixture(scope="module", params=ACCESS_KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("access-as-of")
    with access_api(request, folder, api_key=ADMIN, keys=KEYS, posts=[(ADMIN, _corpus())]) as made:
        yield made


team_a = client_of(KEY_A)


def _job(client: httpx.Client, as_of: float) -> dict[str, Any]:
    answer = client.get("/api/v1/lineage", params={"nodeId": A_JOB, "asOf": when(as_of)})
    assert answer.status_code == 200, answer.text
    (job,) = [n for n in answer.json()["graph"] if n["id"] == A_JOB]
    data: dict[str, Any] = job["data"]
    return data


def test_a_later_readable_event_makes_the_answer_a_past_one(team_a: httpx.Client) -> None:
    """t=20: team_a's run at t=30 is later, so the job node is a past answer's (its name and
    its latest run then), whatever the hidden newest event says."""
    data = _job(team_a, 20)
    assert set(data) == {"id", "namespace", "name", "latestRun"}, data
    assert data["latestRun"]["id"] == A_RUNS[0], data


def test_nothing_later_that_the_key_reads_is_the_present(team_a: httpx.Client) -> None:
    """t=35: only team_b's hidden event is later, so team_a's answer is its present one, its
    latest run the one at t=30 (the control: the hidden event is not "later" for team_a)."""
    data = _job(team_a, 35)
    assert data["latestRun"]["id"] == A_RUNS[1], data
    assert data["updatedAt"] == when(30), data
    assert "team_b" not in str(data)
