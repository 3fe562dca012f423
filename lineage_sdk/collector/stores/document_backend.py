"""The document backend: the engine's rows in MongoDB collections (issue 31).

The collections (one per row type), each document's ``_id`` (the row's key as compact JSON
text) and its times (integer microseconds, an event's also a BSON date in ``at``) are as
docs/stores.md (``document``) says, and why. A row's fields keep their names; a
:class:`Ranked` is two fields ``<name>_r`` and ``<name>_v``, and keys, sets and field
references are arrays. Index fields beside them: ``xj`` (the job's key text), ``xd``,
``xn``/``xs`` (a mention's node and its source, ``["run",id]``, ``["event",id]``, ``["job",id]``),
``xo``/``xi``/``xod``/``xid`` (a column edge's fields and datasets), ``xns``/``xn``/``xl`` (a
node's namespace, name and lower case name).

**Writes** as docs/stores.md says (for ``ranked``, a ``$cond`` on the stored rank beside a
``$max`` of it): the server runs each upsert atomically per document, so any order of appends
and any number of concurrent writers converge (lattice joins). An upsert that loses the insert
race to another writer is retried as an update (:meth:`~.DocumentConnector.bulk_upsert`).

**Replace is not a transaction.** It deletes the touched keys' derived rows (a touched run's
mentions among them, by ``xs``), then writes the given rows as ``append`` does. An ``append`` of
a touched key that lands after the delete merges with what ``replace`` writes (a join: nothing
lost); one that lands before it is deleted with the old rows, but its event row was written
before its derived rows, so the engine's re-read of the touched keys after ``replace``
(:mod:`lineage_sdk.collector.engine.forget`) finds the event and appends its rows again. That
re-read, and events-before-derived-rows here, is what this backend relies on instead of the old
store's lease.

**Reads** answer the contract as :class:`~lineage_sdk.collector.stores.memory.MemoryBackend`
does, and use its choices where the contract is silent (the Python-side folds are the
contract's helpers: :func:`~lineage_sdk.collector.backend.latest_of`, ``sort_runs``,
``follows``). Where a server needs a different way to ask the same question (how many
values one ``$in`` lists, windowed range reads, hints, a second ``$match``),
:class:`DocumentTactics` says so; its defaults suit a real mongod, and :mod:`.secantus` holds
SecantusDB's, picked by ``buildInfo`` at :meth:`DocumentBackend.open`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import fields
from datetime import datetime
from itertools import islice
from typing import Any, Literal, TypeVar

import orjson

from lineage_sdk.collector.backend import (
    ColumnEdgeRow,
    EdgeRow,
    EventRow,
    Io,
    Key,
    MentionRow,
    NodeKind,
    NodeRow,
    Position,
    Ranked,
    Role,
    Rows,
    RunRow,
    Touched,
    check_window,
    follows,
    latest_of,
    page_of,
    sort_runs,
)
from lineage_sdk.collector.records import from_micros, micros
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.store import EventKind, FieldRef, Page
from lineage_sdk.collector.stores.document_connector import (
    DUPLICATE_KEY,
    PERMANENT_CODES,
    DocumentConnector,
)
from lineage_sdk.collector.stores.document_legacy import DocumentPreEngineLayout
from lineage_sdk.collector.stores.document_tactics import DocumentTactics
from lineage_sdk.collector.stores.secantus import tactics_for
from lineage_sdk.config.redaction import redact
from lineage_sdk.exceptions import StoreError

# DocumentTactics and DocumentStoreConfig re-exported from their modules
__all__ = ["DocumentBackend", "DocumentTactics"]

_R = TypeVar("_R")
_Doc = dict[str, Any]
_ASC, _DESC = 1, -1
_TIMES = frozenset(
    {"event_time", "first_seen", "last_seen", "declared", "first_event", "last_event"}
    | {"started_at", "ended_at"}
)
_REFS = frozenset({"output", "input"})
_STORED_KINDS = ("JOB", "DATASET")
#: The collections of one backend, ``{name}_<kind>``, and the indexes ``open`` creates on each.
_INDEXES: dict[str, list[list[tuple[str, int]]]] = {
    "events": [
        [("event_time", _ASC), ("_id", _ASC)],
        [("event_time", _DESC), ("_id", _ASC)],
        [("run_id", _ASC), ("event_time", _ASC)],
        [("xj", _ASC), ("event_time", _ASC)],
        [("namespace", _ASC), ("event_time", _ASC), ("_id", _ASC)],
    ],
    "mentions": [[("xn", _ASC), ("first_seen", _ASC)], [("xs", _ASC)]],
    "edges": [[("io", _ASC), (end, _ASC)] for end in ("xj", "xd")],
    "runs": [[(f, _ASC)] for f in ("xj", "run_id", "parent_run_id")],
    "columns": [[(f, _ASC)] for f in ("xo", "xi", "xod", "xid", "xj")],
    "nodes": [[("kind", _ASC), ("xns", _ASC), ("xn", _ASC)]],
}


def _k(*parts: Any) -> str:
    """A key as compact JSON text: an ``_id`` or an index value, one per key and unambiguous."""
    return orjson.dumps(parts, default=list).decode()


def _encode(row: Any) -> _Doc:
    """A row's fields as BSON values (see the module docstring)."""
    out: _Doc = {}
    for f in fields(row):
        v = getattr(row, f.name)
        if isinstance(v, Ranked):
            out[f"{f.name}_r"], out[f"{f.name}_v"] = v.rank, v.value
        elif isinstance(v, datetime):
            out[f.name] = micros(v)
        elif isinstance(v, frozenset):
            out[f.name] = sorted(v)
        elif isinstance(v, tuple):
            out[f.name] = list(v)
        else:
            out[f.name] = v
    return out


def _decode(cls: type[_R], doc: Mapping[str, Any]) -> _R:
    args: list[Any] = []
    for f in fields(cls):  # type: ignore[arg-type]
        v = doc.get(f.name)
        if f.metadata.get("merge") == "ranked":
            v = Ranked(doc[f"{f.name}_r"], doc.get(f"{f.name}_v"))
        elif v is None:
            pass
        elif f.name in _TIMES:
            v = from_micros(v)
        elif f.name in _REFS:
            v = FieldRef(*v)
        elif f.metadata.get("merge") == "union":
            v = frozenset(v)
        elif isinstance(v, list):
            v = tuple(v)
        args.append(v)
    return cls(*args)


def _upsert(row: Any, extra: Mapping[str, Any]) -> Any:
    """One upsert of a derived row, joining it with the stored one by each field's merge rule:
    update operators (``$min``, ``$max``, ``$addToSet``; None is no value, so no operator), or,
    for a row with a ``ranked`` field, an update pipeline whose ``$cond`` keeps the value of the
    greater rank (every value a ``$literal``: no text can act as an expression). Operators cost
    SecantusDB about half of a pipeline (7,500 node upserts: 1.4 s against 2.2-2.9 s)."""
    from pymongo import UpdateOne

    doc, rules = _encode(row), [(f.name, f.metadata.get("merge", "first")) for f in fields(row)]
    where = {"_id": _k(*_key_values(row))}
    if all(rule != "ranked" for _, rule in rules):
        ops: dict[str, _Doc] = {"$setOnInsert": dict(extra)}
        for name, rule in rules:
            if rule == "union":
                if doc[name] is not None:
                    ops.setdefault("$addToSet", {})[name] = {"$each": doc[name]}
            elif rule in ("min", "max"):
                if doc[name] is not None:
                    ops.setdefault(f"${rule}", {})[name] = doc[name]
            else:  # key fields, equal on every write
                ops["$setOnInsert"][name] = doc[name]
        return UpdateOne(where, ops, upsert=True)
    s: _Doc = {name: {"$literal": value} for name, value in extra.items()}
    for name, rule in rules:
        if rule == "ranked":
            rank, stored = {"$literal": doc[f"{name}_r"]}, f"${name}_r"
            beats = {"$gt": [rank, {"$ifNull": [stored, None]}]}
            s[f"{name}_v"] = {"$cond": [beats, {"$literal": doc[f"{name}_v"]}, f"${name}_v"]}
            s[f"{name}_r"] = {"$max": [stored, rank]}
        elif rule in ("min", "max"):  # $min/$max ignore null: None is no value
            s[name] = {f"${rule}": [f"${name}", {"$literal": doc[name]}]}
        else:  # key fields
            s[name] = {"$literal": doc[name]}
    return UpdateOne(where, [{"$set": s}], upsert=True)


def _stored(row: Any) -> _Doc:
    """A row as inserted: :func:`_encode` without the None of ``min``, ``max`` and ``union``
    fields, which an upsert leaves unset (a stored null would win every later ``$min``, and
    ``$addToSet`` fails on it)."""
    doc = _encode(row)
    for f in fields(row):
        if f.metadata.get("merge") in ("min", "max", "union") and doc.get(f.name, 0) is None:
            del doc[f.name]
    return doc


def _key_values(row: Any) -> list[Any]:
    return [getattr(row, f.name) for f in fields(row) if f.metadata.get("merge") == "key"]


def _us(at: datetime | None) -> int | None:
    return None if at is None else micros(at)


class DocumentBackend:
    """The engine's rows in MongoDB (see the module docstring)."""

    name = "document"

    def __init__(
        self,
        connection: ConnectionConfig,
        collection_name: str = "lineage",
        *,
        tactics: DocumentTactics | None = None,
    ) -> None:
        #: The connection (opened lazily), shared with the layout of a release before the engine.
        self.connector = DocumentConnector(connection)
        self._prefix = collection_name
        self._given = tactics
        self.tactics = tactics or DocumentTactics()
        self._width: int | None = None  # the last range window's width (µs)
        #: What ``lineage-collector check`` shows: the URI, its password redacted.
        self.address: str = redact(connection.uri, connection.password)

    # -- lifecycle -----------------------------------------------------------------------------

    def _coll(self, kind: str) -> Any:
        return self.connector.database[f"{self._prefix}_{kind}"]

    def open(self) -> None:
        with self.connector.errors("buildInfo"):
            info = self.connector.database.client.admin.command("buildInfo")
        if self._given is None:
            self.tactics = tactics_for(info)
        with self.connector.errors("create indexes"):
            for kind, keys in _INDEXES.items():
                for index in keys:
                    self._coll(kind).create_index(index)

    def missing(self) -> list[str]:
        """What :meth:`open` would create, found read-only (``lineage-collector check``): a
        collection or its indexes; and the events of a release before the engine that the next
        open copies (:class:`DocumentPreEngineLayout`). Raises StoreError if the server cannot
        be reached."""
        absent: list[str] = []
        with self.connector.errors("list indexes"):
            database = self.connector.database
            database.client.admin.command("ping")
            names = set(database.list_collection_names())
            for kind, wanted in _INDEXES.items():
                name = f"{self._prefix}_{kind}"
                if name not in names:
                    absent.append(f"collection {name}")
                    continue
                have = {
                    tuple((field, int(order)) for field, order in info["key"])
                    for info in self._coll(kind).index_information().values()
                }
                if any(tuple(index) not in have for index in wanted):
                    absent.append(f"indexes of {name}")
        earlier = DocumentPreEngineLayout(self.connector, self._prefix).count_raw_events()
        if earlier:
            absent.append(
                f"{earlier} event(s) in the layout of a release before the engine (copied into "
                "the new collections at the next open, or by lineage-collector store init)"
            )
        return absent

    def check(self) -> None:
        self.connector.check()

    def close(self) -> None:
        self.connector.close()

    def drop(self) -> None:
        """Drop every collection of this backend (tests and benchmarks clean up with this)."""
        with self.connector.errors("drop"):
            for kind in _INDEXES:
                self._coll(kind).drop()

    # -- writes --------------------------------------------------------------------------------

    def append(self, rows: Rows) -> None:
        """Events first (see the module docstring), then the derived rows, mentions among them.
        (One thread per collection was no faster on SecantusDB, which serves writes one at a
        time: 13.2 s against 12.5 s for 5,000 events, with a mention row per event then.)"""
        _refuse_namespaces(rows)
        events = [
            {"_id": r.event_id, **_encode(r), "at": r.event_time, "xj": _opt(r.job)}
            for r in rows.events
        ]
        self._insert("events", events)
        self._insert_or_join(
            "mentions",
            rows.mentions,
            [{"xn": _k(m.kind, m.key), "xs": _k(m.source, m.source_id)} for m in rows.mentions],
        )
        edges = [_upsert(e, {"xj": _k(*e.job), "xd": _k(*e.dataset)}) for e in rows.edges]
        runs = [_upsert(r, {"xj": _opt(r.job)}) for r in rows.runs]
        columns = [
            _upsert(
                c,
                {
                    "xo": _k(*c.output),
                    "xi": _k(*c.input),
                    "xod": _k(*c.output[:2]),
                    "xid": _k(*c.input[:2]),
                    "xj": _opt(c.job),
                },
            )
            for c in rows.columns
        ]
        nodes = [
            _upsert(n, {"xns": n.key[0], "xn": n.key[1], "xl": n.key[1].lower()})
            for n in rows.nodes
        ]
        for kind, ops in (("edges", edges), ("runs", runs), ("columns", columns), ("nodes", nodes)):
            self._upsert_all(kind, ops)

    def _insert(self, kind: str, docs: list[_Doc]) -> list[int]:
        """Insert-if-absent: a duplicate ``_id`` keeps the first write (for an event, a
        redelivery). The indexes in ``docs`` of those already there."""
        from pymongo.errors import BulkWriteError

        if not docs:
            return []
        try:
            with self.connector.errors(f"insert {kind}"):
                self._coll(kind).insert_many(docs, ordered=False)
        except StoreError as exc:
            cause = exc.__cause__
            if not isinstance(cause, BulkWriteError):
                raise
            details = cause.details or {}
            errors = details.get("writeErrors", [])
            others = [e for e in errors if e.get("code") != DUPLICATE_KEY]
            wce = details.get("writeConcernErrors") or []
            if others or wce:  # as the old store: the server's code, permanent when it will
                first = (others or wce)[0]  # fail the same way again (a validator, too large)
                codes = {e.get("code") for e in others}
                raise StoreError(
                    self.connector.name,
                    f"insert {kind} failed for {len(others) + len(wce)} document(s): "
                    f"code {first.get('code')}: {str(first.get('errmsg', ''))[:200]}",
                    permanent=bool(others) and not wce and codes <= PERMANENT_CODES,
                ) from cause
            return sorted(int(e["index"]) for e in errors)
        return []

    def _insert_or_join(self, kind: str, rows: Sequence[Any], extra: Sequence[_Doc]) -> None:
        """Rows mostly new (one per run): inserted, and only those whose key is already there
        upserted by their merge rules. The same join as upserting all (absent, a row is its own
        join; a concurrent writer's insert makes ours a duplicate, then merged), at a fraction
        of the cost on SecantusDB, where an upsert costs several inserts (see ``append``)."""
        docs = [
            {"_id": _k(*_key_values(row)), **_stored(row), **more}
            for row, more in zip(rows, extra, strict=True)
        ]
        there = self._insert(kind, docs)
        self._upsert_all(kind, [_upsert(rows[i], extra[i]) for i in there])

    def _upsert_all(self, kind: str, ops: list[Any]) -> None:
        if ops:
            self.connector.bulk_upsert(self._coll(kind), ops, f"upsert {kind}")

    def delete(self, event_ids: Sequence[str]) -> list[EventRow]:
        ids = sorted(set(event_ids))
        removed = [_decode(EventRow, d) for d in self._select("events", {}, "_id", ids)]
        # The events' own mentions before the events: a retry after a failure between the two
        # still finds the events (and returns them).
        self._delete("mentions", "xs", [_k("event", i) for i in ids])
        self._delete("events", "_id", ids)
        return sorted(removed, key=lambda r: r.position)

    def replace(self, touched: Touched, rows: Rows) -> None:
        _refuse_namespaces(rows)
        for kind in ("edges", "columns", "runs", "mentions", "nodes") if touched.every else ():
            with self.connector.errors(f"delete {kind}"):
                self._coll(kind).delete_many({})
        jobs = [_k(*j) for j in touched.jobs]
        self._delete("edges", "xj", jobs)
        self._delete("columns", "xj", jobs)
        self._delete("columns", "xod", [_k(*d) for d in touched.datasets], {"xj": None})
        self._delete("runs", "run_id", list(touched.runs))
        self._delete("mentions", "xs", [_k("run", r) for r in touched.runs])
        self._delete("mentions", "xn", [_k("JOB", j) for j in touched.jobs], {"source": "job"})
        self._delete("nodes", "_id", [_k(kind, k) for kind, keys in touched.nodes for k in keys])
        self.append(rows)

    def derivation(self) -> int | None:
        with self.connector.errors("find meta"):
            found = self._coll("meta").find_one({"_id": "derivation"})
        return None if found is None else int(found["value"])

    def mark_derivation(self, version: int) -> None:
        with self.connector.errors("upsert meta"):
            self._coll("meta").replace_one({"_id": "derivation"}, {"value": version}, upsert=True)

    def _delete(
        self, kind: str, field: str, values: Sequence[Any], rest: Mapping[str, Any] | None = None
    ) -> None:
        """Delete the documents whose ``field`` is one of ``values`` (and match ``rest``:
        found first, then deleted by ``_id``, so each delete is a plain ``$in``)."""
        if rest:
            values = [d["_id"] for d in self._select(kind, {}, field, values, rest, {"_id": 1})]
            field = "_id"
        coll = self._coll(kind)
        with self.connector.errors(f"delete {kind}"):
            for batch in self._batches(values):
                coll.delete_many({field: {"$in": batch}})

    # -- the query seam: where the tactics apply -------------------------------------------------

    def _batches(self, values: Iterable[Any]) -> Iterator[list[Any]]:
        ordered = sorted(set(values), key=lambda v: (v is None, v or ""))
        size = self.tactics.in_batch
        for start in range(0, len(ordered), size):
            yield ordered[start : start + size]

    def _find(
        self,
        kind: str,
        head: Mapping[str, Any],
        rest: Mapping[str, Any] | None = None,
        sort: list[tuple[str, int]] | None = None,
        projection: Mapping[str, int] | None = None,
        *,
        skip: int = 0,
        limit: int | None = None,
        hint: list[tuple[str, int]] | None = None,
    ) -> Iterator[_Doc]:
        """The documents ``head`` (the indexed predicate) and ``rest`` select, in ``sort``."""
        coll = self._coll(kind)
        with self.connector.errors(f"read {kind}"):
            if rest and self.tactics.split_match:
                stages: list[_Doc] = [{"$match": dict(head)}, {"$match": dict(rest)}]
                if sort:
                    stages.append({"$sort": dict(sort)})
                if skip:
                    stages.append({"$skip": skip})
                if limit is not None:
                    stages.append({"$limit": limit})
                if projection:
                    stages.append({"$project": dict(projection)})
                cursor = coll.aggregate(stages)
            else:
                cursor = coll.find(
                    {**head, **(rest or {})},
                    projection,
                    sort=sort,
                    skip=skip,
                    limit=limit or 0,
                    hint=hint if self.tactics.hint_ranges else None,
                )
            try:
                yield from cursor
            finally:
                cursor.close()

    def _count(self, kind: str, head: Mapping[str, Any], rest: Mapping[str, Any] | None) -> int:
        coll = self._coll(kind)
        with self.connector.errors(f"count {kind}"):
            if rest and self.tactics.split_match:
                stages = [{"$match": dict(head)}, {"$match": dict(rest)}, {"$count": "n"}]
                return next((int(d["n"]) for d in coll.aggregate(stages)), 0)
            return int(coll.count_documents({**head, **(rest or {})}))

    def _select(
        self,
        kind: str,
        head: Mapping[str, Any],
        field: str,
        values: Iterable[Any],
        rest: Mapping[str, Any] | None = None,
        projection: Mapping[str, int] | None = None,
    ) -> Iterator[_Doc]:
        """The documents whose ``field`` is one of ``values``, one ``$in`` batch at a time."""
        for batch in self._batches(values):
            yield from self._find(kind, {**head, field: {"$in": batch}}, rest, None, projection)

    # -- reads ---------------------------------------------------------------------------------

    def edges(
        self,
        end: Literal["JOB", "DATASET"],
        keys: Collection[Key],
        io: Io,
        *,
        until: datetime | None = None,
    ) -> Iterable[EdgeRow]:
        if end not in ("JOB", "DATASET"):
            raise ValueError(f"edges end must be JOB or DATASET, not {end!r}")
        rest = None if until is None else {"first_seen": {"$lt": micros(until)}}
        field = "xj" if end == "JOB" else "xd"
        docs = self._select("edges", {"io": io}, field, [_k(*k) for k in keys], rest)
        return [_decode(EdgeRow, d) for d in docs]

    def nodes(
        self,
        kind: NodeKind,
        *,
        keys: Collection[Key] | None = None,
        namespace: str | None = None,
        text: str | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        offset: int = 0,
        count: bool = False,
    ) -> Page[NodeRow]:
        check_window(limit, offset)
        needle = None if text is None else text.lower()
        if kind == "NAMESPACE":
            found = [
                r
                for r in self._namespaces(keys, namespace, until)
                if needle is None or needle in r.key[1].lower()
            ]
            return page_of(found, limit, offset, count)
        rest: _Doc = {}
        if until is not None:
            rest["first_seen"] = {"$lt": micros(until)}
        if keys is not None:  # a lookup by _id; the other filters in Python
            docs = self._select("nodes", {}, "_id", [_k(kind, k) for k in keys], rest or None)
            rows = [
                r
                for r in (_decode(NodeRow, d) for d in docs)
                if (namespace is None or r.key[0] == namespace)
                and (needle is None or needle in r.key[1].lower())
            ]
            return page_of(sorted(rows, key=lambda r: r.key), limit, offset, count)
        head: _Doc = {"kind": kind}
        if namespace is not None:
            head["xns"] = namespace
        if needle:
            rest["xl"] = {"$regex": re.escape(needle)}
        total = self._count("nodes", head, rest) if count else None
        if limit == 0:
            return Page([], total)
        order = [("xns", _ASC), ("xn", _ASC)]
        docs = self._find("nodes", head, rest, order, skip=offset, limit=limit)
        return Page((_decode(NodeRow, d) for d in docs), total)

    def _namespaces(
        self, keys: Collection[Key] | None, namespace: str | None, until: datetime | None
    ) -> list[NodeRow]:
        """One row per namespace holding a JOB or DATASET row first seen before ``until``."""
        match: _Doc = {"kind": {"$in": list(_STORED_KINDS)}}
        if keys is not None:
            match["xns"] = {"$in": sorted({ns for ns, name in keys if name == ""})}
        elif namespace is not None:
            match["xns"] = namespace
        if until is not None:
            match["first_seen"] = {"$lt": micros(until)}
        group = {
            "_id": "$xns",
            "first_seen": {"$min": "$first_seen"},
            "last_seen": {"$max": "$last_seen"},
            "holds": {"$addToSet": "$kind"},
        }
        with self.connector.errors("read namespaces"):
            docs = list(self._coll("nodes").aggregate([{"$match": match}, {"$group": group}]))
        rows = []
        for d in docs:
            first, last = from_micros(d["first_seen"]), from_micros(d["last_seen"])
            rows.append(NodeRow("NAMESPACE", (d["_id"], ""), first, last, frozenset(d["holds"])))
        return sorted(rows, key=lambda r: r.key)

    def runs(
        self,
        *,
        jobs: Collection[Key] | None = None,
        run_ids: Collection[str] | None = None,
        parent: str | None = None,
        until: datetime | None = None,
        latest: int | None = None,
        limit: int | None = None,
        offset: int = 0,
        count: bool = False,
    ) -> Page[RunRow]:
        if latest is not None and latest < 0:
            raise ValueError(f"latest must not be negative, not {latest!r}")
        check_window(limit, offset)
        rest: _Doc = {}
        if until is not None and latest is None:
            rest["first_event"] = {"$lt": micros(until)}
        job_keys = None if jobs is None else {_k(*j) for j in jobs if j is not None}
        if job_keys is not None:
            docs = self._select("runs", {}, "xj", job_keys, rest or None)
        elif run_ids is not None:
            docs = self._select("runs", {}, "run_id", run_ids, rest or None)
        elif parent is not None:
            docs = self._find("runs", {"parent_run_id": parent}, rest or None)
        else:
            docs = self._find("runs", rest)
        rows = [
            _decode(RunRow, d)
            for d in docs
            if (job_keys is None or d.get("xj") in job_keys)
            and (run_ids is None or d["run_id"] in run_ids)
            and (parent is None or d.get("parent_run_id") == parent)
        ]
        if latest is not None:
            rows = latest_of(rows, until, latest)
        sort_runs(rows)
        return page_of(rows, limit, offset, count)

    def events(
        self,
        *,
        ids: Collection[str] | None = None,
        run_ids: Collection[str] | None = None,
        jobs: Collection[Key] | None = None,
        kinds: Collection[EventKind] | None = None,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: Position | None = None,
        descending: bool = False,
        limit: int | None = None,
        offset: int = 0,
        count: bool = False,
    ) -> Page[EventRow]:
        check_window(limit, offset)
        rest: _Doc = {}
        if kinds is not None:
            rest["kind"] = {"$in": sorted(set(kinds))}
        lo, hi = _us(since), _us(until)
        if ids is not None or run_ids is not None or jobs is not None:
            return self._events_of(
                ids, run_ids, jobs, namespace, rest, lo, hi, after, descending, limit, offset, count
            )
        head: _Doc = {} if namespace is None else {"namespace": namespace}
        parts: list[tuple[_Doc, int | None, int | None]] = []  # (extra head, lo, hi), in order
        if after is not None:
            a, aid = micros(after[0]), after[1]
            if (lo is None or a >= lo) and (hi is None or a < hi):  # equal times, greater ids
                parts.append(({"event_time": a, "_id": {"$gt": aid}}, None, None))
            if descending:
                hi = a if hi is None else min(hi, a)
            else:
                lo = a + 1 if lo is None else max(lo, a + 1)
        if lo is None or hi is None or lo < hi:
            parts.append(({}, lo, hi))
        total = None
        if count:
            total = sum(
                self._count("events", {**head, **extra, **_range(low, high)}, rest or None)
                for extra, low, high in parts
            )
        if limit == 0:
            return Page([], total)

        def stream() -> Iterator[_Doc]:
            for extra, low, high in parts:
                if extra:
                    yield from self._find(
                        "events", {**head, **extra}, rest or None, [("_id", _ASC)]
                    )
                else:
                    yield from self._range(head, rest or None, low, high, descending)

        stop = None if limit is None else offset + limit
        return Page((_decode(EventRow, d) for d in islice(stream(), offset, stop)), total)

    def _events_of(
        self,
        ids: Collection[str] | None,
        run_ids: Collection[str] | None,
        jobs: Collection[Key] | None,
        namespace: str | None,
        rest: _Doc,
        lo: int | None,
        hi: int | None,
        after: Position | None,
        descending: bool,
        limit: int | None,
        offset: int,
        count: bool,
    ) -> Page[EventRow]:
        """Events by id, run or job: one selector read by ``$in``, the rest tested here."""
        span = _range(lo, hi)
        if namespace is not None:
            span["namespace"] = namespace
        rest = {**rest, **span}
        job_keys = None if jobs is None else {_k(*j) for j in jobs}
        if ids is not None:
            docs = self._select("events", {}, "_id", ids, rest or None)
        elif run_ids is not None:
            docs = self._select("events", {}, "run_id", run_ids, rest or None)
        else:
            docs = self._select("events", {}, "xj", job_keys or (), rest or None)
        rows = [
            _decode(EventRow, d)
            for d in docs
            if (run_ids is None or d.get("run_id") in run_ids)
            and (job_keys is None or d.get("xj") in job_keys)
        ]
        rows = [r for r in rows if after is None or follows(r, after, descending)]
        rows.sort(key=lambda r: r.position)
        if descending:  # time descending, ties by id ascending: a stable reversed sort
            rows.sort(key=lambda r: r.event_time, reverse=True)
        return page_of(rows, limit, offset, count)

    def _range(
        self, head: _Doc, rest: _Doc | None, lo: int | None, hi: int | None, descending: bool
    ) -> Iterator[_Doc]:
        """The events with ``lo <= event_time < hi`` (None: open), by position (descending:
        time descending, ties by id ascending); read in time windows when the tactics say."""
        order = [("event_time", _DESC if descending else _ASC), ("_id", _ASC)]
        want = self.tactics.window_rows
        if want is None:
            hint = None if head else order
            yield from self._find("events", {**head, **_range(lo, hi)}, rest, order, hint=hint)
            return
        if lo is None:
            lo = self._edge_time(head, lo, hi, _ASC)
        if hi is None:
            last = self._edge_time(head, lo, hi, _DESC)
            hi = None if last is None else last + 1
        if lo is None or hi is None:
            return
        width = self._width or max(1, (hi - lo) // 64)
        while lo < hi:
            low, high = (max(lo, hi - width), hi) if descending else (lo, min(hi, lo + width))
            docs = list(self._find("events", {**head, **_range(low, high)}, rest))
            docs.sort(key=lambda d: d["_id"])
            docs.sort(key=lambda d: d["event_time"], reverse=descending)
            yield from docs
            lo, hi = (lo, low) if descending else (high, hi)
            scale = min(max(want / max(len(docs), 1), 0.5), 2.0)
            width = self._width = max(1, min(round(width * scale), 2**62))

    def _edge_time(self, head: _Doc, lo: int | None, hi: int | None, end: int) -> int | None:
        """The least (``end`` ascending) or greatest event time within the bounds: where an
        open range read starts or ends."""
        bounds = {**head, **_range(lo, hi)}
        order = [("event_time", end)]
        docs = self._find("events", bounds, None, order, {"event_time": 1}, limit=1)
        return next((int(d["event_time"]) for d in docs), None)

    def mentions(
        self,
        kind: NodeKind,
        keys: Collection[Key],
        *,
        roles: Collection[Role] | None = None,
        until: datetime | None = None,
        stated: bool = False,
    ) -> Iterable[MentionRow]:
        rest: _Doc = {}
        if roles is not None:
            rest["role"] = {"$in": sorted(set(roles))}
        if until is not None:
            rest["first_seen"] = {"$lt": micros(until)}
        docs = self._select("mentions", {}, "xn", [_k(kind, k) for k in keys], rest or None)
        return [_decode(MentionRow, d) for d in docs if d.get("detail") or not stated]

    def column_edges(
        self,
        *,
        outputs: Collection[FieldRef] | None = None,
        inputs: Collection[FieldRef] | None = None,
        datasets: Collection[Key] | None = None,
        until: datetime | None = None,
    ) -> Iterable[ColumnEdgeRow]:
        rest = None if until is None else {"first_seen": {"$lt": micros(until)}}
        outs = None if outputs is None else {_k(*f) for f in outputs}
        ins = None if inputs is None else {_k(*f) for f in inputs}
        sets = None if datasets is None else {_k(*d) for d in datasets}
        if outs is not None:
            docs: Iterable[_Doc] = self._select("columns", {}, "xo", outs, rest)
        elif ins is not None:
            docs = self._select("columns", {}, "xi", ins, rest)
        elif sets is not None:  # two reads, not an $or
            by_id = {d["_id"]: d for d in self._select("columns", {}, "xod", sets, rest)}
            by_id.update((d["_id"], d) for d in self._select("columns", {}, "xid", sets, rest))
            docs = by_id.values()
        else:
            docs = self._find("columns", rest or {})
        return [
            _decode(ColumnEdgeRow, d)
            for d in docs
            if (ins is None or d["xi"] in ins)
            and (sets is None or d["xod"] in sets or d["xid"] in sets)
        ]


def _range(lo: int | None, hi: int | None) -> _Doc:
    """``lo <= event_time < hi`` (None: open)."""
    span = {op: at for op, at in (("$gte", lo), ("$lt", hi)) if at is not None}
    return {"event_time": span} if span else {}


def _opt(key: Key | None) -> str | None:
    return None if key is None else _k(*key)


def _refuse_namespaces(rows: Rows) -> None:
    """NAMESPACE rows are answered from JOB and DATASET rows (memory's choice); checked before
    any write, so a refused batch leaves nothing half-written."""
    if any(node.kind == "NAMESPACE" for node in rows.nodes):
        raise ValueError("NAMESPACE node rows are answered from JOB and DATASET rows")
