"""Marquez's write endpoints, each answering ``405`` with a one-line reason.

This collector records OpenLineage events (``POST /api/v1/lineage``) and derives everything else
from them, so Marquez's older write API (create a namespace, a source, a job, a run, a tag; mark a
run; tag a dataset; soft-delete) has nothing to write to. A Marquez client calling one of them
gets a JSON error that says so, with ``Allow`` naming what the path does answer (empty when
nothing), rather than a bare 404 or 405.
"""

from __future__ import annotations

from fastapi import APIRouter

from lineage_sdk.collector.api.errors import ApiError

__all__ = ["WRITE_ENDPOINTS", "router"]

#: (methods, path, what Marquez would do, the methods the path answers here).
WRITE_ENDPOINTS: tuple[tuple[tuple[str, ...], str, str, str], ...] = (
    (("PUT", "DELETE"), "/api/v1/namespaces/{namespace:path}/jobs/{job:path}", "jobs", "GET"),
    (("POST",), "/api/v1/namespaces/{namespace:path}/jobs/{job:path}/runs", "runs", "GET"),
    (
        ("POST",),
        "/api/v1/namespaces/{namespace:path}/datasets/{dataset:path}/fields/{field}/tags/{tag}",
        "tags",
        "",
    ),
    (
        ("POST",),
        "/api/v1/namespaces/{namespace:path}/datasets/{dataset:path}/tags/{tag}",
        "tags",
        "",
    ),
    (
        ("PUT", "DELETE"),
        "/api/v1/namespaces/{namespace:path}/datasets/{dataset:path}",
        "datasets",
        "GET",
    ),
    (("PUT", "DELETE"), "/api/v1/namespaces/{namespace:path}", "namespaces", "GET"),
    (("PUT",), "/api/v1/sources/{source:path}", "sources", "GET"),
    (("POST",), "/api/v1/jobs/runs/{id}/start", "run states", ""),
    (("POST",), "/api/v1/jobs/runs/{id}/complete", "run states", ""),
    (("POST",), "/api/v1/jobs/runs/{id}/fail", "run states", ""),
    (("POST",), "/api/v1/jobs/runs/{id}/abort", "run states", ""),
    (("PUT",), "/api/v1/tags/{tag}", "tags", ""),
)

router = APIRouter(include_in_schema=False)


def _refuse(what: str, allow: str) -> object:
    async def refuse() -> None:
        raise ApiError(
            405,
            "read_only",
            f"{what} are derived from OpenLineage events here: "
            "POST them to /api/v1/lineage instead of using Marquez's write API",
            headers={"Allow": allow},  # empty: the path answers no method here
        )

    return refuse


for _methods, _path, _what, _allow in WRITE_ENDPOINTS:
    router.add_api_route(_path, _refuse(_what.capitalize(), _allow), methods=list(_methods))  # type: ignore[arg-type]
