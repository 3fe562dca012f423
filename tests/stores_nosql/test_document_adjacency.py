"""The document backend's lineage walks: each hop one indexed read of the edges (a batch of
frontier keys an ``$in``), its nodes and latest runs by key, never the events; they answer as
the memory backend for names an index key must carry exactly (``%/``, escapes, dots, ``$``), and
for a node whose edges would pass a document's 16 MB, against the real SecantusDB (or MongoDB).
"""

from __future__ import annotations

from typing import Any

import pytest
from nosql_events import HOSTILE_STRINGS, records, run_event
from test_as_of_document import Documents, documents, listening, memory, plain_answers
from test_as_of_indexed import _nodes
from test_bounded import _corpus as bounded_corpus
from test_history import _corpus as history_corpus

pytestmark = pytest.mark.mongodb
__all__ = ["documents"]  # the fixture, imported for the tests below


def _hostile_corpus() -> list[dict[str, Any]]:
    """Names a key must carry exactly: the old separator ``%/``, escapes, dots, ``$``."""
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


def test_the_walks_read_edges_nodes_and_runs_and_answer_as_the_memory_backend(
    documents: Documents,
) -> None:
    corpus = [*history_corpus(), *bounded_corpus(), *_hostile_corpus()]
    batch = records(*corpus)
    document_store = documents.new()
    document_store.write_batch(batch)
    nodes = _nodes(corpus)
    listener, store = listening(documents, document_store)
    try:
        listener.on = True
        answers = plain_answers(store, nodes)
        listener.on = False
    finally:
        listener.on = False
    name = documents.name(store)
    read = {collection for collection, _ in listener.filters}
    assert read <= {f"{name}_edges", f"{name}_nodes", f"{name}_runs"}, read
    assert f"{name}_edges" in read
    # every read selects by key (no collection scan): an $in of keys, or one key
    for collection, query in listener.filters:
        assert any((isinstance(v, dict) and "$in" in v) or k == "_id" for k, v in query.items()), (
            collection,
            query,
        )
    assert answers == plain_answers(memory(batch), nodes)
    hostile = [n for n in nodes if "%/" in n or "$" in n]
    assert len(hostile) >= 5
    assert answers[f"{hostile[0]} both"]  # a hostile name's neighbourhood is not empty


def test_a_node_with_more_edges_than_one_document_holds_loses_nothing(
    documents: Documents,
) -> None:
    """Seventeen datasets of a million characters each, read by one job: its edges together
    pass the server's 16 MB (one document per node could not hold them); every event is stored,
    and the walks answer them all."""
    store = documents.new()
    big = [f"{i:02d}" + "x" * 1_000_000 for i in range(17)]
    events = [
        run_event(job="hub", inputs=[("ns", name)], outputs=[("ns", "out")], seconds=i)
        for i, name in enumerate(big)
    ]
    store.write_batch(records(*events[:8]))
    store.write_batch(records(*events[8:]))  # the ninth megabyte and on
    store.write_batch(records(run_event(job="hub", inputs=[("ns", "small")], seconds=30)))
    assert store.count_events() == 18
    upstream = store.lineage("job:ns:hub", direction="upstream", depth=0)
    want = {f"dataset:ns:{name}" for name in [*big, "small"]} | {"job:ns:hub"}
    assert set(upstream.nodes) == want
    downstream = store.lineage(f"dataset:ns:{big[0]}", direction="downstream", depth=1)
    assert set(downstream.nodes) == {f"dataset:ns:{big[0]}", "job:ns:hub", "dataset:ns:out"}
