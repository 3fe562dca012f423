"""The lineage answer's node facts, read the cheap way, are what the plain reads give: the
declared edges come with the jobs' sides (``NodeFacts.declared`` is ``Engine.declared``), and
inside ``shared_edges`` the facts take a walked key's edges from the walk. Each answer is set
against the one built as before: ``declared`` read apart, the facts read with no walk to share.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from lineage_sdk.collector.api import queries
from lineage_sdk.collector.api.history import declared_edges
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.engine.reads import shared_edges
from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.stores.memory import MemoryBackend

PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/tests"
SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
JOBS, PG = "etl", "postgres://db:5432"
#: A chain src -> a -> mid -> b -> out -> c -> end, d writing mid too; b's edges also declared.
CHAIN = {"a": (["src"], ["mid"]), "b": (["mid"], ["out"]), "c": (["out"], ["end"])}
CHAIN |= {"d": (["src"], ["mid"])}


def _ds(name: str) -> dict[str, Any]:
    facets = {"schema": {"_producer": PRODUCER, "_schemaURL": SCHEMA, "fields": [{"name": "id"}]}}
    return {"namespace": PG, "name": name, "facets": facets}


def _events() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, (job, (reads, writes)) in enumerate(CHAIN.items()):
        run = {"runId": str(uuid.UUID(int=0x5100 + i, version=4)), "facets": {}}
        for kind, second in (("START", 0), ("COMPLETE", 5)):
            out.append(
                {
                    "eventType": kind,
                    "eventTime": f"2025-04-01T10:0{i}:{second:02d}Z",
                    "producer": PRODUCER,
                    "schemaURL": f"{SCHEMA}#/$defs/RunEvent",
                    "run": run,
                    "job": {"namespace": JOBS, "name": job, "facets": {}},
                    "inputs": [_ds(n) for n in reads],
                    "outputs": [_ds(n) for n in writes],
                }
            )
    out.append(
        {
            "eventTime": "2025-04-01T11:00:00Z",
            "producer": PRODUCER,
            "schemaURL": f"{SCHEMA}#/$defs/JobEvent",
            "job": {"namespace": JOBS, "name": "b", "facets": {}},
            "inputs": [_ds("mid")],
            "outputs": [_ds("out")],
        }
    )
    return out


@pytest.fixture(scope="module")
def store() -> EngineStore:
    engine = EngineStore(MemoryBackend())
    engine.open()
    engine.write_batch([build_record(e) for e in _events()])
    return engine


def _as_before(store: EngineStore, node: str, direction: Any, depth: int) -> dict[str, Any]:
    graph = store.lineage(node, direction=direction, depth=depth, node_limit=1000)
    jobs = [(n.namespace, n.name) for n in graph.nodes.values() if n.type == "JOB"]
    answer = queries._answer(graph, declared_edges(store, jobs), 1000)
    return queries.with_node_facts(store, answer)


@pytest.mark.parametrize("direction", ["upstream", "downstream", "both"])
@pytest.mark.parametrize("node", ["dataset:postgres://db:5432:mid", "job:etl:b"])
@pytest.mark.parametrize("depth", [0, 1, 5])
def test_the_answer_is_the_plain_reads_one(store, node, direction, depth):
    found = queries.lineage(store, node, direction=direction, depth=depth, node_limit=1000)
    assert found == _as_before(store, node, direction, depth)


def test_declared_edges_come_with_the_sides(store):
    jobs = [(JOBS, j) for j in CHAIN]
    facts = store.node_facts(jobs, [])
    assert facts.declared == store.declared(jobs)
    assert facts.declared  # b's JobEvent declares its edges


def test_a_walk_shares_its_edges_with_the_facts(store):
    jobs = [(JOBS, j) for j in CHAIN]
    datasets = [(PG, d) for d in ("src", "mid", "out", "end")]
    plain = store.node_facts(jobs, datasets)
    with shared_edges():  # a short walk: some keys come from it, the others are read
        store.lineage("job:etl:b", direction="upstream", depth=1)
        shared = store.node_facts(jobs, datasets)
    assert shared == plain
