"""Issue 32 item 4: the explicit ``lineage`` facet (LineageFacet 1-0-0).

Events carrying it (a job facet with dataset and job entries, a dataset facet on a JobEvent's
output and on a DatasetEvent's dataset, the spec's own example documents, and one event whose
facet is partly bad) go through HTTP ingest and through the queue (the shared RabbitMQ, in this
process's private vhost) to five stores at once: memory, sql on SQLite, sql on PostgreSQL,
document on SecantusDB and graph on FalkorDB. Then, for every store:

* each event reads back exactly as sent (the raw export, canonical sorted-key JSON);
* the facet's edges are served by a real server over that store: ``/api/v1/lineage`` (each
  marked ``declared``), ``/api/v1/column-lineage`` (with the transformations), and the
  ``lineage`` CLI against it;
* the bad event's good entries are kept, its bad ones skipped, with exactly one warning naming
  the event; nothing else is lost.

The mapping onto our job <-> dataset rows is lineage_sdk/collector/engine/lineage_facet.py's
(docs/api.md, "The lineage facet").
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import conformance
import httpx
import orjson
import pytest
from collector_helpers import json_props, publish, wait_until
from collector_helpers import running as running_collector
from every_store import api_client, deleting_queues, every_store, managing, queue_config
from servers import FalkorDBServer, MongoTarget, postgres_database

from lineage_sdk.collector.api import ApiServer, create_app
from lineage_sdk.collector.api.access import AccessPolicy, hash_key, write_refusal
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.engine.lineage_facet import facet_lineage
from lineage_sdk.collector.portability import export_events
from lineage_sdk.collector.records import build_record, compute_event_id
from lineage_sdk.collector.settings import ApiKeyConfig

pytestmark = [pytest.mark.rabbitmq, pytest.mark.postgres, pytest.mark.mongodb, pytest.mark.neo4j]

#: The spec's examples name their jobs here; the events carrying them are filed under it too
#: (another namespace's job is not taken from an event: docs/api.md).
AIRFLOW = "airflow://production"
WAREHOUSE = "postgresql://warehouse:5432"
PG = "postgres://shop:5432"
JOBS = "jobs://shop:5432"
PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/tests/lineage-facet"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
FACET_URL = "https://openlineage.io/spec/facets/1-0-0/LineageFacet.json"
EXAMPLES = conformance.shared_dir() / "openlineage-spec" / "examples" / "LineageFacet"
FACET_LOGGER = "lineage_sdk.collector.engine.lineage_facet"
BATCH = "/api/v1/lineage/batch"


def canonical(event: Any) -> bytes:
    return orjson.dumps(event, option=orjson.OPT_SORT_KEYS)


# ------------------------------------------------------------------------------------ events


def _facet(schema: str, **body: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": f"{FACET_URL}#/$defs/{schema}", **body}


def _schema(*names: str) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json",
        "fields": [{"name": n, "type": "TEXT"} for n in names],
    }


def _ds(name: str, field: str | None = None, subtype: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"namespace": PG, "name": name, "type": "DATASET"}
    if field is not None:
        item["field"] = field
    if subtype is not None:
        item["transformations"] = [{"type": "DIRECT", "subtype": subtype, "masking": False}]
    return item


def _run(ns: str, job: str, seconds: int, **parts: Any) -> dict[str, Any]:
    return {
        "eventType": "COMPLETE",
        "eventTime": f"2025-04-01T10:00:{seconds:02d}.5Z",
        "producer": PRODUCER,
        "schemaURL": f"{SCHEMA_URL}#/$defs/RunEvent",
        "run": {"runId": str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": ns, "name": job, "facets": parts.pop("job_facets", {})},
        "inputs": parts.pop("inputs", []),
        "outputs": parts.pop("outputs", []),
    }


def load_event() -> dict[str, Any]:
    """Job ``load``: a job facet with every kind of entry it maps."""
    entries = [
        {  # dataset -> dataset, with fields: load reads orders, writes totals; two column edges
            "namespace": PG,
            "name": "mart.totals",
            "type": "DATASET",
            "inputs": [_ds("shop.orders")],
            "fields": {
                "total": {"inputs": [_ds("shop.orders", "amount", "AGGREGATION")]},
                "cid": {"inputs": [_ds("shop.orders", "cid", "IDENTITY")]},
            },
        },
        {  # a target this run does not list as an output
            "namespace": PG,
            "name": "mart.audit",
            "type": "DATASET",
            "inputs": [_ds("shop.customers")],
        },
        {  # another job of the event's namespace reads totals
            "namespace": JOBS,
            "name": "report",
            "type": "JOB",
            "inputs": [_ds("mart.totals")],
        },
        {"type": "JOB", "inputs": [_ds("shop.rates")]},  # the event's own job reads rates
        {  # another job writes extract
            "namespace": PG,
            "name": "mart.extract",
            "type": "DATASET",
            "inputs": [{"namespace": JOBS, "name": "extract", "type": "JOB"}],
        },
    ]
    return _run(
        JOBS,
        "load",
        1,
        job_facets={"lineage": _facet("LineageJobFacet", entries=entries)},
        inputs=[
            {
                "namespace": PG,
                "name": "shop.orders",
                "facets": {"schema": _schema("id", "amount", "cid")},
            }
        ],
        outputs=[
            {"namespace": PG, "name": "mart.totals", "facets": {"schema": _schema("cid", "total")}}
        ],
    )


def job_event() -> dict[str, Any]:
    """A JobEvent of ``declare``: a dataset facet on its output."""
    lineage = _facet(
        "LineageDatasetFacet",
        inputs=[_ds("shop.orders")],
        fields={"n": {"inputs": [_ds("shop.orders", "id", "AGGREGATION")]}},
    )
    return {
        "eventTime": "2025-04-01T10:00:02Z",
        "producer": PRODUCER,
        "schemaURL": f"{SCHEMA_URL}#/$defs/JobEvent",
        "job": {"namespace": JOBS, "name": "declare", "facets": {}},
        "inputs": [],
        "outputs": [{"namespace": PG, "name": "mart.summary", "facets": {"lineage": lineage}}],
    }


def dataset_event() -> dict[str, Any]:
    """A DatasetEvent: a view's field derives from totals (a column edge without a job)."""
    lineage = _facet(
        "LineageDatasetFacet", fields={"v": {"inputs": [_ds("mart.totals", "total", "IDENTITY")]}}
    )
    return {
        "eventTime": "2025-04-01T10:00:03Z",
        "producer": PRODUCER,
        "schemaURL": f"{SCHEMA_URL}#/$defs/DatasetEvent",
        "dataset": {"namespace": PG, "name": "mart.view", "facets": {"lineage": lineage}},
    }


def bad_event() -> dict[str, Any]:
    """Job ``bad``: one good entry among malformed ones and unknown fields."""
    entries: list[Any] = [
        {"namespace": PG, "name": "mart.good", "type": "DATASET", "inputs": [_ds("shop.orders")]},
        "not an entry",
        {"namespace": PG, "name": "mart.table", "type": "TABLE", "inputs": [_ds("shop.orders")]},
        {"namespace": PG, "type": "DATASET", "inputs": [_ds("shop.orders")]},  # no name
        {"namespace": PG, "name": "mart.lost", "type": "DATASET", "inputs": "shop.orders"},
        {  # the schema of mart.good has no field nope; orders has no ghost
            "namespace": PG,
            "name": "mart.good",
            "type": "DATASET",
            "fields": {
                "nope": {"inputs": [_ds("shop.orders", "id")]},
                "ok": {"inputs": [_ds("shop.orders", "ghost"), _ds("shop.orders", "id")]},
            },
        },
        {"name": "half", "type": "JOB", "inputs": [_ds("shop.secret")]},  # namespace missing
    ]
    return _run(
        JOBS,
        "bad",
        4,
        job_facets={"lineage": _facet("LineageJobFacet", entries=entries)},
        inputs=[{"namespace": PG, "name": "shop.orders", "facets": {"schema": _schema("id")}}],
        outputs=[{"namespace": PG, "name": "mart.good", "facets": {"schema": _schema("ok")}}],
    )


def example_events() -> list[dict[str, Any]]:
    """The spec's examples: a job facet on the job, a dataset facet on an output."""
    events = []
    for i, path in enumerate(sorted(EXAMPLES.glob("*.json"))):
        facet = json.loads(path.read_text())["lineage"]
        event = _run(AIRFLOW, f"examples.{path.stem}", 10 + i)
        if "entries" in facet:
            event["job"]["facets"] = {"lineage": facet}
        else:
            event["outputs"] = [
                {
                    "namespace": WAREHOUSE,
                    "name": "public.customer_dim",
                    "facets": {"lineage": facet},
                }
            ]
        events.append(event)
    return events


def all_events() -> list[dict[str, Any]]:
    events = [load_event(), job_event(), dataset_event(), bad_event(), *example_events()]
    for event in events[:3]:
        conformance.validate_event(event)
    return events


# ------------------------------------------------------------------------------------ checks


def _edges(answer: dict[str, Any]) -> dict[tuple[str, str], bool]:
    """(origin, destination) -> declared, of a lineage answer."""
    found: dict[tuple[str, str], bool] = {}
    for node in answer["graph"]:
        for edge in (*node["inEdges"], *node["outEdges"]):
            found[(edge["origin"], edge["destination"])] = edge.get("declared") is True
    return found


def _job(ns: str, name: str) -> str:
    return f"job:{ns}:{name}"


def _dataset(name: str, ns: str = PG) -> str:
    return f"dataset:{ns}:{name}"


#: Every edge the facets state, as the stores must serve it (each declared).
EXPECTED = {
    (_dataset("shop.orders"), _job(JOBS, "load")),
    (_job(JOBS, "load"), _dataset("mart.totals")),
    (_dataset("shop.customers"), _job(JOBS, "load")),
    (_job(JOBS, "load"), _dataset("mart.audit")),
    (_dataset("shop.rates"), _job(JOBS, "load")),
    (_dataset("mart.totals"), _job(JOBS, "report")),
    (_job(JOBS, "extract"), _dataset("mart.extract")),
    (_dataset("shop.orders"), _job(JOBS, "declare")),
    (_job(JOBS, "declare"), _dataset("mart.summary")),
    (_dataset("shop.orders"), _job(JOBS, "bad")),
    (_job(JOBS, "bad"), _dataset("mart.good")),
    # the spec's examples
    (_dataset("public.customers", WAREHOUSE), _job(AIRFLOW, "examples.dataset-to-dataset")),
    (_job(AIRFLOW, "examples.dataset-to-dataset"), _dataset("public.customer_dim", WAREHOUSE)),
    (_dataset("public.staging_orders", WAREHOUSE), _job(AIRFLOW, "daily.load")),
    (_job(AIRFLOW, "examples.generator"), _dataset("public.extracted_data", WAREHOUSE)),
    (
        _dataset("public.transactions", "postgresql://production:5432"),
        _job(AIRFLOW, "examples.implicit-job"),
    ),
    (_job(AIRFLOW, "daily.extract"), _dataset("public.daily_summary", WAREHOUSE)),
    (_dataset("public.orders", WAREHOUSE), _job(AIRFLOW, "examples.mixed-sources")),
    (_job(AIRFLOW, "examples.mixed-sources"), _dataset("public.enriched_orders", WAREHOUSE)),
    (_job(AIRFLOW, "daily.enrichment"), _dataset("public.enriched_orders", WAREHOUSE)),
}
#: What only the bad entries would have stated.
NEVER = ("mart.table", "mart.lost", "shop.secret", ":half", "nope", "ghost")


def _input_fields(answer: dict[str, Any], field_id: str) -> list[dict[str, Any]]:
    (node,) = [n for n in answer["graph"] if n["id"] == field_id]
    return list(node["data"]["inputFields"])


def _check_served(name: str, store: EngineStore, load_run: str) -> None:
    """The facets' edges, served by a real server over ``store`` and by the CLI against it."""
    server = ApiServer(create_app(store)).start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:

            def get(path: str, **params: Any) -> dict[str, Any]:
                answer = client.get(path, params=params)
                assert answer.status_code == 200, (name, path, params, answer.text)
                return dict(answer.json())

            served: dict[tuple[str, str], bool] = {}
            roots = {end for edge in EXPECTED for end in edge}
            for root in sorted(roots):
                served.update(_edges(get("/api/v1/lineage", nodeId=root, depth=1)))
            missing = EXPECTED - set(served)
            assert not missing, (name, sorted(missing))
            undeclared = sorted(e for e in EXPECTED if not served[e])
            assert not undeclared, (name, undeclared)
            text = json.dumps(sorted(served))
            assert not [bad for bad in NEVER if bad in text], (name, text)
            load = _job(JOBS, "load")
            mine = {e for e in EXPECTED if load in e}
            for when in ({"runId": load_run}, {"asOf": "2025-04-01T10:00:01.5Z"}):
                past = _edges(get("/api/v1/lineage", nodeId=load, depth=1, **when))
                assert {e for e, declared in past.items() if declared} >= mine, (name, when)
            bad_job = _edges(get("/api/v1/lineage", nodeId=_job(JOBS, "bad"), depth=1))
            assert {e for e in bad_job if _job(JOBS, "bad") in e} == {
                (_dataset("shop.orders"), _job(JOBS, "bad")),
                (_job(JOBS, "bad"), _dataset("mart.good")),
            }, name

            total = f"datasetField:{PG}:mart.totals:total"
            columns = get("/api/v1/column-lineage", nodeId=total, depth=5)
            assert _input_fields(columns, total) == [
                {
                    "namespace": PG,
                    "dataset": "shop.orders",
                    "field": "amount",
                    "transformations": [
                        {"type": "DIRECT", "subtype": "AGGREGATION", "masking": False}
                    ],
                }
            ], name
            view = f"datasetField:{PG}:mart.view:v"
            down = get("/api/v1/column-lineage", nodeId=view, depth=5)
            assert [f["field"] for f in _input_fields(down, view)] == ["total"], name
            ids = {n["id"] for n in down["graph"]}
            assert f"datasetField:{PG}:shop.orders:amount" in ids, name  # two hops up
            summary = f"datasetField:{PG}:mart.summary:n"
            assert [
                f["field"]
                for f in _input_fields(get("/api/v1/column-lineage", nodeId=summary), summary)
            ] == ["id"], name
            good = f"datasetField:{PG}:mart.good:ok"
            assert [
                f["field"] for f in _input_fields(get("/api/v1/column-lineage", nodeId=good), good)
            ] == ["id"], name
            gone = client.get("/api/v1/column-lineage", params={"nodeId": f"{good[:-2]}nope"})
            assert gone.status_code == 404, (name, gone.text)

        graph = _cli("--url", server.url, "graph", _job(JOBS, "load"), "-d", "1", "-f", "json")
        assert _edges(orjson.loads(graph)).items() >= {
            ((_dataset("shop.rates"), _job(JOBS, "load")), True),
            ((_job(JOBS, "load"), _dataset("mart.audit")), True),
        }, name
        tree = _cli("--url", server.url, "graph", _dataset("mart.extract"), "-d", "1")
        assert "extract" in tree and "mart.extract" in tree, (name, tree)
        cols = _cli("--url", server.url, "columns", f"dataset:{PG}:mart.totals:total")
        assert "shop.orders" in cols and "amount" in cols, (name, cols)
    finally:
        server.stop()


def _cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "lineage_sdk.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith(("LINEAGE_", "FORCE_"))},
            "COLUMNS": "200",
            "NO_COLOR": "1",
        },
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def _check_every_store(stores: dict[str, EngineStore], sent: list[dict[str, Any]]) -> None:
    """Each event reads back as sent from every store, and every store serves the facets."""
    for name, store in stores.items():
        out = io.BytesIO()
        export_events(store, out)
        got = sorted(canonical(orjson.loads(line)) for line in out.getvalue().splitlines())
        assert got == sorted(map(canonical, sent)), name
    for name, store in stores.items():
        _check_served(name, store, sent[0]["run"]["runId"])


def _one_warning(caplog: pytest.LogCaptureFixture, bad_id: str) -> None:
    said = [r for r in caplog.records if r.name == FACET_LOGGER]
    assert len(said) == 1, [r.getMessage() for r in said]
    message = said[0].getMessage()
    assert said[0].levelno == logging.WARNING and bad_id in message, message
    for part in ("entries[1]", "entries[2]", "entries[3]", "entries[4]", "nope", "ghost"):
        assert part in message or "more" in message, message


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_database("lineage_facet") as url:
        yield url


# ------------------------------------------------------------------------------------- HTTP


def test_lineage_facet_through_http_and_every_store(
    tmp_path: Path,
    pg_url: str,
    mongo: MongoTarget,
    falkordb: FalkorDBServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=FACET_LOGGER)
    events = all_events()
    bodies = [orjson.dumps(e) for e in events]
    with (
        every_store(tmp_path, pg_url, mongo, falkordb, "lf") as stores,
        managing(stores) as manager,
    ):
        with api_client(manager) as client:
            headers = {"Content-Type": "application/json"}
            ids = []
            for body in bodies[:4]:  # one by one, the bad one last
                answer = client.post("/api/v1/lineage", content=body, headers=headers)
                assert answer.status_code == 201, answer.text
                ids.append(answer.json()["eventId"])
            batch = b"[" + b",".join(bodies[4:]) + b"]"
            answer = client.post(BATCH, content=batch, headers=headers)
            assert answer.status_code == 200, answer.text
            assert answer.json()["summary"]["successful"] == len(bodies) - 4
        _one_warning(caplog, ids[3])  # the server stopped; the manager still open
        _check_every_store(stores, events)


# ------------------------------------------------------------------------------------ queue


def test_lineage_facet_through_the_queue_and_every_store(
    tmp_path: Path,
    pg_url: str,
    mongo: MongoTarget,
    falkordb: FalkorDBServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=FACET_LOGGER)
    events = all_events()
    bodies = [orjson.dumps(e) for e in events]
    topic = f"test.lineage.facet.{uuid.uuid4().hex[:10]}"
    config = queue_config(topic)
    with (
        every_store(tmp_path, pg_url, mongo, falkordb, "lf") as stores,
        managing(stores, config) as manager,
        deleting_queues(config),
        running_collector(config, manager),
    ):
        publish(topic, [(body, json_props()) for body in bodies])
        wait_until(
            lambda: all(s.count_events() == len(events) for s in stores.values()),
            60,
            message="every event in every store",
        )
        _one_warning(caplog, compute_event_id(events[3]))
        _check_every_store(stores, events)  # the collector closes them when it stops


# ------------------------------------------------------------------------------------ access


def test_a_lineage_facet_writes_only_where_its_key_may() -> None:
    """A dataset the facet says the event's job writes is an output: in a namespace another key
    owns, the event is refused, as for a listed output; another namespace's job is never taken."""
    keys = {
        "a": ApiKeyConfig(key_hash=hash_key("lsk_a-key"), write=["team_a"], read=["team_a"]),
        "b": ApiKeyConfig(key_hash=hash_key("lsk_b-key"), write=["team_b"], read=["team_b"]),
    }
    grant = AccessPolicy(keys=keys).authenticate("lsk_a-key")
    assert grant is not None

    def refusal(*entries: dict[str, Any]) -> str | None:
        facet = _facet("LineageJobFacet", entries=list(entries))
        event = _run("team_a", "j", 1, job_facets={"lineage": facet})
        return write_refusal(build_record(event), grant)

    lake = {"namespace": "lake", "name": "x", "type": "DATASET"}
    assert (
        refusal({"namespace": "team_a", "name": "t", "type": "DATASET", "inputs": [lake]}) is None
    )
    assert refusal({"namespace": "lake", "name": "t", "type": "DATASET", "inputs": [lake]}) is None
    said = refusal({"namespace": "team_b", "name": "t", "type": "DATASET", "inputs": [lake]})
    assert "'team_b'" in (said or "")
    other_job = {"namespace": "team_b", "name": "k", "type": "JOB", "inputs": [lake]}
    assert refusal(other_job) is None  # skipped: it states no row of team_b's job
    record = build_record(
        _run(
            "team_a", "j", 1, job_facets={"lineage": _facet("LineageJobFacet", entries=[other_job])}
        )
    )
    found = facet_lineage(record)
    assert found is not None and not found.edges and "team_b:k" in found.problems[0]
