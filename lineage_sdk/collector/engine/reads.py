"""Every read, answered once over a :class:`~lineage_sdk.collector.backend.LineageBackend`.

The :class:`Engine` offers the read names the API layer asks today (``lineage``,
``runs_of_job``, ``column_lineage``, ...), each answered from the backend's rows: the walk of
:mod:`lineage_sdk.collector.keyed` over ``edges``, names and existence from ``nodes``, runs from
run rows, column lineage from column edges, history from events and mentions. Nothing here
knows how a backend stores a row, and no backend knows what a row means.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

import orjson

from lineage_sdk.collector.backend import (
    ColumnEdgeRow,
    EventRow,
    Key,
    LineageBackend,
    Position,
    RunRow,
)
from lineage_sdk.collector.columns import ColumnEdge, ColumnRoot, walk_columns
from lineage_sdk.collector.engine.forget import forget
from lineage_sdk.collector.keyed import keyed_answer, walk_keys
from lineage_sdk.collector.records import state_rank_time
from lineage_sdk.collector.store import (
    ColumnGraph,
    Direction,
    FieldRef,
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
from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY
from lineage_sdk.models.json_exact import loads_exact
from lineage_sdk.models.run_state import heartbeat_interval, state_key

__all__ = ["Engine", "until_of"]

_MICROSECOND = timedelta(microseconds=1)


def until_of(as_of: datetime) -> datetime:
    """``asOf`` T (inclusive, as the API means it) as the backends' exclusive ``until``."""
    return as_of + _MICROSECOND


def _text(argument: str, value: object) -> str:
    """``value``, a text: what callers pass from a request or a CLI line reaches a backend's
    query only as a string (a dict such as ``{"$ne": None}`` is refused here, not matched)."""
    if type(value) is not str:
        raise TypeError(f"{argument} must be a string, not {type(value).__name__}")
    return value


def _names(*, namespace: object, name: object) -> Key:
    return (_text("namespace", namespace), _text("name", name))


def _loads(rows: Iterable[EventRow]) -> list[dict[str, Any]]:
    return [loads_exact(r.json) for r in rows]


def _latest_entry(run: RunRow) -> dict[str, Any]:
    """A lineage job node's ``latestRun``."""
    return {
        "runId": run.run_id,
        "state": run.state.value,
        "stateTime": state_rank_time(run.state.rank),
        "heartbeatS": run.heartbeat_s,
    }


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


def _by_job(rows: Iterable[RunRow]) -> dict[Key, RunRow]:
    """``runs(latest=1)``'s answer (one run per job, chosen by the backend) by job."""
    return {run.job: run for run in rows if run.job is not None}


class Engine:
    """The one reader of a backend's rows (see the module docstring)."""

    def __init__(self, backend: LineageBackend) -> None:
        self.backend = backend
        self.name = backend.name

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

        def step(
            end: NodeType, keys: Collection[Key], io: Literal["in", "out"]
        ) -> list[tuple[Key, Key]]:
            rows = b.edges(end, keys, io, until=until)
            return [(r.job, r.dataset) for r in rows]

        def read_names(node_type: NodeType, keys: list[Key]) -> dict[Key, Key]:
            """A key is its names. Every walked key but the root came from an edge, whose
            event made both ends' node rows, first seen no later than the edge; the root is
            in the answer whether or not it was recorded. So no node row is read."""
            return {k: k for k in keys}

        def read_jobs(jobs: set[Key]) -> tuple[dict[Key, Key], dict[Key, dict[str, Any]]]:
            names = read_names("JOB", list(jobs))
            latest = self._latest_entries(list(names), until)
            return names, latest

        walk = walk_keys(step, root, direction, max(0, depth), node_limit, read_names)
        return keyed_answer(node, root, walk, direction, node_limit, read_names, read_jobs)

    def _latest_entries(
        self, jobs: Sequence[Key], until: datetime | None
    ) -> dict[Key, dict[str, Any]]:
        if not jobs:
            return {}
        if until is None:
            rows = self.backend.runs(jobs=jobs, latest=1)
            return {job: _latest_entry(run) for job, run in _by_job(rows).items()}
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
            job: _latest_entry(ended[(job, run_id)])
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
    ) -> ColumnGraph:
        """Fields ``depth`` column hops from ``node`` (see :func:`walk_columns`)."""
        b = self.backend

        def roots(root: ColumnRoot) -> list[FieldRef]:
            if root.field is not None:
                ref = FieldRef(root.namespace, root.name, root.field)
                named = any(True for _ in b.column_edges(outputs=[ref]))
                return [ref] if named or any(True for _ in b.column_edges(inputs=[ref])) else []
            key = (root.namespace, root.name)
            datasets = {key}
            if root.kind == "JOB":
                datasets = {e.dataset for e in b.edges("JOB", [key], "out")}
            found: set[FieldRef] = set()
            for row in b.column_edges(datasets=datasets) if datasets else ():
                found.update((row.output, row.input))
            return sorted(f for f in found if (f.namespace, f.dataset) in datasets)

        def step(fields: Sequence[FieldRef], upstream: bool) -> list[ColumnEdge]:
            rows = b.column_edges(outputs=fields) if upstream else b.column_edges(inputs=fields)
            return _column_edges(rows)

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
        """Remove these events and leave the derived rows equal to what the rest derive."""
        return forget(self.backend, event_ids)


def _column_edges(rows: Iterable[ColumnEdgeRow]) -> list[ColumnEdge]:
    """One edge per (output, input): the latest statement's info among the jobs that state it."""
    best: dict[tuple[FieldRef, FieldRef], ColumnEdgeRow] = {}
    for row in rows:
        key = (row.output, row.input)
        old = best.get(key)
        if old is None or row.info.rank > old.info.rank:
            best[key] = row
    return [ColumnEdge(out, src, row.info.value or "{}") for (out, src), row in best.items()]
