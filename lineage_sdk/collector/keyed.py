"""The one lineage walk: breadth-first over job edges by node key, cut on keys, built once.

Every answer to "what lies around this node" (the sql, document and graph stores, and history's
fold of raw events) is this walk over a different edge source. A store gives an
:class:`EdgeStep`: the (job, dataset) key pairs of one side's edges at a frontier of keys. Keys are
whatever the source indexes nodes by: the sql and graph stores' fixed-size ``name_key`` (names are
read once, for the kept nodes only), the document store's and history's (namespace, name) pairs.
A walk of a few thousand nodes is cheapest when it never carries names; one copy of the walk, the
cut and the build serves every store, so their answers cannot drift apart.

The rules:

* A job's level is the number of jobs between it and the root; the datasets a job reads
  (upstream) or writes (downstream) belong to its level. ``depth`` counts levels, so from a job,
  depth 0 is its own inputs and outputs.
* Both ways of a ``both`` answer advance together, one step each (a step goes from jobs to
  datasets or from datasets to jobs), and the node limit counts the nodes of both: the answer's
  cut keeps the ``node_limit`` nodes nearest the root whichever way they lie, so a way need not
  walk further than the answer. Each way expands only the nodes it found itself.
* Past ``node_limit`` nodes the walk makes one last, edges-only step (edges back to nodes it has)
  and stops (:func:`~lineage_sdk.collector.store.walk_full`): the answer then holds every node
  within the cut's distance and every edge among them, so cutting it (:func:`cut_keys`) gives the
  cut of the unbounded answer. Given the names of the nodes at the cut's distance (ties go by node
  id), that step asks only from the frontier nodes the cut keeps.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

from lineage_sdk.collector.store import (
    Direction,
    LineageEdge,
    LineageGraph,
    LineageNode,
    NodeType,
    direction_adjacencies,
    distances,
    node_id,
    parse_node_id,
    walk_directions,
    walk_full,
)

__all__ = [
    "EdgeStep",
    "JobReader",
    "KeyedEdge",
    "KeyedWalk",
    "LevelHook",
    "NameReader",
    "cut_keys",
    "kept_keys",
    "keyed_answer",
    "keyed_graph",
    "names_are_keys",
    "walk_keys",
]

K = TypeVar("K", bound=Hashable)

#: One job edge along the data flow: (origin type, origin key, destination type, destination key).
KeyedEdge = tuple[NodeType, K, NodeType, K]


class EdgeStep(Protocol[K]):
    """One step's read: the (job key, dataset key) pairs of the job edges in ``io`` (``in``: the
    job reads the dataset, ``out``: it writes it) whose ``end`` (``JOB`` or ``DATASET``) is one
    of ``keys``."""

    def __call__(
        self, end: NodeType, keys: Collection[K], io: Literal["in", "out"]
    ) -> Iterable[tuple[K, K]]: ...


#: What every way of a walk is about to read at one step: ``(end, [(io, frontier), ...])``, called
#: before the ways' reads (a step that can answer them together reads once: the parent view).
LevelHook = Callable[[NodeType, list[tuple[Literal["in", "out"], set[K]]]], None]
#: The (namespace, name) of the given keys of one node type that exist (others are absent).
NameReader = Callable[[NodeType, list[K]], dict[K, tuple[str, str]]]
#: The names of the given job keys and their latest runs (a node's ``latestRun``), in one read.
JobReader = Callable[[set[K]], tuple[dict[K, tuple[str, str]], dict[K, dict[str, Any]]]]


def names_are_keys(
    node_type: NodeType, keys: list[tuple[str, str]]
) -> dict[tuple[str, str], tuple[str, str]]:
    """The :data:`NameReader` of walks keyed by names, which reads nothing: every walked key but
    the root came from an edge, whose event made both ends' node rows, first seen no later than
    the edge; the root is in the answer whether or not it was recorded."""
    return {k: k for k in keys}


@dataclass
class KeyedWalk(Generic[K]):
    """What the walks of one answer found, by key."""

    jobs: set[K] = field(default_factory=set)
    datasets: set[K] = field(default_factory=set)
    edges: set[KeyedEdge[K]] = field(default_factory=set)
    #: The nodes the cut keeps, once the walk knows them (its closing step); the cut reuses them.
    kept: set[tuple[NodeType, K]] | None = None

    def __len__(self) -> int:
        return len(self.jobs) + len(self.datasets)

    def keys(self, node_type: NodeType) -> set[K]:
        return self.jobs if node_type == "JOB" else self.datasets


@dataclass
class _Way(Generic[K]):
    """One way of a walk: the nodes it found (it expands only those) and its frontier;
    ``upstream`` None: along edges of either direction (``undirected``)."""

    upstream: bool | None
    jobs: set[K]
    datasets: set[K]
    job_frontier: set[K]
    ds_frontier: set[K]

    def asks(self, end: NodeType) -> list[tuple[Literal["in", "out"], set[K]]]:
        """The reads of this way's next step from ``end``: (io, frontier) each."""
        from_jobs = end == "JOB"
        frontier = self.job_frontier if from_jobs else self.ds_frontier
        if not frontier:
            return []
        # "in" edges run dataset -> job (the job reads it), "out" edges job -> dataset.
        ios: tuple[Literal["in", "out"], ...] = ("in", "out")
        if self.upstream is not None:
            ios = ("in",) if self.upstream == from_jobs else ("out",)
        return [(io, frontier) for io in ios]

    def expand(self, end: NodeType, step: EdgeStep[K], walk: KeyedWalk[K], closing: bool) -> None:
        """One step from the frontier's jobs (``end`` JOB: to the datasets they read upstream,
        write downstream) or datasets (DATASET: to the jobs beyond them); closing: only the
        edges to nodes the walk has."""
        from_jobs = end == "JOB"
        far_found, mine = (walk.datasets, self.datasets) if from_jobs else (walk.jobs, self.jobs)
        reached = self.ds_frontier if from_jobs else self.job_frontier
        for io, frontier in self.asks(end):
            for job, ds in step(end, frontier, io):
                far = ds if from_jobs else job
                if closing and far not in far_found:
                    continue
                walk.edges.add(
                    ("DATASET", ds, "JOB", job) if io == "in" else ("JOB", job, "DATASET", ds)
                )
                far_found.add(far)
                if far not in mine:
                    mine.add(far)
                    reached.add(far)
        if from_jobs:
            self.job_frontier = set()
        else:
            self.ds_frontier = set()


def walk_keys(
    step: EdgeStep[K],
    root: tuple[NodeType, K],
    direction: Direction,
    depth: int,
    node_limit: int | None,
    read_names: NameReader[K] | None = None,
    *,
    size: Callable[[KeyedWalk[K]], int] = len,
    before_step: LevelHook[K] | None = None,
    on_close: Callable[[set[tuple[NodeType, K]]], None] | None = None,
) -> KeyedWalk[K]:
    """Breadth-first from ``root`` (type, key), the ways of ``direction`` together, up to
    ``depth`` levels, stopping past ``node_limit`` nodes as the module docstring says (``size``
    counts them: a view that answers datasets alone counts its datasets; it then cuts the answer
    itself, so no ``read_names``).

    With ``read_names``, the closing step is narrowed to the frontier nodes the cut will keep
    (:func:`kept_keys`): an edge matters only between two kept nodes, and closing
    edges change no node's distance (they end at nodes already found, one step past the
    frontier), so the kept nodes are the same before the step and after. The closing step is
    the walk's widest (its frontier is the level that passed the limit).

    ``before_step`` hears each step's reads, every way's, before they are made; ``on_close``
    hears the nodes the cut keeps before the closing step (with ``read_names`` only): only edges
    between two of them matter from then on."""
    node_type, key = root
    walk: KeyedWalk[K] = KeyedWalk()
    walk.keys(node_type).add(key)
    ways = []
    for upstream in walk_directions(direction):
        jobs, datasets = ({key}, set[K]()) if node_type == "JOB" else (set[K](), {key})
        ways.append(_Way(upstream, jobs, datasets, set(jobs), set(datasets)))

    def closes() -> bool:
        if node_limit is None or not walk_full(size(walk), node_limit):
            return False
        if read_names is not None:
            walk.kept = kept = kept_keys(walk, root, direction, node_limit, read_names)
            if on_close is not None:
                on_close(kept)
            for way in ways:
                way.job_frontier = {k for k in way.job_frontier if ("JOB", k) in kept}
                way.ds_frontier = {k for k in way.ds_frontier if ("DATASET", k) in kept}
        return True

    def expand(end: NodeType, closing: bool) -> None:
        if before_step is not None:
            asks = [ask for way in ways for ask in way.asks(end)]
            if asks:
                before_step(end, asks)
        for way in ways:
            way.expand(end, step, walk, closing)

    for level in range(max(0, depth) + 1):
        closing = closes()
        expand("JOB", closing)
        if closing or level == depth:
            break
        ways = [way for way in ways if way.ds_frontier]
        if not ways:
            break
        closing = closes()
        expand("DATASET", closing)
        if closing:
            break
        ways = [way for way in ways if way.job_frontier]
        if not ways:
            break
    return walk


def kept_keys(
    walk: KeyedWalk[K],
    root: tuple[NodeType, K],
    direction: Direction,
    node_limit: int,
    read_names: NameReader[K],
) -> set[tuple[NodeType, K]]:
    """The ``node_limit`` nodes nearest the root among the walked keys, by
    :func:`~lineage_sdk.collector.store.cut_lineage`'s rule: ties by node id, so only the nodes
    at the cut's distance need their names."""
    down: dict[tuple[NodeType, K], list[tuple[NodeType, K]]] = {}
    up: dict[tuple[NodeType, K], list[tuple[NodeType, K]]] = {}
    for ot, ok, dt, dk in walk.edges:
        down.setdefault((ot, ok), []).append((dt, dk))
        up.setdefault((dt, dk), []).append((ot, ok))
    distance = distances([root], direction_adjacencies(direction, up, down))
    if len(distance) <= node_limit:
        return set(distance)
    boundary = sorted(distance.values())[node_limit - 1]
    kept = {n for n, d in distance.items() if d < boundary}
    tied = [n for n, d in distance.items() if d == boundary]
    ids: dict[tuple[NodeType, K], str] = {}
    for t in ("JOB", "DATASET"):
        found = read_names(t, [k for kind, k in tied if kind == t])
        ids.update(((t, k), node_id(t, *nm)) for k, nm in found.items())
    kept.update(sorted(tied, key=lambda n: ids.get(n, ""))[: node_limit - len(kept)])
    return kept


def cut_keys(
    walk: KeyedWalk[K],
    root: tuple[NodeType, K],
    direction: Direction,
    node_limit: int | None,
    read_names: NameReader[K],
) -> tuple[KeyedWalk[K], bool]:
    """The walk cut to :func:`kept_keys` (no limit: as it is), with the edges among the kept
    nodes, and whether nodes were left out (the answer's ``truncated``)."""
    if node_limit is None or len(walk) <= node_limit:
        return walk, False
    kept = walk.kept or kept_keys(walk, root, direction, node_limit, read_names)
    cut = KeyedWalk(
        {k for t, k in kept if t == "JOB"},
        {k for t, k in kept if t == "DATASET"},
        {e for e in walk.edges if (e[0], e[1]) in kept and (e[2], e[3]) in kept},
    )
    return cut, True


def keyed_graph(
    node: str,
    root: tuple[NodeType, K],
    walk: KeyedWalk[K],
    names: Mapping[NodeType, Mapping[K, tuple[str, str]]],
    *,
    truncated: bool,
) -> tuple[LineageGraph, dict[K, str]]:
    """The answer: a node per walked key that has names (the root always, even when nothing was
    ever recorded for it), edges sorted by node id so every store lists them alike; and each
    job key's node id."""
    graph = LineageGraph(root=node, truncated=truncated)
    ids: dict[tuple[NodeType, K], str] = {}
    for type_, found in names.items():
        for k, (ns, nm) in found.items():
            nid = node_id(type_, ns, nm)
            ids[(type_, k)] = nid
            graph.nodes[nid] = LineageNode(nid, type_, ns, nm, {"namespace": ns, "name": nm})
    if root not in ids:  # the root itself, even when nothing was ever recorded for it
        root_type, namespace, name = parse_node_id(node)
        data = {"namespace": namespace, "name": name}
        graph.nodes.setdefault(node, LineageNode(node, root_type, namespace, name, data))
        ids[root] = node
    pairs = ((ids.get((ot, ok)), ids.get((dt, dk))) for ot, ok, dt, dk in walk.edges)
    for origin, dest in sorted((o, d) for o, d in pairs if o is not None and d is not None):
        edge = LineageEdge(origin, dest)
        graph.nodes[origin].out_edges.append(edge)
        graph.nodes[dest].in_edges.append(edge)
    jobs = {k: nid for (type_, k), nid in ids.items() if type_ == "JOB" and nid in graph.nodes}
    return graph, jobs


def keyed_answer(
    node: str,
    root: tuple[NodeType, K],
    walk: KeyedWalk[K],
    direction: Direction,
    node_limit: int | None,
    read_names: NameReader[K],
    read_jobs: JobReader[K],
) -> LineageGraph:
    """The answer of a walk: cut on keys (before any name is read: only the nodes at the cut's
    distance need theirs), then the kept nodes' names, the jobs' with their latest runs
    (``read_jobs``, asked of the kept jobs alone: a cut walk may have found many more)."""
    found = len(walk)
    walk, truncated = cut_keys(walk, root, direction, node_limit, read_names)
    job_names, latest = read_jobs(walk.jobs)
    names: dict[NodeType, dict[K, tuple[str, str]]] = {
        "JOB": job_names,
        "DATASET": read_names("DATASET", list(walk.datasets)),
    }
    graph, kept = keyed_graph(node, root, walk, names, truncated=truncated)
    graph.omitted = found - len(walk)
    for job_key, latest_run in latest.items():
        if job_key in kept:
            graph.nodes[kept[job_key]].data["latestRun"] = latest_run
    return graph
