"""What lies downstream of a node, and who to tell: the impact of a failure or a change.

One answer serves the alerts (a CloudEvent's ``data.impact``), ``GET /api/v1/impact`` and
``lineage impact``: every job and dataset downstream of the node within ``depth``, nearest
first, each with its distance, its latest run and its owners.

* **The walk** is the engine's job view downstream (:meth:`Engine.lineage_view`), so every
  backend answers alike. ``depth`` counts job hops as the lineage route does: from a job, depth
  0 is its own outputs; from a dataset, depth 1 is the jobs that read it and their outputs.
  With ``readable`` (a key's namespace test), the walk never enters a hidden node, so nothing
  is reached through one, and ``node_limit`` counts the readable nodes only.
* **Distance** counts the graph's edges, Marquez's ``dataset -> job -> dataset``: from a
  dataset, the jobs reading it are 1 and what they write 2; from a job, its outputs are 1 and
  the jobs reading them 2. The list is by distance, then node id; the node itself is not in it.
* **The latest run** of a job is its latest run; of a dataset, the latest of its writers'
  latest runs (by their last event; the run names its ``job``). Its ``state`` is Marquez's
  (``RUNNING``, ``COMPLETED``, ``FAILED``, ``ABORTED``, ``NEW``); a running run that sends
  heartbeats also says ``liveness`` (``LIVE`` or ``STALE``, as the runs API does).
* **Owners** are the ``owners`` of the latest ``ownership`` facet: a job's from its latest
  run's events and its JobEvents (job facet), a dataset's from what those runs and the
  dataset's DatasetEvents state of it (dataset facet, of an input or an output).

Everything is read in a few batched reads (the walk, :meth:`Engine.node_facts`, the jobs'
JobEvents), never one read per node. This module imports no API code: the API and the watch's
worker both call it.

**Several depths from one read** (:func:`impacts`: the rules matching one cause): the walk and
its reads are made once, at the largest depth, and each smaller depth's answer is cut from them.
The cut is exact: the walk is breadth-first (each step one edge, and a node is found at its
shortest distance), so a node lies within ``depth`` job hops exactly when its distance is at
most ``2 * depth + 1`` from a job (its outputs are 1) or ``2 * depth`` from a dataset, and a
distance is the same in the larger walk (it holds every edge out of every node it expanded).
The latest runs are per node. The owners are not: they are folded from the events of the runs
read, and a job beyond the cut may state owners of a dataset within it (an ``ownership`` facet
on its input), so each depth's owners are folded from the events that depth's own read would
hold: the latest runs of its jobs and of its datasets' writers, its jobs' JobEvents and its
datasets' DatasetEvents.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from lineage_sdk.collector.engine import Engine
from lineage_sdk.collector.engine.reads import NodeFacts
from lineage_sdk.collector.records import compute_event_id, json_object, parse_event_time
from lineage_sdk.collector.store import LineageGraph, LineageNode, node_id, parse_node_id
from lineage_sdk.collector.symlinks import entry_name
from lineage_sdk.exceptions import InvalidEventError
from lineage_sdk.models.run_state import (
    fold_states,
    heartbeat_interval,
    is_stale,
    marquez_state,
    pick_interval,
)

__all__ = ["impact", "impact_answer", "impacts"]

Key = tuple[str, str]

_NEVER = datetime.min.replace(tzinfo=UTC)


def impact(
    engine: Engine,
    node: str,
    *,
    depth: int,
    node_limit: int | None = None,
    readable: Callable[[str], bool] | None = None,
) -> list[dict[str, Any]]:
    """The nodes downstream of ``node`` within ``depth`` (see the module docstring), each
    ``{"nodeId", "type", "namespace", "name", "distance", "latestRun", "owners"}``.

    ValueError for a malformed node id; LookupError when nothing is recorded for it (or it is
    hidden from ``readable``). A dataset asked by another of its names (an alias) starts at the
    dataset it names, as the lineage route does."""
    found: list[dict[str, Any]] = impact_answer(
        engine, node, depth=depth, node_limit=node_limit, readable=readable
    )["impact"]
    return found


def impact_answer(
    engine: Engine,
    node: str,
    *,
    depth: int,
    node_limit: int | None = None,
    readable: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """:func:`impact` with what the walk says of itself: ``{"nodeId"`` (the node it started at:
    a dataset asked by an alias starts at the dataset), ``"depth"``, ``"impact"`` (the list),
    ``"truncated"``, ``"nodeLimit"`` and ``"omittedNodes"`` (as the lineage route's bounded
    reads say them; ``nodeLimit`` null when unbounded)``}``."""
    reach = _Reach(engine, node, depth, node_limit, readable)
    return {
        "nodeId": reach.node,
        "depth": reach.depth,
        "impact": reach.answer(reach.depth),
        "truncated": reach.graph.truncated,
        "nodeLimit": node_limit,
        "omittedNodes": reach.graph.omitted,
    }


def impacts(engine: Engine, node: str, depths: Collection[int]) -> dict[int, list[dict[str, Any]]]:
    """:func:`impact` at each of ``depths`` (unbounded, every namespace), from one walk and one
    set of reads at the largest (see the module docstring: each answer is exactly
    :func:`impact`'s at its depth). Raises as :func:`impact` does."""
    wanted = sorted({max(0, d) for d in depths})
    if not wanted:
        return {}
    reach = _Reach(engine, node, wanted[-1], None, None)
    return {d: reach.answer(d) for d in depths}


class _Reach:
    """One walk downstream of a node and its nodes' facts, read once; answered at its depth or
    a smaller one (:meth:`answer`)."""

    def __init__(
        self,
        engine: Engine,
        node: str,
        depth: int,
        node_limit: int | None,
        readable: Callable[[str], bool] | None,
    ) -> None:
        if node.startswith("datasetField:"):
            raise ValueError("column-level node ids (datasetField:...) are not supported")
        node_type, namespace, name = parse_node_id(node)
        if node_type == "DATASET":
            namespace, name = engine.dataset_name(namespace, name)
            node = node_id("DATASET", namespace, name)
        self.node, self.depth = node, max(0, depth)
        #: Edges from a job root to its outputs: 1, so ``depth`` job hops reach one edge further.
        self._from_job = node_type == "JOB"
        view = engine.lineage_view(
            node,
            granularity="job",
            direction="downstream",
            depth=self.depth,
            node_limit=node_limit,
            readable=readable,
        )
        self.graph = graph = view.graph
        self.distance = distance = _distances(graph)
        self.items = [
            graph.nodes[nid]
            for nid in sorted(distance, key=lambda n: (distance[n], n))
            if nid != node
        ]
        jobs = [(n.namespace, n.name) for n in self.items if n.type == "JOB"]
        datasets = [(n.namespace, n.name) for n in self.items if n.type == "DATASET"]
        latest: dict[Key, str] = {}
        for item in self.items:
            run = item.data.get("latestRun") if item.type == "JOB" else None
            if isinstance(run, Mapping) and isinstance(run.get("runId"), str):
                latest[(item.namespace, item.name)] = run["runId"]
        self.facts = engine.node_facts(jobs, datasets, latest)
        self.declared = engine.static_events(jobs=jobs) if jobs else []

    def answer(self, depth: int) -> list[dict[str, Any]]:
        """The impact list at ``depth`` (at most the walk's)."""
        items, facts, declared = self.items, self.facts, self.declared
        if max(0, depth) < self.depth:
            farthest = 2 * max(0, depth) + (1 if self._from_job else 0)
            items = [n for n in items if self.distance[n.id] <= farthest]
            facts, declared = self._facts_within(items)
        folded = _Fold(facts, declared)
        answer = []
        for item in items:
            key = (item.namespace, item.name)
            is_job = item.type == "JOB"
            answer.append(
                {
                    "nodeId": item.id,
                    "type": item.type,
                    "namespace": item.namespace,
                    "name": item.name,
                    "distance": self.distance[item.id],
                    "latestRun": folded.job_run(key) if is_job else folded.dataset_run(key),
                    "owners": folded.job_owners(key) if is_job else folded.dataset_owners(key),
                }
            )
        return answer

    def _facts_within(self, items: Sequence[LineageNode]) -> tuple[NodeFacts, list[dict[str, Any]]]:
        """What :meth:`Engine.node_facts` and the JobEvents read would hold for ``items`` alone:
        the latest runs of their jobs and of their datasets' writers (the same runs: a job's
        latest run is its latest whichever read names it), those runs' events, their datasets'
        DatasetEvents and their jobs' JobEvents."""
        jobs = {(n.namespace, n.name) for n in items if n.type == "JOB"}
        datasets = {(n.namespace, n.name) for n in items if n.type == "DATASET"}
        f = self.facts
        ran = jobs.union(*(f.writers.get(d, ()) for d in datasets))
        runs = {f.latest[j] for j in ran if j in f.latest}
        facts = replace(
            f,
            events={r: found for r, found in f.events.items() if r in runs},
            static={d: found for d, found in f.static.items() if d in datasets},
        )
        declared = [e for e in self.declared if _job_of(e) in jobs]
        return facts, declared


def _job_of(event: Mapping[str, Any]) -> Key | None:
    job = json_object(event.get("job"))
    ns, name = job.get("namespace"), job.get("name")
    return (ns, name) if isinstance(ns, str) and isinstance(name, str) else None


def _distances(graph: LineageGraph) -> dict[str, int]:
    """Edges from the root along the data flow, for every node the walk reached."""
    found = {graph.root: 0}
    queue = deque([graph.root])
    while queue:
        here = queue.popleft()
        node = graph.nodes.get(here)
        for edge in node.out_edges if node is not None else ():
            if edge.destination in graph.nodes and edge.destination not in found:
                found[edge.destination] = found[here] + 1
                queue.append(edge.destination)
    return found


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _time(event: Mapping[str, Any]) -> datetime | None:
    try:
        return parse_event_time(event.get("eventTime"))
    except InvalidEventError:
        return None


def _owners(facet: Any) -> list[dict[str, Any]] | None:
    """An ``ownership`` facet's owners (each ``name`` and ``type``, null when not stated), or
    None when the value is no such facet."""
    owners = json_object(facet).get("owners")
    if not isinstance(owners, list):
        return None
    found = []
    for owner in owners:
        name = json_object(owner).get("name")
        if isinstance(name, str):
            kind = json_object(owner).get("type")
            found.append({"name": name, "type": kind if isinstance(kind, str) else None})
    return found


class _Fold:
    """The latest runs and owners of the listed nodes, folded from one :class:`NodeFacts`
    and the jobs' JobEvents."""

    def __init__(self, facts: NodeFacts, declared: Sequence[Mapping[str, Any]]) -> None:
        self.facts = facts
        self._runs: dict[str, tuple[datetime, dict[str, Any]] | None] = {}
        now = datetime.now(UTC)
        self._now = now
        every = [
            *(e for found in facts.events.values() for e in found),
            *(e for found in facts.static.values() for e in found),
            *declared,
        ]
        timed = sorted(
            ((_time(e) or _NEVER, compute_event_id(e), i) for i, e in enumerate(every)),
            key=lambda t: t[:2],
        )
        # Oldest first, so the latest statement of a node's owners is kept.
        self._job_owners: dict[Key, list[dict[str, Any]]] = {}
        self._dataset_owners: dict[Key, list[dict[str, Any]]] = {}
        for _, _, i in timed:
            event = every[i]
            job = json_object(event.get("job"))
            stated = _owners(json_object(job.get("facets")).get("ownership"))
            key_of_job = _job_of(event) if stated is not None else None
            if stated is not None and key_of_job is not None:
                self._job_owners[key_of_job] = stated
            for section in ("inputs", "outputs", "dataset"):
                value = event.get(section)
                for entry in value if isinstance(value, list) else [value]:
                    stated = _owners(json_object(json_object(entry).get("facets")).get("ownership"))
                    key = entry_name(entry) if stated is not None else None
                    if key is not None and stated is not None:
                        self._dataset_owners[key] = stated

    def _run(self, run_id: str) -> tuple[datetime, dict[str, Any]] | None:
        """A run as its events state it: (its last event's time, the answer's ``latestRun``)."""
        if run_id in self._runs:
            return self._runs[run_id]
        events = self.facts.events.get(run_id) or []
        stated: list[tuple[str | None, datetime, str]] = []
        beats: list[float | None] = []
        for event in events:
            at = _time(event)
            if at is None:
                continue
            kind = event.get("eventType")
            stated.append((kind if isinstance(kind, str) else None, at, compute_event_id(event)))
            beats.append(heartbeat_interval(event))
        found: tuple[datetime, dict[str, Any]] | None = None
        if stated:
            fold = fold_states(stated)
            run: dict[str, Any] = {
                "id": run_id,
                "state": marquez_state(fold.state),
            }
            if fold.started_at is not None:
                run["startedAt"] = _iso(fold.started_at)
            if fold.ended_at is not None:
                run["endedAt"] = _iso(fold.ended_at)
            beat = pick_interval(beats)
            if fold.state in ("START", "RUNNING") and beat is not None:
                stale = is_stale(fold.state, fold.state_time, beat, self._now)
                run["liveness"] = "STALE" if stale else "LIVE"
            found = (max(at for _, at, _ in stated), run)
        self._runs[run_id] = found
        return found

    def job_run(self, job: Key) -> dict[str, Any] | None:
        run_id = self.facts.latest.get(job)
        found = self._run(run_id) if run_id is not None else None
        return None if found is None else dict(found[1])

    def dataset_run(self, dataset: Key) -> dict[str, Any] | None:
        """The latest of the writers' latest runs (by last event, then run id), with its job."""
        best: tuple[datetime, str, Key, dict[str, Any]] | None = None
        for job in self.facts.writers.get(dataset, []):
            run_id = self.facts.latest.get(job)
            found = self._run(run_id) if run_id is not None else None
            if found is not None and (best is None or (found[0], run_id) > best[:2]):
                best = (found[0], found[1]["id"], job, found[1])
        if best is None:
            return None
        return {**best[3], "job": {"namespace": best[2][0], "name": best[2][1]}}

    def job_owners(self, job: Key) -> list[dict[str, Any]]:
        return [dict(o) for o in self._job_owners.get(job, [])]

    def dataset_owners(self, dataset: Key) -> list[dict[str, Any]]:
        return [dict(o) for o in self._dataset_owners.get(dataset, [])]
