"""The lineage answer's ``schemaBreaking`` mark (issue 34, item 6) on every backend: a dataset
whose last schema change removed a field or changed a field's type carries
``schemaBreaking: true``; one whose last change only added a field, changed a type's case, or
never changed, does not. The previous schema may be in an earlier run of the same writer, in a
run of another writer, or in a DatasetEvent; a key sees the change its readable events make.

Every job reads ``wh:src``, so one walk from it reaches every written dataset.
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
SRC = ("wh", "src")
DATASET_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent"
SCHEMA = "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json"


def _schema(*fields: tuple[str, str]) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": SCHEMA,
        "fields": [{"name": n, "type": t} for n, t in fields],
    }


def _run_id(job: str, n: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"schema-mark/{job}/{n}"))


def _write(
    job: str,
    n: int,
    dataset: str,
    at: float,
    *fields: tuple[str, str],
    event_type: str = "COMPLETE",
    namespace: str = "shop",
    source: tuple[str, str] = SRC,
    ns: str = "wh",
) -> dict[str, Any]:
    """Run ``n`` of ``job`` reading ``source`` and writing ``ns:dataset`` with ``fields`` (no
    schema facet when none)."""
    event = run_event(
        job,
        namespace=namespace,
        event_type=event_type,
        run_id=_run_id(job, n),
        inputs=[source],
        outputs=[(ns, dataset)],
        seconds=at,
    )
    if fields:
        event["outputs"][0]["facets"]["schema"] = _schema(*fields)
    return event


def _stated(dataset: str, at: float, *fields: tuple[str, str]) -> dict[str, Any]:
    return {
        "eventTime": when(at),
        "producer": PRODUCER,
        "schemaURL": DATASET_EVENT,
        "dataset": {"namespace": "wh", "name": dataset, "facets": {"schema": _schema(*fields)}},
    }


ID, NAME, EXTRA = ("id", "INTEGER"), ("name", "STRING"), ("extra", "STRING")


def corpus() -> list[dict[str, Any]]:
    return [
        # Removed a field, in the writer's next run.
        _write("drop", 1, "dropped", 10, ID, NAME),
        _write("drop", 2, "dropped", 20, ID),
        # Only added one.
        _write("grow", 1, "grown", 10, ID),
        _write("grow", 2, "grown", 20, ID, EXTRA),
        # Changed a type; changed a type's case only.
        _write("retype", 1, "retyped", 10, ID),
        _write("retype", 2, "retyped", 20, ("id", "STRING")),
        _write("recase", 1, "recased", 10, ("id", "integer")),
        _write("recase", 2, "recased", 20, ID),
        # The schema before is another writer's.
        _write("first", 1, "shared", 10, ID, NAME),
        _write("second", 1, "shared", 20, ID),
        # Broke, then only grew: the last change is what counts.
        _write("heal", 1, "healed", 10, ID, NAME),
        _write("heal", 2, "healed", 20, ID),
        _write("heal", 3, "healed", 30, ID, EXTRA),
        # The latest run states the new schema twice (START and COMPLETE).
        _write("steady", 1, "steady", 10, ID, NAME),
        _write("steady", 2, "steady", 20, ID, event_type="START"),
        _write("steady", 2, "steady", 25, ID),
        # Never changed.
        _write("same", 1, "same", 10, ID, NAME),
        _write("same", 2, "same", 20, ID, NAME),
        # A DatasetEvent after the writer's run.
        _write("tell", 1, "told", 10, ID, NAME),
        _stated("told", 20, ID),
        # DatasetEvents alone (no writer).
        _stated("lone", 10, ID, NAME),
        _stated("lone", 20, ID),
        _stated("lone_grew", 10, ID),
        _stated("lone_grew", 20, ID, NAME),
        # Known misses: a change older than the two latest runs of every writer, whether they
        # state the schema again or not at all.
        _write("old", 1, "old", 10, ID, NAME),
        _write("old", 2, "old", 20, ID),
        _write("old", 3, "old", 30, ID),
        _write("old", 4, "old", 40, ID),
        _write("mute", 1, "mute", 10, ID, NAME),
        _write("mute", 2, "mute", 20, ID),
        _write("mute", 3, "mute", 30),
    ]


BROKE = {"dropped", "retyped", "shared", "steady", "told"}
WRITTEN = BROKE | {"grown", "recased", "healed", "same", "old", "mute"}


@pytest.fixture(scope="module")
def apis(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, httpx.Client]]:
    with contextlib.ExitStack() as stack:
        yield serve_stores(stack, request, tmp_path_factory, KINDS, lambda _: corpus())


def _marks(answer: dict[str, Any]) -> dict[str, bool | None]:
    """Each dataset node's ``schemaBreaking`` (None when left out), by name."""
    return {
        n["data"]["name"]: n["data"].get("schemaBreaking")
        for n in answer["graph"]
        if n["type"] == "DATASET"
    }


def _ask(apis: dict[str, httpx.Client], **params: Any) -> dict[str, Any]:
    """The answer every backend gives, after checking they all give it, marks asked as the page
    asks them."""
    return agreed(apis, "/api/v1/lineage", **{"marks": "schema", **params})


def test_a_dataset_whose_last_change_broke_is_marked_on_every_backend(
    apis: dict[str, httpx.Client],
) -> None:
    answer = _ask(apis, nodeId="dataset:wh:src", depth=1)
    marks = _marks(answer)
    assert set(marks) == WRITTEN | {"src"}
    assert {name for name, mark in marks.items() if mark is not None} == BROKE
    assert all(mark is True for name, mark in marks.items() if name in BROKE)
    openapi = apis["sql"].get("/openapi.json").json()
    validate_openapi_response(openapi, "/api/v1/lineage", "get", 200, answer)


def test_datasets_no_job_writes_are_marked_by_their_dataset_events(
    apis: dict[str, httpx.Client],
) -> None:
    assert _marks(_ask(apis, nodeId="dataset:wh:lone")) == {"lone": True}
    assert _marks(_ask(apis, nodeId="dataset:wh:lone_grew")) == {"lone_grew": None}


def test_the_mark_is_the_present_answers(apis: dict[str, httpx.Client]) -> None:
    """The job view at the present time, ``asOf`` now included; a past answer names nodes
    only."""
    now = _marks(_ask(apis, nodeId="dataset:wh:src", depth=1, asOf="2030-01-01T00:00:00Z"))
    assert {name for name, mark in now.items() if mark} == BROKE
    past = _marks(_ask(apis, nodeId="dataset:wh:src", depth=1, asOf=when(15)))
    assert not any(past.values())
    view = _ask(apis, nodeId="dataset:wh:src", depth=1, granularity="dataset")
    assert not any(n["data"].get("schemaBreaking") for n in view["graph"])


# ---------------------------------------------------------------------------------- access

HIDDEN_RUNS = {"a": _run_id("a.write", 1), "b": _run_id("b.write", 1)}


def access_corpus() -> list[dict[str, Any]]:
    """team_a's job writes ``SHARED:s.t`` with (id, name), then team_b's writes it with (id):
    a break only team_b's events state."""
    source = (SHARED, "src")
    return [
        _write("a.write", 1, "s.t", 10, ID, NAME, namespace="team_a", source=source, ns=SHARED),
        _write("b.write", 1, "s.t", 20, ID, namespace="team_b", source=source, ns=SHARED),
    ]


@pytest.fixture(scope="module", params=ACCESS_KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("schema-mark-access")
    posts = [(ADMIN, access_corpus())]
    with access_api(request, folder, api_key=ADMIN, keys=KEYS, posts=posts) as made:
        yield made


team_a = client_of(KEY_A)
admin = client_of(ADMIN)


def test_a_key_sees_the_change_its_readable_events_make(
    team_a: httpx.Client, admin: httpx.Client
) -> None:
    params = {"nodeId": f"dataset:{SHARED}:s.t", "depth": 1, "marks": "schema"}
    every = admin.get("/api/v1/lineage", params=params)
    assert every.status_code == 200, every.text
    assert _marks(every.json())["s.t"] is True
    seen = team_a.get("/api/v1/lineage", params=params)
    assert seen.status_code == 200, seen.text
    assert "job:team_b:b.write" not in {n["id"] for n in seen.json()["graph"]}
    assert _marks(seen.json())["s.t"] is None


def test_the_mark_is_asked_for(apis: dict[str, httpx.Client]) -> None:
    """Without ``marks=schema`` no answer carries the mark (nor reads what it needs); an unknown
    mark is refused naming the parameter, as ``direction`` is."""
    node = "dataset:wh:src"
    assert True in _marks(_ask(apis, nodeId=node, depth=1)).values()
    for kind, client in apis.items():
        plain = client.get("/api/v1/lineage", params={"nodeId": node, "depth": 1})
        assert plain.status_code == 200, (kind, plain.text)
        assert all("schemaBreaking" not in n["data"] for n in plain.json()["graph"]), kind
        refused = client.get("/api/v1/lineage", params={"nodeId": node, "marks": "colour"})
        assert refused.status_code == 422 and "marks" in refused.text, (kind, refused.text)
