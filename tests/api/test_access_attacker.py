"""Access by namespace, probed as an attacker would (issue 30, "What was seen" 6), over real HTTP.

Three keys: the admin (the single ``api_key``: everything); A, writing ``team_a`` and reading
``team_a`` and the shared ``pg://db:5432``; B, the same for ``team_b``. A tries to write what
belongs to B, and to learn from its reads what B's jobs state: every hidden thing must answer
byte for byte (status, body, headers but the date) as an unknown thing of a name of the same
length answers. Each probe is a test that failed before the fix (see the report of issue 30).

The data, each part posted by its own key::

    team_a:a.raw -> [team_a:a_job] -> team_a:a.clean -> [team_b:b_job] -> pg:b.shared
                                       (column a.clean.id -> b.shared.secret_col, stated by B)
    [team_a:a_hub] -> pg:hub -> [team_b:b_reader_N] -> team_b:b_out_N     (N = 1..5)
"""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import time
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
    column_facet,
    run_event,
    schema_facet,
)
from serve_process import free_port

from lineage_sdk.collector.api.access import AccessPolicy, hash_key, write_refusal
from lineage_sdk.collector.api.server import api_settings
from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.settings import ApiKeyConfig
from lineage_sdk.config import load_config
from lineage_sdk.exceptions import ConfigError

RUN_A = str(uuid.UUID(int=0xA1, version=4))
RUN_B = str(uuid.UUID(int=0xB1, version=4))
UNKNOWN_RUN = str(uuid.UUID(int=0xC1, version=4))  # as long as RUN_B: answers compare by bytes
SECRET_TRANSFORM = "b-secret-transform"
DATASET_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent"
JOB_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent"


def _a_events() -> list[dict[str, Any]]:
    clean = run_event(
        "a_job",
        namespace="team_a",
        run_id=RUN_A,
        inputs=[("team_a", "a.raw")],
        outputs=[("team_a", "a.clean")],
        seconds=10,
    )
    clean["outputs"][0]["facets"] = {
        "schema": schema_facet(("id", "int", ""), ("name", "string", "")),
        "columnLineage": column_facet({"id": [("team_a", "a.raw", "id")]}),
    }
    hub = run_event("a_hub", namespace="team_a", outputs=[(SHARED, "hub")], seconds=20)
    return [clean, hub]


def _b_events() -> list[dict[str, Any]]:
    shared = run_event(
        "b_job",
        namespace="team_b",
        run_id=RUN_B,
        inputs=[("team_a", "a.clean")],
        outputs=[(SHARED, "b.shared")],
        seconds=30,
    )
    columns = column_facet({"secret_col": [("team_a", "a.clean", "id")]})
    del columns["fields"]["secret_col"]["inputFields"][0]["transformations"]
    columns["fields"]["secret_col"]["transformationDescription"] = SECRET_TRANSFORM
    columns["fields"]["secret_col"]["transformationType"] = "IDENTITY"
    shared["outputs"][0]["facets"] = {
        "schema": schema_facet(("secret_col", "string", "B's own column")),
        "columnLineage": columns,
    }
    readers = [
        run_event(
            f"b_reader_{n}",
            namespace="team_b",
            inputs=[(SHARED, "hub")],
            outputs=[("team_b", f"b_out_{n}")],
            seconds=40 + n,
        )
        for n in range(1, 6)
    ]
    return [shared, *readers]


@pytest.fixture(scope="module", params=ACCESS_KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """One API per store, holding A's and B's data, each posted with its own key."""
    posts = [(KEY_A, _a_events()), (KEY_B, _b_events())]
    folder = tmp_path_factory.mktemp("attacker")
    with access_api(request, folder, api_key=ADMIN, keys=KEYS, posts=posts) as served:
        yield served


a = client_of(KEY_A)


admin = client_of(ADMIN)


def assert_alike(hidden: httpx.Response, unknown: httpx.Response, swap: tuple[str, str]) -> None:
    """``hidden`` answers exactly as ``unknown`` does, ``swap`` = (hidden name, unknown name)
    of one length replaced in the unknown answer's body: status, bytes, headers but the date."""
    name, other = swap
    assert len(name) == len(other), swap
    assert hidden.status_code == unknown.status_code, (hidden.text, unknown.text)
    assert hidden.content == unknown.content.replace(other.encode(), name.encode()), (
        hidden.text,
        unknown.text,
    )
    drop = {"date"}
    assert {k: v for k, v in hidden.headers.items() if k not in drop} == {
        k: v for k, v in unknown.headers.items() if k not in drop
    }


# ------------------------------------------------------------------------------------ writes


def _dataset_event(namespace: str, name: str, description: str) -> dict[str, Any]:
    return {
        "eventTime": "2025-03-02T00:00:00Z",
        "producer": "https://example.com/attacker",
        "schemaURL": DATASET_EVENT,
        "dataset": {
            "namespace": namespace,
            "name": name,
            "facets": {
                "documentation": {
                    "_producer": "https://example.com/attacker",
                    "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/"
                    "DocumentationDatasetFacet.json",
                    "description": description,
                }
            },
        },
    }


def test_a_decoy_job_does_not_open_another_teams_dataset_to_a_dataset_event(a, admin):
    plain = _dataset_event("team_b", "b_out_1", "overwritten by A")
    decoy = {**copy.deepcopy(plain), "job": {"namespace": "team_a", "name": "decoy"}}
    for event in (plain, decoy):
        single = a.post("/api/v1/lineage", json=event)
        assert single.status_code == 403, single.text
        assert "'team_b'" in single.json()["detail"]
        batch = a.post("/api/v1/lineage/batch", json=[event])
        assert batch.status_code == 403, batch.text
        assert batch.json()["status"] == "failure"
        assert batch.json()["failed_events"][0]["reason"].startswith("forbidden:")
    seen = admin.get("/api/v1/namespaces/team_b/datasets/b_out_1").json()
    assert "overwritten by A" not in str(seen)


def test_an_output_in_a_namespace_another_key_owns_needs_its_write_grant(a, admin):
    into_b = run_event("a_job", namespace="team_a", outputs=[("team_b", "b_out_2")], seconds=60)
    into_shared = run_event("a_job", namespace="team_a", outputs=[(SHARED, "a.pub")], seconds=61)
    declared = {
        "eventTime": "2025-03-02T00:00:00Z",
        "producer": "https://example.com/attacker",
        "schemaURL": JOB_EVENT,
        "job": {"namespace": "team_a", "name": "a_decl", "facets": {}},
        "inputs": [],
        "outputs": [{"namespace": "team_b", "name": "b_out_3", "facets": {}}],
    }
    for event in (into_b, declared):
        refused = a.post("/api/v1/lineage", json=event)
        assert refused.status_code == 403, refused.text
        assert "'team_b'" in refused.json()["detail"]
    # A namespace no key owns (the shared database) is open to any key that writes the job.
    assert a.post("/api/v1/lineage", json=into_shared).status_code == 201
    # A batch judges each event alone and drops no good one.
    good = run_event("a_batch", namespace="team_a", outputs=[(SHARED, "a.pub2")], seconds=62)
    later = run_event("a_batch2", namespace="team_a", outputs=[("team_a", "a.x")], seconds=63)
    batch = a.post("/api/v1/lineage/batch", json=[good, into_b, later])
    assert batch.status_code == 200, batch.text
    body = batch.json()
    assert body["status"] == "partial_success"
    assert body["summary"]["successful"] == 2 and body["summary"]["failed"] == 1
    [failed] = body["failed_events"]
    assert failed["index"] == 1 and "'team_b'" in failed["reason"]
    for job in ("a_batch", "a_batch2"):
        runs = admin.get(f"/api/v1/namespaces/team_a/jobs/{job}/runs").json()
        assert runs["totalCount"] == 1, job
    b_out_2 = admin.get("/api/v1/namespaces/team_b/datasets/b_out_2/versions").json()
    assert "a_job" not in str(b_out_2)


def test_a_key_writing_every_namespace_owns_none():
    """Ownership is what named keys' write lists match; ``*`` (like the single api_key) would
    otherwise leave no namespace shared."""
    keys = {
        **KEYS,
        "ops": ApiKeyConfig(key_hash=hash_key("lsk_ops-key"), write=["*"], read=["*"]),
        "lake": ApiKeyConfig(key_hash=hash_key("lsk_lake-key"), write=["s3://*/raw"], read=["*"]),
    }
    grant = AccessPolicy(api_key=ADMIN, keys=keys).authenticate(KEY_A)
    assert grant is not None

    def refusal(*outputs: tuple[str, str]) -> str | None:
        event = run_event("j", namespace="team_a", inputs=[("team_b", "in")], outputs=outputs)
        return write_refusal(build_record(event), grant)

    assert refusal((SHARED, "t"), ("s3://lake/cooked", "x")) is None  # nobody owns them
    assert refusal(("team_a", "t")) is None
    assert "'s3://lake/raw'" in (refusal((SHARED, "t"), ("s3://lake/raw", "x")) or "")
    assert "'team_b'" in (refusal(("team_b", "t")) or "")


# ------------------------------------------------------------------------------------- reads


def test_column_lineage_shows_nothing_a_hidden_job_states(a, admin):
    down = {"nodeId": "datasetField:team_a:a.clean:id", "withDownstream": "true"}
    full = admin.get("/api/v1/column-lineage", params=down)
    assert "secret_col" in full.text and SECRET_TRANSFORM in full.text  # it is there
    seen = a.get("/api/v1/column-lineage", params=down)
    assert seen.status_code == 200, seen.text
    assert "secret_col" not in seen.text and SECRET_TRANSFORM not in seen.text
    # The dataset read shows A no field of b.shared: nor may column lineage.
    dataset = a.get(f"/api/v1/namespaces/{SHARED}/datasets/b.shared")
    assert dataset.status_code == 200 and dataset.json()["fields"] == []
    hidden = a.get(
        "/api/v1/column-lineage", params={"nodeId": f"datasetField:{SHARED}:b.shared:secret_col"}
    )
    unknown = a.get(
        "/api/v1/column-lineage", params={"nodeId": f"datasetField:{SHARED}:b.shared:secret_cox"}
    )
    assert_alike(hidden, unknown, ("secret_col", "secret_cox"))
    assert hidden.status_code == 404
    whole = a.get("/api/v1/column-lineage", params={"nodeId": f"dataset:{SHARED}:b.shared"})
    other = a.get("/api/v1/column-lineage", params={"nodeId": f"dataset:{SHARED}:b.sharex"})
    assert_alike(whole, other, ("b.shared", "b.sharex"))


def _run_probes(run_id: str) -> list[tuple[str, dict[str, str]]]:
    return [
        (f"/api/v1/jobs/runs/{run_id}", {}),
        (f"/api/v1/jobs/runs/{run_id}/events", {}),
        (f"/api/v1/jobs/runs/{run_id}/facets", {}),
        ("/api/v1/runlineage/upstream", {"runId": run_id}),
        ("/api/v1/lineage", {"nodeId": f"dataset:{SHARED}:b.shared", "runId": run_id}),
        ("/api/v1/lineage", {"nodeId": "dataset:team_a:a.clean", "runId": run_id}),
        ("/api/v1/column-lineage", {"nodeId": "dataset:team_a:a.clean", "runId": run_id}),
        ("/api/v1/namespaces/team_a/datasets/a.clean", {"runId": run_id}),
        ("/api/v1/namespaces/team_a/datasets/a.clean/versions", {"runId": run_id}),
        (f"/api/v1/namespaces/{SHARED}/datasets/b.shared", {"runId": run_id}),
        ("/api/v1/namespaces/team_a/jobs/a_job", {"runId": run_id}),
        ("/api/v1/namespaces/team_a/jobs/a_job/versions", {"runId": run_id}),
    ]


def test_a_hidden_run_answers_as_an_unknown_run_everywhere(a, admin):
    for (path, params), (other, other_params) in zip(
        _run_probes(RUN_B), _run_probes(UNKNOWN_RUN), strict=True
    ):
        if path.startswith("/api/v1/jobs/runs/"):
            assert admin.get(path, params=params).status_code == 200, path  # it is there
        hidden = a.get(path, params=params)
        unknown = a.get(other, params=other_params)
        assert_alike(hidden, unknown, (RUN_B, UNKNOWN_RUN))


def test_truncated_counts_only_the_nodes_the_key_may_see(a, admin):
    node = {"nodeId": f"dataset:{SHARED}:hub", "depth": 5}
    everything = admin.get("/api/v1/lineage", params={**node, "nodeLimit": 100}).json()
    assert len(everything["graph"]) == 12  # hub, a_hub, five readers and their outputs
    whole = a.get("/api/v1/lineage", params={**node, "nodeLimit": 100}).json()
    assert {n["id"] for n in whole["graph"]} == {f"dataset:{SHARED}:hub", "job:team_a:a_hub"}
    assert whole["truncated"] is False
    for limit in (2, 3, 11, 12):
        cut = a.get("/api/v1/lineage", params={**node, "nodeLimit": limit}).json()
        assert cut["truncated"] is False, limit
        assert cut["graph"] == whole["graph"], limit
    one = a.get("/api/v1/lineage", params={**node, "nodeLimit": 1}).json()
    assert one["truncated"] is True and [n["id"] for n in one["graph"]] == [f"dataset:{SHARED}:hub"]


def test_column_lineage_truncated_counts_only_visible_fields(a):
    node = {"nodeId": "datasetField:team_a:a.clean:id", "withDownstream": "true"}
    whole = a.get("/api/v1/column-lineage", params={**node, "nodeLimit": 100}).json()
    assert len(whole["graph"]) == 2 and whole["truncated"] is False  # a.clean.id <- a.raw.id
    cut = a.get("/api/v1/column-lineage", params={**node, "nodeLimit": 2}).json()
    assert cut["truncated"] is False and cut["graph"] == whole["graph"]


HIDDEN_AND_UNKNOWN = [
    # (hidden path, unknown path of the same length, params, (hidden name, unknown name))
    ("/api/v1/namespaces/team_b", "/api/v1/namespaces/team_c", {}, ("team_b", "team_c")),
    ("/api/v1/namespaces/team_b/jobs", "/api/v1/namespaces/team_c/jobs", {}, ("team_b", "team_c")),
    (
        "/api/v1/namespaces/team_b/datasets",
        "/api/v1/namespaces/team_c/datasets",
        {},
        ("team_b", "team_c"),
    ),
    (
        "/api/v1/namespaces/team_b/jobs/b_job",
        "/api/v1/namespaces/team_a/jobs/b_jox",
        {},
        ("team_b/jobs/b_job", "team_a/jobs/b_jox"),
    ),
    (
        "/api/v1/namespaces/team_b/jobs/b_job/runs",
        "/api/v1/namespaces/team_a/jobs/b_jox/runs",
        {},
        ("b_job", "b_jox"),
    ),
    (
        "/api/v1/namespaces/team_b/jobs/b_job/versions",
        "/api/v1/namespaces/team_a/jobs/b_jox/versions",
        {},
        ("b_job", "b_jox"),
    ),
    (
        "/api/v1/namespaces/team_b/datasets/b_out_1",
        "/api/v1/namespaces/team_a/datasets/b_out_1",
        {},
        ("team_b", "team_a"),
    ),
    (
        "/api/v1/namespaces/team_b/datasets/b_out_1/versions",
        "/api/v1/namespaces/team_a/datasets/b_out_1/versions",
        {},
        ("team_b", "team_a"),
    ),
    ("/api/v1/sources/team_b", "/api/v1/sources/team_c", {}, ("team_b", "team_c")),
    ("/api/v1/events/team_b", "/api/v1/events/team_c", {}, ("team_b", "team_c")),
    (
        "/api/v1/lineage",
        "/api/v1/lineage",
        {"nodeId": "job:team_b:b_job"},
        ("team_b:b_job", "team_a:b_jox"),
    ),
    (
        "/api/v1/lineage",
        "/api/v1/lineage",
        {"nodeId": "job:team_b:b_job", "asOf": "2030-01-01"},
        ("team_b:b_job", "team_a:b_jox"),
    ),
    (
        "/api/v1/namespaces/team_b/jobs/b_job",
        "/api/v1/namespaces/team_a/jobs/b_jox",
        {"asOf": "2030-01-01"},
        ("team_b/jobs/b_job", "team_a/jobs/b_jox"),
    ),
    (
        "/api/v1/namespaces/team_b/jobs/b_job/versions",
        "/api/v1/namespaces/team_a/jobs/b_jox/versions",
        {"asOf": "2030-01-01"},
        ("b_job", "b_jox"),
    ),
    (
        "/api/v1/column-lineage",
        "/api/v1/column-lineage",
        {"nodeId": "dataset:team_b:b_out_1"},
        ("team_b", "team_a"),
    ),
    (
        "/api/v1/column-lineage",
        "/api/v1/column-lineage",
        {"nodeId": f"dataset:{SHARED}:b.shared", "asOf": "2030-01-01"},
        ("b.shared", "b.sharex"),
    ),
    ("/api/v1/search", "/api/v1/search", {"q": "b_job"}, ("b_job", "b_jox")),
]


@pytest.mark.parametrize(("hidden", "unknown", "params", "swap"), HIDDEN_AND_UNKNOWN)
def test_a_hidden_thing_answers_byte_for_byte_as_an_unknown_one(
    a, admin, hidden, unknown, params, swap
):
    name, other = swap
    unknown_params = {k: v.replace(name, other) for k, v in params.items()}
    assert_alike(a.get(hidden, params=params), a.get(unknown, params=unknown_params), swap)


def test_a_dataset_b_wrote_in_the_shared_namespace_shows_a_nothing_of_b(a, admin):
    assert "secret_col" in admin.get(f"/api/v1/namespaces/{SHARED}/datasets/b.shared").text
    for path in ("", "/versions"):
        seen = a.get(f"/api/v1/namespaces/{SHARED}/datasets/b.shared{path}")
        assert seen.status_code == 200
        assert (
            "secret_col" not in seen.text and RUN_B not in seen.text and "team_b" not in seen.text
        )
    events = a.get("/api/v1/events/lineage", params={"limit": 1000}).text
    assert "secret_col" not in events and "team_b" not in events
    # The version B's run made, asked for by its id, is as unknown to A as an invented id.
    base = f"/api/v1/namespaces/{SHARED}/datasets/b.shared/versions"
    [made] = admin.get(base).json()["versions"]
    version = made["version"]
    invented = str(uuid.UUID(int=uuid.UUID(version).int ^ 1))
    assert admin.get(f"{base}/{version}").status_code == 200
    assert_alike(a.get(f"{base}/{version}"), a.get(f"{base}/{invented}"), (version, invented))


# ---------------------------------------------------------------------- keys in URLs and logs


def test_a_key_in_the_query_string_is_refused_and_never_logged(tmp_path):
    toml = tmp_path / "lineage.toml"
    tables = "".join(
        f"[lineage.api.keys.{name}]\nkey_hash = '{config.key_hash}'\n"
        f"write = {config.write!r}\nread = {config.read!r}\n"
        for name, config in KEYS.items()
    )
    toml.write_text(
        f"[lineage.store]\nbackend = 'sql'\n[lineage.store.sql]\n"
        f"url = 'sqlite:///{tmp_path}/api.db'\n{tables}",
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGE_", "OPENLINEAGE_"))}
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lineage_sdk.collector.cli", "serve", "--port", str(port)],
        env={**env, "LINEAGE_CONFIG": str(toml)},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    answers: list[httpx.Response] = []
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                httpx.get(f"{base}/api/v1/health", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        for name in ("api_key", "apikey", "key", "token", "access_token", "API_KEY"):
            answers.append(httpx.get(f"{base}/api/v1/namespaces", params={name: KEY_A}))
        # With a good key in the header too, the one in the URL is still refused.
        answers.append(
            httpx.get(
                f"{base}/api/v1/namespaces?limit=5&api_key={KEY_B}",
                headers={"X-API-Key": KEY_A},
            )
        )
        fine = httpx.get(f"{base}/api/v1/namespaces", headers={"X-API-Key": KEY_A})
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert fine.status_code == 200, fine.text
    for answer in answers:
        assert answer.status_code == 400, answer.text
        assert answer.json()["reason"] == "key_in_url"
        assert "header" in answer.json()["detail"] and "X-API-Key" in answer.json()["detail"]
        assert KEY_A not in answer.text and KEY_B not in answer.text
    logged = out + err
    assert "/api/v1/namespaces" in logged  # the access log is on: the requests are in it
    assert KEY_A not in logged and KEY_B not in logged
    assert "api_key=***" in logged


@pytest.mark.parametrize(
    "table",
    [
        f"kye_hash = '{KEY_A}'\nread = ['*']\n",
        f"key = '{KEY_A}'\nkey_hash = '{hash_key(KEY_A)}'\nread = ['*']\n",
        f"key_hash = '{KEY_A}'\nread = ['*']\n",
        f"hash = '{hash_key(KEY_A)}'\nread = ['*']\n",
    ],
)
def test_a_typo_in_a_key_table_never_echoes_the_key_or_its_hash(tmp_path, table):
    path = tmp_path / "lineage.toml"
    path.write_text(f"[lineage.api.keys.k]\n{table}", encoding="utf-8")
    with pytest.raises(ConfigError) as failure:
        api_settings(load_config(path=path))
    message = str(failure.value)
    assert "lineage.api.keys.k" in message
    assert KEY_A not in message and hash_key(KEY_A).split(":")[1] not in message
