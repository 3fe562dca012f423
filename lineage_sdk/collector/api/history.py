"""Lineage of one run (``runId``) and column lineage as it was (``asOf``), folded from the raw
events.

The engine keeps each raw event, so these are answered from them: the events that count are
read back, each turned into the record the engine derives rows from
(:func:`~lineage_sdk.collector.records.build_record`), their inputs and outputs folded into
job/dataset edges as the engine derives them on write (a job's edges are every dataset any of
its events named, JobEvents included), and that fold is walked with the engine's hop semantics,
so ``asOf`` at or after the newest event equals the plain answer.

Lineage ``asOf`` alone is answered by the engine's dated edges
(:meth:`~lineage_sdk.collector.engine.Engine.lineage_as_of`); the fold of every event up to
``asOf`` (``history_lineage(indexed=False)``) is what the tests compare it with.

The cost is a read of the events that count: for column lineage ``asOf``, every event up to
``asOf``; for ``runId``, one read per run of its scope, its children found by the engine's
parent index (``child_runs``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any, Literal

from lineage_sdk.collector.api import marquez, marquez_events
from lineage_sdk.collector.columns import (
    ColumnEdge,
    ColumnRoot,
    column_edges,
    edge_rank,
    parse_column_node,
    walk_columns,
)
from lineage_sdk.collector.engine import Engine
from lineage_sdk.collector.engine.lineage_facet import FacetLineage, facet_lineage
from lineage_sdk.collector.engine.reads import until_of
from lineage_sdk.collector.keyed import keyed_graph, walk_keys
from lineage_sdk.collector.records import build_record, parse_event_time
from lineage_sdk.collector.store import (
    ColumnGraph,
    Direction,
    FieldRef,
    LineageGraph,
    LineageRecord,
    NodeType,
    RunFold,
    check_node_limit,
    cut_lineage,
    names_dataset,
    node_id,
    parse_node_id,
)
from lineage_sdk.exceptions import InvalidEventError
from lineage_sdk.models.run_state import (
    heartbeat_interval,
    pick_link,
    state_key,
)

__all__ = [
    "LineageFold",
    "columns_of_events",
    "declared_edges",
    "declared_ids",
    "events_up_to",
    "fold",
    "history_columns",
    "history_job",
    "history_lineage",
    "history_records",
    "of_dataset",
    "of_job",
    "parse_instant",
    "run_scope_events",
    "unknown_in_history",
]

_Key = tuple[str, str]


@dataclass
class LineageFold:
    """Job/dataset edges as a set of events states them (what the stores' ``job_io`` holds)."""

    reads: dict[_Key, set[_Key]] = field(default_factory=lambda: defaultdict(set))
    writes: dict[_Key, set[_Key]] = field(default_factory=lambda: defaultdict(set))
    readers: dict[_Key, set[_Key]] = field(default_factory=lambda: defaultdict(set))
    writers: dict[_Key, set[_Key]] = field(default_factory=lambda: defaultdict(set))
    #: Every job and dataset the events name, so an unknown root can be told from a lone one.
    jobs: set[_Key] = field(default_factory=set)
    datasets: set[_Key] = field(default_factory=set)
    #: (origin, destination) node ids a JobEvent declares.
    declared: set[tuple[str, str]] = field(default_factory=set)
    #: Per job, the run of its latest event (least run id among equal times), and per run its
    #: events: what a node's ``latestRun`` is folded from.
    latest: dict[_Key, tuple[datetime, str]] = field(default_factory=dict)
    runs: RunFold = field(default_factory=RunFold)
    #: Column lineage: (output, input) field -> (rank, info), the greatest rank's info winning
    #: as in the stores (:func:`lineage_sdk.collector.columns.edge_rank`).
    columns: dict[tuple[FieldRef, FieldRef], tuple[str, str]] = field(default_factory=dict)
    #: Whether ``columns`` is folded: most of a fold's cost where events carry column lineage,
    #: and table-level answers never read it.
    with_columns: bool = True

    def latest_run(self, job: _Key) -> dict[str, Any] | None:
        """The job's latest run as ``queries.lineage`` puts it in a node's data."""
        latest = self.latest.get(job)
        return None if latest is None else self.runs.latest_run(latest[1])

    def add(self, rec: LineageRecord) -> None:
        for ref in (*rec.inputs, *rec.outputs):
            self.datasets.add((ref.namespace, ref.name))
        stated = column_edges(rec) if self.with_columns else None
        facet = facet_lineage(rec)
        if facet is not None:
            self._add_facet(facet, stated)
        if stated:
            rank = edge_rank(rec.event_time, rec.event_id)
            for pair, info in stated.items():
                stated_before = self.columns.get(pair)
                if stated_before is None or rank > stated_before[0]:
                    self.columns[pair] = (rank, info)
        if rec.job_namespace is None or rec.job_name is None:
            return
        job = (rec.job_namespace, rec.job_name)
        self.jobs.add(job)
        jid = node_id("JOB", *job)
        for refs, near, far, is_input in (
            (rec.inputs, self.reads, self.readers, True),
            (rec.outputs, self.writes, self.writers, False),
        ):
            for ref in refs:
                ds = (ref.namespace, ref.name)
                near[job].add(ds)
                far[ds].add(job)
                if rec.kind == "job":
                    did = node_id("DATASET", *ds)
                    self.declared.add((did, jid) if is_input else (jid, did))
        if rec.run_id:
            key = state_key(rec.event_type, rec.event_time, rec.event_id)
            self.runs.add(rec.run_id, key, heartbeat_interval(rec.event))
            old = self.latest.get(job)
            if old is None or (rec.event_time, old[1]) > (old[0], rec.run_id):
                self.latest[job] = (rec.event_time, rec.run_id)

    def _add_facet(
        self, facet: FacetLineage, stated: dict[tuple[FieldRef, FieldRef], str] | None
    ) -> None:
        """A ``lineage`` facet's declared edges, and its column edges into ``stated`` (the
        greatest info of an edge stated twice, as the engine joins them)."""
        for job, ds, io in facet.edges:
            self.jobs.add(job)
            self.datasets.add(ds)
            (self.reads if io == "in" else self.writes)[job].add(ds)
            (self.readers if io == "in" else self.writers)[ds].add(job)
            self.declared.add(_declared_ids(job, ds, io))
        if stated is not None:
            for (out, src, _job), info in facet.columns.items():
                if info > stated.get((out, src), ""):
                    stated[(out, src)] = info


def fold(records: Iterable[LineageRecord], *, columns: bool = True) -> LineageFold:
    """The edges ``records`` state, each record once; column lineage too unless ``columns`` is
    False (table-level answers)."""
    result = LineageFold(with_columns=columns)
    seen: set[str] = set()
    for rec in records:
        if rec.event_id not in seen:
            seen.add(rec.event_id)
            result.add(rec)
    return result


def parse_instant(text: str, name: str = "asOf") -> datetime:
    """A time as ``asOf`` takes it: RFC 3339 (no offset means UTC) or a date (its start, UTC).
    ValueError naming ``name`` otherwise."""
    value = text.strip()
    try:
        if len(value) == 10:
            return datetime.combine(date.fromisoformat(value), datetime.min.time(), tzinfo=UTC)
        parsed = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise ValueError(f"{name} must be an RFC 3339 time or YYYY-MM-DD, got {text!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def events_up_to(events: Iterable[Mapping[str, Any]], as_of: datetime) -> list[Any]:
    """The events with ``eventTime <= as_of``, in their order (an unreadable time is left out)."""
    kept: list[Any] = []
    for event in events:
        try:
            if parse_event_time(event.get("eventTime")) <= as_of:
                kept.append(event)
        except InvalidEventError:
            continue
    return kept


def _records(
    events: Iterable[Mapping[str, Any]], ids: Iterable[str | None] | None = None
) -> Iterator[LineageRecord]:
    """Records of ``events``; ``ids`` the stored event ids when known (hashing is the cost)."""
    for event, event_id in zip(events, ids if ids is not None else _nones(), strict=False):
        try:
            yield build_record(event, event_id=event_id)
        except (InvalidEventError, KeyError, TypeError, ValueError):
            continue  # stored events were validated; an odd one is left out, not fatal


def _nones() -> Iterator[None]:
    while True:
        yield None


def history_records(
    store: Engine, *, as_of: datetime | None = None, run_id: str | None = None
) -> list[LineageRecord]:
    """The records an ``asOf``/``runId`` answer is folded from.

    ``as_of``: every event with ``eventTime <= as_of``. ``run_id``: the events of the run's
    scope (:func:`run_scope_events`), each also bounded by ``as_of`` when given. LookupError
    when the run has no (such) events.
    """
    if run_id is not None:
        return list(_records(run_scope_events(store, run_id, as_of=as_of)))
    until = None if as_of is None else until_of(as_of)
    raws = list(store.iter_raw_events(until=until))
    stored = (raw.data() for raw in raws)
    found = _records(stored, (raw.event_id for raw in raws))
    # The event's own time decides, to the microsecond, whatever precision a store indexes.
    return [rec for rec in found if as_of is None or rec.event_time <= as_of]


def run_scope_events(
    store: Engine, run_id: str, *, as_of: datetime | None = None
) -> list[dict[str, Any]]:
    """The raw events ``runId`` answers from: the run's, its parent runs' (every parent its
    events name) and its child runs' (runs whose parent, the least their events name as every
    store reads it, is this run), each bounded by ``as_of`` when given; in event-time order.

    Bounded: a read per run (``events_of_run``) and the children by the engine's parent index.
    LookupError when the run has no events (up to ``as_of``).
    """

    def read(run: str) -> list[tuple[datetime, dict[str, Any], LineageRecord]]:
        """The run's events up to ``as_of``, each with its time and record."""
        kept = []
        for event in store.events_of_run(run):
            for rec in _records([event]):
                if as_of is None or rec.event_time <= as_of:
                    kept.append((rec.event_time, event, rec))
        return kept

    own = read(run_id)
    parents = sorted({rec.parent_run_id for _, _, rec in own if rec.parent_run_id})
    if not own:
        when = "" if as_of is None else f" up to {as_of.isoformat()}"
        raise LookupError(f"no events recorded for run {run_id!r}{when}")
    scope = list(own)
    done = {run_id}
    for parent in parents:
        if parent not in done:
            done.add(parent)
            scope.extend(read(parent))
    for child in store.child_runs(run_id):
        if child in done:
            continue
        done.add(child)
        found = read(child)
        if pick_link(rec.parent_run_id for _, _, rec in found) == run_id:
            scope.extend(found)
    scope.sort(key=lambda item: item[0])  # stable: each run's own (time, id) order kept
    return [event for _, event, _ in scope]


def of_job(events: Iterable[Mapping[str, Any]], namespace: str, name: str) -> list[Any]:
    """The run events of job ``namespace:name`` among ``events`` (what ``events_of_job`` reads)."""
    kept: list[Any] = []
    for event in events:
        job, run = event.get("job"), event.get("run")
        if (
            isinstance(job, Mapping)
            and isinstance(run, Mapping)
            and (job.get("namespace"), job.get("name")) == (namespace, name)
        ):
            kept.append(event)
    return kept


def of_dataset(events: Iterable[Mapping[str, Any]], namespace: str, name: str) -> list[Any]:
    """Every event of the runs among ``events`` that named the dataset (what
    ``events_of_dataset`` reads: a run's events whether or not each names it)."""
    listed = list(events)
    runs = {_run_of(e) for e in listed if names_dataset(e, namespace, name)}
    runs.discard(None)
    return [e for e in listed if _run_of(e) in runs]


def _run_of(event: Mapping[str, Any]) -> str | None:
    run = event.get("run")
    run_id = run.get("runId") if isinstance(run, Mapping) else None
    return run_id if isinstance(run_id, str) else None


def declared_edges(
    store: Engine, jobs: Sequence[_Key], as_of: datetime | None = None
) -> set[tuple[str, str]]:
    """The (origin, destination) node ids of the edges of ``jobs`` declared (up to ``as_of``):
    a JobEvent's inputs and outputs, a ``lineage`` facet's edges (:meth:`Engine.declared`)."""
    return declared_ids(store.declared(sorted(set(jobs)), as_of=as_of))


def declared_ids(found: Iterable[tuple[_Key, _Key, str]]) -> set[tuple[str, str]]:
    """Declared edges (job, dataset, io) as (origin, destination) node ids."""
    return {_declared_ids(job, dataset, io) for job, dataset, io in found}


def _declared_ids(job: _Key, dataset: _Key, io: str) -> tuple[str, str]:
    """A declared edge as (origin, destination) node ids, pointing with the data."""
    jid, did = node_id("JOB", *job), node_id("DATASET", *dataset)
    return (did, jid) if io == "in" else (jid, did)


def _past_graph(
    facts: LineageFold, node: str, direction: Direction, depth: int, node_limit: int | None
) -> LineageGraph:
    """The graph ``facts`` describe around ``node``, walked as the stores walk
    (:func:`~lineage_sdk.collector.keyed.walk_keys`), not yet cut."""
    kind, namespace, name = parse_node_id(node)
    sides = {
        ("JOB", "in"): facts.reads,
        ("JOB", "out"): facts.writes,
        ("DATASET", "in"): facts.readers,
        ("DATASET", "out"): facts.writers,
    }

    def step(
        end: NodeType, keys: Collection[_Key], io: Literal["in", "out"]
    ) -> Iterator[tuple[_Key, _Key]]:
        side = sides[(end, io)]
        for key in keys:
            for other in side.get(key, ()):
                yield (key, other) if end == "JOB" else (other, key)

    walk = walk_keys(step, (kind, (namespace, name)), direction, depth, node_limit)
    names: dict[NodeType, dict[_Key, _Key]] = {
        "JOB": {k: k for k in walk.jobs},
        "DATASET": {k: k for k in walk.datasets},
    }
    graph, _ = keyed_graph(node, (kind, (namespace, name)), walk, names, truncated=False)
    return graph


def history_lineage(
    store: Engine,
    node: str,
    *,
    direction: Direction = "both",
    depth: int = 20,
    as_of: datetime | None = None,
    run_id: str | None = None,
    node_limit: int | None = None,
    indexed: bool = True,
) -> tuple[LineageGraph, set[tuple[str, str]]]:
    """The lineage graph around ``node`` as of ``as_of`` and/or within run ``run_id``, and the
    declared edges among it, cut to ``node_limit`` nodes as the stores cut theirs
    (:func:`~lineage_sdk.collector.store.cut_lineage`). LookupError when the events that count
    name no such node.

    ``asOf`` alone is answered by the engine's dated edges (``lineage_as_of``); with
    ``indexed=False`` (tests compare the two), folded from every raw event up to it."""
    kind, namespace, name = parse_node_id(node)
    if depth < 0:
        raise ValueError(f"depth must be >= 0, got {depth}")
    check_node_limit(node_limit)
    if indexed and run_id is None and as_of is not None:
        graph = store.lineage_as_of(
            node, direction=direction, depth=depth, node_limit=node_limit, as_of=as_of
        )
        jobs = [(n.namespace, n.name) for n in graph.nodes.values() if n.type == "JOB"]
        return graph, _among(graph, declared_edges(store, jobs, as_of))
    facts = fold(history_records(store, as_of=as_of, run_id=run_id), columns=False)
    if (namespace, name) not in (facts.jobs if kind == "JOB" else facts.datasets):
        raise unknown_in_history(node, as_of, run_id)
    whole = _past_graph(facts, node, direction, depth, node_limit)
    graph = cut_lineage(whole, direction, node_limit)
    for item in graph.nodes.values():
        if item.type == "JOB":
            run = facts.latest_run((item.namespace, item.name))
            if run is not None:
                item.data["latestRun"] = run
    return graph, _among(graph, facts.declared)


def unknown_in_history(node: str, as_of: datetime | None, run_id: str | None) -> LookupError:
    """The error of an ``asOf``/``runId`` lineage read whose root the events that count do not
    name: one wording wherever it is decided (a hidden root answers it too)."""
    scope = f"run {run_id!r}" if run_id is not None else "the events"
    when = "" if as_of is None else f" up to {as_of.isoformat()}"
    return LookupError(f"nothing is recorded for {node!r} in {scope}{when}")


def _among(graph: LineageGraph, declared: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The declared edges that are edges of ``graph``."""
    edges = {(e.origin, e.destination) for n in graph.nodes.values() for e in n.out_edges}
    return declared & edges


def history_columns(
    store: Engine,
    node: str,
    *,
    as_of: datetime | None = None,
    run_id: str | None = None,
    depth: int = 20,
    with_downstream: bool = False,
    node_limit: int | None = None,
) -> ColumnGraph:
    """Column lineage around ``node`` as the events up to ``as_of`` and/or of run ``run_id``'s
    scope (:func:`run_scope_events`) state it, walked as the stores walk
    (:func:`lineage_sdk.collector.columns.walk_columns`); no roots when none then.
    LookupError when the run has no events (up to ``as_of``)."""
    parse_column_node(node)  # a malformed id is a ValueError before anything is read
    return columns_of_records(
        history_records(store, as_of=as_of, run_id=run_id),
        node,
        depth=depth,
        with_downstream=with_downstream,
        node_limit=node_limit,
    )


def columns_of_events(
    events: Iterable[Mapping[str, Any]],
    node: str,
    *,
    depth: int = 20,
    with_downstream: bool = False,
    node_limit: int | None = None,
) -> ColumnGraph:
    """Column lineage around ``node`` as ``events`` state it (each event once), walked as the
    stores walk: what a store holding only those events would answer."""
    return columns_of_records(
        _records(events), node, depth=depth, with_downstream=with_downstream, node_limit=node_limit
    )


def columns_of_records(
    records: Iterable[LineageRecord],
    node: str,
    *,
    depth: int,
    with_downstream: bool,
    node_limit: int | None,
) -> ColumnGraph:
    """:func:`columns_of_events` from records."""
    facts = fold(records)
    by_output: dict[FieldRef, list[ColumnEdge]] = defaultdict(list)
    by_input: dict[FieldRef, list[ColumnEdge]] = defaultdict(list)
    known: set[FieldRef] = set()
    for (out, src), (_rank, info) in facts.columns.items():
        edge = ColumnEdge(out, src, info)
        by_output[out].append(edge)
        by_input[src].append(edge)
        known.update((out, src))

    def roots(root: ColumnRoot) -> list[FieldRef]:
        if root.field is not None:
            ref = FieldRef(root.namespace, root.name, root.field)
            return [ref] if ref in known else []
        if root.kind == "JOB":
            datasets = facts.writes.get((root.namespace, root.name), set())
        else:
            datasets = {(root.namespace, root.name)}
        return sorted(f for f in known if (f.namespace, f.dataset) in datasets)

    def step(fields: Sequence[FieldRef], upstream: bool) -> list[ColumnEdge]:
        index = by_output if upstream else by_input
        return [edge for ref in fields for edge in index.get(ref, ())]

    return walk_columns(
        node, roots, step, depth=depth, with_downstream=with_downstream, node_limit=node_limit
    )


def history_job(
    events: Sequence[Mapping[str, Any]], namespace: str, name: str, as_of: datetime | None
) -> dict[str, Any] | None:
    """A Marquez ``Job`` as its events up to ``as_of`` (inclusive; None: all of them) describe
    it, None before its first event. ``events``: the job's run events and JobEvents
    (``queries.job_events``), or those of a run's scope (:func:`of_job`).

    Inputs and outputs are the fold of those events (as the stores fold them on write), the
    latest runs are the runs with an event by then, latest first (ties: least run id, as in
    :meth:`LineageFold.latest_run`), each folded from its events up to ``as_of`` only.
    """
    kept: list[Mapping[str, Any]] = list(events) if as_of is None else events_up_to(events, as_of)
    if not kept:
        return None
    facts = fold(_records(kept), columns=False)
    job = (namespace, name)
    by_run: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    newest: dict[str, datetime] = {}
    for event in kept:
        run = event.get("run")
        run_id = run.get("runId") if isinstance(run, Mapping) else None
        if not isinstance(run_id, str):
            continue  # a JobEvent: no run
        by_run[run_id].append(event)
        at = parse_event_time(event.get("eventTime"))
        if run_id not in newest or at > newest[run_id]:
            newest[run_id] = at
    order = sorted(newest, key=lambda rid: (-newest[rid].timestamp(), rid))[:10]
    latest = [marquez.run_from_events(rid, by_run[rid]) for rid in order]
    data = marquez.job_data(
        namespace,
        name,
        latest_run=latest[0] if latest else None,
        latest_runs=latest,
        inputs=sorted(facts.reads.get(job, ())),
        outputs=sorted(facts.writes.get(job, ())),
    )
    data.update(marquez_events.job_details(namespace, name, kept))
    return data
