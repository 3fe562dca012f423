"""Deletion: forget events, then derive again, once, what they changed.

Derived rows are joins over events and cannot be un-joined, but a join tells which of its
values a deleted event held. A stored row that the deleted events took no part in, or whose
every least and greatest value is still held by an event that remains (the deleted one's
strictly inside it), is what the remaining events derive: it stays as it is. Only the keys
(jobs, datasets, sources, aliases) with a row the deletion changed are replaced (``replace``),
and the touched runs, derived again from their own remaining events (a run's state ranks are
not times). So the cost follows what was deleted, not the store:

* a row whose first time (``first_seen``, ``declared``: event times, least wins) was a deleted
  event's takes the least time of the remaining events read *ahead* of it: events in position
  order from the least such time on, derived in pages (at most ``_AHEAD`` per deleted event),
  until each such time is found: the first found is the least, as events come by time, and
  none before that least time held one. Retention deletes the oldest events, so the next ones
  hold the new first times;
* a key with any other changed value (a greatest time, a rank, a row no event ahead holds) is
  derived again from every remaining event that takes part in its rows (:func:`_remaining`).

A key's rows (nodes, edges, column edges) are derived from events by key only
(:func:`~lineage_sdk.collector.engine.derive.derive_keyed`: the same keys and joins as
``derive``, without the events' text, statements, runs and mentions, about four fifths of its
cost): the deleted events' share, the events ahead, a key derived again, the events a writer
appended meanwhile; of the events ahead, only their rows' ids and least times, without making
the rows (:func:`~lineage_sdk.collector.engine.derive.keyed_least`). A run's rows (its row, its
mentions) come from its own events, derived whole. The events read ahead are remembered, so
derived, until the next deletion (:class:`ReadAhead`, which the engine keeps): retention's next
batch reads three quarters of them again, and parsing an event costs as much as deriving it
whole.

Every other value of a replaced key's rows is the stored one. The rules are the row types'
(:mod:`lineage_sdk.collector.backend`): the engine reads them from the fields, so a new row
type, node kind or mention role needs nothing here, as long as its least values are event times
(a key's new row type is ``derive_keyed``'s too, and ``keyed_least``'s, or its rows are never
found ahead and their keys are derived again: ``tests/stores_nosql/test_derive_rows.py``).

A writer through the same engine waits for a deletion batch: the engine holds its write lock
(:attr:`Engine.writing`) for the batch, as each append does, so the writer waits off the GIL
(as it waited on the database for the stores before the engine) instead of sharing the GIL with
the batch's Python, and the batch meets no append of its own engine. Another process (a fleet
shares one database) may append an event of a replaced key between the reads and the
``replace``: its rows would be replaced away. So the engine notes, before reading, the last
time a touched key was seen and how many events are not newer; after ``replace`` it derives the
events newer than that time and appends their rows to the replaced keys (appends are joins:
rows appended twice are no harm). If an event not newer was written meanwhile (the count
grew), it derives the replaced keys again from all their remaining events and appends those
rows. Backends write an event's row no later than its derived rows, in one transaction (sql,
memory); the document backend writes them one after the other, and an append caught between
the two when the count is taken is the one it can miss.
Two deletions at once from two processes are not supported (the count is not a fingerprint
then); one engine's deletions take turns (the lock).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import fields, replace
from datetime import datetime
from itertools import islice
from typing import Any

from lineage_sdk.collector.backend import (
    ColumnEdgeRow,
    EdgeRow,
    EventRow,
    Key,
    LineageBackend,
    MentionRow,
    NodeKind,
    NodeRow,
    Role,
    Rows,
    RunRow,
    Touched,
    key_of,
)
from lineage_sdk.collector.engine.derive import (
    LeastTimes,
    alias_of_key,
    child_of,
    derive,
    derive_keyed,
    event_alias_keys,
    event_sources,
    keyed_least,
    record_of,
    source_of_key,
)
from lineage_sdk.collector.engine.lineage_facet import facet_lineage
from lineage_sdk.collector.records import MICROSECOND
from lineage_sdk.collector.store import LineageRecord, event_mentions

__all__ = ["ReadAhead", "forget", "touched_by"]

#: Remaining events read ahead of the deleted ones, at most, per deleted event, to find the new
#: first times of the rows they began (in pages of as many as were deleted).
_AHEAD = 6
#: Fewer deleted events than this are not worth a read ahead: a range read costs SecantusDB a
#: time window of about 1,000 events however few it returns, so a batch of ten read ahead is
#: dozens of events read per event deleted (tests/stores_nosql/test_retention.py bounds them).
#: Their keys are derived again from their events, as every key was before the read ahead.
_AHEAD_LEAST = 100
_NAMING: tuple[Role, ...] = ("input", "output", "dataset", "parent", "alias")

#: A row's owner: the :class:`Touched` field that removes it, and the key there.
Owner = tuple[str, Any]
_NODE_FIELD: dict[NodeKind, str] = {
    "JOB": "jobs",
    "DATASET": "datasets",
    "SOURCE": "sources",
    "ALIAS": "aliases",
}


def touched_by(removed: Sequence[LineageRecord]) -> Touched:
    """The keys whose rows the removed events took part in."""
    jobs: set[tuple[str, str]] = set()
    datasets: set[tuple[str, str]] = set()
    runs: set[str] = set()
    sources: set[tuple[str, str]] = set()
    aliases: set[tuple[str, str]] = set()
    for record in removed:
        named = event_mentions(record.event)
        jobs.update(named.jobs, named.parent_jobs)
        datasets.update(named.datasets)
        facet = facet_lineage(record)  # another job's edges, datasets named only there
        for job, dataset, _ in facet.edges if facet is not None else ():
            jobs.add(job)
            datasets.add(dataset)
        sources.update(event_sources(record))
        aliases.update(event_alias_keys(record))
        if record.run_id:
            runs.add(record.run_id)
    return Touched(
        frozenset(jobs),
        frozenset(datasets),
        frozenset(runs),
        sources=frozenset(sources),
        aliases=frozenset(aliases),
    )


def _remaining(backend: LineageBackend, touched: Touched) -> dict[str, EventRow]:
    """Every stored event that takes part in a row of a touched key: the touched jobs' and
    runs' events, those of the runs (and run-less events) that name a touched dataset (or a
    touched source's or alias's dataset), and those of the jobs whose events name a touched
    job as their parent."""
    found: dict[str, EventRow] = {}
    runs: set[str] = set(touched.runs)
    ids: set[str] = set()
    children: set[Key] = set()
    named: list[MentionRow] = []
    datasets = touched.datasets | {source_of_key(key)[0] for key in touched.sources}
    datasets |= {alias_of_key(key)[1] for key in touched.aliases}
    if touched.jobs:
        found.update((r.event_id, r) for r in backend.events(jobs=touched.jobs))
        # as a parent, or as a job another job's ``lineage`` facet states edges of
        named += backend.mentions("JOB", touched.jobs, roles=["parent", "input", "output"])
    if datasets:
        # not the events' statements: their events are those of the runs and run-less events
        named += backend.mentions("DATASET", datasets, roles=_NAMING)
    for mention in named:
        if mention.source == "job":
            children.add(child_of(mention))
        else:
            (runs if mention.source == "run" else ids).add(mention.source_id)
    children.difference_update(touched.jobs)  # read above
    if children:
        found.update((r.event_id, r) for r in backend.events(jobs=children))
    if runs:
        found.update((r.event_id, r) for r in backend.events(run_ids=runs))
    ids.difference_update(found)
    if ids:
        found.update((r.event_id, r) for r in backend.events(ids=ids))
    return found


def _owner(row: Any) -> Owner | None:
    """The touched key a derived row belongs to (what ``replace`` removes it with); None for a
    row no ``replace`` removes (an event's own mention, a node of a kind without a key set)."""
    if isinstance(row, EdgeRow):
        return ("jobs", row.job)
    if isinstance(row, ColumnEdgeRow):
        if row.job is not None:
            return ("jobs", row.job)
        return ("datasets", (row.output.namespace, row.output.dataset))
    if isinstance(row, NodeRow):
        field = _NODE_FIELD.get(row.kind)
        return None if field is None else (field, row.key)
    if isinstance(row, RunRow):
        return ("runs", row.run_id)
    if isinstance(row, MentionRow) and row.source == "run":
        return ("runs", row.source_id)
    if isinstance(row, MentionRow) and row.source == "job":  # a child, of its parent's key
        return ("jobs", row.key)
    return None


def _keys(touched: Touched) -> dict[str, frozenset[Any]]:
    """The touched keys by the :class:`Touched` field that holds them."""
    return {_NODE_FIELD[kind]: keys for kind, keys in touched.nodes} | {"runs": touched.runs}


def _derived(rows: Rows) -> Iterable[Any]:
    """Every derived row of ``rows`` (not its events)."""
    return (*rows.edges, *rows.runs, *rows.columns, *rows.nodes, *rows.mentions)


def _rows(items: Iterable[Any]) -> Rows:
    """Derived rows, by type."""
    by: dict[type, list[Any]] = {}
    for row in items:
        by.setdefault(type(row), []).append(row)
    return Rows(
        edges=tuple(by.get(EdgeRow, ())),
        runs=tuple(by.get(RunRow, ())),
        columns=tuple(by.get(ColumnEdgeRow, ())),
        nodes=tuple(by.get(NodeRow, ())),
        mentions=tuple(by.get(MentionRow, ())),
    )


def _of_touched(rows: Rows, touched: Touched) -> Rows:
    """The derived rows of ``rows`` that belong to a touched key."""
    keys = _keys(touched)
    return _rows(r for r in _derived(rows) if (o := _owner(r)) is not None and o[1] in keys[o[0]])


def _derive_touched(records: Sequence[LineageRecord], touched: Touched) -> Rows:
    """``_of_touched(derive(records), touched)``, at less cost: a touched key's rows from every
    record derived by key only (:func:`derive_keyed`), a touched run's rows (its row, its
    mentions) from its own records derived whole."""
    keys = _of_touched(derive_keyed(records), replace(touched, runs=frozenset()))
    own = [record for record in records if record.run_id in touched.runs]
    runs = _of_touched(derive(own), Touched(runs=touched.runs)) if own else Rows()
    return _rows([*_derived(keys), *_derived(runs)])


def _touched(owners: Iterable[Owner], runs: frozenset[str] = frozenset()) -> Touched:
    keys: dict[str, set[Any]] = {field: set() for field in _NODE_FIELD.values()}
    for field, key in owners:
        keys[field].add(key)
    return Touched(
        frozenset(keys["jobs"]),
        frozenset(keys["datasets"]),
        runs,
        sources=frozenset(keys["sources"]),
        aliases=frozenset(keys["aliases"]),
    )


def _rid(row: Any) -> tuple[str, tuple[Any, ...]]:
    return (type(row).__name__, key_of(row))


def _stored(backend: LineageBackend, owners: set[Owner]) -> dict[tuple[str, Any], Any]:
    """Every stored row of these jobs, datasets and sources, by type and key (a job's column
    edges lie on the datasets of its edges; one without a job, on its output dataset; its
    ``job`` mentions as a parent, on it)."""
    jobs = [key for field, key in owners if field == "jobs"]
    found: list[Any] = []
    if jobs:
        found += backend.edges("JOB", jobs, "in")
        found += backend.edges("JOB", jobs, "out")
        found += backend.mentions("JOB", jobs, roles=["parent"])
    for kind, field in _NODE_FIELD.items():
        keys = [key for f, key in owners if f == field]
        if keys:
            found += backend.nodes(kind, keys=keys)
    around = {e.dataset for e in found if isinstance(e, EdgeRow)}
    around.update(key for field, key in owners if field == "datasets")
    if around:
        found += backend.column_edges(datasets=around)
    return {_rid(r): r for r in found if _owner(r) in owners}


def _changed(stored: Any, gone: Any) -> list[str] | None:
    """Which values of ``stored`` a deleted event held, given the join of the deleted events'
    rows of its key (``gone``): [] none (the row stays), the names of least times (found
    ahead), or None when another value was (the key is derived again)."""
    least: list[str] = []
    for f in fields(stored):
        rule = f.metadata.get("merge", "first")
        old, new = getattr(stored, f.name), getattr(gone, f.name)
        if rule == "key" or new is None or (rule == "union" and not new):
            continue
        if old is None or rule not in ("min", "max", "ranked"):
            return None
        if (rule == "min" and new > old) or (rule == "max" and new < old):
            continue
        if rule == "ranked" and new.rank < old.rank:
            continue
        if rule != "min" or not isinstance(new, datetime):
            return None
        least.append(f.name)
    return least


class ReadAhead:
    """The events a deletion read ahead, each with the least times of its rows of keys (those of
    ``derive_keyed`` of it alone, by row id, made without the rows: :func:`keyed_least`),
    remembered until the next deletion (:meth:`turn`): retention's next batch reads three
    quarters of them again, and parsing an event costs as much as deriving it whole. An event is
    known by its id and its text (one text derives one set of rows), so a stale entry is never
    used. The engine keeps one (:meth:`Engine.delete_events`)."""

    __slots__ = ("_kept", "_used")

    def __init__(self) -> None:
        self._kept: dict[str, tuple[str, list[LeastTimes]]] = {}
        self._used: dict[str, tuple[str, list[LeastTimes]]] = {}

    def least(self, events: Iterable[EventRow]) -> Iterator[LeastTimes]:
        """Each event's rows of keys: their ids with their least times (an event twice: its
        rows twice, which a join does not mind)."""
        kept, used = self._kept, self._used
        for event in events:
            known = used.get(event.event_id) or kept.get(event.event_id)
            if known is None or known[0] != event.json:
                known = (event.json, keyed_least(record_of(event)))
            used[event.event_id] = known
            yield from known[1]

    def turn(self) -> None:
        """Remember only what was read since the last turn."""
        self._kept, self._used = self._used, {}


def _ahead(
    backend: LineageBackend,
    pending: dict[tuple[str, Any], tuple[Any, list[str]]],
    size: int,
    until: datetime,
    memo: ReadAhead,
) -> tuple[dict[tuple[str, Any], Any], set[Owner]]:
    """The new least times of ``pending`` rows (the stored row, the names of its least times a
    deleted event held), from the remaining events read ahead in position order (see the
    module), one read of ``_AHEAD`` times ``size`` events at most, derived in pages of ``size``
    (the document backend reads on only as the pages are taken; pages that doubled read a
    third more than retention needs), none at or after ``until`` (past the touched keys' last
    time: a range read with both ends needs no search for its end); the rows found, and the
    owners of those not found. A row is found once an event ahead holds each of its names:
    events come by time, so the first to hold one holds its least."""
    found: dict[tuple[str, Any], Any] = {}
    since = min(getattr(row, name) for row, names in pending.values() for name in names)
    least: dict[tuple[str, Any], dict[str, Any]] = {}
    ahead = iter(backend.events(since=since, until=until, limit=_AHEAD * size))
    while pending and (page := list(islice(ahead, size))):
        for rid, times in memo.least(page):
            entry = pending.get(rid)
            if entry is None:
                continue
            row, names = entry
            have = least.setdefault(rid, {})
            for name in names:
                value = times.get(name)
                if value is not None and (name not in have or value < have[name]):
                    have[name] = value
            if len(have) == len(names):
                found[rid] = replace(row, **have)
                del pending[rid]
    return found, {o for row, _ in pending.values() if (o := _owner(row)) is not None}


def _settle(
    backend: LineageBackend,
    touched: Touched,
    removed: Sequence[LineageRecord],
    newest: datetime,
    memo: ReadAhead,
) -> tuple[Touched, Rows]:
    """What to ``replace`` after ``removed`` went: the keys whose rows changed (with every
    touched run) and their rows as the remaining events derive them (see the module)."""
    keys = _keys(touched)
    gone: dict[tuple[str, Any], tuple[Any, Owner]] = {}
    for row in _derived(derive_keyed(removed)):  # a run's rows are derived again whole
        owner = _owner(row)
        if owner is not None and owner[0] != "runs" and owner[1] in keys[owner[0]]:
            gone[_rid(row)] = (row, owner)
    stored = _stored(backend, {owner for _, owner in gone.values()})
    slow: set[Owner] = set()
    pending: dict[tuple[str, Any], tuple[Any, list[str], Owner]] = {}
    for rid, (row, owner) in gone.items():
        old = stored.get(rid)
        names = None if old is None else _changed(old, row)
        if names is None:
            slow.add(owner)
        elif names:
            pending[rid] = (old, names, owner)
    dirty = slow | {owner for _, _, owner in pending.values()}
    ahead = {rid: (old, names) for rid, (old, names, o) in pending.items() if o not in slow}
    if ahead and len(removed) >= _AHEAD_LEAST:
        found, missed = _ahead(backend, ahead, len(removed), newest + MICROSECOND, memo)
    else:
        found, missed = {}, dirty - slow
    slow |= missed
    kept = dirty - slow
    out = [found.get(rid, row) for rid, row in stored.items() if _owner(row) in kept]
    runs = list(backend.events(run_ids=touched.runs)) if touched.runs else []
    out += _derived(_of_touched(derive(map(record_of, runs)), Touched(runs=touched.runs)))
    if slow:
        again = _touched(slow)
        remaining = _remaining(backend, again).values()
        out += _derived(_of_touched(derive_keyed(map(record_of, remaining)), again))
    return _touched(dirty, touched.runs), _rows(out)


def _mark(
    backend: LineageBackend, touched: Touched, removed: Sequence[LineageRecord]
) -> tuple[datetime, int, int]:
    """A time, how many events are not newer, and how many there are (see the module): the
    last time a touched key was seen, so that no event of theirs is newer and the events read
    after ``replace`` are about the new ones (any time would be right; asking for the newest
    event needs a range read with an open end, which SecantusDB answers by reading it all)."""
    at = max(record.event_time for record in removed)
    for kind, keys in touched.nodes:
        if keys:
            at = max([at, *(node.last_seen for node in backend.nodes(kind, keys=keys))])
    older = backend.events(until=at + MICROSECOND, limit=0, count=True).total
    return at, older, backend.events(limit=0, count=True).total


def _catch_up(backend: LineageBackend, touched: Touched, mark: tuple[datetime, int, int]) -> None:
    """Append the rows of the replaced keys that events written since ``mark`` derive."""
    at, older, every = mark
    late: list[EventRow]
    if backend.events(limit=0, count=True).total == every:
        return  # none written
    if backend.events(until=at + MICROSECOND, limit=0, count=True).total == older:
        late = list(backend.events(since=at + MICROSECOND))
    else:  # an event not newer than the mark was written meanwhile: derive the keys again
        late = list(_remaining(backend, touched).values())
    if late:
        backend.append(_derive_touched([record_of(row) for row in late], touched))


def forget(backend: LineageBackend, event_ids: Sequence[str], memo: ReadAhead | None = None) -> int:
    """Remove ``event_ids`` and make the touched rows what the remaining events derive; the
    number of events removed (deleting twice removes nothing the second time). ``memo``: the
    events the deletion before this one read ahead, derived (retention deletes in batches)."""
    ids = sorted(set(event_ids))
    if not ids:
        return 0
    removed = [record_of(row) for row in backend.delete(ids)]  # each parsed once
    touched = touched_by(removed)
    if not touched:
        return len(removed)
    mark = _mark(backend, touched, removed)
    memo = ReadAhead() if memo is None else memo
    try:
        settled, rows = _settle(backend, touched, removed, mark[0], memo)
    finally:
        memo.turn()
    if settled:
        backend.replace(settled, rows)
        _catch_up(backend, settled, mark)
    return len(removed)
