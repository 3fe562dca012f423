"""How the graph backend phrases a few reads for one server: the seam for per-server tactics.

Its own module so that a server's module (:mod:`.falkordb`) and the backend both import it and
neither imports the other (the sibling modules of ``stores`` form no import cycle).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["INDEXED", "NEO4J", "OPENCYPHER_SCHEMA", "GraphTactics"]

#: (label, property, unique): every read of the backend matches on one of these.
INDEXED = (
    ("Job", "key", True),
    ("Dataset", "key", True),
    ("Source", "key", True),
    ("Alias", "key", True),
    ("Run", "key", True),
    ("Event", "eventId", True),
    ("ColumnEdge", "key", True),
    ("Mention", "key", True),
    ("Run", "runId", False),
    ("Run", "jobKey", False),
    ("Run", "parentRunId", False),
    ("Event", "runId", False),
    ("Event", "jobKey", False),
    ("Event", "eventTime", False),  # the upgrade's windows over a pre-engine graph (graph_legacy)
    ("Event", "eventUs", False),  # the time as a number: FalkorDB's text ranges are wrong
    ("Event", "kind", False),  # with jobKey: a job's JobEvents among its run events
    ("ColumnEdge", "outKey", False),
    ("ColumnEdge", "inKey", False),
    ("ColumnEdge", "outDs", False),
    ("ColumnEdge", "inDs", False),
    ("ColumnEdge", "jobKey", False),
    ("Mention", "nodeKey", False),
    ("Mention", "parentKey", False),  # a parent's children: the parent mentions alone
    ("Mention", "sourceId", False),
)
_NEO4J_SCHEMA = tuple(
    f"CREATE CONSTRAINT lineage_{lbl.lower()}_{p.lower()} IF NOT EXISTS "
    f"FOR (n:{lbl}) REQUIRE n.{p} IS UNIQUE"
    if unique
    else f"CREATE INDEX lineage_{lbl.lower()}_{p.lower()} IF NOT EXISTS FOR (n:{lbl}) ON (n.{p})"
    for lbl, p, unique in INDEXED
)
#: openCypher servers without constraints (FalkorDB): plain indexes.
OPENCYPHER_SCHEMA = tuple(f"CREATE INDEX FOR (n:{lbl}) ON (n.{p})" for lbl, p, _ in INDEXED)


@dataclass(frozen=True, slots=True)
class GraphTactics:
    """How a few reads are phrased for one server. These defaults suit Neo4j, whose planner
    streams an index in order and honours every predicate; a server that needs otherwise gets
    an instance of its own, with the measurement that justifies it (``stores/falkordb.py``)."""

    name: str = "neo4j"
    #: Index statements run at ``open`` (errors, such as "already indexed", are ignored).
    schema: tuple[str, ...] = _NEO4J_SCHEMA
    #: Events by time alone are read in time windows sorted one at a time, each row checked
    #: against its window (:func:`~.falkordb.windowed_events`), instead of one ``ORDER BY ..
    #: SKIP .. LIMIT`` over the range.
    window_events: bool = False
    #: Runs of jobs matched by ``jobKey IN $keys`` instead of ``UNWIND`` and an equality.
    runs_by_in: bool = False
    #: Time bounds of derived rows are checked again here after the server applied them.
    recheck: bool = False


NEO4J = GraphTactics()
