"""The document backend's catalogue (namespaces, jobs, datasets, search) reads its nodes
collection on an index, page by page, and answers exactly what the memory backend answers: the
nodes are joined by the writes and derived again by deletions (SecantusDB, or a real mongod)."""

from __future__ import annotations

from typing import Any

import pytest
from nosql_events import records, run_event
from test_as_of_document import Documents, _plan_stages, collection, documents, listening, memory
from test_retention import _static

from lineage_sdk.collector.engine import EngineStore

pytestmark = pytest.mark.mongodb
__all__ = ["documents"]  # the fixture, imported for the tests below


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


def _answers(store: EngineStore) -> dict[str, Any]:
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


def _nodes_of(store: EngineStore) -> set[tuple[str, str, str]]:
    """The job and dataset nodes (each dataset's SOURCE nodes are the catalogue's too)."""
    found = collection(store, "nodes").find({"kind": {"$in": ["JOB", "DATASET"]}})
    return {(d["kind"], d["xns"], d["xn"]) for d in found}


def test_the_catalogue_reads_its_nodes_on_an_index(documents: Documents) -> None:
    document_store = documents.new()
    batch = records(*_corpus())
    document_store.write_batch(batch)
    listener, store = listening(documents, document_store)
    try:
        listener.on = True
        answers = _answers(store)
        listener.on = False
    finally:
        listener.on = False
    nodes = collection(store, "nodes")
    # every read of the catalogue itself (not the jobs' edges and latest runs) opens on the
    # nodes' index; none reads the events
    node_reads = [f for c, f in listener.filters if c == nodes.name and "kind" in f]
    sort = [("xns", 1), ("xn", 1)]
    plans = [nodes.find(f).sort(sort).explain() for f in node_reads]
    assert f"{documents.name(store)}_events" not in {c for c, _ in listener.filters}
    # (mongod also takes the order from the index; SecantusDB sorts what the index found)
    assert node_reads and all(
        "IXSCAN" in _plan_stages(p) and "COLLSCAN" not in _plan_stages(p) for p in plans
    ), plans
    assert all("kind_1_xns_1_xn_1" in repr(p) for p in plans), plans
    assert answers == _answers(memory(batch))
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
    # jobs, inputs, outputs, the rest (child, nightly; JobEvent's two, DatasetEvent's one)
    assert len(_nodes_of(store)) == 30 + 30 + 30 + 2 + 2 + 1


def test_a_deletion_removes_the_nodes_no_event_names(documents: Documents) -> None:
    """Deleting events removes the nodes only they named, keeps those another event names, and a
    node written again after the deletion is back."""
    store = documents.new()
    recs = records(*_corpus())
    store.write_batch(recs)
    gone = [r.event_id for r in recs if r.job_name in ("Job00", "child")]
    store.delete_events(gone)
    kept = [r for r in recs if r.event_id not in gone]
    fresh = documents.new()
    fresh.write_batch(kept)
    assert _nodes_of(store) == _nodes_of(fresh)
    assert _answers(store) == _answers(memory(kept))
    names = _nodes_of(store)
    assert ("JOB", "ns0", "Job00") not in names and ("JOB", "orch", "nightly") not in names
    assert ("DATASET", "db0", "table_0") in names  # the JobEvent names it too
    assert ("DATASET", "wh", "Out00") not in names
    assert "orch" not in store.namespaces() and "ns0" in store.namespaces()  # orch's only job
    assert store.search("nightly") == []
    store.write_batch([r for r in recs if r.job_name == "child"])
    assert store.search("nightly") == [("JOB", "orch", "nightly")]
    assert "orch" in store.namespaces()
