"""The graph a release before the engine wrote, read for the upgrade (``PreEngineLayout``).

That release's ``graph`` store (``stores/graph.py`` until it is deleted) kept::

    (:Run {runId, state, stateRank, facets, facetsRank, startedAt, endedAt, firstEventAt,
           lastEventAt, jobKey, heartbeatS})-[:INSTANCE_OF]->(:Job {key, namespace, name,
           latestRunId, facets, facetsRank})
    (:Run)-[:READ|WROTE]->(:Dataset {key, namespace, name, facets, facetsRank})
    (:Run)-[:CHILD_OF]->(:Run)       (:Job)-[:CONSUMES|PRODUCES {firstSeen}]->(:Dataset)
    (:Dataset)-[:HAS_FIELD]->(:Field {key, namespace, dataset, name})-[:DERIVED_FROM]->(:Field)
    (:Event {eventId, json, runId, eventTime, eventType, kind, staticKey})

What it shares with the graph backend's model (:mod:`.graph_backend`), and how the two are told
apart while both are in one graph (the copy runs at the backend's open, before any read):

* ``Job`` and ``Dataset`` vertices are the *same* vertices: both models merge them on ``key``,
  :func:`~lineage_sdk.collector.stores.graph_runner.name_key` of the same names. The backend adds
  its properties (``firstSeen``, ``lastSeen``, ``holds``) and reads only vertices that have
  ``firstSeen``; :meth:`GraphPreEngineLayout.drop` removes the old properties (``latestRunId``,
  ``facets``, ``facetsRank``, which the backend never sets) and deletes the vertices that then
  hold no row (no ``firstSeen``) and link nothing, as the backend's own ``replace`` does.
* ``Event`` vertices share the label and the ``eventId`` key (unique on Neo4j in both models):
  an old one has no ``jobKey``, which every event of the backend has ('' without a job). The
  backend's append takes an old vertex over whole when it copies its event, so it is never two
  vertices; the old events left (those that are no valid event) go with :meth:`drop`.
* ``Run`` vertices share the label: an old one has no ``key``, which every run row of the
  backend has. On Neo4j the old ``lineage_run_key`` constraint made ``runId`` unique; the backend
  drops that one at open (a run of two jobs is two Run vertices there).
* The relationship types do not overlap: the old ``INSTANCE_OF``, ``CHILD_OF``, ``READ``,
  ``WROTE``, ``CONSUMES``, ``PRODUCES``, ``HAS_FIELD``, ``DERIVED_FROM``; the backend's ``READS``
  and ``WRITES``. ``Field`` is the old model's only; ``ColumnEdge`` and ``Mention`` the new's.

The copy's position is kept in a vertex of its own, ``(:PreEngineUpgrade {id: 'events'})``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from lineage_sdk.collector.records import MICROSECOND, format_time, micros, parse_time
from lineage_sdk.collector.store import RawEvent
from lineage_sdk.collector.stores.graph_runner import GraphRunner, detect_dialect

__all__ = [
    "OLD_RELATIONSHIPS",
    "GraphPreEngineLayout",
    "count_unkeyed_parents",
    "count_unnumbered_events",
    "key_parent_mentions",
    "number_event_times",
]

#: The old model's relationship types (none of them the backend's).
OLD_RELATIONSHIPS = (
    "INSTANCE_OF",
    "CHILD_OF",
    "READ",
    "WROTE",
    "CONSUMES",
    "PRODUCES",
    "HAS_FIELD",
    "DERIVED_FROM",
)
_OLD_EVENT = "MATCH (e:Event)\nWHERE e.jobKey IS NULL\n"
_COUNT = _OLD_EVENT + "RETURN count(e) AS n\n"
_SPAN = _OLD_EVENT + "RETURN min(e.eventTime) AS first, max(e.eventTime) AS last, count(e) AS n\n"
_COLS = "RETURN e.eventId AS id, e.eventTime AS t, e.json AS json\n"
# One time window, sorted alone (a page ordered over the whole remainder would sort it each
# time: quadratic on FalkorDB); every row checked against its window again here, as FalkorDB's
# index may drop a text range's upper bound or a second property's bound.
_WINDOW = (
    "MATCH (e:Event)\nWHERE e.eventTime >= $low AND e.eventTime < $high\n"
    "WITH e WHERE e.jobKey IS NULL\n" + _COLS + "ORDER BY t, id LIMIT $limit\n"
)
_AT = (
    "MATCH (e:Event)\nWHERE e.eventTime = $at\n"
    "WITH e WHERE e.eventId > $atId AND e.jobKey IS NULL\n" + _COLS + "ORDER BY id LIMIT $limit\n"
)
_MARKER_READ = "MATCH (m:PreEngineUpgrade {id: 'events'}) RETURN m.eventTime AS t, m.eventId AS id"
_MARKER_WRITE = "MERGE (m:PreEngineUpgrade {id: 'events'})\nSET m.eventTime = $t, m.eventId = $id\n"
_MARKER_DROP = "MATCH (m:PreEngineUpgrade) DELETE m"
# drop(): each statement removes at most $limit, and is repeated until it removes fewer.
_DROPS = (
    *(
        f"MATCH ()-[r:{rel}]->()\nWITH r LIMIT $limit\nDELETE r\nRETURN count(*) AS n\n"
        for rel in OLD_RELATIONSHIPS
    ),
    "MATCH (x:Run)\nWHERE x.key IS NULL\nWITH x LIMIT $limit\nDETACH DELETE x\n"
    "RETURN count(*) AS n\n",
    "MATCH (f:Field)\nWITH f LIMIT $limit\nDETACH DELETE f\nRETURN count(*) AS n\n",
    *(
        f"MATCH (n:{label})\n"
        "WHERE n.latestRunId IS NOT NULL OR n.facets IS NOT NULL OR n.facetsRank IS NOT NULL\n"
        "WITH n LIMIT $limit\nSET n.latestRunId = NULL, n.facets = NULL, n.facetsRank = NULL\n"
        "RETURN count(*) AS n\n"
        for label in ("Job", "Dataset")
    ),
    # A vertex that holds no row and links nothing is no vertex of the backend (its replace
    # deletes those it touches): an old one, now bare.
    *(
        f"MATCH (n:{label})\nWHERE n.firstSeen IS NULL AND NOT (n)--()\n"
        "WITH n LIMIT $limit\nDELETE n\nRETURN count(*) AS n\n"
        for label in ("Job", "Dataset")
    ),
    # The events last: while one is left, count_raw_events says so and the next open drops again.
    _OLD_EVENT + "WITH e LIMIT $limit\nDETACH DELETE e\nRETURN count(*) AS n\n",
)
# The old store's own schema (what the backend's does not serve); errors are ignored.
_OLD_SCHEMA = {
    "neo4j": (
        "DROP CONSTRAINT lineage_field_key IF EXISTS",
        "DROP INDEX lineage_event_static IF EXISTS",
    ),
    "opencypher": ("DROP INDEX ON :Field(key)", "DROP INDEX ON :Event(staticKey)"),
}
_DROP_BATCH = 10_000
# Events the backend wrote before it kept their times as numbers too (``eventUs``).
_UNNUMBERED = "MATCH (e:Event)\nWHERE e.jobKey IS NOT NULL AND e.eventUs IS NULL\n"
_NUMBER = "UNWIND $rows AS r\nMATCH (e:Event {eventId: r.id})\nSET e.eventUs = r.us\n"


def count_unnumbered_events(runner: GraphRunner) -> int:
    """The backend's events without ``eventUs`` (:func:`number_event_times` fills it)."""
    rows = runner.run(_UNNUMBERED + "RETURN count(e) AS n\n", None)
    return int(rows[0]["n"]) if rows else 0


def number_event_times(runner: GraphRunner, batch: int = _DROP_BATCH) -> int:
    """Gives each event the backend wrote before ``eventUs`` existed its time as a number,
    which the backend's time ranges read (stores/falkordb.py); how many it numbered."""
    done = 0
    read = _UNNUMBERED + "RETURN e.eventId AS id, e.eventTime AS t LIMIT $n"
    while rows := runner.run(read, {"n": batch}):
        numbered = [{"id": r["id"], "us": micros(datetime.fromisoformat(r["t"]))} for r in rows]
        runner.run(_NUMBER, {"rows": numbered})
        done += len(rows)
    return done


#: Parent mentions written before ``parentKey`` (the parent view reads a parent's children by it).
_UNKEYED_PARENTS = "MATCH (x:Mention)\nWHERE x.role = 'parent' AND x.parentKey IS NULL\n"
_KEY_PARENTS = (
    _UNKEYED_PARENTS + "WITH x LIMIT $n\nSET x.parentKey = x.nodeKey\nRETURN count(x) AS n"
)


def count_unkeyed_parents(runner: GraphRunner) -> int:
    """The backend's parent mentions without ``parentKey`` (:func:`key_parent_mentions`)."""
    rows = runner.run(_UNKEYED_PARENTS + "RETURN count(x) AS n\n", None)
    return int(rows[0]["n"]) if rows else 0


def key_parent_mentions(runner: GraphRunner, batch: int = _DROP_BATCH) -> int:
    """Gives each parent mention the backend wrote before ``parentKey`` existed that key (its
    ``nodeKey``): the index on it holds the parent mentions alone, where ``nodeKey``'s holds
    every mention of a job (docs/design/engine.md, section 24); how many it keyed."""
    done = 0
    while (rows := runner.run(_KEY_PARENTS, {"n": batch})) and int(rows[0]["n"]):
        done += int(rows[0]["n"])
    return done


class GraphPreEngineLayout:
    """The events of a graph the ``graph`` store of a release before the engine wrote (see the
    module docstring), read only; :meth:`drop` removes that model, never the backend's.

    ``runner`` is the runner or a function giving it (the backend's, which a reopen replaces).
    """

    def __init__(
        self,
        runner: GraphRunner | Callable[[], GraphRunner],
        *,
        drop_batch: int = _DROP_BATCH,
    ) -> None:
        self._runner = runner
        self._drop_batch = max(1, drop_batch)

    @property
    def runner(self) -> GraphRunner:
        return self._runner if isinstance(self._runner, GraphRunner) else self._runner()

    def count_raw_events(self) -> int:
        rows = self.runner.run(_COUNT, None)
        return int(rows[0]["n"]) if rows else 0

    def iter_raw_events(
        self, *, after: tuple[datetime, str] | None = None, batch_size: int = 1000
    ) -> Iterator[RawEvent]:
        """The old events by (event time, event id), after ``after``: one time window a query,
        as the old store read them (its ``iter_raw_events``): the window starts at the span's
        average width for one page, halves after a full page and doubles after a short one; the
        rest of an instant a full page cut is read by id."""
        limit = max(1, batch_size)
        span = self.runner.run(_SPAN, None)
        first = parse_time(span[0]["first"]) if span else None
        last = parse_time(span[0]["last"]) if span else None
        if first is None or last is None:
            return
        width = max((last - first) * limit / max(1, int(span[0]["n"])), MICROSECOND)
        stop = last + MICROSECOND  # half-open windows: the last event lies inside
        low = first
        position = after
        if position is not None:
            if position[0] >= stop:
                return
            low = max(low, position[0])
        while low < stop:
            if position is not None and low <= position[0]:
                at = format_time(position[0])
                rows = [
                    r
                    for r in self.runner.run(_AT, {"at": at, "atId": position[1], "limit": limit})
                    if r["t"] == at and r["id"] > position[1]
                ]
                yield from _events(rows)
                if len(rows) >= limit:
                    position = (position[0], rows[-1]["id"])
                    continue
                low = position[0] + MICROSECOND
            position = None
            high = min(low + width, stop)
            low_text, high_text = format_time(low), format_time(high)
            page = self.runner.run(_WINDOW, {"low": low_text, "high": high_text, "limit": limit})
            rows = [r for r in page if low_text <= r["t"] < high_text]
            yield from _events(rows)
            if len(page) >= limit and page[-1]["t"] < high_text:
                # A full page inside the window: more may follow, narrower.
                position = (parse_time(rows[-1]["t"]) or high, rows[-1]["id"])
                low = position[0]
                width = max(width / 2, MICROSECOND)
            else:
                low = high
                width *= 2

    def copied(self) -> tuple[datetime, str] | None:
        rows = self.runner.run(_MARKER_READ, None)
        when = parse_time(rows[0]["t"]) if rows else None
        return None if when is None else (when, str(rows[0]["id"]))

    def mark_copied(self, position: tuple[datetime, str]) -> None:
        self.runner.run(_MARKER_WRITE, {"t": format_time(position[0]), "id": position[1]})

    def drop(self) -> None:
        """Remove the old model in batches (resumable: each statement finds what is left), its
        events last, then its schema and the copy's marker."""
        runner = self.runner
        for statement in _DROPS:
            while True:
                rows = runner.run(statement, {"limit": self._drop_batch})
                if not rows or int(rows[0]["n"]) < self._drop_batch:
                    break
        for statement in _OLD_SCHEMA[detect_dialect(runner)]:
            try:
                runner.run(statement)
            except Exception:  # noqa: BLE001, S112 - not there: nothing to drop
                continue
        runner.run(_MARKER_DROP)


def _events(rows: list[dict[str, Any]]) -> Iterator[RawEvent]:
    for row in rows:
        when = parse_time(row["t"])
        if when is not None:  # every old Event vertex has its time
            yield RawEvent(str(row["id"]), when, str(row["json"]))
