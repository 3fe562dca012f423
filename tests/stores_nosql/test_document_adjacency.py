"""The document store's adjacency documents (``<collection>_adjacency``): each node's edges on one
document, what the lineage walks read by ``_id``. They hold exactly the edges collection (checked
by ``adjacency_of`` after writes, deletions and writers racing deleters in
test_as_of_document.py); here, the walks that read them, their backfill at ``open``, the
compare-and-set of a deletion's refresh, and a node too large for one document, against the real
SecantusDB (or MongoDB)."""

from __future__ import annotations

from typing import Any

import pytest
from nosql_events import HOSTILE_STRINGS, StoreFactory, records, run_event
from pymongo import monitoring
from test_as_of_document import (
    Overtaking,
    _Commands,
    adjacency_of,
    delete_overtaken,
    edges_of,
    plain_answers,
    reopened,
)
from test_as_of_indexed import _nodes, assert_indexed_is_generic, at_
from test_bounded import _corpus as bounded_corpus
from test_history import _corpus as history_corpus

from lineage_sdk.collector.stores.document import (
    _EDGE_FIELDS,
    DocumentLineageStore,
    _doc_id,
    _micros,
)

pytestmark = pytest.mark.mongodb


def _hostile_corpus() -> list[dict[str, Any]]:
    """Names an adjacency key must carry exactly: the separator ``%/``, escapes, dots, ``$``."""
    names = [*HOSTILE_STRINGS[:12], "a%/b", "%/", "%", "x%25/y", "."]
    return [
        run_event(
            job=f"job {names[i]}",
            namespace=names[(i + 3) % len(names)],
            inputs=[(names[(i + 1) % len(names)], names[i])],
            outputs=[(names[i], names[(i + 2) % len(names)])],
            seconds=i,
        )
        for i in range(len(names))
    ]


def _by_edges(store: DocumentLineageStore) -> DocumentLineageStore:
    """A second store object on the same collections whose walks query the edges, as before
    the adjacency documents existed (no marker, nothing remembered)."""
    store.adjacency.delete_one({"_id": "backfill"})
    other = DocumentLineageStore(store._connection, store._collection_name)
    assert not other._adjacency_is_ready()
    return other


def test_the_walks_read_the_adjacency_documents_and_answer_as_the_edges_do(
    document_store: DocumentLineageStore,
) -> None:
    corpus = [*history_corpus(), *bounded_corpus(), *_hostile_corpus()]
    document_store.write_batch(records(*corpus))
    nodes = _nodes(corpus)
    listener = _Commands()
    monitoring.register(listener)  # pymongo's listeners join the clients created after
    store = reopened(document_store)
    try:
        listener.on = True
        answers = plain_answers(store, nodes)
        listener.on = False
    finally:
        listener.on = False
        store.close()
    read = {collection for collection, _ in listener.filters}
    assert read == {f"{document_store._collection_name}_adjacency"}, read
    assert adjacency_of(document_store) == edges_of(document_store)
    by_edges = _by_edges(document_store)
    try:
        assert plain_answers(by_edges, nodes) == answers
        hostile = [n for n in nodes if "%/" in n or "$" in n]
        assert len(hostile) >= 5
        assert answers[f"{hostile[0]} both"]  # a hostile name's neighbourhood is not empty
    finally:
        by_edges.close()


def test_an_older_database_gets_its_adjacency_at_open_and_a_stopped_backfill_resumes(
    make_store: StoreFactory,
) -> None:
    store = make_store("document")
    corpus = [*history_corpus(), *bounded_corpus(), *_hostile_corpus()]
    store.write_batch(records(*corpus))
    nodes = _nodes(corpus)
    want = plain_answers(store, nodes)
    edges = edges_of(store)
    store.adjacency.drop()
    by_edges = _by_edges(store)
    try:
        assert plain_answers(by_edges, nodes) == want  # the edges are walked meanwhile
    finally:
        by_edges.close()
    again = reopened(store)
    try:
        assert again._adjacency_is_ready()
        assert adjacency_of(again) == edges
        assert plain_answers(again, nodes) == want
        assert assert_indexed_is_generic(again, nodes[::4], [0, 11, 40], [(20, None)]) > 20
    finally:
        again.close()
    # a backfill 7 edges at a time derives the same
    store.adjacency.drop()
    store._backfill(
        store.adjacency, store._adjacency_of_edge_docs, _EDGE_FIELDS, store.edges, batch_size=7
    )
    assert adjacency_of(store) == edges
    # one stopped after the first 10 edges (in _id order) goes on from there at the next open
    store.adjacency.drop()
    ids = sorted(_doc_id(edge) for edge in edges)
    store.adjacency.insert_one({"_id": "backfill", "done": False, "after": ids[9]})
    resumed = reopened(store)
    try:
        rest = {edge: us for edge, us in edges.items() if _doc_id(edge) > ids[9]}
        assert adjacency_of(resumed) == rest != edges
    finally:
        resumed.close()


class _Overtaken(Overtaking):
    """Overtaken between reading an adjacency document and the edges and setting it."""

    def _refresh_node_adjacency(self, *args: Any) -> bool:
        self.overtake()
        return super()._refresh_node_adjacency(*args)


def test_a_refresh_overtaken_by_a_writer_keeps_the_new_edge(make_store: StoreFactory) -> None:
    """The compare-and-set on the document's version: the refresh read the edge as deleted,
    the writer then stated it again, so the refresh is refused and done again (without it, the
    adjacency would lose an edge the edges collection has)."""
    store = delete_overtaken(make_store, _Overtaken)
    try:
        assert adjacency_of(store) == edges_of(store)
        assert edges_of(store) == {("ns", "j", "ns", "d", "input"): _micros(at_(20))}
        assert store.lineage("job:ns:j", direction="upstream", depth=1).nodes.keys() == {
            "job:ns:j",
            "dataset:ns:d",
        }
    finally:
        store.close()


def test_a_node_with_more_edges_than_one_document_holds_spills_and_loses_nothing(
    document_store: DocumentLineageStore,
) -> None:
    """Eighteen datasets of a million characters each, read by one job: its adjacency would pass
    the server's 16 MB, so it is marked spilled, every event is stored, and its walks query the
    edges (a later write refilling the document changes nothing)."""
    big = [f"{i:02d}" + "x" * 1_000_000 for i in range(17)]
    events = [
        run_event(job="hub", inputs=[("ns", name)], outputs=[("ns", "out")], seconds=i)
        for i, name in enumerate(big)
    ]
    document_store.write_batch(records(*events[:8]))
    document_store.write_batch(records(*events[8:]))  # the ninth megabyte: refused, spilled
    hub = document_store.adjacency.find_one({"_id": _doc_id(("JOB", "ns", "hub"))})
    assert hub is not None and hub.get("spilled") is True
    document_store.write_batch(records(run_event(job="hub", inputs=[("ns", "small")], seconds=30)))
    assert document_store.collection.count_documents({}) == 18
    upstream = document_store.lineage("job:ns:hub", direction="upstream", depth=0)
    want = {f"dataset:ns:{name}" for name in [*big, "small"]} | {"job:ns:hub"}
    assert set(upstream.nodes) == want
    downstream = document_store.lineage(f"dataset:ns:{big[0]}", direction="downstream", depth=1)
    assert set(downstream.nodes) == {f"dataset:ns:{big[0]}", "job:ns:hub", "dataset:ns:out"}
