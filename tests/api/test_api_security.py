"""Bad input and security: each case gets a clear 4xx naming the problem, nothing reaches the
store, nothing crashes (the server keeps answering), and secrets are never echoed."""

from __future__ import annotations

import gzip
import uuid
import zlib

import httpx
import orjson
import pytest
from api_helpers import API_KEY, HOSTILE_DATASET, HOSTILE_JOB, run_event

LIMIT = 64 * 1024


def _valid() -> dict:
    return run_event("job", outputs=[("ns", "out")])


def _with(path: str, value) -> dict:
    event = _valid()
    target = event
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    return event


def _nest(depth: int) -> bytes:
    """A valid event with a facet nested ``depth`` levels (built as text: too deep for orjson)."""
    marker = '"__deep__"'
    event = _valid()
    event["run"]["facets"]["deep"] = "__deep__"
    text = orjson.dumps(event).decode()
    bomb = '{"x":' * depth + "1" + "}" * depth
    return text.replace(marker, bomb).encode()


JSON = {"Content-Type": "application/json"}

# (id, path, body bytes, extra headers, expected status, expected reason, text in detail)
CASES = [
    (
        "malformed-json",
        "/api/v1/lineage",
        b'{"eventType": "START",',
        JSON,
        400,
        "malformed_json",
        "JSON",
    ),
    ("empty-body", "/api/v1/lineage", b"", JSON, 400, "malformed_json", "empty"),
    ("not-utf8", "/api/v1/lineage", b'{"a": "\xff\xfe"}', JSON, 400, "malformed_json", "UTF-8"),
    ("json-string", "/api/v1/lineage", b'"hello"', JSON, 400, "not_an_event", "str"),
    ("json-number", "/api/v1/lineage", b"42", JSON, 400, "not_an_event", "int"),
    (
        "not-an-event",
        "/api/v1/lineage",
        b'{"hello": "world"}',
        JSON,
        400,
        "invalid_event",
        "run, dataset or job",
    ),
    (
        "array-to-single",
        "/api/v1/lineage",
        orjson.dumps([_valid()]),
        JSON,
        400,
        "not_an_event",
        "batch",
    ),
    (
        "runId-number",
        "/api/v1/lineage",
        orjson.dumps(_with("run.runId", 12345)),
        JSON,
        400,
        "invalid_event",
        "runId",
    ),
    (
        "runId-not-uuid",
        "/api/v1/lineage",
        orjson.dumps(_with("run.runId", "abc")),
        JSON,
        400,
        "invalid_event",
        "runId",
    ),
    (
        "eventTime-not-date",
        "/api/v1/lineage",
        orjson.dumps(_with("eventTime", "soon")),
        JSON,
        400,
        "invalid_event",
        "eventTime",
    ),
    (
        "eventType-unknown",
        "/api/v1/lineage",
        orjson.dumps(_with("eventType", "EXPLODE")),
        JSON,
        400,
        "invalid_event",
        "eventType",
    ),
    (
        "inputs-not-list",
        "/api/v1/lineage",
        orjson.dumps(_with("inputs", "everything")),
        JSON,
        400,
        "invalid_event",
        "inputs",
    ),
    (
        "job-name-number",
        "/api/v1/lineage",
        orjson.dumps(_with("job.name", 7)),
        JSON,
        400,
        "invalid_event",
        "job.name",
    ),
    (
        "nul-byte",
        "/api/v1/lineage",
        orjson.dumps(_with("job.name", "a\x00b")),
        JSON,
        400,
        "nul_byte",
        "NUL",
    ),
    ("nesting-bomb", "/api/v1/lineage", _nest(500), JSON, 400, "too_deep", "deeper"),
    (
        "batch-object",
        "/api/v1/lineage/batch",
        orjson.dumps(_valid()),
        JSON,
        400,
        "not_a_batch",
        "array",
    ),
    ("batch-empty", "/api/v1/lineage/batch", b"[]", JSON, 400, "not_a_batch", "no events"),
    ("batch-malformed", "/api/v1/lineage/batch", b"[{", JSON, 400, "malformed_json", "JSON"),
    (
        "text-plain",
        "/api/v1/lineage",
        orjson.dumps(_valid()),
        {"Content-Type": "text/plain"},
        415,
        "unsupported_media_type",
        "application/json",
    ),
    (
        "form",
        "/api/v1/lineage",
        b"a=1",
        {"Content-Type": "application/x-www-form-urlencoded"},
        415,
        "unsupported_media_type",
        "application/json",
    ),
    (
        "no-content-type",
        "/api/v1/lineage",
        orjson.dumps(_valid()),
        {},
        415,
        "unsupported_media_type",
        "none",
    ),
    (
        "brotli",
        "/api/v1/lineage",
        orjson.dumps(_valid()),
        {**JSON, "Content-Encoding": "br"},
        415,
        "unsupported_encoding",
        "br",
    ),
    (
        "bad-gzip",
        "/api/v1/lineage",
        b"not gzip at all",
        {**JSON, "Content-Encoding": "gzip"},
        400,
        "malformed_body",
        "gzip",
    ),
    (
        "huge-body",
        "/api/v1/lineage",
        b"{" + b" " * (LIMIT + 10) + b"}",
        JSON,
        413,
        "too_large",
        "limit",
    ),
    (
        "gzip-bomb",
        "/api/v1/lineage",
        gzip.compress(b"[" + b" " * (LIMIT * 20) + b"]"),
        {**JSON, "Content-Encoding": "gzip"},
        413,
        "too_large",
        "limit",
    ),
    (
        "deflate-bomb",
        "/api/v1/lineage/batch",
        zlib.compress(b"[" + b" " * (LIMIT * 20) + b"]"),
        {**JSON, "Content-Encoding": "deflate"},
        413,
        "too_large",
        "limit",
    ),
]


@pytest.fixture
def small(make_api):
    """An API with a small body limit and an API key (the client sends it)."""
    return make_api(api_key=API_KEY, max_body_bytes=LIMIT)


@pytest.mark.parametrize(
    ("path", "body", "headers", "status", "reason", "detail"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_bad_input_is_a_clear_4xx_and_stores_nothing(
    small, path, body, headers, status, reason, detail
):
    response = small.client.post(path, content=body, headers=headers)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    answer = response.json()
    assert answer["reason"] == reason
    assert detail.lower() in answer["detail"].lower(), answer["detail"]
    assert "Traceback" not in response.text
    assert small.count() == 0
    # Nothing crashed: the same server still stores a good event.
    assert small.client.post("/api/v1/lineage", json=_valid()).status_code == 201


def test_a_producer_that_is_not_a_uri_is_accepted_and_stored_as_sent(small):
    """Issue 14: ``format: uri`` is an annotation (it was a 400 naming ``producer``)."""
    event = _with("producer", "not a uri")
    response = small.client.post("/api/v1/lineage", content=orjson.dumps(event), headers=JSON)
    assert response.status_code == 201, response.text
    assert small.store.events_of_run(event["run"]["runId"]) == [event]


def test_chunked_body_over_the_limit_is_413_without_reading_it_all(small):
    def chunks():
        for _ in range(LIMIT // 1024 + 8):
            yield b" " * 1024

    response = small.client.post("/api/v1/lineage", content=chunks(), headers=JSON)
    assert response.status_code == 413
    assert response.json()["reason"] == "too_large"
    assert small.count() == 0


def test_missing_or_wrong_api_key_is_401_and_the_key_is_never_echoed(small):
    bare = {"Content-Type": "application/json"}
    body = orjson.dumps(_valid())
    for headers in (
        bare,
        {**bare, "Authorization": "Bearer wrong"},
        {**bare, "X-API-Key": "wrong"},
        {**bare, "Authorization": f"Basic {API_KEY}"},
        {**bare, "Authorization": "Bearer"},
    ):
        response = httpx.post(f"{small.url}/api/v1/lineage", content=body, headers=headers)
        assert response.status_code == 401, headers
        assert response.json()["reason"] == "unauthorized"
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert API_KEY not in response.text
        batch = httpx.post(
            f"{small.url}/api/v1/lineage/batch", content=b"[" + body + b"]", headers=headers
        )
        assert batch.status_code == 401
    assert small.count() == 0
    for good in ({"Authorization": f"Bearer {API_KEY}"}, {"X-API-Key": API_KEY}):
        response = httpx.post(f"{small.url}/api/v1/lineage", content=body, headers={**bare, **good})
        assert response.status_code == 201
    assert small.count() == 1
    # Reads are open unless protect_reads; then they need the key too.
    assert httpx.get(f"{small.url}/api/v1/namespaces").status_code == 200


def test_protect_reads_requires_the_key_for_reads(make_api):
    api = make_api(api_key=API_KEY, protect_reads=True)
    assert httpx.get(f"{api.url}/api/v1/namespaces").status_code == 401
    run_lineage = f"{api.url}/api/v1/runlineage/upstream?runId={uuid.UUID(int=1)}"
    assert httpx.get(run_lineage).status_code == 401
    keyed = httpx.get(f"{api.url}/api/v1/namespaces", headers={"X-API-Key": API_KEY})
    assert keyed.status_code == 200
    assert httpx.get(f"{api.url}/").status_code == 200  # the page; its API calls need the key


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"nodeId": "<script>alert(1)</script>"}, 400),
        ({"nodeId": "dataset:ns:<script>alert(1)</script>"}, 404),
        ({"nodeId": "job:<img src=x onerror=alert(1)>:x"}, 404),
        ({"nodeId": "dataset:ns:x", "depth": -1}, 422),
        ({"nodeId": "dataset:ns:x", "depth": 1000}, 422),
        ({"nodeId": "dataset:ns:x", "depth": "deep"}, 422),
        ({"nodeId": "dataset:ns:x", "direction": "sideways"}, 422),
        ({"nodeId": ""}, 422),
        ({"nodeId": "dataset:ns:" + "x" * 30_000}, 422),
        ({}, 422),
    ],
)
def test_hostile_or_wrong_query_parameters_are_a_json_4xx(api, params, status):
    response = api.client.get("/api/v1/lineage", params=params)
    assert response.status_code == status
    # Whatever is reflected is JSON that browsers must not sniff into HTML.
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/jobs/runs/not-a-uuid",
        "/api/v1/jobs/runs/<script>/events",
        "/api/v1/namespaces?limit=0",
        "/api/v1/namespaces?limit=100000",
        "/api/v1/search",
        "/api/v1/search?q=x&filter=tables",
    ],
)
def test_wrong_path_or_query_values_are_422(api, path):
    response = api.client.get(path)
    assert response.status_code in (404, 422), response.text
    assert response.headers["content-type"].startswith("application/json")


def test_hostile_names_in_events_are_data_stored_verbatim_not_errors(api):
    """HTML in names is valid OpenLineage: stored and returned exactly, as JSON text."""
    event = run_event(HOSTILE_JOB, inputs=[("ns", HOSTILE_DATASET)], outputs=[("ns", "out")])
    assert api.client.post("/api/v1/lineage", json=event).status_code == 201
    body = api.client.get("/api/v1/lineage", params={"nodeId": f"job:shop:{HOSTILE_JOB}"}).json()
    names = {n["data"]["name"] for n in body["graph"]}
    assert names == {HOSTILE_JOB, HOSTILE_DATASET, "out"}


def test_page_is_served_with_a_strict_content_security_policy(api):
    response = api.client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert response.headers["x-frame-options"] == "DENY"
    # The page references only its own files: no remote URL anywhere in the markup.
    assert "http://" not in response.text and "https://" not in response.text
    for asset in ("static/app.js", "static/graph-libs.js", "static/style.css"):
        assert api.client.get("/" + asset).status_code == 200


def test_page_script_never_builds_markup_from_data():
    from lineage_sdk.collector.api import STATIC_DIR

    source = (STATIC_DIR / "app.js").read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in source, sink
