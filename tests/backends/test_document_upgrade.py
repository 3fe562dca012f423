"""A database of the ``document`` store of a release before the engine opens as the engine's
(issue 31): :class:`DocumentPreEngineLayout` reads the old layout and ``EngineStore`` copies it
into the document backend's collections at open, then drops it.

The old layout is written here by hand, document for document as the old store
(``DocumentLineageStore``, gone since) wrote it: the events collection ``{name}`` (``raw``,
``eventTime`` cut to the millisecond, ``eventTimeRaw`` to the microsecond, the escaped copy,
...) and its derived collections ``{name}_edges``, ``_nodes``, ``_runs``, ``_adjacency`` and
``_latest`` with their markers and indexes. Three of those names are the new backend's too for
the same name; the tests check that the copy reads the old events, that the new rows written
beside the old documents survive the drop, and that the store then answers every read as the
memory backend fed the same events.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stores_nosql"))

from backends.upgrade_helpers import Interrupting
from nosql_events import chain, column_lineage, records, run_event, uid
from servers import MongoTarget
from test_backend_answers import RECORDS, _columns, _graph, answers

from lineage_sdk.collector.backend import Rows
from lineage_sdk.collector.columns import column_edges, dataset_key, edge_rank
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.store import FieldRef, LineageRecord
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.document_legacy import (
    OLD_INDEXES,
    DocumentPreEngineLayout,
    old_collections,
)
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.exceptions import StoreError
from lineage_sdk.models.run_state import heartbeat_interval

pytestmark = pytest.mark.mongodb

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
PRE_ENGINE = "in the layout of a release before the engine"

# -------------------------------------------------------------------- the old layout, by hand


def field_key(ref: FieldRef) -> str:
    """The old document store's key of a field (its column edges' ``o`` and ``i``)."""
    text = f"{ref.namespace}\x00{ref.dataset}\x00{ref.field}"
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _escape(key: str) -> str:
    if not key:
        return "%"
    for raw, esc in (("%", "%25"), ("$", "%24"), (".", "%2E"), ("\x00", "%00")):
        key = key.replace(raw, esc)
    return key


def _escaped(value: Any) -> Any:
    """The old store's queryable copy: keys escaped, integers beyond 64 bits as text."""
    if isinstance(value, Mapping):
        return {_escape(str(k)): _escaped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_escaped(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        return str(value)
    return value


def _us(at: datetime) -> int:
    return (at.astimezone(UTC) - EPOCH) // timedelta(microseconds=1)


def _digest(*parts: str) -> str:
    text = "\x1f".join(parts).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=16).hexdigest()


def old_event(rec: LineageRecord) -> dict[str, Any]:
    """One event document as the old store wrote it (its ``to_document``)."""
    try:
        raw = orjson.dumps(rec.event).decode()
    except TypeError:
        import json

        raw = json.dumps(rec.event, ensure_ascii=False)
    doc: dict[str, Any] = {
        "_id": rec.event_id,
        "raw": raw,
        "event": _escaped(rec.event),
        "kind": rec.kind,
        "eventType": rec.event_type,
        "eventTime": rec.event_time.astimezone(UTC),
        "eventTimeRaw": rec.event_time_raw,
        "runId": rec.run_id,
        "parentRunId": rec.parent_run_id,
        "rootRunId": rec.root_run_id,
        "datasets": [
            {"namespace": r.namespace, "name": r.name, "role": role}
            for role, refs in (("input", rec.inputs), ("output", rec.outputs))
            for r in refs
        ],
        "producer": rec.producer,
        "storedAt": datetime.now(UTC),
    }
    if rec.job_namespace is not None and rec.job_name is not None:
        doc["job"] = {"namespace": rec.job_namespace, "name": rec.job_name}
    if rec.kind == "job" and rec.job_namespace is not None and rec.job_name is not None:
        doc["staticKey"] = f"job\x1f{rec.job_namespace}\x1f{rec.job_name}"
    elif rec.kind == "dataset" and rec.outputs:
        doc["staticKey"] = f"dataset\x1f{rec.outputs[0].namespace}\x1f{rec.outputs[0].name}"
    if rec.parent_job_namespace is not None and rec.parent_job_name is not None:
        doc["parentJob"] = {"namespace": rec.parent_job_namespace, "name": rec.parent_job_name}
    edges = column_edges(rec)
    if edges:
        columns, keys = [], set()
        for (out, src), info in sorted(edges.items()):
            o, i = field_key(out), field_key(src)
            columns.append(
                {
                    "o": o,
                    "i": i,
                    "out": [out.namespace, out.dataset, out.field],
                    "in": [src.namespace, src.dataset, src.field],
                    "info": info,
                }
            )
            keys |= {
                f"o:{o}",
                f"i:{i}",
                f"od:{dataset_key(out.namespace, out.dataset)}",
                f"id:{dataset_key(src.namespace, src.dataset)}",
            }
        doc["columns"], doc["colkeys"] = columns, sorted(keys)
        doc["columnsRank"] = edge_rank(rec.event_time, rec.event_id)
    beat = heartbeat_interval(rec.event)
    if beat is not None:
        doc["heartbeatS"] = beat
    return doc


def old_layout(recs: Sequence[LineageRecord]) -> dict[str, list[dict[str, Any]]]:
    """Every document of the old layout for ``recs``, by collection suffix (``""``: the events):
    the derived documents with the old ``_id`` values (digests) and key fields, and the markers."""
    events = list({r.event_id: old_event(r) for r in recs}.values())
    edges: dict[tuple[str, ...], int] = {}
    nodes: set[tuple[str, str, str]] = set()
    runs: dict[str, dict[str, Any]] = {}
    latest: dict[tuple[str, str], tuple[int, str]] = {}
    for doc, rec in zip(events, list({r.event_id: r for r in recs}.values()), strict=True):
        us = _us(rec.event_time)
        for field in ("job", "parentJob"):
            if field in doc:
                nodes.add(("JOB", doc[field]["namespace"], doc[field]["name"]))
        for ref in doc["datasets"]:
            nodes.add(("DATASET", ref["namespace"], ref["name"]))
            if "job" in doc:
                j = doc["job"]
                edge = (j["namespace"], j["name"], ref["namespace"], ref["name"], ref["role"])
                edges[edge] = min(edges.get(edge, us), us)
        if rec.run_id and "job" in doc:
            job = (doc["job"]["namespace"], doc["job"]["name"])
            run = runs.setdefault(rec.run_id, {"jobs": [], "firstUs": us, "lastUs": us})
            if {"ns": job[0], "n": job[1]} not in run["jobs"]:
                run["jobs"].append({"ns": job[0], "n": job[1]})
            run["firstUs"], run["lastUs"] = min(run["firstUs"], us), max(run["lastUs"], us)
            have = latest.get(job)
            if have is None or us > have[0] or (us == have[0] and rec.run_id < have[1]):
                latest[job] = (us, rec.run_id)
    nodes |= {("NAMESPACE", ns, "") for _, ns, _ in nodes}
    adjacency: dict[str, dict[str, Any]] = {}
    for (jns, jn, dns, dn, role), us in edges.items():
        for node, far in (
            (_digest("JOB", jns, jn), f"{_escape(dns)}%/{_escape(dn)}"),
            (_digest("DATASET", dns, dn), f"{_escape(jns)}%/{_escape(jn)}"),
        ):
            adjacency.setdefault(node, {"v": 1, "born": uid()}).setdefault(role, {})[far] = us
    done = {"_id": "backfill", "done": True}
    return {
        "": events,
        "_edges": [
            {
                "_id": _digest(*e),
                **dict(zip(("jns", "jn", "dns", "dn", "role"), e, strict=True)),
                "firstSeenUs": us,
                "v": 1,
                "born": uid(),
            }
            for e, us in edges.items()
        ]
        + [done, {"_id": "deletions", "gen": 1, "until": datetime(2025, 1, 1, tzinfo=UTC)}],
        "_adjacency": [{"_id": k, **v} for k, v in adjacency.items()] + [done],
        "_nodes": [
            {"_id": _digest(*n), "kind": n[0], "ns": n[1], "n": n[2], "v": 1, "born": uid()}
            for n in nodes
        ]
        + [done],
        "_runs": [
            {
                "_id": hashlib.blake2b(r.encode(), digest_size=16).hexdigest(),
                "run": r,
                **v,
                "v": 1,
                "born": uid(),
            }
            for r, v in runs.items()
        ]
        + [done],
        "_latest": [
            {"_id": _digest("JOB", *j), "ns": j[0], "n": j[1], "us": us, "run": run, "v": 1}
            for j, (us, run) in latest.items()
        ]
        + [done],
    }


#: The old store's indexes, by collection suffix (those the reader and the drop know of, and
#: two of the events' others).
OLD_INDEX_KEYS: dict[str, dict[str, list[tuple[str, int]]]] = {
    "": {
        "lineage_time": [("eventTime", 1), ("_id", 1)],
        "lineage_run_time": [("runId", 1), ("eventTime", 1)],
    },
    "_edges": {
        "lineage_edge_j": [("jns", 1), ("role", 1), ("jn", 1)],
        "lineage_edge_d": [("dns", 1), ("role", 1), ("dn", 1)],
    },
    "_nodes": {
        "lineage_node": [("kind", 1), ("ns", 1), ("n", 1)],
        "lineage_node_ns": [("ns", 1)],
    },
    "_runs": {"lineage_run_job": [("jobs.ns", 1), ("jobs.n", 1)]},
}


def write_old(database: Any, name: str, layout: Mapping[str, list[dict[str, Any]]]) -> None:
    for suffix, docs in layout.items():
        coll = database[f"{name}{suffix}"]
        for index, keys in OLD_INDEX_KEYS.get(suffix, {}).items():
            coll.create_index(keys, name=index)
        if docs:
            coll.insert_many(docs)


# ------------------------------------------------------------------------------------- fixtures


def _connection(mongo: MongoTarget) -> ConnectionConfig:
    return ConnectionConfig(uri=mongo.uri, database="lineage_tests", timeout_ms=5000)


class RecordingBackend(DocumentBackend):
    """A document backend that remembers the event ids of every append."""

    appended: list[str]

    def append(self, rows: Rows) -> None:
        super().append(rows)
        self.appended.extend(r.event_id for r in rows.events)


@pytest.fixture
def old(mongo: MongoTarget) -> Iterator[tuple[str, Any]]:
    """(a collection name of its own, the database); everything under that name dropped after."""
    name = f"old_{uid()}"
    backend = DocumentBackend(_connection(mongo), name)
    database = backend.connector.database
    try:
        yield name, database
    finally:
        for coll in database.list_collection_names():
            if coll == name or coll.startswith(f"{name}_"):
                database[coll].drop()
        backend.close()


def _backend(mongo: MongoTarget, name: str) -> RecordingBackend:
    backend = RecordingBackend(_connection(mongo), name)
    backend.appended = []
    return backend


def _engine(backend: DocumentBackend, name: str, **kw: Any) -> EngineStore:
    return EngineStore(backend, earlier=DocumentPreEngineLayout(backend.connector, name), **kw)


def _old_left(database: Any, name: str) -> dict[str, Any]:
    """What is left of the old layout: its collections, the old documents and indexes in the
    shared ones, and the copy's marker."""
    names = set(database.list_collection_names())
    left: dict[str, Any] = {
        c: True for c in (*old_collections(name), f"{name}_engine_upgrade") if c in names
    }
    for kind, indexes in OLD_INDEXES.items():
        coll = database[f"{name}_{kind}"]
        if coll.name not in names:
            continue
        left.pop(coll.name, None)
        olds = [d["_id"] for d in coll.find({}, {"_id": 1}) if not str(d["_id"]).startswith("[")]
        there = [i for i in indexes if i in coll.index_information()]
        if olds or there:
            left[coll.name] = (olds[:3], there)
    return left


# ---------------------------------------------------------------------------------------- tests


def test_upgrade_copies_every_event_and_answers_as_memory(
    mongo: MongoTarget, old: tuple[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    name, database = old
    layout = old_layout(RECORDS)
    bad = {**layout[""][0], "_id": "not-an-event", "raw": orjson.dumps({"eventTime": 1}).decode()}
    layout[""].append(bad)
    write_old(database, name, layout)
    events = len(layout[""])

    backend = _backend(mongo, name)
    earlier = DocumentPreEngineLayout(backend.connector, name)
    assert earlier.count_raw_events() == events
    assert earlier.copied() is None
    before = backend.missing()
    assert (
        f"{events} event(s) {PRE_ENGINE} (copied into the new collections at the next open, or by lineage-collector store init)"
        in before
    )
    assert f"collection {name}_events" in before and f"indexes of {name}_edges" in before

    store = EngineStore(backend, earlier=earlier)
    with caplog.at_level(logging.WARNING):
        store.open()
    try:
        assert any("skips event not-an-event" in r.getMessage() for r in caplog.records)
        valid = sorted({r.event_id for r in RECORDS})
        assert sorted(backend.appended) == valid  # every event once, the invalid one skipped
        assert [r.event_id for r in backend.events()] == [
            e.event_id for e in sorted({r.event_id: r for r in RECORDS}.values(), key=_position)
        ]
        assert _old_left(database, name) == {}
        assert backend.missing() == []
        assert earlier.count_raw_events() == 0

        memory = EngineStore(MemoryBackend())
        memory.open()
        memory.write_batch(RECORDS)
        assert answers(store) == answers(memory)
    finally:
        store.close()

    caplog.clear()
    again = _backend(mongo, name)
    store = _engine(again, name)
    with caplog.at_level(logging.WARNING):
        store.open()  # a no-op upgrade: nothing left to copy
    try:
        assert not [r for r in caplog.records if PRE_ENGINE in r.getMessage()]
        assert again.appended == []
        assert again.events(count=True).total == len(valid)
    finally:
        store.close()


def _position(rec: LineageRecord) -> tuple[datetime, str]:
    return (rec.event_time.astimezone(UTC), rec.event_id)


def _small() -> list[LineageRecord]:
    """Runs in order, events a microsecond apart in one millisecond, two at one time, column
    lineage and a parent: 24 events."""
    runs = chain("up", 6)
    same_ms = [
        run_event(job="tick", namespace="ms", outputs=[("ms", f"t{i}")], seconds=30 + i / 1e6)
        for i in (5, 1, 3, 0, 4, 2, 999)
    ]
    tied = [
        run_event(job=f"tie{i}", namespace="ms", inputs=[("ms", "t0")], seconds=31)
        for i in range(3)
    ]
    cols = {"columnLineage": column_lineage({"c": [("up", "d0", "a")]})}
    parent = run_event(job="parent", namespace="up", event_type="START", seconds=40)
    child = run_event(
        job="child",
        namespace="up",
        parent=(parent["run"]["runId"], "up", "parent"),
        inputs=[("up", "d0")],
        outputs=[("up", "cols")],
        dataset_facets=cols,
        seconds=41,
    )
    run_id = "0190dddd-0000-7000-8000-000000000001"
    lifecycle = [
        run_event(job="life", namespace="up", run_id=run_id, event_type=kind, seconds=50 + i)
        for i, kind in enumerate(("START", "RUNNING", "RUNNING", "RUNNING", "RUNNING", "COMPLETE"))
    ]
    return records(*runs, *same_ms, *tied, parent, child, *lifecycle)


def test_raw_events_in_order_to_the_microsecond(mongo: MongoTarget, old: tuple[str, Any]) -> None:
    name, database = old
    recs = _small()
    write_old(database, name, old_layout(recs))
    backend = DocumentBackend(_connection(mongo), name)
    try:
        earlier = DocumentPreEngineLayout(backend.connector, name)
        want = sorted(_position(r) for r in recs)
        for batch_size in (1000, 2):
            got = list(earlier.iter_raw_events(batch_size=batch_size))
            assert [e.position for e in got] == want
        by_id = {r.event_id: r for r in recs}
        assert all(orjson.loads(e.json) == by_id[e.event_id].event for e in got)
        for k in (0, 7, 10, len(want) - 1):  # inside one millisecond, at a tie, at the end
            after = list(earlier.iter_raw_events(after=want[k], batch_size=3))
            assert [e.position for e in after] == want[k + 1 :]
    finally:
        backend.close()


def test_interrupted_upgrade_resumes(
    mongo: MongoTarget, old: tuple[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    name, database = old
    recs = _small()
    write_old(database, name, old_layout(recs))
    want = sorted(_position(r) for r in recs)

    first = _backend(mongo, name)
    interrupting = Interrupting(DocumentPreEngineLayout(first.connector, name), batches=2)
    store = EngineStore(first, earlier=interrupting, upgrade_batch=7)
    with pytest.raises(ConnectionError):
        store.open()
    store.close()
    assert first.appended == [e[1] for e in want[:14]]  # two batches of 7, in order
    resumed = DocumentPreEngineLayout(first.connector, name)
    assert resumed.copied() == want[13]
    assert resumed.count_raw_events() == len(recs)  # not dropped yet

    second = _backend(mongo, name)
    store = _engine(second, name, upgrade_batch=7)
    with caplog.at_level(logging.WARNING):
        store.open()
    try:
        assert any("resuming after" in r.getMessage() for r in caplog.records)
        assert second.appended == [e[1] for e in want[14:]]  # none twice
        assert [r.position for r in second.events()] == want
        assert _old_left(database, name) == {}

        memory = EngineStore(MemoryBackend())
        memory.write_batch(recs)
        for node in ("dataset:up:d3", "job:up:j2", "dataset:ms:t0", "job:up:child"):
            assert _graph(store.lineage(node, depth=10)) == _graph(memory.lineage(node, depth=10))
        for job in ("j1", "life", "parent", "child"):
            assert list(store.runs_of_job("up", job)) == list(memory.runs_of_job("up", job))
        assert _columns(store.column_lineage("dataset:up:cols", with_downstream=True)) == (
            _columns(memory.column_lineage("dataset:up:cols", with_downstream=True))
        )
    finally:
        store.close()


def test_no_old_layout(mongo: MongoTarget, old: tuple[str, Any]) -> None:
    """A database the old store never wrote: nothing to count, copy or drop."""
    name, database = old
    backend = _backend(mongo, name)
    earlier = DocumentPreEngineLayout(backend.connector, name)
    assert earlier.count_raw_events() == 0
    assert list(earlier.iter_raw_events()) == []
    assert not [m for m in backend.missing() if PRE_ENGINE in m]
    store = EngineStore(backend, earlier=earlier)
    store.open()
    try:
        store.write_batch(_small())
        assert backend.missing() == []
        earlier.drop()  # of an absent layout: leaves the new rows
        assert backend.events(count=True).total == len(_small())
        mine = [c for c in database.list_collection_names() if c.startswith(name)]
        assert sorted(mine) == sorted(
            f"{name}_{k}"
            for k in ("events", "mentions", "edges", "runs", "columns", "nodes", "meta")
        )
    finally:
        store.close()


def test_missing_raises_store_error_when_unreachable() -> None:
    backend = DocumentBackend(ConnectionConfig(uri="mongodb://127.0.0.1:1", timeout_ms=300))
    try:
        with pytest.raises(StoreError):
            backend.missing()
    finally:
        backend.close()
