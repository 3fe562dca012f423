"""The ``graph`` store: OpenLineage events projected into a property graph, for impact analysis.

Model (see docs/stores.md)::

    (:Run {runId, state, startedAt, endedAt, facets})-[:INSTANCE_OF]->(:Job {namespace, name, facets})
    (:Run)-[:READ]->(:Dataset {namespace, name, facets})     (:Run)-[:WROTE]->(:Dataset)
    (:Run)-[:CHILD_OF]->(:Run)                                 from the ``parent`` run facet
    (:Job)-[:CONSUMES]->(:Dataset)  (:Job)-[:PRODUCES]->(:Dataset)   job level, what lineage walks
    (:Dataset)-[:HAS_FIELD]->(:Field)-[:DERIVED_FROM]->(:Field)     from the ``columnLineage`` facet
    (:Event {eventId, runId, eventTime, json})                      the raw events, for events_of_run

Why it is written this way:

* Every statement is a constant string; event data only ever travels as parameters, batched with
  ``UNWIND``. Facets are JSON strings: not every server stores maps as properties.
* Events arrive out of order and more than once, so every property is a pure function of the *set*
  of events seen: ``startedAt`` is the minimum START time, ``endedAt`` the maximum terminal time,
  ``state`` the event with the greatest rank (terminal beats START/RUNNING, then later time, then
  event id), facets those of the latest event that carried any. Each value carries its rank and is
  only replaced by a greater one, so replays and reorderings converge.
* Times are stored as fixed-width UTC strings (``2024-05-01T12:00:00.000000Z``), which sort
  correctly as strings: not every Bolt server accepts temporal parameters.
* Indexes/constraints are created at start-up in the server's dialect: Neo4j answers
  ``dbms.components()`` and gets ``CREATE CONSTRAINT ... IF NOT EXISTS``; a server that does not
  (FalkorDB, other openCypher servers) gets ``CREATE INDEX FOR (n:Label) ON (n.key)``.
* ``database`` is only passed to the driver when configured (some Bolt servers misroute it).
* Lineage walks the job-level edges breadth-first with one indexed query per job hop, so a depth-10
  question costs ten small round trips, never a path enumeration.
* Failures raise :class:`~lineage_sdk.exceptions.StoreError`, retryable, after short timeouts and no
  driver-side retrying: the collector owns retries.
"""

from __future__ import annotations

import abc
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from lineage_sdk.collector.store import (
    BaseLineageStore,
    DatasetRef,
    Direction,
    JobSummary,
    LineageEdge,
    LineageGraph,
    LineageNode,
    LineageRecord,
    NodeType,
    RunSummary,
    node_id,
    parse_node_id,
)
from lineage_sdk.config.schema import ConnectionConfig, LineageConfig
from lineage_sdk.exceptions import ConfigError, StoreError

__all__ = [
    "GraphLineageStore",
    "GraphRunner",
    "Neo4jRunner",
    "create_store",
    "format_time",
    "parse_time",
]

_log = logging.getLogger(__name__)

STORE_NAME = "graph"
TERMINAL_STATES = frozenset({"COMPLETE", "FAIL", "ABORT"})
_STATE_ORDER = {"START": 1, "RUNNING": 2, "COMPLETE": 3, "FAIL": 3, "ABORT": 3}


# ------------------------------------------------------------------------------------------ helpers


def format_time(value: datetime) -> str:
    """Fixed-width UTC text that sorts like the instant it names (naive values are taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    v = value.astimezone(UTC)
    return (f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}"
            f".{v.microsecond:06d}Z")


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _json(value: Any) -> str:
    """Lossless JSON text; orjson for speed, stdlib for what orjson refuses (ints beyond 64 bits)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _facets_json(facets: Any) -> str | None:
    """None when there is nothing to say, so an event without facets never erases richer ones."""
    if not isinstance(facets, Mapping) or not facets:
        return None
    return _json(dict(facets))


def _section(event: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = event.get(key)
    return value if isinstance(value, Mapping) else {}


# ------------------------------------------------------------------------------------------ runners


class GraphRunner(abc.ABC):
    """Runs one parameterised Cypher statement and returns its rows as dicts.

    The seam between the store and a server: :class:`Neo4jRunner` (the official driver over Bolt)
    is the default; a test harness may inject another (see tests/servers.py). Implementations raise
    :class:`StoreError` on any failure.
    """

    @abc.abstractmethod
    def run(self, query: str, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Execute ``query`` with ``parameters`` in its own transaction."""

    @abc.abstractmethod
    def verify(self) -> None:
        """Raise StoreError unless the server answers."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections."""


class Neo4jRunner(GraphRunner):
    """The official neo4j driver: one long-lived driver, short timeouts, no driver-side retries."""

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
            raise ConfigError("connections.<graph_connection_name>.uri", _redact(connection.uri),
                              f"not a usable Bolt URI ({type(exc).__name__})") from exc

    def run(self, query: str, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        neo4j = self._neo4j
        kwargs: dict[str, Any] = {"database_": self._database} if self._database else {}
        try:
            result = self._driver.execute_query(
                neo4j.Query(query),  # type: ignore[arg-type]  # our statements are constants
                dict(parameters or {}),
                routing_=neo4j.RoutingControl.WRITE,
                **kwargs,
            )
        except (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, OSError) as exc:
            raise StoreError(self._name, f"{type(exc).__name__}: {_short(exc)}") from exc
        return [record.data() for record in result.records]

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


def _redact(uri: str) -> str:
    """A URI with any password replaced, for error messages."""
    scheme, sep, rest = uri.partition("://")
    if not sep or "@" not in rest:
        return uri
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


# --------------------------------------------------------------------------------------- statements

_NEO4J_SCHEMA = (
    "CREATE CONSTRAINT lineage_job_key IF NOT EXISTS FOR (n:Job) REQUIRE (n.namespace, n.name) IS UNIQUE",
    "CREATE CONSTRAINT lineage_dataset_key IF NOT EXISTS FOR (n:Dataset) REQUIRE (n.namespace, n.name) IS UNIQUE",
    "CREATE CONSTRAINT lineage_run_key IF NOT EXISTS FOR (n:Run) REQUIRE n.runId IS UNIQUE",
    "CREATE CONSTRAINT lineage_event_key IF NOT EXISTS FOR (n:Event) REQUIRE n.eventId IS UNIQUE",
    "CREATE INDEX lineage_event_run IF NOT EXISTS FOR (n:Event) ON (n.runId)",
    "CREATE INDEX lineage_field_key IF NOT EXISTS FOR (n:Field) ON (n.namespace, n.dataset, n.name)",
)
# openCypher servers without constraints (FalkorDB): plain indexes; "already indexed" is fine.
_OPENCYPHER_SCHEMA = (
    "CREATE INDEX FOR (n:Job) ON (n.namespace, n.name)",
    "CREATE INDEX FOR (n:Dataset) ON (n.namespace, n.name)",
    "CREATE INDEX FOR (n:Run) ON (n.runId)",
    "CREATE INDEX FOR (n:Event) ON (n.eventId)",
    "CREATE INDEX FOR (n:Event) ON (n.runId)",
    "CREATE INDEX FOR (n:Field) ON (n.namespace, n.dataset, n.name)",
)

_MERGE_JOBS = """
UNWIND $rows AS r
MERGE (j:Job {namespace: r.namespace, name: r.name})
WITH j, r, (r.facets IS NOT NULL AND (j.facetsRank IS NULL OR r.rank > j.facetsRank)) AS newer
SET j.facets = CASE WHEN newer THEN r.facets ELSE j.facets END,
    j.facetsRank = CASE WHEN newer THEN r.rank ELSE j.facetsRank END
"""

_MERGE_DATASETS = """
UNWIND $rows AS r
MERGE (d:Dataset {namespace: r.namespace, name: r.name})
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
    x.startedAt = CASE WHEN r.startedAt IS NOT NULL AND (x.startedAt IS NULL OR r.startedAt < x.startedAt)
                       THEN r.startedAt ELSE x.startedAt END,
    x.endedAt = CASE WHEN r.endedAt IS NOT NULL AND (x.endedAt IS NULL OR r.endedAt > x.endedAt)
                     THEN r.endedAt ELSE x.endedAt END,
    x.firstEventAt = CASE WHEN x.firstEventAt IS NULL OR r.firstEventAt < x.firstEventAt
                          THEN r.firstEventAt ELSE x.firstEventAt END,
    x.lastEventAt = CASE WHEN x.lastEventAt IS NULL OR r.lastEventAt > x.lastEventAt
                         THEN r.lastEventAt ELSE x.lastEventAt END,
    x.jobNamespace = r.jobNamespace,
    x.jobName = r.jobName
WITH x, r
MERGE (j:Job {namespace: r.jobNamespace, name: r.jobName})
MERGE (x)-[:INSTANCE_OF]->(j)
"""

_MERGE_PARENTS = """
UNWIND $rows AS r
MERGE (x:Run {runId: r.runId})
MERGE (p:Run {runId: r.parentRunId})
MERGE (x)-[:CHILD_OF]->(p)
WITH p, r WHERE r.parentJobName IS NOT NULL AND r.parentJobNamespace IS NOT NULL
MERGE (pj:Job {namespace: r.parentJobNamespace, name: r.parentJobName})
MERGE (p)-[:INSTANCE_OF]->(pj)
SET p.jobNamespace = r.parentJobNamespace, p.jobName = r.parentJobName
"""

_MERGE_READ = """
UNWIND $rows AS r
MERGE (x:Run {runId: r.runId})
MERGE (d:Dataset {namespace: r.namespace, name: r.name})
MERGE (x)-[:READ]->(d)
"""

_MERGE_WROTE = """
UNWIND $rows AS r
MERGE (x:Run {runId: r.runId})
MERGE (d:Dataset {namespace: r.namespace, name: r.name})
MERGE (x)-[:WROTE]->(d)
"""

_MERGE_CONSUMES = """
UNWIND $rows AS r
MERGE (j:Job {namespace: r.jobNamespace, name: r.jobName})
MERGE (d:Dataset {namespace: r.namespace, name: r.name})
MERGE (j)-[:CONSUMES]->(d)
"""

_MERGE_PRODUCES = """
UNWIND $rows AS r
MERGE (j:Job {namespace: r.jobNamespace, name: r.jobName})
MERGE (d:Dataset {namespace: r.namespace, name: r.name})
MERGE (j)-[:PRODUCES]->(d)
"""

_MERGE_FIELDS = """
UNWIND $rows AS r
MERGE (od:Dataset {namespace: r.outNamespace, name: r.outDataset})
MERGE (idd:Dataset {namespace: r.inNamespace, name: r.inDataset})
MERGE (o:Field {namespace: r.outNamespace, dataset: r.outDataset, name: r.outField})
MERGE (i:Field {namespace: r.inNamespace, dataset: r.inDataset, name: r.inField})
MERGE (od)-[:HAS_FIELD]->(o)
MERGE (idd)-[:HAS_FIELD]->(i)
MERGE (o)-[:DERIVED_FROM]->(i)
"""

_MERGE_EVENTS = """
UNWIND $rows AS r
MERGE (e:Event {eventId: r.eventId})
ON CREATE SET e.json = r.json, e.runId = r.runId, e.eventTime = r.eventTime,
              e.eventType = r.eventType, e.kind = r.kind
"""

# Lineage steps: from a frontier of datasets, the jobs one hop away and those jobs' datasets on
# the far side; from a frontier of jobs, their datasets on the far side.
_UP_FROM_DATASETS = """
UNWIND $keys AS k
MATCH (d:Dataset {namespace: k.namespace, name: k.name})
MATCH (j:Job)-[:PRODUCES]->(d)
OPTIONAL MATCH (j)-[:CONSUMES]->(o:Dataset)
RETURN d.namespace AS dns, d.name AS dn, j.namespace AS jns, j.name AS jn, o.namespace AS ons, o.name AS on
"""
_DOWN_FROM_DATASETS = """
UNWIND $keys AS k
MATCH (d:Dataset {namespace: k.namespace, name: k.name})
MATCH (j:Job)-[:CONSUMES]->(d)
OPTIONAL MATCH (j)-[:PRODUCES]->(o:Dataset)
RETURN d.namespace AS dns, d.name AS dn, j.namespace AS jns, j.name AS jn, o.namespace AS ons, o.name AS on
"""
_UP_FROM_JOBS = """
UNWIND $keys AS k
MATCH (j:Job {namespace: k.namespace, name: k.name})
MATCH (j)-[:CONSUMES]->(o:Dataset)
RETURN j.namespace AS jns, j.name AS jn, o.namespace AS ons, o.name AS on
"""
_DOWN_FROM_JOBS = """
UNWIND $keys AS k
MATCH (j:Job {namespace: k.namespace, name: k.name})
MATCH (j)-[:PRODUCES]->(o:Dataset)
RETURN j.namespace AS jns, j.name AS jn, o.namespace AS ons, o.name AS on
"""

_RUNS_OF_JOB = """
MATCH (x:Run)-[:INSTANCE_OF]->(j:Job {namespace: $namespace, name: $name})
OPTIONAL MATCH (x)-[:CHILD_OF]->(p:Run)
WITH x, collect(p.runId) AS parents, coalesce(x.startedAt, x.firstEventAt, '') AS sortKey
RETURN x.runId AS runId, x.state AS state, x.startedAt AS startedAt, x.endedAt AS endedAt,
       parents, sortKey
ORDER BY sortKey DESC, runId DESC
LIMIT $limit
"""

_EVENTS_OF_RUN = """
MATCH (e:Event {runId: $runId})
RETURN e.json AS json, e.eventTime AS eventTime, e.eventId AS eventId
ORDER BY eventTime, eventId
"""

_JOBS = """
MATCH (j:Job)
WHERE $namespace IS NULL OR j.namespace = $namespace
WITH j ORDER BY j.namespace, j.name LIMIT $limit
OPTIONAL MATCH (j)-[:CONSUMES]->(i:Dataset)
WITH j, collect(DISTINCT [i.namespace, i.name]) AS ins
OPTIONAL MATCH (j)-[:PRODUCES]->(o:Dataset)
WITH j, ins, collect(DISTINCT [o.namespace, o.name]) AS outs
RETURN j.namespace AS namespace, j.name AS name, ins, outs
"""

_LATEST_RUNS = """
UNWIND $keys AS k
MATCH (x:Run)-[:INSTANCE_OF]->(j:Job {namespace: k.namespace, name: k.name})
WITH j, x ORDER BY coalesce(x.startedAt, x.firstEventAt, '') DESC, x.runId DESC
WITH j, collect([x.runId, x.state, x.startedAt, x.endedAt])[0] AS latest
RETURN j.namespace AS namespace, j.name AS name, latest
"""

_DATASETS = """
MATCH (d:Dataset)
WHERE $namespace IS NULL OR d.namespace = $namespace
RETURN d.namespace AS namespace, d.name AS name
ORDER BY namespace, name
LIMIT $limit
"""

_NAMESPACES_JOBS = "MATCH (j:Job) RETURN DISTINCT j.namespace AS namespace"
_NAMESPACES_DATASETS = "MATCH (d:Dataset) RETURN DISTINCT d.namespace AS namespace"

_SEARCH_JOBS = """
MATCH (j:Job) WHERE toLower(j.name) CONTAINS $text OR toLower(j.namespace) CONTAINS $text
RETURN j.namespace AS namespace, j.name AS name ORDER BY namespace, name LIMIT $limit
"""
_SEARCH_DATASETS = """
MATCH (d:Dataset) WHERE toLower(d.name) CONTAINS $text OR toLower(d.namespace) CONTAINS $text
RETURN d.namespace AS namespace, d.name AS name ORDER BY namespace, name LIMIT $limit
"""


# -------------------------------------------------------------------------------------- projection


class _Batch:
    """Rows for each statement, aggregated per key in Python so each UNWIND sees a key once."""

    def __init__(self) -> None:
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self.datasets: dict[tuple[str, str], dict[str, Any]] = {}
        self.runs: dict[str, dict[str, Any]] = {}
        self.parents: dict[tuple[str, str], dict[str, Any]] = {}
        self.read: set[tuple[str, str, str]] = set()
        self.wrote: set[tuple[str, str, str]] = set()
        self.consumes: set[tuple[str, str, str, str]] = set()
        self.produces: set[tuple[str, str, str, str]] = set()
        self.fields: set[tuple[str, str, str, str, str, str]] = set()
        self.events: dict[str, dict[str, Any]] = {}

    @staticmethod
    def _keep_max(table: dict[Any, dict[str, Any]], key: Any, row: dict[str, Any]) -> None:
        old = table.get(key)
        if old is None or (row["facets"] is not None and (old["facets"] is None or row["rank"] > old["rank"])):
            table[key] = row

    def add(self, rec: LineageRecord) -> None:
        event = rec.event
        when = format_time(rec.event_time)
        rank = f"{when}|{rec.event_id}"
        self.events[rec.event_id] = {
            "eventId": rec.event_id, "runId": rec.run_id, "json": _json(event), "eventTime": when,
            "eventType": rec.event_type, "kind": rec.kind,
        }
        job_key: tuple[str, str] | None = None
        if rec.job_namespace is not None and rec.job_name is not None:
            job_key = (rec.job_namespace, rec.job_name)
            facets = _facets_json(_section(event, "job").get("facets"))
            self._keep_max(self.jobs, job_key, {"namespace": job_key[0], "name": job_key[1],
                                                "facets": facets, "rank": rank})
        if rec.run_id is not None and job_key is not None:
            self._add_run(rec, job_key, when, rank)
        inputs, outputs = rec.inputs, rec.outputs
        if rec.kind == "dataset" and not inputs and not outputs:
            ds = _section(event, "dataset")
            if isinstance(ds.get("namespace"), str) and isinstance(ds.get("name"), str):
                outputs = (DatasetRef(ds["namespace"], ds["name"], dict(_section(ds, "facets")), "output"),)
        for ref in (*inputs, *outputs):
            self._keep_max(self.datasets, (ref.namespace, ref.name), {
                "namespace": ref.namespace, "name": ref.name, "facets": _facets_json(ref.facets), "rank": rank})
            self._add_columns(ref)
        for ref in inputs:
            if rec.run_id is not None and job_key is not None:
                self.read.add((rec.run_id, ref.namespace, ref.name))
            if job_key is not None:
                self.consumes.add((*job_key, ref.namespace, ref.name))
        for ref in outputs:
            if rec.run_id is not None and job_key is not None:
                self.wrote.add((rec.run_id, ref.namespace, ref.name))
            if job_key is not None:
                self.produces.add((*job_key, ref.namespace, ref.name))

    def _add_run(self, rec: LineageRecord, job_key: tuple[str, str], when: str, rank: str) -> None:
        assert rec.run_id is not None
        etype = (rec.event_type or "").upper()
        order = _STATE_ORDER.get(etype)
        terminal = etype in TERMINAL_STATES
        row = self.runs.get(rec.run_id)
        if row is None:
            row = self.runs[rec.run_id] = {
                "runId": rec.run_id, "jobNamespace": job_key[0], "jobName": job_key[1],
                "state": None, "stateRank": None, "facets": None, "facetsRank": None,
                "startedAt": None, "endedAt": None, "firstEventAt": when, "lastEventAt": when,
            }
        row["firstEventAt"] = min(row["firstEventAt"], when)
        row["lastEventAt"] = max(row["lastEventAt"], when)
        if order is not None:
            state_rank = f"{int(terminal)}|{when}|{order}|{rec.event_id}"
            if row["stateRank"] is None or state_rank > row["stateRank"]:
                row["state"], row["stateRank"] = etype, state_rank
        if etype == "START" and (row["startedAt"] is None or when < row["startedAt"]):
            row["startedAt"] = when
        if terminal and (row["endedAt"] is None or when > row["endedAt"]):
            row["endedAt"] = when
        facets = _facets_json(_section(rec.event, "run").get("facets"))
        if facets is not None and (row["facetsRank"] is None or rank > row["facetsRank"]):
            row["facets"], row["facetsRank"] = facets, rank
        if rec.parent_run_id:
            key = (rec.run_id, rec.parent_run_id)
            prev = self.parents.get(key)
            if prev is None or prev["parentJobName"] is None:
                self.parents[key] = {
                    "runId": rec.run_id, "parentRunId": rec.parent_run_id,
                    "parentJobNamespace": rec.parent_job_namespace, "parentJobName": rec.parent_job_name,
                }

    def _add_columns(self, ref: DatasetRef) -> None:
        facet = ref.facets.get("columnLineage") if isinstance(ref.facets, Mapping) else None
        fields = facet.get("fields") if isinstance(facet, Mapping) else None
        if not isinstance(fields, Mapping):
            return
        for out_field, spec in fields.items():
            inputs = spec.get("inputFields") if isinstance(spec, Mapping) else None
            for src in inputs if isinstance(inputs, list) else ():
                if not isinstance(src, Mapping):
                    continue
                ns, name, field = src.get("namespace"), src.get("name"), src.get("field")
                if isinstance(ns, str) and isinstance(name, str) and isinstance(field, str):
                    self.fields.add((ref.namespace, ref.name, str(out_field), ns, name, field))

    def statements(self) -> Iterable[tuple[str, list[dict[str, Any]]]]:
        yield _MERGE_JOBS, list(self.jobs.values())
        yield _MERGE_DATASETS, list(self.datasets.values())
        yield _MERGE_RUNS, list(self.runs.values())
        yield _MERGE_PARENTS, list(self.parents.values())
        yield _MERGE_READ, [{"runId": r, "namespace": n, "name": m} for r, n, m in sorted(self.read)]
        yield _MERGE_WROTE, [{"runId": r, "namespace": n, "name": m} for r, n, m in sorted(self.wrote)]
        yield _MERGE_CONSUMES, [{"jobNamespace": a, "jobName": b, "namespace": c, "name": d}
                                for a, b, c, d in sorted(self.consumes)]
        yield _MERGE_PRODUCES, [{"jobNamespace": a, "jobName": b, "namespace": c, "name": d}
                                for a, b, c, d in sorted(self.produces)]
        yield _MERGE_FIELDS, [{"outNamespace": a, "outDataset": b, "outField": c,
                               "inNamespace": d, "inDataset": e, "inField": f}
                              for a, b, c, d, e, f in sorted(self.fields)]
        # Raw events last: a batch that fails midway is retried whole, and MERGE makes it a no-op.
        yield _MERGE_EVENTS, list(self.events.values())


# ---------------------------------------------------------------------------------------------- store


class GraphLineageStore(BaseLineageStore):
    """Projects events into a property graph over Bolt; answers lineage and catalog questions."""

    name = STORE_NAME

    def __init__(self, connection: ConnectionConfig | None = None, *, runner: GraphRunner | None = None,
                 max_rows_per_statement: int = 2000) -> None:
        if connection is None and runner is None:
            raise ConfigError("store.graph.graph_connection_name", None, "a connection or a runner is required")
        self._connection = connection
        self._runner = runner
        self._max_rows = max(1, max_rows_per_statement)
        self.dialect: str | None = None

    @classmethod
    def from_config(cls, config: LineageConfig) -> GraphLineageStore:
        conn_name = config.store.graph.graph_connection_name
        connection = config.connections.get(conn_name)
        if connection is None:
            known = ", ".join(sorted(config.connections)) or "none"
            raise ConfigError("store.graph.graph_connection_name", conn_name,
                              f"must name a [lineage.connections.NAME] section (defined: {known})")
        return cls(connection)

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

    @staticmethod
    def _detect_dialect(runner: GraphRunner) -> str:
        try:
            rows = runner.run("CALL dbms.components() YIELD name RETURN name")
        except StoreError:
            return "opencypher"
        names = " ".join(str(r.get("name", "")) for r in rows).lower()
        return "neo4j" if "neo4j" in names else "opencypher"

    def check(self) -> None:
        self.runner.verify()

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()

    # -- writes

    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        if not records:
            return
        batch = _Batch()
        try:
            for rec in records:
                batch.add(rec)
        except (TypeError, ValueError) as exc:
            raise StoreError(self.name, f"cannot project event: {exc}", permanent=True) from exc
        runner = self.runner
        for statement, rows in batch.statements():
            for start in range(0, len(rows), self._max_rows):
                chunk = rows[start:start + self._max_rows]
                if chunk:
                    runner.run(statement, {"rows": chunk})

    # -- queries

    def lineage(self, node: str, *, direction: Direction = "both", depth: int = 5) -> LineageGraph:
        kind, namespace, name = parse_node_id(node)
        if depth < 0:
            raise ValueError(f"depth must be >= 0, got {depth}")
        root = node_id(kind, namespace, name)
        graph = LineageGraph(root=root)
        graph.nodes[root] = LineageNode(id=root, type=kind, namespace=namespace, name=name)
        edges: set[tuple[str, str]] = set()
        directions = ("upstream", "downstream") if direction == "both" else (direction,)
        for way in directions:
            self._walk(graph, edges, kind, (namespace, name), way == "upstream", depth)
        for origin, destination in sorted(edges):
            edge = LineageEdge(origin=origin, destination=destination)
            graph.nodes[origin].out_edges.append(edge)
            graph.nodes[destination].in_edges.append(edge)
        return graph

    def _walk(self, graph: LineageGraph, edges: set[tuple[str, str]], kind: NodeType,
              key: tuple[str, str], upstream: bool, depth: int) -> None:
        def add(node_type: NodeType, ns: str, nm: str) -> str:
            nid = node_id(node_type, ns, nm)
            if nid not in graph.nodes:
                graph.nodes[nid] = LineageNode(id=nid, type=node_type, namespace=ns, name=nm)
            return nid

        def flow(dataset: str, job: str, *, job_side: bool) -> None:
            # Edges point with the data: upstream datasets feed jobs, jobs feed downstream ones.
            if job_side:  # dataset on the far side of a job
                edges.add((dataset, job) if upstream else (job, dataset))
            else:  # job on the far side of a dataset
                edges.add((job, dataset) if upstream else (dataset, job))

        seen_jobs: set[tuple[str, str]] = set()
        seen_datasets: set[tuple[str, str]] = set()
        frontier: list[tuple[str, str]] = []  # datasets whose far-side jobs are still to visit
        if kind == "JOB":
            seen_jobs.add(key)
            job_id = node_id("JOB", *key)
            rows = self.runner.run(_UP_FROM_JOBS if upstream else _DOWN_FROM_JOBS,
                                   {"keys": [{"namespace": key[0], "name": key[1]}]})
            for row in rows:
                ds = (row["ons"], row["on"])
                flow(add("DATASET", *ds), job_id, job_side=True)
                if ds not in seen_datasets:
                    seen_datasets.add(ds)
                    frontier.append(ds)
        else:
            seen_datasets.add(key)
            frontier.append(key)
        query = _UP_FROM_DATASETS if upstream else _DOWN_FROM_DATASETS
        hops = 0
        while frontier and hops < depth:
            hops += 1
            rows = self.runner.run(query, {"keys": [{"namespace": n, "name": m} for n, m in frontier]})
            frontier = []
            for row in rows:
                ds_id = add("DATASET", row["dns"], row["dn"])
                job = (row["jns"], row["jn"])
                job_id = add("JOB", *job)
                flow(ds_id, job_id, job_side=False)
                seen_jobs.add(job)
                if row["ons"] is None or row["on"] is None:
                    continue
                far = (row["ons"], row["on"])
                flow(add("DATASET", *far), job_id, job_side=True)
                if far not in seen_datasets:
                    seen_datasets.add(far)
                    frontier.append(far)

    def runs_of_job(self, namespace: str, name: str, *, limit: int = 100) -> list[RunSummary]:
        rows = self.runner.run(_RUNS_OF_JOB, {"namespace": _text(namespace), "name": _text(name),
                                              "limit": _limit(limit)})
        return [RunSummary(
            run_id=row["runId"], job_namespace=namespace, job_name=name, state=row["state"],
            started_at=parse_time(row["startedAt"]), ended_at=parse_time(row["endedAt"]),
            parent_run_id=(sorted(row["parents"])[0] if row["parents"] else None),
        ) for row in rows]

    def events_of_run(self, run_id: str) -> list[dict[str, Any]]:
        rows = self.runner.run(_EVENTS_OF_RUN, {"runId": _text(run_id)})
        out: list[dict[str, Any]] = []
        for row in rows:
            value = json.loads(row["json"])
            if isinstance(value, dict):
                out.append(value)
        return out

    def namespaces(self) -> list[str]:
        found = {r["namespace"] for r in self.runner.run(_NAMESPACES_JOBS)}
        found |= {r["namespace"] for r in self.runner.run(_NAMESPACES_DATASETS)}
        return sorted(n for n in found if isinstance(n, str))

    def jobs(self, namespace: str | None = None, *, limit: int = 100) -> list[JobSummary]:
        params = {"namespace": None if namespace is None else _text(namespace), "limit": _limit(limit)}
        rows = self.runner.run(_JOBS, params)
        keys = [{"namespace": r["namespace"], "name": r["name"]} for r in rows]
        latest: dict[tuple[str, str], RunSummary] = {}
        if keys:
            for row in self.runner.run(_LATEST_RUNS, {"keys": keys}):
                run = row["latest"]
                if run and run[0] is not None:
                    latest[(row["namespace"], row["name"])] = RunSummary(
                        run_id=run[0], job_namespace=row["namespace"], job_name=row["name"], state=run[1],
                        started_at=parse_time(run[2]), ended_at=parse_time(run[3]))
        return [JobSummary(
            namespace=r["namespace"], name=r["name"], latest_run=latest.get((r["namespace"], r["name"])),
            inputs=_pairs(r["ins"]), outputs=_pairs(r["outs"]),
        ) for r in rows]

    def datasets(self, namespace: str | None = None, *, limit: int = 100) -> list[tuple[str, str]]:
        params = {"namespace": None if namespace is None else _text(namespace), "limit": _limit(limit)}
        return [(r["namespace"], r["name"]) for r in self.runner.run(_DATASETS, params)]

    def search(self, text: str, *, limit: int = 50) -> list[tuple[NodeType, str, str]]:
        params = {"text": _text(text).lower(), "limit": _limit(limit)}
        found: list[tuple[NodeType, str, str]] = []
        found += [("JOB", r["namespace"], r["name"]) for r in self.runner.run(_SEARCH_JOBS, params)]
        found += [("DATASET", r["namespace"], r["name"]) for r in self.runner.run(_SEARCH_DATASETS, params)]
        found.sort(key=lambda t: (t[0] != "DATASET", t[1], t[2]))
        return found[:limit]


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _limit(value: int) -> int:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"limit must be a positive integer, got {value!r}")
    return value


def _pairs(values: Any) -> tuple[tuple[str, str], ...]:
    out = {(v[0], v[1]) for v in values or () if v and v[0] is not None and v[1] is not None}
    return tuple(sorted(out))


def create_store(config: LineageConfig) -> GraphLineageStore:
    """Entry point ``graph`` of ``lineage_sdk.stores``."""
    return GraphLineageStore.from_config(config)
