"""The engine over the graph backend (FalkorDB or Neo4j): the graph it projects, convergence,
hostile input and the catalog."""

from __future__ import annotations

import itertools

import pytest
from nosql_collector import expected_graph, graph_counts, graph_runner, graph_snapshot
from nosql_events import (
    HOSTILE_KEYS,
    HOSTILE_STRINGS,
    column_lineage,
    facet,
    records,
    run_event,
    uid,
)

from lineage_sdk.collector.api.marquez import run_from_events
from lineage_sdk.collector.engine import Engine
from lineage_sdk.collector.engine.derive import child_entry
from lineage_sdk.collector.store import node_id
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.graph_runner import detect_dialect

pytestmark = pytest.mark.neo4j

#: Every label of the graph backend's model (lineage_sdk/collector/stores/graph_backend.py).
LABELS = {"Job", "Dataset", "Source", "Run", "Event", "Mention", "ColumnEdge", "LineageMeta"}


def count(store, query, **params):
    return graph_runner(store).run(query, params)[0]["c"]


def wipe(store):
    graph_runner(store).run("MATCH (n) DETACH DELETE n")


def test_graph_store_implements_the_catalog(graph_store):
    assert isinstance(graph_store, Engine)
    backend = graph_store.backend
    assert isinstance(backend, GraphBackend)
    # The server's dialect, probed at open, picks the backend's tactics.
    dialect = detect_dialect(backend.runner)
    assert dialect in {"neo4j", "opencypher"}
    assert backend.tactics.name == ("neo4j" if dialect == "neo4j" else "falkordb")


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
    # Every vertex and relationship of the model, counted independently from the events.
    assert graph_counts(s) == expected_graph(events)
    assert count(s, "MATCH (j:Job) RETURN count(j) AS c") == 2
    assert count(s, "MATCH (d:Dataset) RETURN count(d) AS c") == 3
    assert count(s, "MATCH (r:Run) RETURN count(r) AS c") == 2
    # The child run names its parent run; each run its job.
    runs = graph_runner(s).run(
        "MATCH (r:Run) RETURN r.runId AS r, r.parentRunId AS p, r.jobNs AS ns, r.jobName AS j"
    )
    assert sorted((r["r"], r["p"], r["ns"], r["j"]) for r in runs) == [
        (parent, None, ns, "parent"),
        (child, parent, ns, "child"),
    ]
    assert s.child_runs(parent) == [child]
    # The run read two datasets and wrote one; the job reads two and writes one.
    mentions = graph_runner(s).run(
        "MATCH (m:Mention {sourceId: $c}) RETURN m.kind AS k, m.name AS n, m.role AS r,"
        " m.detail AS d",
        {"c": child},
    )
    assert sorted((m["k"], m["n"], m["r"]) for m in mentions if m["r"] != "stated") == [
        ("DATASET", "fx", "input"),
        ("DATASET", "orders", "input"),
        ("DATASET", "report", "output"),
    ]
    # Its job's parent Mention is sourced by the job, one a (child, parent): derivation 9.
    (named,) = graph_runner(s).run(
        "MATCH (m:Mention {sourceId: $c}) RETURN m.source AS s, m.kind AS k, m.name AS n,"
        " m.role AS r, m.detail AS d",
        {"c": child_entry((ns, "child"))},
    )
    assert named == {"s": "job", "k": "JOB", "n": "parent", "r": "parent", "d": None}
    # What its COMPLETE states: of each dataset, in those Mentions; of its job, in one more.
    stating = [m for m in mentions if m["d"]]
    assert sorted((m["k"], m["n"], len(m["d"])) for m in stating) == [
        ("DATASET", "fx", 1),
        ("DATASET", "orders", 1),
        ("DATASET", "report", 1),
        ("JOB", "child", 1),
    ]
    assert [m["n"] for m in mentions if m["r"] == "stated"] == ["child"]
    assert count(s, "MATCH (:Job {name: 'child'})-[:READS]->(d:Dataset) RETURN count(d) AS c") == 2
    assert (
        count(
            s,
            "MATCH (:Job {name: 'child'})-[:WRITES]->(d:Dataset {name: 'report'})"
            " RETURN count(d) AS c",
        )
        == 1
    )
    # Column lineage: one ColumnEdge per (output field, input field), stated by the child job.
    derived = graph_runner(s).run(
        "MATCH (x:ColumnEdge) RETURN x.oDs AS od, x.oField AS o, x.iDs AS idd, x.iField AS i,"
        " x.jobName AS j"
    )
    assert sorted((r["od"], r["o"], r["idd"], r["i"], r["j"]) for r in derived) == [
        ("report", "id", "orders", "id", "child"),
        ("report", "total", "fx", "rate", "child"),
        ("report", "total", "orders", "amount", "child"),
    ]
    assert {e.output for e in s.backend.column_edges(datasets=[(ns, "report")])} == {
        (ns, "report", "id"),
        (ns, "report", "total"),
    }
    # Facets are kept in the events, each exactly as sent.
    assert s.events_of_run(child) == [events[1]]
    assert s.events_of_run(parent) == [events[0]]


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
        wipe(graph_store)
        for i in order:  # one event per batch
            graph_store.write_batch(records(events[i]))
        snapshots.append(graph_snapshot(graph_store))
    for perm in itertools.islice(itertools.permutations(range(4)), 0, 24, 7):  # and whole batches
        wipe(graph_store)
        graph_store.write_batch(records(*(events[i] for i in perm), events[perm[0]]))
        snapshots.append(graph_snapshot(graph_store))
    assert all(s == snapshots[0] for s in snapshots[1:])
    (row,) = graph_runner(graph_store).run(
        "MATCH (r:Run {runId: $r}) RETURN r.state AS state, r.startedAt AS s, r.endedAt AS e",
        {"r": run},
    )
    assert row["state"] == "COMPLETE"
    assert row["s"] == "2025-03-01T12:00:00.000000Z" and row["e"] == "2025-03-01T12:00:09.000000Z"
    (summary,) = graph_store.runs_of_job(ns, "j")
    assert summary.state == "COMPLETE"
    assert summary.started_at.isoformat().startswith("2025-03-01T12:00:00")
    assert summary.ended_at.isoformat().startswith("2025-03-01T12:00:09")
    # the run's facets as read: the latest event that carried them wins
    folded = run_from_events(run, graph_store.events_of_run(run))
    assert folded["facets"] == {"f": facet(v=3)}
    assert count(graph_store, "MATCH (e:Event) RETURN count(e) AS c") == 4
    assert graph_counts(graph_store) == expected_graph(events)
    # the run read one dataset, once, however many of its events named it
    assert (
        count(
            graph_store,
            "MATCH (m:Mention {sourceId: $r}) WHERE m.role = 'input' RETURN count(m) AS c",
            r=run,
        )
        == 1
    )


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
    assert graph_store.events_of_run(run_id) == events  # names and facets exactly as sent
    runner = graph_runner(graph_store)
    names = {r["n"] for r in runner.run("MATCH (j:Job) RETURN j.name AS n")}
    assert names == set(HOSTILE_STRINGS)
    assert count(graph_store, "MATCH (j:Job) RETURN count(j) AS c") == len(
        HOSTILE_STRINGS
    )  # no duplicates
    assert count(graph_store, "MATCH (d:Dataset) RETURN count(d) AS c") == len(HOSTILE_STRINGS) * 2
    assert graph_counts(graph_store) == expected_graph(events)
    for text in HOSTILE_STRINGS:
        for ns in (text, "out"):
            (row,) = runner.run(
                "MATCH (d:Dataset {namespace: $ns, name: $n}) RETURN d.name AS n",
                {"ns": ns, "n": text},
            )
            assert row["n"] == text
        up = graph_store.lineage(node_id("DATASET", "out", text), direction="upstream", depth=1)
        assert {(n.type, n.namespace, n.name) for n in up.nodes.values()} >= {
            ("JOB", text, text),
            ("DATASET", text, text),
        }
    assert count(graph_store, "MATCH (n:Pwned) RETURN count(n) AS c") == 0
    labels = {lab for r in runner.run("MATCH (n) RETURN DISTINCT labels(n) AS l") for lab in r["l"]}
    assert labels <= LABELS
    emoji = "emoji 😀🚀 ünïcødé 日本語"
    assert graph_store.search("😀") == [
        ("JOB", emoji, emoji),
        ("DATASET", emoji, emoji),
        ("DATASET", "out", emoji),
    ]


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


def test_a_relationship_written_twice_is_one_edge(graph_store):
    """Two READS between one job and one dataset (a fleet writing the same events left such a
    pair on FalkorDB once, cause not found) are two rows of one key, read as one, joined by the
    merge rules (the least first-seen time)."""
    ns = f"ns-{uid()}"
    graph_store.write_batch(
        records(run_event(job="j", namespace=ns, inputs=[(ns, "src")], outputs=[(ns, "out")]))
    )
    (before,) = graph_store.backend.edges("JOB", [(ns, "j")], "in")
    graph_runner(graph_store).run(
        "MATCH (j:Job {namespace: $ns, name: 'j'}), (d:Dataset {namespace: $ns, name: 'src'})\n"
        "CREATE (j)-[:READS {firstSeen: $early}]->(d)",
        {"ns": ns, "early": "2000-01-01T00:00:00.000000Z"},
    )
    assert (
        count(
            graph_store, "MATCH (:Job {namespace: $ns})-[r:READS]->() RETURN count(r) AS c", ns=ns
        )
        == 2
    )
    (joined,) = graph_store.backend.edges("JOB", [(ns, "j")], "in")
    (seen_from_dataset,) = graph_store.backend.edges("DATASET", [(ns, "src")], "in")
    assert joined == seen_from_dataset
    assert joined.first_seen.year == 2000 and joined.first_seen < before.first_seen
    page = graph_store.jobs(ns)
    assert [job.inputs for job in page] == [((ns, "src"),)]
