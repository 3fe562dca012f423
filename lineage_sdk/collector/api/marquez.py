"""Store answers -> Marquez's JSON shapes (``shared/marquez/openapi.yml``), as plain dicts.

The HTTP API and the ``lineage`` CLI (when it reads a store directly) both go through these
functions, so ``lineage graph --format json`` prints the same document whether it asked the API or
the database. Plain dicts rather than pydantic instances keep a depth-10 lineage answer of
thousands of nodes cheap to serialize; :mod:`lineage_sdk.collector.api.schemas` documents the
same shapes for the OpenAPI document, and the tests check each answer against both.

Marquez omits unknown values rather than sending ``null`` (its schemas type them as plain
strings), so every function here leaves a key out when the store does not know it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from lineage_sdk.collector.records import compute_event_id, parse_event_time
from lineage_sdk.collector.store import (
    JobSummary,
    LineageGraph,
    LineageNode,
    NodeType,
    RunSummary,
    node_id,
)
from lineage_sdk.exceptions import InvalidEventError
from lineage_sdk.models.run_state import (
    MARQUEZ_RUN_STATES,
    STALE,
    fold_states,
    heartbeat_interval,
    is_stale,
    marquez_state,
    pick_interval,
)

__all__ = [
    "LIVE",
    "MARQUEZ_RUN_STATES",
    "add_liveness",
    "dataset_data",
    "iso",
    "job_data",
    "job_from_summary",
    "lineage_graph",
    "marquez_state",
    "run_from_events",
    "run_from_summary",
    "search_results",
]

#: ``liveness`` of a START/RUNNING run that carries a heartbeat facet and still heartbeats.
LIVE = "LIVE"


def iso(value: datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, as Marquez writes timestamps."""
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _duration_ms(started: datetime | None, ended: datetime | None) -> int | None:
    if started is None or ended is None:
        return None
    return max(0, int((ended - started).total_seconds() * 1000))


def _run(
    run_id: str,
    state: str | None,
    started: datetime | None,
    ended: datetime | None,
) -> dict[str, Any]:
    run: dict[str, Any] = {"id": run_id, "state": marquez_state(state)}
    if started is not None:
        run["startedAt"] = iso(started)
    if ended is not None:
        run["endedAt"] = iso(ended)
    duration = _duration_ms(started, ended)
    if duration is not None:
        run["durationMs"] = duration
    run["facets"] = {}
    return run


def add_liveness(
    run: dict[str, Any],
    state: str | None,
    state_time: datetime | None,
    heartbeat_s: float | None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Add ``liveness`` (``LIVE`` or ``STALE``), ``lastHeartbeatAt`` and ``heartbeatIntervalS``
    to a START/RUNNING run that names a heartbeat interval; other runs are left as they are.

    ``state`` stays Marquez's (``RUNNING``): STALE is not in Marquez's ``RunState`` enum, so it
    is a reading beside it, computed now (``run_state.is_stale``), never stored."""
    if state not in ("START", "RUNNING") or heartbeat_s is None or state_time is None:
        return run
    stale = is_stale(state, state_time, heartbeat_s, now or datetime.now(UTC))
    run["liveness"] = STALE if stale else LIVE
    run["lastHeartbeatAt"] = iso(state_time)
    run["heartbeatIntervalS"] = heartbeat_s
    return run


def run_from_summary(summary: RunSummary) -> dict[str, Any]:
    """A Marquez ``Run`` from a store's run summary."""
    run = _run(summary.run_id, summary.state, summary.started_at, summary.ended_at)
    return add_liveness(run, summary.state, summary.state_time, summary.heartbeat_s)


def run_from_events(run_id: str, events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A Marquez ``Run`` folded from a run's raw events by the stores' rule
    (:mod:`lineage_sdk.models.run_state`): the same answer whatever order the events are in.
    Run facets are merged oldest first (by event time, then event id), so the latest wins."""
    timed: list[tuple[datetime, str, Mapping[str, Any]]] = []
    for event in events:
        try:
            when = parse_event_time(event.get("eventTime"))
        except InvalidEventError:
            continue
        timed.append((when, compute_event_id(event), event))
    timed.sort(key=lambda item: item[:2])
    run_facets: dict[str, Any] = {}
    heartbeat: float | None = None
    for _, _, event in timed:
        heartbeat = pick_interval((heartbeat, heartbeat_interval(event)))
        run = event.get("run")
        facets = run.get("facets") if isinstance(run, Mapping) else None
        if isinstance(facets, Mapping):
            run_facets.update(facets)
    fold = fold_states(
        (kind if isinstance(kind := event.get("eventType"), str) else None, when, event_id)
        for when, event_id, event in timed
    )
    result = _run(run_id, fold.state, fold.started_at, fold.ended_at)
    result["facets"] = run_facets
    return add_liveness(result, fold.state, fold.state_time, heartbeat)


def _node_run(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The latest run a store put in a node's data, as a Marquez ``Run`` (id and state)."""
    latest = data.get("latestRun")
    if not isinstance(latest, Mapping):
        return None
    run_id = latest.get("runId", latest.get("id"))
    if not isinstance(run_id, str):
        return None
    state = latest.get("state")
    run: dict[str, Any] = {"id": run_id, "state": marquez_state(state)}
    # A store that already speaks Marquez's states passes them through unchanged.
    if isinstance(state, str) and state in MARQUEZ_RUN_STATES.values():
        run["state"] = state
    for key in ("startedAt", "endedAt"):
        value = latest.get(key)
        if isinstance(value, datetime):
            run[key] = iso(value)
        elif isinstance(value, str):
            run[key] = value
    state_time, heartbeat = latest.get("stateTime"), latest.get("heartbeatS")
    if isinstance(state_time, datetime) and isinstance(heartbeat, (int, float)):
        add_liveness(run, state if isinstance(state, str) else None, state_time, float(heartbeat))
    return run


def dataset_data(namespace: str, name: str) -> dict[str, Any]:
    """A Marquez ``Dataset`` with what every store knows: its identity."""
    return {"id": {"namespace": namespace, "name": name}, "namespace": namespace, "name": name}


def _dataset_ids(pairs: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"namespace": ns, "name": nm} for ns, nm in pairs]


def job_data(
    namespace: str,
    name: str,
    *,
    latest_run: dict[str, Any] | None = None,
    latest_runs: Sequence[dict[str, Any]] | None = None,
    inputs: Iterable[tuple[str, str]] | None = None,
    outputs: Iterable[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """A Marquez ``Job``; ``inputs``/``outputs`` are left out when not known (lineage nodes)."""
    data: dict[str, Any] = {
        "id": {"namespace": namespace, "name": name},
        "namespace": namespace,
        "name": name,
    }
    if inputs is not None:
        data["inputs"] = _dataset_ids(inputs)
    if outputs is not None:
        data["outputs"] = _dataset_ids(outputs)
    if latest_run is not None:
        data["latestRun"] = latest_run
    if latest_runs is not None:
        data["latestRuns"] = list(latest_runs)
    return data


def job_from_summary(summary: JobSummary) -> dict[str, Any]:
    """A Marquez ``Job`` with its latest run and its inputs and outputs."""
    latest = run_from_summary(summary.latest_run) if summary.latest_run else None
    return job_data(
        summary.namespace,
        summary.name,
        latest_run=latest,
        latest_runs=[latest] if latest else [],
        inputs=summary.inputs,
        outputs=summary.outputs,
    )


def _node(node: LineageNode) -> dict[str, Any]:
    if node.type == "JOB":
        data = job_data(node.namespace, node.name, latest_run=_node_run(node.data))
    else:
        data = dataset_data(node.namespace, node.name)
    return {
        "id": node.id,
        "type": node.type,
        "data": data,
        "inEdges": [{"origin": e.origin, "destination": e.destination} for e in node.in_edges],
        "outEdges": [{"origin": e.origin, "destination": e.destination} for e in node.out_edges],
    }


def lineage_graph(graph: LineageGraph) -> dict[str, Any]:
    """Marquez's ``LineageGraph``: ``{"graph": [GraphNode, ...]}``, the root first, then by id."""
    nodes = sorted(graph.nodes.values(), key=lambda n: (n.id != graph.root, n.id))
    return {"graph": [_node(n) for n in nodes]}


def lineage_view(
    graph: LineageGraph, edge_data: Mapping[tuple[str, str], Mapping[str, Any]]
) -> dict[str, Any]:
    """A view's answer (``granularity`` other than ``job``, or a window) in Marquez's envelope:
    job and dataset nodes as :func:`lineage_graph` gives them (with a parent view's
    ``children``), RUN nodes with their run's data, edges with what they carry (``data``)."""
    answer = lineage_graph(graph)
    for item in answer["graph"]:
        node = graph.nodes[item["id"]]
        if node.type == "RUN":  # times in RFC 3339, the state as Marquez's runs name it
            item["data"] = {
                k: iso(v) if isinstance(v, datetime) else v for k, v in node.data.items()
            }
            item["data"]["state"] = marquez_state(node.data.get("state"))
        elif "children" in node.data:
            item["data"]["children"] = node.data["children"]
        for edge in (*item["inEdges"], *item["outEdges"]):
            carried = edge_data.get((edge["origin"], edge["destination"]))
            if carried:
                edge["data"] = dict(carried)
    return answer


def search_results(hits: Iterable[tuple[NodeType, str, str]]) -> dict[str, Any]:
    """Marquez's ``SearchResultList``."""
    results = [
        {"type": t, "name": nm, "namespace": ns, "nodeId": node_id(t, ns, nm)} for t, ns, nm in hits
    ]
    return {"totalCount": len(results), "results": results}
