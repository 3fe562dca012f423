"""The graph store's projection, convergence, hostile input and catalog (FalkorDB or Neo4j)."""

from __future__ import annotations

import itertools
import json

import pytest
from nosql_events import (
    HOSTILE_KEYS,
    HOSTILE_STRINGS,
    column_lineage,
    facet,
    records,
    run_event,
    uid,
)

from lineage_sdk.collector.store import LineageCatalogProtocol, node_id

pytestmark = pytest.mark.neo4j


def snapshot(store):
    """The whole graph as comparable data (no internal ids)."""
    nodes = store.runner.run("MATCH (n) RETURN labels(n) AS labels, properties(n) AS props")
    rels = store.runner.run(
        "MATCH (a)-[r]->(b) RETURN labels(a) AS a, properties(a) AS ap, type(r) AS t,"
        " labels(b) AS b, properties(b) AS bp"
    )

    def key(props):
        return json.dumps(dict(props), sort_keys=True)

    return (
        sorted((sorted(n["labels"]), key(n["props"])) for n in nodes),
        sorted((sorted(r["a"]), key(r["ap"]), r["t"], sorted(r["b"]), key(r["bp"])) for r in rels),
    )


def count(store, query, **params):
    return store.runner.run(query, params)[0]["c"]


def test_graph_store_implements_the_catalog(graph_store):
    assert isinstance(graph_store, LineageCatalogProtocol)
    assert graph_store.dialect in {"neo4j", "opencypher"}


def test_projection_nodes_and_relationships(graph_store):
    ns = f"ns-{uid()}"
    parent, child = "eeeeeeee-0000-4000-8000-000000000001", "eeeeeeee-0000-4000-8000-000000000002"
    cl = column_lineage(
        {"total": [(ns, "orders", "amount"), (ns, "fx", "rate")], "id": [(ns, "orders", "id")]}
    )
    events = [
        run_event(job="parent", namespace=ns, run_id=parent, event_type="START"),
        run_event(
            job="child",
            namespace=ns,
            run_id=child,
            parent=(parent, ns, "parent"),
            inputs=[(ns, "orders"), (ns, "fx")],
            outputs=[(ns, "report")],
            job_facets={"jobType": facet(integration="x")},
        ),
    ]
    events[1]["outputs"][0]["facets"] = {"columnLineage": cl}
    graph_store.write_batch(records(*events))
    s = graph_store
    assert count(s, "MATCH (j:Job) RETURN count(j) AS c") == 2
    assert count(s, "MATCH (d:Dataset) RETURN count(d) AS c") == 3
    assert count(s, "MATCH (r:Run) RETURN count(r) AS c") == 2
    assert (
        count(
            s,
            "MATCH (:Run {runId: $c})-[:CHILD_OF]->(:Run {runId: $p}) RETURN count(*) AS c",
            c=child,
            p=parent,
        )
        == 1
    )
    assert (
        count(
            s,
            "MATCH (:Run {runId: $p})-[:INSTANCE_OF]->(:Job {name: 'parent'}) RETURN count(*) AS c",
            p=parent,
        )
        == 1
    )
    assert (
        count(s, "MATCH (:Run {runId: $c})-[:READ]->(d:Dataset) RETURN count(d) AS c", c=child) == 2
    )
    assert (
        count(
            s,
            "MATCH (:Run {runId: $c})-[:WROTE]->(d:Dataset {name: 'report'}) RETURN count(d) AS c",
            c=child,
        )
        == 1
    )
    assert (
        count(s, "MATCH (:Job {name: 'child'})-[:CONSUMES]->(d:Dataset) RETURN count(d) AS c") == 2
    )
    assert (
        count(s, "MATCH (:Job {name: 'child'})-[:PRODUCES]->(d:Dataset) RETURN count(d) AS c") == 1
    )
    derived = s.runner.run(
        "MATCH (o:Field)-[:DERIVED_FROM]->(i:Field) RETURN o.dataset AS od, o.name AS o, i.dataset AS idd, i.name AS i"
    )
    assert sorted((r["od"], r["o"], r["idd"], r["i"]) for r in derived) == [
        ("report", "id", "orders", "id"),
        ("report", "total", "fx", "rate"),
        ("report", "total", "orders", "amount"),
    ]
    assert (
        count(s, "MATCH (:Dataset {name: 'report'})-[:HAS_FIELD]->(f:Field) RETURN count(f) AS c")
        == 2
    )
    (row,) = s.runner.run("MATCH (j:Job {name: 'child'}) RETURN j.facets AS f")
    assert isinstance(row["f"], str) and json.loads(row["f"]) == events[1]["job"]["facets"]
    (row,) = s.runner.run("MATCH (d:Dataset {name: 'report'}) RETURN d.facets AS f")
    assert json.loads(row["f"]) == {"columnLineage": cl}


def test_out_of_order_and_duplicate_events_converge(graph_store):
    ns, run = f"ns-{uid()}", "ffffffff-0000-4000-8000-000000000001"
    events = [
        run_event(
            job="j",
            namespace=ns,
            run_id=run,
            event_type="START",
            seconds=0,
            inputs=[(ns, "a")],
            run_facets={"f": facet(v=1)},
        ),
        run_event(
            job="j",
            namespace=ns,
            run_id=run,
            event_type="RUNNING",
            seconds=5,
            inputs=[(ns, "a")],
            outputs=[(ns, "b")],
            run_facets={"f": facet(v=2)},
        ),
        run_event(
            job="j",
            namespace=ns,
            run_id=run,
            event_type="COMPLETE",
            seconds=9,
            outputs=[(ns, "b")],
            run_facets={"f": facet(v=3)},
        ),
        run_event(
            job="j", namespace=ns, run_id=run, event_type="RUNNING", seconds=12
        ),  # late heartbeat
    ]
    snapshots = []
    orders = [list(range(4)), [2, 0, 3, 1], [3, 2, 1, 0, 2, 3]]
    for order in orders:
        graph_store.runner.run("MATCH (n) DETACH DELETE n")
        for i in order:  # one event per batch
            graph_store.write_batch(records(events[i]))
        snapshots.append(snapshot(graph_store))
    for perm in itertools.islice(itertools.permutations(range(4)), 0, 24, 7):  # and whole batches
        graph_store.runner.run("MATCH (n) DETACH DELETE n")
        graph_store.write_batch(records(*(events[i] for i in perm), events[perm[0]]))
        snapshots.append(snapshot(graph_store))
    assert all(s == snapshots[0] for s in snapshots[1:])
    (row,) = graph_store.runner.run(
        "MATCH (r:Run {runId: $r}) RETURN r.state AS state, r.startedAt AS s, r.endedAt AS e, r.facets AS f",
        {"r": run},
    )
    assert row["state"] == "COMPLETE"
    assert row["s"] == "2025-03-01T12:00:00.000000Z" and row["e"] == "2025-03-01T12:00:09.000000Z"
    assert json.loads(row["f"]) == {"f": facet(v=3)}  # latest event that carried facets
    assert count(graph_store, "MATCH (e:Event) RETURN count(e) AS c") == 4
    assert count(graph_store, "MATCH (:Run)-[r:READ]->() RETURN count(r) AS c") == 1


def test_terminal_states_and_times_follow_the_rules(graph_store):
    ns, run = f"ns-{uid()}", "abababab-0000-4000-8000-000000000001"
    late_fail = run_event(job="j", namespace=ns, run_id=run, event_type="FAIL", seconds=20)
    complete = run_event(job="j", namespace=ns, run_id=run, event_type="COMPLETE", seconds=10)
    start_a = run_event(job="j", namespace=ns, run_id=run, event_type="START", seconds=3)
    start_b = run_event(job="j", namespace=ns, run_id=run, event_type="START", seconds=1)
    graph_store.write_batch(records(late_fail, start_a))
    graph_store.write_batch(records(complete, start_b))
    (summary,) = graph_store.runs_of_job(ns, "j")
    assert summary.state == "FAIL"  # both terminal: the later one wins
    assert summary.started_at.isoformat().startswith("2025-03-01T12:00:01")  # min START
    assert summary.ended_at.isoformat().startswith("2025-03-01T12:00:20")  # max terminal


def test_hostile_names_and_facets_are_stored_and_read_back_exactly(graph_store):
    run_id = "cdcdcdcd-0000-4000-8000-000000000001"
    hostile_facet = facet(**{k: {k: HOSTILE_STRINGS} for k in HOSTILE_KEYS})
    events = [
        run_event(
            job=text,
            namespace=text,
            run_id=run_id,
            seconds=i,
            inputs=[(text, text)],
            outputs=[("out", text)],
            run_facets={"custom": hostile_facet},
            job_facets={"a.b": facet(**{"$gt": text})},
            dataset_facets={"`x`": facet(v=text)},
        )
        for i, text in enumerate(HOSTILE_STRINGS)
    ]
    graph_store.write_batch(records(*events))
    graph_store.write_batch(records(*reversed(events)))
    assert graph_store.events_of_run(run_id) == events
    names = {r["n"] for r in graph_store.runner.run("MATCH (j:Job) RETURN j.name AS n")}
    assert names == set(HOSTILE_STRINGS)
    assert count(graph_store, "MATCH (j:Job) RETURN count(j) AS c") == len(
        HOSTILE_STRINGS
    )  # no duplicates
    assert count(graph_store, "MATCH (d:Dataset) RETURN count(d) AS c") == len(HOSTILE_STRINGS) * 2
    for text in HOSTILE_STRINGS:
        (row,) = graph_store.runner.run(
            "MATCH (d:Dataset {namespace: $ns, name: $n}) RETURN d.facets AS f",
            {"ns": text, "n": text},
        )
        assert json.loads(row["f"]) == {"`x`": facet(v=text)}
        up = graph_store.lineage(node_id("DATASET", "out", text), direction="upstream", depth=1)
        assert {(n.type, n.namespace, n.name) for n in up.nodes.values()} >= {
            ("JOB", text, text),
            ("DATASET", text, text),
        }
    assert count(graph_store, "MATCH (n:Pwned) RETURN count(n) AS c") == 0
    labels = {
        lab
        for r in graph_store.runner.run("MATCH (n) RETURN DISTINCT labels(n) AS l")
        for lab in r["l"]
    }
    assert labels <= {"Job", "Run", "Dataset", "Event", "Field"}
    assert graph_store.search("😀")[0] == (
        "DATASET",
        "emoji 😀🚀 ünïcødé 日本語",
        "emoji 😀🚀 ünïcødé 日本語",
    )


def test_catalog_questions(graph_store):
    ns, other = f"cat-{uid()}", f"other-{uid()}"
    r1, r2 = "12121212-0000-4000-8000-000000000001", "12121212-0000-4000-8000-000000000002"
    graph_store.write_batch(
        records(
            run_event(
                job="load",
                namespace=ns,
                run_id=r1,
                event_type="START",
                seconds=0,
                inputs=[(other, "raw")],
                outputs=[(ns, "clean")],
            ),
            run_event(
                job="load",
                namespace=ns,
                run_id=r2,
                event_type="COMPLETE",
                seconds=60,
                inputs=[(other, "raw")],
                outputs=[(ns, "clean")],
            ),
            run_event(
                job="Report", namespace=other, inputs=[(ns, "clean")], outputs=[(other, "pdf")]
            ),
        )
    )
    assert set(graph_store.namespaces()) == {ns, other}
    (load,) = graph_store.jobs(ns)
    assert (load.namespace, load.name) == (ns, "load")
    assert load.inputs == ((other, "raw"),) and load.outputs == ((ns, "clean"),)
    assert (
        load.latest_run is not None
        and load.latest_run.run_id == r2
        and load.latest_run.state == "COMPLETE"
    )
    assert [j.name for j in graph_store.jobs()] == ["load", "Report"] or sorted(
        j.name for j in graph_store.jobs()
    ) == ["Report", "load"]
    assert len(graph_store.jobs(limit=1)) == 1
    assert graph_store.datasets(other) == [(other, "pdf"), (other, "raw")]
    assert graph_store.datasets(ns) == [(ns, "clean")]
    assert graph_store.search("REPORT") == [("JOB", other, "Report")]
    assert ("DATASET", ns, "clean") in graph_store.search("clea")
    assert graph_store.search("nothing-like-this") == []


def test_open_is_repeatable(graph_store):
    graph_store.open()
    graph_store.open()
    graph_store.check()
    graph_store.write_batch(records(run_event(job="j", namespace=f"ns-{uid()}")))
