"""The store contract: what the LineageManager writes to, and the shapes of the read answers
(the reads themselves are :class:`~lineage_sdk.collector.engine.Engine`'s).

A store is anything with ``name``, ``open``, ``write_batch``, ``check`` and ``close``; the built-in
ones subclass :class:`BaseLineageStore`. A third-party store registers a creator (a callable taking
the whole :class:`~lineage_sdk.config.schema.LineageConfig`) under the ``lineage_sdk.stores``
entry-point group.
"""

from __future__ import annotations

import abc
import json
import logging
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, NamedTuple, Protocol, TypeVar, runtime_checkable

import orjson

from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.symlinks import entry_name
from lineage_sdk.config.keys import env_var_for
from lineage_sdk.config.redaction import redact
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.models.json_exact import loads_exact
from lineage_sdk.models.run_state import StateKey, pick_interval

__all__ = [
    "DEFAULT_NODE_LIMIT",
    "GRANULARITIES",
    "BaseLineageStore",
    "ColumnGraph",
    "DatasetRef",
    "Direction",
    "EventKind",
    "FieldRef",
    "Granularity",
    "GraphNodeType",
    "JobSummary",
    "LineageEdge",
    "LineageGraph",
    "LineageNode",
    "LineageRecord",
    "LineageStoreProtocol",
    "Mentions",
    "NamedConnection",
    "NodeType",
    "Page",
    "RawEvent",
    "RunFold",
    "RunSummary",
    "StoreCreator",
    "check_node_limit",
    "check_page",
    "cut_lineage",
    "direction_adjacencies",
    "distances",
    "event_mentions",
    "event_namespace",
    "lineage_distances",
    "named_connection",
    "names_dataset",
    "nearest",
    "nearest_first",
    "node_id",
    "parse_node_id",
    "unknown_as_of",
    "walk_directions",
    "walk_full",
]

_log = logging.getLogger("lineage_sdk.collector")

EventKind = Literal["run", "dataset", "job"]
NodeType = Literal["DATASET", "JOB"]
#: A node of a lineage answer: a job, a dataset, or a run (the ``run`` view's nodes).
GraphNodeType = Literal["DATASET", "JOB", "RUN"]
#: The zoom of a lineage answer (``granularity``): jobs and datasets (Marquez's graph), datasets
#: alone, runs and datasets, or jobs folded into their root parent job.
Granularity = Literal["job", "dataset", "run", "parent"]
GRANULARITIES: tuple[Granularity, ...] = ("job", "dataset", "run", "parent")
#: ``upstream`` against the data flow, ``downstream`` with it, ``both`` the two directed walks
#: together; ``undirected`` Marquez's walk (``LineageDao.getLineage``): every job sharing any
#: dataset with a job walked, whichever way the data flows, to ``depth``.
Direction = Literal["upstream", "downstream", "both", "undirected"]
_T = TypeVar("_T")
_N = TypeVar("_N", bound=Hashable)  # a node, as a walk names it


@dataclass(frozen=True, slots=True)
class DatasetRef:
    """A dataset named by an event, with its role in that event."""

    namespace: str
    name: str
    facets: dict[str, Any]
    role: Literal["input", "output"]


@dataclass(frozen=True, slots=True)
class LineageRecord:
    """One validated event as the stores receive it.

    ``event`` is the event exactly as it arrived (parsed JSON, lossless); the other fields are
    extracted once by the collector so that each store need not parse again. ``event_id`` is the
    content identity (:func:`lineage_sdk.models.event_id`): writing the same record twice must
    leave one copy.
    """

    event_id: str
    event: dict[str, Any]
    kind: EventKind
    event_type: str | None
    event_time: datetime
    event_time_raw: str
    run_id: str | None
    job_namespace: str | None
    job_name: str | None
    parent_run_id: str | None = None
    parent_job_namespace: str | None = None
    parent_job_name: str | None = None
    root_run_id: str | None = None
    inputs: tuple[DatasetRef, ...] = ()
    outputs: tuple[DatasetRef, ...] = ()
    producer: str = ""


@runtime_checkable
class LineageStoreProtocol(Protocol):
    """The interface the LineageManager drives. Implementations must be idempotent per event_id."""

    name: str

    def open(self) -> None:
        """Connect and create tables, indexes or constraints; safe to call on every start."""

    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        """Write all of ``records`` or raise :class:`~lineage_sdk.exceptions.StoreError`."""

    def check(self) -> None:
        """Raise StoreError if the store cannot be reached; used by ``lineage-collector check``."""

    def close(self) -> None:
        """Release connections; called once."""


class BaseLineageStore(abc.ABC):
    """Base class of the built-in stores: ``open`` and ``check`` default to no-ops."""

    name: str = "base"
    #: Where the store writes, password hidden (``lineage-collector check`` shows it).
    address: str = ""

    def open(self) -> None:
        return None

    @abc.abstractmethod
    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        """Write all of ``records`` idempotently or raise StoreError."""

    def check(self) -> None:
        return None

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections."""


StoreCreator = Callable[[LineageConfig], LineageStoreProtocol]


@dataclass(frozen=True)
class NamedConnection:
    """A ``[lineage.connections.NAME]`` as a store resolved it; ``assumed`` when it was missing
    and the driver's standard local address stands in for it."""

    name: str
    settings: ConnectionConfig
    assumed: bool = False

    def describe(self) -> str:
        """Where the store connects, password hidden, for ``lineage-collector check``."""
        where = f"{self.name}: {redact(self.settings.uri)}"
        return f"{where} (assumed: no [lineage.connections.{self.name}])" if self.assumed else where


def named_connection(
    config: LineageConfig, key: str, name: str, *, default_uri: str | None = None
) -> NamedConnection:
    """The ``[lineage.connections.NAME]`` a store setting names.

    ``LINEAGE_CONNECTIONS_<NAME>_URI`` declares it as well as a table does. When neither does,
    ``default_uri`` (the driver's standard local address) stands in, said once in the log; with
    no default, ConfigError names the setting and the connections that exist.
    """
    connections = config.named("connections", ConnectionConfig)
    connection = connections.get(name)
    if connection is not None:
        return NamedConnection(name, connection)
    if default_uri is None:
        known = ", ".join(sorted(connections)) or "none"
        raise ConfigError(
            key, name, f"must name a [lineage.connections.NAME] section (defined: {known})"
        )
    _log.warning(
        "%s names connection %r, which is not configured: assuming %s "
        "(set [lineage.connections.%s] uri, or %s)",
        key,
        name,
        redact(default_uri),
        name,
        env_var_for(f"connections.{name}.uri"),
    )
    return NamedConnection(name, ConnectionConfig(uri=default_uri), assumed=True)


def node_id(node_type: NodeType, namespace: str, name: str) -> str:
    """Marquez's node id form: ``dataset:<namespace>:<name>`` or ``job:<namespace>:<name>``."""
    return f"{node_type.lower()}:{namespace}:{name}"


def parse_node_id(value: str) -> tuple[NodeType, str, str]:
    """Split ``dataset:<namespace>:<name>`` or ``job:<namespace>:<name>``.

    A namespace may hold ':' itself. With a ``scheme://`` namespace (the naming spec's form), the
    namespace ends at the first ':' after ``://`` unless that ':' starts a port (digits followed
    by ':'): ``postgres://h:5432:db.s.t`` is namespace ``postgres://h:5432``, name ``db.s.t``, and
    ``s3://lake:reports/daily`` is ``s3://lake`` and ``reports/daily``. Otherwise the namespace
    ends at the first ':'. One case stays ambiguous: after a host without a port, a name that
    starts with digits and a ':' (``s3://lake:2024:x``) is read as a port.
    """
    kind, sep, rest = value.partition(":")
    if not sep or kind not in ("dataset", "job"):
        raise ValueError(
            f"node id must be dataset:<namespace>:<name> or job:<namespace>:<name>, got {value!r}"
        )
    scheme, has_scheme, after = rest.partition("://")
    if has_scheme and scheme and ":" not in scheme:
        offset = len(scheme) + 3
        colon = after.find(":")
        port = re.match(r"\d+:", after[colon + 1 :]) if colon >= 0 else None
        if port is not None:
            colon = after.find(":", colon + 1)
        split = offset + colon if colon >= 0 else -1
    else:
        split = rest.find(":")
    namespace, name = (rest[:split], rest[split + 1 :]) if split >= 0 else (rest, "")
    if not namespace or not name:
        raise ValueError(f"node id {value!r} needs both a namespace and a name")
    return ("DATASET" if kind == "dataset" else "JOB"), namespace, name


@dataclass(frozen=True, slots=True)
class LineageEdge:
    origin: str
    destination: str


@dataclass(slots=True)
class LineageNode:
    """A job, dataset or run in a lineage answer, with Marquez's ``id``/``type`` naming."""

    id: str
    type: GraphNodeType
    namespace: str
    name: str
    data: dict[str, Any] = field(default_factory=dict)
    in_edges: list[LineageEdge] = field(default_factory=list)
    out_edges: list[LineageEdge] = field(default_factory=list)


@dataclass(slots=True)
class LineageGraph:
    """The nodes reachable from ``root`` within the asked depth, edges pointing with the data flow
    (dataset -> job that reads it, job -> dataset it writes)."""

    root: str
    nodes: dict[str, LineageNode] = field(default_factory=dict)
    #: True when nodes were left out because of the asked node limit (see :func:`cut_lineage`).
    truncated: bool = False
    #: How many nodes the walk found and the cut left out (the answer's ``omittedNodes``): a walk
    #: stops one level past the limit, so nodes further out are not counted.
    omitted: int = 0


def walk_directions(direction: Direction) -> tuple[bool | None, ...]:
    """The walks a direction asks for, as ``upstream`` flags (None: one walk along edges of
    either direction)."""
    if direction == "both":
        return (True, False)
    if direction == "undirected":
        return (None,)
    return (direction == "upstream",)


def direction_adjacencies(
    direction: Direction, up: Mapping[_N, list[_N]], down: Mapping[_N, list[_N]]
) -> list[Mapping[_N, list[_N]]]:
    """One adjacency per walk of ``direction`` (:func:`walk_directions`), from a graph's
    upstream and downstream adjacencies."""
    found: list[Mapping[_N, list[_N]]] = []
    for upstream in walk_directions(direction):
        if upstream is None:
            either: dict[_N, list[_N]] = {n: list(far) for n, far in up.items()}
            for n, far in down.items():
                either.setdefault(n, []).extend(far)
            found.append(either)
        else:
            found.append(up if upstream else down)
    return found


#: The node limit of a graph read when none is asked for (issue #16: bounded queries).
DEFAULT_NODE_LIMIT = 1000


def check_node_limit(node_limit: int | None) -> None:
    """ValueError unless ``node_limit`` is None (unbounded) or a positive integer."""
    if node_limit is None:
        return
    if isinstance(node_limit, bool) or not isinstance(node_limit, int) or node_limit < 1:
        raise ValueError(f"node_limit must be a positive integer, got {node_limit!r}")


def distances(
    roots: Iterable[_N], adjacencies: Sequence[Mapping[_N, Iterable[_N]]]
) -> dict[_N, int]:
    """Each node's least number of edges from a root along any one of ``adjacencies`` (one per
    asked direction); nodes no adjacency reaches are absent."""
    distance: dict[_N, int] = {}
    starts = list(roots)
    for adjacency in adjacencies:
        seen = dict.fromkeys(starts, 0)
        frontier = list(seen)
        hops = 0
        while frontier:
            hops += 1
            reached: list[_N] = []
            for current in frontier:
                for nxt in adjacency.get(current, ()):
                    if nxt not in seen:
                        seen[nxt] = hops
                        reached.append(nxt)
            frontier = reached
        for nid, hops in seen.items():
            if hops < distance.get(nid, hops + 1):
                distance[nid] = hops
    return distance


def nearest_first(
    roots: Iterable[str], adjacencies: Sequence[Mapping[str, Iterable[str]]], limit: int
) -> list[str]:
    """The ``limit`` nodes nearest ``roots``, nearest first, ties by id: the one cut of every
    bounded graph read (lineage in every store and in history, column lineage, run lineage).

    Distances as :func:`distances` counts them. Each kept node's nearer neighbour on its
    shortest path is nearer still, so it is kept too: the kept nodes stay connected to the
    roots. Nodes no adjacency reaches are never kept.
    """
    return nearest(distances(roots, adjacencies), limit)


def nearest(distance: Mapping[str, int], limit: int) -> list[str]:
    """The ``limit`` nodes of ``distance`` nearest first, ties by id: the order every cut keeps."""
    return sorted(distance, key=lambda nid: (distance[nid], nid))[:limit]


def lineage_distances(graph: LineageGraph, direction: Direction) -> dict[str, int]:
    """Each node's distance from the root of a lineage answer, in edges along the asked
    direction(s): upstream against the data flow, downstream with it, both the lesser."""
    up = {nid: [e.origin for e in node.in_edges] for nid, node in graph.nodes.items()}
    down = {nid: [e.destination for e in node.out_edges] for nid, node in graph.nodes.items()}
    roots = [graph.root] if graph.root in graph.nodes else []
    return distances(roots, direction_adjacencies(direction, up, down))


def cut_lineage(graph: LineageGraph, direction: Direction, node_limit: int | None) -> LineageGraph:
    """``graph`` cut to its ``node_limit`` nodes nearest the root (:func:`lineage_distances`,
    ties by id), keeping only the edges among kept nodes, ``truncated`` set when nodes were left
    out.

    A store's bounded walk gives this every node within the cut's distance and every edge among
    them, so the cut answer is the same as cutting the unbounded answer, in every store.
    """
    check_node_limit(node_limit)
    if node_limit is None or len(graph.nodes) <= node_limit:
        return graph
    distance = lineage_distances(graph, direction)
    kept = set(nearest(distance, node_limit))
    cut = LineageGraph(root=graph.root, truncated=True, omitted=len(graph.nodes) - len(kept))
    for nid, node in graph.nodes.items():
        if nid in kept:
            node.in_edges = [e for e in node.in_edges if e.origin in kept]
            node.out_edges = [e for e in node.out_edges if e.destination in kept]
            cut.nodes[nid] = node
    return cut


def unknown_as_of(node: str, as_of: datetime) -> LookupError:
    """The error of an ``asOf`` read whose root no event up to ``as_of`` names (a 404), one
    wording for history's generic path and a store's own ``lineage_as_of``."""
    return LookupError(f"nothing is recorded for {node!r} in the events up to {as_of.isoformat()}")


def walk_full(found: int, node_limit: int | None) -> bool:
    """Whether a bounded walk has found enough: more than ``node_limit`` nodes. It then makes one
    last, edges-only step (the edges from its last level back to nodes it has) and stops, so
    every node within the cut's distance, and every edge among them, is in its answer."""
    return node_limit is not None and found > node_limit


@dataclass
class RunFold:
    """Runs' states and heartbeat intervals as their events state them, folded one event at a
    time in any order: a lineage node's ``latestRun`` in history's fold and in the stores'
    ``asOf`` walks, one rule for both."""

    states: dict[str, StateKey] = field(default_factory=dict)
    heartbeats: dict[str, float | None] = field(default_factory=dict)

    def add(self, run_id: str, state: StateKey | None, heartbeat: float | None) -> None:
        """One event of ``run_id``: its ``run_state.state_key`` and heartbeat interval."""
        best = self.states.get(run_id)
        if state is not None and (best is None or state > best):
            self.states[run_id] = state
        self.heartbeats[run_id] = pick_interval((self.heartbeats.get(run_id), heartbeat))

    def latest_run(self, run_id: str) -> dict[str, Any]:
        """The run as ``queries.lineage`` puts a job's latest run in a node's data."""
        best = self.states.get(run_id)
        return {
            "runId": run_id,
            "state": None if best is None else best[2],
            "stateTime": None if best is None else best[1],
            "heartbeatS": self.heartbeats.get(run_id),
        }


@dataclass(frozen=True, slots=True)
class RunSummary:
    run_id: str
    job_namespace: str
    job_name: str
    state: str | None
    started_at: datetime | None
    ended_at: datetime | None
    parent_run_id: str | None = None
    #: The time of the event that decides ``state`` (a live run's latest heartbeat), and the
    #: heartbeat interval its events name: what ``run_state.is_stale`` reads.
    state_time: datetime | None = None
    heartbeat_s: float | None = None


@dataclass(frozen=True, slots=True)
class JobSummary:
    namespace: str
    name: str
    latest_run: RunSummary | None
    inputs: tuple[tuple[str, str], ...] = ()
    outputs: tuple[tuple[str, str], ...] = ()


class Page(list[_T], Generic[_T]):
    """One page of a browsing answer: the items (it *is* the list of them) and ``total``, how many
    items the whole answer holds, so the HTTP API can report Marquez's ``totalCount``.

    A list, so callers that only want the items use it as before.
    """

    total: int

    def __init__(self, items: Iterable[_T] = (), total: int | None = None) -> None:
        super().__init__(items)
        self.total = len(self) if total is None else total

    @classmethod
    def sliced(
        cls, items: Iterable[_T], *, offset: int, limit: int | None, count: Callable[[], int]
    ) -> Page[_T]:
        """A page read with the store's own LIMIT/OFFSET. ``count`` (a count query) is only run
        when the page alone cannot tell the total: when it is full, or empty past the end."""
        page = cls(items)
        short = limit is None or len(page) < limit
        if short and (page or offset == 0):
            page.total = offset + len(page)
        else:
            page.total = count()
        return page

    def __repr__(self) -> str:
        return f"Page({list.__repr__(self)}, total={self.total})"


def check_page(limit: int | None, offset: int) -> None:
    """ValueError unless ``limit`` is None or positive and ``offset`` is not negative."""
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer, got {limit!r}")
    if not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a non-negative integer, got {offset!r}")


# ------------------------------------------------------------------ history (Marquez's read API)


def names_dataset(event: Mapping[str, Any], namespace: str, name: str) -> bool:
    """Whether ``event`` names the dataset among its inputs or outputs (or as a DatasetEvent's
    ``dataset``), by its canonical name (:mod:`lineage_sdk.collector.symlinks`)."""
    wanted = (namespace, name)
    for key in ("inputs", "outputs"):
        items = event.get(key)
        if isinstance(items, list):
            for item in items:
                if entry_name(item) == wanted:
                    return True
    return entry_name(event.get("dataset")) == wanted


class FieldRef(NamedTuple):
    """One column: a dataset's field (a tuple: hashing and comparing it is cheap, and a batch of
    events with column lineage hashes many)."""

    namespace: str
    dataset: str
    field: str

    @property
    def id(self) -> str:
        """Marquez's node id: ``datasetField:<namespace>:<dataset>:<field>``."""
        return f"datasetField:{self.namespace}:{self.dataset}:{self.field}"


@dataclass(slots=True)
class ColumnGraph:
    """A column-lineage answer: the fields reached from ``roots`` and the edges walked.

    ``edges`` maps (output field, input field) to how the output derives from the input, as
    canonical JSON text (``transformations``, and the older ``transformationDescription`` /
    ``transformationType``), taken from the latest event that stated the edge. Every store answers
    the same graph for the same events (see :mod:`lineage_sdk.collector.columns`).
    """

    root: str
    roots: tuple[FieldRef, ...] = ()
    fields: set[FieldRef] = field(default_factory=set)
    edges: dict[tuple[FieldRef, FieldRef], str] = field(default_factory=dict)
    #: True when fields were left out because of the asked node limit.
    truncated: bool = False
    #: How many fields the walk found and the cut left out (``omittedNodes``).
    omitted: int = 0


# -- portability: the raw events every query store keeps, read back in one order -----------------


@dataclass(frozen=True, slots=True)
class RawEvent:
    """One stored event as it was received, for export, import and rebuild.

    ``json`` is the stored JSON text of the event on one line (what the store kept: equal to the
    received event after parsing, though key order or spacing may differ between stores);
    ``event_time`` the event's time in UTC to the microsecond. Sources yield them ordered by
    ``(event_time, event_id)``, which is also a resumable position (see ``after``).
    """

    event_id: str
    event_time: datetime
    json: str

    @property
    def position(self) -> tuple[datetime, str]:
        """Where this event lies in the stable order; pass it as ``after`` to read on from it."""
        return (self.event_time, self.event_id)

    def data(self) -> Any:
        """The event parsed, every integer exact (beyond 64 bits too, as the stores keep them:
        :func:`~lineage_sdk.models.json_exact.loads_exact`; the standard library's parser for
        text orjson refuses)."""
        try:
            return loads_exact(self.json)
        except orjson.JSONDecodeError:
            return json.loads(self.json)


def event_namespace(event: Any) -> str | None:
    """The namespace ``--namespace`` selects an event by: its job's, or a DatasetEvent's
    dataset's (a DatasetEvent names no job)."""
    if not isinstance(event, dict):
        return None
    part = event.get("job")
    if not isinstance(part, dict) and "run" not in event:
        part = event.get("dataset")
    namespace = part.get("namespace") if isinstance(part, dict) else None
    return namespace if isinstance(namespace, str) else None


# -- retention and deletion: what an event names, and the stores that can forget events -----------


@dataclass(frozen=True, slots=True)
class Mentions:
    """Every job, run and dataset one raw event names (what a deletion of it may change)."""

    jobs: frozenset[tuple[str, str]]
    parent_jobs: frozenset[tuple[str, str]]
    parent_runs: frozenset[str]
    datasets: frozenset[tuple[str, str]]

    @property
    def namespaces(self) -> frozenset[str]:
        """Every namespace named: the job's, the parent job's and each dataset's."""
        return frozenset(ns for ns, _ in (*self.jobs, *self.parent_jobs, *self.datasets))


def _ns_name(part: Any) -> tuple[str, str] | None:
    if isinstance(part, Mapping):
        namespace, name = part.get("namespace"), part.get("name")
        if isinstance(namespace, str) and isinstance(name, str):
            return (namespace, name)
    return None


def _column_inputs(dataset: Mapping[str, Any]) -> set[tuple[str, str]]:
    """The datasets whose fields a dataset's ``columnLineage`` facet names as inputs."""
    found: set[tuple[str, str]] = set()
    facets = dataset.get("facets")
    facet = facets.get("columnLineage") if isinstance(facets, Mapping) else None
    fields = facet.get("fields") if isinstance(facet, Mapping) else None
    if isinstance(fields, Mapping):
        for spec in fields.values():
            inputs = spec.get("inputFields") if isinstance(spec, Mapping) else None
            if isinstance(inputs, list):
                found.update(ref for ref in map(_ns_name, inputs) if ref is not None)
    return found


def event_mentions(event: Any) -> Mentions:
    """The jobs (its own), parent jobs and runs (the ``parent`` run facet), and datasets (inputs,
    outputs, a DatasetEvent's ``dataset``, each as sent and as its ``symlinks`` resolve it, and
    the datasets whose fields a ``columnLineage`` facet names) that ``event`` names."""
    jobs: set[tuple[str, str]] = set()
    parent_jobs: set[tuple[str, str]] = set()
    parent_runs: set[str] = set()
    datasets: set[tuple[str, str]] = set()
    if isinstance(event, Mapping):
        job = _ns_name(event.get("job"))
        if job is not None:
            jobs.add(job)
        run = event.get("run")
        facets = run.get("facets") if isinstance(run, Mapping) else None
        parent = facets.get("parent") if isinstance(facets, Mapping) else None
        if isinstance(parent, Mapping):
            pjob = _ns_name(parent.get("job"))
            if pjob is not None:
                parent_jobs.add(pjob)
            prun = parent.get("run")
            if isinstance(prun, Mapping) and isinstance(prun.get("runId"), str):
                parent_runs.add(prun["runId"])
        parts: list[Any] = [event.get("dataset")]
        for key in ("inputs", "outputs"):
            items = event.get(key)
            if isinstance(items, list):
                parts.extend(items)
        for part in parts:
            ref = _ns_name(part)
            if ref is not None:
                datasets.add(ref)
                datasets.add(entry_name(part) or ref)  # and as its symlinks resolve it
                datasets.update(_column_inputs(part))
    return Mentions(
        frozenset(jobs), frozenset(parent_jobs), frozenset(parent_runs), frozenset(datasets)
    )
