"""Pure logic: Marquez conversions, the query-store choice, DOT/Mermaid escaping, a read-only
app over a memory backend, and the schema validators' ability to fail."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from api_helpers import ValidationError, run_event, validate_marquez

from lineage_sdk.cli import to_dot, to_mermaid
from lineage_sdk.collector.api import ApiServer, create_app, pick_query_store
from lineage_sdk.collector.api.marquez import marquez_state, run_from_events, run_from_summary
from lineage_sdk.collector.decode import validate_event
from lineage_sdk.collector.engine import Engine, EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.store import (
    Page,
    RunSummary,
)
from lineage_sdk.collector.stores.composite import CompositeStore
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("START", "RUNNING"),
        ("RUNNING", "RUNNING"),
        ("COMPLETE", "COMPLETED"),
        ("FAIL", "FAILED"),
        ("ABORT", "ABORTED"),
        ("OTHER", "NEW"),
        (None, "NEW"),
    ],
)
def test_states_map_to_marquez(state, expected):
    assert marquez_state(state) == expected


def test_run_state_folds_whatever_the_arrival_order():
    run_id = "11111111-1111-4111-8111-111111111111"
    start = run_event("j", event_type="START", run_id=run_id, seconds=0)
    other = run_event("j", event_type="OTHER", run_id=run_id, seconds=5)
    done = run_event("j", event_type="COMPLETE", run_id=run_id, seconds=7.25)
    for order in ([start, other, done], [done, other, start], [other, done, start]):
        run = run_from_events(run_id, order)
        assert run["state"] == "COMPLETED"
        assert run["durationMs"] == 7250
        validate_marquez("Run", run)
    assert run_from_events(run_id, [other])["state"] == "NEW"


def test_run_summary_leaves_unknowns_out():
    summary = RunSummary(
        "22222222-2222-4222-8222-222222222222",
        "n",
        "j",
        "START",
        datetime(2025, 1, 1, tzinfo=UTC),
        None,
    )
    run = run_from_summary(summary)
    assert run == {
        "id": summary.run_id,
        "state": "RUNNING",
        "startedAt": "2025-01-01T00:00:00Z",
        "facets": {},
    }
    validate_marquez("Run", run)


def test_marquez_validator_fails_on_wrong_shapes():
    with pytest.raises(ValidationError):
        validate_marquez("Run", {"id": "not-a-uuid", "state": "RUNNING"})
    with pytest.raises(ValidationError):
        validate_marquez("Run", {"id": "33333333-3333-4333-8333-333333333333", "state": "DONE"})
    with pytest.raises(ValidationError):
        validate_marquez(
            "LineageGraph",
            {"graph": [{"id": "x", "type": "TABLE", "data": {}, "inEdges": [], "outEdges": []}]},
        )
    with pytest.raises(ValidationError):  # a job's data must be a Job: inputs is a list
        validate_marquez(
            "LineageGraph",
            {
                "graph": [
                    {
                        "id": "job:a:b",
                        "type": "JOB",
                        "data": {"inputs": "x"},
                        "inEdges": [],
                        "outEdges": [],
                    }
                ]
            },
        )


class _NamedBackend(MemoryBackend):
    """A memory backend under another store's name (the choice goes by name)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


class _WriteOnly:
    name = "logging"

    def open(self) -> None: ...
    def write_batch(self, records) -> None: ...
    def check(self) -> None: ...
    def close(self) -> None: ...


def test_query_store_prefers_sql_then_graph_and_looks_into_composites():
    logging_ = _WriteOnly()
    document, graph, sql = (EngineStore(_NamedBackend(n)) for n in ("document", "graph", "sql"))
    assert pick_query_store([CompositeStore([document, graph, sql])]) is sql
    assert pick_query_store([logging_, graph, document]) is graph
    assert pick_query_store([logging_, document]) is document
    assert pick_query_store([logging_]) is None


def test_manager_names_its_query_store_without_opening_it(tmp_path):
    sql, graph = EngineStore(_NamedBackend("sql")), EngineStore(_NamedBackend("graph"))
    composite = CompositeStore([_WriteOnly(), graph, sql])
    assert LineageManager(LineageConfig(), stores=[composite]).query_store() is sql
    db = tmp_path / "lineage.db"
    config = LineageConfig.model_validate(
        {
            "store": {
                "backend": "composite",
                "backends": ["logging", "sql"],
                "sql": {"url": f"sqlite:///{db}"},
            }
        }
    )
    assert LineageManager(config).query_store().name == "sql"
    assert not db.exists()  # built, not opened: opening is the caller's business


def test_manager_says_when_no_store_answers_queries():
    config = LineageConfig.model_validate({"store": {"backend": "logging"}})
    with pytest.raises(ConfigError, match="no configured store answers queries"):
        LineageManager(config).query_store()


def test_page_counts_only_when_the_page_cannot_tell_the_total():
    counted: list[int] = []

    def count() -> int:
        counted.append(1)
        return 42

    short = Page.sliced(["a", "b"], offset=3, limit=5, count=count)
    assert (short, short.total, counted) == (["a", "b"], 5, [])
    assert Page.sliced([], offset=0, limit=5, count=count).total == 0 and not counted
    assert Page.sliced(["a", "b"], offset=0, limit=2, count=count).total == 42  # full: may be more
    assert Page.sliced([], offset=9, limit=2, count=count).total == 42  # past the end
    assert len(counted) == 2


RUN = "44444444-4444-4444-8444-444444444444"


def test_a_read_only_app_over_an_engine():
    """``create_app(Engine(backend))``: reads answer from the backend, ingest is off. (This
    test ran over an in-test catalog class until the API asked the engine only; the same two
    nodes and failed run now come from a memory backend's rows.)"""
    backend = MemoryBackend()
    writer = EngineStore(backend)
    writer.open()
    event = run_event("j", namespace="n", event_type="FAIL", run_id=RUN, outputs=[("n", "d")])
    writer.write_batch([validate_event(event)])
    with ApiServer(create_app(Engine(backend))) as server:
        graph = httpx.get(f"{server.url}/api/v1/lineage", params={"nodeId": "job:n:j"}).json()
        validate_marquez("LineageGraph", graph)
        assert graph["graph"][0]["data"]["latestRun"] == {"id": RUN, "state": "FAILED"}
        sources = httpx.get(f"{server.url}/api/v1/sources").json()["sources"]
        assert [s["name"] for s in sources] == ["default"]  # no dataSource facet: Marquez's
        cut = httpx.get(
            f"{server.url}/api/v1/lineage", params={"nodeId": "job:n:j", "nodeLimit": 1}
        ).json()
        assert [n["id"] for n in cut["graph"]] == ["job:n:j"] and cut["truncated"] is True
        posted = httpx.post(f"{server.url}/api/v1/lineage", json=run_event("x"))
        assert posted.status_code == 503 and posted.json()["reason"] == "no_store"
        assert httpx.get(f"{server.url}/api/v1/health").json()["ingest"] is False


HOSTILE_GRAPH = {
    "graph": [
        {
            "id": 'job:n:a"b\\c',
            "type": "JOB",
            "data": {"namespace": "n", "name": 'a"b\\c\n<x>', "latestRun": {"state": "FAILED"}},
            "inEdges": [],
            "outEdges": [{"origin": 'job:n:a"b\\c', "destination": "dataset:n:]x["}],
        },
        {
            "id": "dataset:n:]x[",
            "type": "DATASET",
            "data": {"namespace": "n", "name": ']x["};'},
            "inEdges": [{"origin": 'job:n:a"b\\c', "destination": "dataset:n:]x["}],
            "outEdges": [],
        },
    ]
}


def test_dot_quotes_and_escapes_every_string():
    dot = to_dot(HOSTILE_GRAPH, 'job:n:a"b\\c')
    assert '"job:n:a\\"b\\\\c" [label="a\\"b\\\\c\\n<x>"' in dot
    assert '"job:n:a\\"b\\\\c" -> "dataset:n:]x[";' in dot
    assert 'color="#d62828"' in dot
    unescaped = dot.replace("\\\\", "").replace('\\"', "")
    assert all(line.count('"') % 2 == 0 for line in unescaped.splitlines())


def test_mermaid_uses_generated_ids_and_entity_codes():
    text = to_mermaid(HOSTILE_GRAPH, "dataset:n:]x[")
    assert "n0 --> n1" in text or "n1 --> n0" in text
    for raw in ('"b', "<x>", "]x[", "};"):
        assert raw not in text.split("classDef")[0].replace('["', "").replace('"]', "").replace(
            '[("', ""
        ).replace('")]', "")
    assert "#34;" in text and "#60;x#62;" in text and "#93;x#91;" in text
    assert "class n1 failed" in text or "class n0 failed" in text


def test_bundled_graph_libraries_are_in_the_package():
    """The page's one vendor file ships in the package (no npm at install, no CDN at run time)."""
    from lineage_sdk.collector.api import STATIC_DIR

    bundle = (STATIC_DIR / "graph-libs.js").read_text(encoding="utf-8")
    assert bundle.startswith("/* lineage-sdk graph page libraries: cytoscape + cytoscape-dagre")
    assert "window.cytoscape" in bundle or "cytoscape=" in bundle
    assert "dagre" in bundle
    assert "MIT" in bundle  # the libraries' license notices are kept
    for name in ("index.html", "app.js", "style.css"):
        assert (STATIC_DIR / name).is_file()


def test_the_api_process_collects_cycles_less_often() -> None:
    """``serve`` tunes the cyclic collector before it listens (the tail latency of big lineage
    answers came from its passes); checked in a process of its own, not this one."""
    import subprocess
    import sys

    code = (
        "import gc\n"
        "from lineage_sdk.collector.startup import GC_THRESHOLDS, tune_gc\n"
        "default = gc.get_threshold()\n"
        "tune_gc()\n"
        "assert gc.get_threshold() == GC_THRESHOLDS != default, (default, gc.get_threshold())\n"
        "assert gc.get_freeze_count() > 0\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
