"""Deletion: forget events, then derive again, once, what they touched.

Derived rows are joins over events and cannot be un-joined, so the rows of every key a deleted
event touched (its job and parent job, its run, the datasets it names) are derived again from
the events that remain, and put in place of the old ones with ``replace``. The cost follows the
touched keys, not the store.

A writer may append an event of a touched key between the read of the remaining events and the
``replace``: its rows would be replaced away. So after ``replace`` the engine reads the touched
keys' event ids again and appends the rows of any it did not derive (appends are joins, so
rows appended twice are no harm). Backends write an event's row no later than its derived rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from lineage_sdk.collector.backend import EventRow, LineageBackend, MentionRow, Rows, Touched
from lineage_sdk.collector.engine.derive import derive, record_of
from lineage_sdk.collector.store import event_mentions

__all__ = ["forget", "touched_by"]

#: How many times a deletion derives again when writers keep adding to the touched keys.
_RETRIES = 5


def touched_by(removed: Sequence[EventRow]) -> Touched:
    """The keys whose rows the removed events took part in."""
    jobs: set[tuple[str, str]] = set()
    datasets: set[tuple[str, str]] = set()
    runs: set[str] = set()
    for row in removed:
        named = event_mentions(orjson.loads(row.json))
        jobs.update(named.jobs, named.parent_jobs)
        datasets.update(named.datasets)
        if row.run_id:
            runs.add(row.run_id)
    return Touched(frozenset(jobs), frozenset(datasets), frozenset(runs))


def _remaining(backend: LineageBackend, touched: Touched) -> dict[str, EventRow]:
    """Every stored event that takes part in a row of a touched key: the touched jobs' and
    runs' events, and those of the runs (and run-less events) that name a touched dataset or
    have a touched job as their parent."""
    found: dict[str, EventRow] = {}
    runs: set[str] = set(touched.runs)
    ids: set[str] = set()
    named: list[MentionRow] = []
    if touched.jobs:
        found.update((r.event_id, r) for r in backend.events(jobs=touched.jobs))
        named += backend.mentions("JOB", touched.jobs, roles=["parent"])
    if touched.datasets:
        named += backend.mentions("DATASET", touched.datasets)
    for mention in named:
        (runs if mention.source == "run" else ids).add(mention.source_id)
    if runs:
        found.update((r.event_id, r) for r in backend.events(run_ids=runs))
    ids.difference_update(found)
    if ids:
        found.update((r.event_id, r) for r in backend.events(ids=ids))
    return found


def _of_touched(rows: Rows, touched: Touched) -> Rows:
    """The derived rows of ``rows`` that belong to a touched key."""
    jobs, datasets = touched.jobs, touched.datasets
    return Rows(
        edges=tuple(e for e in rows.edges if e.job in jobs),
        runs=tuple(r for r in rows.runs if r.run_id in touched.runs),
        mentions=tuple(m for m in rows.mentions if m.run_id in touched.runs),
        columns=tuple(
            c
            for c in rows.columns
            if c.job in jobs
            or (c.job is None and (c.output.namespace, c.output.dataset) in datasets)
        ),
        nodes=tuple(
            n
            for n in rows.nodes
            if (n.kind == "JOB" and n.key in jobs) or (n.kind == "DATASET" and n.key in datasets)
        ),
    )


def forget(backend: LineageBackend, event_ids: Sequence[str]) -> int:
    """Remove ``event_ids`` and make the touched rows what the remaining events derive; the
    number of events removed (deleting twice removes nothing the second time)."""
    ids = sorted(set(event_ids))
    if not ids:
        return 0
    removed = backend.delete(ids)
    touched = touched_by(removed)
    if not touched:
        return len(removed)
    remaining = _remaining(backend, touched)
    backend.replace(touched, _of_touched(derive(map(record_of, remaining.values())), touched))
    for _ in range(_RETRIES):
        now = _remaining(backend, touched)
        late = [row for event_id, row in now.items() if event_id not in remaining]
        if not late:
            break
        backend.append(_of_touched(derive(map(record_of, late)), touched))
        remaining = now
    return len(removed)
