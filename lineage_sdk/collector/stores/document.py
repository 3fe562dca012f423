"""The ``document`` store: every raw OpenLineage event, once, in a MongoDB collection (audit trail).

One document per event::

    {_id: <event_id>,                 # the unique index: a redelivered event is a no-op
     raw: "<the event as JSON text>", # the audit copy, read back by events_of_run
     event: {...},                    # a queryable copy whose keys are escaped (see below)
     kind, eventType, eventTime: <BSON date>, eventTimeRaw: "<the original string>",
     runId, parentRunId, rootRunId, job: {namespace, name},
     datasets: [{namespace, name, role: "input"|"output"}], producer, storedAt: <BSON date>,
     # only for events with a columnLineage facet (lineage_sdk.collector.columns):
     columns: [{o, i, out: [ns, dataset, field], in: [...], info}], columnsRank,
     colkeys: ["o:<out field key>", "i:<in field key>", "od:<out dataset key>", "id:..."]}

Why both ``raw`` and ``event``: the text is the audit record, lossless for anything JSON can hold
(integers beyond 64 bits, empty keys, key order) whatever BSON can or cannot represent, and it needs
no decoding rules to read back. The escaped copy keeps every field queryable with ordinary filters
(``{"event.run.facets.my%2Efacet.x": 1}``). Keys are escaped reversibly (``%`` -> ``%25``, ``$`` ->
``%24``, ``.`` -> ``%2E``, NUL -> ``%00``), so no stored key starts with ``$`` or contains ``.``: no
key can act as an operator or a path, on this server or any other. Queries are only ever built from
fixed field names and typed values.

Beside it, ``<collection>_edges``: one document per job edge, what lineage walks read (one indexed
query per hop instead of aggregating the events)::

    {_id: <digest of the five names>, jns, jn, dns, dn, role: "input"|"output",
     firstSeenUs: <least event time stating it, integer microseconds since the epoch>,
     v: <version, bumped by every write>, born: <random, set when the document is created>}

And ``<collection>_nodes``: one document per job and dataset the events name (a run's job, its
parent job, every dataset) and per namespace of theirs, what the catalogue reads list
(``namespaces``, ``jobs``, ``datasets``, ``search``) page by page on an index instead of
grouping every event::

    {_id: <digest of kind and names>, kind: "JOB"|"DATASET"|"NAMESPACE", ns, n: <name, or "">,
     v: <version>, born}

Written like the edges (after the events, skipped when known), removed after a deletion when no
remaining event names the node, or no remaining node is in the namespace (compare-and-set on
``v`` and ``born``), derived at ``open`` for a database from before them; until that has
finished, the reads group the events as before.

And ``<collection>_adjacency``: the job edges again, one document per job or dataset that has
any, so that a lineage walk reads one document per node by ``_id`` instead of an edge query per
namespace (a node's edges were about three documents, and SecantusDB's cost is per document)::

    {_id: <the node's _id in _nodes>, input: {<far end>: <firstSeenUs>, ...}, output: {...},
     v: <version>, born, spilled: <true once the document outgrew the server's limit>}

A job's ``input`` holds the datasets it reads, a dataset's ``input`` the jobs that read it; a far
end is ``<escaped namespace>%/<escaped name>`` (``%/`` never occurs in an escaped text). Written
with the edges (``$min``, right after them), refreshed from the edges after a deletion
(compare-and-set on ``v`` and ``born``: the version is read before the edges, and a writer
upserts the edge before its adjacency), derived from the edges at ``open`` for a database from
before it; until that has finished, the walks query the edges as before. A node with so many
edges that its document would pass the server's 16 MB is marked ``spilled``, and walks query its
edges instead.

And ``<collection>_runs`` and ``<collection>_latest``: what a job's latest run and its runs read,
so that a lineage answer costs one lookup per job and a job's runs a document each, not a pass
over every event of its jobs (a streaming consumer's heartbeats grow without bound)::

    runs:   {_id: <digest of the run id>, run: <run id>, jobs: [{ns, n}, ...], firstUs, lastUs,
             st: <state rank text>, startedUs, endedUs, parent: <least parent run id>,
             hb: <greatest heartbeat interval>, v, born}
    latest: {_id: <digest of the job's node>, ns, n, us: <its latest run event>, run, v, born}

A run's fields aggregate its events (``$min``/``$max``/``$addToSet``, any order), a job's latest
run is the run of its latest run event (the least run id among equal times: a pipeline update
that compares), both written after the batch's events, derived again from the remaining events
after a deletion (compare-and-set, as the edges), and derived at ``open`` for a database from
before them; until that has finished, the reads fold the events as before.

``firstSeenUs`` is exact to the microsecond (a BSON date holds milliseconds), so ``asOf`` lineage
is the walk of the edges first seen by then and equals history's fold of the raw events
(:meth:`DocumentLineageStore.lineage_as_of`). Kept by the writes (``$min``), recomputed from the
remaining events after a deletion (compare-and-set on ``v`` and ``born``), derived from the events
at ``open`` for a database from before them (marker ``_id: "backfill"``). Edge queries are
equality then ``$in`` on ``lineage_edge_j`` (job ns, role, job name) or ``lineage_edge_d``.

Writes are ``insert_many(ordered=False)``: duplicate-key errors (E11000) are the idempotency working
and are ignored; every other error raises :class:`~lineage_sdk.exceptions.StoreError`. The events
go first, their edges after (a bulk upsert of those this store has not written at that time or
earlier, see ``_to_write``), so a deletion that recomputes an edge sees the event or is told
by the edge's version.

Reads are written so that a simple planner can use the indexes too: each ``$match`` that opens a
pipeline holds only equality (and ``$in`` on the last field) over one index's fields, one query per
namespace, and everything else is filtered in a later stage or in Python. SecantusDB, for one,
scans the collection for ``$or``, ``$elemMatch``, ``$in`` on two fields, or any other predicate
beside an ``$in``, even a range on the index's next field (500 jobs' newest events: 76 s with
``runId: {$type: "string"}`` in the first ``$match``, 1 s with it in a second), and its cost per
``$in`` value grows with the list, hence at most ``_IN_BATCH`` values a query. Bounded reads
are not hinted: given a hint, SecantusDB walks the whole index whatever the filter (a job's events
by time: 12 s hinted, 7 ms not, on 20,000 events); its planner finds the index by itself.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import logging
import os
import re
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Literal, TypeVar
from urllib.parse import urlsplit

import orjson
from pydantic import Field

from lineage_sdk.collector.columns import (
    ColumnEdge,
    ColumnRoot,
    column_edges,
    dataset_key,
    edge_rank,
    field_key,
    walk_columns,
)
from lineage_sdk.collector.keyed import cut_keys, keyed_graph, walk_keys
from lineage_sdk.collector.records import (
    latest_run_entry,
    latest_span,
    parse_event_time,
    state_rank,
    state_rank_time,
)
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.store import (
    BaseLineageStore,
    ColumnGraph,
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
    named_connection,
    node_id,
    parse_node_id,
    unknown_as_of,
)
from lineage_sdk.config.redaction import redact
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.config.sections import Section
from lineage_sdk.exceptions import ConfigError, StoreError
from lineage_sdk.models.run_state import (
    TERMINAL_STATES,
    fold_states,
    heartbeat_interval,
    pick_interval,
    pick_link,
    state_key,
)

__all__ = [
    "DocumentLineageStore",
    "DocumentStoreConfig",
    "escape_key",
    "escape_keys",
    "unescape_key",
    "unescape_keys",
]

_log = logging.getLogger(__name__)

#: MongoDB's standard local address, assumed for a connection name that is not configured.
DEFAULT_URI = "mongodb://127.0.0.1:27017"
STORE_NAME = "document"
DEFAULT_DATABASE = "lineage"
DUPLICATE_KEY = 11000
# Server error codes that will fail the same way on every retry.
_PERMANENT_CODES = frozenset({2, 9, 14, 17, 52, 55, 121, 10334, 17419, 16733})
_INT64 = (-(2**63), 2**63 - 1)
# Values escape_keys keeps as they are without looking; it looks inside everything else.
_SCALARS = frozenset({str, float, bool, type(None)})
#: A job's or a dataset's (namespace, name): how the walks know nodes.
_Name = tuple[str, str]
#: A job edge: (job namespace, job name, dataset namespace, dataset name, role).
_Edge = tuple[str, str, str, str, str]
#: A catalogue node: (its type, namespace, name); a namespace is ("NAMESPACE", namespace, "").
_Node = tuple[NodeType | Literal["NAMESPACE"], str, str]
_NAMESPACE: Literal["NAMESPACE"] = "NAMESPACE"
_T = TypeVar("_T")
_K = TypeVar("_K")
#: Jobs and datasets, then namespaces: the order nodes are written and removed in.
_NODE_ORDER = (("JOB", "DATASET"), (_NAMESPACE,))
#: The ``_id`` of the edges' and the nodes' backfill markers (their ids are hex digests, never
#: this).
_BACKFILL = "backfill"
#: The ``_id`` of the deletions marker: ``gen``, bumped by every deletion (it empties the
#: writers' caches of known edges), and ``until``, a lease until which one may be running
#: (writers then upsert every edge), re-extended while it runs.
_DELETIONS = "deletions"
_LEASE = timedelta(minutes=10)
#: At most this many known edges are cached per store (then the cache starts again).
_KNOWN_LIMIT = 200_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)
_ONE_MS = timedelta(milliseconds=1)
#: The widest time window of a bounded raw read: a sparse range doubles it window after window.
_MAX_WINDOW = timedelta(days=366 * 100)
#: What an export or retention reads of an event document, and what tells its namespace.
_RAW_FIELDS = {"raw": 1, "eventTime": 1, "eventTimeRaw": 1}
_NAMESPACE_FIELDS = {"job.namespace": 1, "kind": 1, "datasets.namespace": 1}
#: The event fields a run's summary and a job's latest run are derived from.
_RUN_FIELDS = {
    "runId": 1,
    "job": 1,
    "eventType": 1,
    "eventTimeRaw": 1,
    "parentRunId": 1,
    "heartbeatS": 1,
}
#: The most values one ``$in`` lists. mongod's cost per value hardly depends on the list's
#: length, but SecantusDB's grows with it (1,000 documents by ``_id``: 51 ms at 20 a query, 85 at
#: 100, 172 at 250, 302 at 1), and a round trip is cheap. bench_million's lineage d10 over HTTP
#: on SecantusDB at 200,000 events, p95: 294.9 ms at 100, 233.2 at 50, 199.3 at 25, 235.9 at 10.
_IN_BATCH = 25
#: Between an adjacency key's escaped namespace and name: no escaped text holds it.
_FAR = "%/"
_ROLES = ("input", "output")
#: The fields of an edge document the adjacency's backfill reads.
_EDGE_FIELDS = {"jns": 1, "jn": 1, "dns": 1, "dn": 1, "role": 1, "firstSeenUs": 1}
#: The server's "document too large" codes (an update that would pass 16 MB: 17419, 10334).
_TOO_LARGE = frozenset({10334, 17419, 17420})


# ---------------------------------------------------------------------------------------- escaping

_ESCAPES = (("%", "%25"), ("$", "%24"), (".", "%2E"), ("\x00", "%00"))


def escape_key(key: str) -> str:
    """Reversible: ``%`` first, so an escaped key never collides with a literal one; the empty key
    (which not every server accepts) becomes a lone ``%``, which no escaped key can be."""
    if not key:
        return "%"
    for raw, esc in _ESCAPES:
        if raw in key:
            key = key.replace(raw, esc)
    return key


_UNESCAPES = {esc: raw for raw, esc in _ESCAPES}
_ESCAPED = re.compile("|".join(re.escape(esc) for _, esc in _ESCAPES))


def unescape_key(key: str) -> str:
    """:func:`escape_key` undone: each escape, left to right, in one pass."""
    if "%" not in key:
        return key
    if key == "%":
        return ""
    return _ESCAPED.sub(lambda m: _UNESCAPES[m.group()], key)


def escape_keys(value: Any) -> Any:
    """The queryable copy: keys escaped, integers BSON cannot hold kept as their decimal text.

    Copy-on-write: a dict or list with nothing to change is returned as it is (BSON encoding never
    mutates it), which makes the common event, with no key to escape, five times cheaper.
    """
    kind = type(value)
    if kind is dict:
        changed: dict[str, Any] | None = None
        for key, item in value.items():
            new_key = (
                key
                if type(key) is str
                and key
                and "." not in key
                and "$" not in key
                and "%" not in key
                and "\x00" not in key
                else escape_key(str(key))
            )
            new_item = item if type(item) in _SCALARS else escape_keys(item)
            if changed is None:
                if new_key is key and new_item is item:
                    continue
                changed = {}
                for earlier, kept in value.items():  # the unchanged prefix, in order
                    if earlier is key:
                        break
                    changed[earlier] = kept
            changed[new_key] = new_item
        return value if changed is None else changed
    if kind is list:
        copied: list[Any] | None = None
        for index, item in enumerate(value):
            new_item = item if type(item) in _SCALARS else escape_keys(item)
            if copied is None:
                if new_item is item:
                    continue
                copied = value[:index]
            copied.append(new_item)
        return value if copied is None else copied
    if kind is int:
        return value if _INT64[0] <= value <= _INT64[1] else str(value)
    if isinstance(value, Mapping):  # not from JSON: the general, always-copying path
        return {escape_key(str(k)): escape_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [escape_keys(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return escape_keys(int(value))
    return value


def unescape_keys(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {unescape_key(k): unescape_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unescape_keys(v) for v in value]
    return value


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # integers beyond 64 bits
        return json.dumps(value, ensure_ascii=False)


def _static_key(kind: str, namespace: str, name: str) -> str:
    """What a static event describes: ``job`` or ``dataset``, namespace and name."""
    return f"{kind}\x1f{namespace}\x1f{name}"


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _text(value: object, what: str) -> str:
    """Query values are plain strings, never documents: no argument can become an operator."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    return value


# ------------------------------------------------------------------------------------------- store


class DocumentStoreConfig(Section):
    """The collector's `document` store (MongoDB)."""

    collection_name: str = Field(
        default="audit_lineage_events",
        min_length=1,
        description="MongoDB collection for the raw events.",
    )
    document_connection_name: str = Field(
        default="default_mongo",
        min_length=1,
        description="Name of the [lineage.connections.NAME] section with the MongoDB URI.",
    )


class DocumentLineageStore(BaseLineageStore):
    """Raw events in one MongoDB collection; answers the lineage questions from them."""

    name = STORE_NAME
    config_class: ClassVar[type[Section]] = DocumentStoreConfig

    def __init__(
        self, connection: ConnectionConfig, collection_name: str = "audit_lineage_events"
    ) -> None:
        self._connection = connection
        self._collection_name = collection_name
        self._client: Any = None
        self._collection: Any = None
        # edge -> a time its document's firstSeenUs is known to be at most (node -> 0: its
        # document exists), as of deletion generation _known_gen: what a batch need not upsert
        # again (see _to_write)
        self._known: dict[_Edge | _Node, int] = {}
        self._known_gen: Any = None
        # job -> the latest run (time, id) its pointer is known to be at least, as of the same
        # generation: what a batch need not compare again
        self._latest_known: dict[_Name, tuple[int, str]] = {}
        # whether <collection>_adjacency holds every edge (its backfill has finished): once
        # true it stays true until drop()
        self._adjacency_ready = False
        # the width of iter_raw_events' last time window, where the next call starts
        self._raw_window: timedelta | None = None

    @classmethod
    def from_config(cls, config: LineageConfig) -> DocumentLineageStore:
        """Entry point ``lineage_sdk.stores:document``: reads ``[lineage.store.document]``."""
        settings = config.section("store.document", DocumentStoreConfig)
        connection = named_connection(
            config,
            "store.document.document_connection_name",
            settings.document_connection_name,
            default_uri=DEFAULT_URI,
        )
        store = cls(connection.settings, settings.collection_name)
        store.address = connection.describe()
        return store

    # -- lifecycle

    @property
    def collection(self) -> Any:
        """The pymongo collection (connects lazily)."""
        if self._collection is None:
            self._connect()
        return self._collection

    def _connect(self) -> None:
        import pymongo
        from pymongo.errors import ConfigurationError, InvalidURI

        conn = self._connection
        timeout = conn.timeout_ms
        kwargs: dict[str, Any] = {
            "serverSelectionTimeoutMS": timeout,
            "connectTimeoutMS": timeout,
            "socketTimeoutMS": timeout * 3,
            "tz_aware": True,
            "retryWrites": True,
            "appname": "lineage-collector",
        }
        if conn.username is not None:
            kwargs["username"] = conn.username
        if conn.password is not None:
            kwargs["password"] = conn.password
        try:
            client: Any = pymongo.MongoClient(conn.uri, **kwargs)
        except (ConfigurationError, InvalidURI, ValueError, TypeError) as exc:
            raise ConfigError(
                "connections.<document_connection_name>.uri",
                redact(conn.uri, conn.password),
                f"not a usable MongoDB URI: {type(exc).__name__}",
            ) from exc
        db_name = conn.database or _uri_database(conn.uri) or DEFAULT_DATABASE
        self._client = client
        self._collection = client[db_name][self._collection_name]

    def open(self) -> None:
        from pymongo import ASCENDING, DESCENDING

        # Exactly the audit questions: a run's events, a job's runs over time, and the events that
        # read or wrote a dataset. Each secondary index costs the server about as much per insert
        # as the document itself, so there is no index for questions nobody asked, and inputs and
        # outputs share one multikey index (the role is checked after the lookup).
        indexes = [
            ([("runId", ASCENDING), ("eventTime", ASCENDING)], "run_time"),
            (
                [("job.namespace", ASCENDING), ("job.name", ASCENDING), ("eventTime", DESCENDING)],
                "job_time",
            ),
            ([("datasets.namespace", ASCENDING), ("datasets.name", ASCENDING)], "datasets"),
            # Export, import and rebuild read every event in (time, id) order (portability.py).
            ([("eventTime", ASCENDING), ("_id", ASCENDING)], "time"),
        ]
        with self._errors("create indexes"):
            for keys, name in indexes:
                self.collection.create_index(keys, name=f"lineage_{name}")
            # Column lineage: one sparse multikey index, so events without the facet cost nothing.
            self.collection.create_index(
                [("colkeys", ASCENDING)], name="lineage_colkeys", sparse=True
            )
            # Static lineage (JobEvent, DatasetEvent): sparse too, run events cost nothing.
            self.collection.create_index(
                [("staticKey", ASCENDING)], name="lineage_static", sparse=True
            )
            # Whether a parent job is recorded (has_node): sparse, only events naming one cost.
            self.collection.create_index(
                [("parentJob.namespace", ASCENDING), ("parentJob.name", ASCENDING)],
                name="lineage_parent_job",
                sparse=True,
            )
            # A run's children (history's runId): partial, only events naming a parent cost.
            self.collection.create_index(
                [("parentRunId", ASCENDING)],
                name="lineage_parent_run",
                partialFilterExpression={"parentRunId": {"$type": "string"}},
            )
            # The job edges the walks read, from either end; the role before the name, so a
            # hop's query is equality then $in on the last field (see the module docstring).
            for end in ("j", "d"):
                keys = [(f"{end}ns", ASCENDING), ("role", ASCENDING), (f"{end}n", ASCENDING)]
                self.edges.create_index(keys, name=f"lineage_edge_{end}")
            # The catalogue: a kind's nodes in (namespace, name) order; whether a namespace
            # still holds a node (after a deletion).
            self.nodes.create_index(
                [("kind", ASCENDING), ("ns", ASCENDING), ("n", ASCENDING)], name="lineage_node"
            )
            self.nodes.create_index([("ns", ASCENDING)], name="lineage_node_ns")
            # A job's runs (asOf's latest runs, a job's runs page).
            self.runs.create_index(
                [("jobs.ns", ASCENDING), ("jobs.n", ASCENDING)], name="lineage_run_job"
            )
        self._backfill(self.edges, self._edges_of_docs)
        # from the edges, derived first: an older database's edges are complete by now
        self._backfill(self.adjacency, self._adjacency_of_edge_docs, _EDGE_FIELDS, self.edges)
        self._backfill(self.nodes, self._nodes_of_docs)
        self._backfill(self.runs, self._upsert_runs, _RUN_FIELDS)
        self._backfill(self.latest, lambda docs: self._upsert_latest(docs, None), _RUN_FIELDS)

    def missing(self) -> list[str]:
        """What :meth:`open` would create, found read-only (``lineage-collector check``): the
        events collection or its indexes; raises StoreError if the server cannot be reached."""
        with self._errors("list indexes"):
            self.collection.database.client.admin.command("ping")
            if self._collection_name not in self.collection.database.list_collection_names():
                return [f"collection {self._collection_name}"]
            have = set(self.collection.index_information())
        return [] if "lineage_run_time" in have else [f"indexes of {self._collection_name}"]

    def check(self) -> None:
        with self._errors("ping"):
            self.collection.database.client.admin.command("ping")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
            self._collection = None

    # -- writes

    @staticmethod
    def to_document(rec: LineageRecord) -> dict[str, Any]:
        """The stored form of one record (public so tools and tests can reason about it)."""

        doc: dict[str, Any] = {
            "_id": rec.event_id,
            "raw": _json_text(rec.event),
            "event": escape_keys(rec.event),
            "kind": rec.kind,
            "eventType": rec.event_type,
            "eventTime": _utc(rec.event_time),
            "eventTimeRaw": rec.event_time_raw,
            "runId": rec.run_id,
            "parentRunId": rec.parent_run_id,
            "rootRunId": rec.root_run_id,
            "datasets": [
                {"namespace": r.namespace, "name": r.name, "role": role}
                for role, refs in (("input", rec.inputs), ("output", rec.outputs))
                for r in refs
            ],
            "producer": rec.producer,
            "storedAt": datetime.now(UTC),
        }
        if rec.job_namespace is not None and rec.job_name is not None:
            doc["job"] = {"namespace": rec.job_namespace, "name": rec.job_name}
        if rec.kind == "job" and rec.job_namespace is not None and rec.job_name is not None:
            doc["staticKey"] = _static_key("job", rec.job_namespace, rec.job_name)
        elif rec.kind == "dataset" and rec.outputs:
            doc["staticKey"] = _static_key("dataset", rec.outputs[0].namespace, rec.outputs[0].name)
        if rec.parent_job_namespace is not None and rec.parent_job_name is not None:
            doc["parentJob"] = {"namespace": rec.parent_job_namespace, "name": rec.parent_job_name}
        edges = column_edges(rec)
        if edges:
            columns: list[dict[str, Any]] = []
            keys: set[str] = set()
            for (out, src), info in sorted(edges.items()):
                o, i = field_key(out), field_key(src)
                columns.append(
                    {
                        "o": o,
                        "i": i,
                        "out": [out.namespace, out.dataset, out.field],
                        "in": [src.namespace, src.dataset, src.field],
                        "info": info,
                    }
                )
                keys.update(
                    (
                        f"o:{o}",
                        f"i:{i}",
                        f"od:{dataset_key(out.namespace, out.dataset)}",
                        f"id:{dataset_key(src.namespace, src.dataset)}",
                    )
                )
            doc["columns"] = columns
            doc["columnsRank"] = edge_rank(rec.event_time, rec.event_id)
            doc["colkeys"] = sorted(keys)
        heartbeat = heartbeat_interval(rec.event)
        if heartbeat is not None:
            doc["heartbeatS"] = heartbeat
        return doc

    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        """Insert the events, then upsert the job edges and nodes they state
        (:meth:`_upsert_edges`, :meth:`_upsert_nodes`): every stored one's, redelivered ones'
        too, so a batch retried after a failure between the writes still leaves them. Events
        first, so a deletion recomputing an edge or a node from the events either sees the
        event or is told by the version (see :meth:`_refresh_edges`)."""
        if not records:
            return
        from pymongo.errors import BulkWriteError

        seen: set[str] = set()
        docs: list[dict[str, Any]] = []
        times: list[int] = []
        for rec in records:
            if rec.event_id not in seen:  # duplicates inside one batch cost nothing
                seen.add(rec.event_id)
                docs.append(self.to_document(rec))
                times.append(_micros(rec.event_time))
        failure: StoreError | None = None
        cause: BaseException | None = None
        failed: set[int] = set()
        try:
            with self._errors("insert_many"):
                self.collection.insert_many(docs, ordered=False)
        except StoreError as exc:
            cause = exc.__cause__
            if not isinstance(cause, BulkWriteError):
                raise
            details = cause.details or {}
            others = [e for e in details.get("writeErrors", []) if e.get("code") != DUPLICATE_KEY]
            wce = details.get("writeConcernErrors") or []
            if others or wce:  # else every failure was a redelivered event: idempotency
                codes = {e.get("code") for e in others}
                permanent = bool(others) and not wce and codes <= _PERMANENT_CODES
                first = (others or wce)[0]
                failure = StoreError(
                    self.name,
                    f"insert_many failed for {len(others) + len(wce)} event(s): "
                    f"code {first.get('code')}: {str(first.get('errmsg', ''))[:200]}",
                    permanent=permanent,
                )
                failed = {e.get("index") for e in others}
        found: dict[_Edge, int] = {}
        named: set[_Node] = set()
        for index, (doc, when) in enumerate(zip(docs, times, strict=True)):
            if index not in failed:  # the stored events' edges and nodes, even when others failed
                _earliest(found, doc, when)
                named.update(_stated_nodes(doc))
        stated: dict[_Edge | _Node, int] = dict.fromkeys(named, 0)
        stated.update(found.items())
        writes, gen = self._to_write(stated)
        edges = {e: t for e, t in writes.items() if len(e) == 5}
        self._upsert_edges(edges)
        self._upsert_adjacency(edges)
        self._upsert_nodes([n for n in writes if len(n) == 3])
        if gen is not None:
            if len(self._known) + len(writes) > _KNOWN_LIMIT:
                self._known.clear()
            for item, when in writes.items():
                self._known[item] = min(self._known.get(item, when), when)
        stored = [doc for index, doc in enumerate(docs) if index not in failed]
        self._upsert_runs(stored)
        self._upsert_latest(stored, gen)
        if failure is not None:
            raise failure from cause

    # -- job edges: one document per (job, dataset, role), what the walks read

    @property
    def edges(self) -> Any:
        """The pymongo collection of job edges, ``<collection_name>_edges`` beside the events."""
        return self.collection.database[f"{self._collection_name}_edges"]

    @property
    def nodes(self) -> Any:
        """The pymongo collection of jobs and datasets, ``<collection_name>_nodes``."""
        return self.collection.database[f"{self._collection_name}_nodes"]

    @property
    def adjacency(self) -> Any:
        """The pymongo collection of each node's edges, ``<collection_name>_adjacency``."""
        return self.collection.database[f"{self._collection_name}_adjacency"]

    @property
    def runs(self) -> Any:
        """The pymongo collection of run summaries, ``<collection_name>_runs``."""
        return self.collection.database[f"{self._collection_name}_runs"]

    @property
    def latest(self) -> Any:
        """The pymongo collection of jobs' latest runs, ``<collection_name>_latest``."""
        return self.collection.database[f"{self._collection_name}_latest"]

    def drop(self) -> None:
        """Drop the events and everything derived from them (tests and benchmarks clean up with
        this)."""
        with self._errors("drop"):
            for derived in (self.edges, self.adjacency, self.nodes, self.runs, self.latest):
                derived.drop()
            self.collection.drop()
        # what this store remembers having written is gone with them
        self._known.clear()
        self._latest_known.clear()
        self._known_gen = None
        self._adjacency_ready = False

    def _to_write(self, found: Mapping[_Edge | _Node, int]) -> tuple[dict[_Edge | _Node, int], Any]:
        """Which of a batch's edges (with their times) and nodes (0) to upsert, and the deletion
        generation to remember them under (None: remember nothing). Most batches restate edges
        and nodes this store has written already (a job's next run), and an upsert costs the
        server about what inserting the event does: those known to exist (an edge: at that time
        or earlier) are skipped, one ``find_one`` per batch instead. Safe against deletions:
        each bumps ``gen`` (emptying this cache) and holds a lease while it runs (everything is
        upserted then); one that starts after this read reads the events after this batch's
        (inserted before it)."""
        with self._errors("find_one"):
            marker = self.edges.find_one({"_id": _DELETIONS}) or {}
        gen = marker.get("gen", 0)
        if gen != self._known_gen:
            self._known.clear()
            self._latest_known.clear()
            self._known_gen = gen
        until = marker.get("until")
        if until is not None and _utc(until) > datetime.now(UTC):
            return dict(found), None
        known = self._known
        return {e: t for e, t in found.items() if e not in known or known[e] > t}, gen

    def _renew_lease(self, held: float) -> float:
        """Extend the deletion lease when half of it has passed since ``held`` (a monotonic
        time); the time it was last extended."""
        if time.monotonic() - held <= _LEASE.total_seconds() / 2:
            return held
        self._hold_deletion_lease(bump=False)
        return time.monotonic()

    def _versions(self, collection: Any, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """``_id`` -> ``{v, born}`` of the edges or nodes of ``ids`` that exist: what a
        deletion's compare-and-set matches."""
        fields = {"v": 1, "born": 1}
        return {
            d["_id"]: d
            for chunk in _batches(sorted(ids))
            for d in self._find(collection, {"_id": {"$in": chunk}}, fields)
        }

    def _compare_and_set(self, collection: Any, writes: Mapping[_K, Any]) -> list[_K]:
        """Apply ``writes`` (pymongo ``UpdateOne``, ``ReplaceOne`` or ``DeleteOne``, each a
        compare-and-set on one document's ``_id``, ``v`` and ``born``) in one unordered bulk;
        the keys of those to derive again: none when every write took, else all of them (a
        bulk counts what took, not which; one that took is derived again to the same result,
        as a write overtaken by a writer is). A bulk costs SecantusDB a third of the writes
        one by one."""
        if not writes:
            return []
        with self._errors("compare and set"):
            result = collection.bulk_write(list(writes.values()), ordered=False)
        took = result.matched_count + result.deleted_count
        return [] if took == len(writes) else list(writes)

    def _hold_deletion_lease(self, bump: bool) -> None:
        """Tell writers a deletion runs (:meth:`_to_write`): ``gen`` bumped (``bump``) and
        the lease extended to ``_LEASE`` from now."""
        update: dict[str, Any] = {"$max": {"until": datetime.now(UTC) + _LEASE}}
        if bump:
            update["$inc"] = {"gen": 1}
        with self._errors("update_one"):
            self.edges.update_one({"_id": _DELETIONS}, update, upsert=True)

    def _upsert_edges(self, found: Mapping[_Edge, int]) -> None:
        """Upsert each edge with its least time: ``$min`` keeps the least of every statement
        (so any order, redelivery and a rerun backfill leave the same edge) and ``$inc`` bumps
        the version a deletion's compare-and-set reads; ``born`` tells a recreated edge from
        the one a deletion read."""
        if not found:
            return
        from pymongo import UpdateOne

        ops = [
            UpdateOne(
                {"_id": _doc_id(edge)},
                {
                    "$min": {"firstSeenUs": when},
                    "$inc": {"v": 1},
                    "$setOnInsert": {
                        "jns": edge[0],
                        "jn": edge[1],
                        "dns": edge[2],
                        "dn": edge[3],
                        "role": edge[4],
                        "born": os.urandom(8).hex(),
                    },
                },
                upsert=True,
            )
            for edge, when in sorted(found.items())
        ]
        self._bulk_upsert(self.edges, ops, "upsert edges")

    # -- adjacency: each node's edges on one document, what the walks read

    def _upsert_adjacency(self, found: Mapping[_Edge, int]) -> None:
        """Put each edge, with its least time (``$min``), on both ends' adjacency documents:
        one update per node however many of its edges the batch states; ``$inc`` bumps the
        version a refresh's compare-and-set reads. Called right after :meth:`_upsert_edges`
        with the same edges. A document the server refuses to grow past its limit is marked
        ``spilled`` instead (:meth:`_spill`): the walks then read that node's edges."""
        if not found:
            return
        from pymongo import UpdateOne

        fields: dict[str, dict[str, int]] = {}
        for edge, when in found.items():
            for node_key, field in _adjacency_fields(edge):
                entries = fields.setdefault(node_key, {})
                entries[field] = min(entries.get(field, when), when)
        ops = [
            UpdateOne(
                {"_id": node_key},
                {
                    "$min": entries,
                    "$inc": {"v": 1},
                    "$setOnInsert": {"born": os.urandom(8).hex()},
                },
                upsert=True,
            )
            for node_key, entries in sorted(fields.items())
        ]
        self._bulk_upsert(self.adjacency, ops, "upsert adjacency", refused=self._spill)

    def _spill(self, node_keys: Iterable[str]) -> None:
        """Mark these adjacency documents ``spilled`` and empty their maps: their nodes have
        more edges than one document holds, so the walks query the edges collection for them
        (which stays complete). A writer's later ``$min`` may refill the maps; walks ignore
        them."""
        for node_key in sorted(node_keys):
            update = {
                "$set": {"spilled": True},
                "$unset": {"input": "", "output": ""},
                "$inc": {"v": 1},
                "$setOnInsert": {"born": os.urandom(8).hex()},
            }
            _log.warning("adjacency of node %s is too large for one document: spilled", node_key)
            with self._errors("spill adjacency"):
                self.adjacency.update_one({"_id": node_key}, update, upsert=True)

    def _refresh_adjacency(self, touched: Iterable[_Edge]) -> None:
        """Set each touched edge's entries on both ends' adjacency documents to what its edge
        document now holds (its time, or no entry when the edge is gone), after
        :meth:`_refresh_edges`; a document left with no entry is removed.

        Compare-and-set, safe while collectors write: each document's version is read before
        the edges, and a writer upserts an edge before its adjacency (bumping the version), so
        a refresh that read an edge too early fails its compare-and-set and reads again, or is
        followed by that writer's ``$min``."""
        by_node: dict[str, dict[str, _Edge]] = {}
        for edge in touched:
            for node_key, field in _adjacency_fields(edge):
                by_node.setdefault(node_key, {})[field] = edge
        pending = sorted(by_node)
        held = time.monotonic()
        while pending:
            missed: list[str] = []
            for batch in _batches(pending):
                held = self._renew_lease(held)
                current = {d["_id"]: d for d in self._find(self.adjacency, {"_id": {"$in": batch}})}
                wanted = {_doc_id(e) for key in batch for e in by_node[key].values()}
                times = {
                    doc["_id"]: doc["firstSeenUs"]
                    for chunk in _batches(sorted(wanted))
                    for doc in self._find(self.edges, {"_id": {"$in": chunk}}, {"firstSeenUs": 1})
                }
                writes = {}
                for node_key in batch:
                    doc = current.get(node_key)
                    if doc is None or doc.get("spilled"):
                        continue  # absent: the writer of a remaining edge upserts it after
                    write = self._refresh_node_adjacency(doc, by_node[node_key], times)
                    if write is not None:
                        writes[node_key] = write
                missed += self._compare_and_set(self.adjacency, writes)
            pending = missed

    def _refresh_node_adjacency(
        self, doc: Mapping[str, Any], fields: Mapping[str, _Edge], times: Mapping[str, int]
    ) -> Any:
        """The compare-and-set of one document for :meth:`_refresh_adjacency` (None: it holds
        what the edges say already)."""
        from pymongo import DeleteOne, UpdateOne

        cas = {"_id": doc["_id"], "v": doc.get("v"), "born": doc.get("born")}
        entries = {
            f"{role}.{far}": when for role in _ROLES for far, when in (doc.get(role) or {}).items()
        }
        changes: dict[str, Any] = {"$set": {}, "$unset": {}}
        for field, edge in fields.items():
            when = times.get(_doc_id(edge))
            if when is None:
                entries.pop(field, None)
                changes["$unset"][field] = ""
            elif entries.get(field) != when:
                entries[field] = when
                changes["$set"][field] = when
        if not entries:
            return DeleteOne(cas)
        update = {op: v for op, v in changes.items() if v}
        if not update:
            return None
        update["$inc"] = {"v": 1}
        return UpdateOne(cas, update)

    def _adjacency_of_edge_docs(self, docs: list[dict[str, Any]]) -> None:
        """The backfill's step for ``<collection>_adjacency``: the edge documents' edges (not
        the markers beside them) put on their ends' documents."""
        self._upsert_adjacency(
            {
                (d["jns"], d["jn"], d["dns"], d["dn"], d["role"]): d["firstSeenUs"]
                for d in docs
                if "role" in d
            }
        )

    def _adjacent(
        self, end: NodeType, keys: Collection[_Name], role: str, until: int | None
    ) -> Iterator[tuple[str, str, str, str]]:
        """:meth:`_edge_rows` from the adjacency documents: one query by ``_id`` per
        ``_IN_BATCH`` nodes, whatever their namespaces; a spilled node's edges are queried."""
        ids = {_doc_id((end, *key)): key for key in sorted(keys)}
        spilled: list[_Name] = []
        for batch in _batches(list(ids)):
            for doc in self._find(self.adjacency, {"_id": {"$in": batch}}, {role: 1, "spilled": 1}):
                key = ids[doc["_id"]]
                if doc.get("spilled"):
                    spilled.append(key)
                    continue
                for far, when in (doc.get(role) or {}).items():
                    if until is None or when <= until:
                        fns, fn = _far_name(far)
                        yield (*key, fns, fn) if end == "JOB" else (fns, fn, *key)
        if spilled:
            yield from self._edge_rows("j" if end == "JOB" else "d", spilled, role, until)

    def _find(
        self, collection: Any, query: Mapping[str, Any], fields: Mapping[str, int] | None = None
    ) -> list[dict[str, Any]]:
        with self._errors("find"):
            return list(collection.find(query, fields))

    def _upsert_nodes(self, named: Iterable[_Node]) -> None:
        """Upsert each node, the jobs and datasets before their namespaces (a deletion's check
        of a namespace reads its nodes: see :meth:`_refresh_nodes`); ``$inc`` bumps the version
        a deletion's compare-and-set reads, and ``born`` tells a recreated node from the one a
        deletion read (as for the edges)."""
        from pymongo import UpdateOne

        named = set(named)
        for kinds in _NODE_ORDER:
            ops = [
                UpdateOne(
                    {"_id": _doc_id(node)},
                    {
                        "$inc": {"v": 1},
                        "$setOnInsert": {
                            "kind": node[0],
                            "ns": node[1],
                            "n": node[2],
                            "born": os.urandom(8).hex(),
                        },
                    },
                    upsert=True,
                )
                for node in sorted(n for n in named if n[0] in kinds)
            ]
            self._bulk_upsert(self.nodes, ops, "upsert nodes")

    def _upsert_runs(self, docs: Sequence[Mapping[str, Any]]) -> None:
        """Upsert the summary of each run the event documents ``docs`` belong to: ``$min`` and
        ``$max`` of their times, state rank and links, the jobs they name added to a set (so any
        order and redelivery leave the same summary); ``$inc`` bumps the version a deletion's
        compare-and-set reads."""
        from pymongo import UpdateOne

        ops = []
        for run_id, agg in sorted(_run_aggregates(docs).items()):
            low = {k: agg[k] for k in ("firstUs", "startedUs", "parent") if k in agg}
            high = {k: agg[k] for k in ("lastUs", "st", "endedUs", "hb") if k in agg}
            update = {
                "$min": low,
                "$max": high,
                "$addToSet": {"jobs": {"$each": agg["jobs"]}},
                "$inc": {"v": 1},
                "$setOnInsert": {"run": run_id, "born": os.urandom(8).hex()},
            }
            ops.append(UpdateOne({"_id": _run_doc_id(run_id)}, update, upsert=True))
        self._bulk_upsert(self.runs, ops, "upsert runs")

    def _upsert_latest(self, docs: Sequence[Mapping[str, Any]], gen: Any) -> None:
        """Move each job's latest-run pointer to the batch's latest run of the job where that
        is later (or, at the same time, a lesser run id): one pipeline update that compares, so
        writers in any order leave the latest. ``gen`` (None: remember nothing) is the deletion
        generation under which the pointers this store wrote are remembered and not compared
        again (see :meth:`_to_write`)."""
        from pymongo import UpdateOne

        known = self._latest_known
        ops = []
        wrote: dict[_Name, tuple[int, str]] = {}
        for job, (us, run_id) in sorted(_latest_of_docs(docs).items()):
            have = known.get(job) if gen is not None else None
            if have is not None and not _later((us, run_id), have):
                continue
            wrote[job] = (us, run_id)
            newer = {
                "$or": [
                    {"$gt": [us, "$us"]},
                    {"$and": [{"$eq": [us, "$us"]}, {"$lt": [run_id, "$run"]}]},
                ]
            }
            stage = {
                "ns": job[0],
                "n": job[1],
                "us": {"$cond": [newer, us, "$us"]},
                "run": {"$cond": [newer, run_id, "$run"]},
                "v": {"$add": [{"$ifNull": ["$v", 0]}, 1]},
                "born": {"$ifNull": ["$born", os.urandom(8).hex()]},
            }
            ops.append(UpdateOne({"_id": _doc_id(("JOB", *job))}, [{"$set": stage}], upsert=True))
        self._bulk_upsert(self.latest, ops, "upsert latest runs")
        if gen is not None:
            if len(known) + len(wrote) > _KNOWN_LIMIT:
                known.clear()
            known.update(wrote)

    def _bulk_upsert(
        self,
        collection: Any,
        ops: Sequence[Any],
        action: str,
        refused: Callable[[set[str]], None] | None = None,
    ) -> None:
        """``ops`` (upserts) in unordered bulks of 1,000. With ``refused``, the ``_id`` of each
        document the server will not grow past its size limit goes to it instead of raising
        (the rest of the bulk is written: it is unordered)."""
        from pymongo.errors import BulkWriteError

        for start in range(0, len(ops), 1000):
            pending = list(ops[start : start + 1000])
            for attempt in range(3):
                try:
                    with self._errors(action):
                        collection.bulk_write(pending, ordered=False)
                    break
                except StoreError as exc:
                    # Two writers inserting one new document at once: the loser's upsert fails
                    # on the unique _id and succeeds as an update when tried again.
                    cause = exc.__cause__
                    errors = (
                        (cause.details or {}).get("writeErrors", [])
                        if isinstance(cause, BulkWriteError)
                        else None
                    )
                    if not errors:
                        raise
                    if refused is not None:
                        too_large = [e for e in errors if e.get("code") in _TOO_LARGE]
                        if too_large:
                            refused({e["op"]["q"]["_id"] for e in too_large})
                            errors = [e for e in errors if e.get("code") not in _TOO_LARGE]
                            if not errors:
                                break
                    if attempt == 2 or any(e.get("code") != DUPLICATE_KEY for e in errors):
                        raise
                    pending = [pending[e["index"]] for e in errors]

    def _least_times(self, job: tuple[str, str], wanted: set[_Edge]) -> dict[_Edge, int]:
        """The least time each of ``wanted`` (edges of ``job``) is stated at by the stored
        events; an edge no event states is left out. Reads the job's events oldest first on
        the ``job_time`` index and stops after the millisecond that completes the set (the
        index orders by millisecond, the microsecond comes from ``eventTimeRaw``)."""
        found: dict[_Edge, int] = {}
        query = {"job.namespace": job[0], "job.name": job[1]}
        fields = {"job": 1, "datasets": 1, "eventTime": 1, "eventTimeRaw": 1}
        group_ms: Any = None
        with self._errors("find"):
            cursor = self.collection.find(query, fields).sort([("eventTime", 1)]).batch_size(200)
            try:
                for doc in cursor:
                    if doc["eventTime"] != group_ms:
                        if len(found) == len(wanted):
                            break
                        group_ms = doc["eventTime"]
                    when = _micros(_raw_time(doc))
                    for edge in _stated_edges(doc):
                        if edge in wanted and (edge not in found or when < found[edge]):
                            found[edge] = when
            finally:
                cursor.close()
        return found

    def _refresh_edges(self, touched: Iterable[_Edge]) -> None:
        """Recompute each touched edge from the stored events (its least time, or no edge when
        no event states it any more), after events were deleted.

        Compare-and-set, safe while collectors write: the edge's version (and ``born``) are
        read before the events, and the new time is set (or the edge deleted) only if they
        are unchanged, else read again. A writer inserts its event before it upserts the
        edge (bumping the version), so a recomputation that missed a new event fails its
        compare-and-set, or is followed by that writer's ``$min``. An edge that is absent is
        left to the writers (one whose event is stored upserts it after). The edges of 25 jobs
        at a time: one read of their versions, then each job's events, then one bulk."""
        from pymongo import DeleteOne, UpdateOne

        pending: dict[_Name, set[_Edge]] = {}
        for edge in touched:
            pending.setdefault((edge[0], edge[1]), set()).add(edge)
        held = time.monotonic()
        while pending:
            missed: dict[_Name, set[_Edge]] = {}
            for jobs in _batches(sorted(pending)):
                held = self._renew_lease(held)
                ids = {_doc_id(edge): edge for job in jobs for edge in pending[job]}
                current = self._versions(self.edges, ids)
                writes: dict[_Edge, Any] = {}
                for job in jobs:
                    live = {edge for edge in pending[job] if _doc_id(edge) in current}
                    least = self._least_times(job, live)
                    for edge in sorted(live):
                        doc = current[_doc_id(edge)]
                        cas = {"_id": doc["_id"], "v": doc.get("v"), "born": doc.get("born")}
                        if edge in least:
                            update = {"$set": {"firstSeenUs": least[edge]}, "$inc": {"v": 1}}
                            writes[edge] = UpdateOne(cas, update)
                        else:
                            writes[edge] = DeleteOne(cas)
                for edge in self._compare_and_set(self.edges, writes):
                    missed.setdefault((edge[0], edge[1]), set()).add(edge)
            pending = missed

    def _refresh_nodes(self, touched: Iterable[_Node]) -> None:
        """Remove each touched node that no stored event names any more, then each touched
        namespace that no remaining node is in, after events were deleted. Compare-and-set, as
        :meth:`_refresh_edges` (the version is read before the events, or the nodes): a writer
        inserts its event before it upserts the nodes, and those before the namespaces, so a
        check that missed a new one fails its compare-and-set, or is followed by that writer's
        upsert."""
        touched = set(touched)
        for kinds in _NODE_ORDER:
            self._remove_unnamed(sorted(n for n in touched if n[0] in kinds))

    def _remove_unnamed(self, pending: list[_Node]) -> None:
        from pymongo import DeleteOne

        held = time.monotonic()
        while pending:
            missed: list[_Node] = []
            for batch in _batches(pending):
                held = self._renew_lease(held)
                ids = {_doc_id(node): node for node in batch}
                current = self._versions(self.nodes, ids)
                linked = self._linked(ids)
                writes: dict[_Node, Any] = {}
                for key, (kind, ns, name) in ids.items():
                    doc = current.get(key)
                    if doc is None or key in linked or self._still_named(kind, ns, name):
                        continue
                    cas = {"_id": key, "v": doc.get("v"), "born": doc.get("born")}
                    writes[(kind, ns, name)] = DeleteOne(cas)
                missed += self._compare_and_set(self.nodes, writes)
            pending = missed

    def _linked(self, ids: Collection[str]) -> set[str]:
        """Which of these nodes still have an edge, so that an event still names them: those
        with an adjacency document (one left with no entry is removed; after
        :meth:`_refresh_adjacency`, it holds what the remaining events state), unless spilled
        or still being derived. One read by ``_id`` for the batch instead of an event query a
        node (2.3 ms each on SecantusDB)."""
        if not self._adjacency_is_ready():
            return set()
        docs = self._find(self.adjacency, {"_id": {"$in": sorted(ids)}}, {"spilled": 1})
        return {d["_id"] for d in docs if not d.get("spilled")}

    def _still_named(self, kind: NodeType | Literal["NAMESPACE"], ns: str, name: str) -> bool:
        """A job or dataset: whether an event names it; a namespace: whether a node is in it
        (on ``lineage_node_ns``, the namespace's own document being one of the first two)."""
        if kind != _NAMESPACE:
            return self.has_node(kind, ns, name)
        with self._errors("find"):
            docs = list(self.nodes.find({"ns": ns}, {"kind": 1}).limit(2))
        return any(d.get("kind") != _NAMESPACE for d in docs)

    def _refresh_runs(self, touched: Iterable[str]) -> None:
        """Derive again the summary of each touched run from its remaining events (or remove
        it, when none remains), after events were deleted. Compare-and-set, as
        :meth:`_refresh_edges`: the version is read before the events, and a writer inserts
        its event before it upserts the summary."""
        from pymongo import DeleteOne, ReplaceOne

        pending = sorted(set(touched))
        held = time.monotonic()
        while pending:
            missed: list[str] = []
            for batch in _batches(pending):
                held = self._renew_lease(held)
                ids = {_run_doc_id(run_id): run_id for run_id in batch}
                current = self._versions(self.runs, ids)
                remaining = self._find(self.collection, {"runId": {"$in": batch}}, _RUN_FIELDS)
                aggregates = _run_aggregates(remaining)
                writes: dict[str, Any] = {}
                for key, run_id in ids.items():
                    doc = current.get(key)
                    if doc is None:
                        continue  # absent: the writer of a remaining event upserts it after
                    cas = {"_id": key, "v": doc.get("v"), "born": doc.get("born")}
                    agg = aggregates.get(run_id)
                    if agg is None:
                        writes[run_id] = DeleteOne(cas)
                    else:
                        fresh = {**agg, "run": run_id, "v": (doc.get("v") or 0) + 1}
                        writes[run_id] = ReplaceOne(cas, fresh | {"born": doc.get("born")})
                missed += self._compare_and_set(self.runs, writes)
            pending = missed

    def _refresh_latest(self, touched: Iterable[_Name]) -> None:
        """Derive again each touched job's latest-run pointer from its remaining run events
        (or remove it), after events were deleted; compare-and-set as :meth:`_refresh_runs`."""
        from pymongo import DeleteOne, ReplaceOne

        pending = sorted(set(touched))
        held = time.monotonic()
        while pending:
            missed: list[_Name] = []
            for batch in _batches(pending):
                held = self._renew_lease(held)
                ids = {_doc_id(("JOB", *job)): job for job in batch}
                current = self._versions(self.latest, ids)
                latest = self._latest_run_events(batch)
                writes: dict[_Name, Any] = {}
                for key, job in ids.items():
                    doc = current.get(key)
                    if doc is None:
                        continue
                    cas = {"_id": key, "v": doc.get("v"), "born": doc.get("born")}
                    if job not in latest:
                        writes[job] = DeleteOne(cas)
                    else:
                        us, run_id = latest[job]
                        fresh = {"ns": job[0], "n": job[1], "us": us, "run": run_id}
                        fresh |= {"v": (doc.get("v") or 0) + 1, "born": doc.get("born")}
                        writes[job] = ReplaceOne(cas, fresh)
                missed += self._compare_and_set(self.latest, writes)
            pending = missed

    def _backfill(
        self,
        into: Any,
        derive: Callable[[list[dict[str, Any]]], None],
        fields: Mapping[str, int] | None = None,
        source: Any = None,
        batch_size: int = 5000,
    ) -> None:
        """Derive what ``into`` (edges, nodes, runs, latest runs, adjacency) holds for a database
        written before it existed, from its events (or ``source``'s documents: the adjacency's
        are the edges), their ``fields``: in ``_id`` order, ``batch_size`` documents at a time
        (``derive`` upserts theirs), the position kept in a marker document after each batch.
        Resumable and safe to run twice or beside writers (upserts). A database with no events
        is marked done at once. One cursor reads them all, on the
        ``_id`` index: a query per batch (``_id`` after the last, sorted, unhinted) made
        SecantusDB scan and sort the rest of the collection each time (200,000 events: still
        running after 17 minutes at 10 GB)."""
        with self._errors(f"backfill {into.name}"):
            marker = into.find_one({"_id": _BACKFILL})
            if marker is not None and marker.get("done"):
                return
            after = None if marker is None else marker.get("after")
            source = self.collection if source is None else source
            if after is None and source.find_one({}, {"_id": 1}) is None:
                into.update_one({"_id": _BACKFILL}, {"$set": {"done": True}}, upsert=True)
                return
            _log.info("deriving %s from %s", into.name, source.name)
            fields = fields or {"job": 1, "parentJob": 1, "datasets": 1, "eventTimeRaw": 1}
            query = {} if after is None else {"_id": {"$gt": after}}
            # Hinted: unhinted, SecantusDB scans and sorts the collection for the _id range.
            cursor = source.find(query, fields).sort([("_id", 1)]).hint([("_id", 1)])
            with cursor.batch_size(batch_size) as docs:
                while batch := list(itertools.islice(docs, batch_size)):
                    derive(batch)
                    state = {"done": False, "after": batch[-1]["_id"]}
                    into.update_one({"_id": _BACKFILL}, {"$set": state}, upsert=True)
            into.update_one({"_id": _BACKFILL}, {"$set": {"done": True}}, upsert=True)

    def _edges_of_docs(self, docs: list[dict[str, Any]]) -> None:
        found: dict[_Edge, int] = {}
        for doc in docs:
            _earliest(found, doc, _micros(_raw_time(doc)))
        self._upsert_edges(found)
        self._upsert_adjacency(found)

    def _nodes_of_docs(self, docs: list[dict[str, Any]]) -> None:
        self._upsert_nodes({node for doc in docs for node in _stated_nodes(doc)})

    # -- queries

    def events_of_run(self, run_id: str) -> list[dict[str, Any]]:
        query = {"runId": _text(run_id, "run_id")}
        with self._errors("find"):
            docs = list(
                self.collection.find(query, {"raw": 1}).sort([("eventTime", 1), ("_id", 1)])
            )
        return [json.loads(d["raw"]) for d in docs]

    def runs_of_job(
        self, namespace: str, name: str, *, limit: int = 100, offset: int = 0
    ) -> Page[RunSummary]:
        """A job's runs, most recent first (START time, else first event), ties by run id, as
        the sql store pages them. From the job's run summaries (``lineage_run_job``): a document
        a run, however many heartbeats a streaming consumer's run holds. A run other jobs name
        too (its summary counts their events) is folded from this job's events, as every run
        is until the summaries are derived (a database from before them)."""
        check_page(limit, offset)
        job = (_text(namespace, "namespace"), _text(name, "name"))
        if self._ready(self.runs):
            runs, shared = self._job_runs_from_summaries(job)
            if shared:
                runs.extend(self._job_runs_from_events(job, shared))
        else:
            runs = self._job_runs_from_events(job, None)
        # The page is cut here: a run's order needs its START, so the total is the runs'.
        runs.sort(key=lambda p: p[1].run_id)
        runs.sort(key=lambda p: p[0], reverse=True)
        return Page((r for _, r in runs[offset : offset + limit]), len(runs))

    def _job_runs_from_summaries(
        self, job: _Name
    ) -> tuple[list[tuple[datetime, RunSummary]], list[str]]:
        """(order time, summary) of each run only ``job`` names, and the ids of its runs that
        other jobs name too."""
        runs: list[tuple[datetime, RunSummary]] = []
        shared: list[str] = []
        query = {"jobs.ns": job[0], "jobs.n": job[1]}  # multikey: checked per element below
        with self._errors("find"):
            docs = list(self.runs.find(query, {"v": 0, "born": 0}))
        for doc in docs:
            named = {(j["ns"], j["n"]) for j in doc["jobs"]}
            if job not in named:
                continue
            if len(named) > 1:
                shared.append(doc["run"])
                continue
            run = _summary_of_run(doc, *job)
            runs.append((run.started_at or _from_micros(doc.get("firstUs")) or _EPOCH, run))
        return runs, sorted(shared)

    def _job_runs_from_events(
        self, job: _Name, run_ids: Sequence[str] | None
    ) -> list[tuple[datetime, RunSummary]]:
        """(order time, summary) of the job's runs (those of ``run_ids`` only, when given),
        each folded from the job's events of the run."""
        match: dict[str, Any] = {"job.namespace": job[0], "job.name": job[1]}
        # the index's fields first, so any planner uses it; then the run ids
        runs_match: dict[str, Any] = {"runId": {"$type": "string"}}
        batches: Iterable[list[str] | None] = [None] if run_ids is None else _batches(run_ids)
        fields = ("eventTimeRaw", "eventType", "_id", "parentRunId", "heartbeatS")
        out: list[tuple[datetime, RunSummary]] = []
        for batch in batches:
            if batch is not None:
                runs_match = {"runId": {"$in": batch}}
            pipeline = [
                {"$match": match},
                {"$match": runs_match},
                {"$group": {"_id": "$runId", "events": {"$push": {f: f"${f}" for f in fields}}}},
            ]
            with self._errors("aggregate"):
                groups = list(self.collection.aggregate(pipeline))
            for g in groups:
                run = _run_summary(g["_id"], *job, g["events"])
                out.append((run.started_at or min(_raw_time(e) for e in g["events"]), run))
        return out

    def _edge_rows(
        self, end: str, keys: list[tuple[str, str]], role: str, until: int | None
    ) -> Iterator[tuple[str, str, str, str]]:
        """(job ns, job name, dataset ns, dataset name) of the edges in ``role`` whose ``end``
        (``j``: job, ``d``: dataset) is in ``keys``; with ``until``, only those first seen by
        then (microseconds). One query per namespace (and ``_IN_BATCH`` names) on
        ``lineage_edge_<end>``."""
        fields = {"_id": 0, "jns": 1, "jn": 1, "dns": 1, "dn": 1, "firstSeenUs": 1}
        for ns, names in _namespace_batches(keys):
            query = {f"{end}ns": ns, "role": role, f"{end}n": {"$in": names}}
            with self._errors("find"):
                rows = list(self.edges.find(query, fields))
            for r in rows:
                if until is None or r["firstSeenUs"] <= until:
                    yield r["jns"], r["jn"], r["dns"], r["dn"]

    def _job_datasets(
        self, jobs: list[tuple[str, str]], role: str, until: int | None = None
    ) -> set[tuple[str, str, str, str]]:
        """(job ns, job name, dataset ns, dataset name): the datasets in ``role`` of ``jobs``
        (first seen by ``until``, in microseconds, when given)."""
        return set(self._edge_rows("j", jobs, role, until))

    def lineage(
        self,
        node: str,
        *,
        direction: Direction = "both",
        depth: int = 5,
        node_limit: int | None = None,
    ) -> LineageGraph:
        """Jobs and datasets up to ``depth`` job hops from ``node``, edges along the data flow;
        at most ``node_limit`` of them, nearest first (None: every one). One indexed query on
        the edges per step (:mod:`lineage_sdk.collector.keyed`)."""
        kind, namespace, name = parse_node_id(node)
        if depth < 0:
            raise ValueError(f"depth must be >= 0, got {depth}")
        check_node_limit(node_limit)
        key = (_text(namespace, "namespace"), _text(name, "name"))
        return self._lineage(node, (kind, key), direction, depth, node_limit, None)

    def _lineage(
        self,
        node: str,
        root: tuple[NodeType, _Name],
        direction: Direction,
        depth: int,
        node_limit: int | None,
        until: int | None,
    ) -> LineageGraph:
        """The walk of :meth:`lineage` and, with ``until`` (microseconds), of
        :meth:`lineage_as_of`: over the edges first seen by then only. Keys are (namespace,
        name), so no names are read."""

        adjacent = self._adjacency_is_ready()

        def step(
            end: NodeType, keys: Collection[_Name], io: Literal["in", "out"]
        ) -> Iterator[tuple[_Name, _Name]]:
            role = "input" if io == "in" else "output"
            rows = (
                self._adjacent(end, keys, role, until)
                if adjacent
                else self._edge_rows("j" if end == "JOB" else "d", sorted(keys), role, until)
            )
            for jns, jn, dns, dn in rows:
                yield (jns, jn), (dns, dn)

        def names(_: NodeType, keys: list[_Name]) -> dict[_Name, _Name]:
            return {k: k for k in keys}

        walk = walk_keys(step, root, direction, depth, node_limit, names)
        walk, truncated = cut_keys(walk, root, direction, node_limit, names)
        found: dict[NodeType, dict[_Name, _Name]] = {
            "JOB": names("JOB", list(walk.jobs)),
            "DATASET": names("DATASET", list(walk.datasets)),
        }
        graph, _ = keyed_graph(node, root, walk, found, truncated=truncated)
        return graph

    # -- lineage asOf from the edges' first-seen times (history's lineage_as_of hook)

    def lineage_as_of(
        self,
        node: str,
        *,
        direction: Direction = "both",
        depth: int = 5,
        node_limit: int | None = None,
        as_of: datetime,
    ) -> LineageGraph | None:
        """:class:`~lineage_sdk.collector.store.DatedLineageProtocol` over the ``firstSeenUs``
        of ``<collection>_edges``; None while an older database's edges are still derived."""
        kind, namespace, name = parse_node_id(node)
        if depth < 0:
            raise ValueError(f"depth must be >= 0, got {depth}")
        check_node_limit(node_limit)
        if not self._ready(self.edges):
            return None
        key = (_text(namespace, "namespace"), _text(name, "name"))
        if not self._known_as_of(kind, key, as_of):
            raise unknown_as_of(node, as_of)
        graph = self._lineage(node, (kind, key), direction, depth, node_limit, _micros(as_of))
        jobs = [(n.namespace, n.name) for n in graph.nodes.values() if n.type == "JOB"]
        for job, run in self._latest_runs_as_of(jobs, as_of).items():
            graph.nodes[node_id("JOB", *job)].data["latestRun"] = run
        return graph

    def _adjacency_is_ready(self) -> bool:
        """Whether the walks may read ``<collection>_adjacency`` (:meth:`_ready`, remembered
        once true: only :meth:`drop` undoes it)."""
        if not self._adjacency_ready:
            self._adjacency_ready = self._ready(self.adjacency)
        return self._adjacency_ready

    def _ready(self, derived: Any) -> bool:
        """Whether ``derived`` (edges, nodes, runs, latest runs) holds every event's: the
        backfill of :meth:`open` has finished."""
        with self._errors("find_one"):
            marker = derived.find_one({"_id": _BACKFILL}, {"done": 1})
        return marker is not None and bool(marker.get("done"))

    def _known_as_of(self, kind: NodeType, key: tuple[str, str], as_of: datetime) -> bool:
        """Whether an event up to ``as_of`` names the node: a job by one of its own events
        (JobEvents included); a dataset by an edge first seen by then, either way, or by a
        DatasetEvent (what history's generic path decides, see ``_dataset_known``)."""
        ns, name = key
        with self._errors("find"):
            if kind == "JOB":
                query = {
                    "job.namespace": ns,
                    "job.name": name,
                    "eventTime": {"$lte": _ms_floor(as_of)},
                }
                # newest first on the index: past the first millisecond, every time is earlier
                cursor = (
                    self.collection.find(query, {"eventTimeRaw": 1})
                    .sort([("eventTime", -1)])
                    .batch_size(20)
                )
                try:
                    return any(_raw_time(doc) <= as_of for doc in cursor)
                finally:
                    cursor.close()
            until = _micros(as_of)
            for role in ("input", "output"):
                query = {"dns": ns, "role": role, "dn": name}
                for row in self.edges.find(query, {"firstSeenUs": 1}):
                    if row["firstSeenUs"] <= until:
                        return True
            stated = self.collection.find(
                {"staticKey": _static_key("dataset", ns, name)}, {"eventTimeRaw": 1}
            )
            return any(_raw_time(doc) <= as_of for doc in stated)

    def _latest_runs_as_of(
        self, jobs: Sequence[tuple[str, str]], as_of: datetime
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """Each job's latest run as of ``as_of`` as ``LineageFold.latest_run`` puts it: the run
        of its latest run event by then (the least run id among equal times), its state and
        heartbeat interval folded from that run's events by then only.

        From the jobs' runs in ``<collection>_runs`` (``lineage_run_job``): a run whose every
        event lies by then is answered from its summary; only the runs ``as_of`` falls inside
        have their events read. A job with a run other jobs name too (the summary counts their
        events), or a database whose runs are still being derived, is folded from its events
        (:meth:`_latest_runs_as_of_from_events`)."""
        wanted = sorted({(_text(ns, "namespace"), _text(nm, "name")) for ns, nm in jobs})
        if not self._ready(self.runs):
            return self._latest_runs_as_of_from_events(wanted, as_of)
        until = _micros(as_of)
        candidates: dict[_Name, list[dict[str, Any]]] = {}
        for ns, names in _namespace_batches(wanted):
            asked = set(names)
            query = {"jobs.ns": ns, "jobs.n": {"$in": names}}
            with self._errors("find"):
                for doc in self.runs.find(query, {"v": 0, "born": 0}):
                    if doc.get("firstUs", until + 1) > until:
                        continue
                    for job in doc["jobs"]:
                        if job["ns"] == ns and job["n"] in asked:
                            candidates.setdefault((ns, job["n"]), []).append(doc)
        shared = {job for job, docs in candidates.items() if any(len(d["jobs"]) > 1 for d in docs)}
        spanning = sorted(
            {
                doc["run"]
                for job, docs in candidates.items()
                if job not in shared
                for doc in docs
                if doc["lastUs"] > until
            }
        )
        fold, latest_event = self._fold_runs_as_of(spanning, as_of)
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for job, docs in candidates.items():
            if job in shared:
                continue
            by_run = {doc["run"]: doc for doc in docs}
            spans = (
                (r, d["lastUs"] if d["lastUs"] <= until else latest_event.get(r))
                for r, d in by_run.items()
            )
            best = latest_span(spans)
            if best is None:
                continue
            doc = by_run[best[0]]
            if doc["lastUs"] <= until:
                out[job] = latest_run_entry(doc["run"], doc.get("st"), doc.get("hb"))
            else:
                out[job] = fold.latest_run(doc["run"])
        if shared:
            out.update(self._latest_runs_as_of_from_events(sorted(shared), as_of))
        return out

    def _fold_runs_as_of(
        self, runs: Sequence[str], as_of: datetime
    ) -> tuple[RunFold, dict[str, int]]:
        """The runs' states and heartbeat intervals folded from their events by ``as_of`` (read
        on ``lineage_run_time``), and each run's latest event by then (microseconds)."""
        fold = RunFold()
        latest: dict[str, int] = {}
        fields = {"runId": 1, "eventType": 1, "eventTimeRaw": 1, "heartbeatS": 1}
        for batch in _batches(runs):
            with self._errors("find"):
                docs = list(self.collection.find({"runId": {"$in": batch}}, fields))
            for doc in docs:
                when = _raw_time(doc)
                if when <= as_of:
                    run_id, us = doc["runId"], _micros(when)
                    latest[run_id] = max(latest.get(run_id, us), us)
                    state = state_key(doc.get("eventType"), when, doc["_id"])
                    fold.add(run_id, state, doc.get("heartbeatS"))
        return fold, latest

    def _latest_runs_as_of_from_events(
        self, jobs: Sequence[tuple[str, str]], as_of: datetime
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """:meth:`_latest_runs_as_of` folded from the events: the runs found by
        :meth:`_latest_run_events`, their events read on ``lineage_run_time``."""
        latest = {job: run for job, (_, run) in self._latest_run_events(jobs, as_of).items()}
        fold, _ = self._fold_runs_as_of(sorted(set(latest.values())), as_of)
        return {job: fold.latest_run(run_id) for job, run_id in latest.items()}

    # -- catalog: the browsing questions of the HTTP API (sql and graph answer them too)

    def _aggregate(self, pipeline: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        with self._errors("aggregate"):
            return list(self.collection.aggregate(pipeline))

    def _node_names(
        self,
        kind: NodeType | Literal["NAMESPACE"],
        namespace: str | None = None,
        *,
        offset: int = 0,
        limit: int = 0,
    ) -> Iterator[tuple[str, str]]:
        """A kind's nodes (of one namespace), in (namespace, name) order, on ``lineage_node``;
        ``offset`` and ``limit`` (0: no limit) applied by the server."""
        with self._errors("find"):
            cursor = self.nodes.find(self._node_query(kind, namespace), {"_id": 0, "ns": 1, "n": 1})
            cursor = cursor.sort([("kind", 1), ("ns", 1), ("n", 1)]).skip(offset).limit(limit)
            with cursor.batch_size(1000) as docs:
                for doc in docs:
                    yield doc["ns"], doc["n"]

    @staticmethod
    def _node_query(kind: NodeType | Literal["NAMESPACE"], namespace: str | None) -> dict[str, Any]:
        query: dict[str, Any] = {"kind": kind}
        if namespace is not None:
            query["ns"] = _text(namespace, "namespace")
        return query

    def _node_page(
        self, kind: NodeType, namespace: str | None, limit: int, offset: int
    ) -> Page[tuple[str, str]]:
        """One page of a kind's nodes and their count, from the nodes when they are complete,
        else (a backfill still running) by grouping the events."""
        if not self._ready(self.nodes):
            every = self._job_names() if kind == "JOB" else self._dataset_names()
            names = [(ns, n) for ns, n in every if namespace is None or ns == namespace]
            return Page(names[offset : offset + limit], len(names))
        page = list(self._node_names(kind, namespace, offset=offset, limit=limit))
        with self._errors("count"):
            total = int(self.nodes.count_documents(self._node_query(kind, namespace)))
        return Page(page, total)

    def _job_names(self) -> list[tuple[str, str]]:
        """Every job named by an event, as a job or as a run's parent job (grouping the events:
        only until the nodes are complete)."""
        found: set[tuple[str, str]] = set()
        for field in ("job", "parentJob"):
            group = {"_id": {"ns": f"${field}.namespace", "n": f"${field}.name"}}
            for row in self._aggregate([{"$group": group}]):
                ns, n = row["_id"].get("ns"), row["_id"].get("n")
                if isinstance(ns, str) and isinstance(n, str):
                    found.add((ns, n))
        return sorted(found)

    def _dataset_names(self) -> list[tuple[str, str]]:
        pipeline: list[dict[str, Any]] = [
            {"$project": {"datasets": 1}},
            {"$unwind": "$datasets"},
            {"$group": {"_id": {"ns": "$datasets.namespace", "n": "$datasets.name"}}},
        ]
        found = {(r["_id"].get("ns"), r["_id"].get("n")) for r in self._aggregate(pipeline)}
        return sorted((ns, n) for ns, n in found if isinstance(ns, str) and isinstance(n, str))

    def namespaces(self, *, limit: int | None = None, offset: int = 0) -> Page[str]:
        check_page(limit, offset)
        if self._ready(self.nodes):
            found = {ns for ns, _ in self._node_names(_NAMESPACE)}
        else:
            found = {ns for ns, _ in self._job_names()} | {ns for ns, _ in self._dataset_names()}
        names = sorted(ns for ns in found if isinstance(ns, str))
        end = None if limit is None else offset + limit
        return Page(names[offset:end], len(names))

    def dataset_namespaces(self) -> list[str]:
        """From the nodes: per namespace node, one dataset node looked up on ``lineage_node``."""
        if not self._ready(self.nodes):
            return sorted({ns for ns, _ in self._dataset_names()})
        found: list[str] = []
        for ns, _ in self._node_names(_NAMESPACE):
            with self._errors("find_one"):
                if self.nodes.find_one(self._node_query("DATASET", ns), {"_id": 1}) is not None:
                    found.append(ns)
        return found

    def _latest_run_events(
        self, jobs: Sequence[tuple[str, str]], as_of: datetime | None = None
    ) -> dict[tuple[str, str], tuple[int, str]]:
        """Each job's latest run event (by ``as_of`` when given) as (microseconds, run id): the
        time of its latest run event and the least run id among equal times, to the microsecond
        as sql and graph order them. One
        aggregate per namespace and ``_IN_BATCH`` jobs on ``lineage_job_time``: each job's events
        of its newest millisecond, whose ``eventTimeRaw`` settles the order (and, in the
        millisecond of ``as_of``, whether they count; where none does, the job is asked again
        strictly before it)."""
        wanted = sorted({(_text(ns, "namespace"), _text(nm, "name")) for ns, nm in jobs})
        floor = None if as_of is None else _ms_floor(as_of)
        bounds = [None] if floor is None else [{"$lte": floor}, {"$lt": floor}]
        out: dict[tuple[str, str], tuple[int, str]] = {}
        for bound in bounds:
            left: list[tuple[str, str]] = []
            for ns, names in _namespace_batches(wanted):
                # Equality and the $in alone in the first $match, the rest in a second: beside
                # the $in, SecantusDB scans the collection for either (see the module docstring).
                second: dict[str, Any] = {"runId": {"$type": "string"}}
                if bound is not None:
                    second["eventTime"] = bound
                pipeline: list[dict[str, Any]] = [
                    {"$match": {"job.namespace": ns, "job.name": {"$in": names}}},
                    {"$match": second},
                    {
                        "$group": {
                            "_id": {"n": "$job.name", "t": "$eventTime"},
                            "ev": {"$push": {"run": "$runId", "raw": "$eventTimeRaw"}},
                        }
                    },
                    {"$sort": {"_id.n": 1, "_id.t": -1}},
                    {"$group": {"_id": "$_id.n", "ev": {"$first": "$ev"}}},
                ]
                for row in self._aggregate(pipeline):
                    job = (ns, row["_id"])
                    times = ((parse_event_time(e["raw"]), e["run"]) for e in row["ev"])
                    counted = [(t, run) for t, run in times if as_of is None or t <= as_of]
                    if not counted:
                        left.append(job)  # its newest millisecond is as_of's, all after as_of
                        continue
                    latest = max(t for t, _ in counted)
                    out[job] = (_micros(latest), min(run for t, run in counted if t == latest))
            wanted = left
            if not wanted:
                break
        return out

    def latest_runs(self, jobs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], RunSummary]:
        """Each job's latest run: its pointer in ``<collection>_latest``, then that run's summary
        in ``<collection>_runs``, ``_IN_BATCH`` of each a query; until those are derived (a
        database from before them), folded from the jobs' events (:meth:`_latest_run_events`,
        then the runs' events on ``lineage_run_time``)."""
        wanted = sorted({(_text(ns, "namespace"), _text(nm, "name")) for ns, nm in jobs})
        if not (self._ready(self.runs) and self._ready(self.latest)):
            return self._latest_runs_from_events(wanted)
        chosen: dict[tuple[str, str], str] = {}
        for batch in _batches([_doc_id(("JOB", *job)) for job in wanted]):
            with self._errors("find"):
                for doc in self.latest.find({"_id": {"$in": batch}}, {"ns": 1, "n": 1, "run": 1}):
                    chosen[(doc["ns"], doc["n"])] = doc["run"]
        summaries: dict[str, dict[str, Any]] = {}
        for batch in _batches(sorted({_run_doc_id(run) for run in chosen.values()})):
            with self._errors("find"):
                summaries.update((d["run"], d) for d in self.runs.find({"_id": {"$in": batch}}))
        return {
            job: _summary_of_run(summaries[run_id], *job)
            for job, run_id in chosen.items()
            if run_id in summaries
        }

    def _latest_runs_from_events(
        self, jobs: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], RunSummary]:
        """:meth:`latest_runs` folded from the events: each job's latest run
        (:meth:`_latest_run_events`), its events folded by the rules of ``models.run_state``."""
        latest = {job: run for job, (_, run) in self._latest_run_events(jobs).items()}
        runs = sorted(set(latest.values()))
        fields = {"runId": 1, "eventTimeRaw": 1, "eventType": 1, "parentRunId": 1, "heartbeatS": 1}
        docs_of: dict[str, list[dict[str, Any]]] = {}
        for batch in _batches(runs):
            with self._errors("find"):
                docs = self.collection.find({"runId": {"$in": batch}}, fields)
                for doc in docs:
                    docs_of.setdefault(doc["runId"], []).append(doc)
        return {
            job: _run_summary(run_id, *job, docs_of.get(run_id, []))
            for job, run_id in latest.items()
        }

    def jobs(
        self, namespace: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> Page[JobSummary]:
        check_page(limit, offset)
        page = self._node_page("JOB", namespace, limit, offset)
        ins = self._job_datasets(page, "input") if page else set()
        outs = self._job_datasets(page, "output") if page else set()
        runs = self.latest_runs(page)
        out: list[JobSummary] = []
        for ns, n in page:
            out.append(
                JobSummary(
                    ns,
                    n,
                    runs.get((ns, n)),
                    tuple(sorted((d, dn) for j, jn, d, dn in ins if (j, jn) == (ns, n))),
                    tuple(sorted((d, dn) for j, jn, d, dn in outs if (j, jn) == (ns, n))),
                )
            )
        return Page(out, page.total)

    def datasets(
        self, namespace: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> Page[tuple[str, str]]:
        check_page(limit, offset)
        return self._node_page("DATASET", namespace, limit, offset)

    def has_node(self, node_type: NodeType, namespace: str, name: str) -> bool:
        ns, nm = _text(namespace, "namespace"), _text(name, "name")
        with self._errors("find"):
            if node_type == "JOB":
                for field in ("job", "parentJob"):  # lineage_job_time, lineage_parent_job
                    query = {f"{field}.namespace": ns, f"{field}.name": nm}
                    if self.collection.find_one(query, {"_id": 1}) is not None:
                        return True
                return False
            # On lineage_datasets; the pair is checked here, not by $elemMatch (see the module
            # docstring): an event may name the namespace and the name in two datasets.
            query = {"datasets.namespace": ns, "datasets.name": nm}
            for doc in self.collection.find(query, {"datasets": 1}).batch_size(20):
                if any(d.get("namespace") == ns and d.get("name") == nm for d in doc["datasets"]):
                    return True
            return False

    def search(self, text: str, *, limit: int = 50) -> list[tuple[NodeType, str, str]]:
        needle = _text(text, "text").lower()
        if not self._ready(self.nodes):
            found: list[tuple[NodeType, str, str]] = [
                ("JOB", ns, n) for ns, n in self._job_names() if needle in n.lower()
            ]
            found += [("DATASET", ns, n) for ns, n in self._dataset_names() if needle in n.lower()]
            return found[:limit]
        # Substring matches, as the sql store's LIKE: the names stream in index order and the
        # read stops at ``limit``.
        found = []
        for kind in ("JOB", "DATASET"):
            for ns, n in self._node_names(kind):
                if len(found) >= limit:
                    return found
                if needle in n.lower():
                    found.append((kind, ns, n))
        return found

    # -- history: the raw events behind Marquez's versions, facets and event log

    def _raw_events(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        with self._errors("find"):
            docs = list(self.collection.find(query, {"raw": 1, "eventTime": 1, "runId": 1}))
        docs = [d for d in docs if isinstance(d.get("runId"), str)]
        docs.sort(key=lambda d: (_utc(d["eventTime"]), d["_id"]))
        return [json.loads(d["raw"]) for d in docs]

    def events_of_job(self, namespace: str, name: str) -> list[dict[str, Any]]:
        query = {"job.namespace": _text(namespace, "namespace"), "job.name": _text(name, "name")}
        return self._raw_events(query)

    def events_of_dataset(self, namespace: str, name: str) -> list[dict[str, Any]]:
        query = {
            "datasets.namespace": _text(namespace, "namespace"),
            "datasets.name": _text(name, "name"),
        }
        with self._errors("find"):
            runs = {d.get("runId") for d in self.collection.find(query, {"runId": 1})}
        ids = sorted(r for r in runs if isinstance(r, str))
        return self._raw_events({"runId": {"$in": ids}}) if ids else []

    def static_events(
        self,
        *,
        jobs: Sequence[tuple[str, str]] = (),
        datasets: Sequence[tuple[str, str]] = (),
    ) -> list[dict[str, Any]]:
        """The JobEvents of ``jobs`` and the DatasetEvents of ``datasets`` (static lineage), in
        event-time order (then event id): one ``$in`` on the sparse ``staticKey`` index."""
        keys = [_static_key("job", _text(ns, "namespace"), _text(nm, "name")) for ns, nm in jobs]
        keys += [
            _static_key("dataset", _text(ns, "namespace"), _text(nm, "name")) for ns, nm in datasets
        ]
        if not keys:
            return []
        with self._errors("find"):
            docs = list(
                self.collection.find(
                    {"staticKey": {"$in": sorted(set(keys))}}, {"raw": 1, "eventTime": 1}
                )
            )
        docs.sort(key=lambda d: (_utc(d["eventTime"]), d["_id"]))
        return [json.loads(d["raw"]) for d in docs]

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
        check_page(limit, offset)
        query: dict[str, Any] = {}
        if namespace is not None:
            query["job.namespace"] = _text(namespace, "namespace")
            query["runId"] = {"$type": "string"}
        span: dict[str, Any] = {}
        if before is not None:
            span["$lt"] = _utc(before)
        if after is not None:
            span["$gte"] = _utc(after)
        if span:
            query["eventTime"] = span
        order = [("eventTime", 1 if ascending else -1), ("_id", 1)]
        with self._errors("find"):
            docs = list(
                self.collection.find(query, {"raw": 1}).sort(order).skip(offset).limit(limit)
            )
            total = (
                offset + len(docs)
                if len(docs) < limit and (docs or offset == 0)
                else self.collection.count_documents(query)
            )
        return Page((json.loads(d["raw"]) for d in docs), total)

    # -- portability: raw events in (event time, event id) order (lineage_sdk.collector.portability)

    def _raw_match(
        self, namespace: str | None, low: datetime | None, until: datetime | None
    ) -> dict[str, Any]:
        """The filter on the indexed fields. BSON dates hold milliseconds: the bounds are widened
        to whole milliseconds here and applied to the microsecond in :meth:`iter_raw_events`."""
        match: dict[str, Any] = {}
        times: dict[str, datetime] = {}
        if low is not None:
            times["$gte"] = _ms_floor(low)
        if until is not None:
            times["$lte"] = _ms_floor(until)
        if times:
            match["eventTime"] = times
        if namespace is not None:
            ns = _text(namespace, "namespace")
            match["$or"] = [
                {"job.namespace": ns},
                {"kind": "dataset", "datasets.namespace": ns},
            ]
        return match

    def iter_raw_events(
        self,
        *,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: tuple[datetime, str] | None = None,
        batch_size: int = 1000,
    ) -> Iterator[RawEvent]:
        """Every stored event's ``raw`` text, ordered by (event time, event id), fetched
        ``batch_size`` documents at a time.

        Without ``until`` (export, rebuild, delete) one cursor walks the ``lineage_time`` index
        (no sort stage, on mongod and SecantusDB alike). With ``until`` (history's ``asOf``,
        and retention, which asks again from ``after`` for every batch it removes) the range is
        read in time windows of about a batch each (:meth:`_raw_windows`): one range read to
        the end per call cost SecantusDB, which materialises what a hinted or ranged find
        selects, the whole range every batch (quadratic: 200,000 events did not finish in 20
        minutes).

        The index orders by millisecond (BSON); the events of one millisecond are put in
        microsecond order (from ``eventTimeRaw``) before they are yielded, so every store gives
        one order. Memory holds one millisecond's events at a time.
        """
        low = since
        if after is not None and (low is None or after[0] > low):
            low = after[0]

        def keep(event: RawEvent) -> bool:
            t = event.event_time
            return (
                (since is None or t >= since)
                and (until is None or t < until)
                and (after is None or event.position > after)
            )

        if until is None:
            match = self._raw_match(namespace, low, None)
            docs = self._raw_docs(match, _RAW_FIELDS, batch_size, hinted=True)
        else:
            docs = self._raw_windows(namespace, low, until, batch_size)
        group: list[RawEvent] = []
        group_ms: Any = None
        for doc in docs:
            if doc["eventTime"] != group_ms:
                group.sort(key=_position)
                yield from filter(keep, group)
                group, group_ms = [], doc["eventTime"]
            when = parse_event_time(doc["eventTimeRaw"]).astimezone(UTC)
            group.append(RawEvent(doc["_id"], when, doc["raw"]))
        group.sort(key=_position)
        yield from filter(keep, group)

    def _raw_docs(
        self,
        match: Mapping[str, Any],
        fields: Mapping[str, int],
        batch_size: int,
        *,
        hinted: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """The event documents ``match`` selects, in (event time, id) order: one cursor, closed
        when the caller stops. ``hinted`` for a read to the end, where walking the index is the
        whole answer: a window's range is planned on that index by mongod unhinted, while
        SecantusDB, hinted, walks and materialises the whole collection."""
        cursor = self.collection.find(match, fields).sort([("eventTime", 1), ("_id", 1)])
        if hinted:
            cursor = cursor.hint("lineage_time")
        with self._errors("find"):
            try:
                yield from cursor.batch_size(batch_size)
            finally:
                cursor.close()

    def _raw_windows(
        self, namespace: str | None, low: datetime | None, until: datetime, batch_size: int
    ) -> Iterator[dict[str, Any]]:
        """The event documents from ``low`` (None: the first) to ``until``'s millisecond, of
        ``namespace`` when given (checked here: an ``$or`` beside the range makes SecantusDB
        scan the collection), read one window of whole milliseconds at a time. A window's
        width aims at ``batch_size`` documents: scaled by what the last one held (at most
        halved or doubled), and remembered for the next call, which starts where retention's
        last batch stopped."""
        namespace = None if namespace is None else _text(namespace, "namespace")
        last = _ms_floor(until)
        if low is None:
            first = self._find_first({"eventTime": {"$lte": last}})
            if first is None:
                return
            low = first
        start = _ms_floor(low)
        if start > last:
            return
        width = self._raw_window or _ONE_MS * max(1, (last - start) // 64 // _ONE_MS)
        fields = _RAW_FIELDS if namespace is None else _RAW_FIELDS | _NAMESPACE_FIELDS
        while True:
            final = width > last - start  # the last window: to ``until``'s millisecond
            times = (
                {"$gte": start, "$lte": last} if final else {"$gte": start, "$lt": start + width}
            )
            held = 0
            for doc in self._raw_docs({"eventTime": times}, fields, batch_size):
                held += 1
                if namespace is None or _in_namespace(doc, namespace):
                    yield doc
            if final:
                return
            start += width
            scale = min(max(batch_size / max(held, 1), 0.5), 2.0)
            width = min(max(_ONE_MS, _ONE_MS * round(width * scale / _ONE_MS)), _MAX_WINDOW)
            self._raw_window = width

    def _find_first(self, match: Mapping[str, Any]) -> datetime | None:
        """The least ``eventTime`` (BSON, milliseconds) among the events ``match`` selects."""
        with self._errors("find"):
            docs = list(
                self.collection.find(match, {"eventTime": 1}).sort([("eventTime", 1)]).limit(1)
            )
        return _utc(docs[0]["eventTime"]) if docs else None

    def count_raw_events(
        self,
        *,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> int | None:
        """How many events ``iter_raw_events`` yields, to the millisecond of the bounds."""
        with self._errors("count_documents"):
            return int(self.collection.count_documents(self._raw_match(namespace, since, until)))

    def stored_event_ids(self, event_ids: Sequence[str]) -> set[str]:
        """Which of ``event_ids`` are stored (lookups on ``_id``)."""
        found: set[str] = set()
        ids = sorted({_text(i, "event id") for i in event_ids})
        with self._errors("find"):
            for chunk in _batches(ids):
                found.update(
                    d["_id"] for d in self.collection.find({"_id": {"$in": chunk}}, {"_id": 1})
                )
        return found

    # -- errors

    def _errors(self, action: str) -> _ErrorMapper:
        return _ErrorMapper(self.name, action)

    # -- column lineage

    def _column_docs(self, keys: list[str]) -> list[dict[str, Any]]:
        """The events stating column edges under ``keys`` (``colkeys`` entries)."""
        if not keys:
            return []
        found: list[dict[str, Any]] = []
        with self._errors("find"):
            for batch in _batches(keys):
                query = {"colkeys": {"$in": batch}}
                found.extend(self.collection.find(query, {"columns": 1, "columnsRank": 1}))
        return found

    def column_lineage(
        self,
        node: str,
        *,
        depth: int = 20,
        with_downstream: bool = False,
        node_limit: int | None = None,
    ) -> ColumnGraph:
        """Fields ``depth`` column hops from ``node``: one indexed query per hop on ``colkeys``;
        an edge several events state keeps the info of the greatest ``columnsRank``."""

        def ref(parts: list[str]) -> FieldRef:
            return FieldRef(parts[0], parts[1], parts[2])

        def roots(root: ColumnRoot) -> list[FieldRef]:
            if root.field is not None:
                key = field_key(FieldRef(root.namespace, root.name, root.field))
                docs = self._column_docs([f"o:{key}", f"i:{key}"])
                return [FieldRef(root.namespace, root.name, root.field)] if docs else []
            if root.kind == "JOB":
                written = self._job_datasets([(root.namespace, root.name)], "output")
                ds_keys = {dataset_key(dns, dn) for _, _, dns, dn in written}
            else:
                ds_keys = {dataset_key(root.namespace, root.name)}
            found: set[FieldRef] = set()
            wanted = sorted(f"{side}:{k}" for k in ds_keys for side in ("od", "id"))
            for doc in self._column_docs(wanted):
                for edge in doc.get("columns", []):
                    found.update((ref(edge["out"]), ref(edge["in"])))
            return sorted(f for f in found if dataset_key(f.namespace, f.dataset) in ds_keys)

        def step(fields: Sequence[FieldRef], upstream: bool) -> list[ColumnEdge]:
            side = "o" if upstream else "i"
            wanted = {field_key(f) for f in fields}
            best: dict[tuple[str, str], tuple[str, str, ColumnEdge]] = {}
            for doc in self._column_docs(sorted(f"{side}:{k}" for k in wanted)):
                rank = str(doc.get("columnsRank", ""))
                for edge in doc.get("columns", []):
                    if edge[side] not in wanted:
                        continue
                    pair = (edge["o"], edge["i"])
                    old = best.get(pair)
                    if old is None or (rank, edge["info"]) > old[:2]:
                        found = ColumnEdge(ref(edge["out"]), ref(edge["in"]), edge["info"])
                        best[pair] = (rank, edge["info"], found)
            return [item[2] for item in best.values()]

        return walk_columns(
            node, roots, step, depth=depth, with_downstream=with_downstream, node_limit=node_limit
        )

    # -- retention and deletion (lineage_sdk.collector.retention)

    def delete_events(self, event_ids: Sequence[str]) -> int:
        """Remove these event documents, then recompute the job edges they stated from the
        events that remain (:meth:`_refresh_edges`) and remove the nodes they named that no
        remaining event names (:meth:`_refresh_nodes`). Every other answer (runs, column
        lineage) is derived from the event documents when asked, so what the remaining
        documents do not name is gone with them. Deleting twice is a no-op."""
        ids = sorted({_text(i, "event id") for i in event_ids})
        if not ids:
            return 0
        self._hold_deletion_lease(bump=True)
        removed = 0
        touched: set[_Edge] = set()
        named: set[_Node] = set()
        runs: set[str] = set()
        fields = {"job": 1, "parentJob": 1, "datasets": 1, "runId": 1}
        for chunk in _batches(ids):
            with self._errors("delete_many"):
                for doc in self.collection.find({"_id": {"$in": chunk}}, fields):
                    touched.update(_stated_edges(doc))
                    named.update(_stated_nodes(doc))
                    if isinstance(doc.get("runId"), str) and doc.get("job"):
                        runs.add(doc["runId"])
                result = self.collection.delete_many({"_id": {"$in": chunk}})
            removed += int(result.deleted_count)
        self._refresh_edges(touched)
        self._refresh_adjacency(touched)
        self._refresh_nodes(named)
        self._refresh_runs(runs)
        self._refresh_latest({(ns, name) for kind, ns, name in named if kind == "JOB"})
        return removed

    def job_events_up_to(
        self, jobs: Sequence[tuple[str, str]], as_of: datetime
    ) -> list[tuple[str, dict[str, Any]]]:
        """(event id, event) of the run events of ``jobs`` with ``eventTime <= as_of``, in
        (event time, event id) order, the bound applied on the ``job_time`` index (to the
        millisecond BSON holds; the microsecond from ``eventTimeRaw`` here)."""
        found: list[tuple[datetime, str, str]] = []
        fields = {"raw": 1, "eventTimeRaw": 1, "runId": 1}
        with self._errors("find"):
            for namespace, name in sorted(set(jobs)):
                query = {
                    "job.namespace": _text(namespace, "namespace"),
                    "job.name": _text(name, "name"),
                    "eventTime": {"$lte": _ms_floor(as_of)},
                }
                for doc in self.collection.find(query, fields):
                    if not isinstance(doc.get("runId"), str):
                        continue
                    when = parse_event_time(doc["eventTimeRaw"]).astimezone(UTC)
                    if when <= as_of:
                        found.append((when, doc["_id"], doc["raw"]))
        found.sort(key=lambda item: (item[0], item[1]))
        return [(event_id, json.loads(raw)) for _, event_id, raw in found]

    def child_runs(self, run_id: str) -> list[str]:
        """The runs some event of which names ``run_id`` as its parent, sorted, by the partial
        ``parent_run`` index, hinted: its filter is the ``$type`` the query states, which not
        every server's planner matches (history's ``runId`` keeps those whose least parent it
        is)."""
        query = {"parentRunId": {"$eq": _text(run_id, "run_id"), "$type": "string"}}
        with self._errors("find"):
            docs = self.collection.find(query, {"runId": 1}).hint("lineage_parent_run")
            found = {d.get("runId") for d in docs}
        return sorted(r for r in found if isinstance(r, str))


class _ErrorMapper:
    """Turns pymongo errors into StoreError: network/timeouts retryable, bad documents permanent."""

    def __init__(self, store: str, action: str) -> None:
        self._store = store
        self._action = action

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> Literal[False]:
        if exc is None or isinstance(exc, StoreError):
            return False
        from bson.errors import BSONError, InvalidDocument
        from pymongo.errors import (
            BulkWriteError,
            ConnectionFailure,
            DocumentTooLarge,
            OperationFailure,
            PyMongoError,
        )

        if isinstance(exc, BulkWriteError):
            raise StoreError(self._store, f"{self._action}: bulk write failed") from exc
        if isinstance(exc, DocumentTooLarge | InvalidDocument | BSONError | OverflowError):
            raise StoreError(
                self._store, f"{self._action}: event cannot be stored: {exc}", permanent=True
            ) from exc
        if isinstance(exc, ConnectionFailure):
            raise StoreError(
                self._store, f"{self._action}: server unreachable ({type(exc).__name__})"
            ) from exc
        if isinstance(exc, OperationFailure):
            raise StoreError(
                self._store,
                f"{self._action}: code {exc.code}: {str(exc)[:200]}",
                permanent=exc.code in _PERMANENT_CODES and exc.code != DUPLICATE_KEY,
            ) from exc
        if isinstance(exc, PyMongoError):
            raise StoreError(
                self._store, f"{self._action}: {type(exc).__name__}: {str(exc)[:200]}"
            ) from exc
        return False


def _batches(items: Sequence[_T]) -> Iterator[list[_T]]:
    """``items`` in lists of at most ``_IN_BATCH``: the values of one ``$in``."""
    for start in range(0, len(items), _IN_BATCH):
        yield list(items[start : start + _IN_BATCH])


def _namespace_batches(keys: Iterable[tuple[str, str]]) -> Iterator[tuple[str, list[str]]]:
    """(namespace, names) in a stable order, at most ``_IN_BATCH`` names each: one indexed query
    per namespace and batch."""
    groups: dict[str, list[str]] = {}
    for ns, name in sorted(set(keys)):
        groups.setdefault(ns, []).append(name)
    for ns, names in groups.items():
        for batch in _batches(names):
            yield ns, batch


def _run_doc_id(run_id: str) -> str:
    """The ``_id`` of a run's summary (a digest, so no run id meets a marker's ``_id``)."""
    return hashlib.blake2b(run_id.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _run_events(
    docs: Iterable[Mapping[str, Any]],
) -> Iterator[tuple[str, _Name, Mapping[str, Any]]]:
    """(run id, job, document) of the run events among event documents: a run id and a job."""
    for doc in docs:
        run_id, job = doc.get("runId"), doc.get("job")
        if isinstance(run_id, str) and isinstance(job, Mapping):
            yield run_id, (job["namespace"], job["name"]), doc


def _run_aggregates(docs: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each run's summary fields over the run events among ``docs`` (by the rules of
    ``models.run_state``; times in microseconds, the state as ``records.state_rank`` text)."""
    out: dict[str, dict[str, Any]] = {}
    for run_id, (ns, name), doc in _run_events(docs):
        when = _raw_time(doc)
        us = _micros(when)
        agg = out.setdefault(run_id, {"jobs": [], "firstUs": us, "lastUs": us})
        job = {"ns": ns, "n": name}
        if job not in agg["jobs"]:
            agg["jobs"].append(job)
        agg["firstUs"], agg["lastUs"] = min(agg["firstUs"], us), max(agg["lastUs"], us)
        key = state_key(doc.get("eventType"), when, doc["_id"])
        if key is not None:
            rank = state_rank(key)
            if rank > agg.get("st", ""):
                agg["st"] = rank
            if key[2] == "START":
                agg["startedUs"] = min(agg.get("startedUs", us), us)
            elif key[2] in TERMINAL_STATES:
                agg["endedUs"] = max(agg.get("endedUs", us), us)
        parent = doc.get("parentRunId")
        if isinstance(parent, str) and parent and ("parent" not in agg or parent < agg["parent"]):
            agg["parent"] = parent  # pick_link: the least named
        beat = doc.get("heartbeatS")
        if beat is not None and ("hb" not in agg or beat > agg["hb"]):
            agg["hb"] = beat  # pick_interval: the greatest named
    return out


def _latest_of_docs(docs: Iterable[Mapping[str, Any]]) -> dict[_Name, tuple[int, str]]:
    """Each job's latest run event among ``docs`` as (microseconds, run id), the least run id
    among equal times."""
    out: dict[_Name, tuple[int, str]] = {}
    for run_id, job, doc in _run_events(docs):
        found = (_micros(_raw_time(doc)), run_id)
        if job not in out or _later(found, out[job]):
            out[job] = found
    return out


def _later(found: tuple[int, str], than: tuple[int, str]) -> bool:
    """Whether the run event ``found`` (microseconds, run id) is later than ``than``: a later
    time, or the same time and a lesser run id."""
    return found[0] > than[0] or (found[0] == than[0] and found[1] < than[1])


def _summary_of_run(doc: Mapping[str, Any], namespace: str, name: str) -> RunSummary:
    """A run's :class:`RunSummary` from its document in ``<collection>_runs``."""
    rank = doc.get("st")
    return RunSummary(
        run_id=doc["run"],
        job_namespace=namespace,
        job_name=name,
        state=rank.split("|")[2] if isinstance(rank, str) else None,
        started_at=_from_micros(doc.get("startedUs")),
        ended_at=_from_micros(doc.get("endedUs")),
        parent_run_id=doc.get("parent"),
        state_time=state_rank_time(rank),
        heartbeat_s=doc.get("hb"),
    )


def _from_micros(value: object) -> datetime | None:
    return None if not isinstance(value, int) else _EPOCH + timedelta(microseconds=value)


def _run_summary(
    run_id: str, namespace: str, name: str, docs: Sequence[Mapping[str, Any]]
) -> RunSummary:
    """One run of a job as its events state it (the rules of ``lineage_sdk.models.run_state``,
    as ``runs_of_job`` folds them)."""
    fold = fold_states((d.get("eventType"), _raw_time(d), d["_id"]) for d in docs)
    return RunSummary(
        run_id=run_id,
        job_namespace=namespace,
        job_name=name,
        state=fold.state,
        started_at=fold.started_at,
        ended_at=fold.ended_at,
        parent_run_id=pick_link(d.get("parentRunId") for d in docs),
        state_time=fold.state_time,
        heartbeat_s=pick_interval(d.get("heartbeatS") for d in docs),
    )


def _uri_database(uri: str) -> str | None:
    try:
        path = urlsplit(uri).path
    except ValueError:
        return None
    name = path.lstrip("/").split("?", 1)[0]
    return name or None


def _ms_floor(value: datetime) -> datetime:
    """``value`` in UTC, cut to the millisecond as BSON stores it."""
    value = _utc(value)
    return value.replace(microsecond=value.microsecond - value.microsecond % 1000)


def _in_namespace(doc: Mapping[str, Any], namespace: str) -> bool:
    """Whether an event document is of ``namespace``, as ``_raw_match``'s ``$or`` selects: its
    job's, or a DatasetEvent's dataset's."""
    job = doc.get("job")
    if isinstance(job, Mapping) and job.get("namespace") == namespace:
        return True
    datasets = doc.get("datasets") if doc.get("kind") == "dataset" else None
    return isinstance(datasets, list) and any(
        isinstance(d, Mapping) and d.get("namespace") == namespace for d in datasets
    )


def _position(event: RawEvent) -> tuple[datetime, str]:
    return event.position


def _micros(value: datetime) -> int:
    """A time as integer microseconds since the epoch: exact to the microsecond every event time
    holds (a BSON date keeps milliseconds), and ordered as the times are."""
    return (_utc(value) - _EPOCH) // _ONE_US


def _raw_time(doc: Mapping[str, Any]) -> datetime:
    """An event document's time to the microsecond, as its record has it (``eventTimeRaw``)."""
    return parse_event_time(doc["eventTimeRaw"])


def _doc_id(parts: _Edge | _Node) -> str:
    """The deterministic ``_id`` of a job edge or a node: concurrent writers upsert one
    document."""
    text = "\x1f".join(parts).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=16).hexdigest()


def _adjacency_fields(edge: _Edge) -> tuple[tuple[str, str], tuple[str, str]]:
    """The (adjacency ``_id``, field) of an edge at its job and at its dataset."""
    jns, jn, dns, dn, role = edge
    return (
        (_doc_id(("JOB", jns, jn)), f"{role}.{escape_key(dns)}{_FAR}{escape_key(dn)}"),
        (_doc_id(("DATASET", dns, dn)), f"{role}.{escape_key(jns)}{_FAR}{escape_key(jn)}"),
    )


@functools.lru_cache(maxsize=65_536)
def _far_name(far: str) -> _Name:
    """The (namespace, name) an adjacency entry's key names (remembered: a walk decodes a few
    thousand, mostly the same from one answer to the next)."""
    ns, name = far.split(_FAR, 1)
    return unescape_key(ns), unescape_key(name)


def _stated_edges(doc: Mapping[str, Any]) -> Iterator[_Edge]:
    """The job edges an event document states: its job with each dataset it names, in its role
    (JobEvents included; DatasetEvents name no job, hence no edge)."""
    job = doc.get("job")
    if not isinstance(job, Mapping):
        return
    jns, jn = job.get("namespace"), job.get("name")
    if not isinstance(jns, str) or not isinstance(jn, str):
        return
    for ref in doc.get("datasets") or ():
        yield (jns, jn, ref["namespace"], ref["name"], ref["role"])


def _stated_nodes(doc: Mapping[str, Any]) -> set[_Node]:
    """The jobs, datasets and namespaces an event document names: its job, its run's parent
    job, every dataset, and their namespaces (what the catalogue lists)."""
    found: set[_Node] = set()
    for field in ("job", "parentJob"):
        job = doc.get(field)
        if isinstance(job, Mapping):
            ns, name = job.get("namespace"), job.get("name")
            if isinstance(ns, str) and isinstance(name, str):
                found.add(("JOB", ns, name))
    for ref in doc.get("datasets") or ():
        found.add(("DATASET", ref["namespace"], ref["name"]))
    found.update({(_NAMESPACE, ns, "") for _, ns, _ in found})
    return found


def _earliest(found: dict[_Edge, int], doc: Mapping[str, Any], when: int) -> None:
    """Keep, per edge ``doc`` states, the least time it is stated at (``firstSeenUs``)."""
    for edge in _stated_edges(doc):
        old = found.get(edge)
        if old is None or when < old:
            found[edge] = when
