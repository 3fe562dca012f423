"""Access by namespace over real HTTP, on the sql store (SQLite), the document store
(SecantusDB, or MongoDB from LINEAGE_TEST_MONGODB_URI) and the graph store (FalkorDB): named keys hashed in the configuration,
403 on ingest into a namespace the key may not write (single and batch), reads filtered, lineage
that stops at a namespace the key may not read, keys never logged, and clear configuration
errors.

The graph, namespaces ``alpha`` and ``gamma`` readable by the ``reader`` key, ``beta`` not,
datasets in ``lake`` (readable) and ``vault`` (not)::

    lake:raw -> [alpha:a1] -> lake:a_out -> [beta:b1] -> lake:b_out -> [gamma:c1] -> lake:c_out
                     |                 \\-> [alpha:a2] -> lake:a2_out
                     \\-> vault:secret

From ``a1`` the reader must see ``a_out`` and ``a2`` but neither ``b1`` nor what lies beyond it
(``b_out``, ``c1``, ``c_out`` are readable, yet reached only through ``b1``).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_helpers import ACCESS_KINDS, Served, access_api, client_of, run_cli, run_event
from typer.testing import CliRunner

from lineage_sdk.collector.api import access as access_module
from lineage_sdk.collector.api.access import (
    AccessPolicy,
    NamespaceScope,
    hash_key,
    prune_answer,
    prune_graph,
)
from lineage_sdk.collector.api.server import api_settings
from lineage_sdk.collector.cli import app as collector_app
from lineage_sdk.collector.settings import ApiKeyConfig
from lineage_sdk.config import load_config
from lineage_sdk.exceptions import ConfigError

ADMIN_KEY = "lsk_admin-legacy-key-0123456789abcdef"  # the single api_key of old: everything
READER_KEY = "lsk_reader-4f1d7c2a9e8b6d5c3b2a1f0e9d8c7b6a"
TEAM_KEY = "lsk_team-9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d"
KEYS = {
    "reader": ApiKeyConfig(
        key_hash=hash_key(READER_KEY), write=["alpha"], read=["alpha", "gamma", "lake"]
    ),
    "team": ApiKeyConfig(key_hash=hash_key(TEAM_KEY), write=["team.*"], read=["team.*"]),
}
SECRETS = (ADMIN_KEY, READER_KEY, TEAM_KEY)


def _graph_events() -> list[dict[str, Any]]:
    spec = [
        ("a1", "alpha", [("lake", "raw")], [("lake", "a_out"), ("vault", "secret")]),
        ("a2", "alpha", [("lake", "a_out")], [("lake", "a2_out")]),
        ("b1", "beta", [("lake", "a_out")], [("lake", "b_out")]),
        ("c1", "gamma", [("lake", "b_out")], [("lake", "c_out")]),
    ]
    events = []
    for i, (job, ns, inputs, outputs) in enumerate(spec):
        run_id = str(uuid.UUID(int=i + 1, version=4))
        for kind, at in (("START", 10 * i), ("COMPLETE", 10 * i + 5)):
            events.append(
                run_event(
                    job,
                    namespace=ns,
                    event_type=kind,
                    run_id=run_id,
                    inputs=inputs,
                    outputs=outputs,
                    seconds=at,
                )
            )
    # Each namespace's datasets name their own source: vault's must not show to the reader.
    for event in events:
        for entry in (*event["inputs"], *event["outputs"]):
            uri = f"postgres://{entry['namespace']}:5432/db"
            facet = "https://openlineage.io/spec/facets/1-0-1/DatasourceDatasetFacet.json"
            source = {"_producer": "https://example.com", "_schemaURL": facet, "uri": uri}
            entry.setdefault("facets", {})["dataSource"] = {
                **source,
                "name": f"{entry['namespace']}db",
            }
    # c1's run names b1's as its parent: the parent facet must not show b1 to the reader.
    for event in events[-2:]:
        event["run"]["facets"]["parent"] = {
            "_producer": "https://example.com",
            "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json",
            "run": {"runId": str(uuid.UUID(int=3, version=4))},
            "job": {"namespace": "beta", "name": "b1"},
        }
    return events


@pytest.fixture(scope="module", params=ACCESS_KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """One API per store for the module, holding the graph above (posted by the admin key)."""
    posts = [(ADMIN_KEY, _graph_events())]
    folder = tmp_path_factory.mktemp("access")
    with access_api(request, folder, api_key=ADMIN_KEY, keys=KEYS, posts=posts) as served:
        yield served


reader = client_of(READER_KEY)


admin = client_of(ADMIN_KEY)


def _ids(answer: httpx.Response) -> set[str]:
    assert answer.status_code == 200, answer.text
    return {node["id"] for node in answer.json()["graph"]}


# ------------------------------------------------------------------------------------ ingest


def test_ingest_into_a_namespace_the_key_may_not_write_is_403_naming_it(served, reader, admin):
    event = run_event("intruder", namespace="beta")
    answer = reader.post("/api/v1/lineage", json=event)
    assert answer.status_code == 403
    assert answer.json()["reason"] == "forbidden"
    assert "'beta'" in answer.json()["detail"] and "'reader'" in answer.json()["detail"]
    assert admin.get("/api/v1/namespaces/beta/jobs/intruder/runs").json()["totalCount"] == 0
    # A DatasetEvent is filed under its dataset's namespace; a JobEvent under its job's.
    schema = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/"
    static = {"eventTime": "2025-03-01T00:00:00Z", "producer": "https://example.com"}
    dataset_event = {
        **static,
        "schemaURL": schema + "DatasetEvent",
        "dataset": {"namespace": "vault", "name": "t", "facets": {}},
    }
    job_event = {
        **static,
        "schemaURL": schema + "JobEvent",
        "job": {"namespace": "beta", "name": "declared", "facets": {}},
    }
    for refused, namespace in ((dataset_event, "vault"), (job_event, "beta")):
        answer = reader.post("/api/v1/lineage", json=refused)
        assert answer.status_code == 403, answer.text
        assert f"namespace {namespace!r}" in answer.json()["detail"]
        assert admin.post("/api/v1/lineage", json=refused).status_code == 201
    # Datasets may lie anywhere: what counts is the job's namespace.
    allowed = run_event("writer", namespace="alpha", outputs=[("vault", "w_out")], seconds=500)
    assert reader.post("/api/v1/lineage", json=allowed).status_code == 201
    assert admin.get("/api/v1/namespaces/alpha/jobs/writer/runs").json()["totalCount"] == 1


def test_a_batch_stores_the_writable_events_and_reports_the_others(reader, admin):
    good = run_event("batched", namespace="alpha", seconds=600)
    denied = run_event("batched", namespace="beta", seconds=601)
    answer = reader.post("/api/v1/lineage/batch", json=[good, denied, {"eventType": "START"}])
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "partial_success"
    assert body["summary"] == {
        "received": 3,
        "successful": 1,
        "failed": 2,
        "retriable": 0,
        "non_retriable": 2,
    }
    failed = {f["index"]: f["reason"] for f in body["failed_events"]}
    assert set(failed) == {1, 2}
    assert failed[1].startswith("forbidden:") and "'beta'" in failed[1]
    assert admin.get("/api/v1/namespaces/alpha/jobs/batched/runs").json()["totalCount"] == 1
    assert admin.get("/api/v1/namespaces/beta/jobs/batched/runs").json()["totalCount"] == 0

    only_denied = reader.post("/api/v1/lineage/batch", json=[denied])
    assert only_denied.status_code == 403
    assert only_denied.json()["status"] == "failure"
    assert only_denied.json()["failed_events"][0]["reason"].startswith("forbidden:")


def test_glob_patterns_and_the_single_api_key_of_old(served):
    with served.client(TEAM_KEY) as team:
        for namespace, status in (("team.a.b", 201), ("teamx", 403), ("team", 403)):
            posted = team.post("/api/v1/lineage", json=run_event("j", namespace=namespace))
            assert posted.status_code == status, namespace
        names = [n["name"] for n in team.get("/api/v1/namespaces").json()["namespaces"]]
        assert names == ["team.a.b"]
    with served.client(ADMIN_KEY) as admin:
        names = [n["name"] for n in admin.get("/api/v1/namespaces").json()["namespaces"]]
        assert {"alpha", "beta", "gamma", "lake", "vault", "team.a.b"} <= set(names)
        assert "teamx" not in names and "team" not in names


def test_reads_need_a_key_once_named_keys_are_configured(served):
    with served.client(None) as anonymous, served.client("lsk_not-a-configured-key") as wrong:
        for client in (anonymous, wrong):
            answer = client.get("/api/v1/namespaces")
            assert answer.status_code == 401
            assert answer.headers["www-authenticate"].startswith("Bearer")
            assert client.get("/api/v1/lineage", params={"nodeId": "job:alpha:a1"}).status_code == (
                401
            )
    with httpx.Client(base_url=served.url, headers={"X-API-Key": READER_KEY}) as other_header:
        assert other_header.get("/api/v1/namespaces").status_code == 200


# ------------------------------------------------------------------------------------ reads


def test_lists_and_searches_hold_only_readable_namespaces(reader, admin):
    names = [n["name"] for n in reader.get("/api/v1/namespaces").json()["namespaces"]]
    assert set(names) == {"alpha", "gamma", "lake"}
    page = reader.get("/api/v1/namespaces", params={"limit": 1, "offset": 1}).json()
    assert [n["name"] for n in page["namespaces"]] == [sorted(names)[1]]
    assert reader.get("/api/v1/namespaces/beta/jobs").json() == {"jobs": [], "totalCount": 0}
    assert admin.get("/api/v1/namespaces/beta/jobs").json()["totalCount"] >= 1
    assert reader.get("/api/v1/namespaces/vault/datasets").json()["totalCount"] == 0
    assert reader.get("/api/v1/namespaces/beta/jobs/b1/runs").json()["totalCount"] == 0
    sources = {s["name"] for s in reader.get("/api/v1/sources").json()["sources"]}
    assert sources == {"lakedb"}  # named by the readable datasets only (not vault's)
    assert {"lakedb", "vaultdb"} <= {
        s["name"] for s in admin.get("/api/v1/sources").json()["sources"]
    }
    hits = reader.get("/api/v1/search", params={"q": "1"}).json()["results"]
    assert {(h["namespace"], h["name"]) for h in hits} == {("alpha", "a1"), ("gamma", "c1")}
    everything = admin.get("/api/v1/search", params={"q": "1"}).json()["results"]
    assert ("beta", "b1") in {(h["namespace"], h["name"]) for h in everything}


def test_the_event_log_holds_only_readable_jobs_and_hides_their_hidden_datasets(reader, admin):
    log = reader.get("/api/v1/events/lineage", params={"limit": 100}).json()
    jobs = {e["job"]["namespace"] for e in log["events"]}
    assert jobs <= {"alpha", "gamma"} and {"alpha", "gamma"} <= jobs
    assert log["totalCount"] == len(log["events"])
    times = [e["eventTime"] for e in log["events"]]
    assert times == sorted(times, reverse=True)
    text = json.dumps(log)
    assert "vault" not in text and '"b1"' not in text
    full = admin.get("/api/v1/events/lineage", params={"limit": 100}).json()
    assert "vault" in json.dumps(full) and full["totalCount"] > log["totalCount"]
    second = reader.get("/api/v1/events/lineage", params={"limit": 2, "offset": 2}).json()
    assert second["events"] == log["events"][2:4]
    assert reader.get("/api/v1/events/beta").json() == {"events": [], "totalCount": 0}


def test_a_hidden_thing_is_not_found_worded_as_an_unknown_one(reader, admin):
    """What the reader gets for a hidden thing is what anyone gets for one never recorded."""
    pairs = [
        ("/api/v1/namespaces/beta", "/api/v1/namespaces/nowhere"),
        ("/api/v1/namespaces/beta/jobs/b1", "/api/v1/namespaces/alpha/jobs/nothing"),
        ("/api/v1/namespaces/beta/jobs/b1/versions", "/api/v1/namespaces/alpha/jobs/no/versions"),
        ("/api/v1/namespaces/vault/datasets/secret", "/api/v1/namespaces/lake/datasets/nothing"),
        ("/api/v1/sources/vaultdb", "/api/v1/sources/nowhere"),
    ]
    for hidden, unknown in pairs:
        assert admin.get(hidden).status_code == 200, hidden  # it is there
        got, expected = reader.get(hidden), admin.get(unknown)
        assert got.status_code == expected.status_code == 404, hidden
        assert got.json() == expected.json(), hidden
    b1_run = str(uuid.UUID(int=3, version=4))
    unknown_run = str(uuid.UUID(int=99, version=4))
    for suffix in ("", "/events", "/facets"):
        assert admin.get(f"/api/v1/jobs/runs/{b1_run}{suffix}").status_code == 200
        got = reader.get(f"/api/v1/jobs/runs/{b1_run}{suffix}")
        expected = admin.get(f"/api/v1/jobs/runs/{unknown_run}{suffix}")
        assert got.status_code == expected.status_code == 404
        assert got.json()["detail"] == expected.json()["detail"].replace(unknown_run, b1_run)


def test_a_readable_job_shows_no_hidden_dataset_nor_hidden_parent(reader, admin):
    job = reader.get("/api/v1/namespaces/alpha/jobs/a1").json()
    assert job["outputs"] == [{"namespace": "lake", "name": "a_out"}]
    assert {"namespace": "vault", "name": "secret"} in admin.get(
        "/api/v1/namespaces/alpha/jobs/a1"
    ).json()["outputs"]
    versions = reader.get("/api/v1/namespaces/alpha/jobs/a1/versions").json()["versions"]
    assert versions[0]["outputs"] == [{"namespace": "lake", "name": "a_out"}]
    a1_run = str(uuid.UUID(int=1, version=4))
    events = reader.get(f"/api/v1/jobs/runs/{a1_run}/events").json()["events"]
    assert all(o["namespace"] != "vault" for e in events for o in e["outputs"])
    c1_run = str(uuid.UUID(int=4, version=4))
    facets = reader.get(f"/api/v1/jobs/runs/{c1_run}/facets").json()
    assert "parent" not in json.dumps(facets)
    assert "parent" in json.dumps(admin.get(f"/api/v1/jobs/runs/{c1_run}/facets").json())
    # Marquez's parent fields of c1 name the hidden b1: not for the reader, in any answer.
    c1 = "/api/v1/namespaces/gamma/jobs/c1"
    assert admin.get(c1).json()["parentJobName"] == "b1"
    listed = admin.get("/api/v1/namespaces/gamma/jobs").json()["jobs"]
    assert [j["parentJobName"] for j in listed if j["name"] == "c1"] == ["b1"]
    graph = {"nodeId": "job:gamma:c1", "depth": 1}
    answers = [reader.get(c1).json(), reader.get("/api/v1/namespaces/gamma/jobs").json()]
    answers.append(reader.get("/api/v1/lineage", params=graph).json())
    assert "parentJob" not in json.dumps(answers) and '"b1"' not in json.dumps(answers)
    assert "parentJobName" in json.dumps(admin.get("/api/v1/lineage", params=graph).json())
    # b_out was written by b1: the version that hidden run made is not shown, nor that run.
    b1_run = str(uuid.UUID(int=3, version=4))
    full = json.dumps(admin.get("/api/v1/namespaces/lake/datasets/b_out/versions").json())
    assert b1_run in full
    for path in ("/versions", ""):
        seen = json.dumps(reader.get(f"/api/v1/namespaces/lake/datasets/b_out{path}").json())
        assert b1_run not in seen and "beta" not in seen


# ---------------------------------------------------------------------------------- lineage


def test_lineage_stops_at_a_namespace_the_key_may_not_read(reader, admin):
    params = {"nodeId": "job:alpha:a1", "depth": 10, "direction": "downstream"}
    everything = _ids(admin.get("/api/v1/lineage", params=params))
    assert {"job:beta:b1", "dataset:lake:b_out", "job:gamma:c1", "dataset:lake:c_out"} <= everything
    seen = _ids(reader.get("/api/v1/lineage", params=params))
    assert seen == {"job:alpha:a1", "dataset:lake:a_out", "job:alpha:a2", "dataset:lake:a2_out"}

    params = {"nodeId": "dataset:lake:c_out", "depth": 10, "direction": "upstream"}
    assert _ids(reader.get("/api/v1/lineage", params=params)) == {
        "dataset:lake:c_out",
        "job:gamma:c1",
        "dataset:lake:b_out",
    }
    both = reader.get("/api/v1/lineage", params={"nodeId": "dataset:lake:a_out", "depth": 10})
    graph = both.json()["graph"]
    assert _ids(both) == {
        "dataset:lake:a_out",
        "job:alpha:a1",
        "dataset:lake:raw",
        "job:alpha:a2",
        "dataset:lake:a2_out",
    }
    edges = {(e["origin"], e["destination"]) for n in graph for e in n["inEdges"] + n["outEdges"]}
    assert all("b1" not in o + d and "vault" not in o + d for o, d in edges)
    assert "vault" not in json.dumps(graph)


def test_prune_answer_on_marquez_json_gives_what_the_reader_gets(served, reader, admin):
    """The JSON-level pruning (for routes without a LineageGraph, e.g. column lineage)."""
    grant = AccessPolicy(keys=KEYS).authenticate(READER_KEY)
    assert grant is not None
    for node in ("job:alpha:a1", "dataset:lake:c_out", "dataset:lake:a_out"):
        params = {"nodeId": node, "depth": 10}
        full = admin.get("/api/v1/lineage", params=params).json()
        pruned = prune_answer(full, node, grant)
        expected = reader.get("/api/v1/lineage", params=params).json()
        key = lambda answer: sorted(  # noqa: E731
            (n["id"], len(n["inEdges"]), len(n["outEdges"])) for n in answer["graph"]
        )
        assert key(pruned) == key(expected), node
    assert prune_answer(full, "job:beta:b1", grant)["graph"] == []


def _with_columns(event: dict[str, Any], field: str, source: tuple[str, str, str]) -> None:
    namespace, name, source_field = source
    event["outputs"][0]["facets"]["columnLineage"] = {
        "_producer": "https://example.com",
        "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
        "fields": {
            field: {"inputFields": [{"namespace": namespace, "name": name, "field": source_field}]}
        },
    }


def test_column_lineage_stops_at_a_namespace_the_key_may_not_read(reader, admin):
    """lake.cols_raw.x -> vault.cols_mid.m -> lake.cols_out.o: from cols_out the reader sees
    neither the hidden field nor the readable one reached only through it."""
    steps = [
        ("cols1", ("vault", "cols_mid"), "m", ("lake", "cols_raw", "x")),
        ("cols2", ("lake", "cols_out"), "o", ("vault", "cols_mid", "m")),
        ("cols3", ("lake", "cols_side"), "s", ("lake", "cols_raw", "x")),
    ]
    for i, (job, output, field, source) in enumerate(steps):
        event = run_event(job, namespace="alpha", outputs=[output], seconds=900 + i)
        event["outputs"][0].setdefault("facets", {})
        _with_columns(event, field, source)
        assert admin.post("/api/v1/lineage", json=event).status_code == 201
    out = "datasetField:lake:cols_out:o"
    hidden, beyond = "datasetField:vault:cols_mid:m", "datasetField:lake:cols_raw:x"
    assert _ids(admin.get("/api/v1/column-lineage", params={"nodeId": out})) == {
        out,
        hidden,
        beyond,
    }
    seen = reader.get("/api/v1/column-lineage", params={"nodeId": out})
    assert _ids(seen) == {out}
    assert seen.json()["graph"][0]["inEdges"] == []
    assert "vault" not in seen.text
    # Downstream of the readable source: the side output, never the hidden field.
    down = {"nodeId": beyond, "withDownstream": "true"}
    assert _ids(reader.get("/api/v1/column-lineage", params=down)) == {
        beyond,
        "datasetField:lake:cols_side:s",
    }
    root = reader.get("/api/v1/column-lineage", params={"nodeId": hidden})
    unknown = admin.get("/api/v1/column-lineage", params={"nodeId": "datasetField:vault:zz:m"})
    assert root.status_code == unknown.status_code == 404


def test_run_lineage_stops_at_a_namespace_the_key_may_not_read(reader, admin):
    c1, b1, a1 = (str(uuid.UUID(int=i, version=4)) for i in (4, 3, 1))
    params = {"runId": c1}
    everything = admin.get("/api/v1/runlineage/upstream", params=params).json()
    assert [r["run"]["id"] for r in everything["runs"]] == [c1, b1, a1]
    seen = reader.get("/api/v1/runlineage/upstream", params=params)
    assert seen.status_code == 200, seen.text
    [only] = seen.json()["runs"]
    assert only["run"]["id"] == c1
    assert [(i["name"], "producedByRunId" in i) for i in only["inputs"]] == [("b_out", False)]
    assert "beta" not in seen.text and b1 not in seen.text
    hidden = reader.get("/api/v1/runlineage/upstream", params={"runId": b1})
    assert hidden.status_code == 404


def test_a_hidden_root_is_not_found_like_an_unknown_one(reader, admin):
    hidden = reader.get("/api/v1/lineage", params={"nodeId": "job:beta:b1"})
    unknown = admin.get("/api/v1/lineage", params={"nodeId": "job:beta:zz"})
    assert hidden.status_code == unknown.status_code == 404
    assert hidden.json()["detail"].replace("b1", "zz") == unknown.json()["detail"]


def test_pruning_with_everything_readable_is_the_stores_answer_at_every_depth(served):
    """The re-walk counts hops as the stores do: nothing hidden means nothing removed."""
    for node in ("job:alpha:a1", "dataset:lake:a_out", "dataset:lake:c_out"):
        for direction in ("both", "upstream", "downstream"):
            for depth in range(4):
                graph = served.store.lineage(node, direction=direction, depth=depth)  # type: ignore[arg-type]
                pruned = prune_graph(graph, lambda _ns: True, direction=direction, depth=depth)  # type: ignore[arg-type]
                assert set(pruned.nodes) == set(graph.nodes), (node, direction, depth)
                for nid, kept in pruned.nodes.items():
                    assert kept.in_edges == graph.nodes[nid].in_edges
                    assert kept.out_edges == graph.nodes[nid].out_edges


def test_the_lineage_cli_sends_the_key(served):
    base = ("--url", served.url, "graph", "job:alpha:a1", "--downstream", "--format", "json")
    denied = run_cli(*base)
    assert denied.returncode != 0 and "401" in denied.stderr
    done = run_cli(*base, env={"LINEAGE_API_KEY": READER_KEY})
    assert done.returncode == 0, done.stderr
    ids = {node["id"] for node in json.loads(done.stdout)["graph"]}
    assert "job:alpha:a2" in ids and "job:beta:b1" not in ids
    assert READER_KEY not in done.stdout + done.stderr


# ----------------------------------------------------------------------- keys: hashing, logs


def test_keys_are_compared_in_constant_time_with_every_configured_key(monkeypatch):
    compared: list[tuple[bytes, bytes]] = []
    real = access_module.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(access_module.hmac, "compare_digest", spy)
    policy = AccessPolicy(api_key=ADMIN_KEY, keys=KEYS)
    assert policy.authenticate(ADMIN_KEY).name == "api_key"  # the first key: no early exit
    assert len(compared) == 3 and all(len(a) == len(b) == 32 for a, b in compared)
    assert policy.authenticate("lsk_wrong") is None
    assert len(compared) == 6


def test_keys_never_reach_logs_or_answers(served, caplog, capfd, tmp_path):
    caplog.set_level(logging.DEBUG)
    bodies = []
    for key in (*SECRETS, "lsk_a-wrong-key-never-to-be-echoed"):
        with served.client(key) as client:
            bodies.append(client.get("/api/v1/namespaces").text)
            bodies.append(
                client.post("/api/v1/lineage", json=run_event("x", namespace="beta")).text
            )
            bodies.append(client.get("/api/v1/namespaces/beta/jobs/b1").text)
    toml = f"[lineage.api.keys.oops]\nkey_hash = '{READER_KEY}'\nread = ['*']\n"
    with pytest.raises(ConfigError) as failure:
        _load_keys(toml, tmp_path)
    logged = caplog.text + "".join(capfd.readouterr()) + "".join(bodies) + str(failure.value)
    for key in (*SECRETS, "lsk_a-wrong-key-never-to-be-echoed"):
        assert key not in logged
    assert "key_hash" in str(failure.value) and "***" in str(failure.value)


def test_api_key_new_prints_the_key_on_stderr_and_only_its_hash_for_the_configuration(tmp_path):
    runner = CliRunner()
    made = runner.invoke(
        collector_app, ["api-key", "new", "--name", "etl", "--write", "team.*", "--read", "*"]
    )
    assert made.exit_code == 0, made.output
    key = made.stderr.strip().splitlines()[-1]
    assert key.startswith("lsk_") and len(key) >= 40
    assert key not in made.stdout
    keys = _load_keys(made.stdout, tmp_path)
    grant = AccessPolicy(keys=keys).authenticate(key)
    assert grant is not None and grant.name == "etl"
    assert grant.may_write("team.a") and not grant.may_write("other") and grant.may_read("x")
    hashed = runner.invoke(collector_app, ["api-key", "hash"], input=key + "\n")
    assert hashed.exit_code == 0
    assert hashed.stdout.strip() == f'key_hash = "{hash_key(key)}"'


# --------------------------------------------------------------------------- configuration


def _load_keys(toml: str, folder: Path) -> dict[str, ApiKeyConfig]:
    path = folder / "lineage.toml"
    path.write_text(toml, encoding="utf-8")
    settings = api_settings(load_config(path=path))
    AccessPolicy(
        api_key=settings["api_key"], keys=settings["keys"], protect_reads=settings["protect_reads"]
    )
    keys: dict[str, ApiKeyConfig] = settings["keys"]
    return keys


GOOD_HASH = hash_key(READER_KEY)


@pytest.mark.parametrize(
    ("toml", "key", "says"),
    [
        (
            "[lineage.api.keys.k]\nkey_hash = 'sha256:abc'\nread = ['*']\n",
            "lineage.api.keys.k.key_hash",
            "must be sha256:<64 hex digits>",
        ),
        (
            f"[lineage.api.keys.k]\nkey_hash = '{GOOD_HASH}'\nreads = ['*']\n",
            "lineage.api.keys.k.reads",
            "did you mean read?",
        ),
        (
            f"[lineage.api.keys.k]\nkey_hash = '{GOOD_HASH}'\n",
            "lineage.api.keys.k.read",
            "must be allowed to write or read",
        ),
        (
            f"[lineage.api.keys.k]\nkey_hash = '{GOOD_HASH}'\nwrite = ['a', ' ']\n",
            "lineage.api.keys.k.write",
            "empty namespace pattern",
        ),
        (
            "[lineage.api.keys.k]\nread = ['*']\n",
            "lineage.api.keys.k.key_hash",
            "required",
        ),
        (
            f"[[lineage.api.keys]]\nkey_hash = '{GOOD_HASH}'\nread = ['*']\n",
            "lineage.api.keys",
            "one table per name ([lineage.api.keys.<name>])",
        ),
        (
            f"[lineage.api]\nprotect_reads = false\n[lineage.api.keys.k]\nkey_hash = '{GOOD_HASH}'"
            "\nread = ['*']\n",
            "lineage.api.protect_reads",
            "must be true or unset",
        ),
        (
            f"[lineage.api.keys.k]\nkey_hash = '{GOOD_HASH}'\nread = ['*']\n"
            f"[lineage.api.keys.l]\nkey_hash = '{GOOD_HASH.upper().replace('SHA256', 'sha256')}'"
            "\nread = ['*']\n",
            "lineage.api.keys.l.key_hash",
            "must differ from the hash of k",
        ),
    ],
)
def test_bad_key_configuration_is_one_clear_error(tmp_path, toml, key, says):
    with pytest.raises(ConfigError) as failure:
        _load_keys(toml, tmp_path)
    assert failure.value.key == key
    assert says in str(failure.value)


def test_keys_from_environment_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("LINEAGE_API_KEYS_CI_KEY_HASH", GOOD_HASH)
    monkeypatch.setenv("LINEAGE_API_KEYS_CI_WRITE", "team.*,alpha")
    keys = _load_keys("", tmp_path)
    assert keys["ci"].write == ["team.*", "alpha"] and keys["ci"].read == []
    assert AccessPolicy(keys=keys).protect_reads


def test_namespace_patterns():
    scope = NamespaceScope(["team.*", "postgres://db:5432", "s3://*/raw"])
    assert scope.allows("team.a") and scope.allows("team.a.b") and scope.allows("team.")
    assert not scope.allows("team") and not scope.allows("teamx") and not scope.allows("xteam.a")
    assert scope.allows("postgres://db:5432") and not scope.allows("postgres://db:5433")
    assert scope.allows("s3://lake/raw") and not scope.allows("s3://lake/raw2")
    assert NamespaceScope(["*"]).allows("anything at all")
    assert not NamespaceScope(["a.b"]).allows("aXb")  # a dot is a dot
