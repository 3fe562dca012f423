"""Event factories for the document and graph store tests (valid OpenLineage 2-0-2 events)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.store import LineageRecord

PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/tests/stores_nosql"
SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/"
RUN_EVENT_SCHEMA = SPEC + "RunEvent"
PARENT_SCHEMA = "https://openlineage.io/spec/facets/1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet"
COLUMN_SCHEMA = (
    "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json"
    "#/$defs/ColumnLineageDatasetFacet"
)
BASE_TIME = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

# ``make_store(kind)`` of tests/stores_nosql/conftest.py: a fresh store of a kind.
StoreFactory = Callable[[str], Any]
#: ``make_store`` kinds held to the reference: the engine over each backend but memory.
BACKEND_KINDS = ("sqlite", "postgres", "document", "graph")
#: Every ``make_store`` kind, the reference (the engine over the memory backend) first.
STORE_KINDS = ("memory", *BACKEND_KINDS)

# Unusual but valid content: must be stored and read back exactly, never interpreted.
HOSTILE_STRINGS = [
    "$where",
    "$gt",
    "a.b.c",
    "..",
    'it\'s a "quoted" name',
    "back`tick`name`",
    "MATCH (n) DETACH DELETE n //",
    "'}) MERGE (x:Pwned) //",
    "} RETURN 1 UNION MATCH (n) RETURN n",
    "emoji 😀🚀 ünïcødé 日本語",
    "%24not-an-escape%2E",
    "back\\slash\\\\",
    "new\nline\ttab",
    "${param} $param",
    '{"$ne": null}',
    "x" * 10_000,
]
HOSTILE_KEYS = [
    "$set",
    "$where",
    "a.b",
    ".leading",
    "trailing.",
    "%24",
    "%",
    "`tick`",
    "😀.$",
    "MATCH",
]


def facet(**fields: Any) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": "https://example.com/schemas/Custom.json",
        **fields,
    }


def run_event(
    *,
    job: str = "job",
    namespace: str = "ns",
    event_type: str = "COMPLETE",
    run_id: str | None = None,
    inputs: Sequence[tuple[str, str]] = (),
    outputs: Sequence[tuple[str, str]] = (),
    parent: tuple[str, str, str] | None = None,
    seconds: float = 0.0,
    run_facets: dict[str, Any] | None = None,
    job_facets: dict[str, Any] | None = None,
    dataset_facets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``parent`` is (run_id, namespace, name)."""
    rfacets: dict[str, Any] = dict(run_facets or {})
    if parent is not None:
        rfacets["parent"] = {
            "_producer": PRODUCER,
            "_schemaURL": PARENT_SCHEMA,
            "run": {"runId": parent[0]},
            "job": {"namespace": parent[1], "name": parent[2]},
        }
    when = (BASE_TIME + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")
    return {
        "eventType": event_type,
        "eventTime": when,
        "run": {"runId": run_id or str(uuid.uuid4()), "facets": rfacets},
        "job": {"namespace": namespace, "name": job, "facets": dict(job_facets or {})},
        "inputs": [
            {"namespace": ns, "name": n, "facets": dict(dataset_facets or {})} for ns, n in inputs
        ],
        "outputs": [
            {"namespace": ns, "name": n, "facets": dict(dataset_facets or {})} for ns, n in outputs
        ],
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT_SCHEMA,
    }


def column_lineage(fields: dict[str, list[tuple[str, str, str]]]) -> dict[str, Any]:
    """``fields``: output field -> [(input namespace, input dataset, input field)]."""
    return {
        "_producer": PRODUCER,
        "_schemaURL": COLUMN_SCHEMA,
        "fields": {
            out: {"inputFields": [{"namespace": ns, "name": n, "field": f} for ns, n, f in ins]}
            for out, ins in fields.items()
        },
    }


def records(*events: dict[str, Any]) -> list[LineageRecord]:
    return [build_record(e) for e in events]


def chain(namespace: str, length: int, *, seconds: float = 0.0) -> list[dict[str, Any]]:
    """d0 -> j1 -> d1 -> j2 -> ... -> j<length> -> d<length>, one COMPLETE run per job."""
    return [
        run_event(
            job=f"j{i}",
            namespace=namespace,
            inputs=[(namespace, f"d{i - 1}")],
            outputs=[(namespace, f"d{i}")],
            seconds=seconds + i,
        )
        for i in range(1, length + 1)
    ]


def uid() -> str:
    return uuid.uuid4().hex[:10]
