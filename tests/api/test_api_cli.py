"""The ``lineage`` CLI as a user runs it (a real process): over HTTP (--url) and straight from the
configured store (--config), every format, plain when piped and coloured when forced."""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
import uuid

import orjson
import pytest
from api_helpers import HOSTILE_DATASET, HOSTILE_JOB, PG, run_cli

ANSI = re.compile(r"\x1b\[[0-9;]*m")
FACET = {
    "_producer": "https://example.com/tests",
    "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/OwnershipJobFacet.json",
}


def _sources(api):
    return {"http": ["--url", api.url], "store": ["--config", str(api.config_path)]}


@pytest.mark.parametrize("source", ["http", "store"])
def test_graph_tree_reads_the_same_from_api_and_store(api, loaded, source):
    args = _sources(api)[source]
    result = run_cli(*args, "graph", f"dataset:{PG}:mart.daily", "--upstream", "--depth", "3")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert not ANSI.search(out), "piped output must be plain"
    assert out.startswith("upstream of dataset")
    for text in (
        "report",
        "clean.orders",
        "clean",
        "FAILED",
        "stg.orders",
        "extract",
        "raw.orders",
        HOSTILE_DATASET,
    ):
        assert text in out, text
    assert "downstream of" not in out
    # Depth is honoured: extract is 3 job hops up, audit is not upstream at all.
    assert "audit" not in out

    as_json = run_cli(
        *args, "graph", f"dataset:{PG}:mart.daily", "--upstream", "--depth", "3", "--format", "json"
    )
    assert as_json.returncode == 0, as_json.stderr
    from_cli = orjson.loads(as_json.stdout)
    from_api = api.client.get(
        "/api/v1/lineage",
        params={"nodeId": f"dataset:{PG}:mart.daily", "depth": 3, "direction": "upstream"},
    ).json()
    assert from_cli == from_api


def test_graph_both_directions_prints_two_trees_with_shared_nodes_once(api, loaded):
    result = run_cli("--url", api.url, "graph", f"dataset:{PG}:stg.orders")
    assert result.returncode == 0, result.stderr
    assert "upstream of dataset" in result.stdout and "downstream of dataset" in result.stdout
    down = result.stdout.split("downstream of", 1)[1]
    assert down.count("mart.daily") == 1


def test_dot_and_mermaid_escape_hostile_names(api, loaded):
    dot = run_cli("--url", api.url, "graph", "job:shop:report", "--format", "dot", "--depth", "1")
    assert dot.returncode == 0, dot.stderr
    assert dot.stdout.startswith("digraph lineage {")
    escaped = HOSTILE_DATASET.replace('"', '\\"')
    assert f'label="{escaped}"' in dot.stdout
    # Every quoted string is closed: quotes balance once escaped quotes are removed.
    assert dot.stdout.replace('\\"', "").count('"') % 2 == 0
    assert '"job:shop:report" [' in dot.stdout and "peripheries=2" in dot.stdout

    mermaid = run_cli(
        "--url", api.url, "graph", "job:shop:report", "--format", "mermaid", "--depth", "1"
    )
    assert mermaid.returncode == 0, mermaid.stderr
    assert mermaid.stdout.startswith("flowchart LR")
    assert "<" not in mermaid.stdout and '"x' not in mermaid.stdout
    assert "#60;img src#61;x onerror#61;#34;window.__pwned#61;#39;dataset#39;#34;#62;" in (
        mermaid.stdout
    )
    assert "class " in mermaid.stdout and " --> " in mermaid.stdout


def test_impact_lists_everything_downstream(api, loaded):
    result = run_cli("--url", api.url, "impact", "job:shop:extract", "--format", "json")
    assert result.returncode == 0, result.stderr
    rows = orjson.loads(result.stdout)
    by_name = {r["name"]: r for r in rows}
    assert set(by_name) == {
        "stg.orders",
        "clean",
        "audit",
        "clean.orders",
        "audit.log",
        "report",
        "mart.daily",
        HOSTILE_JOB,
        "export.csv",
    }
    # Distance counts edges along the data flow (dataset -> job -> dataset).
    assert by_name["clean"]["distance"] == 2
    assert by_name["clean"]["latestRun"]["state"] == "FAILED"
    assert by_name["clean"]["latestRun"]["id"] == loaded["runs"]["clean"]
    assert by_name["clean.orders"]["latestRun"]["job"] == {"namespace": "shop", "name": "clean"}
    assert by_name["report"]["distance"] == 4
    assert by_name[HOSTILE_JOB]["distance"] == 6
    assert [r["distance"] for r in rows] == sorted(r["distance"] for r in rows)
    assert all(r["owners"] == [] for r in rows)
    # The same items as the route's, from the API and from the store alike.
    from_api = api.client.get("/api/v1/impact", params={"nodeId": "job:shop:extract"}).json()
    assert rows == from_api["impact"]
    direct = run_cli("--config", str(api.config_path), "impact", "job:shop:extract", "-f", "json")
    assert direct.returncode == 0, direct.stderr
    assert orjson.loads(direct.stdout) == rows

    table = run_cli("--config", str(api.config_path), "impact", "job:shop:extract")
    assert table.returncode == 0, table.stderr
    assert "4 job(s) and 5 dataset(s) downstream of job:shop:extract" in table.stdout
    assert HOSTILE_JOB in table.stdout and "FAILED" in table.stdout and "owners" in table.stdout


@pytest.mark.parametrize("source", ["http", "store"])
def test_impact_csv_and_owners(api, source):
    """``--format csv``: a header and one row per node, owners in one cell."""
    run_id = str(uuid.uuid4())
    events = []
    for kind, at in (("START", "2025-03-02T00:00:00Z"), ("FAIL", "2025-03-02T00:01:00Z")):
        events.append(
            {
                "eventType": kind,
                "eventTime": at,
                "run": {"runId": run_id, "facets": {}},
                "job": {
                    "namespace": "csv",
                    "name": "load, daily",
                    "facets": {"ownership": {**FACET, "owners": [{"name": "team:data"}]}},
                },
                "inputs": [{"namespace": "csv", "name": "src", "facets": {}}],
                "outputs": [
                    {
                        "namespace": "csv",
                        "name": 'out "quoted"',
                        "facets": {
                            "ownership": {
                                **FACET,
                                "owners": [
                                    {"name": "user:ann", "type": "MAINTAINER"},
                                    {"name": "user:bob"},
                                ],
                            }
                        },
                    }
                ],
                "producer": "https://example.com/tests",
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            }
        )
    posted = api.client.post("/api/v1/lineage/batch", json=events)
    assert posted.status_code == 200, posted.text
    result = run_cli(*_sources(api)[source], "impact", "dataset:csv:src", "--format", "csv")
    assert result.returncode == 0, result.stderr
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert rows == [
        ["nodeId", "type", "namespace", "name", "distance", "latestRunId", "latestState", "owners"],
        ["job:csv:load, daily", "JOB", "csv", "load, daily", "1", run_id, "FAILED", "team:data"],
        [
            'dataset:csv:out "quoted"',
            "DATASET",
            "csv",
            'out "quoted"',
            "2",
            run_id,
            "FAILED",
            "user:ann (MAINTAINER), user:bob",
        ],
    ]
    table = run_cli(*_sources(api)[source], "impact", "dataset:csv:src")
    assert table.returncode == 0, table.stderr
    assert "user:ann (MAINTAINER), user:bob" in table.stdout and "team:data" in table.stdout
    unknown = run_cli(*_sources(api)[source], "impact", "dataset:csv:never")
    assert unknown.returncode == 1 and "nothing is recorded" in unknown.stderr
    bad = run_cli(*_sources(api)[source], "impact", "nonsense")
    assert bad.returncode == 2


@pytest.mark.parametrize("source", ["http", "store"])
def test_impact_depth_cuts_the_list(api, source):
    """``--depth N`` counts job hops: on a chain a0 -> [c1] -> a1 -> [c2] -> a2 -> [c3] -> a3,
    depth 1 from a0 is c1 and a1, depth 2 adds c2 and a2, and the default (20) reaches a3."""
    runs = {
        job: str(uuid.UUID(int=0xDE97 + i, version=4)) for i, job in enumerate(("c1", "c2", "c3"))
    }
    events = [
        {
            "eventType": "COMPLETE",
            "eventTime": f"2025-03-03T00:0{i}:00Z",
            "run": {"runId": runs[job], "facets": {}},
            "job": {"namespace": "depth", "name": job, "facets": {}},
            "inputs": [{"namespace": "depth", "name": f"a{i}", "facets": {}}],
            "outputs": [{"namespace": "depth", "name": f"a{i + 1}", "facets": {}}],
            "producer": "https://example.com/tests",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        }
        for i, job in enumerate(("c1", "c2", "c3"))
    ]
    posted = api.client.post("/api/v1/lineage/batch", json=events)
    assert posted.status_code == 200, posted.text
    args = _sources(api)[source]
    header = "nodeId,type,namespace,name,distance,latestRunId,latestState,owners\n"
    one = (
        f"job:depth:c1,JOB,depth,c1,1,{runs['c1']},COMPLETED,\n"
        f"dataset:depth:a1,DATASET,depth,a1,2,{runs['c1']},COMPLETED,\n"
    )
    two = (
        f"job:depth:c2,JOB,depth,c2,3,{runs['c2']},COMPLETED,\n"
        f"dataset:depth:a2,DATASET,depth,a2,4,{runs['c2']},COMPLETED,\n"
    )
    for depth, expected in (("1", header + one), ("2", header + one + two)):
        result = run_cli(*args, "impact", "dataset:depth:a0", "--depth", depth, "--format", "csv")
        assert result.returncode == 0, result.stderr
        assert result.stdout == expected, (depth, result.stdout)
    table = run_cli(*args, "impact", "dataset:depth:a0", "--depth", "1")
    assert table.returncode == 0, table.stderr
    assert "1 job(s) and 1 dataset(s) downstream of dataset:depth:a0" in table.stdout
    assert "c1" in table.stdout and "c2" not in table.stdout
    whole = run_cli(*args, "impact", "dataset:depth:a0", "--format", "json")
    assert whole.returncode == 0, whole.stderr
    assert [r["name"] for r in orjson.loads(whole.stdout)] == ["c1", "a1", "c2", "a2", "c3", "a3"]


def test_runs_shows_state_and_duration(api, loaded):
    result = run_cli("--url", api.url, "runs", "job:shop:clean")
    assert result.returncode == 0, result.stderr
    assert loaded["runs"]["clean"] in result.stdout
    assert "FAILED" in result.stdout and "12.0 s" in result.stdout
    direct = run_cli("--config", str(api.config_path), "runs", "job:shop:extract", "-f", "json")
    assert direct.returncode == 0, direct.stderr
    (run,) = orjson.loads(direct.stdout)
    assert run["state"] == "COMPLETED" and run["durationMs"] == 65000


def test_events_prints_the_runs_events(api, loaded):
    run_id = loaded["runs"]["report"]
    sent = [e for e in loaded["events"] if e["run"]["runId"] == run_id]
    jsonl = run_cli("--config", str(api.config_path), "events", run_id, "--format", "jsonl")
    assert jsonl.returncode == 0, jsonl.stderr
    assert [orjson.loads(line) for line in jsonl.stdout.splitlines()] == sent
    pretty = run_cli("--url", api.url, "events", run_id)
    assert pretty.returncode == 0, pretty.stderr
    assert "START" in pretty.stdout and "COMPLETE" in pretty.stdout
    assert f'"runId": "{run_id}"' in pretty.stdout
    assert not ANSI.search(pretty.stdout)


def test_colour_when_the_terminal_allows_it(api, loaded):
    forced = run_cli(
        "--url",
        api.url,
        "graph",
        "job:shop:clean",
        "--depth",
        "0",
        env={"FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "120"},
    )
    assert forced.returncode == 0, forced.stderr
    assert ANSI.search(forced.stdout)
    assert "FAILED" in ANSI.sub("", forced.stdout)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["graph", "orders"], 2, "node id must be"),
        (["graph", f"dataset:{PG}:nothing-here"], 1, "nothing is recorded"),
        (["runs", f"dataset:{PG}:stg.orders"], 2, "expected a job node id"),
        (["runs", "job:shop:never-ran"], 1, "no runs"),
        (["events", "00000000-0000-4000-8000-000000000000"], 1, "no events"),
        (["graph", "job:shop:x", "--depth", "-1"], 2, "depth"),
    ],
)
def test_errors_are_one_clear_line_and_an_exit_code(api, loaded, args, code, message):
    for source in _sources(api).values():
        result = run_cli(*source, *args)
        assert result.returncode == code, (source, result.stdout, result.stderr)
        assert message in result.stderr.lower() or message in result.stderr
        assert "Traceback" not in result.stderr


def test_unreachable_api_is_a_clear_error():
    result = run_cli("--url", "http://127.0.0.1:9", "graph", "job:a:b")
    assert result.returncode == 1
    assert "cannot reach http://127.0.0.1:9" in result.stderr
    assert "Traceback" not in result.stderr


def test_store_without_queries_is_a_clear_error(tmp_path):
    toml = tmp_path / "lineage.toml"
    toml.write_text('[lineage.store]\nbackend = "logging"\n', encoding="utf-8")
    result = run_cli("--config", str(toml), "graph", "job:a:b")
    assert result.returncode == 2
    assert "no configured store answers queries" in result.stderr


def test_missing_sqlite_database_is_an_error_not_a_new_empty_file(tmp_path):
    db = tmp_path / "absent.db"
    toml = tmp_path / "lineage.toml"
    toml.write_text(f'[lineage.store.sql]\nurl = "sqlite:///{db}"\n', encoding="utf-8")
    result = run_cli("--config", str(toml), "graph", "job:a:b")
    assert result.returncode == 2
    assert "no lineage database" in result.stderr
    assert not db.exists()


def test_reading_the_store_loads_no_web_framework(api, loaded):
    """The CLI asks the collector's manager for its query store: reading a store directly, every
    question answered, must not import FastAPI, Starlette or uvicorn."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from lineage_sdk.cli import StoreSource\n"
        "source = StoreSource(Path(sys.argv[1]))\n"
        f"assert source.lineage('dataset:{PG}:mart.daily', 'both', 3)['graph']\n"
        "assert source.runs('shop', 'extract', 5)\n"
        f"assert source.events({loaded['runs']['extract']!r})\n"
        "source.close()\n"
        "web = {m.split('.')[0] for m in sys.modules} & {'fastapi', 'starlette', 'uvicorn'}\n"
        "print(sorted(web))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(api.config_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
