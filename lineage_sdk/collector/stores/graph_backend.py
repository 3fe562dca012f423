"""The graph backend: the engine's rows in a property graph, answered in Cypher.

Model (``key`` is :func:`~lineage_sdk.collector.stores.graph.name_key` of the names, as in the
graph store, so long names never reach an index)::

    (:Job {key, namespace, name, firstSeen, lastSeen, holds})      likewise (:Dataset)
    (:Job)-[:READS|WRITES {firstSeen, declared}]->(:Dataset)         EdgeRow: the walk's step
    (:Run {key, runId, jobKey, jobNs, jobName, firstEvent, lastEvent, state, stateRank, ...})
    (:ColumnEdge {key, outKey, inKey, outDs, inDs, jobKey, firstSeen, info, infoRank, ...})
    (:Event {eventId, eventTime, kind, eventType, runId, jobKey, namespace, json, ...})
    (:Mention {key, source, sourceId, kind, nodeKey, namespace, name, role, firstSeen})

Why it is written this way:

* Every statement is a constant string; rows travel as ``UNWIND`` parameters. Times are
  :func:`~lineage_sdk.collector.records.format_time` text, exact to the µs, which sorts as time.
* Derived rows are upserted by their fields' merge rules (:mod:`~lineage_sdk.collector.backend`):
  each statement's ``SET`` is built from the row type's metadata, a ``CASE`` per rule, so appends
  in any order converge. Events are created once (the first wins), before the derived rows of
  the same append.
* A Job or Dataset vertex is a *row* only while it has ``firstSeen``: edges need their ends,
  so ``replace`` clears a touched node's times instead of deleting the vertex, and then
  deletes touched vertices that are neither rows nor linked.
* A mention is a vertex of its own, not a relationship: a run's mentions have no vertex to hang
  off (a Run vertex is one per (run, job), and ``replace`` deletes it), and a vertex is one
  indexed ``MERGE`` on its ``key``, with no end vertex to find or create. On FalkorDB 5,000
  such rows (2,500 runs of two events) took 96-104 ms of server time where the 10,000
  ``(:Event)-[:MENTIONS]->(node)`` of the per-event model took 133-155 ms. ``nodeKey`` hashes
  (kind, namespace, name), so ``mentions`` is one indexed equality per key; ``delete`` and
  ``replace`` find an event's or a run's by ``sourceId``, then check ``source``.
* A run row's key, a column edge's key and a mention's key hash all their key fields; a None
  job is ``jobKey = ''``.
* Where the contract leaves a choice, this module makes memory's
  (:mod:`~lineage_sdk.collector.stores.memory`), with the contract's ordering and latest-run
  helpers (:func:`~lineage_sdk.collector.backend.sort_runs`, ``latest_of``, ``follows``).
* A few reads are phrased per server by a :class:`GraphTactics`; the defaults suit Neo4j, and
  :mod:`~lineage_sdk.collector.stores.falkordb` holds FalkorDB's, chosen by a dialect probe at
  :meth:`GraphBackend.open`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import fields
from datetime import datetime, timedelta
from itertools import islice
from typing import Any, Literal

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
    Ranked,
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
from lineage_sdk.collector.records import format_time, parse_time
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.store import EventKind, FieldRef, Page
from lineage_sdk.collector.stores.falkordb import tactics_for
from lineage_sdk.collector.stores.graph import GraphRunner, Neo4jRunner, name_key
from lineage_sdk.collector.stores.graph_tactics import NEO4J, GraphTactics
from lineage_sdk.exceptions import ConfigError

__all__ = ["NEO4J", "GraphBackend", "GraphTactics"]

_log = logging.getLogger(__name__)
_LABEL: dict[str, str] = {"JOB": "Job", "DATASET": "Dataset"}
_REL: dict[str, str] = {"in": "READS", "out": "WRITES"}
_US = timedelta(microseconds=1)
_LAST = "~"  # sorts after every format_time text: "no upper bound"
_ALL = 1 << 62  # LIMIT of "everything"


# -- writes: one upsert per row type, its SET built from the merge rules ----------------------


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _merged(var: str, cls: type) -> str:
    """``WITH .. SET ..`` joining the parameter row ``r`` into ``var`` by ``cls``'s rules
    (``key`` and ``first`` fields are set where the vertex is created)."""
    wins: list[str] = []
    sets: list[str] = []
    for f in fields(cls):
        rule = f.metadata.get("merge", "first")
        p = _camel(f.name)
        v, n = f"{var}.{p}", f"r.{p}"
        if rule in ("min", "max"):
            op = "<" if rule == "min" else ">"
            sets.append(
                f"{v} = CASE WHEN {n} IS NOT NULL AND ({v} IS NULL OR {n} {op} {v}) "
                f"THEN {n} ELSE {v} END"
            )
        elif rule == "ranked":  # the condition is read before any SET changes the rank
            wins.append(f"({v}Rank IS NULL OR {n}Rank > {v}Rank) AS {p}Wins")
            sets.append(f"{v} = CASE WHEN {p}Wins THEN {n} ELSE {v} END")
            sets.append(f"{v}Rank = CASE WHEN {p}Wins THEN {n}Rank ELSE {v}Rank END")
        elif rule == "union":
            sets.append(f"{v} = {n} + [h IN coalesce({v}, []) WHERE NOT h IN {n}]")
    return f"WITH {var}, r{''.join(', ' + w for w in wins)}\nSET " + ",\n    ".join(sets) + "\n"


_NAMED = "ON CREATE SET {v}.namespace = r.{p}Ns, {v}.name = r.{p}Name\n"
_APPEND_EVENTS = """UNWIND $rows AS r
MERGE (e:Event {eventId: r.id})
ON CREATE SET e.eventTime = r.time, e.kind = r.kind, e.eventType = r.type, e.runId = r.run,
  e.jobKey = r.jobKey, e.jobNs = r.jobNs, e.jobName = r.jobName, e.parentRunId = r.parent,
  e.namespace = r.ns, e.json = r.json
"""
_APPEND_MENTIONS = """UNWIND $rows AS r
MERGE (x:Mention {key: r.key})
ON CREATE SET x.source = r.source, x.sourceId = r.sourceId, x.kind = r.kind,
  x.nodeKey = r.nodeKey, x.namespace = r.ns, x.name = r.name, x.role = r.role
""" + _merged("x", MentionRow)
_APPEND_NODES = {
    kind: f"UNWIND $rows AS r\nMERGE (x:{label} {{key: r.key}})\n"
    + _NAMED.format(v="x", p="key")
    + _merged("x", NodeRow)
    for kind, label in _LABEL.items()
}
_APPEND_EDGES = {
    io: "UNWIND $rows AS r\nMERGE (j:Job {key: r.job})\n"
    + _NAMED.format(v="j", p="job")
    + "MERGE (d:Dataset {key: r.dataset})\n"
    + _NAMED.format(v="d", p="dataset")
    + f"MERGE (j)-[x:{rel}]->(d)\n"
    + _merged("x", EdgeRow)
    for io, rel in _REL.items()
}
_APPEND_RUNS = """UNWIND $rows AS r
MERGE (x:Run {key: r.key})
ON CREATE SET x.runId = r.runId, x.jobKey = r.jobKey, x.jobNs = r.jobNs, x.jobName = r.jobName
""" + _merged("x", RunRow)
_COLUMN_IDS: tuple[str, ...] = ("outKey", "inKey", "outDs", "inDs", "jobKey", "oNs", "oDs")
_COLUMN_IDS += ("oField", "iNs", "iDs", "iField", "jobNs", "jobName")
_APPEND_COLUMNS = (
    "UNWIND $rows AS r\nMERGE (x:ColumnEdge {key: r.key})\nON CREATE SET "
    + ", ".join(f"x.{p} = r.{p}" for p in _COLUMN_IDS)
    + "\n"
    + _merged("x", ColumnEdgeRow)
)

# -- replace: the touched rows out, then the new rows in ------------------------------------------

_DROP_EDGES = "UNWIND $jobs AS k\nMATCH (:Job {key: k})-[e:READS|WRITES]->(:Dataset)\nDELETE e\n"
_DROP_JOB_COLUMNS = "UNWIND $jobs AS k\nMATCH (x:ColumnEdge {jobKey: k})\nDELETE x\n"
_DROP_DATASET_COLUMNS = (
    "UNWIND $datasets AS k\nMATCH (x:ColumnEdge {outDs: k})\nWITH x WHERE x.jobKey = ''\nDELETE x\n"
)
_DROP_RUNS = "UNWIND $runs AS k\nMATCH (x:Run {runId: k})\nDELETE x\n"
_DROP_MENTIONS = {  # a run's mentions (replace), an event's (delete)
    source: f"UNWIND ${source}s AS k\nMATCH (x:Mention {{sourceId: k}})\n"
    f"WITH x WHERE x.source = '{source}'\nDELETE x\n"
    for source in ("run", "event")
}
_DROP_NODES = {
    kind: f"UNWIND ${kind.lower()}s AS k\nMATCH (n:{label} {{key: k}})\n"
    "SET n.firstSeen = NULL, n.lastSeen = NULL, n.holds = NULL\n"
    for kind, label in _LABEL.items()
}
_BARE_NODES = {  # touched vertices that hold no row and link nothing
    kind: f"UNWIND ${kind.lower()}s AS k\nMATCH (n:{label} {{key: k}})\n"
    "WITH n WHERE n.firstSeen IS NULL AND NOT (n)--()\nDELETE n\n"
    for kind, label in _LABEL.items()
}

# -- reads ---------------------------------------------------------------------------------------

_EDGE_COLS = (
    "RETURN j.namespace AS jns, j.name AS jname, d.namespace AS dns, d.name AS dname, "
    "x.firstSeen AS first, x.declared AS declared\n"
)
_EDGES = {
    (end, io): "UNWIND $keys AS k\n"
    + (
        f"MATCH (j:Job {{key: k}})-[x:{rel}]->(d:Dataset)\n"
        if end == "JOB"
        else f"MATCH (j:Job)-[x:{rel}]->(d:Dataset {{key: k}})\n"
    )
    + "WITH j, d, x WHERE $until IS NULL OR x.firstSeen < $until\n"
    + _EDGE_COLS
    for end in _LABEL
    for io, rel in _REL.items()
}
_NODE_COLS = (
    "RETURN n.namespace AS ns, n.name AS name, n.firstSeen AS first, n.lastSeen AS last, "
    "n.holds AS holds\n"
)
_NODE_FILTER = (
    "WITH n WHERE n.firstSeen IS NOT NULL AND ($ns IS NULL OR n.namespace = $ns)"
    " AND ($text IS NULL OR toLower(n.name) CONTAINS $text)"
    " AND ($until IS NULL OR n.firstSeen < $until)\n"
)
_NODES_BY_KEY = {
    kind: f"UNWIND $keys AS k\nMATCH (n:{label} {{key: k}})\n" + _NODE_FILTER + _NODE_COLS
    for kind, label in _LABEL.items()
}
_NODES_PAGE = {
    kind: f"MATCH (n:{label})\n"
    + _NODE_FILTER
    + _NODE_COLS
    + "ORDER BY ns, name SKIP $offset LIMIT $limit\n"
    for kind, label in _LABEL.items()
}
_NODES_COUNT = {
    kind: f"MATCH (n:{label})\n" + _NODE_FILTER + "RETURN count(n) AS n\n"
    for kind, label in _LABEL.items()
}
_NAMESPACES = {
    kind: f"MATCH (n:{label})\nWITH n WHERE n.firstSeen IS NOT NULL"
    " AND ($until IS NULL OR n.firstSeen < $until)\n"
    "RETURN n.namespace AS ns, min(n.firstSeen) AS first, max(n.lastSeen) AS last\n"
    for kind, label in _LABEL.items()
}
_RUN_COLS = """WITH x WHERE $until IS NULL OR x.firstEvent < $until
RETURN x.runId AS runId, x.jobNs AS jns, x.jobName AS jname, x.firstEvent AS first,
  x.lastEvent AS last, x.stateRank AS stateRank, x.state AS state, x.startedAt AS started,
  x.endedAt AS ended, x.parentRunId AS parent, x.rootRunId AS root, x.heartbeatS AS beat
"""
_RUNS = {
    "jobs": "UNWIND $keys AS k\nMATCH (x:Run {jobKey: k})\n" + _RUN_COLS,
    "jobs in": "MATCH (x:Run)\nWHERE x.jobKey IN $keys\n" + _RUN_COLS,
    "ids": "UNWIND $keys AS k\nMATCH (x:Run {runId: k})\n" + _RUN_COLS,
    "parent": "UNWIND $keys AS k\nMATCH (x:Run {parentRunId: k})\n" + _RUN_COLS,
    "all": "MATCH (x:Run)\n" + _RUN_COLS,
}
_EVENT_COLS = """RETURN e.eventId AS id, e.eventTime AS t, e.kind AS kind, e.eventType AS type,
  e.runId AS run, e.jobNs AS jns, e.jobName AS jname, e.parentRunId AS parent,
  e.namespace AS ns, e.json AS json
"""
_EVENTS_BY = {
    by: f"UNWIND $keys AS k\nMATCH (e:Event {{{prop}: k}})\n" + _EVENT_COLS
    for by, prop in (("ids", "eventId"), ("runs", "runId"), ("jobs", "jobKey"))
}
_EVENTS_FILTER = (
    "WITH e WHERE ($ns IS NULL OR e.namespace = $ns) AND ($kinds IS NULL OR e.kind IN $kinds)"
)
_EVENTS_RANGE = "MATCH (e:Event)\nWHERE e.eventTime >= $low AND UPPER\n"  # see GraphTactics.upper
_EVENTS_PAGE = {  # one ordered page of a time range (Neo4j)
    desc: _EVENTS_RANGE
    + _EVENTS_FILTER
    + f"\n  AND ($at IS NULL OR e.eventTime {'<' if desc else '>'} $at"
    + " OR (e.eventTime = $at AND e.eventId > $atId))\n"
    + _EVENT_COLS
    + f"ORDER BY t{' DESC' if desc else ''}, id SKIP $offset LIMIT $limit\n"
    for desc in (False, True)
}
_EVENTS_COUNT = (
    _EVENTS_RANGE + _EVENTS_FILTER + " AND ($atId IS NULL OR e.eventId > $atId)\n"
    "RETURN count(e) AS n\n"
)
_EVENTS_SPAN = (
    _EVENTS_RANGE + "RETURN min(e.eventTime) AS first, max(e.eventTime) AS last, count(e) AS n\n"
)
_EVENTS_WINDOW = {  # one window of a time range, sorted alone (FalkorDB)
    desc: _EVENTS_RANGE + _EVENT_COLS + f"ORDER BY t{' DESC' if desc else ''}, id LIMIT $limit\n"
    for desc in (False, True)
}
_EVENTS_AT = (
    "MATCH (e:Event)\nWHERE e.eventTime = $at\nWITH e WHERE e.eventId > $atId\n"
    + _EVENT_COLS
    + "ORDER BY id LIMIT $limit\n"
)
_MENTIONS = """UNWIND $keys AS k
MATCH (x:Mention {nodeKey: k})
WITH x WHERE ($roles IS NULL OR x.role IN $roles) AND ($until IS NULL OR x.firstSeen < $until)
RETURN x.source AS source, x.sourceId AS id, x.namespace AS ns, x.name AS name, x.role AS role,
  x.firstSeen AS first
"""
_COLUMN_COLS = (
    "WITH x WHERE $until IS NULL OR x.firstSeen < $until\n"
    "RETURN "
    + ", ".join(f"x.{p} AS {p}" for p in _COLUMN_IDS)
    + ", x.firstSeen AS first, x.infoRank AS rank, x.info AS info\n"
)
_COLUMNS = {
    by: f"UNWIND $keys AS k\nMATCH (x:ColumnEdge {{{by}: k}})\n" + _COLUMN_COLS
    for by in ("outKey", "inKey", "outDs", "inDs")
}
_COLUMNS["all"] = "MATCH (x:ColumnEdge)\n" + _COLUMN_COLS
_DELETE_READ = "UNWIND $keys AS k\nMATCH (e:Event {eventId: k})\n" + _EVENT_COLS
_DELETE = "UNWIND $keys AS k\nMATCH (e:Event {eventId: k})\nDETACH DELETE e\n"


# -- rows <-> parameters --------------------------------------------------------------------------


def _t(value: datetime | None) -> str | None:
    return None if value is None else format_time(value)


def _time(text: Any) -> datetime:
    found = parse_time(text)
    assert found is not None  # every row time is stored
    return found


def _key(key: Key | None) -> str:
    return "" if key is None else name_key(*key)


def _job(ns: str | None, name: str | None) -> Key | None:
    return None if ns is None or name is None else (ns, name)


def _node_key(kind: NodeKind, key: Key) -> str:
    return name_key(kind, *key)


def _mention_params(m: MentionRow) -> dict[str, Any]:
    return {
        "key": name_key(m.source, m.source_id, m.kind, *m.key, m.role), "source": m.source,
        "sourceId": m.source_id, "kind": m.kind, "nodeKey": _node_key(m.kind, m.key),
        "ns": m.key[0], "name": m.key[1], "role": m.role, "firstSeen": format_time(m.first_seen),
    }  # fmt: skip


def _field_key(ref: FieldRef) -> str:
    return name_key(ref.namespace, ref.dataset, ref.field)


def _event_params(r: EventRow) -> dict[str, Any]:
    jns, jname = r.job or (None, None)
    return {
        "id": r.event_id, "time": format_time(r.event_time), "kind": r.kind,
        "type": r.event_type, "run": r.run_id, "jobKey": None if r.job is None else _key(r.job),
        "jobNs": jns, "jobName": jname, "parent": r.parent_run_id, "ns": r.namespace,
        "json": r.json,
    }  # fmt: skip


def _event(row: Mapping[str, Any]) -> EventRow:
    return EventRow(
        row["id"], _time(row["t"]), row["kind"], row["type"], row["run"],
        _job(row["jns"], row["jname"]), row["parent"], row["ns"], row["json"],
    )  # fmt: skip


def _run_params(r: RunRow) -> dict[str, Any]:
    jns, jname = r.job or (None, None)
    key = name_key(r.run_id) if r.job is None else name_key(r.run_id, *r.job)
    return {
        "key": key, "runId": r.run_id, "jobKey": _key(r.job), "jobNs": jns, "jobName": jname,
        "firstEvent": _t(r.first_event), "lastEvent": _t(r.last_event),
        "state": r.state.value, "stateRank": r.state.rank, "startedAt": _t(r.started_at),
        "endedAt": _t(r.ended_at), "parentRunId": r.parent_run_id, "rootRunId": r.root_run_id,
        "heartbeatS": r.heartbeat_s,
    }  # fmt: skip


def _run(row: Mapping[str, Any]) -> RunRow:
    started, ended = parse_time(row["started"]), parse_time(row["ended"])
    return RunRow(
        row["runId"], _job(row["jns"], row["jname"]), _time(row["first"]), _time(row["last"]),
        Ranked(row["stateRank"], row["state"]), started, ended, row["parent"], row["root"],
        None if row["beat"] is None else float(row["beat"]),
    )  # fmt: skip


def _column_params(r: ColumnEdgeRow) -> dict[str, Any]:
    o, i = r.output, r.input
    jns, jname = r.job or (None, None)
    job = () if r.job is None else r.job
    return {
        "key": name_key(*o, *i, *job), "outKey": _field_key(o), "inKey": _field_key(i),
        "outDs": name_key(o.namespace, o.dataset), "inDs": name_key(i.namespace, i.dataset),
        "jobKey": _key(r.job), "oNs": o.namespace, "oDs": o.dataset, "oField": o.field,
        "iNs": i.namespace, "iDs": i.dataset, "iField": i.field, "jobNs": jns, "jobName": jname,
        "firstSeen": format_time(r.first_seen), "info": r.info.value, "infoRank": r.info.rank,
    }  # fmt: skip


def _column(row: Mapping[str, Any]) -> ColumnEdgeRow:
    return ColumnEdgeRow(
        FieldRef(row["oNs"], row["oDs"], row["oField"]),
        FieldRef(row["iNs"], row["iDs"], row["iField"]),
        _job(row["jobNs"], row["jobName"]),
        _time(row["first"]),
        Ranked(row["rank"], row["info"]),
    )


def _node(kind: NodeKind, row: Mapping[str, Any]) -> NodeRow:
    holds: frozenset[Any] = frozenset(row.get("holds") or ())
    return NodeRow(kind, (row["ns"], row["name"]), _time(row["first"]), _time(row["last"]), holds)


def _statements(rows: Rows) -> list[tuple[str, list[dict[str, Any]]]]:
    """The upserts of ``rows``: events first, then the derived rows (mentions of one key joined
    here, so a batch's run names each node once)."""
    if any(n.kind not in _LABEL for n in rows.nodes):
        raise ValueError("NAMESPACE node rows are answered from JOB and DATASET rows")
    out: list[tuple[str, list[dict[str, Any]]]] = [
        (_APPEND_EVENTS, [_event_params(e) for e in rows.events])
    ]
    if any(m.kind not in _LABEL for m in rows.mentions):
        raise ValueError("mentions name JOB and DATASET nodes")
    mentions: dict[tuple[Any, ...], MentionRow] = {}
    for m in rows.mentions:
        k = key_of(m)
        mentions[k] = m if k not in mentions else merge(mentions[k], m)
    out.append((_APPEND_MENTIONS, [_mention_params(m) for m in mentions.values()]))
    for kind in _LABEL:
        out.append((_APPEND_NODES[kind], [
            {"key": _key(n.key), "keyNs": n.key[0], "keyName": n.key[1],
             "firstSeen": format_time(n.first_seen), "lastSeen": format_time(n.last_seen),
             "holds": sorted(n.holds)}
            for n in rows.nodes if n.kind == kind
        ]))  # fmt: skip
    for io in _REL:
        out.append((_APPEND_EDGES[io], [
            {"job": _key(e.job), "jobNs": e.job[0], "jobName": e.job[1],
             "dataset": _key(e.dataset), "datasetNs": e.dataset[0],
             "datasetName": e.dataset[1], "firstSeen": format_time(e.first_seen),
             "declared": _t(e.declared)}
            for e in rows.edges if e.io == io
        ]))  # fmt: skip
    out.append((_APPEND_RUNS, [_run_params(r) for r in rows.runs]))
    out.append((_APPEND_COLUMNS, [_column_params(c) for c in rows.columns]))
    return [(q, p) for q, p in out if p]


class GraphBackend:
    """The engine's rows in Neo4j or another openCypher server (see the module docstring)."""

    name = "graph"

    def __init__(
        self,
        connection: ConnectionConfig | None = None,
        *,
        runner: GraphRunner | None = None,
        tactics: GraphTactics | None = None,
        max_rows_per_statement: int = 2000,
    ) -> None:
        if connection is None and runner is None:
            raise ConfigError(
                "store.graph.graph_connection_name", None, "a connection or a runner is required"
            )
        self._connection = connection
        self._runner = runner
        self._owns_runner = runner is None
        self._max_rows = max(1, max_rows_per_statement)
        self.tactics: GraphTactics = tactics or NEO4J
        self._probe = tactics is None
        self.address = "graph" if connection is None else connection.uri

    @property
    def runner(self) -> GraphRunner:
        if self._runner is None:
            assert self._connection is not None
            self._runner = Neo4jRunner(self._connection)
        return self._runner

    # -- lifecycle ------------------------------------------------------------------------------

    def open(self) -> None:
        runner = self.runner
        runner.verify()
        if self._probe:
            self.tactics = tactics_for(runner)
        for statement in self.tactics.schema:
            try:
                runner.run(statement)
            except Exception as exc:  # noqa: BLE001 - "already indexed"; real faults show on use
                _log.debug("graph schema statement skipped: %s (%s)", statement, exc)
        runner.verify()

    def check(self) -> None:
        self.runner.verify()

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            if self._owns_runner:
                self._runner = None  # a closed driver cannot be reopened: open makes a new one

    # -- writes ---------------------------------------------------------------------------------

    def _chunks(self, statements: Iterable[tuple[str, list[dict[str, Any]]]]) -> Iterator[Any]:
        for query, rows in statements:
            for start in range(0, len(rows), self._max_rows):
                yield query, {"rows": rows[start : start + self._max_rows]}

    def append(self, rows: Rows) -> None:
        self.runner.run_all(self._chunks(_statements(rows)))

    def delete(self, event_ids: Sequence[str]) -> list[EventRow]:
        keys = list(dict.fromkeys(event_ids))

        def work(run: Any) -> list[EventRow]:
            found = [_event(r) for r in run(_DELETE_READ, {"keys": keys})]
            run(_DELETE, {"keys": keys})
            run(_DROP_MENTIONS["event"], {"events": keys})
            return found

        return sorted(self.runner.transaction(work), key=lambda r: r.position)

    def replace(self, touched: Touched, rows: Rows) -> None:
        writes = list(self._chunks(_statements(rows)))
        keys = {
            "jobs": [_key(k) for k in touched.jobs],
            "datasets": [_key(k) for k in touched.datasets],
            "runs": list(touched.runs),
        }
        drops = (_DROP_EDGES, _DROP_JOB_COLUMNS, _DROP_DATASET_COLUMNS, _DROP_RUNS,
                 _DROP_MENTIONS["run"])  # fmt: skip
        self.runner.run_all(
            [
                *((q, keys) for q in (*drops, *_DROP_NODES.values())),
                *writes,
                *((q, keys) for q in _BARE_NODES.values()),
            ]
        )

    # -- reads ----------------------------------------------------------------------------------

    def _run(self, query: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        return self.runner.run(query.replace("UPPER", self.tactics.upper), params)

    def edges(
        self,
        end: Literal["JOB", "DATASET"],
        keys: Collection[Key],
        io: Io,
        *,
        until: datetime | None = None,
    ) -> Iterable[EdgeRow]:
        if end not in _LABEL:
            raise ValueError(f"edges end must be JOB or DATASET, not {end!r}")
        if not keys:
            return []
        found = self._run(_EDGES[(end, io)], {"keys": [_key(k) for k in keys], "until": _t(until)})
        rows = [
            EdgeRow((r["jns"], r["jname"]), (r["dns"], r["dname"]), io, _time(r["first"]),
                    parse_time(r["declared"]))
            for r in found
        ]  # fmt: skip
        bound = until if self.tactics.recheck else None
        return [r for r in rows if bound is None or r.first_seen < bound]

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
        params: dict[str, Any] = {"ns": namespace, "text": needle, "until": _t(until)}
        if kind == "NAMESPACE":
            return page_of(self._namespaces(keys, namespace, needle, until), limit, offset, count)
        if keys is not None:
            params["keys"] = [_key(k) for k in set(keys)]
            found = [_node(kind, r) for r in self._run(_NODES_BY_KEY[kind], params)]
            wanted = (r for r in found if until is None or r.first_seen < until)
            return page_of(sorted(wanted, key=lambda r: r.key), limit, offset, count)
        page_of((), limit, offset, False)  # the arguments' check
        rows: list[NodeRow] = []
        if limit != 0:
            page = {**params, "offset": offset, "limit": _ALL if limit is None else limit}
            rows = [_node(kind, r) for r in self._run(_NODES_PAGE[kind], page)]
        total = int(self._run(_NODES_COUNT[kind], params)[0]["n"]) if count else len(rows)
        return Page(rows, total)

    def _namespaces(
        self,
        keys: Collection[Key] | None,
        namespace: str | None,
        needle: str | None,
        until: datetime | None,
    ) -> list[NodeRow]:
        """One row per namespace holding a JOB or DATASET row first seen before ``until``."""
        spans: dict[str, tuple[datetime, datetime, set[NodeKind]]] = {}
        for kind in _LABEL:
            for r in self._run(_NAMESPACES[kind], {"until": _t(until)}):
                first, last = _time(r["first"]), _time(r["last"])
                a, b, holds = spans.get(r["ns"], (first, last, set()))
                spans[r["ns"]] = (min(a, first), max(b, last), holds | {kind})  # type: ignore[arg-type]
        wanted = None if keys is None else {ns for ns, name in keys if name == ""}
        return [
            NodeRow("NAMESPACE", (ns, ""), first, last, frozenset(holds))
            for ns, (first, last, holds) in sorted(spans.items())
            if (wanted is None or ns in wanted)
            and (namespace is None or ns == namespace)
            and not needle  # a namespace row's name is ""
        ]

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
        job_set = None if jobs is None else {j for j in jobs if j is not None}
        id_set = None if run_ids is None else set(run_ids)
        if job_set is not None:
            by, keys = (
                ("jobs in" if self.tactics.runs_by_in else "jobs"),
                [_key(j) for j in job_set],
            )
        elif id_set is not None:
            by, keys = "ids", list(id_set)
        else:
            by, keys = ("all", []) if parent is None else ("parent", [parent])
        found = [_run(r) for r in self._run(_RUNS[by], {"keys": keys, "until": _t(until)})]
        bound = until if self.tactics.recheck else None
        rows = [
            r
            for r in found
            if (job_set is None or r.job in job_set)
            and (id_set is None or r.run_id in id_set)
            and (parent is None or r.parent_run_id == parent)
            and (bound is None or r.first_event < bound)
        ]
        if latest is not None:
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
        kind_set = None if kinds is None else frozenset(kinds)
        id_set = None if ids is None else set(ids)
        run_set = None if run_ids is None else set(run_ids)
        job_set = None if jobs is None else set(jobs)
        wanted = event_filter(
            ids=id_set,
            run_ids=run_set,
            jobs=job_set,
            kinds=kind_set,
            namespace=namespace,
            since=since,
            until=until,
            after=after,
            descending=descending,
        )

        if id_set is not None or run_set is not None or job_set is not None:
            if id_set is not None:
                by, keys = "ids", list(id_set)
            elif run_set is not None:
                by, keys = "runs", list(run_set)
            else:
                by, keys = "jobs", [_key(j) for j in job_set or ()]
            rows = sorted(filter(wanted, map(_event, self._run(_EVENTS_BY[by], {"keys": keys}))),
                          key=lambda r: r.position)  # fmt: skip
            if descending:  # time descending, ties by id ascending: a stable reversed sort
                rows.sort(key=lambda r: r.event_time, reverse=True)
            return page_of(rows, limit, offset, count)
        page_of((), limit, offset, False)  # the arguments' check
        low, high = _t(since) or "", _t(until) or _LAST
        params: dict[str, Any] = {"low": low, "high": high, "ns": namespace}
        params["kinds"] = None if kind_set is None else sorted(kind_set)
        total = self._count_events(params, after, descending) if count else 0
        page: list[EventRow] = []
        if limit != 0:
            stop = None if limit is None else offset + limit
            if self.tactics.window_events:
                found = filter(wanted, map(_event, self._windows(params, after, descending, stop)))
                page = list(islice(found, offset, stop))
            else:
                at, at_id = (None, None) if after is None else (format_time(after[0]), after[1])
                sliced = {"offset": offset, "limit": _ALL if limit is None else limit}
                query = _EVENTS_PAGE[descending]
                page = [
                    _event(r)
                    for r in self._run(query, {**params, **sliced, "at": at, "atId": at_id})
                ]
        return Page(page, total if count else len(page))

    def _count_events(
        self, params: dict[str, Any], after: Position | None, descending: bool
    ) -> int:
        """The size of a time range's answer; after a position, the rest of its instant plus the
        range beyond it."""
        if after is None:
            return int(self._run(_EVENTS_COUNT, {**params, "atId": None})[0]["n"])
        at = format_time(after[0])
        total = 0
        if params["low"] <= at < params["high"]:
            instant = {**params, "low": at, "high": format_time(after[0] + _US)}
            total = int(self._run(_EVENTS_COUNT, {**instant, "atId": after[1]})[0]["n"])
        if descending:
            rest = {**params, "high": min(params["high"], at)}
        else:
            rest = {**params, "low": max(params["low"], format_time(after[0] + _US))}
        return total + int(self._run(_EVENTS_COUNT, {**rest, "atId": None})[0]["n"])

    def _windows(
        self, params: dict[str, Any], after: Position | None, descending: bool, stop: int | None
    ) -> Iterator[dict[str, Any]]:
        """A time range's events in the order asked, one window ``[a, b)`` per query, sorted
        alone, every row checked against its window (see :attr:`GraphTactics.window_events`).
        The window starts at the range's average width for a page, halves after a full page
        (whose last instant is then read whole, by id) and doubles after a short one."""
        size = max(64, min(1000, stop or 1000))
        span = self._run(_EVENTS_SPAN, params)
        if not span or not span[0]["n"]:
            return
        lo, hi = _time(span[0]["first"]), _time(span[0]["last"]) + _US
        width = max((hi - lo) * size / int(span[0]["n"]), _US)
        if after is not None:
            if lo <= after[0] < hi:
                yield from self._instant(after[0], after[1], size)
            if descending:
                hi = min(hi, after[0])
            else:
                lo = max(lo, after[0] + _US)
        while lo < hi:
            a, b = (max(lo, hi - width), hi) if descending else (lo, min(lo + width, hi))
            ta, tb = format_time(a), format_time(b)
            rows = self._run(_EVENTS_WINDOW[descending], {"low": ta, "high": tb, "limit": size})
            inside = [r for r in rows if ta <= r["t"] < tb]
            if len(rows) < size or not inside:
                yield from inside
                lo, hi = (lo, a) if descending else (b, hi)
                width *= 2
                continue
            cut = inside[-1]["t"]  # a full page: its last instant may go on past it
            yield from (r for r in inside if r["t"] != cut)
            yield from self._instant(_time(cut), "", size)
            lo, hi = (lo, _time(cut)) if descending else (_time(cut) + _US, hi)
            width = max(width / 2, _US)

    def _instant(self, at: datetime, after_id: str, size: int) -> Iterator[dict[str, Any]]:
        """The events of one instant with an id past ``after_id``, by id."""
        t = format_time(at)
        while True:
            rows = self._run(_EVENTS_AT, {"at": t, "atId": after_id, "limit": size})
            rows = [r for r in rows if r["t"] == t and r["id"] > after_id]
            yield from rows
            if len(rows) < size:
                return
            after_id = rows[-1]["id"]

    def mentions(
        self,
        kind: NodeKind,
        keys: Collection[Key],
        *,
        roles: Collection[Role] | None = None,
        until: datetime | None = None,
    ) -> Iterable[MentionRow]:
        if kind not in _LABEL or not keys:
            return []
        role_set = None if roles is None else frozenset(roles)
        params = {
            "keys": [_node_key(kind, k) for k in set(keys)],
            "roles": None if role_set is None else sorted(role_set),
            "until": _t(until),
        }
        rows = [
            MentionRow(r["source"], r["id"], kind, (r["ns"], r["name"]), r["role"],
                       _time(r["first"]))
            for r in self._run(_MENTIONS, params)
        ]  # fmt: skip
        bound = until if self.tactics.recheck else None
        rows = [
            r
            for r in rows
            if (bound is None or r.first_seen < bound) and (role_set is None or r.role in role_set)
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
        out_set = None if outputs is None else set(outputs)
        in_set = None if inputs is None else set(inputs)
        ds_set = None if datasets is None else set(datasets)
        reads: list[tuple[str, list[str]]]
        if out_set is not None:
            reads = [("outKey", [_field_key(f) for f in out_set])]
        elif in_set is not None:
            reads = [("inKey", [_field_key(f) for f in in_set])]
        elif ds_set is not None:
            keys = [_key(k) for k in ds_set]
            reads = [("outDs", keys), ("inDs", keys)]
        else:
            reads = [("all", [])]
        found: dict[tuple[Any, ...], ColumnEdgeRow] = {}
        bound = until if self.tactics.recheck else None
        for by, keys in reads:
            for r in self._run(_COLUMNS[by], {"keys": keys, "until": _t(until)}):
                row = _column(r)
                found[(row.output, row.input, job_order(row.job))] = row
        rows = [
            r
            for r in found.values()
            if (out_set is None or r.output in out_set)
            and (in_set is None or r.input in in_set)
            and (ds_set is None or r.output[:2] in ds_set or r.input[:2] in ds_set)
            and (bound is None or r.first_seen < bound)
        ]
        rows.sort(key=lambda r: (r.output, r.input, job_order(r.job)))
        return rows
