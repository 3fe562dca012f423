"""The read questions, answered from a querying store in Marquez's shapes.

Shared by the HTTP routes and by the ``lineage`` CLI when it reads a store directly, so both give
the same answer (including what counts as "not found") for the same data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lineage_sdk.collector.api import marquez
from lineage_sdk.collector.api.access import prune_graph
from lineage_sdk.collector.store import (
    Direction,
    LineageCatalogProtocol,
    LineageHistoryProtocol,
    NodeType,
    Page,
    parse_node_id,
)

__all__ = ["NotFound", "exists", "lineage", "parse_node", "run_events", "runs"]


class NotFound(LookupError):
    """Nothing is recorded under the asked name; the message says what was asked."""


def parse_node(node: str) -> tuple[NodeType, str, str]:
    """A node id split into (type, namespace, name); ValueError with a readable reason."""
    if node.startswith("datasetField:"):
        raise ValueError("column-level node ids (datasetField:...) are not supported")
    return parse_node_id(node)


def exists(store: LineageCatalogProtocol, node_type: str, namespace: str, name: str) -> bool:
    """Whether a job or dataset is recorded at all (search is the one question every catalog
    answers that can tell; it is only asked for nodes that have no edges)."""
    hits = store.search(name, limit=1000)
    return (node_type, namespace, name) in {(t, ns, nm) for t, ns, nm in hits}


def lineage(
    store: LineageCatalogProtocol,
    node: str,
    *,
    direction: Direction = "both",
    depth: int = 20,
    readable: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """Marquez's ``LineageGraph`` around ``node``; NotFound if nothing is recorded for it.

    ``readable`` (a namespace test) limits the walk to readable nodes: an unreadable root is
    NotFound, and nothing is reached through an unreadable node (see ``access.prune_graph``).
    """
    node_type, namespace, name = parse_node(node)
    if readable is not None and not readable(namespace):
        raise NotFound(f"nothing is recorded for {node!r}")
    graph = store.lineage(node, direction=direction, depth=depth)
    if readable is not None:
        graph = prune_graph(graph, readable, direction=direction, depth=depth)
    root = graph.nodes.get(graph.root)
    isolated = len(graph.nodes) <= 1 and (root is None or not (root.in_edges or root.out_edges))
    if isolated and not exists(store, node_type, namespace, name):
        raise NotFound(f"nothing is recorded for {node!r}")
    # The sql walk reads each job's latest run on the way; the others are asked for it here,
    # so every store answers alike.
    missing = {
        (n.namespace, n.name): n
        for n in graph.nodes.values()
        if n.type == "JOB" and "latestRun" not in n.data
    }
    if missing and isinstance(store, LineageHistoryProtocol):
        for key, run in store.latest_runs(sorted(missing)).items():
            missing[key].data["latestRun"] = {"runId": run.run_id, "state": run.state}
    return marquez.lineage_graph(graph)


def runs(
    store: LineageCatalogProtocol, namespace: str, name: str, *, limit: int = 100, offset: int = 0
) -> Page[dict[str, Any]]:
    """Marquez ``Run`` objects of a job, most recent first; ``total`` counts all its runs."""
    found = store.runs_of_job(namespace, name, limit=limit, offset=offset)
    return Page((marquez.run_from_summary(r) for r in found), found.total)


def run_events(store: LineageCatalogProtocol, run_id: str) -> list[dict[str, Any]]:
    """The raw events of a run in event-time order; NotFound when there are none.

    Run ids are matched as given, then in lower case (how OpenLineage clients write UUIDs).
    """
    events = store.events_of_run(run_id)
    if not events and run_id != run_id.lower():
        events = store.events_of_run(run_id.lower())
    if not events:
        raise NotFound(f"no events are recorded for run {run_id!r}")
    return events
