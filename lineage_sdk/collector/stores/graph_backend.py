"""The graph backend: the engine's rows in a property graph, answered in Cypher.

The model, and why vertices are merged on a hashed ``key`` (:func:`~.graph_runner.name_key` of
the names), statements are constants with rows as ``UNWIND`` parameters, upserts apply the
merge rules (:mod:`~lineage_sdk.collector.backend`) with a ``CASE`` per field, a mention is a
vertex (measured) and a Job or Dataset vertex is a row only while it has ``firstSeen``:
docs/stores.md (``graph``). Besides:

* Times are :func:`~lineage_sdk.collector.records.format_time` text, exact to the µs, which
  sorts as time.
* A mention's ``nodeKey`` hashes (kind, namespace, name), so ``mentions`` is one indexed
  equality per key (a parent mention's ``parentKey`` too, whose index holds those alone: the
  parent view's children); ``delete`` and ``replace`` find an event's or a run's by
  ``sourceId``, then check ``source`` (a parent's ``job`` mentions by ``nodeKey``).
* A run row's key, a column edge's key and a mention's key hash all their key fields; a None
  job is ``jobKey = ''``, on runs and events alike (an Event vertex without ``jobKey`` is one
  the graph store of a release before the engine wrote: see
  :mod:`~lineage_sdk.collector.stores.graph_legacy`, which copies and drops that model).
* Where the contract leaves a choice, this module makes memory's
  (:mod:`~lineage_sdk.collector.stores.memory`), with the contract's ordering and latest-run
  helpers (:func:`~lineage_sdk.collector.backend.sort_runs`, ``latest_of``, ``follows``).
* The walk's reads (``edges``, ``nodes`` by key, ``runs(latest=1)``, column edges by field)
  return only what a row needs, and no more rows than the answer: the key a row was asked by
  (mapped back to its names here) and its times as one text (every ``name_key`` is 32
  characters, every :func:`format_time` text 27), the latest run of each job picked by the
  server. A client pays for every value it parses (FalkorDB's Python client about 0.7 µs, more
  than the server spends on it). At 100,000 events (bench/bench_engine.py, against the graph
  store in the same run; four runs before, five after, at load 3-6 on two cores), new/old p50
  and p95: lineage depth 10 from 2.01-2.05x and 1.32-2.15x to 1.09-1.18x and 1.00-1.31x,
  ``asOf`` from 2.36-2.88x and 1.63-2.62x to 0.81-0.88x and 0.63-0.83x, column lineage depth 5
  from 1.30-1.38x and 1.31-1.46x to 1.04-1.13x and 0.96-1.13x.
* A few reads are phrased per server by a :class:`GraphTactics`; the defaults suit Neo4j, and
  :mod:`~lineage_sdk.collector.stores.falkordb` holds FalkorDB's, chosen by a dialect probe at
  :meth:`GraphBackend.open`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import fields
from datetime import datetime
from functools import lru_cache
from itertools import islice
from operator import attrgetter
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
from lineage_sdk.collector.records import format_time, micros, parse_time
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.store import EventKind, FieldRef, Page
from lineage_sdk.collector.stores.falkordb import tactics_for, windowed_events
from lineage_sdk.collector.stores.graph_legacy import (
    GraphPreEngineLayout,
    count_unkeyed_parents,
    count_unnumbered_events,
    key_parent_mentions,
    number_event_times,
)
from lineage_sdk.collector.stores.graph_runner import (
    GraphRunner,
    Neo4jRunner,
    detect_dialect,
    name_key,
)
from lineage_sdk.collector.stores.graph_tactics import INDEXED, NEO4J, GraphTactics
from lineage_sdk.collector.stores.settings import GraphStoreConfig
from lineage_sdk.exceptions import ConfigError, StoreError

__all__ = [
    "DEFAULT_URI",
    "NEO4J",
    "GraphBackend",
    "GraphStoreConfig",
    "GraphTactics",
]

#: The Bolt standard local address, assumed for a connection name that is not configured.
DEFAULT_URI = "bolt://127.0.0.1:7687"


_log = logging.getLogger(__name__)
_LABEL: dict[str, str] = {k: k.title() for k in ("JOB", "DATASET", "SOURCE", "ALIAS")}
_REL: dict[str, str] = {"in": "READS", "out": "WRITES"}
_FIRST, _LAST = micros(datetime.min), micros(datetime.max)  # no bound, as event times (eventUs)
#: The LIMIT of "everything", and the bound of any SKIP or LIMIT sent: FalkorDB (1.4.1, server
#: 8.2.3) takes both modulo 2**32 (LIMIT 2**32 returns no row, LIMIT 2**62 none either, SKIP
#: 2**32 skips none), and no answer here holds 2**31 rows.
_ALL = (1 << 31) - 1


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
        elif rule == "union":  # None is no value (a mention without statements)
            joined = f"{n} + [h IN coalesce({v}, []) WHERE NOT h IN {n}]"
            sets.append(f"{v} = CASE WHEN {n} IS NULL THEN {v} ELSE {joined} END")
    return f"WITH {var}, r{''.join(', ' + w for w in wins)}\nSET " + ",\n    ".join(sets) + "\n"


_NAMED = "ON CREATE SET {v}.namespace = r.{p}Ns, {v}.name = r.{p}Name\n"
# An event vertex is written once (the first wins): a new one, or one the graph store of a release
# before the engine left (:mod:`.graph_legacy`), which has no ``jobKey`` (every event here has one,
# '' without a job) and is taken over whole while the upgrade copies its event.
_APPEND_EVENTS = """UNWIND $rows AS r
MERGE (e:Event {eventId: r.id})
WITH e, r WHERE e.jobKey IS NULL
SET e.eventTime = r.time, e.eventUs = r.us, e.kind = r.kind, e.eventType = r.type, e.runId = r.run,
  e.jobKey = r.jobKey, e.jobNs = r.jobNs, e.jobName = r.jobName, e.parentRunId = r.parent,
  e.namespace = r.ns, e.json = r.json, e.staticKey = NULL
"""
_APPEND_MENTIONS = """UNWIND $rows AS r
MERGE (x:Mention {key: r.key})
ON CREATE SET x.source = r.source, x.sourceId = r.sourceId, x.kind = r.kind,
  x.nodeKey = r.nodeKey, x.namespace = r.ns, x.name = r.name, x.role = r.role,
  x.detail = r.detail, x.parentKey = r.parentKey
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

_DROP_EDGES = "UNWIND $JOB AS k\nMATCH (:Job {key: k})-[e:READS|WRITES]->(:Dataset)\nDELETE e\n"
_DROP_JOB_COLUMNS = "UNWIND $JOB AS k\nMATCH (x:ColumnEdge {jobKey: k})\nDELETE x\n"
_DROP_DATASET_COLUMNS = (
    "UNWIND $DATASET AS k\nMATCH (x:ColumnEdge {outDs: k})\nWHERE x.jobNs IS NULL\nDELETE x\n"
)
_DROP_RUNS = "UNWIND $runs AS k\nMATCH (x:Run {runId: k})\nDELETE x\n"
_DROP_MENTIONS = {  # a run's mentions (replace), an event's (delete)
    source: f"UNWIND ${source}s AS k\nMATCH (x:Mention {{sourceId: k}})\n"
    f"WITH x WHERE x.source = '{source}'\nDELETE x\n"
    for source in ("run", "event")
}
_DROP_PARENT_MENTIONS = (  # a parent's children (replace)
    "UNWIND $parents AS k\nMATCH (x:Mention {nodeKey: k})\n"
    "WITH x WHERE x.source = 'job'\nDELETE x\n"
)
_DROP_NODES = {
    kind: f"UNWIND ${kind} AS k\nMATCH (n:{label} {{key: k}})\n"
    "SET n.firstSeen = NULL, n.lastSeen = NULL, n.holds = NULL\n"
    for kind, label in _LABEL.items()
}
_DROP_DERIVED = (  # every derived row, for a derivation of the whole store
    "MATCH (n) WHERE n:Job OR n:Dataset OR n:Source OR n:Alias OR n:Run OR n:ColumnEdge "
    "OR n:Mention DETACH DELETE n"
)
_META = "MERGE (m:LineageMeta {name: 'derivation'})\nSET m.value = $version\n"
_BARE_NODES = {  # touched vertices that hold no row and link nothing
    kind: f"UNWIND ${kind} AS k\nMATCH (n:{label} {{key: k}})\n"
    "WITH n WHERE n.firstSeen IS NULL AND NOT (n)--()\nDELETE n\n"
    for kind, label in _LABEL.items()
}

# -- reads ---------------------------------------------------------------------------------------

# The walk's step: per edge the frontier key it was asked by (mapped back to its names here) and
# the edge's times as one text, and the far end's names; the bound beside the traversal only when
# there is one. 3 values a row where 6 were (see the module docstring).
_EDGES = {
    (end, io, dated): "UNWIND $keys AS k\n"
    + (
        f"MATCH (:Job {{key: k}})-[x:{rel}]->(f:Dataset)\n"
        if end == "JOB"
        else f"MATCH (f:Job)-[x:{rel}]->(:Dataset {{key: k}})\n"
    )
    + ("WITH k, f, x WHERE x.firstSeen < $until\n" if dated else "")
    + "RETURN k + x.firstSeen + coalesce(x.declared, '') AS t, f.namespace AS ns, f.name AS name\n"
    for end in ("JOB", "DATASET")
    for io, rel in _REL.items()
    for dated in (False, True)
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
_NODES_BY_KEY = {  # the asked key instead of the names, and the times, as one text
    kind: f"UNWIND $keys AS k\nMATCH (n:{label} {{key: k}})\nWHERE n.firstSeen IS NOT NULL\n"
    "RETURN k + n.firstSeen + n.lastSeen AS t, n.holds AS holds\n"
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
_RUN_RETURN = """RETURN x.runId AS runId, x.jobNs AS jns, x.jobName AS jname, x.firstEvent AS first,
  x.lastEvent AS last, x.stateRank AS stateRank, x.state AS state, x.startedAt AS started,
  x.endedAt AS ended, x.parentRunId AS parent, x.rootRunId AS root, x.heartbeatS AS beat
"""
_RUN_COLS = "WITH x WHERE $until IS NULL OR x.firstEvent < $until\n" + _RUN_RETURN
_RUNS = {
    "jobs": "UNWIND $keys AS k\nMATCH (x:Run {jobKey: k})\n" + _RUN_COLS,
    "jobs in": "MATCH (x:Run)\nWHERE x.jobKey IN $keys\n" + _RUN_COLS,
    "ids": "UNWIND $keys AS k\nMATCH (x:Run {runId: k})\n" + _RUN_COLS,
    "parent": "UNWIND $keys AS k\nMATCH (x:Run {parentRunId: k})\n" + _RUN_COLS,
    "all": "MATCH (x:Run)\n" + _RUN_COLS,
}
# ``runs(jobs=.., latest=1)`` picked by the server, one subquery per job: the run of the greatest
# lastEvent (least runId among equal) among those whose events all lie before $until, and every
# run spanning $until. One row a job where every run used to travel: on FalkorDB, 380 jobs of 5
# runs (bench_engine, 100,000 events) took 4.7 ms (server 2.9) where their 1,900 rows took 23
# (server 4.9) and a reduce over each job's collected runs 9-11 (server 6-7). It is what
# ``latest_of`` would make of all the jobs' runs (the bounds are on properties no index serves).
# The asked job key instead of its names, and the four times, as one text: 7 values a row where
# 12 were.
_LATEST_RETURN = """RETURN x.runId AS runId,
  k + x.firstEvent + x.lastEvent + coalesce(x.startedAt, '') + '|' + coalesce(x.endedAt, '') AS t,
  x.stateRank AS stateRank, x.state AS state, x.parentRunId AS parent, x.rootRunId AS root,
  x.heartbeatS AS beat
"""
_LATEST_RUNS = {
    False: """UNWIND $keys AS k
CALL {
  WITH k
  MATCH (x:Run {jobKey: k})
  RETURN x ORDER BY x.lastEvent DESC, x.runId LIMIT 1
}
"""
    + _LATEST_RETURN,
    True: """UNWIND $keys AS k
CALL {
  WITH k
  MATCH (x:Run {jobKey: k})
  WHERE x.firstEvent < $until AND x.lastEvent < $until
  RETURN x ORDER BY x.lastEvent DESC, x.runId LIMIT 1
  UNION
  WITH k
  MATCH (x:Run {jobKey: k})
  WHERE x.firstEvent < $until AND x.lastEvent >= $until
  RETURN x
}
"""
    + _LATEST_RETURN,
}
_EVENT_COLS = """RETURN e.eventId AS id, e.eventTime AS t, e.kind AS kind, e.eventType AS type,
  e.runId AS run, e.jobNs AS jns, e.jobName AS jname, e.parentRunId AS parent,
  e.namespace AS ns, e.json AS json
"""
# Events by a key, the other filters beside it (checked again in Python, ``event_filter``); the
# kinds in the match, so that an index on ``kind`` serves them with the key: an asOf answer's
# JobEvents (``kind = 'job'`` of 380 jobs, none stored) took FalkorDB 4.7 ms of server time
# checking the kind of each of their 3,800 run events (1.3 ms to match them without the kind), and
# 1.9-2.3 ms in all with ``kind`` indexed (see falkordb.py).
_EVENTS_BY = {
    (by, kinds): f"UNWIND $keys AS k\nMATCH (e:Event {{{prop}: k}})\n"
    + ("WHERE e.kind IN $kinds\n" if kinds else "")
    + "WITH e WHERE ($ns IS NULL OR e.namespace = $ns) AND ($low IS NULL OR e.eventUs >= $low)"
    " AND ($high IS NULL OR e.eventUs < $high)\n" + _EVENT_COLS
    for by, prop in (("ids", "eventId"), ("runs", "runId"), ("jobs", "jobKey"))
    for kinds in (False, True)
}
_EVENTS_FILTER = (
    "WITH e WHERE ($ns IS NULL OR e.namespace = $ns) AND ($kinds IS NULL OR e.kind IN $kinds)"
)
_EVENTS_RANGE = "MATCH (e:Event)\nWHERE e.eventUs >= $low AND e.eventUs < $high\n"
_EVENTS_PAGE = {  # one ordered page of a time range (Neo4j)
    desc: _EVENTS_RANGE
    + _EVENTS_FILTER
    + f"\n  AND ($at IS NULL OR e.eventUs {'<' if desc else '>'} $at"
    + " OR (e.eventUs = $at AND e.eventId > $atId))\n"
    + _EVENT_COLS
    + f"ORDER BY t{' DESC' if desc else ''}, id SKIP $offset LIMIT $limit\n"
    for desc in (False, True)
}
_EVENTS_COUNT = (
    _EVENTS_RANGE + _EVENTS_FILTER + " AND ($atId IS NULL OR e.eventId > $atId)\n"
    "RETURN count(e) AS n\n"
)
_MENTIONS = """UNWIND $keys AS k
MATCH (x:Mention {nodeKey: k})
WITH x WHERE ($roles IS NULL OR x.role IN $roles) AND ($until IS NULL OR x.firstSeen < $until)
RETURN x.source AS source, x.sourceId AS id, x.namespace AS ns, x.name AS name, x.role AS role,
  x.firstSeen AS first, x.detail AS detail
"""
# A parent's children: FalkorDB tests the role of every mention of a job by nodeKey (five a job
# at the million, 5.3 ms of server time for 515 jobs and no child); parentKey's index holds the
# parent mentions alone.
_PARENT_MENTIONS = _MENTIONS.replace("{nodeKey: k}", "{parentKey: k}")
_PARENT_ROLE: frozenset[Role] = frozenset({"parent"})
_FIELD_COLS = {side: tuple(f"{side}{p}" for p in ("Ns", "Ds", "Field")) for side in "oi"}


def _column_read(match: str, known: str | None, dated: bool) -> str:
    """A column edge read: by a field key (``known`` the side it names, sent back and mapped to
    the field here) or not; the key, the time and the info's rank as one text."""
    cols = [f"x.{p} AS {p}" for side in "oi" if side != known for p in _FIELD_COLS[side]]
    return (
        match
        + (f"WITH {'k, ' if known else ''}x WHERE x.firstSeen < $until\n" if dated else "")
        + f"RETURN {'k + ' if known else ''}x.firstSeen + x.infoRank AS t, "
        + ", ".join(cols)
        + ", x.jobNs AS jobNs, x.jobName AS jobName, x.info AS info\n"
    )


_COLUMNS = {  # 7 values a row by a field key, where 16 were (5 of them keys no answer needs)
    (by, dated): _column_read(
        "MATCH (x:ColumnEdge)\n"
        if by == "all"
        else f"UNWIND $keys AS k\nMATCH (x:ColumnEdge {{{by}: k}})\n",
        {"outKey": "o", "inKey": "i"}.get(by),
        dated,
    )
    for by in ("outKey", "inKey", "outDs", "inDs", "all")
    for dated in (False, True)
}
_DELETE_READ = "UNWIND $keys AS k\nMATCH (e:Event {eventId: k})\n" + _EVENT_COLS
_DELETE = "UNWIND $keys AS k\nMATCH (e:Event {eventId: k})\nDETACH DELETE e\n"


# -- rows <-> parameters --------------------------------------------------------------------------


def _t(value: datetime | None) -> str | None:
    return None if value is None else format_time(value)


def _us(value: datetime | None) -> int | None:
    return None if value is None else micros(value)


def _time(text: str) -> datetime:
    """A stored row time (:func:`format_time` text, which ``fromisoformat`` reads as it is)."""
    return datetime.fromisoformat(text)


_WIDTH = len(format_time(datetime(2000, 1, 1)))  # every format_time text is this long
_K = len(name_key(""))  # and every key (name_key) this long


def _span(text: str) -> tuple[datetime, datetime | None]:
    """Two row times read as one text (``a.x + coalesce(a.y, '')``), the second perhaps None."""
    return _time(text[:_WIDTH]), _time(text[_WIDTH:]) if len(text) > _WIDTH else None


@lru_cache(maxsize=1 << 16)
def _name_key(key: Key) -> str:
    """A node's ``name_key``, remembered: a walk asks for the same keys level after level."""
    return name_key(*key)


def _key(key: Key | None) -> str:
    return "" if key is None else _name_key(key)


def _job(ns: str | None, name: str | None) -> Key | None:
    return None if ns is None or name is None else (ns, name)


def _node_key(kind: NodeKind, key: Key) -> str:
    return name_key(kind, *key)


def _mention_params(m: MentionRow) -> dict[str, Any]:
    return {
        "key": name_key(m.source, m.source_id, m.kind, *m.key, m.role), "source": m.source,
        "sourceId": m.source_id, "kind": m.kind, "nodeKey": _node_key(m.kind, m.key),
        "ns": m.key[0], "name": m.key[1], "role": m.role, "firstSeen": format_time(m.first_seen),
        "detail": None if m.detail is None else sorted(m.detail),
        "parentKey": _node_key(m.kind, m.key) if m.role == "parent" else None,
    }  # fmt: skip


@lru_cache(maxsize=1 << 16)
def _field_key(ref: FieldRef) -> str:
    """A field's key, remembered (a column walk asks for a level's fields again at the next)."""
    return name_key(ref.namespace, ref.dataset, ref.field)


def _event_params(r: EventRow) -> dict[str, Any]:
    jns, jname = r.job or (None, None)
    return {
        "id": r.event_id, "time": format_time(r.event_time), "us": micros(r.event_time),
        "kind": r.kind,
        "type": r.event_type, "run": r.run_id, "jobKey": _key(r.job),
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


def _latest_run(row: Mapping[str, Any], jobs: Mapping[str, Key]) -> RunRow:
    """A run row read by ``_LATEST_RUNS``: its job the asked key, which leads its times' text."""
    t = row["t"]
    job, t = jobs[t[:_K]], t[_K:]
    started, ended = t[2 * _WIDTH :].split("|")
    return RunRow(
        row["runId"], job, _time(t[:_WIDTH]), _time(t[_WIDTH : 2 * _WIDTH]),
        Ranked(row["stateRank"], row["state"]), _time(started) if started else None,
        _time(ended) if ended else None, row["parent"], row["root"],
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


def _column(row: Mapping[str, Any], fields: Mapping[str, FieldRef], known: str) -> ColumnEdgeRow:
    """A column edge read by :func:`_column_read`; ``fields`` the asked fields by key, when
    ``known`` names the side they are."""
    t, job = row["t"], _job(row["jobNs"], row["jobName"])
    o = fields[t[:_K]] if known == "o" else FieldRef(row["oNs"], row["oDs"], row["oField"])
    i = fields[t[:_K]] if known == "i" else FieldRef(row["iNs"], row["iDs"], row["iField"])
    if known:
        t = t[_K:]
    return ColumnEdgeRow(o, i, job, _time(t[:_WIDTH]), Ranked(t[_WIDTH:], row["info"]))


def _node(kind: NodeKind, row: Mapping[str, Any]) -> NodeRow:
    holds: frozenset[Any] = frozenset(row.get("holds") or ())
    return NodeRow(kind, (row["ns"], row["name"]), _time(row["first"]), _time(row["last"]), holds)


def _statements(rows: Rows) -> list[tuple[str, list[dict[str, Any]]]]:
    """The upserts of ``rows``: events first, then the derived rows (mentions of one key joined
    here, so a batch's run names each node once), each type in key order: concurrent writers on
    Neo4j then lock vertices in one order (``derive`` gives rows in no order)."""
    if any(n.kind not in _LABEL for n in rows.nodes):
        raise ValueError("NAMESPACE node rows are answered from JOB and DATASET rows")
    out: list[tuple[str, list[dict[str, Any]]]] = [
        (_APPEND_EVENTS, [_event_params(e) for e in rows.events])
    ]
    if any(m.kind not in _LABEL for m in rows.mentions):
        raise ValueError("mentions name JOB and DATASET nodes")
    mentions: dict[tuple[Any, ...], MentionRow] = {}
    for m in rows.mentions:
        k = _MENTION_KEY(m)
        mentions[k] = m if k not in mentions else merge(mentions[k], m)
    out.append((_APPEND_MENTIONS, [_mention_params(mentions[k]) for k in sorted(mentions)]))
    for kind in _LABEL:
        out.append((_APPEND_NODES[kind], [
            {"key": _key(n.key), "keyNs": n.key[0], "keyName": n.key[1],
             "firstSeen": format_time(n.first_seen), "lastSeen": format_time(n.last_seen),
             "holds": sorted(n.holds)}
            for n in sorted(rows.nodes, key=_NODE_ORDER) if n.kind == kind
        ]))  # fmt: skip
    for io in _REL:
        out.append((_APPEND_EDGES[io], [
            {"job": _key(e.job), "jobNs": e.job[0], "jobName": e.job[1],
             "dataset": _key(e.dataset), "datasetNs": e.dataset[0],
             "datasetName": e.dataset[1], "firstSeen": format_time(e.first_seen),
             "declared": _t(e.declared)}
            for e in sorted(rows.edges, key=_EDGE_ORDER) if e.io == io
        ]))  # fmt: skip
    out.append((_APPEND_RUNS, [_run_params(r) for r in sorted(rows.runs, key=_run_order)]))
    out.append(
        (_APPEND_COLUMNS, [_column_params(c) for c in sorted(rows.columns, key=_column_order)])
    )
    return [(q, p) for q, p in out if p]


# Rows' keys as key_of gives them, without its per-row walk of the fields' rules (a write
# sorts and joins a batch's rows by them).
_MENTION_KEY = attrgetter("source", "source_id", "kind", "key", "role")
_NODE_ORDER = attrgetter("kind", "key")
_EDGE_ORDER = attrgetter("job", "dataset")


def _run_order(r: RunRow) -> tuple[str, Key]:
    return (r.run_id, r.job or ("", ""))


def _column_order(c: ColumnEdgeRow) -> tuple[FieldRef, FieldRef, Key]:
    return (c.output, c.input, c.job or ("", ""))


def _absent_schema(runner: GraphRunner, dialect: str | None) -> list[str]:
    """The indexes and unique constraints of ``INDEXED`` the server does not list (Neo4j:
    ``SHOW INDEXES`` and ``SHOW CONSTRAINTS``; FalkorDB: ``db.indexes()``, which has no
    constraints); none when the server lists neither (nothing to compare)."""
    dialect = dialect or detect_dialect(runner)

    def single(rows: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(r["l"][0], r["p"][0]) for r in rows if len(r["l"] or ()) == len(r["p"] or ()) == 1}

    unique: set[tuple[str, str]] | None = None  # FalkorDB has no constraints
    try:
        if dialect == "neo4j":
            indexes = single(
                runner.run("SHOW INDEXES YIELD labelsOrTypes AS l, properties AS p RETURN l, p")
            )
            unique = single(
                runner.run(
                    "SHOW CONSTRAINTS YIELD labelsOrTypes AS l, properties AS p, type AS t "
                    "WHERE t IN ['UNIQUENESS', 'NODE_PROPERTY_UNIQUENESS'] RETURN l, p"
                )
            )
        else:
            rows = runner.run("CALL db.indexes() YIELD label, properties RETURN label, properties")
            indexes = {(r["label"], p) for r in rows for p in r["properties"] or ()}
    except StoreError as exc:
        _log.debug("graph schema not listed: %s", exc)
        return []
    absent: list[str] = []
    for label, prop, is_unique in INDEXED:
        if is_unique and unique is not None:
            if (label, prop) not in unique:
                absent.append(f"unique constraint on :{label}({prop})")
        elif (label, prop) not in indexes:
            absent.append(f"index on :{label}({prop})")
    return absent


def _drop_pre_engine_constraint(runner: GraphRunner) -> None:
    """On Neo4j, the graph store of a release before the engine made ``lineage_run_key`` unique
    on ``Run.runId``: a run of two jobs is two Run vertices here, and its copied runs would break
    it. Dropped when it is that one, so the schema makes ``lineage_run_key`` on ``Run.key``."""
    try:
        rows = runner.run(
            "SHOW CONSTRAINTS YIELD name, properties WHERE name = 'lineage_run_key' "
            "RETURN properties"
        )
    except Exception as exc:  # noqa: BLE001 - a server that cannot list them has none of ours
        _log.debug("graph constraints not listed: %s", exc)
        return
    if any(list(r.get("properties") or []) == ["runId"] for r in rows):
        runner.run("DROP CONSTRAINT lineage_run_key IF EXISTS")


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
        if self.tactics.name == "neo4j":
            _drop_pre_engine_constraint(runner)
        for statement in self.tactics.schema:
            try:
                runner.run(statement)
            except Exception as exc:  # noqa: BLE001 - "already indexed"; real faults show on use
                _log.debug("graph schema statement skipped: %s (%s)", statement, exc)
        if numbered := number_event_times(runner):
            _log.info("graph store: %d events given their time as a number (eventUs)", numbered)
        if keyed := key_parent_mentions(runner):
            _log.info("graph store: %d parent mentions given their parentKey", keyed)
        runner.verify()

    def missing(self) -> list[str]:
        """Read-only (``lineage-collector check``): what :meth:`open` would do that is not done:
        the indexes and unique constraints of its schema the server does not list, and the
        events of the layout of a release before the engine, copied at the next open. Raises
        StoreError when the server does not answer."""
        runner = self.runner
        runner.verify()
        found = _absent_schema(runner, self.tactics.name if not self._probe else None)
        if unnumbered := count_unnumbered_events(runner):
            found.append(f"{unnumbered} event(s) without their time as a number (at the next open)")
        if unkeyed := count_unkeyed_parents(runner):
            found.append(f"{unkeyed} parent mention(s) without parentKey (at the next open)")
        earlier = GraphPreEngineLayout(runner).count_raw_events()
        if earlier:
            found.append(
                f"{earlier} event(s) in the layout of a release before the engine (copied into "
                "the new model at the next open, or by lineage-collector store init)"
            )
        return found

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
        keys: dict[str, Any] = {kind: [_key(k) for k in ks] for kind, ks in touched.nodes}
        keys["runs"] = list(touched.runs)
        keys["parents"] = [_node_key("JOB", job) for job in touched.jobs]
        drops = (_DROP_EDGES, _DROP_JOB_COLUMNS, _DROP_DATASET_COLUMNS, _DROP_RUNS,
                 _DROP_MENTIONS["run"], _DROP_PARENT_MENTIONS)  # fmt: skip
        self.runner.run_all(
            [
                *([(_DROP_DERIVED, {})] if touched.every else []),
                *((q, keys) for q in (*drops, *_DROP_NODES.values())),
                *writes,
                *((q, keys) for q in _BARE_NODES.values()),
            ]
        )

    def derivation(self) -> int | None:
        found = self.runner.run(
            "MATCH (m:LineageMeta {name: 'derivation'}) RETURN m.value AS v", {}
        )
        return None if not found else int(found[0]["v"])

    def mark_derivation(self, version: int) -> None:
        self.runner.run(_META, {"version": version})

    # -- reads ----------------------------------------------------------------------------------

    def edges(
        self,
        end: Literal["JOB", "DATASET"],
        keys: Collection[Key],
        io: Io,
        *,
        until: datetime | None = None,
    ) -> Iterable[EdgeRow]:
        if end not in ("JOB", "DATASET"):
            raise ValueError(f"edges end must be JOB or DATASET, not {end!r}")
        if not keys:
            return []
        near = {_name_key(k): k for k in keys}
        query = _EDGES[(end, io, until is not None)]
        # (job, dataset) -> its row. One key came back twice on FalkorDB after three collectors
        # wrote the same events (test_fleet_convergence on a clean clone: a job's inputs listed
        # one dataset twice); the cause is not found (three clients MERGE-ing the same
        # relationships 900 times left none twice). Two rows of one key are joined by their
        # merge rules, as everywhere.
        rows: dict[tuple[Key, Key], EdgeRow] = {}
        spans: dict[str, tuple[datetime, datetime | None]] = {}  # a job's edges share their times
        from_job = end == "JOB"
        for r in self.runner.run(query, {"keys": list(near), "until": _t(until)}):
            t = r["t"]
            span = spans.get(t)
            if span is None:
                span = spans[t] = _span(t[_K:])
            far = (r["ns"], r["name"])
            if from_job:
                row = EdgeRow(near[t[:_K]], far, io, *span)
            else:
                row = EdgeRow(far, near[t[:_K]], io, *span)
            known = rows.get((row.job, row.dataset))
            rows[(row.job, row.dataset)] = row if known is None else merge(known, row)
        if until is None or not self.tactics.recheck:
            return list(rows.values())
        return [r for r in rows.values() if r.first_seen < until]

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
            asked = {_key(k): k for k in keys}
            found: list[NodeRow] = []
            for r in self.runner.run(_NODES_BY_KEY[kind], {"keys": list(asked)}):
                key, times = asked[r["t"][:_K]], r["t"][_K:]
                first, last = _time(times[:_WIDTH]), _time(times[_WIDTH:])
                if (
                    (until is None or first < until)
                    and (namespace is None or key[0] == namespace)
                    and (needle is None or needle in key[1].lower())
                ):
                    found.append(NodeRow(kind, key, first, last, frozenset(r["holds"] or ())))
            return page_of(sorted(found, key=lambda r: r.key), limit, offset, count)
        page_of((), limit, offset, False)  # the arguments' check
        rows: list[NodeRow] = []
        if limit != 0:
            page = {**params, "offset": min(offset, _ALL), "limit": min(limit or _ALL, _ALL)}
            rows = [_node(kind, r) for r in self.runner.run(_NODES_PAGE[kind], page)]
        total = int(self.runner.run(_NODES_COUNT[kind], params)[0]["n"]) if count else len(rows)
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
        for kind in ("JOB", "DATASET"):
            for r in self.runner.run(_NAMESPACES[kind], {"until": _t(until)}):
                first, last = _time(r["first"]), _time(r["last"])
                a, b, holds = spans.get(r["ns"], (first, last, set()))
                spans[r["ns"]] = (min(a, first), max(b, last), holds | {kind})
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
        params: dict[str, Any] = {"until": _t(until)}
        bound = until if self.tactics.recheck else None
        if job_set is not None and latest == 1 and id_set is None and parent is None:
            # the server's answer is latest_of's (each row one of the asked jobs', by its key)
            asked = {_name_key(j): j for j in job_set}
            picked = self.runner.run(
                _LATEST_RUNS[until is not None], {**params, "keys": list(asked)}
            )
            rows = [_latest_run(r, asked) for r in picked]
            if bound is not None:
                rows = [r for r in rows if r.first_event < bound]
        else:
            if job_set is not None:
                by = "jobs in" if self.tactics.runs_by_in else "jobs"
                keys = [_key(j) for j in job_set]
            elif id_set is not None:
                by, keys = "ids", list(id_set)
            else:
                by, keys = ("all", []) if parent is None else ("parent", [parent])
            found = [_run(r) for r in self.runner.run(_RUNS[by], {**params, "keys": keys})]
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
            keyed = {"keys": keys, "ns": namespace, "low": _us(since), "high": _us(until),
                     "kinds": None if kind_set is None else sorted(kind_set)}  # fmt: skip
            query = _EVENTS_BY[(by, kind_set is not None)]
            rows = sorted(filter(wanted, map(_event, self.runner.run(query, keyed))),
                          key=lambda r: r.position)  # fmt: skip
            if descending:  # time descending, ties by id ascending: a stable reversed sort
                rows.sort(key=lambda r: r.event_time, reverse=True)
            return page_of(rows, limit, offset, count)
        page_of((), limit, offset, False)  # the arguments' check
        low = _FIRST if since is None else micros(since)
        high = _LAST if until is None else micros(until)
        params: dict[str, Any] = {"low": low, "high": high, "ns": namespace}
        params["kinds"] = None if kind_set is None else sorted(kind_set)
        total = self._count_events(params, after, descending) if count else 0
        page: list[EventRow] = []
        if limit != 0:
            stop = None if limit is None else offset + limit
            if self.tactics.window_events:
                windowed = windowed_events(
                    self.runner.run, _EVENTS_RANGE, _EVENT_COLS, params, after, descending, stop
                )
                page = list(islice(filter(wanted, map(_event, windowed)), offset, stop))
            else:
                at, at_id = (None, None) if after is None else (micros(after[0]), after[1])
                sliced = {"offset": min(offset, _ALL), "limit": min(limit or _ALL, _ALL)}
                query = _EVENTS_PAGE[descending]
                page = [
                    _event(r)
                    for r in self.runner.run(query, {**params, **sliced, "at": at, "atId": at_id})
                ]
        return Page(page, total if count else len(page))

    def _count_events(
        self, params: dict[str, Any], after: Position | None, descending: bool
    ) -> int:
        """The size of a time range's answer; after a position, the rest of its instant plus the
        range beyond it."""
        if after is None:
            return int(self.runner.run(_EVENTS_COUNT, {**params, "atId": None})[0]["n"])
        at = micros(after[0])
        total = 0
        if params["low"] <= at < params["high"]:
            instant = {**params, "low": at, "high": at + 1}
            total = int(self.runner.run(_EVENTS_COUNT, {**instant, "atId": after[1]})[0]["n"])
        if descending:
            rest = {**params, "high": min(params["high"], at)}
        else:
            rest = {**params, "low": max(params["low"], at + 1)}
        return total + int(self.runner.run(_EVENTS_COUNT, {**rest, "atId": None})[0]["n"])

    def mentions(
        self,
        kind: NodeKind,
        keys: Collection[Key],
        *,
        roles: Collection[Role] | None = None,
        until: datetime | None = None,
        stated: bool = False,
    ) -> Iterable[MentionRow]:
        if kind not in _LABEL or not keys:
            return []
        role_set = None if roles is None else frozenset(roles)
        params = {
            "keys": [_node_key(kind, k) for k in set(keys)],
            "roles": None if role_set is None else sorted(role_set),
            "until": _t(until),
        }
        query = _PARENT_MENTIONS if role_set == _PARENT_ROLE else _MENTIONS
        rows = [
            MentionRow(r["source"], r["id"], kind, (r["ns"], r["name"]), r["role"],
                       _time(r["first"]), None if r["detail"] is None else frozenset(r["detail"]))
            for r in self.runner.run(query, params)
        ]  # fmt: skip
        bound = until if self.tactics.recheck else None
        rows = [
            r
            for r in rows
            if (bound is None or r.first_seen < bound)
            and (role_set is None or r.role in role_set)
            and (r.detail or not stated)
        ]
        return sorted(rows, key=key_of)

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
        asked: dict[str, FieldRef] = {}
        reads: list[tuple[str, list[str], str]]
        if out_set is not None or in_set is not None:
            known = "o" if out_set is not None else "i"
            asked = {_field_key(f): f for f in (out_set if out_set is not None else in_set or ())}
            reads = [("outKey" if known == "o" else "inKey", list(asked), known)]
        elif ds_set is not None:
            keys = [_key(k) for k in ds_set]
            reads = [("outDs", keys, ""), ("inDs", keys, "")]
        else:
            reads = [("all", [], "")]
        rows: list[ColumnEdgeRow] = []
        for by, keys, side in reads:
            query = _COLUMNS[(by, until is not None)]
            rows.extend(
                _column(r, asked, side)
                for r in self.runner.run(query, {"keys": keys, "until": _t(until)})
            )
        if len(reads) > 1:  # an edge within one of the datasets is read twice
            rows = list({(r.output, r.input, job_order(r.job)): r for r in rows}.values())
        bound = until if self.tactics.recheck else None
        if (out_set is not None and in_set is not None) or ds_set is not None or bound is not None:
            rows = [
                r
                for r in rows
                if (out_set is None or r.output in out_set)
                and (in_set is None or r.input in in_set)
                and (ds_set is None or r.output[:2] in ds_set or r.input[:2] in ds_set)
                and (bound is None or r.first_seen < bound)
            ]
        return rows  # a set: its order is free
