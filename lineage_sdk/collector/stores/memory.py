"""The memory backend: the reference :class:`~lineage_sdk.collector.backend.LineageBackend`.

Rows live in dicts keyed by :func:`~lineage_sdk.collector.backend.key_of`, each with the
secondary indexes its reads need, and events in one list sorted by Position, so the reads stay
cheap at the thousands of events of users' tests and ``lineage-collector serve`` without a
database. It is no production store: nothing persists, and one lock serialises every call (the
collector writes from one thread while the HTTP API reads from others).

Being the reference, it answers every promise of :mod:`~lineage_sdk.collector.backend` in the
plainest way; where the contract leaves a choice open, this module makes it, and says so:

* ``events(descending=True)`` orders by event time descending, ties by event id *ascending*
  (as the sql store's ``lineage_events``), and ``after`` then keeps what follows the position in
  that order: an earlier time, or the same time and a greater event id.
* Ties that no promise orders come in key order: mentions by their key, runs by
  job after run id, and a None job after every job.
* ``nodes("NAMESPACE")`` is computed from the JOB and DATASET rows first seen before ``until``;
  ``text`` matches the row's name, which is "" for a namespace. NAMESPACE rows are never
  written: ``append`` and ``replace`` refuse them.
* ``limit=0`` is an empty page (with ``count=True``, the total alone).
* ``replace`` writes all of ``rows`` as ``append`` does, events and mentions included.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

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
    Role,
    Rows,
    RunRow,
    Touched,
    event_filter,
    job_order,
    key_of,
    latest_of,
    merge,
    page_of,
    sort_runs,
)
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.store import EventKind, FieldRef, Page
from lineage_sdk.config.schema import LineageConfig

__all__ = ["MemoryBackend", "memory_store"]

_R = TypeVar("_R")
_T = TypeVar("_T")
_RowKey = tuple[Any, ...]
_IOS: tuple[Io, Io] = ("in", "out")
_STORED_KINDS: tuple[NodeKind, NodeKind] = ("JOB", "DATASET")  # what a namespace holds
_KINDS: tuple[NodeKind, ...] = (*_STORED_KINDS, "SOURCE", "ALIAS")


class _Table(Generic[_R]):
    """The rows of one type by key, with secondary indexes that follow every change (a merge
    may move a non-key field such as a run's parent, so a changed row is indexed anew)."""

    __slots__ = ("_by", "_indexes", "rows")

    def __init__(self, **indexes: Callable[[_R], Iterable[Hashable]]) -> None:
        self.rows: dict[_RowKey, _R] = {}
        self._indexes = indexes
        self._by: dict[str, dict[Hashable, set[_RowKey]]] = {name: {} for name in indexes}

    def put(self, row: _R, *, first: bool = False) -> bool:
        """Merge ``row`` in (``first``: keep a stored row as it is); True if its key is new."""
        key = key_of(row)
        old = self.rows.get(key)
        if old is not None and first:
            return False
        new = row if old is None else merge(old, row)
        if new is old:
            return False
        if old is not None:
            self._unindex(key, old)
        self.rows[key] = new
        for name, index in self._indexes.items():
            by = self._by[name]
            for value in index(new):
                by.setdefault(value, set()).add(key)
        return old is None

    def pop(self, key: _RowKey) -> _R | None:
        row = self.rows.pop(key, None)
        if row is not None:
            self._unindex(key, row)
        return row

    def clear(self) -> None:
        self.rows.clear()
        for by in self._by.values():
            by.clear()

    def find(self, index: str, values: Iterable[Hashable]) -> set[_RowKey]:
        """The keys of the rows whose ``index`` holds any of ``values``."""
        by = self._by[index]
        found: set[_RowKey] = set()
        for value in values:
            found.update(by.get(value, ()))
        return found

    def _unindex(self, key: _RowKey, row: _R) -> None:
        for name, index in self._indexes.items():
            by = self._by[name]
            for value in index(row):
                keys = by.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del by[value]


def _narrow(picked: set[_RowKey] | None, found: set[_RowKey]) -> set[_RowKey]:
    """AND of two filters; None is "no filter yet"."""
    return found if picked is None else picked & found


def _discard(ordered: list[Any], item: Any) -> None:
    at = bisect_left(ordered, item)
    if at < len(ordered) and ordered[at] == item:
        del ordered[at]


def _namespace_span(ordered: list[Key], namespace: str) -> list[Key]:
    """The keys of one namespace in a sorted key list ("" is the least name, and every greater
    namespace sorts at or after ``namespace + "\\0"``)."""
    lo = bisect_left(ordered, (namespace, ""))
    return ordered[lo : bisect_left(ordered, (namespace + "\0", ""), lo)]


class MemoryBackend:
    """Every row in this process's memory, behind one lock: for tests and a database-free
    ``serve``, and the answers every other backend is held to."""

    name = "memory"
    #: What ``lineage-collector check`` shows as where the store writes.
    address = "memory"

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._events: _Table[EventRow] = _Table(
            run=lambda r: () if r.run_id is None else (r.run_id,),
            job=lambda r: () if r.job is None else (r.job,),
        )
        self._order: list[Position] = []  # every stored event's position, sorted
        self._mentions: _Table[MentionRow] = _Table(
            node=lambda r: ((r.kind, r.key),), source=lambda r: ((r.source, r.source_id),)
        )
        self._edges: _Table[EdgeRow] = _Table(
            job=lambda r: ((r.job, r.io),), dataset=lambda r: ((r.dataset, r.io),)
        )
        self._runs: _Table[RunRow] = _Table(
            job=lambda r: (r.job,),
            id=lambda r: (r.run_id,),
            parent=lambda r: () if r.parent_run_id is None else (r.parent_run_id,),
        )
        self._columns: _Table[ColumnEdgeRow] = _Table(
            output=lambda r: (r.output,),
            input=lambda r: (r.input,),
            dataset=lambda r: (r.output[:2], r.input[:2]),
            job=lambda r: (r.job,),
        )
        self._nodes: _Table[NodeRow] = _Table()
        self._node_keys: dict[NodeKind, list[Key]] = {kind: [] for kind in _KINDS}

    # -- lifecycle: nothing to reach, nothing to release -------------------------------------

    def open(self) -> None:
        with self._lock:
            return None

    def check(self) -> None:
        with self._lock:
            return None

    def close(self) -> None:
        """Keeps every row: a closed memory backend still answers, and closing twice is fine."""
        with self._lock:
            return None

    # -- writes ------------------------------------------------------------------------------

    def append(self, rows: Rows) -> None:
        with self._lock:
            self._write(rows)

    def delete(self, event_ids: Sequence[str]) -> list[EventRow]:
        with self._lock:
            removed: list[EventRow] = []
            for event_id in dict.fromkeys(event_ids):
                for key in self._mentions.find("source", (("event", event_id),)):
                    self._mentions.pop(key)
                row = self._events.pop((event_id,))
                if row is not None:
                    _discard(self._order, row.position)
                    removed.append(row)
            removed.sort(key=lambda r: r.position)
            return removed

    def replace(self, touched: Touched, rows: Rows) -> None:
        with self._lock:
            self._refuse_namespaces(rows)
            if touched.every:
                for table in (self._edges, self._columns, self._runs, self._mentions):
                    table.clear()
                self._nodes.clear()
                for ordered in self._node_keys.values():
                    ordered.clear()
            jobs, datasets = touched.jobs, touched.datasets
            for key in self._edges.find("job", [(job, io) for job in jobs for io in _IOS]):
                self._edges.pop(key)
            gone = self._columns.find("job", jobs)
            for key in self._columns.find("dataset", datasets):
                column = self._columns.rows[key]
                if column.job is None and column.output[:2] in datasets:
                    gone.add(key)
            for key in gone:
                self._columns.pop(key)
            for key in self._runs.find("id", touched.runs):
                self._runs.pop(key)
            for key in self._mentions.find("source", [("run", run) for run in touched.runs]):
                self._mentions.pop(key)
            for key in self._mentions.find("node", [("JOB", job) for job in jobs]):
                if self._mentions.rows[key].source == "job":
                    self._mentions.pop(key)
            for kind, keys in touched.nodes:
                for node in keys:
                    if self._nodes.pop((kind, node)) is not None:
                        _discard(self._node_keys[kind], node)
            self._write(rows)

    def _write(self, rows: Rows) -> None:
        self._refuse_namespaces(rows)
        for event in rows.events:
            if self._events.put(event, first=True):
                insort(self._order, event.position)
        for mention in rows.mentions:
            self._mentions.put(mention)
        for edge in rows.edges:
            self._edges.put(edge)
        for run in rows.runs:
            self._runs.put(run)
        for column in rows.columns:
            self._columns.put(column)
        for node in rows.nodes:
            if self._nodes.put(node):
                insort(self._node_keys[node.kind], node.key)

    @staticmethod
    def _refuse_namespaces(rows: Rows) -> None:
        """Checked before any write, so a refused batch leaves nothing half-written."""
        if any(node.kind not in _KINDS for node in rows.nodes):
            raise ValueError("NAMESPACE node rows are answered from JOB and DATASET rows")

    # -- reads -------------------------------------------------------------------------------

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
        with self._lock:
            found = self._edges.find("job" if end == "JOB" else "dataset", [(k, io) for k in keys])
            rows = [self._edges.rows[key] for key in found]
        rows = [r for r in rows if until is None or r.first_seen < until]
        rows.sort(key=lambda r: (r.job, r.dataset))
        return rows

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
        needle = None if text is None else text.lower()

        def wanted(row: NodeRow) -> bool:
            return (
                (namespace is None or row.key[0] == namespace)
                and (needle is None or needle in row.key[1].lower())
                and (until is None or row.first_seen < until)
            )

        with self._lock:
            if kind == "NAMESPACE":
                found: Iterable[NodeRow] = self._namespaces(keys, namespace, until)
            else:
                ordered = self._node_keys[kind]
                if keys is not None:
                    picked = sorted({k for k in keys if (kind, k) in self._nodes.rows})
                elif namespace is not None:
                    picked = _namespace_span(ordered, namespace)
                else:
                    picked = ordered
                found = (self._nodes.rows[(kind, k)] for k in picked)
            return page_of(filter(wanted, found), limit, offset, count)

    def _namespaces(
        self, keys: Collection[Key] | None, namespace: str | None, until: datetime | None
    ) -> list[NodeRow]:
        """One row per namespace holding a JOB or DATASET row first seen before ``until``."""
        if keys is not None:
            wanted: Iterable[str] = sorted({ns for ns, name in keys if name == ""})
        elif namespace is not None:
            wanted = (namespace,)
        else:
            wanted = sorted({key[0] for kind in _STORED_KINDS for key in self._node_keys[kind]})
        answer: list[NodeRow] = []
        for ns in wanted:
            first: datetime | None = None
            last: datetime | None = None
            holds: set[NodeKind] = set()
            for kind in _STORED_KINDS:
                for key in _namespace_span(self._node_keys[kind], ns):
                    row = self._nodes.rows[(kind, key)]
                    if until is not None and row.first_seen >= until:
                        continue
                    first = row.first_seen if first is None else min(first, row.first_seen)
                    last = row.last_seen if last is None else max(last, row.last_seen)
                    holds.add(kind)
            if first is not None and last is not None:
                answer.append(NodeRow("NAMESPACE", (ns, ""), first, last, frozenset(holds)))
        return answer

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
        with self._lock:
            picked: set[_RowKey] | None = None
            if jobs is not None:
                picked = self._runs.find("job", [job for job in jobs if job is not None])
            if run_ids is not None:
                picked = _narrow(picked, self._runs.find("id", run_ids))
            if parent is not None:
                picked = _narrow(picked, self._runs.find("parent", (parent,)))
            table = self._runs.rows
            rows = list(table.values()) if picked is None else [table[k] for k in picked]
            if latest is None:
                rows = [r for r in rows if until is None or r.first_event < until]
            else:
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
        # ids, runs and jobs are answered from the indexes below; the row test checks the rest
        wanted = event_filter(
            kinds=kinds,
            namespace=namespace,
            since=since,
            until=until,
            after=after,
            descending=descending,
        )

        with self._lock:
            table = self._events.rows
            picked: set[_RowKey] | None = None
            if ids is not None:
                picked = {(i,) for i in ids if (i,) in table}
            if run_ids is not None:
                picked = _narrow(picked, self._events.find("run", run_ids))
            if jobs is not None:
                picked = _narrow(picked, self._events.find("job", jobs))
            if picked is not None:
                positions = sorted(table[key].position for key in picked)
            else:  # the time bounds cut the sorted positions; the other filters then test rows
                order = self._order
                lo = 0 if since is None else bisect_left(order, (since, ""))
                hi = len(order) if until is None else bisect_left(order, (until, ""))
                if after is not None and not descending:
                    lo = max(lo, bisect_right(order, after))
                positions = order[lo:hi]
            found = filter(wanted, (table[(event_id,)] for _, event_id in positions))
            if descending:  # time descending, ties by id ascending: a stable reversed sort
                rows = list(found)
                rows.sort(key=lambda r: r.event_time, reverse=True)
                return page_of(rows, limit, offset, count)
            return page_of(found, limit, offset, count)

    def mentions(
        self,
        kind: NodeKind,
        keys: Collection[Key],
        *,
        roles: Collection[Role] | None = None,
        until: datetime | None = None,
        stated: bool = False,
    ) -> Iterable[MentionRow]:
        role_set = None if roles is None else frozenset(roles)
        with self._lock:
            found = self._mentions.find("node", [(kind, key) for key in keys])
            rows = [self._mentions.rows[key] for key in found]
        rows = [
            r
            for r in rows
            if (role_set is None or r.role in role_set)
            and (until is None or r.first_seen < until)
            and (r.detail or not stated)
        ]
        rows.sort(key=key_of)
        return rows

    def column_edges(
        self,
        *,
        outputs: Collection[FieldRef] | None = None,
        inputs: Collection[FieldRef] | None = None,
        datasets: Collection[Key] | None = None,
        until: datetime | None = None,
    ) -> Iterable[ColumnEdgeRow]:
        with self._lock:
            picked: set[_RowKey] | None = None
            if outputs is not None:
                picked = self._columns.find("output", outputs)
            if inputs is not None:
                picked = _narrow(picked, self._columns.find("input", inputs))
            if datasets is not None:
                picked = _narrow(picked, self._columns.find("dataset", datasets))
            table = self._columns.rows
            rows = list(table.values()) if picked is None else [table[k] for k in picked]
        rows = [r for r in rows if until is None or r.first_seen < until]
        rows.sort(key=lambda r: (r.output, r.input, job_order(r.job)))
        return rows


def memory_store(config: LineageConfig) -> EngineStore:
    """The ``memory`` store (entry point ``memory``): the engine over a :class:`MemoryBackend`,
    for ``lineage-collector serve`` without a database and for users' tests. Nothing persists;
    it takes no settings."""
    del config  # one process's memory: nothing to configure
    return EngineStore(MemoryBackend())
