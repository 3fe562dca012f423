"""The engine over the document backend answers every read as the memory backend does (issue 31).

The corpus, the reads and the three write orders are test_backend_answers.py's; here the
backend under test is :class:`DocumentBackend` on the session's MongoDB-wire server (SecantusDB,
with its tactics picked by ``buildInfo``, or a real mongod from LINEAGE_TEST_MONGODB_URI), each
store on collections of its own, dropped afterwards. The reference is the memory backend under
the engine (``EngineStore(MemoryBackend())``), the backend every other is held to.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from nosql_events import uid
from servers import MongoTarget
from test_backend_answers import EVENTS, RECORDS, _written, answers

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.records import compute_event_id
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.stores.document_backend import DocumentBackend, DocumentTactics
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.collector.stores.secantus import SECANTUS

pytestmark = pytest.mark.mongodb


#: Tactics under test besides the server's own (None: picked by ``buildInfo``): mongod's
#: defaults, and tiny ``$in`` batches and windows, so every batch and window boundary is crossed.
def mongo_connection(mongo: MongoTarget) -> ConnectionConfig:
    return ConnectionConfig(uri=mongo.uri, database="lineage_tests", timeout_ms=5000)


TACTICS = {
    "server": None,
    "mongod": DocumentTactics(),
    "tiny": DocumentTactics(in_batch=2, window_rows=3, hint_ranges=False, split_match=True),
}


@pytest.fixture(params=list(TACTICS))
def document_backend(
    mongo: MongoTarget, request: pytest.FixtureRequest
) -> Iterator[Callable[[], EngineStore]]:
    """``make()``: a fresh engine store over a DocumentBackend on collections of its own, with
    each of :data:`TACTICS`."""
    made: list[DocumentBackend] = []
    tactics = TACTICS[request.param]

    def make() -> EngineStore:
        backend = DocumentBackend(
            mongo_connection(mongo), collection_name=f"b_{uid()}", tactics=tactics
        )
        made.append(backend)
        store = EngineStore(backend)
        store.open()
        return store

    yield make
    for backend in made:
        backend.drop()
        backend.close()


def _memory() -> EngineStore:
    """The reference: a fresh, open engine store over the memory backend."""
    store = EngineStore(MemoryBackend())
    store.open()
    return store


def _differ(got: dict[str, Any], reference: dict[str, Any]) -> str:
    assert got.keys() == reference.keys()
    differ = [key for key in reference if got[key] != reference[key]]
    return "\n".join(f"{k}:\n  document {got[k]}\n  memory   {reference[k]}" for k in differ[:5])


def test_tactics_follow_the_server(mongo: MongoTarget) -> None:
    backend = DocumentBackend(mongo_connection(mongo), collection_name=f"b_{uid()}")
    backend.open()
    try:
        want = SECANTUS if mongo.kind == "secantusdb" else DocumentTactics()
        assert backend.tactics == want
    finally:
        backend.drop()
        backend.close()


@pytest.mark.parametrize("how", ["in order", "shuffled", "twice"])
def test_document_answers_as_the_memory_backend(
    document_backend: Callable[[], EngineStore], how: str
) -> None:
    reference = answers(_written(_memory(), "in order"))
    got = answers(_written(document_backend(), how))
    differ = _differ(got, reference)
    assert not differ, differ


def test_document_forgets_as_the_memory_backend(
    document_backend: Callable[[], EngineStore],
) -> None:
    """After deleting every third event, each store answers as one fed the others only, and
    the document backend's answers are the memory backend's."""
    gone = [compute_event_id(e) for e in EVENTS[::3]]
    kept = [r for r in RECORDS if r.event_id not in set(gone)]
    after: dict[str, Any] = {}
    for kind, make in (("memory", _memory), ("document", document_backend)):
        store = _written(make(), "shuffled")
        assert store.delete_events(gone) == len(gone)
        assert store.delete_events(gone) == 0
        after[kind] = answers(store)
        fresh = make()
        fresh.write_batch(kept)
        assert answers(fresh) == after[kind], kind
    differ = _differ(after["document"], after["memory"])
    assert not differ, differ


def test_concurrent_writers_converge(mongo: MongoTarget) -> None:
    """Four writers append the corpus at once, each in its own order and batches, into one
    backend (as a fleet of collectors would): the merge rules are joins, so the answers are the
    memory backend's for the corpus written once."""
    reference = answers(_written(_memory(), "in order"))
    backend = DocumentBackend(mongo_connection(mongo), collection_name=f"b_{uid()}")
    store = EngineStore(backend)
    store.open()
    try:

        def write(seed: int) -> None:
            records = list(RECORDS)
            random.Random(seed).shuffle(records)
            for i in range(0, len(records), 5):
                store.write_batch(records[i : i + 5])

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(write, range(4)))
        differ = _differ(answers(store), reference)
        assert not differ, differ
    finally:
        backend.drop()
        backend.close()


def test_forgets_beside_a_writer(mongo: MongoTarget) -> None:
    """A deletion while another writer appends events of the same keys: ``replace`` is no
    transaction here, so this holds by the engine's re-read after it (events are written before
    their rows). The answers are those of the memory backend fed the kept events only."""
    gone = {compute_event_id(e) for e in EVENTS[::3]}
    kept = [r for r in RECORDS if r.event_id not in gone]
    early, late = kept[::2], kept[1::2]
    reference = _memory()
    reference.write_batch(kept)
    backend = DocumentBackend(mongo_connection(mongo), collection_name=f"b_{uid()}")
    store = EngineStore(backend)
    store.open()
    try:
        store.write_batch([r for r in RECORDS if r.event_id in gone] + early)

        def write() -> None:
            for i in range(0, len(late), 3):
                store.write_batch(late[i : i + 3])

        with ThreadPoolExecutor(2) as pool:
            writer = pool.submit(write)
            assert store.delete_events(sorted(gone)) == len(gone)
            writer.result()
        differ = _differ(answers(store), answers(reference))
        assert not differ, differ
    finally:
        backend.drop()
        backend.close()
