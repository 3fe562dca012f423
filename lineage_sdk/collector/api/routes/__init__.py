"""The API's routers, one per concern; :func:`lineage_sdk.collector.api.app.create_app` assembles
them.

The Marquez-compatible reads live by resource (``lineage``, ``catalog``, ``nodes``, ``runs``,
``events``) and are served as one router, :func:`read_router`, in :data:`READ_ORDER`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from fastapi.routing import APIRoute

from lineage_sdk.collector.api.routes import catalog, events, lineage, nodes, runs

__all__ = ["READ_ORDER", "read_router"]

#: The read routes, by endpoint, in the order they are matched and listed in the OpenAPI
#: document (kept from before the split, so the document did not change). A ``{name:path}``
#: parameter matches any rest of the path, so the routes it would swallow come first.
READ_ORDER: tuple[Callable[..., Any], ...] = (
    lineage.get_lineage,
    catalog.get_namespaces,
    nodes.get_jobs,
    # Before /jobs/{job:path}: {job:path} would otherwise swallow '/runs' and '/versions'.
    runs.get_runs,
    nodes.get_job_version,
    nodes.get_job_versions,
    nodes.get_datasets,
    nodes.get_dataset_version,
    nodes.get_dataset_versions,
    nodes.get_dataset,
    nodes.get_job,
    # Last of the namespace routes: {namespace:path} would otherwise swallow '/jobs' and
    # '/datasets'.
    catalog.get_namespace,
    runs.get_run,
    runs.get_run_facets,
    runs.get_run_events,
    catalog.get_sources,
    catalog.get_source,
    catalog.get_tags,
    events.get_lineage_events,  # /events and /events/lineage, in its module's order
    events.get_namespace_events,
    catalog.search,
    lineage.get_run_lineage_upstream,
    lineage.get_impact,
)


def read_router() -> APIRouter:
    """The read routes of every resource module in :data:`READ_ORDER`. Each route carries its
    module router's read-key dependency. RuntimeError when a route is not placed exactly once
    (one added to a module and not to the order, or an order naming a gone endpoint)."""
    declared = [
        route
        for module in (lineage, catalog, nodes, runs, events)
        for route in module.router.routes
        if isinstance(route, APIRoute)
    ]
    placed = [route for endpoint in READ_ORDER for route in declared if route.endpoint is endpoint]
    if sorted(map(id, placed)) != sorted(map(id, declared)):
        missing = sorted(route.path for route in declared if route not in placed)
        twice = sorted({route.path for route in placed if placed.count(route) > 1})
        raise RuntimeError(
            f"READ_ORDER must place each read route once; not placed: {missing}, twice: {twice}"
        )
    router = APIRouter()
    router.routes.extend(placed)
    return router
