"""History (issue 16, item 1) on the column-lineage, job, dataset and versions reads, through the
HTTP API of every query store, the engine over each backend: SQLite and PostgreSQL (sql),
SecantusDB (document), FalkorDB (graph) and memory. Every answer is validated against Marquez's
OpenAPI document, and the stores give the body memory gives for every question. The corpus, in
``hist`` (jobs) and ``lake`` (datasets)::

    t=0   run P  [orchestrate]                          (the parent of A and B)
    t=1   run A  lake:src  -> [extract] -> lake:stage    stage.id <- src.id     (child of P)
    t=10  run B  lake:stage -> [load]   -> lake:mart     mart.id  <- stage.id   (child of P)
    t=20  run C  lake:src2 -> [extract] -> lake:stage    stage.id <- src2.id    (no parent)

Each run is a START and a COMPLETE one second later; each output carries a schema facet (C's
adds a field: a new version of stage).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_helpers import column_facet, run_event, schema_facet, when
from openapi_check import validate_operation
from test_api_static import serve_stores

#: memory (the reference backend) first: what the others answer like.
KINDS = ("memory", "sql", "postgres", "document", "graph")
P, A, B, C = (str(uuid.UUID(int=0x4157 + i, version=4)) for i in range(4))
JOBS = "/api/v1/namespaces/hist/jobs"
DATASETS = "/api/v1/namespaces/lake/datasets"


def _event(
    run_id: str,
    job: str,
    at: float,
    kind: str,
    inputs: list[str],
    output: str | None,
    columns: dict[str, list[tuple[str, str, str]]],
    parent: str | None,
) -> dict[str, Any]:
    event = run_event(
        job,
        namespace="hist",
        event_type=kind,
        run_id=run_id,
        inputs=[("lake", name) for name in inputs],
        seconds=at,
    )
    if output is not None:
        fields = [("id", "BIGINT", ""), (f"from_{job}", "TEXT", "")]
        if run_id == C:
            fields.append(("late", "TEXT", ""))  # a new version of stage
        facets = {"schema": schema_facet(*fields)}
        facets["columnLineage"] = column_facet(columns)
        event["outputs"] = [{"namespace": "lake", "name": output, "facets": facets}]
    if parent is not None:
        event["run"]["facets"]["parent"] = {
            "_producer": event["producer"],
            "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json",
            "run": {"runId": parent},
            "job": {"namespace": "hist", "name": "orchestrate"},
        }
    return event


def events() -> list[dict[str, Any]]:
    runs = [
        (P, "orchestrate", 0, [], None, {}, None),
        (A, "extract", 1, ["src"], "stage", {"id": [("lake", "src", "id")]}, P),
        (B, "load", 10, ["stage"], "mart", {"id": [("lake", "stage", "id")]}, P),
        (C, "extract", 20, ["src2"], "stage", {"id": [("lake", "src2", "id")]}, None),
    ]
    found = []
    for run_id, job, at, inputs, output, columns, parent in runs:
        for kind, delta in (("START", 0), ("COMPLETE", 1)):
            found.append(_event(run_id, job, at + delta, kind, inputs, output, columns, parent))
    return found


@pytest.fixture(scope="module")
def apis(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, httpx.Client]]:
    with contextlib.ExitStack() as stack:
        yield serve_stores(stack, request, tmp_path_factory, KINDS, lambda _: events())


def _alike(apis: dict[str, httpx.Client], path: str, operation: str, **params: Any) -> Any:
    """The answer of every store: 200, valid for ``operation``, and the same body in all."""
    bodies = {}
    for kind, client in apis.items():
        response = client.get(path, params=params)
        assert response.status_code == 200, (kind, path, params, response.text)
        bodies[kind] = response.json()
        validate_operation(operation, bodies[kind])
    for kind, body in bodies.items():
        assert body == bodies["memory"], (kind, path, params)
    return bodies["memory"]


def _missing(apis: dict[str, httpx.Client], path: str, *words: str, **params: Any) -> None:
    """Every store answers 404, its detail naming ``words``."""
    for kind, client in apis.items():
        response = client.get(path, params=params)
        assert response.status_code == 404, (kind, path, params, response.text)
        detail = response.json()["detail"]
        assert all(word in detail for word in words), (kind, detail)


def _edges(body: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["origin"], e["destination"]) for n in body["graph"] for e in n["inEdges"]}


def _field(dataset: str, name: str = "id") -> str:
    return f"datasetField:lake:{dataset}:{name}"


def test_column_lineage_of_a_run_with_its_parent_and_children(apis):
    path, node = "/api/v1/column-lineage", "dataset:lake:mart"
    # From B: B and its parent P; extract's edge (run A, a sibling) is not in B's scope.
    own = _alike(apis, path, "getColumnLineage", nodeId=node, runId=B)
    assert _edges(own) == {(_field("mart"), _field("stage"))}
    # From P: its children A and B, walked upstream from mart.
    tree = _alike(apis, path, "getColumnLineage", nodeId=node, runId=P)
    assert _edges(tree) == {
        (_field("mart"), _field("stage")),
        (_field("stage"), _field("src")),
    }
    # C states stage.id <- src2.id only; plain, stage.id derives from both.
    later = _alike(apis, path, "getColumnLineage", nodeId="dataset:lake:stage", runId=C)
    assert _edges(later) == {(_field("stage"), _field("src2"))}
    now = _alike(apis, path, "getColumnLineage", nodeId="dataset:lake:stage")
    assert _edges(now) >= {(_field("stage"), _field("src")), (_field("stage"), _field("src2"))}
    # asOf and runId combine: P's scope before B ran.
    early = _alike(
        apis, path, "getColumnLineage", nodeId=node.replace("mart", "stage"), runId=P, asOf=when(5)
    )
    assert _edges(early) == {(_field("stage"), _field("src"))}
    _missing(apis, path, "no column lineage", nodeId=node, runId=P, asOf=when(5))
    # A run that states nothing about the node, or has no events (then), is a 404.
    _missing(apis, path, "no column lineage", nodeId=node, runId=A)
    _missing(apis, path, "no-such-run", nodeId=node, runId="no-such-run")
    _missing(apis, path, C, "up to", nodeId=node, runId=C, asOf=when(15))


def test_job_read_of_a_run(apis):
    extract = f"{JOBS}/extract"
    first = _alike(apis, extract, "getJob", runId=A)
    assert [d["name"] for d in first["inputs"]] == ["src"]
    assert first["latestRun"]["id"] == A and first["latestRun"]["state"] == "COMPLETED"
    assert [r["id"] for r in first["latestRuns"]] == [A]
    second = _alike(apis, extract, "getJob", runId=C)
    assert [d["name"] for d in second["inputs"]] == ["src2"]
    # A child's job through its parent, and asOf within the run.
    load = _alike(apis, f"{JOBS}/load", "getJob", runId=P)
    assert load["latestRun"]["id"] == B
    running = _alike(apis, extract, "getJob", runId=A, asOf=when(1))
    assert running["latestRun"]["state"] == "RUNNING"
    # The whole job again: both runs, both inputs.
    plain = _alike(apis, extract, "getJob")
    assert [d["name"] for d in plain["inputs"]] == ["src", "src2"]
    # A run whose scope does not name the job: 404 naming the run; unknown runs likewise.
    _missing(apis, f"{JOBS}/load", C, "name no job", runId=C)
    _missing(apis, extract, "no-such-run", runId="no-such-run")
    _missing(apis, extract, A, "up to", runId=A, asOf=when(0))


def test_dataset_read_of_a_run(apis):
    stage = f"{DATASETS}/stage"
    by_a = _alike(apis, stage, "getDataset", runId=A)
    assert [f["name"] for f in by_a["fields"]] == ["id", "from_extract"]
    # B only read stage: the dataset as B's events (and its parent's) name it.
    by_b = _alike(apis, stage, "getDataset", runId=B)
    assert by_b["name"] == "stage"
    both = _alike(apis, stage, "getDataset", runId=P, asOf=when(5))
    assert both["name"] == "stage"
    _missing(apis, f"{DATASETS}/mart", A, "name no dataset", runId=A)
    _missing(apis, stage, "no-such-run", runId="no-such-run")


def test_versions_as_of_and_of_a_run(apis):
    versions = f"{JOBS}/extract/versions"
    every = _alike(apis, versions, "getJobVersions")
    assert every["totalCount"] == 2  # A's inputs, then C's
    newest, oldest = (v["version"] for v in every["versions"])
    then = _alike(apis, versions, "getJobVersions", asOf=when(15))
    assert [v["version"] for v in then["versions"]] == [oldest]
    assert _alike(apis, versions, "getJobVersions", asOf="2100-01-01") == every
    of_c = _alike(apis, versions, "getJobVersions", runId=C)
    assert [v["version"] for v in of_c["versions"]] == [newest]
    _missing(apis, versions, "up to", asOf=when(0.5))
    _missing(apis, f"{JOBS}/load/versions", A, runId=A)
    # The single version: there then, or not yet.
    one = _alike(apis, f"{versions}/{oldest}", "getJobVersion", asOf=when(15))
    assert one["version"] == oldest
    _missing(apis, f"{versions}/{newest}", "no version", asOf=when(15))
    _missing(apis, f"{versions}/{oldest}", "no version", runId=C)

    stage = f"{DATASETS}/stage/versions"
    every = _alike(apis, stage, "getDatasetVersions")
    then = _alike(apis, stage, "getDatasetVersions", asOf=when(15))
    assert then["totalCount"] < every["totalCount"]
    assert {v["createdByRun"]["id"] for v in then["versions"] if v.get("createdByRun")} == {A}
    of_c = _alike(apis, stage, "getDatasetVersions", runId=C)
    assert {v["createdByRun"]["id"] for v in of_c["versions"] if v.get("createdByRun")} == {C}
    first = then["versions"][-1]["version"]
    one = _alike(apis, f"{stage}/{first}", "getDatasetVersion", asOf=when(15))
    assert one["version"] == first
    _missing(apis, stage, "up to", asOf=when(0.5))


@pytest.mark.parametrize(
    "path",
    [
        f"{JOBS}/extract",
        f"{JOBS}/extract/versions",
        f"{DATASETS}/stage",
        f"{DATASETS}/stage/versions",
        "/api/v1/column-lineage",
    ],
)
def test_bad_history_parameters_are_named(apis, path):
    client = apis["sql"]
    params = {"nodeId": "dataset:lake:stage"} if "column" in path else {}
    bad = client.get(path, params={**params, "asOf": "last tuesday"})
    assert bad.status_code == 422 and "asOf must be an RFC 3339 time" in bad.text
    empty = client.get(path, params={**params, "runId": ""})
    assert empty.status_code == 422 and "runId" in empty.text
    long = client.get(path, params={**params, "runId": "x" * 65})
    assert long.status_code == 422 and "runId" in long.text
