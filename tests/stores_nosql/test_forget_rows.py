"""After any deletion, every derived row a backend holds is what ``derive`` makes of the events
that remain (issue 31): the property behind retention and hard deletion, asked of the rows
themselves on random corpora and random deletions, on every backend.

``forget`` keeps a stored row whose least and greatest values remaining events still hold,
finds new first times in the events ahead, and derives a key again from its events otherwise
(:mod:`lineage_sdk.collector.engine.forget`); the corpora make every path run: retention-shaped
deletions (the oldest first), scattered ones, a run deleted in part, runs shared by two jobs,
parents, JobEvents, DatasetEvents, column lineage, data sources, symlinks (aliases, one
location now and then of two tables) and equal times.
"""

from __future__ import annotations

import random
import uuid
from datetime import timedelta
from typing import Any

import pytest
from nosql_events import BASE_TIME, PRODUCER, SPEC, STORE_KINDS, StoreFactory, column_lineage
from nosql_events import run_event as make_run_event

import lineage_sdk.collector.engine.forget as forget
from lineage_sdk.collector.backend import LineageBackend, Rows
from lineage_sdk.collector.decode import validate_event
from lineage_sdk.collector.engine import derive
from lineage_sdk.collector.store import LineageRecord

pytestmark = [pytest.mark.postgres, pytest.mark.mongodb, pytest.mark.neo4j]

JOBS = [("ns1", f"j{i}") for i in range(5)] + [("ns2", "j5")]
DATASETS = [("ns1", f"d{i}") for i in range(6)] + [("ns2", "d6"), ("ns2", "d7")]
SYMLINKS = "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json"
SHAPES = [["COMPLETE"], ["START", "COMPLETE"], ["START", "RUNNING", "FAIL"]]


def _when(seconds: float) -> str:
    return (BASE_TIME + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _facets(rng: random.Random) -> dict[str, Any]:
    """Dataset facets: now and then column lineage, a data source, or a symlink to a table."""
    pick = rng.random()
    if pick < 0.2:
        ns, name = rng.choice(DATASETS)
        return {"columnLineage": column_lineage({rng.choice("xyz"): [(ns, name, "a")]})}
    if pick < 0.35:
        source = rng.choice(["pg", "s3"])
        return {
            "dataSource": {
                "_producer": PRODUCER,
                "_schemaURL": SPEC + "DatasourceDatasetFacet",
                "name": source,
                "uri": f"{source}://host",
            }
        }
    if pick < 0.45:
        ns, name = rng.choice(DATASETS)
        table = {"namespace": "hive", "name": f"{ns}.{name}", "type": "TABLE"}
        return {"symlinks": {"_producer": PRODUCER, "_schemaURL": SYMLINKS, "identifiers": [table]}}
    return {}


def corpus(seed: int, runs: int = 24) -> list[LineageRecord]:
    """Runs of one to three events (some run ids shared by two jobs, some with a parent),
    JobEvents and DatasetEvents, on whole seconds (equal times happen)."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    run_ids: list[str] = []
    for _ in range(runs):
        run_id = str(uuid.UUID(int=rng.getrandbits(122), version=4))
        jobs = rng.sample(JOBS, 2) if rng.random() < 0.15 else [rng.choice(JOBS)]
        parent = None
        if run_ids and rng.random() < 0.3:
            pns, pname = rng.choice(JOBS)
            parent = (rng.choice(run_ids), pns, pname)
        start = rng.randrange(0, 60)
        for k, event_type in enumerate(rng.choice(SHAPES)):
            ns, name = rng.choice(jobs)
            events.append(
                make_run_event(
                    job=name,
                    namespace=ns,
                    event_type=event_type,
                    run_id=run_id,
                    inputs=rng.sample(DATASETS, rng.randrange(0, 3)),
                    outputs=rng.sample(DATASETS, rng.randrange(0, 3)),
                    parent=parent,
                    seconds=start + k * rng.randrange(0, 3),
                    dataset_facets=_facets(rng),
                )
            )
        run_ids.append(run_id)
    for _ in range(runs // 6):
        ns, name = rng.choice(JOBS)
        events.append(
            {
                "eventTime": _when(rng.randrange(0, 60)),
                "producer": PRODUCER,
                "schemaURL": SPEC + "JobEvent",
                "job": {"namespace": ns, "name": name, "facets": {}},
                "inputs": [
                    {"namespace": d[0], "name": d[1], "facets": {}} for d in rng.sample(DATASETS, 1)
                ],
                "outputs": [
                    {"namespace": d[0], "name": d[1], "facets": _facets(rng)}
                    for d in rng.sample(DATASETS, 1)
                ],
            }
        )
        ns, name = rng.choice(DATASETS)
        events.append(
            {
                "eventTime": _when(rng.randrange(0, 60)),
                "producer": PRODUCER,
                "schemaURL": SPEC + "DatasetEvent",
                "dataset": {"namespace": ns, "name": name, "facets": _facets(rng)},
            }
        )
    return list({r.event_id: r for r in map(validate_event, events)}.values())


def rows_of(backend: LineageBackend, reference: Rows) -> dict[str, set[Any]]:
    """Every derived row the backend holds of the keys ``reference`` (the whole corpus's rows)
    names, by type."""
    jobs = {e.job for e in reference.edges} | {n.key for n in reference.nodes if n.kind == "JOB"}
    mentioned: dict[Any, set[Any]] = {}
    for m in reference.mentions:
        mentioned.setdefault(m.kind, set()).add(m.key)
    return {
        "edges": {e for io in ("in", "out") for e in backend.edges("JOB", jobs, io)},
        "runs": set(backend.runs()),
        "columns": set(backend.column_edges()),
        "nodes": {n for kind in {n.kind for n in reference.nodes} for n in backend.nodes(kind)},
        "mentions": {m for kind, keys in mentioned.items() for m in backend.mentions(kind, keys)},
    }


def derived(rows: Rows) -> dict[str, set[Any]]:
    return {t: set(getattr(rows, t)) for t in ("edges", "runs", "columns", "nodes", "mentions")}


def _deletions(rng: random.Random, kept: list[LineageRecord]) -> list[list[str]]:
    """Rounds of deletions: the oldest first in batches (retention), then scattered ones."""
    by_time = sorted(kept, key=lambda r: (r.event_time, r.event_id))
    oldest = [r.event_id for r in by_time[: len(by_time) // 4]]
    rounds = [oldest[i : i + 3] for i in range(0, len(oldest), 3)]
    rest = [r.event_id for r in by_time[len(by_time) // 4 :]]
    rng.shuffle(rest)
    rounds += [rest[i : i + rng.randrange(1, 6)] for i in range(0, len(rest) // 2, 5)]
    return rounds


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_rows_after_random_deletions_are_what_the_rest_derive(
    make_store: StoreFactory, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeds = range(4) if kind in ("memory", "sqlite") else range(3)
    for seed in seeds:
        # Seed 2 keeps ``_AHEAD_LEAST``, so deletions this small are not read ahead; the
        # others read ahead, odd seeds giving up after twice as many events as were deleted
        # (keys derived again from all their events when the events ahead run out).
        monkeypatch.setattr(forget, "_AHEAD_LEAST", 100 if seed == 2 else 1)
        monkeypatch.setattr(forget, "_AHEAD", 2 if seed % 2 else 6)
        records = corpus(seed)
        whole = derive(records)
        store = make_store(kind)
        store.write_batch(records)
        assert rows_of(store.backend, whole) == derived(whole)
        kept = {r.event_id: r for r in records}
        for ids in _deletions(random.Random(seed), list(kept.values())):
            assert store.delete_events(ids) == len(ids)
            for event_id in ids:
                del kept[event_id]
            assert rows_of(store.backend, whole) == derived(derive(kept.values())), (seed, ids)
