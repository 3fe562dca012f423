"""A graph the ``graph`` store of a release before the engine wrote is copied into the graph
backend's model at open, then dropped (issue 31): ``GraphPreEngineLayout`` under ``EngineStore``.

The old graph is written here with raw Cypher, in the shape that store wrote (its module
docstring and statements; checked once against its own ``write_batch`` while it existed), so
this test outlives it. On FalkorDB through its Redis protocol, a graph of its own per test.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import orjson
import pytest
from backends.upgrade_helpers import Interrupting
from servers import FalkorDBRespRunner, FalkorDBServer
from stores_nosql.nosql_events import chain, column_lineage, run_event

from lineage_sdk.collector.columns import column_edges, edge_rank
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.records import build_record, format_time, state_rank
from lineage_sdk.collector.store import LineageRecord
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.graph_legacy import OLD_RELATIONSHIPS, GraphPreEngineLayout
from lineage_sdk.collector.stores.graph_runner import GraphRunner, name_key
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.models.run_state import TERMINAL_STATES, state_key

pytestmark = pytest.mark.neo4j

NS = "up"
PARENT, CHILD, RERUN = (str(uuid.UUID(int=i)) for i in (1, 2, 3))
EVENTS: list[dict[str, Any]] = [
    *chain(NS, 6),
    run_event(job="parent", namespace=NS, event_type="START", run_id=PARENT, seconds=10.000001),
    run_event(job="parent", namespace=NS, run_id=PARENT, outputs=[(NS, "d6")], seconds=10.5),
    run_event(
        job="child",
        namespace=NS,
        run_id=CHILD,
        parent=(PARENT, NS, "parent"),
        inputs=[(NS, "d6")],
        outputs=[(NS, "report")],
        dataset_facets={"columnLineage": column_lineage({"total": [(NS, "d6", "amount")]})},
        seconds=11,
    ),
    run_event(job="a", namespace=NS, inputs=[(NS, "report")], outputs=[(NS, "ra")], seconds=12),
    run_event(job="b", namespace=NS, inputs=[(NS, "report")], outputs=[(NS, "rb")], seconds=12),
    run_event(
        job="j1", namespace=NS, event_type="START", run_id=RERUN, inputs=[(NS, "d0")], seconds=13
    ),
    run_event(
        job="j1",
        namespace=NS,
        run_id=RERUN,
        inputs=[(NS, "d0")],
        outputs=[(NS, "d1")],
        seconds=14,
    ),
    *chain("fill", 12, seconds=20),
]
RECORDS = [build_record(e) for e in EVENTS]
#: An old Event vertex whose JSON is no valid event: skipped with a warning, then dropped.
BAD_ID, BAD_TIME = "bad-event", "2025-03-01T12:00:15.000000Z"


# -- the old model, as the graph store before the engine wrote it ------------------------------


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _facets(value: Any) -> str | None:
    return _json(dict(value)) if isinstance(value, dict) and value else None


def _props(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if v is not None}


def old_graph(records: list[LineageRecord]) -> dict[str, list[dict[str, Any]]]:
    """The vertices and relationships the old store kept for ``records`` (run events), by
    its rules: every property the aggregate of the events seen, ranks as it made them."""
    jobs: dict[str, dict[str, Any]] = {}
    datasets: dict[str, dict[str, Any]] = {}
    runs: dict[str, dict[str, Any]] = {}
    fields: dict[str, dict[str, Any]] = {}
    rels: dict[tuple[str, str, str], dict[str, Any]] = {}
    events = []

    def ranked(row: dict[str, Any], prop: str, value: str | None, rank: str) -> None:
        if value is not None and (row.get(prop + "Rank") is None or rank > row[prop + "Rank"]):
            row[prop], row[prop + "Rank"] = value, rank

    def job(ns: str, name: str) -> str:
        key = name_key(ns, name)
        jobs.setdefault(key, {"key": key, "namespace": ns, "name": name})
        return key

    def dataset(ns: str, name: str) -> str:
        key = name_key(ns, name)
        datasets.setdefault(key, {"key": key, "namespace": ns, "name": name})
        return key

    for rec in records:
        assert rec.run_id and rec.job_namespace and rec.job_name
        when = format_time(rec.event_time)
        rank = f"{when}|{rec.event_id}"
        events.append(
            {"eventId": rec.event_id, "runId": rec.run_id, "json": _json(rec.event),
             "eventTime": when, "eventType": rec.event_type, "kind": rec.kind}
        )  # fmt: skip
        jkey = job(rec.job_namespace, rec.job_name)
        ranked(jobs[jkey], "facets", _facets(rec.event["job"].get("facets")), rank)
        run = runs.setdefault(rec.run_id, {"runId": rec.run_id})
        run["jobKey"] = min(run.get("jobKey") or jkey, jkey)
        run["firstEventAt"] = min(run.get("firstEventAt") or when, when)
        run["lastEventAt"] = max(run.get("lastEventAt") or when, when)
        state = state_key(rec.event_type, rec.event_time, rec.event_id)
        if state is not None:
            ranked(run, "state", state[2], state_rank(state))
            if state[2] == "START":
                run["startedAt"] = min(run.get("startedAt") or when, when)
            if state[2] in TERMINAL_STATES:
                run["endedAt"] = max(run.get("endedAt") or when, when)
        ranked(run, "facets", _facets(rec.event["run"].get("facets")), rank)
        rels[("INSTANCE_OF", rec.run_id, jkey)] = {}
        if rec.parent_run_id:
            assert rec.parent_job_namespace and rec.parent_job_name
            pkey = job(rec.parent_job_namespace, rec.parent_job_name)
            parent = runs.setdefault(rec.parent_run_id, {"runId": rec.parent_run_id})
            parent["jobKey"] = min(parent.get("jobKey") or pkey, pkey)
            rels[("CHILD_OF", rec.run_id, rec.parent_run_id)] = {}
            rels[("INSTANCE_OF", rec.parent_run_id, pkey)] = {}
        for refs, run_rel, job_rel in ((rec.inputs, "READ", "CONSUMES"),
                                       (rec.outputs, "WROTE", "PRODUCES")):  # fmt: skip
            for ref in refs:
                dkey = dataset(ref.namespace, ref.name)
                ranked(datasets[dkey], "facets", _facets(ref.facets), rank)
                rels[(run_rel, rec.run_id, dkey)] = {}
                edge = rels.setdefault((job_rel, jkey, dkey), {"firstSeen": when})
                edge["firstSeen"] = min(edge["firstSeen"], when)
                for (out, src), info in column_edges(rec).items():
                    if (out.namespace, out.dataset) != (ref.namespace, ref.name):
                        continue
                    okey = name_key(out.namespace, out.dataset, out.field)
                    ikey = name_key(src.namespace, src.dataset, src.field)
                    for key, f in ((okey, out), (ikey, src)):
                        fields[key] = {"key": key, "namespace": f.namespace,
                                       "dataset": f.dataset, "name": f.field}  # fmt: skip
                        rels[("HAS_FIELD", dataset(f.namespace, f.dataset), key)] = {}
                    column = edge_rank(rec.event_time, rec.event_id)
                    old = rels.get(("DERIVED_FROM", okey, ikey))
                    if old is None or column > old["rank"]:
                        rels[("DERIVED_FROM", okey, ikey)] = {"info": info, "rank": column}
    for key, row in jobs.items():  # the latest run: latest last event, least id among equal
        mine = [runs[r] for (t, r, j) in rels if t == "INSTANCE_OF" and j == key]
        best = max(mine, key=lambda x: (x.get("lastEventAt") or "", [-ord(c) for c in x["runId"]]))
        row["latestRunId"] = best["runId"]
    return {
        "Job": list(jobs.values()),
        "Dataset": list(datasets.values()),
        "Run": list(runs.values()),
        "Field": list(fields.values()),
        "Event": events,
        "rels": [{"type": t, "a": a, "b": b, "props": p} for (t, a, b), p in rels.items()],
    }


_ENDS = {  # relationship type -> (start label, its key), (end label, its key)
    "INSTANCE_OF": (("Run", "runId"), ("Job", "key")),
    "CHILD_OF": (("Run", "runId"), ("Run", "runId")),
    "READ": (("Run", "runId"), ("Dataset", "key")),
    "WROTE": (("Run", "runId"), ("Dataset", "key")),
    "CONSUMES": (("Job", "key"), ("Dataset", "key")),
    "PRODUCES": (("Job", "key"), ("Dataset", "key")),
    "HAS_FIELD": (("Dataset", "key"), ("Field", "key")),
    "DERIVED_FROM": (("Field", "key"), ("Field", "key")),
}


def write_old_graph(runner: GraphRunner, records: list[LineageRecord]) -> None:
    """``old_graph(records)`` into the graph, plus the invalid event, with raw Cypher."""
    graph = old_graph(records)
    for label in ("Job", "Dataset", "Run", "Field", "Event"):
        rows = [_props(r) for r in graph[label]]
        runner.run(f"UNWIND $rows AS r CREATE (n:{label}) SET n = r", {"rows": rows})
    runner.run(
        "CREATE (:Event {eventId: $id, eventTime: $t, json: $json, kind: 'run'})",
        {"id": BAD_ID, "t": BAD_TIME, "json": '{"eventType": "COMPLETE"}'},
    )
    for rel, ((la, ka), (lb, kb)) in _ENDS.items():
        rows = [r for r in graph["rels"] if r["type"] == rel]
        runner.run(
            f"UNWIND $rows AS r MATCH (a:{la} {{{ka}: r.a}}), (b:{lb} {{{kb}: r.b}}) "
            f"CREATE (a)-[x:{rel}]->(b) SET x = r.props",
            {"rows": rows},
        )


def dump(runner: GraphRunner) -> tuple[list[Any], list[Any]]:
    """Every vertex (labels, properties) and relationship (type, ends, properties), sorted."""
    nodes = runner.run("MATCH (n) RETURN labels(n) AS l, properties(n) AS p")
    rels = runner.run(
        "MATCH (a)-[r]->(b) RETURN type(r) AS t, properties(a) AS a, properties(b) AS b, "
        "properties(r) AS p"
    )

    def ident(p: dict[str, Any]) -> Any:
        return p.get("key") or p.get("runId") or p.get("eventId")

    return (
        sorted(_json([r["l"], r["p"]]) for r in nodes),
        sorted(_json([r["t"], ident(r["a"]), ident(r["b"]), r["p"]]) for r in rels),
    )


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def runner(falkordb: FalkorDBServer) -> Iterator[FalkorDBRespRunner]:
    """A FalkorDB graph of its own holding the old model of ``EVENTS``, dropped afterwards."""
    made = FalkorDBRespRunner("127.0.0.1", falkordb.redis_port, f"up_{uuid.uuid4().hex[:10]}")
    write_old_graph(made, RECORDS)
    yield made
    made.drop()


def _count(runner: GraphRunner, query: str) -> int:
    return int(runner.run(query)[0]["n"])


def old_left(runner: GraphRunner) -> dict[str, int]:
    """What of the old model is in the graph (all zero once dropped)."""
    left = {
        "events": _count(runner, "MATCH (e:Event) WHERE e.jobKey IS NULL RETURN count(e) AS n"),
        "runs": _count(runner, "MATCH (x:Run) WHERE x.key IS NULL RETURN count(x) AS n"),
        "fields": _count(runner, "MATCH (f:Field) RETURN count(f) AS n"),
        "marker": _count(runner, "MATCH (m:PreEngineUpgrade) RETURN count(m) AS n"),
        "old properties": _count(
            runner,
            "MATCH (n) WHERE n.latestRunId IS NOT NULL OR n.facets IS NOT NULL "
            "OR n.facetsRank IS NOT NULL OR n.staticKey IS NOT NULL RETURN count(n) AS n",
        ),
        "bare": _count(
            runner,
            "MATCH (n) WHERE (n:Job OR n:Dataset) AND n.firstSeen IS NULL RETURN count(n) AS n",
        ),
    }
    for rel in OLD_RELATIONSHIPS:
        left[rel] = _count(runner, f"MATCH ()-[r:{rel}]->() RETURN count(r) AS n")
    return left


def new_events(runner: GraphRunner) -> list[str]:
    rows = runner.run("MATCH (e:Event) WHERE e.jobKey IS NOT NULL RETURN e.eventId AS id")
    return [r["id"] for r in rows]


def _engine(runner: GraphRunner, earlier: Any = None, batch: int = 7) -> EngineStore:
    layout = GraphPreEngineLayout(runner) if earlier is None else earlier
    return EngineStore(GraphBackend(runner=runner), earlier=layout, upgrade_batch=batch)


def _answers(store: EngineStore) -> dict[str, Any]:
    nodes = [f"job:{NS}:j3", f"dataset:{NS}:d6", f"job:{NS}:child", "dataset:fill:d5"]
    out: dict[str, Any] = {}
    for node in nodes:
        for direction in ("upstream", "downstream", "both"):
            out[f"{node} {direction}"] = store.lineage(node, direction=direction, depth=10)
    for ns, job in ((NS, "j1"), (NS, "parent"), (NS, "child"), (NS, "a"), ("fill", "j4")):
        out[f"runs {ns}.{job}"] = store.runs_of_job(ns, job)
    out["child events"] = store.events_of_run(CHILD)
    out["columns"] = store.column_lineage(f"dataset:{NS}:report", with_downstream=True)
    return out


# -- tests ----------------------------------------------------------------------------------


def test_the_old_graph_is_read_in_order(runner: FalkorDBRespRunner) -> None:
    layout = GraphPreEngineLayout(runner)
    assert layout.count_raw_events() == len(EVENTS) + 1
    want = sorted(
        [(r.event_time, r.event_id) for r in RECORDS] + [(datetime.fromisoformat(BAD_TIME), BAD_ID)]
    )
    for size in (1, 3, 1000):
        got = [e.position for e in layout.iter_raw_events(batch_size=size)]
        assert got == want, size
        assert [e.position for e in layout.iter_raw_events(after=want[9], batch_size=size)] == (
            want[10:]
        )
    assert list(layout.iter_raw_events(after=want[-1])) == []
    by_id = {e.event_id: e for e in layout.iter_raw_events()}
    assert by_id[RECORDS[0].event_id].data() == EVENTS[0]
    assert layout.copied() is None
    layout.mark_copied(want[3])
    assert layout.copied() == want[3]


def test_open_copies_the_old_graph_and_drops_it(
    runner: FalkorDBRespRunner, caplog: pytest.LogCaptureFixture
) -> None:
    before = GraphBackend(runner=runner).missing()
    assert any(f"{len(EVENTS) + 1} event(s) in the layout of a release before" in m for m in before)
    assert "index on :Event(eventTime)" in before and "index on :Mention(key)" in before
    caplog.set_level(logging.WARNING)
    store = _engine(runner)
    store.open()
    assert sorted(new_events(runner)) == sorted(r.event_id for r in RECORDS)
    assert not any(old_left(runner).values()), old_left(runner)
    assert any("skips event bad-event" in m for m in caplog.messages)
    assert store.backend.missing() == []  # type: ignore[attr-defined]

    reference = EngineStore(MemoryBackend())
    reference.open()
    reference.write_batch(RECORDS)
    assert _answers(store) == _answers(reference)

    # A second open is a no-op: nothing left to copy, nothing changed.
    graph = dump(runner)
    caplog.clear()
    again = _engine(runner)
    again.open()
    assert dump(runner) == graph
    assert not [m for m in caplog.messages if "before the engine" in m]
    assert _answers(again) == _answers(reference)


def test_an_interrupted_copy_resumes(
    runner: FalkorDBRespRunner, caplog: pytest.LogCaptureFixture
) -> None:
    crashing = Interrupting(GraphPreEngineLayout(runner), batches=2)
    with pytest.raises(ConnectionError):
        _engine(runner, crashing).open()
    ordered = sorted(RECORDS, key=lambda r: (r.event_time, r.event_id))
    copied = new_events(runner)
    assert sorted(copied) == sorted(r.event_id for r in ordered[:14])
    assert GraphPreEngineLayout(runner).copied() == (ordered[13].event_time, ordered[13].event_id)
    left = [m for m in GraphBackend(runner=runner).missing() if "before the engine" in m]
    assert left and left[0].startswith(f"{len(EVENTS) + 1 - 14} event(s)")

    caplog.set_level(logging.WARNING)
    store = _engine(runner)
    store.open()
    assert any("resuming after" in m for m in caplog.messages)
    assert any(f"{len(EVENTS) - 14} event(s) copied this time" in m for m in caplog.messages)
    ids = new_events(runner)
    assert len(ids) == len(set(ids)) == len(EVENTS)  # every event, none twice
    assert set(ids) == {r.event_id for r in RECORDS}
    assert not any(old_left(runner).values()), old_left(runner)
    reference = EngineStore(MemoryBackend())
    reference.open()
    reference.write_batch(RECORDS)
    assert _answers(store) == _answers(reference)
