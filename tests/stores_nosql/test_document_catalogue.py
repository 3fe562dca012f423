"""The document store's catalogue (namespaces, jobs, datasets, search) reads its nodes collection
on an index, page by page, and answers exactly what grouping every event answers: the nodes are
kept by the writes, removed by deletions, and derived at ``open`` for a database from before
them (until then the reads group the events)."""

from __future__ import annotations

from typing import Any

from nosql_events import records, run_event
from pymongo import monitoring
from test_as_of_document import _Commands, reopened
from test_document_store import _plan_stages
from test_retention import _static

from lineage_sdk.collector.stores.document import DocumentLineageStore


def _corpus() -> list[dict[str, Any]]:
    """Jobs in three namespaces, a parent job named only by its child, a JobEvent's job, a
    DatasetEvent's dataset, and names whose case and order test the search."""
    events = [
        run_event(
            job=f"Job{i:02d}",
            namespace=f"ns{i % 3}",
            inputs=[(f"db{i % 2}", f"table_{i}")],
            outputs=[("wh", f"Out{i:02d}")],
            seconds=i,
        )
        for i in range(30)
    ]
    events.append(
        run_event(
            job="child",
            namespace="ns1",
            parent=("eeeeeeee-0000-4000-8000-000000000001", "orch", "nightly"),
            seconds=40,
        )
    )
    events.append(
        _static(
            "JobEvent",
            50,
            job={"namespace": "static", "name": "declared", "facets": {}},
            inputs=[{"namespace": "db0", "name": "table_0", "facets": {}}],
            outputs=[{"namespace": "static", "name": "only_declared", "facets": {}}],
        )
    )
    events.append(
        _static("DatasetEvent", 60, dataset={"namespace": "lake", "name": "files", "facets": {}})
    )
    return events


def _answers(store: DocumentLineageStore) -> dict[str, Any]:
    """Every catalogue answer the test compares, with the totals of the pages."""
    out: dict[str, Any] = {}
    for limit, offset in ((1000, 0), (7, 0), (7, 5), (5, 70), (1, 31)):
        names = store.namespaces(limit=limit, offset=offset)
        out[f"namespaces {limit} {offset}"] = (list(names), names.total)
        for ns in (None, "ns1", "wh", "absent"):
            jobs = store.jobs(ns, limit=limit, offset=offset)
            out[f"jobs {ns} {limit} {offset}"] = (
                [(j.namespace, j.name, j.inputs, j.outputs) for j in jobs],
                jobs.total,
            )
            datasets = store.datasets(ns, limit=limit, offset=offset)
            out[f"datasets {ns} {limit} {offset}"] = (list(datasets), datasets.total)
    out["dataset namespaces"] = store.dataset_namespaces()
    for text in ("", "job0", "OUT", "table_1", "nightly", "declared", "files", "zzz"):
        for limit in (1, 5, 50):
            out[f"search {text} {limit}"] = store.search(text, limit=limit)
    return out


def _nodes_of(store: DocumentLineageStore) -> set[tuple[str, str, str]]:
    return {(d["kind"], d["ns"], d["n"]) for d in store.nodes.find({"kind": {"$exists": True}})}


def test_the_catalogue_reads_its_nodes_on_an_index(document_store: DocumentLineageStore) -> None:
    document_store.write_batch(records(*_corpus()))
    listener = _Commands()
    monitoring.register(listener)
    store = reopened(document_store)  # a client created after the listener: it reports
    try:
        listener.on = True
        answers = _answers(store)
        listener.on = False
        db = store.collection.database
        # every read of the catalogue itself (not the jobs' edges and latest runs) opens on the
        # nodes' index; none groups the events
        node_reads = [(c, f) for c, f in listener.filters if c == store.nodes.name and "kind" in f]
        sort = [("kind", 1), ("ns", 1), ("n", 1)]
        plans = [db[c].find(f).sort(sort).explain() for c, f in node_reads]
        # the fallback: the same answers by grouping the events, as before the nodes
        store.nodes.delete_one({"_id": "backfill"})
        listener.names.clear()
        listener.on = True
        grouped = _answers(store)
        listener.on = False
    finally:
        listener.on = False
        store.close()
    # (mongod also takes the order from the index; SecantusDB sorts what the index found)
    assert node_reads and all(
        "IXSCAN" in _plan_stages(p) and "COLLSCAN" not in _plan_stages(p) for p in plans
    ), plans
    assert all("'lineage_node'" in repr(p) for p in plans), plans
    assert "aggregate" in listener.names  # (the fallback did group the events)
    assert answers == grouped
    # the answers themselves, spot-checked
    assert answers["namespaces 1000 0"] == (
        ["db0", "db1", "lake", "ns0", "ns1", "ns2", "orch", "static", "wh"],
        9,
    )
    assert answers["jobs ns1 7 5"][1] == 11  # ten JobNN and the child
    assert [j[:2] for j in answers["jobs None 5 70"][0]] == []
    assert answers["search OUT 5"] == [("DATASET", "wh", f"Out{i:02d}") for i in range(5)]
    assert answers["search nightly 50"] == [("JOB", "orch", "nightly")]
    assert answers["search declared 50"] == [
        ("JOB", "static", "declared"),
        ("DATASET", "static", "only_declared"),
    ]


def test_an_older_database_gets_its_nodes_at_open(document_store: DocumentLineageStore) -> None:
    """A database from before the nodes: its reads group the events (the same answers), open
    derives the nodes exactly, and a backfill stopped halfway resumes at the next open."""
    events = _corpus()
    document_store.write_batch(records(*events))
    want_nodes, want = _nodes_of(document_store), _answers(document_store)
    # jobs, inputs, outputs, the rest, and the namespaces
    assert len(want_nodes) == 30 + 30 + 30 + 2 + 2 + 1 + 9
    document_store.nodes.drop()
    assert _answers(document_store) == want  # grouped, until the backfill has run
    again = reopened(document_store)
    try:
        assert _nodes_of(again) == want_nodes
        assert _answers(again) == want
    finally:
        again.close()
    # one stopped after the first 10 events (in _id order) goes on from there at the next open
    document_store.nodes.drop()
    ids = sorted(d["_id"] for d in document_store.collection.find({}, {"_id": 1}))
    document_store.nodes.insert_one({"_id": "backfill", "done": False, "after": ids[9]})
    resumed = reopened(document_store)
    try:
        later = {e.event_id for e in records(*events) if e.event_id > ids[9]}
        named = {
            node
            for doc in document_store.collection.find({"_id": {"$in": sorted(later)}})
            for node in _named(doc)
        }
        assert _nodes_of(resumed) == named != want_nodes
    finally:
        resumed.close()


def _named(doc: dict[str, Any]) -> set[tuple[str, str, str]]:
    """What an event document names, as the test reads it (job, parent job, datasets, and
    their namespaces)."""
    found = {("DATASET", d["namespace"], d["name"]) for d in doc.get("datasets", [])}
    for field in ("job", "parentJob"):
        if field in doc:
            found.add(("JOB", doc[field]["namespace"], doc[field]["name"]))
    return found | {("NAMESPACE", ns, "") for _, ns, _ in found}


def test_a_deletion_removes_the_nodes_no_event_names(document_store: DocumentLineageStore) -> None:
    """Deleting events removes the nodes only they named, keeps those another event names, and a
    node written again after the deletion is back."""
    events = _corpus()
    recs = records(*events)
    document_store.write_batch(recs)
    gone = [r.event_id for r in recs if r.job_name in ("Job00", "child")]
    document_store.delete_events(gone)
    kept = [r for r in recs if r.event_id not in gone]
    assert _nodes_of(document_store) == {
        node for doc in (document_store.to_document(r) for r in kept) for node in _named(doc)
    }
    names = _nodes_of(document_store)
    assert ("JOB", "ns0", "Job00") not in names and ("JOB", "orch", "nightly") not in names
    assert ("DATASET", "db0", "table_0") in names  # the JobEvent names it too
    assert ("DATASET", "wh", "Out00") not in names
    assert ("NAMESPACE", "orch", "") not in names  # its only job is gone
    assert "orch" not in document_store.namespaces() and "ns0" in document_store.namespaces()
    assert document_store.search("nightly") == []
    document_store.write_batch([r for r in recs if r.job_name == "child"])
    assert document_store.search("nightly") == [("JOB", "orch", "nightly")]
    assert "orch" in document_store.namespaces()
