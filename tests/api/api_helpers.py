"""Events, a known pipeline, Marquez/OpenLineage schema validators and a CLI runner for the API
tests. Everything here talks to real things (files, subprocesses); nothing is mocked."""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import conformance
import httpx
import pytest
import yaml
from jsonschema import Draft7Validator, Draft202012Validator
from jsonschema.exceptions import ValidationError

from lineage_sdk.collector.api.access import hash_key
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.settings import ApiKeyConfig, ConnectionConfig
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.sql_backend import SqlBackend

PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/tests/api"
RUN_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
_BASE = datetime(2025, 3, 1, tzinfo=UTC)
API_KEY = "test-key-0123456789"  # fixed on purpose: tests check it is never echoed

# Names a browser would execute if they ever reached markup.
HOSTILE_JOB = "<script>window.__pwned='job'</script>"
HOSTILE_DATASET = "<img src=x onerror=\"window.__pwned='dataset'\">"


def when(seconds: float) -> str:
    return (_BASE + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def run_event(
    job: str,
    *,
    namespace: str = "shop",
    event_type: str = "COMPLETE",
    run_id: str | None = None,
    inputs: Sequence[tuple[str, str]] = (),
    outputs: Sequence[tuple[str, str]] = (),
    seconds: float = 0.0,
) -> dict[str, Any]:
    """A valid OpenLineage 2-0-2 RunEvent."""
    return {
        "eventType": event_type,
        "eventTime": when(seconds),
        "run": {"runId": run_id or str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": namespace, "name": job, "facets": {}},
        "inputs": [{"namespace": ns, "name": n, "facets": {}} for ns, n in inputs],
        "outputs": [{"namespace": ns, "name": n, "facets": {}} for ns, n in outputs],
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT_SCHEMA,
    }


PG = "postgres://db.example:5432"  # a namespace with ':' and '/' in it, as real ones have


def pipeline() -> dict[str, Any]:
    """A known graph, each run a START and a terminal event a little later:

    raw.orders -> [extract] -> stg.orders -> [clean] (FAILED) -> clean.orders -> [report]
                                         \\-> [audit] -> audit.log                   |
    HOSTILE_DATASET ------------------------------------------------------------> [report]
    [report] -> mart.daily -> [HOSTILE_JOB] -> export.csv
    """
    runs = {name: str(uuid.uuid4()) for name in ("extract", "clean", "audit", "report", "hostile")}
    spec = [
        ("extract", "shop", [(PG, "raw.orders")], [(PG, "stg.orders")], "COMPLETE", 0, 65),
        ("clean", "shop", [(PG, "stg.orders")], [(PG, "clean.orders")], "FAIL", 100, 112),
        ("audit", "shop", [(PG, "stg.orders")], [(PG, "audit.log")], "COMPLETE", 100, 101),
        (
            "report",
            "shop",
            [(PG, "clean.orders"), (PG, HOSTILE_DATASET)],
            [(PG, "mart.daily")],
            "COMPLETE",
            200,
            230,
        ),
        (HOSTILE_JOB, "shop", [(PG, "mart.daily")], [(PG, "export.csv")], "COMPLETE", 300, 301),
    ]
    events: list[dict[str, Any]] = []
    for job, ns, ins, outs, end, start_s, end_s in spec:
        run_id = runs["hostile" if job == HOSTILE_JOB else job]
        events.append(
            run_event(
                job,
                namespace=ns,
                event_type="START",
                run_id=run_id,
                inputs=ins,
                outputs=outs,
                seconds=start_s,
            )
        )
        events.append(
            run_event(
                job,
                namespace=ns,
                event_type=end,
                run_id=run_id,
                inputs=ins,
                outputs=outs,
                seconds=end_s,
            )
        )
    return {"events": events, "runs": runs}


# ---------------------------------------------------------------------------------------------
# Schemas


def shared() -> Path:
    return conformance.shared_dir()


def _drop_null_types(node: Any) -> Any:
    """Marquez's document writes ``type:`` with no value in SearchResult (YAML null), which is
    not a JSON Schema type; it means "untyped" there, so the key is dropped."""
    if isinstance(node, dict):
        return {k: _drop_null_types(v) for k, v in node.items() if not (k == "type" and v is None)}
    if isinstance(node, list):
        return [_drop_null_types(v) for v in node]
    return node


@functools.cache
def marquez_document() -> dict[str, Any]:
    path = shared() / "marquez" / "openapi.yml"
    with path.open(encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    doc = _drop_null_types(doc)
    # GraphNode.data is `oneOf: [Dataset, Job]` with an OpenAPI discriminator mapping the node's
    # type to the schema. Neither schema has required keys, so plain JSON Schema `oneOf` matches
    # both and always fails; jsonschema has no discriminators. We apply it as Marquez means it:
    # validate_marquez() checks each node's data against Dataset or Job by the node's type.
    data = doc["components"]["schemas"]["GraphNode"]["properties"]["data"]
    data.pop("oneOf", None)
    data.pop("discriminator", None)
    return doc


def validate_marquez(component: str, instance: Any) -> None:
    """Validate ``instance`` against ``#/components/schemas/<component>`` of Marquez's openapi.yml
    (formats checked: date-time, uuid); raises ValidationError."""
    doc = marquez_document()
    schema = {"$ref": f"#/components/schemas/{component}", "components": doc["components"]}
    Draft7Validator(schema, format_checker=conformance.FORMAT_CHECKER).validate(instance)
    # Marquez's Run is `anyOf: [IncompleteRun, {object with optional extras}]`: the second branch
    # accepts anything, so on its own the check is vacuous. A Run is an IncompleteRun with extras,
    # so each Run is also checked against IncompleteRun (id a UUID, state in Marquez's enum).
    if component == "Run":
        validate_marquez("IncompleteRun", instance)
    elif component == "RunList":
        for run in instance.get("runs", []):
            validate_marquez("Run", run)
    elif component == "Job":
        for run in [instance.get("latestRun"), *instance.get("latestRuns", [])]:
            if run is not None:
                validate_marquez("Run", run)
    elif component == "JobList":
        for job in instance.get("jobs", []):
            validate_marquez("Job", job)
    elif component == "LineageGraph":
        for node in instance["graph"]:
            validate_marquez("Dataset" if node["type"] == "DATASET" else "Job", node["data"])


@functools.cache
def openlineage_batch_response_schema() -> dict[str, Any]:
    """The 200 answer of ``/lineage/batch`` in the spec's OpenLineage.yml."""
    path = shared() / "openlineage-spec" / "published" / "OpenLineage.yml"
    with path.open(encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    schema: dict[str, Any] = doc["paths"]["/lineage/batch"]["post"]["responses"]["200"]["content"][
        "application/json"
    ]["schema"]
    return schema


def validate_openapi_response(
    openapi: Mapping[str, Any], path: str, method: str, status: int, body: Any
) -> None:
    """Validate ``body`` against the schema our own /openapi.json declares for that answer."""
    op = openapi["paths"][path][method]
    response = op["responses"][str(status)]
    schema = response["content"]["application/json"]["schema"]
    root = {**copy.deepcopy(schema), "components": openapi.get("components", {})}
    Draft202012Validator(root, format_checker=conformance.FORMAT_CHECKER).validate(body)


__all__ = [
    "API_KEY",
    "HOSTILE_DATASET",
    "HOSTILE_JOB",
    "PG",
    "PRODUCER",
    "Api",
    "ValidationError",
    "openlineage_batch_response_schema",
    "pipeline",
    "run_cli",
    "run_event",
    "validate_marquez",
    "validate_openapi_response",
    "when",
]


# ---------------------------------------------------------------------------------------------
# The CLI, as a user runs it (a real process, output piped)


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    # COLUMNS too: a width the caller's environment sets (pytest-xdist sets 80) would wrap names.
    unset = (
        "FORCE_COLOR",
        "NO_COLOR",
        "COLUMNS",
        "LINEAGE_API_URL",
        "LINEAGE_API_KEY",
        "LINEAGE_CONFIG",
    )
    base = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.run(
        [sys.executable, "-m", "lineage_sdk.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**base, **(env or {})},
        check=False,
    )


# ---------------------------------------------------------------------------------------------
# Fields and column lineage

SCHEMA_FACET = (
    "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"
)
COLUMN_FACET = "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet"


def schema_facet(*fields: tuple[str, str, str]) -> dict[str, Any]:
    """A schema facet of (name, type, description) fields ("" leaves the description out)."""
    return {
        "_producer": PRODUCER,
        "_schemaURL": SCHEMA_FACET,
        "fields": [
            {"name": n, "type": t, **({"description": d} if d else {})} for n, t, d in fields
        ],
    }


def column_facet(mapping: Mapping[str, Sequence[tuple[str, str, str]]]) -> dict[str, Any]:
    """A columnLineage facet: output field -> its (namespace, dataset, field) inputs."""
    return {
        "_producer": PRODUCER,
        "_schemaURL": COLUMN_FACET,
        "fields": {
            out: {
                "inputFields": [
                    {
                        "namespace": ns,
                        "name": name,
                        "field": field,
                        "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}],
                    }
                    for ns, name, field in inputs
                ]
            }
            for out, inputs in mapping.items()
        },
    }


def column_pipeline() -> list[dict[str, Any]]:
    """Two runs carrying schema and columnLineage facets, on top of :func:`pipeline`:

    stg.orders(order_id, amount, customer) -> [enrich] -> mart.enriched(order_id, amount_eur)
    mart.enriched -> [publish] -> pub.enriched(total)      (amount -> amount_eur -> total)

    ``enrich`` runs 1.5 s (START at 400 s, COMPLETE at 401.5 s).
    """
    orders = schema_facet(
        ("order_id", "INTEGER", ""), ("amount", "DECIMAL(10,2)", ""), ("customer", "VARCHAR", "")
    )
    enriched = schema_facet(
        ("order_id", "INTEGER", "the order"), ("amount_eur", "DECIMAL(10,2)", "amount in euros")
    )
    published = schema_facet(("total", "DECIMAL(12,2)", "sum of amount_eur"))
    events: list[dict[str, Any]] = []
    for job, inputs, outputs, start, end in (
        ("enrich", [("stg.orders", orders)], [("mart.enriched", enriched)], 400.0, 401.5),
        ("publish", [("mart.enriched", enriched)], [("pub.enriched", published)], 500.0, 500.25),
    ):
        run_id = str(uuid.uuid4())
        for kind, seconds in (("START", start), ("COMPLETE", end)):
            event = run_event(
                job,
                event_type=kind,
                run_id=run_id,
                inputs=[(PG, n) for n, _ in inputs],
                outputs=[(PG, n) for n, _ in outputs],
                seconds=seconds,
            )
            for dataset, (_, facet) in zip(
                event["inputs"] + event["outputs"], inputs + outputs, strict=True
            ):
                dataset["facets"]["schema"] = copy.deepcopy(facet)
            out = event["outputs"][0]
            if job == "enrich":
                out["facets"]["columnLineage"] = column_facet(
                    {
                        "order_id": [(PG, "stg.orders", "order_id")],
                        "amount_eur": [(PG, "stg.orders", "amount")],
                    }
                )
            else:
                out["facets"]["columnLineage"] = column_facet(
                    {"total": [(PG, "mart.enriched", "amount_eur")]}
                )
            events.append(event)
    return events


@dataclass
class Api:
    """A running API: its URL, an httpx client carrying the key, the store and its config."""

    url: str
    client: httpx.Client
    store: EngineStore
    manager: LineageManager
    config_path: Path

    def count(self) -> int:
        return self.store.count_events()


@dataclass
class Served:
    """An API over one store (access tests): its URL, and clients carrying a key."""

    url: str
    store: Any

    def client(self, key: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


#: Every kind :func:`access_store` makes (the access tests' stores): the engine over the sql
#: backend (SQLite), the document backend, the graph backend and the memory backend.
ACCESS_KINDS = ("sql", "document", "graph", "memory")


def engine_store(kind: str, request: Any, folder: Path) -> EngineStore:
    """The engine over a backend, not yet opened: ``sql`` on a SQLite file in ``folder``,
    ``document`` in collections of its own on the session's MongoDB-wire server, ``graph`` in a
    graph of its own on the FalkorDB fixture, ``memory`` through its entry point's factory;
    :func:`drop_store` removes what it wrote on a shared server. (PostgreSQL is
    :func:`postgres_store`.)"""
    from servers import FalkorDBRespRunner

    from lineage_sdk.collector.stores.memory import memory_store
    from lineage_sdk.config.schema import LineageConfig

    tag = f"t{uuid.uuid4().hex[:12]}"
    if kind == "sql":
        return EngineStore(SqlBackend(f"sqlite:///{folder / f'{tag}.db'}"))
    if kind == "document":
        mongo = request.getfixturevalue("mongo")
        connection = ConnectionConfig(uri=mongo.uri, database="lineage_tests", timeout_ms=5000)
        return EngineStore(DocumentBackend(connection, collection_name=tag))
    if kind == "graph":
        falkordb = request.getfixturevalue("falkordb")
        runner = FalkorDBRespRunner("127.0.0.1", falkordb.redis_port, tag)
        return EngineStore(GraphBackend(runner=runner))
    if kind == "memory":
        return memory_store(LineageConfig())
    raise ValueError(f"not a store kind: {kind}")


def drop_store(store: Any) -> None:
    """Remove what an :func:`engine_store` wrote on a shared server (its collections or its
    graph); a SQLite file stays in its folder. Call it before the store is closed."""
    from servers import FalkorDBRespRunner

    backend = getattr(store, "backend", None)
    if isinstance(backend, DocumentBackend):
        backend.drop()
    elif isinstance(backend, GraphBackend) and isinstance(backend.runner, FalkorDBRespRunner):
        backend.runner.drop()


@contextlib.contextmanager
def postgres_store(prefix: str) -> Iterator[EngineStore]:
    """The engine over the sql backend on a PostgreSQL database of its own (named after
    ``prefix``), not yet opened; afterwards the store is closed, then the database dropped."""
    from servers import postgres_database

    with postgres_database(prefix) as url:
        store = EngineStore(SqlBackend(url))
        try:
            yield store
        finally:
            store.close()


@contextlib.contextmanager
def access_store(request: Any, folder: Path) -> Iterator[EngineStore]:
    """An open :func:`engine_store` of the kind ``request.param`` names (:data:`ACCESS_KINDS`),
    in a collection or graph of its own, dropped afterwards."""
    store = engine_store(request.param, request, folder)
    store.open()
    try:
        yield store
    finally:
        drop_store(store)
        store.close()


# The issue-30 probe's keys: an admin, and teams A and B that each write their own namespace
# and read it and one shared namespace (the attacker tests replay their requests).
ADMIN = "lsk_admin-0f1e2d3c4b5a69788796a5b4c3d2e1f0"
KEY_A = "lsk_team-a-1a2b3c4d5e6f708192a3b4c5d6e7f809"
KEY_B = "lsk_team-b-9f8e7d6c5b4a392817f6e5d4c3b2a1f0"
SHARED = "pg://db:5432"
KEYS = {
    "a": ApiKeyConfig(key_hash=hash_key(KEY_A), write=["team_a"], read=["team_a", SHARED]),
    "b": ApiKeyConfig(key_hash=hash_key(KEY_B), write=["team_b"], read=["team_b", SHARED]),
}


@contextlib.contextmanager
def access_api(
    request: Any,
    folder: Path,
    *,
    api_key: str,
    keys: Mapping[str, Any],
    posts: Sequence[tuple[str, list[dict[str, Any]]]],
) -> Iterator[Served]:
    """The API with ``api_key`` and named ``keys`` over :func:`access_store`, holding each
    batch of ``posts`` (key, events), posted with its key and stored whole."""
    from lineage_sdk.collector.api import ApiServer, create_app

    with (
        access_store(request, folder) as store,
        ApiServer(create_app(store, api_key=api_key, keys=keys)) as server,
    ):
        served = Served(server.url, store)
        for key, events in posts:
            with served.client(key) as client:
                answer = client.post("/api/v1/lineage/batch", json=events)
                assert answer.status_code == 200, answer.text
                assert answer.json()["status"] == "success", answer.text
        yield served


def client_of(key: str) -> Any:
    """A module-scoped fixture: an httpx client of the module's ``served`` API carrying ``key``."""

    @pytest.fixture(scope="module")
    def client(served: Served) -> Iterator[httpx.Client]:
        with served.client(key) as made:
            yield made

    return client
