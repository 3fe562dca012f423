"""Every read, answered once over a :class:`~lineage_sdk.collector.backend.LineageBackend`.

The :class:`Engine` offers the read names the API layer asks today (``lineage``,
``runs_of_job``, ``column_lineage``, ...), each answered from the backend's rows: the walk of
:mod:`lineage_sdk.collector.keyed` over ``edges``, names and existence from ``nodes``, runs from
run rows, column lineage from column edges, history from events and mentions. Nothing here
knows how a backend stores a row, and no backend knows what a row means.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import orjson

from lineage_sdk.collector.backend import (
    ColumnEdgeRow,
    EdgeRow,
    EventRow,
    Io,
    Key,
    LineageBackend,
    MentionRow,
    Position,
    Role,
    RunRow,
)
from lineage_sdk.collector.columns import ColumnEdge, ColumnRoot, edge_rank_time, walk_columns
from lineage_sdk.collector.engine.derive import STATING_ROLES, alias_of_key, source_of_key
from lineage_sdk.collector.engine.forget import ReadAhead, forget
from lineage_sdk.collector.engine.statements import (
    FINGERPRINT,
    JobStatement,
    Statement,
    event_key,
    event_order,
    job_order,
    job_statements,
    statements,
)
from lineage_sdk.collector.engine.views import (
    ALWAYS,
    Readable,
    ViewGraph,
    Window,
    check_node,
    latest_entry,
    parse_run_node,
    view_graph,
    windowed_pairs,
)
from lineage_sdk.collector.keyed import keyed_answer, names_are_keys, walk_keys
from lineage_sdk.collector.records import MICROSECOND, state_rank_time
from lineage_sdk.collector.store import (
    ColumnGraph,
    Direction,
    FieldRef,
    Granularity,
    JobSummary,
    LineageGraph,
    NodeType,
    Page,
    RawEvent,
    RunFold,
    RunSummary,
    check_node_limit,
    check_page,
    parse_node_id,
    unknown_as_of,
)
from lineage_sdk.collector.symlinks import entry_name, event_aliases
from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY
from lineage_sdk.models.json_exact import loads_exact
from lineage_sdk.models.run_state import heartbeat_interval, state_key

__all__ = ["Engine", "NodeFacts", "SourceUse", "as_of_before", "shared_edges", "until_of"]

#: The most sources of an alias's mentions a resolution reads (the first mentions decide), and
#: the events read at a time from a source run.
_ALIAS_SOURCES = 32
_PAGE = 100
#: What a stored event's JSON (written by orjson: no space, no escaped letter) holds when it
#: states a ``schema`` facet.
_SCHEMA = '"schema":'


#: The present edges a walk read inside :func:`shared_edges`, by (end, io), then key.
_SHARED: ContextVar[dict[tuple[NodeType, Io], dict[Key, list[EdgeRow]]] | None] = ContextVar(
    "lineage_sdk_shared_edges", default=None
)


@contextmanager
def shared_edges() -> Iterator[None]:
    """Within it (one answer), :meth:`Engine.node_facts` takes a key's present edges from what
    a walk read of them, not from a second read: the graph's nodes were mostly walked."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def until_of(as_of: datetime) -> datetime:
    """``asOf`` T (inclusive, as the API means it) as the backends' exclusive ``until``."""
    return as_of + MICROSECOND


def as_of_before(until: datetime) -> datetime:
    """The inclusive ``asOf`` whose exclusive ``until`` is ``until`` (:func:`until_of` undone)."""
    return until - MICROSECOND


def _text(argument: str, value: object) -> str:
    """``value``, a text: what callers pass from a request or a CLI line reaches a backend's
    query only as a string (a dict such as ``{"$ne": None}`` is refused here, not matched)."""
    if type(value) is not str:
        raise TypeError(f"{argument} must be a string, not {type(value).__name__}")
    return value


def _in_json(text: str) -> bool:
    """Whether ``text`` stands as it is in the JSON text of a key that holds it (SOURCE and
    ALIAS keys: JSON escapes only quotes, backslashes and control characters), so that a
    backend's text search of the keys finds it."""
    return not any(c in '"\\' or c < " " for c in text)


def _names(*, namespace: object, name: object) -> Key:
    return (_text("namespace", namespace), _text("name", name))


def _loads(rows: Iterable[EventRow]) -> list[dict[str, Any]]:
    return [loads_exact(r.json) for r in rows]


def _summary(run: RunRow, job: Key | None = None) -> RunSummary:
    ns, name = job or run.job or ("", "")
    return RunSummary(
        run_id=run.run_id,
        job_namespace=ns,
        job_name=name,
        state=run.state.value,
        started_at=run.started_at,
        ended_at=run.ended_at,
        parent_run_id=run.parent_run_id,
        state_time=state_rank_time(run.state.rank),
        heartbeat_s=run.heartbeat_s,
    )


@dataclass(frozen=True, slots=True)
class SourceUse:
    """A data source as the events of one dataset name it (a SOURCE node read back)."""

    dataset: Key
    name: str
    uri: str
    first_seen: datetime
    last_seen: datetime


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What job and dataset nodes show beside their names (:meth:`Engine.node_facts`)."""

    #: Each node's first and last event time, by (kind, key).
    times: dict[tuple[NodeType, Key], tuple[datetime, datetime]]
    #: Each job's inputs (``in``) and outputs (``out``), sorted.
    sides: dict[tuple[Key, str], list[Key]]
    #: The jobs writing each dataset, sorted.
    writers: dict[Key, list[Key]]
    #: Each job's latest run id (the asked jobs' and the datasets' writers').
    latest: dict[Key, str]
    #: The events of each of those runs, by position.
    events: dict[str, list[dict[str, Any]]]
    #: The DatasetEvents of each dataset no job writes, by position.
    static: dict[Key, list[dict[str, Any]]]
    #: The jobs' declared edges (:meth:`Engine.declared`'s answer, read with ``sides``).
    declared: set[tuple[Key, Key, Io]]
    #: Asked ``schemas``: the events stating a ``schema`` facet of each writer's run before its
    #: latest (of its two latest runs), by run id, by position; None when not asked.
    earlier: dict[str, list[dict[str, Any]]] | None = None
    #: Asked ``schemas``: the DatasetEvents of each dataset some job writes (``static`` holds
    #: the others'), by position.
    stated: dict[Key, list[dict[str, Any]]] = field(default_factory=dict)


def _by_job(rows: Iterable[RunRow]) -> dict[Key, RunRow]:
    """``runs(latest=1)``'s answer (one run per job, chosen by the backend) by job."""
    return {run.job: run for run in rows if run.job is not None}


def _two_latest(rows: Iterable[RunRow]) -> dict[Key, list[RunRow]]:
    """``runs(latest=2)``'s answer by job, latest first (the greatest ``last_event``, ties the
    least run id: the run ``latest=1`` answers first)."""
    found: dict[Key, list[RunRow]] = {}
    for run in sorted(rows, key=lambda r: r.run_id):
        if run.job is not None:
            found.setdefault(run.job, []).append(run)
    for runs in found.values():
        runs.sort(key=lambda r: r.last_event, reverse=True)  # stable: ties keep the run id order
    return found


class Engine:
    """The one reader of a backend's rows (see the module docstring)."""

    def __init__(self, backend: LineageBackend) -> None:
        self.backend = backend
        self.name = backend.name
        self._read_ahead = ReadAhead()  # what a deletion read ahead, for the next batch's
        #: Held by each append through this engine and by a deletion batch whole, so a writer
        #: waits (off the GIL) while a batch derives, as it waited on the database for the
        #: stores before the engine, and the batch meets no append of its own engine.
        self.writing = threading.Lock()

    # -- the lineage walk ----------------------------------------------------------------------

    def lineage(
        self,
        node: str,
        *,
        direction: Direction = "both",
        depth: int = 5,
        node_limit: int | None = None,
    ) -> LineageGraph:
        """Jobs and datasets up to ``depth`` job hops from ``node`` (see
        :mod:`lineage_sdk.collector.keyed` for the levels, the ways and the cut)."""
        return self._walk(node, direction, depth, node_limit, None)

    def lineage_as_of(
        self,
        node: str,
        *,
        direction: Direction = "both",
        depth: int = 5,
        node_limit: int | None = None,
        as_of: datetime,
    ) -> LineageGraph:
        """The walk of the edges first seen by ``as_of``, each job's latest run as of then;
        LookupError when no event up to ``as_of`` names the root."""
        if not self._known_as_of(node, as_of):
            raise unknown_as_of(node, as_of)
        return self._walk(node, direction, depth, node_limit, until_of(as_of))

    def lineage_view(
        self,
        node: str,
        *,
        granularity: Granularity = "job",
        direction: Direction = "both",
        depth: int = 5,
        node_limit: int | None = None,
        window: Window = ALWAYS,
        readable: Readable | None = None,
    ) -> ViewGraph:
        """The graph around ``node`` (a job, a dataset, or in the run view ``run:<runId>``) at
        ``granularity``, within ``window`` (:mod:`~lineage_sdk.collector.engine.views`), the walk
        kept to ``readable`` namespaces; LookupError when nothing before the window's end names
        the root."""
        check_node(node, granularity)
        run_id = parse_run_node(node)
        if run_id is not None:
            root: tuple[NodeType, Key] | str = run_id
        else:
            node_type, namespace, name = parse_node_id(node)
            if readable is not None and not readable(namespace):
                raise LookupError(f"nothing is recorded for {node!r}")
            if window.until is not None:
                as_of = as_of_before(window.until)
                if not self._known_as_of(node, as_of):
                    raise unknown_as_of(node, as_of)
            elif not self.has_node(node_type, namespace, name):
                raise LookupError(f"nothing is recorded for {node!r}")
            root = (node_type, (namespace, name))
        return view_graph(
            self.backend,
            node,
            root,
            granularity=granularity,
            direction=direction,
            depth=depth,
            node_limit=node_limit,
            window=window,
            readable=readable,
            latest_runs=self._latest_entries,
        )

    def _known_as_of(self, node: str, as_of: datetime) -> bool:
        """Whether an event up to ``as_of`` names ``node``: a job by one of its own events; a
        dataset by an edge first seen by then, or by a DatasetEvent."""
        node_type, namespace, name = parse_node_id(node)
        key, until, b = (namespace, name), until_of(as_of), self.backend
        if node_type == "JOB":
            return bool(b.events(jobs=[key], until=until, limit=1))
        for io in ("in", "out"):
            if any(True for _ in b.edges("DATASET", [key], io, until=until)):
                return True
        return any(True for _ in b.mentions("DATASET", [key], roles=["dataset"], until=until))

    def _walk(
        self,
        node: str,
        direction: Direction,
        depth: int,
        node_limit: int | None,
        until: datetime | None,
    ) -> LineageGraph:
        node_type, namespace, name = parse_node_id(node)
        check_node_limit(node_limit)
        root: tuple[NodeType, Key] = (node_type, (namespace, name))
        b = self.backend

        shared = _SHARED.get() if until is None else None

        def step(
            end: NodeType, keys: Collection[Key], io: Literal["in", "out"]
        ) -> list[tuple[Key, Key]]:
            rows = list(b.edges(end, keys, io, until=until))
            if shared is not None:
                _share(shared.setdefault((end, io), {}), end, keys, rows)
            return [(r.job, r.dataset) for r in rows]

        def read_jobs(jobs: set[Key]) -> tuple[dict[Key, Key], dict[Key, dict[str, Any]]]:
            names = names_are_keys("JOB", list(jobs))
            latest = self._latest_entries(list(names), until)
            return names, latest

        walk = walk_keys(step, root, direction, max(0, depth), node_limit, names_are_keys)
        return keyed_answer(node, root, walk, direction, node_limit, names_are_keys, read_jobs)

    def declared(
        self, jobs: Sequence[Key], *, as_of: datetime | None = None
    ) -> set[tuple[Key, Key, Io]]:
        """The edges of ``jobs`` some event declares (a JobEvent's inputs and outputs, a
        ``lineage`` facet's edges), by ``as_of`` when given: (job, dataset, io)."""
        if not jobs:
            return set()
        until = None if as_of is None else until_of(as_of)  # declared no earlier than first seen
        found: set[tuple[Key, Key, Io]] = set()
        for io in ("in", "out"):
            for row in self.backend.edges("JOB", list(jobs), io, until=until):
                if row.declared is not None and (until is None or row.declared < until):
                    found.add((row.job, row.dataset, row.io))
        return found

    def _latest_entries(
        self, jobs: Sequence[Key], until: datetime | None
    ) -> dict[Key, dict[str, Any]]:
        if not jobs:
            return {}
        if until is None:
            rows = self.backend.runs(jobs=jobs, latest=1)
            return {job: latest_entry(run) for job, run in _by_job(rows).items()}
        return self._latest_runs_until(jobs, until)

    def _latest_runs_until(self, jobs: Sequence[Key], until: datetime) -> dict[Key, dict[str, Any]]:
        """Each job's latest run before ``until``: the run of its latest run event by then (the
        least run id among equal times), its state as of then.

        The backend answers the runs whose events all lie before ``until``, whose rows are
        exact and answer as they are, and those spanning it: their last event before ``until``
        and their state by then are folded here from their events before ``until``."""
        b = self.backend
        wanted = set(jobs)
        candidates = list(b.runs(jobs=jobs, until=until, latest=1))
        spanning = {r.run_id for r in candidates if r.last_event >= until}
        best: dict[Key, tuple[datetime, str]] = {}
        ended: dict[tuple[Key, str], RunRow] = {}

        def offer(job: Key | None, at: datetime, run_id: str) -> None:
            if job is None or job not in wanted:
                return
            old = best.get(job)
            if old is None or (at, old[1]) > (old[0], run_id):
                best[job] = (at, run_id)

        for run in candidates:
            if run.last_event < until and run.job is not None:
                ended[(run.job, run.run_id)] = run
                offer(run.job, run.last_event, run.run_id)
        fold = RunFold()
        for ev in b.events(run_ids=spanning, until=until) if spanning else ():
            offer(ev.job, ev.event_time, ev.run_id or "")
            beating = HEARTBEAT_FACET_KEY in ev.json
            beat = heartbeat_interval(orjson.loads(ev.json)) if beating else None
            fold.add(ev.run_id or "", state_key(ev.event_type, ev.event_time, ev.event_id), beat)
        return {
            job: latest_entry(ended[(job, run_id)])
            if run_id not in spanning
            else fold.latest_run(run_id)
            for job, (_, run_id) in best.items()
        }

    # -- runs -----------------------------------------------------------------------------------

    def runs_of_job(
        self, namespace: str, name: str, *, limit: int = 100, offset: int = 0
    ) -> Page[RunSummary]:
        check_page(limit, offset)
        job = _names(namespace=namespace, name=name)
        page = self.backend.runs(jobs=[job], limit=limit, offset=offset, count=True)
        return Page((_summary(r, job) for r in page), page.total)

    def latest_runs(self, jobs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], RunSummary]:
        if not jobs:
            return {}
        rows = self.backend.runs(jobs=list(jobs), latest=1)
        return {job: _summary(run, job) for job, run in _by_job(rows).items()}

    def events_of_run(self, run_id: str) -> list[dict[str, Any]]:
        _text("run_id", run_id)
        return _loads(self.backend.events(run_ids=[run_id]))

    def child_runs(self, run_id: str) -> list[str]:
        """The runs whose parent (the least their events name) is ``run_id``, sorted."""
        _text("run_id", run_id)
        return sorted({r.run_id for r in self.backend.runs(parent=run_id)})

    # -- the catalogue ----------------------------------------------------------------------------

    def namespaces(self, *, limit: int | None = None, offset: int = 0) -> Page[str]:
        check_page(limit, offset)
        page = self.backend.nodes("NAMESPACE", limit=limit, offset=offset, count=True)
        return Page((r.key[0] for r in page), page.total)

    def dataset_namespaces(self) -> list[str]:
        return [r.key[0] for r in self.backend.nodes("NAMESPACE") if "DATASET" in r.holds]

    def jobs(
        self, namespace: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> Page[JobSummary]:
        check_page(limit, offset)
        b = self.backend
        page = b.nodes("JOB", namespace=namespace, limit=limit, offset=offset, count=True)
        keys = [r.key for r in page]
        latest = _by_job(b.runs(jobs=keys, latest=1)) if keys else {}
        sides: dict[tuple[Key, str], list[Key]] = {}
        for io in ("in", "out"):
            for edge in b.edges("JOB", keys, io) if keys else ():
                sides.setdefault((edge.job, io), []).append(edge.dataset)
        return Page(
            (
                JobSummary(
                    *key,
                    None if key not in latest else _summary(latest[key], key),
                    tuple(sorted(sides.get((key, "in"), ()))),
                    tuple(sorted(sides.get((key, "out"), ()))),
                )
                for key in keys
            ),
            page.total,
        )

    def datasets(
        self, namespace: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> Page[tuple[str, str]]:
        check_page(limit, offset)
        page = self.backend.nodes(
            "DATASET", namespace=namespace, limit=limit, offset=offset, count=True
        )
        return Page((r.key for r in page), page.total)

    def sources(self, name: str | None = None) -> list[SourceUse]:
        """How the datasets name their sources (only source ``name``'s when given), by source
        name, then dataset. The backend is asked for the SOURCE nodes whose key holds the name
        (:func:`_in_json`; for them all when JSON escapes a character of it)."""
        plain = name is not None and _in_json(_text("name", name))
        rows = self.backend.nodes("SOURCE", text=name if plain else None)
        found: list[SourceUse] = []
        for row in rows:
            dataset, source, uri = source_of_key(row.key)
            if name is None or source == name:
                found.append(SourceUse(dataset, source, uri, row.first_seen, row.last_seen))
        found.sort(key=lambda s: (s.name, s.dataset, s.uri))
        return found

    def dataset_name(self, namespace: str, name: str) -> Key:
        """The dataset a name is a name of: the node of that name; else, for an alias (a name an
        event gave a symlinked dataset besides its canonical one), the node the first event that
        gave it resolved it to; else the name itself. The one resolution of every read by a
        dataset's name and of deletion (:mod:`lineage_sdk.collector.symlinks`)."""
        key = _names(namespace=namespace, name=name)
        if self.backend.nodes("DATASET", keys=[key]):
            return key
        return self._alias_of(key) or key

    def dataset_aliases(self, text: str) -> list[tuple[Key, Key]]:
        """(alias, node) for every alias whose name holds ``text`` (any case), in any namespace,
        sorted (search: a dataset is found by a part of any of its names, as in Marquez). The
        backend is asked for the ALIAS nodes whose key holds the text (:func:`_in_json`; for
        them all when JSON escapes a character of it)."""
        rows = self.backend.nodes("ALIAS", text=text if _in_json(_text("text", text)) else None)
        pairs = {alias_of_key(row.key) for row in rows}
        return sorted(p for p in pairs if text.lower() in p[0][1].lower())

    def _alias_of(self, alias: Key) -> Key | None:
        """The node the first event that gave ``alias`` resolved it to, as the events behind its
        alias mentions state it: their sources in the order of their first mention, at most
        :data:`_ALIAS_SOURCES` of them, each read up to its first event stating the alias."""
        rows = self.backend.mentions("DATASET", [alias], roles=["alias"])
        order = sorted(rows, key=lambda m: (m.first_seen, m.source, m.source_id))
        for mention in order[:_ALIAS_SOURCES]:
            for row in self._events_of_source(mention):
                node = event_aliases(loads_exact(row.json)).get(alias)
                if node is not None:
                    return node
        return None

    def _events_of_source(self, mention: MentionRow) -> Iterator[EventRow]:
        """The events of a mention's run (a page at a time, by position) or its one event."""
        if mention.source == "event":
            yield from self.backend.events(ids=[mention.source_id])
            return
        after: Position | None = None
        while True:
            page = self.backend.events(run_ids=[mention.source_id], after=after, limit=_PAGE)
            yield from page
            if len(page) < _PAGE:
                return
            after = page[-1].position

    def node_facts(
        self,
        jobs: Collection[Key],
        datasets: Collection[Key],
        latest: Mapping[Key, str] | None = None,
        *,
        schemas: bool = False,
    ) -> NodeFacts:
        """What Marquez's job and dataset nodes carry beside their names, for many nodes in a
        few batched reads (none per node): their times (node rows), the jobs' inputs and
        outputs and the datasets' writers (edges), the latest run of each of those jobs (read
        unless ``latest`` names it already: a walk's answer has them) and its events, and the
        DatasetEvents of the datasets no job writes; the jobs' declared edges come with their
        sides (one read of their edges serves both).

        ``schemas`` adds what decides whether a dataset's last schema change broke, in the
        same reads: each writer's two latest runs (``runs(latest=2)``, which also names the
        latest runs not given) with the earlier one's events that state a ``schema`` facet
        (read with the latest runs'), and the DatasetEvents of the written datasets too (read
        with the others'). A change older than the two latest runs of every writer is not in
        them."""
        b, jobs, datasets = self.backend, set(jobs), set(datasets)
        times: dict[tuple[NodeType, Key], tuple[datetime, datetime]] = {}
        kinds: tuple[tuple[NodeType, set[Key]], ...] = (("JOB", jobs), ("DATASET", datasets))
        for kind, keys in kinds:
            for node in b.nodes(kind, keys=keys) if keys else ():
                times[(kind, node.key)] = (node.first_seen, node.last_seen)
        sides: dict[tuple[Key, str], list[Key]] = {}
        declared: set[tuple[Key, Key, Io]] = set()
        for io in ("in", "out"):
            for edge in self._present_edges("JOB", jobs, io):
                sides.setdefault((edge.job, io), []).append(edge.dataset)
                if edge.declared is not None:
                    declared.add((edge.job, edge.dataset, edge.io))
        writers: dict[Key, list[Key]] = {}
        for edge in self._present_edges("DATASET", datasets, "out"):
            writers.setdefault(edge.dataset, []).append(edge.job)
        for found in (*sides.values(), *writers.values()):
            found.sort()
        runs = {job: run for job, run in (latest or {}).items() if job in jobs}
        wrote: set[Key] = set().union(*writers.values())
        asked = jobs.union(wrote).difference(runs)
        earlier: dict[str, list[dict[str, Any]]] | None = None
        if not schemas:
            for job, row in _by_job(b.runs(jobs=asked, latest=1)).items() if asked else ():
                runs[job] = row.run_id
        else:
            earlier, ran = {}, asked | wrote
            for job, rows in _two_latest(b.runs(jobs=ran, latest=2) if ran else ()).items():
                if job in asked:
                    runs[job] = rows[0].run_id
                if job in wrote:
                    earlier.update((r.run_id, []) for r in rows)
            for run_id in runs.values():
                earlier.pop(run_id, None)
        events: dict[str, list[dict[str, Any]]] = {run_id: [] for run_id in runs.values()}
        wanted = [*events, *(earlier or ())]
        for stored in b.events(run_ids=wanted) if wanted else ():
            run_id = stored.run_id or ""
            bucket = events.get(run_id)
            if bucket is None and earlier is not None and _SCHEMA in stored.json:
                bucket = earlier.get(run_id)  # an earlier run's event serves its schema alone
            if bucket is not None:
                bucket.append(loads_exact(stored.json))
        lone = sorted(d for d in datasets if d not in writers)
        read = sorted(datasets) if schemas else lone
        static: dict[Key, list[dict[str, Any]]] = {}
        stated: dict[Key, list[dict[str, Any]]] = {}
        for event in self.static_events(datasets=read) if read else ():
            about = entry_name(event.get("dataset"))  # a DatasetEvent's one dataset
            if about is not None:
                (stated if about in writers else static).setdefault(about, []).append(event)
        return NodeFacts(times, sides, writers, runs, events, static, declared, earlier, stated)

    def _present_edges(self, end: NodeType, keys: Collection[Key], io: Io) -> list[EdgeRow]:
        """``edges(end, keys, io)``: the keys a walk read inside :func:`shared_edges` from what
        it read (the same rows: edges come in no order), the others in one read."""
        shared = _SHARED.get()
        known = {} if shared is None else shared.get((end, io), {})
        missing = [k for k in keys if k not in known]
        found = [row for k in keys if k in known for row in known[k]]
        found.extend(self.backend.edges(end, missing, io) if missing else ())
        return found

    def has_node(self, node_type: NodeType, namespace: str, name: str) -> bool:
        key = _names(namespace=namespace, name=name)
        return bool(self.backend.nodes(node_type, keys=[key]))

    def search(self, text: str, *, limit: int = 50) -> list[tuple[NodeType, str, str]]:
        _text("text", text)
        out: list[tuple[NodeType, str, str]] = []
        for node_type in ("JOB", "DATASET"):
            for row in self.backend.nodes(node_type, text=text, limit=limit):
                out.append((node_type, *row.key))
        return out[:limit]

    def has_events_after(self, at: datetime) -> bool:
        """Whether a stored event is later than ``at``: one read of the events from just after
        it, where the newest event's time cost a scan of every event on a server that pages a
        time range by sorting it (FalkorDB: 0.72 s an ``asOf`` answer at 200,000 events)."""
        return bool(self.backend.events(since=until_of(at), limit=1))  # the first after ``at``

    def count_events(self) -> int:
        """Number of stored events (tests, tooling)."""
        return self.backend.events(limit=0, count=True).total

    # -- history: the raw events behind Marquez's versions, facets and event log ---------------

    def events_of_job(self, namespace: str, name: str) -> list[dict[str, Any]]:
        job = _names(namespace=namespace, name=name)
        return _loads(self.backend.events(jobs=[job], kinds=["run"]))

    def events_of_dataset(self, namespace: str, name: str) -> list[dict[str, Any]]:
        key = _names(namespace=namespace, name=name)
        found = self.backend.mentions("DATASET", [key], roles=["input", "output"])
        runs = {m.run_id for m in found if m.run_id}
        return _loads(self.backend.events(run_ids=runs)) if runs else []

    def dataset_statements(
        self, namespace: str, name: str, *, as_of: datetime | None = None
    ) -> tuple[list[Statement], dict[str, str], dict[str, dict[str, Any]]]:
        """What each event (up to ``as_of``) states of the dataset, in event order
        (:mod:`~lineage_sdk.collector.engine.statements`); the version key each schema
        fingerprint among them stands for, found by reading one event per fingerprint; and the
        events read, by id."""
        key = _names(namespace=namespace, name=name)
        until = None if as_of is None else until_of(as_of)
        roles: list[Role] = [*STATING_ROLES, "stated"]
        rows = self.backend.mentions("DATASET", [key], roles=roles, until=until, stated=True)
        found = sorted(statements(rows, until), key=event_order)
        prints: dict[str, str] = {}
        for s in found:
            if s.key is not None and s.key.startswith(FINGERPRINT):
                prints.setdefault(s.key, s.event_id)
        events = self.events_by_id(prints.values())
        return found, {p: event_key(events[i], *key) or p for p, i in prints.items()}, events

    def job_statements(
        self, namespace: str, name: str, *, as_of: datetime | None = None
    ) -> list[JobStatement]:
        """What each event of the job (up to ``as_of``) states of it, in the order its object
        folds them (:func:`~lineage_sdk.collector.engine.statements.job_order`)."""
        key = _names(namespace=namespace, name=name)
        until = None if as_of is None else until_of(as_of)
        rows = self.backend.mentions("JOB", [key], roles=["stated"], until=until, stated=True)
        return sorted(job_statements(rows, until), key=job_order)

    def events_by_id(self, ids: Collection[str]) -> dict[str, dict[str, Any]]:
        """The stored events of ``ids``, by id (absent ones left out)."""
        rows = self.backend.events(ids=ids) if ids else ()
        return {r.event_id: loads_exact(r.json) for r in rows}

    def events_of_runs(
        self,
        run_ids: Collection[str],
        *,
        jobs: Collection[Key] | None = None,
        as_of: datetime | None = None,
    ) -> dict[str, list[dict[str, Any]]]:
        """The events of each of these runs (those of ``jobs`` only, when given; up to
        ``as_of``), by run id, each run's by position."""
        until = None if as_of is None else until_of(as_of)
        found: dict[str, list[dict[str, Any]]] = {}
        rows = self.backend.events(run_ids=run_ids, jobs=jobs, until=until) if run_ids else ()
        for row in rows:
            found.setdefault(row.run_id or "", []).append(loads_exact(row.json))
        return found

    def static_events(
        self,
        *,
        jobs: Sequence[tuple[str, str]] = (),
        datasets: Sequence[tuple[str, str]] = (),
    ) -> list[dict[str, Any]]:
        """The JobEvents of ``jobs`` and the DatasetEvents of ``datasets``, by position."""
        b = self.backend
        rows: dict[str, EventRow] = {}
        if jobs:
            rows.update((r.event_id, r) for r in b.events(jobs=list(jobs), kinds=["job"]))
        if datasets:
            found = b.mentions("DATASET", list(datasets), roles=["dataset"])
            ids = {m.source_id for m in found if m.source == "event"}
            if ids:
                rows.update((r.event_id, r) for r in b.events(ids=ids))
        return _loads(sorted(rows.values(), key=lambda r: r.position))

    def job_events_up_to(
        self, jobs: Sequence[tuple[str, str]], as_of: datetime
    ) -> list[tuple[str, dict[str, Any]]]:
        """(event id, event) of the run events of ``jobs`` up to ``as_of``, by position."""
        if not jobs:
            return []
        rows = self.backend.events(jobs=list(jobs), kinds=["run"], until=until_of(as_of))
        return [(r.event_id, loads_exact(r.json)) for r in rows]

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
        """Events with ``after <= eventTime < before``, newest first unless ``ascending``;
        ``namespace`` keeps the run events of that job namespace."""
        check_page(limit, offset)
        page = self.backend.events(
            since=after,
            until=before,
            namespace=namespace,
            kinds=None if namespace is None else ["run"],
            descending=not ascending,
            limit=limit,
            offset=offset,
            count=True,
        )
        return Page(_loads(page), page.total)

    # -- column lineage ---------------------------------------------------------------------------

    def column_lineage(
        self,
        node: str,
        *,
        depth: int = 20,
        with_downstream: bool = False,
        node_limit: int | None = None,
        window: Window = ALWAYS,
    ) -> ColumnGraph:
        """Fields ``depth`` column hops from ``node`` (see :func:`walk_columns`); within
        ``window``, the column edges stated in it: first before its end, last at or after its
        start, by a job that wrote the output's dataset in it (a DatasetEvent's: no job)."""
        b = self.backend
        timed = window != ALWAYS

        def in_window(rows: Iterable[ColumnEdgeRow]) -> list[ColumnEdgeRow]:
            # Stated first before the end and last at or after the start, by a job that wrote
            # the output's dataset in the window (a job's run with an event in it).
            since, until = window.since, window.until
            rows = [
                r
                for r in rows
                if (until is None or r.first_seen < until)
                and (since is None or edge_rank_time(r.info.rank) >= since)
            ]
            jobs = {r.job for r in rows if r.job is not None}
            if not timed or not jobs:
                return rows
            edges = b.edges("JOB", jobs, "out", until=window.until)
            wrote = {(job, ds) for job, ds, _ in windowed_pairs(b, edges, window)}
            return [
                r
                for r in rows
                if r.job is None or (r.job, (r.output.namespace, r.output.dataset)) in wrote
            ]

        def roots(root: ColumnRoot) -> list[FieldRef]:
            if root.field is not None:
                ref = FieldRef(root.namespace, root.name, root.field)
                named = any(True for _ in in_window(b.column_edges(outputs=[ref])))
                if not named:
                    named = any(True for _ in in_window(b.column_edges(inputs=[ref])))
                return [ref] if named else []
            key = (root.namespace, root.name)
            datasets = {key}
            if root.kind == "JOB":
                datasets = {e.dataset for e in b.edges("JOB", [key], "out")}
            found: set[FieldRef] = set()
            for row in in_window(b.column_edges(datasets=datasets)) if datasets else ():
                found.update((row.output, row.input))
            return sorted(f for f in found if (f.namespace, f.dataset) in datasets)

        def step(fields: Sequence[FieldRef], upstream: bool) -> list[ColumnEdge]:
            rows = b.column_edges(outputs=fields) if upstream else b.column_edges(inputs=fields)
            return _column_edges(in_window(rows) if timed else rows)

        return walk_columns(
            node, roots, step, depth=depth, with_downstream=with_downstream, node_limit=node_limit
        )

    # -- portability: raw events in (event_time, event_id) order -------------------------------

    def iter_raw_events(
        self,
        *,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: Position | None = None,
        batch_size: int = 1000,
    ) -> Iterator[RawEvent]:
        """Every stored event as received, by position, read a batch at a time."""
        while True:
            page = self.backend.events(
                namespace=namespace, since=since, until=until, after=after, limit=batch_size
            )
            for row in page:
                yield RawEvent(row.event_id, row.event_time, row.json)
            if len(page) < batch_size:
                return
            after = page[-1].position

    def count_raw_events(
        self,
        *,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> int:
        page = self.backend.events(
            namespace=namespace, since=since, until=until, limit=0, count=True
        )
        return page.total

    def stored_event_ids(self, event_ids: Sequence[str]) -> set[str]:
        return {r.event_id for r in self.backend.events(ids=set(event_ids))}

    def delete_events(self, event_ids: Sequence[str]) -> int:
        """Remove these events and leave the derived rows equal to what the rest derive
        (holding :attr:`writing`: this engine's writers wait for the batch)."""
        with self.writing:
            return forget(self.backend, event_ids, self._read_ahead)


def _share(
    known: dict[Key, list[EdgeRow]], end: NodeType, keys: Iterable[Key], rows: Iterable[EdgeRow]
) -> None:
    """Keep the edges one read of ``keys`` answered, by key (a key without edges too)."""
    fresh: dict[Key, list[EdgeRow]] = {key: [] for key in keys}
    for row in rows:
        fresh.get(row.job if end == "JOB" else row.dataset, []).append(row)
    known.update(fresh)


def _column_edges(rows: Iterable[ColumnEdgeRow]) -> list[ColumnEdge]:
    """One edge per (output, input): the latest statement's info among the jobs that state it."""
    best: dict[tuple[FieldRef, FieldRef], ColumnEdgeRow] = {}
    for row in rows:
        key = (row.output, row.input)
        old = best.get(key)
        if old is None or row.info.rank > old.info.rank:
            best[key] = row
    return [ColumnEdge(out, src, row.info.value or "{}") for (out, src), row in best.items()]
