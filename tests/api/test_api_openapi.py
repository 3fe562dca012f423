"""The served OpenAPI document is accurate: every route is in it, and real answers of every
endpoint validate against the schemas it declares for them."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from api_helpers import PG, ValidationError, run_event, validate_openapi_response

JSON = {"content-type": "application/json"}


@pytest.fixture
def openapi(api):
    response = api.client.get("/openapi.json")
    assert response.status_code == 200
    return response.json()


def test_document_lists_every_route(openapi):
    assert openapi["openapi"].startswith("3.")
    expected = {
        "/api/v1/lineage": {"get", "post"},
        "/api/v1/lineage/batch": {"post"},
        "/api/v1/namespaces": {"get"},
        "/api/v1/namespaces/{namespace}": {"get"},
        "/api/v1/namespaces/{namespace}/jobs": {"get"},
        "/api/v1/namespaces/{namespace}/jobs/{job}": {"get"},
        "/api/v1/namespaces/{namespace}/jobs/{job}/runs": {"get"},
        "/api/v1/namespaces/{namespace}/jobs/{job}/versions": {"get"},
        "/api/v1/namespaces/{namespace}/jobs/{job}/versions/{version}": {"get"},
        "/api/v1/namespaces/{namespace}/datasets": {"get"},
        "/api/v1/namespaces/{namespace}/datasets/{dataset}": {"get"},
        "/api/v1/namespaces/{namespace}/datasets/{dataset}/versions": {"get"},
        "/api/v1/namespaces/{namespace}/datasets/{dataset}/versions/{version}": {"get"},
        "/api/v1/jobs/runs/{id}": {"get"},
        "/api/v1/jobs/runs/{id}/events": {"get"},
        "/api/v1/jobs/runs/{id}/facets": {"get"},
        "/api/v1/sources": {"get"},
        "/api/v1/sources/{source}": {"get"},
        "/api/v1/tags": {"get"},
        "/api/v1/events": {"get"},
        "/api/v1/events/lineage": {"get"},
        "/api/v1/events/{namespace}": {"get"},
        "/api/v1/search": {"get"},
        "/api/v1/health": {"get"},
        "/api/v1/column-lineage": {"get"},
        "/api/v1/runlineage/upstream": {"get"},
        "/api/v1/impact": {"get"},
    }
    assert {path: set(ops) for path, ops in openapi["paths"].items()} == expected
    post = openapi["paths"]["/api/v1/lineage"]["post"]
    assert "201" in post["responses"]
    assert {"400", "401", "413", "415", "503"} <= set(post["responses"])
    params = {p["name"] for p in openapi["paths"]["/api/v1/lineage"]["get"]["parameters"]}
    assert params == {
        "nodeId",
        "depth",
        "direction",
        "asOf",
        "runId",
        "nodeLimit",
        "since",
        "until",
        "granularity",
        "marks",
    }


def test_answers_match_the_declared_schemas(api, loaded, openapi):
    run_id = loaded["runs"]["clean"]
    ns = quote(PG, safe="")
    checks = [
        ("/api/v1/lineage", "/api/v1/lineage", {"nodeId": f"dataset:{PG}:stg.orders"}),
        ("/api/v1/namespaces", "/api/v1/namespaces", None),
        ("/api/v1/namespaces/{namespace}/jobs", "/api/v1/namespaces/shop/jobs", None),
        ("/api/v1/namespaces/{namespace}/jobs/{job}", "/api/v1/namespaces/shop/jobs/clean", None),
        (
            "/api/v1/namespaces/{namespace}/jobs/{job}/runs",
            "/api/v1/namespaces/shop/jobs/clean/runs",
            None,
        ),
        ("/api/v1/namespaces/{namespace}/datasets", f"/api/v1/namespaces/{ns}/datasets", None),
        ("/api/v1/jobs/runs/{id}", f"/api/v1/jobs/runs/{run_id}", None),
        ("/api/v1/jobs/runs/{id}/events", f"/api/v1/jobs/runs/{run_id}/events", None),
        ("/api/v1/search", "/api/v1/search", {"q": "orders"}),
        ("/api/v1/health", "/api/v1/health", None),
        ("/api/v1/namespaces/{namespace}", f"/api/v1/namespaces/{ns}", None),
        (
            "/api/v1/namespaces/{namespace}/datasets/{dataset}",
            f"/api/v1/namespaces/{ns}/datasets/stg.orders",
            None,
        ),
        (
            "/api/v1/namespaces/{namespace}/datasets/{dataset}/versions",
            f"/api/v1/namespaces/{ns}/datasets/stg.orders/versions",
            None,
        ),
        (
            "/api/v1/namespaces/{namespace}/jobs/{job}/versions",
            "/api/v1/namespaces/shop/jobs/clean/versions",
            None,
        ),
        ("/api/v1/jobs/runs/{id}/facets", f"/api/v1/jobs/runs/{run_id}/facets", None),
        ("/api/v1/sources", "/api/v1/sources", None),
        ("/api/v1/sources/{source}", "/api/v1/sources/default", None),  # no dataSource facet
        ("/api/v1/tags", "/api/v1/tags", None),
        ("/api/v1/events/lineage", "/api/v1/events/lineage", None),
        ("/api/v1/events", "/api/v1/events", None),
        ("/api/v1/events/{namespace}", "/api/v1/events/shop", None),
        ("/api/v1/runlineage/upstream", "/api/v1/runlineage/upstream", {"runId": run_id}),
    ]
    for template, url, params in checks:
        response = api.client.get(url, params=params)
        assert response.status_code == 200, (url, response.text)
        validate_openapi_response(openapi, template, "get", 200, response.json())
    for kind, versions in (
        ("datasets", f"/api/v1/namespaces/{ns}/datasets/stg.orders"),
        ("jobs", "/api/v1/namespaces/shop/jobs/clean"),
    ):
        version = api.client.get(f"{versions}/versions").json()["versions"][0]["version"]
        one = api.client.get(f"{versions}/versions/{version}")
        template = f"/api/v1/namespaces/{{namespace}}/{kind}/{{{kind[:-1]}}}/versions/{{version}}"
        validate_openapi_response(openapi, template, "get", 200, one.json())

    created = api.client.post("/api/v1/lineage", json=run_event("openapi", outputs=[("n", "d")]))
    validate_openapi_response(openapi, "/api/v1/lineage", "post", 201, created.json())
    batch = api.client.post("/api/v1/lineage/batch", json=[run_event("b"), {"bad": True}])
    validate_openapi_response(openapi, "/api/v1/lineage/batch", "post", 200, batch.json())
    failed = api.client.post("/api/v1/lineage/batch", json=[{"bad": True}])
    validate_openapi_response(openapi, "/api/v1/lineage/batch", "post", 400, failed.json())
    for status, response in (
        (400, api.client.post("/api/v1/lineage", content=b"{", headers=JSON)),
        (404, api.client.get("/api/v1/lineage", params={"nodeId": "job:no:such"})),
    ):
        assert response.status_code == status
        path = "/api/v1/lineage"
        method = "post" if status == 400 else "get"
        validate_openapi_response(openapi, path, method, status, response.json())


def test_declared_schemas_are_strict_enough_to_fail(openapi):
    """The check above would catch a wrong answer: a Run with an unknown state fails."""
    with pytest.raises(ValidationError):
        validate_openapi_response(
            openapi, "/api/v1/jobs/runs/{id}", "get", 200, {"id": "x", "state": "DONE"}
        )
    with pytest.raises(ValidationError):
        validate_openapi_response(openapi, "/api/v1/lineage", "get", 200, {"graph": [{"id": 1}]})


def test_no_remote_documentation_pages(api):
    # Swagger UI and ReDoc would load scripts from a CDN; they are off.
    assert api.client.get("/docs").status_code == 404
    assert api.client.get("/redoc").status_code == 404
