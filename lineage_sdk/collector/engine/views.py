"""The graph at the zoom a user asks: time windows and the dataset, run and parent views.

Every view is one walk of :func:`~lineage_sdk.collector.keyed.walk_keys` over a different
:class:`~lineage_sdk.collector.keyed.EdgeStep`, built from the backend's rows, so every backend
answers every view alike:

* **Windows.** An edge is in ``[since, until)`` when a run of its job that read or wrote the
  dataset has an event in the window: the run's mention of the dataset, first made before
  ``until``, and an event of the run inside the window (its first or last event, or, for a run
  spanning the whole window, one read from its events in it). A declared edge (a JobEvent's, a
  ``lineage`` facet's) is in the window when it was declared before ``until``. With no
  ``since``, the window is ``asOf``'s: every edge first seen before ``until``.
* **dataset.** The job walk, then each job folded into the edges from every dataset it reads to
  every dataset it writes (``jobs`` lists them per edge); the limit counts datasets.
* **run.** Runs take the jobs' place: a dataset's runs are the runs that named it in that role
  (inside the window, when one is asked), a run's datasets the ones it named; each run is linked
  to its parent run. The limit counts runs and datasets.
* **parent.** Jobs with a parent job fold into their root (the parent of the parent, to the
  top), found from their latest run's parent run; a folded node's edges are its members'. Its
  ``children`` are the jobs whose runs name it or another member as parent, and any job the
  answer found to fold into it (one whose parent facet names another job than its parent
  run's), the jobs of the runs between such a job and the root, and their children: their
  edges are then its own too, asked from above or below.

Access is a test of namespaces applied to every step (``readable``): the walk never enters a
node a key may not read, so nothing is reached through one, as ``prune_graph`` answers the job
view.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from lineage_sdk.collector.backend import EdgeRow, Io, Key, LineageBackend, RunRow
from lineage_sdk.collector.engine.derive import children_of
from lineage_sdk.collector.keyed import (
    EdgeStep,
    KeyedWalk,
    LevelHook,
    cut_keys,
    names_are_keys,
    walk_keys,
)
from lineage_sdk.collector.records import state_rank_time
from lineage_sdk.collector.store import (
    Direction,
    Granularity,
    LineageEdge,
    LineageGraph,
    LineageNode,
    NodeType,
    check_node_limit,
    cut_lineage,
    node_id,
)

__all__ = [
    "RUN_PREFIX",
    "ViewGraph",
    "Window",
    "latest_entry",
    "parse_run_node",
    "view_graph",
    "window_step",
    "windowed_pairs",
]

#: A run's node id: ``run:<runId>``.
RUN_PREFIX = "run:"
#: A run's key in a run view's walk (where runs take the jobs' place): no job key has an empty
#: namespace.
_RUN_NS = ""
_ROLE: dict[Io, Literal["input", "output"]] = {"in": "input", "out": "output"}
_UUID = re.compile(r"[0-9A-Fa-f]{8}(-?[0-9A-Fa-f]{4}){3}-?[0-9A-Fa-f]{12}")


def parse_run_node(node: str) -> str | None:
    """The run id of a ``run:<runId>`` node id, or None for any other id."""
    if node.startswith(RUN_PREFIX) and len(node) > len(RUN_PREFIX):
        return node[len(RUN_PREFIX) :]
    return None


def check_node(
    node: str, granularity: Granularity, *, names: Mapping[str, str] | None = None
) -> None:
    """ValueError naming the parameter for a ``run:<runId>`` node at another granularity than
    ``run`` (or with no UUID), and for a job node at granularity ``run``. Other node ids are the
    caller's to parse."""

    def named(param: str) -> str:
        return (names or {}).get(param, param)

    if node.startswith(RUN_PREFIX):
        if granularity != "run":
            raise ValueError(
                f"{named('nodeId')} run:<runId> is taken with {named('granularity')} run only, "
                f"got {named('granularity')} {granularity}"
            )
        if not _UUID.fullmatch(node[len(RUN_PREFIX) :]):
            raise ValueError(f"{named('nodeId')} {node[:100]!r} is not run:<uuid>")
    elif granularity == "run" and node.startswith("job:"):
        raise ValueError(
            f"{named('granularity')} run starts at a dataset or a run (run:<runId>), not at a "
            f"job ({named('nodeId')} {node[:100]!r})"
        )


@dataclass(frozen=True, slots=True)
class Window:
    """``[since, until)``; either end may be open (None)."""

    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError(
                f"since ({self.since.isoformat()}) must be before until ({self.until.isoformat()})"
            )


#: No window: every time.
ALWAYS = Window()


@dataclass(slots=True)
class ViewGraph:
    """A view's answer: its graph (cut), the data its edges carry, the node it starts at."""

    graph: LineageGraph
    #: Per (origin, destination): what the edge carries (``jobs`` in the dataset view, ``link``
    #: for a run's parent run).
    edge_data: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: The node the walk started at, when it is not the node asked (a child job in the parent
    #: view starts at its root).
    start: str | None = None


Readable = Callable[[str], bool]


def _active_runs(b: LineageBackend, runs: Iterable[RunRow], window: Window) -> dict[str, RunRow]:
    """The runs with an event in the window, by id (a run id two jobs use: either row)."""
    since, until = window.since, window.until
    found: dict[str, RunRow] = {}
    spanning: dict[str, list[RunRow]] = {}
    for run in runs:
        if until is not None and run.first_event >= until:
            continue
        if since is not None and run.last_event < since:
            continue
        spans = since is not None and run.first_event < since
        if spans and until is not None and run.last_event >= until:  # neither end inside
            spanning.setdefault(run.run_id, []).append(run)
            continue
        found.setdefault(run.run_id, run)
    if spanning:
        for ev in b.events(run_ids=list(spanning), since=since, until=until):
            for run in spanning.pop(ev.run_id or "", ()):
                found.setdefault(run.run_id, run)
    return found


def _runs_of_mentions(
    b: LineageBackend, datasets: Collection[Key], io: Io, window: Window
) -> list[tuple[RunRow, Key]]:
    """The (run, dataset) pairs of the runs that named these datasets in ``io``'s role before
    ``until`` and have an event in the window."""
    named: dict[str, set[Key]] = {}
    for m in b.mentions("DATASET", datasets, roles=[_ROLE[io]], until=window.until):
        if m.source == "run":
            named.setdefault(m.source_id, set()).add(m.key)
    if not named:
        return []
    rows = b.runs(run_ids=list(named), until=window.until)
    active = _active_runs(b, rows, window)
    return [
        (run, ds)
        for run in rows
        if run.run_id in active and run.job is not None
        for ds in named.get(run.run_id, ())
    ]


def windowed_pairs(
    b: LineageBackend, rows: Iterable[EdgeRow], window: Window
) -> set[tuple[Key, Key, Io]]:
    """The edges among ``rows`` (read with ``until=window.until``) that are in the window."""
    found: set[tuple[Key, Key, Io]] = set()
    open_rows: dict[Io, list[EdgeRow]] = {}
    for r in rows:
        declared = r.declared is not None and (window.until is None or r.declared < window.until)
        if declared or window.since is None:
            found.add((r.job, r.dataset, r.io))
        else:
            open_rows.setdefault(r.io, []).append(r)
    for io, candidates in open_rows.items():
        wanted = {(r.job, r.dataset) for r in candidates}
        datasets = {r.dataset for r in candidates}
        for run, ds in _runs_of_mentions(b, datasets, io, window):
            if (run.job, ds) in wanted:
                found.add((run.job, ds, io))  # type: ignore[arg-type]
    return found


def window_step(b: LineageBackend, window: Window, readable: Readable | None) -> EdgeStep[Key]:
    """The job walk's step: the edges in the window, between readable nodes."""

    def step(
        end: NodeType, keys: Collection[Key], io: Literal["in", "out"]
    ) -> list[tuple[Key, Key]]:
        rows = list(b.edges(end, keys, io, until=window.until))
        return [
            (job, ds)
            for job, ds, _ in windowed_pairs(b, rows, window)
            if readable is None or (readable(job[0]) and readable(ds[0]))
        ]

    return step


def _run_key(run_id: str) -> Key:
    return (_RUN_NS, run_id)


class _RunStep:
    """The run view's step: datasets to the runs that read or wrote them in the window, runs
    to the datasets they named; it keeps the run rows it met."""

    def __init__(self, b: LineageBackend, window: Window, readable: Readable | None) -> None:
        self.b, self.window, self.readable = b, window, readable
        self.runs: dict[str, RunRow] = {}

    def _seen(self, key: Key | None) -> bool:
        return key is not None and (self.readable is None or self.readable(key[0]))

    def __call__(
        self, end: NodeType, keys: Collection[Key], io: Literal["in", "out"]
    ) -> list[tuple[Key, Key]]:
        b, window = self.b, self.window
        if end == "DATASET":
            pairs = _runs_of_mentions(b, keys, io, window)
        else:
            wanted = {run_id for _, run_id in keys}
            rows = self.read_runs(wanted)
            jobs = {r.job for r in rows if r.job is not None}
            datasets = {e.dataset for e in b.edges("JOB", jobs, io, until=window.until)}
            pairs = []
            if datasets:
                named: dict[str, set[Key]] = {}
                for m in b.mentions("DATASET", datasets, roles=[_ROLE[io]], until=window.until):
                    if m.source == "run" and m.source_id in wanted:
                        named.setdefault(m.source_id, set()).add(m.key)
                pairs = [(r, ds) for r in rows for ds in named.get(r.run_id, ())]
        found: list[tuple[Key, Key]] = []
        for run, ds in pairs:
            if self._seen(run.job) and self._seen(ds):
                self.runs.setdefault(run.run_id, run)
                found.append((_run_key(run.run_id), ds))
        return found

    def read_runs(self, run_ids: Collection[str]) -> list[RunRow]:
        """The readable rows of these runs (cached)."""
        missing = [r for r in run_ids if r not in self.runs]
        if missing:
            for row in self.b.runs(run_ids=missing):
                if self._seen(row.job):
                    self.runs.setdefault(row.run_id, row)
        return [self.runs[r] for r in run_ids if r in self.runs]


def latest_entry(run: RunRow) -> dict[str, Any]:
    """A lineage job node's ``latestRun``."""
    return {
        "runId": run.run_id,
        "state": run.state.value,
        "stateTime": state_rank_time(run.state.rank),
        "heartbeatS": run.heartbeat_s,
    }


class _Folding:
    """The parent view: each job's root job (its latest run's parent run's job, to the top)
    and each root's members (the jobs whose runs name it as parent, to the bottom).

    Run rows read once serve the whole answer: the jobs' latest runs (the job nodes'
    ``latestRun`` when there is no window, which the graph read again before: about 240 jobs an
    answer of bench_million's parent asks) and the runs read by id, which the climbs of later
    steps find again (a child's parent run is, most often, its parent job's latest run, read
    when that job was met)."""

    def __init__(self, b: LineageBackend, until: datetime | None) -> None:
        self.b, self.until = b, until
        self.root: dict[Key, Key] = {}
        self.members: dict[Key, set[Key]] = {}
        #: Each job's latest run before ``until``, as :meth:`LineageBackend.runs` answered it.
        self.latest: dict[Key, RunRow] = {}
        #: Run rows by id, as read by id (a run id two jobs share has two rows).
        self.rows: dict[str, list[RunRow]] = {}
        #: The latest runs by id too, where a climb looks first (none with a window: such a row
        #: may span its end).
        self.latest_runs: dict[str, RunRow] = {}
        #: Each job whose latest run was read: the run its climb starts at (that run's root or
        #: parent run), or None.
        self.links: dict[Key, str | None] = {}
        #: The jobs found to fold into each root (:meth:`roots`), whatever job their parent
        #: facets name: a producer's facet may name another job than its parent run's.
        self.taken: dict[Key, set[Key]] = {}

    def runs_by_id(self, run_ids: Collection[str]) -> list[RunRow]:
        """The rows of these runs, each id read once."""
        missing = [rid for rid in run_ids if rid not in self.rows]
        if missing:
            for rid in missing:
                self.rows[rid] = []
            for row in self.b.runs(run_ids=missing):
                self.rows[row.run_id].append(row)
        return [row for rid in run_ids for row in self.rows[rid]]

    def _row(self, run_id: str) -> RunRow | None:
        """A stored row of the run (a run id two jobs share: either), None if not stored."""
        return self.latest_runs.get(run_id) or next(iter(self.rows.get(run_id, ())), None)

    def _read_latest(self, jobs: set[Key]) -> None:
        """The latest runs of these jobs (each read once), and where their climbs start."""
        self.links.update(dict.fromkeys(jobs))
        for run in self.b.runs(jobs=list(jobs), until=self.until, latest=1):
            if run.job in jobs:
                self.latest.setdefault(run.job, run)
                if self.until is None:
                    self.latest_runs.setdefault(run.run_id, run)
                link = run.root_run_id or run.parent_run_id
                if link and link != run.run_id:
                    self.links[run.job] = link

    def roots(self, jobs: Collection[Key], ahead: Collection[Key] = ()) -> dict[Key, Key]:
        """Each job's root: the job of the top run above its latest run, climbing run rows by
        their root run (the ``parent`` facet's ``root``) or else their parent run, in batches;
        a job whose top run is not stored, or that has no parent, is its own root. The latest
        runs of ``ahead`` (jobs whose roots are asked soon) come in the same read, when there is
        one: their roots are not taken yet (the closing step folds only the jobs it knows).

        The jobs of the runs a climb passes are rooted too (their own latest runs decide where
        they fold): a job between a member and its root that no ``parent`` mention of a member
        names (its facet names another job) is found from below, as it is from above."""
        todo = {j for j in jobs if j not in self.root}
        while todo:
            todo = self._root(todo, ahead)
            ahead = ()
        return {j: self.root[j] for j in jobs}

    def _root(self, todo: set[Key], ahead: Collection[Key]) -> set[Key]:
        """:meth:`roots` of jobs not rooted yet; the jobs of the runs their climbs passed,
        not rooted yet either."""
        if unread := {j for j in todo if j not in self.links}:
            self._read_latest(unread | {j for j in ahead if j not in self.links})
        top = {job: link for job in todo if (link := self.links[job])}
        stored: dict[Key, str] = {}  # each job's highest run found stored so far
        passed: set[Key] = set()  # the jobs of the stored runs below each top
        climbing, seen = dict(top), {job: {rid} for job, rid in top.items()}
        for _ in range(16):  # a chain of runs without a root link folds at its 16th run
            self.runs_by_id({r for r in climbing.values() if r not in self.latest_runs})
            higher: dict[Key, str] = {}
            for job, rid in climbing.items():
                row = self._row(rid)
                if row is None:
                    continue  # not stored: the chain stops at what was found
                below = self._row(stored[job]) if job in stored else None
                if below is not None and below.job is not None:
                    passed.add(below.job)
                stored[job] = rid
                link = row.root_run_id or row.parent_run_id
                if link and link not in seen[job]:
                    seen[job].add(link)
                    higher[job] = link
            if not higher:
                break
            climbing = higher
        for job in todo:
            row = self._row(stored.get(job, ""))
            self.root[job] = row.job if row is not None and row.job is not None else job
            if self.root[job] != job:
                self.taken.setdefault(self.root[job], set()).add(job)
        return {j for j in passed if j not in self.root}

    def expand(self, roots: Collection[Key], *, ahead: bool = False) -> set[Key]:
        """Every member of these roots (themselves included), read in batches: the jobs whose
        runs name a member as their parent and whose root is one of them, to the bottom, and
        the jobs already found to fold into one of them (:attr:`taken`) with their children. A
        parent's mentions name its child jobs, one a child (derivation version 9): their runs
        are not read to find them. ``ahead``: the walk goes on, and its step
        asks the roots of these roots (a climb's top job), read with their members' latest runs
        (a read a step, about 3.7 of an answer's 31 at 200,000 events)."""
        todo = {r for r in roots if r not in self.members}
        for root in todo:
            self.members[root] = {root}
        early = {r for r in todo if r not in self.root} if ahead else set()
        frontier = set(todo)
        for root in roots:  # the jobs found to fold here by their runs: their children too
            taken = self.taken.get(root, set()).difference(self.members[root])
            self.members[root] |= taken
            frontier |= taken
        while frontier:
            mentions = self.b.mentions("JOB", frontier, roles=["parent"], until=self.until)
            jobs = children_of(mentions)
            frontier = set()
            tops, early = self.roots(jobs, early), set()
            for job, top in tops.items():
                members = self.members.get(top)
                if members is not None and job not in members:
                    members.add(job)
                    frontier.add(job)
        found: set[Key] = set()
        for root in roots:
            found |= self.members[root]
        return found


class _FoldedStep:
    """The parent view's step: jobs fold into their roots, and a root's edges are its members'.
    Told each step's reads beforehand (:data:`~lineage_sdk.collector.keyed.LevelHook`), it
    answers the two ways of a ``both`` walk with one batch of the fold's reads: one expansion
    of every way's roots, one climb to the roots of every way's jobs (the walks of ``both``
    were the slowest answers, each way reading its own)."""

    def __init__(self, step: EdgeStep[Key], folding: _Folding) -> None:
        self.step, self.folding = step, folding
        self.ready: dict[tuple[NodeType, str, frozenset[Key]], list[tuple[Key, Key]]] = {}
        #: Whether the walk is closing (:meth:`close`).
        self.closing = False

    def close(self, kept: set[tuple[NodeType, Key]]) -> None:
        """The walk closes (its last step, edges only): only edges between nodes the cut keeps
        matter. The kept jobs are roots, whose members the answer lists anyway: expanded now, a
        job that folds into a kept node is one of them, so the closing step reads no other job's
        root. It meets the most jobs of any step: a third of the latest runs the fold read went
        to jobs of the closing step, nearly all left out."""
        self.closing = True
        self.folding.expand({key for kind, key in kept if kind == "JOB"})

    def before(self, end: NodeType, asks: list[tuple[Io, set[Key]]]) -> None:
        self.ready.clear()
        if len(asks) < 2:
            return
        if end == "JOB":
            self.folding.expand(set().union(*(keys for _, keys in asks)), ahead=not self.closing)
            return
        for io, keys in asks:
            self.ready[(end, io, frozenset(keys))] = list(self.step(end, keys, io))
        if not self.closing:
            self.folding.roots({job for pairs in self.ready.values() for job, _ in pairs})

    def __call__(
        self, end: NodeType, keys: Collection[Key], io: Literal["in", "out"]
    ) -> list[tuple[Key, Key]]:
        pairs = self.ready.pop((end, io, frozenset(keys)), None)
        if pairs is None:
            asked = self.folding.expand(keys, ahead=not self.closing) if end == "JOB" else keys
            pairs = list(self.step(end, asked, io))
        if self.closing:  # a job whose root is not known folds into no kept node (see close)
            known = self.folding.root
            return [(known[job], ds) for job, ds in pairs if job in known]
        roots = self.folding.roots({job for job, _ in pairs})
        return [(roots[job], ds) for job, ds in pairs]


def _graph(node: str, walk: KeyedWalk[Key], run_ids: bool = False) -> LineageGraph:
    """The walk as a graph (uncut); job keys are runs when ``run_ids``."""
    graph = LineageGraph(root=node)

    def add(kind: NodeType, key: Key) -> str:
        if kind == "JOB" and run_ids:
            nid = RUN_PREFIX + key[1]
            graph.nodes.setdefault(nid, LineageNode(nid, "RUN", key[0], key[1], {}))
            return nid
        nid = node_id(kind, *key)
        data = {"namespace": key[0], "name": key[1]}
        graph.nodes.setdefault(nid, LineageNode(nid, kind, key[0], key[1], data))
        return nid

    for key in walk.jobs:
        add("JOB", key)
    for key in walk.datasets:
        add("DATASET", key)
    for ot, ok, dt, dk in sorted(walk.edges):
        edge = LineageEdge(add(ot, ok), add(dt, dk))
        graph.nodes[edge.origin].out_edges.append(edge)
        graph.nodes[edge.destination].in_edges.append(edge)
    return graph


def view_graph(
    b: LineageBackend,
    node: str,
    root: tuple[NodeType, Key] | str,
    *,
    granularity: Granularity,
    direction: Direction,
    depth: int,
    node_limit: int | None,
    window: Window,
    readable: Readable | None,
    latest_runs: Callable[[list[Key], datetime | None], dict[Key, dict[str, Any]]],
) -> ViewGraph:
    """The answer of one view (``root``: a (type, key), or a run id in the run view); the job
    view's nodes carry their latest runs before ``until``."""
    check_node_limit(node_limit)
    depth = max(0, depth)
    if granularity == "run":
        return _run_view(b, node, root, direction, depth, node_limit, window, readable)
    assert not isinstance(root, str)
    step = window_step(b, window, readable)
    start: str | None = None
    before_step: LevelHook[Key] | None = None
    on_close: Callable[[set[tuple[NodeType, Key]]], None] | None = None
    if granularity == "parent":
        folding = _Folding(b, window.until)
        if root[0] == "JOB":
            top = folding.roots([root[1]])[root[1]]
            if top != root[1]:
                root, start = ("JOB", top), node_id("JOB", *top)
        folded = _FoldedStep(step, folding)
        step, before_step, on_close = folded, folded.before, folded.close

    def size(walk: KeyedWalk[Key]) -> int:
        return len(walk.datasets) if granularity == "dataset" else len(walk)

    # The job and parent views count every node, as the job view's own walk does: the closing
    # step is narrowed to the nodes the cut keeps (a parent-view walk of 1,000 nodes read the
    # edges and runs of 2,500 jobs without it). The dataset view counts datasets and cuts its
    # folded graph itself.
    names = None if granularity == "dataset" else names_are_keys
    walk = walk_keys(
        step,
        root,
        direction,
        depth,
        node_limit,
        names,
        size=size,
        before_step=before_step,
        on_close=on_close,
    )
    if granularity == "dataset" and root[0] == "JOB" and direction in ("upstream", "downstream"):
        # The job is no node: its own edges stand for it, both sides, whichever way is walked.
        io: Io = "out" if direction == "upstream" else "in"
        for job, ds in step("JOB", [root[1]], io):
            walk.datasets.add(ds)
            walk.edges.add(
                ("JOB", job, "DATASET", ds) if io == "out" else ("DATASET", ds, "JOB", job)
            )
    if granularity == "dataset":
        return _dataset_view(node, walk, direction, node_limit, root)
    # Cut on keys, as the job view's answer is: only the kept nodes are built.
    found = len(walk)
    walk, truncated = cut_keys(walk, root, direction, node_limit, names_are_keys)
    graph = _graph(start or node, walk)
    graph.truncated, graph.omitted = truncated, found - len(walk)
    jobs = [(n.namespace, n.name) for n in graph.nodes.values() if n.type == "JOB"]
    entries: dict[Key, dict[str, Any]] = {}
    if granularity == "parent" and window.until is None:  # the fold read them: no second read
        entries = {j: latest_entry(folding.latest[j]) for j in jobs if j in folding.latest}
        jobs_left = [j for j in jobs if j not in folding.links]  # every job it rooted among them
    else:
        jobs_left = jobs
    entries.update(latest_runs(jobs_left, window.until))
    for key, run in entries.items():
        graph.nodes[node_id("JOB", *key)].data["latestRun"] = run
    if granularity == "parent":
        folding.expand(jobs)  # one batch for the jobs the walk did not expand
        for item in graph.nodes.values():
            if item.type == "JOB":
                key = (item.namespace, item.name)
                members = folding.expand([key]) - {key}
                if members:
                    item.data["children"] = [
                        {"namespace": ns, "name": nm} for ns, nm in sorted(members)
                    ]
    return ViewGraph(graph, start=start)


def _dataset_view(
    node: str,
    walk: KeyedWalk[Key],
    direction: Direction,
    node_limit: int | None,
    root: tuple[NodeType, Key],
) -> ViewGraph:
    """The job walk folded into dataset -> dataset edges, each listing its jobs, cut on
    datasets (a job root is no node: its datasets are at distance 0). Built from the walk's
    keys, with no graph of its jobs (building that took a third of the view's time)."""
    reads: dict[Key, list[Key]] = {}
    writes: dict[Key, list[Key]] = {}
    for origin_type, origin, _, destination in walk.edges:
        if origin_type == "DATASET":
            reads.setdefault(destination, []).append(origin)
        else:
            writes.setdefault(origin, []).append(destination)
    ids = {key: node_id("DATASET", *key) for key in walk.datasets}
    view = LineageGraph(root=node)
    for key, nid in ids.items():
        view.nodes[nid] = LineageNode(
            nid, "DATASET", key[0], key[1], {"namespace": key[0], "name": key[1]}
        )
    edges: dict[tuple[str, str], set[Key]] = {}
    for job, outputs in writes.items():
        for read in reads.get(job, ()):
            for wrote in outputs:
                if read != wrote:
                    edges.setdefault((ids[read], ids[wrote]), set()).add(job)
    for from_id, to_id in sorted(edges):
        edge = LineageEdge(from_id, to_id)
        view.nodes[from_id].out_edges.append(edge)
        view.nodes[to_id].in_edges.append(edge)
    if root[0] == "JOB":
        touched = {ids[ds] for ds in (*reads.get(root[1], ()), *writes.get(root[1], ()))}
        cut = _cut_from(view, sorted(touched), direction, node_limit)
    else:
        cut = cut_lineage(view, direction, node_limit)
    data = {
        pair: {"jobs": [{"namespace": ns, "name": nm} for ns, nm in sorted(jobs)]}
        for pair, jobs in edges.items()
        if pair[0] in cut.nodes and pair[1] in cut.nodes
    }
    return ViewGraph(cut, data)


def _cut_from(
    graph: LineageGraph, starts: list[str], direction: Direction, node_limit: int | None
) -> LineageGraph:
    """:func:`_cut` from several start nodes (a job root's datasets) instead of the root."""
    if not starts:
        return graph
    hub = LineageNode(graph.root, "JOB", "", "", {})
    for nid in starts:
        hub.out_edges.append(LineageEdge(graph.root, nid))
        hub.in_edges.append(LineageEdge(nid, graph.root))
    graph.nodes[graph.root] = hub
    limit = None if node_limit is None else node_limit + 1  # the hub is no node of the answer
    cut = cut_lineage(graph, "undirected" if direction == "undirected" else "both", limit)
    cut.nodes.pop(graph.root, None)
    graph.nodes.pop(graph.root, None)
    for item in cut.nodes.values():
        item.in_edges = [e for e in item.in_edges if e.origin != graph.root]
        item.out_edges = [e for e in item.out_edges if e.destination != graph.root]
    return cut


def _run_view(
    b: LineageBackend,
    node: str,
    root: tuple[NodeType, Key] | str,
    direction: Direction,
    depth: int,
    node_limit: int | None,
    window: Window,
    readable: Readable | None,
) -> ViewGraph:
    step = _RunStep(b, window, readable)
    if isinstance(root, str):
        if not step.read_runs([root]):
            raise LookupError(f"nothing is recorded for {node!r}")
        walk_root: tuple[NodeType, Key] = ("JOB", _run_key(root))
    else:
        walk_root = root
    walk = walk_keys(step, walk_root, direction, depth, node_limit)
    graph = _graph(node, walk, run_ids=True)
    edge_data: dict[tuple[str, str], dict[str, Any]] = {}
    step.read_runs([k[1] for k in walk.jobs])
    run_nodes = [n for n in graph.nodes.values() if n.type == "RUN"]
    parents = {step.runs[n.name].parent_run_id for n in run_nodes if n.name in step.runs}
    step.read_runs([p for p in parents if p])
    for item in run_nodes:
        run = step.runs.get(item.name)
        parent = step.runs.get(run.parent_run_id or "") if run is not None else None
        if parent is None:
            continue
        pid = RUN_PREFIX + parent.run_id
        if pid not in graph.nodes:
            graph.nodes[pid] = LineageNode(pid, "RUN", _RUN_NS, parent.run_id, {})
        edge = LineageEdge(pid, item.id)
        graph.nodes[pid].out_edges.append(edge)
        item.in_edges.append(edge)
        edge_data[(pid, item.id)] = {"link": "parent"}
    cut = cut_lineage(graph, direction, node_limit)
    for item in cut.nodes.values():
        if item.type == "RUN":
            item.data = _run_data(step.runs.get(item.name), item.name)
    return ViewGraph(
        cut, {k: v for k, v in edge_data.items() if k[0] in cut.nodes and k[1] in cut.nodes}
    )


def _run_data(run: RunRow | None, run_id: str) -> dict[str, Any]:
    """A RUN node's data."""
    job = run.job if run is not None else None
    return {
        "runId": run_id,
        "job": None if job is None else {"namespace": job[0], "name": job[1]},
        "state": None if run is None else run.state.value,
        "startedAt": None if run is None else run.started_at,
        "endedAt": None if run is None else run.ended_at,
        "parentRunId": None if run is None else run.parent_run_id,
    }
