"""Hostile input end to end: from the SDK's RabbitMQ exporter through the collector into the
document, graph and sql stores, and read back exactly from each of them.

Names and facets hold ``$`` and ``.`` (MongoDB operators and paths), quotes, backslashes and
backticks (Cypher and SQL quoting), Cypher keywords, emoji and 10,000-character strings.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from nosql_collector import (
    CollectorRig,
    collector_rig,
    graph_runner,
    parked,
    queue_depths,
    running,
    stored_ids,
    stored_json,
    wait_settled,
)
from nosql_events import HOSTILE_KEYS, HOSTILE_STRINGS, facet, run_event, uid
from servers import GraphTarget, MongoTarget

import lineage_sdk
from lineage_sdk import LineageDataset, configure, track_lineage
from lineage_sdk.collector.store import node_id
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.sdk.events import encode_event
from lineage_sdk.sdk.exporters import InMemoryExporter

pytestmark = [pytest.mark.rabbitmq, pytest.mark.mongodb, pytest.mark.neo4j]

LONG = "y" * 10_000
#: The document backend's collections (lineage_sdk/collector/stores/document_backend.py).
DOCUMENT_COLLECTIONS = ("events", "mentions", "edges", "runs", "columns", "nodes")
assert any(len(s) >= 10_000 for s in HOSTILE_STRINGS)


@pytest.fixture
def rig(mongo: MongoTarget, graph_target: GraphTarget, tmp_path: Path) -> Iterator[CollectorRig]:
    with collector_rig(mongo.uri, graph_target, tmp_path) as r:
        yield r


def canonical(event: Any) -> bytes:
    return orjson.dumps(event, option=orjson.OPT_SORT_KEYS)


def hostile_events() -> list[dict[str, Any]]:
    hostile_facet = facet(**{k: {k: HOSTILE_STRINGS} for k in HOSTILE_KEYS}, big=2**63 - 1, f=0.1)
    return [
        run_event(
            job=text,
            namespace=text,
            run_id=f"de5de5de-0000-4000-8000-{i:012d}",
            seconds=i,
            inputs=[(text, text)],
            outputs=[("out", text)],
            run_facets={"custom": hostile_facet, "$where": facet(js="sleep(1000)")},
            job_facets={"a.b": facet(**{"$gt": text})},
            dataset_facets={"`x`": facet(v=text), "%2E": facet(**{"a.$b": text})},
        )
        for i, text in enumerate(HOSTILE_STRINGS)
    ]


def decorated_events(rig: CollectorRig, ns: str) -> list[bytes]:
    """Hostile names through @track_lineage itself (job, namespace, datasets, facets)."""
    witness = InMemoryExporter()
    config = LineageConfig(collector_topic=rig.topic)
    exporter = rig.exporter()
    assert configure(config, exporters=[exporter, witness], strict=True) is not None
    try:
        name = "'}) MERGE (x:Pwned) RETURN `x` // $where a.b 😀"

        @track_lineage(
            job_name=name,
            job_namespace=f"{ns}.$ns",
            inputs=[LineageDataset("$db", 'sch"ema.`ta.ble`', facets={"a$.b": facet(v=LONG)})],
            outputs=[LineageDataset("out", "MATCH (n) DETACH DELETE n")],
            facets={"$set": facet(**{"x.y": "\\'\"`"})},
        )
        def step() -> int:
            return 1

        @track_lineage(
            job_name=LONG, job_namespace=f"{ns}.$ns", inputs=[LineageDataset("out", LONG)]
        )
        def long_step() -> int:
            return 2

        assert step() + long_step() == 3
        assert lineage_sdk.force_flush(30)
    finally:
        lineage_sdk.shutdown(10)
    assert len(witness.encoded) == 4
    return [e.payload for e in witness.encoded]


def test_hostile_names_and_facets_arrive_exactly_in_every_store(rig: CollectorRig) -> None:
    ns = f"hq{uid()}"
    events = hostile_events()
    with running(rig.config, rig.manager()) as collector:
        rig.publish([encode_event(e) for e in events])
        sdk_payloads = decorated_events(rig, ns)
        stores = rig.readers()
        rig.wait_stored(stores["sql"], len(events) + len(sdk_payloads))
        wait_settled(rig, collector)
    assert parked(collector) == 0
    assert set(queue_depths(rig).values()) == {0}

    sdk_events = [orjson.loads(p) for p in sdk_payloads]
    expected = sorted(canonical(e) for e in events)
    for name, store in stores.items():
        for event in events:
            got = store.events_of_run(event["run"]["runId"])
            assert [canonical(e) for e in got] == [canonical(event)], name
        for payload, event in zip(sdk_payloads, sdk_events, strict=True):
            got = [canonical(e) for e in store.events_of_run(event["run"]["runId"])]
            assert payload in got, name
        for event in events:
            text = event["job"]["name"]
            (summary,) = store.runs_of_job(text, text)
            assert summary.run_id == event["run"]["runId"], (name, text[:40])
            up = store.lineage(node_id("DATASET", "out", text), direction="upstream", depth=1)
            found = {(n.type, n.namespace, n.name) for n in up.nodes.values()}
            assert found == {
                ("DATASET", "out", text),
                ("JOB", text, text),
                ("DATASET", text, text),
            }, (name, text[:40])
        sdk_job = sdk_events[0]["job"]
        (summary,) = store.runs_of_job(sdk_job["namespace"], sdk_job["name"])
        assert summary.state == "COMPLETE", name
        up = store.lineage(
            node_id("DATASET", "out", "MATCH (n) DETACH DELETE n"), direction="upstream", depth=2
        )
        assert {(n.namespace, n.name) for n in up.nodes.values()} == {
            ("out", "MATCH (n) DETACH DELETE n"),
            (sdk_job["namespace"], sdk_job["name"]),
            ("$db", 'sch"ema.`ta.ble`'),
        }, name

    # Every store: each event stored once, its stored JSON exactly the event sent.
    for name, store in stores.items():
        ids = stored_ids(store)
        assert set(ids.values()) == {1} and len(ids) == len(events) + len(sdk_payloads), name
        got = sorted(canonical(orjson.loads(text)) for text in stored_json(store).values())
        assert got == sorted([*expected, *sdk_payloads]), name
    # Document store: no stored key, in any of its collections, can act as an operator or path.
    document = stores["document"].backend
    assert isinstance(document, DocumentBackend)
    assert document._coll("events").count_documents({}) == len(events) + len(sdk_payloads)
    for kind in DOCUMENT_COLLECTIONS:
        for doc in document._coll(kind).find({}):
            _assert_inert_keys(doc)
    # Graph: names as properties, exactly; nothing was executed from the data.
    runner = graph_runner(stores["graph"])
    job_names = {r["n"] for r in runner.run("MATCH (j:Job) RETURN j.name AS n")}
    assert job_names == {*HOSTILE_STRINGS, *(e["job"]["name"] for e in sdk_events)}
    for text in HOSTILE_STRINGS:
        (row,) = runner.run(
            "MATCH (d:Dataset {namespace: $ns, name: $n}) RETURN d.name AS n",
            {"ns": "out", "n": text},
        )
        assert row["n"] == text
    assert runner.run("MATCH (n:Pwned) RETURN count(n) AS c")[0]["c"] == 0
    # Sql store: the catalog lists the hostile names exactly.
    sql = stores["sql"]
    assert {nm for _, nm in sql.datasets("out", limit=1000)} == {
        *HOSTILE_STRINGS,
        "MATCH (n) DETACH DELETE n",
        LONG,
    }


def _assert_inert_keys(value: Any) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            assert not key.startswith("$") and "." not in key, key
            _assert_inert_keys(item)
    elif isinstance(value, list):
        for item in value:
            _assert_inert_keys(item)
