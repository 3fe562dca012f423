"""A dataset's reads from its statements answer what folding its events answers (issue 31), on
random corpora, on every backend: the object, every version, and both as of earlier times.

The statements (:mod:`lineage_sdk.collector.engine.statements`) are small rows a dataset's reads
fold instead of every event of every run that named it; this holds them to the fold they
replace (``marquez_events.dataset_from_events``/``dataset_versions`` over the events the reads
used to read), through everything the fold's order depends on: versions by ``version`` facet
and by schema (a schema with an integer beyond 64 bits, which the fingerprint cannot hash),
unkeyed events joining the current version, reads before the first write, DatasetEvents,
JobEvents (which the reads never fold), a dataset read and written by one event, symlinked
names, equal times, and deletions.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from nosql_events import BASE_TIME, PRODUCER, SPEC, STORE_KINDS, StoreFactory
from nosql_events import run_event as make_run_event

from lineage_sdk.collector.api import marquez_events, queries
from lineage_sdk.collector.api.history import events_up_to
from lineage_sdk.collector.decode import validate_event
from lineage_sdk.collector.engine import Engine
from lineage_sdk.collector.engine.derive import derive
from lineage_sdk.collector.engine.statements import FINGERPRINT, event_key
from lineage_sdk.collector.store import LineageRecord
from lineage_sdk.collector.symlinks import other_names

pytestmark = [pytest.mark.postgres, pytest.mark.mongodb, pytest.mark.neo4j]

DATASETS = [("ns1", f"d{i}") for i in range(4)] + [("ns2", "d4")]
JOBS = [("ns1", "j0"), ("ns1", "j1"), ("ns2", "j2")]
SHAPES = [["COMPLETE"], ["START", "COMPLETE"], ["START", "RUNNING", "FAIL"], ["RUNNING"]]


def _facet(schema: str, **fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": SPEC + schema, **fields}


def _schema(variant: int) -> dict[str, Any]:
    fields: list[dict[str, Any]] = [{"name": "id", "type": "BIGINT"}]
    if variant == 1:
        fields.append({"name": "amount", "type": "DECIMAL", "description": "in cents"})
    if variant == 2:  # beyond 64 bits: orjson cannot write it, so no fingerprint
        fields.append({"name": "big", "type": "INT", "precision": 2**70 + 1})
    return _facet("SchemaDatasetFacet", fields=fields)


def _facets(rng: random.Random) -> dict[str, Any]:
    """A few of the facets the fold reads, or none (an unkeyed entry)."""
    found: dict[str, Any] = {}
    if rng.random() < 0.55:
        found["schema"] = _schema(rng.randrange(3))
    if rng.random() < 0.15:
        found["version"] = _facet("DatasetVersionDatasetFacet", datasetVersion=rng.choice("ab"))
    if rng.random() < 0.3:
        found["documentation"] = _facet("DocumentationDatasetFacet", description=rng.choice("xyz"))
    if rng.random() < 0.3:
        found["dataSource"] = _facet("DatasourceDatasetFacet", name=rng.choice(["pg", "s3"]))
    if rng.random() < 0.1:
        found["lifecycleStateChange"] = _facet(
            "LifecycleStateChangeDatasetFacet", lifecycleStateChange=rng.choice(["CREATE", "DROP"])
        )
    if rng.random() < 0.1:
        table = {"namespace": "hive", "name": "warehouse.d0", "type": "TABLE"}
        found["symlinks"] = _facet("SymlinksDatasetFacet", identifiers=[table])
    return found


def _job_facets(rng: random.Random) -> dict[str, Any]:
    """A few of the job facets a job's reads fold: its type, location (now and then without
    a url) and description."""
    found: dict[str, Any] = {}
    if rng.random() < 0.3:
        found["jobType"] = _facet(
            "JobTypeJobFacet",
            processingType=rng.choice(["BATCH", "STREAMING"]),
            integration="SPARK",
            jobType="JOB",
        )
    if rng.random() < 0.25:
        url = rng.choice(["https://git/a", "https://git/b", None])
        location = {"type": "git"} if url is None else {"type": "git", "url": url}
        found["sourceCodeLocation"] = _facet("SourceCodeLocationJobFacet", **location)
    if rng.random() < 0.2:
        found["documentation"] = _facet("DocumentationJobFacet", description=rng.choice("pq"))
    return found


def _when(seconds: int) -> str:
    return (BASE_TIME + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _entries(rng: random.Random, names: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"namespace": ns, "name": n, "facets": _facets(rng)} for ns, n in names]


def corpus(seed: int, runs: int = 30) -> list[LineageRecord]:
    """Runs of one to three events on whole seconds (equal times happen), some reading and
    writing one dataset in one event, with JobEvents and DatasetEvents among them."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    run_ids: list[str] = []
    for _ in range(runs):
        run_id = str(uuid.UUID(int=rng.getrandbits(122), version=4))
        if run_ids and rng.random() < 0.1:  # a run id another job used too
            run_id = rng.choice(run_ids)
        run_ids.append(run_id)
        ns, job = rng.choice(JOBS)
        parent = None
        if rng.random() < 0.25:
            parent = (rng.choice(run_ids), *rng.choice([("ns1", "dag"), ("ns2", "app")]))
        start = rng.randrange(0, 80)
        for k, event_type in enumerate(rng.choice(SHAPES)):
            event = make_run_event(
                job=job,
                namespace=ns,
                event_type=event_type,
                run_id=run_id,
                seconds=start + k,
                parent=parent if rng.random() < 0.7 else None,
                job_facets=_job_facets(rng),
            )
            event["inputs"] = _entries(rng, rng.sample(DATASETS, rng.randrange(0, 3)))
            event["outputs"] = _entries(rng, rng.sample(DATASETS, rng.randrange(0, 2)))
            if rng.random() < 0.1 and event["inputs"]:  # one dataset read and written
                event["outputs"] += _entries(rng, [(event["inputs"][0]["namespace"], "d1")])
            events.append(event)
    for _ in range(runs // 4):
        events.append(
            {
                "eventTime": _when(rng.randrange(0, 80)),
                "producer": PRODUCER,
                "schemaURL": SPEC + "DatasetEvent",
                "dataset": _entries(rng, [rng.choice(DATASETS)])[0],
            }
        )
        ns, job = rng.choice(JOBS)
        when = _when(rng.randrange(0, 80))
        if rng.random() < 0.5:  # at a run event's time, of its job: the order at one time
            twin = rng.choice(events)
            ns, job, when = twin["job"]["namespace"], twin["job"]["name"], twin["eventTime"]
        events.append(
            {
                "eventTime": when,
                "producer": PRODUCER,
                "schemaURL": SPEC + "JobEvent",
                "job": {"namespace": ns, "name": job, "facets": _job_facets(rng)},
                "inputs": [],
                "outputs": _entries(rng, [rng.choice(DATASETS)]),
            }
        )
    return list({r.event_id: r for r in map(validate_event, events)}.values())


def folded(store: Engine, namespace: str, name: str, as_of: datetime | None) -> Any:
    """The object and versions as the fold of the dataset's events answers them."""
    events = queries.dataset_events(store, namespace, name)
    if as_of is not None:
        events = events_up_to(events, as_of)
    if not events:
        return None
    found = marquez_events.dataset_from_events(namespace, name, events)
    aliases = other_names(events, (namespace, name))
    if aliases:
        found["otherNames"] = [{"namespace": ns, "name": nm} for ns, nm in aliases]
    return found, marquez_events.dataset_versions(namespace, name, events)


def stated(store: Engine, namespace: str, name: str, as_of: datetime | None) -> Any:
    """The object and versions as the statements answer them: every version, and each alone."""
    found = queries.stated_dataset(store, namespace, name, as_of)
    if found is None:
        return None
    every = marquez_events.stated_versions(found.statements, found.keys)
    versions = queries.dataset_versions(store, found, every)
    again = queries.stated_dataset(store, namespace, name, as_of)
    assert again is not None
    alone = [queries.dataset_versions(store, again, [v])[0] for v in reversed(every)]
    assert alone[::-1] == versions  # a version made alone is the one made among all of them
    return queries.dataset_object(store, found), versions


def folded_job(store: Engine, namespace: str, name: str, as_of: datetime | None) -> Any:
    """A job's details (today) and versions as folding its events answers them."""
    details = None
    if as_of is None:
        events = queries.job_events(store, namespace, name)
        details = marquez_events.job_details(namespace, name, events)
        runs = store.events_of_job(namespace, name)
    else:
        runs = queries.job_events_up_to(store, namespace, name, as_of, static=False)
    return details, marquez_events.job_versions(namespace, name, runs)


def stated_job(store: Engine, namespace: str, name: str, as_of: datetime | None) -> Any:
    """The same from the job's statements: every version, and each alone."""
    details = None if as_of is not None else queries.job_details(store, namespace, name)
    found = queries.stated_versions(store, "JOB", namespace, name, as_of)
    if found is None:
        return details, []
    every = list(range(len(found.ids)))
    versions = found.render(every)
    assert [found.render([i])[0] for i in every] == versions
    assert [v["version"] for v in versions] == found.ids
    return details, versions


def _instants(records: list[LineageRecord]) -> list[datetime | None]:
    times = sorted({r.event_time for r in records})
    return [None, times[len(times) // 3], times[2 * len(times) // 3], times[0]]


def rounds(make_store: StoreFactory, kind: str) -> Iterator[tuple[Any, Engine, list[Any]]]:
    """Each seed's corpus in a store of ``kind``, then again after deleting a fifth of its
    events: (what an assertion names, the store, the events it holds)."""
    for seed in range(6) if kind in ("memory", "sqlite") else range(2):
        records = corpus(seed)
        store = make_store(kind)
        store.write_batch(records)
        rng = random.Random(seed)
        for round_ in range(2):
            yield (seed, round_), store, records
            doomed = set(rng.sample([r.event_id for r in records], len(records) // 5))
            assert store.delete_events(list(doomed)) == len(doomed)
            records = [r for r in records if r.event_id not in doomed]


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_datasets_reads_from_its_statements_are_its_events_fold(
    make_store: StoreFactory, kind: str
) -> None:
    compared = keyed = 0
    for which, store, records in rounds(make_store, kind):
        for ns, name in DATASETS:
            for as_of in _instants(records):
                want = folded(store, ns, name, as_of)
                found = stated(store, ns, name, as_of)
                if found is None:  # the reads fold then: fine while no event names it
                    assert want is None or ("createdAt" not in want[0] and not want[1])
                    continue
                assert found == want, (which, name, as_of)
                compared += 1
                keyed += any(v["fields"] for v in want[1])
    assert compared > 40 and keyed > 20  # the corpora held answers


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_jobs_reads_from_its_statements_are_its_events_fold(
    make_store: StoreFactory, kind: str
) -> None:
    versions = located = 0
    for which, store, records in rounds(make_store, kind):
        for ns, name in [*JOBS, ("ns9", "never")]:
            for as_of in _instants(records):
                want = folded_job(store, ns, name, as_of)
                assert stated_job(store, ns, name, as_of) == want, (which, name, as_of)
                versions += len(want[1])
                located += any("location" in v for v in want[1])
    assert versions > 60 and located > 4  # the corpora held answers


def test_a_statement_holds_what_its_event_states_of_each_dataset(
    make_store: StoreFactory,
) -> None:
    """One event's statements, decoded: flags, run, key (a fingerprint, then the key exact),
    facet names and other names; none for a JobEvent, one per dataset however often named."""
    event = make_run_event(event_type="COMPLETE", run_id=str(uuid.uuid4()))
    symlink = {"namespace": "hive", "name": "w.t", "type": "TABLE"}
    doc = _facet("DocumentationDatasetFacet", description="x")
    links = _facet("SymlinksDatasetFacet", identifiers=[symlink])
    event["inputs"] = [{"namespace": "ns1", "name": "d0", "facets": {"documentation": doc}}]
    event["outputs"] = [
        {"namespace": "ns1", "name": "d0", "facets": {"schema": _schema(1)}},
        {"namespace": "ns1", "name": "t", "facets": {"symlinks": links}},
    ]
    job_event = {
        "eventTime": _when(5),
        "producer": PRODUCER,
        "schemaURL": SPEC + "JobEvent",
        "job": {"namespace": "ns1", "name": "j", "facets": {}},
        "outputs": [{"namespace": "ns1", "name": "d0", "facets": {"schema": _schema(0)}}],
    }
    store = make_store("memory")
    store.write_batch([validate_event(event), validate_event(job_event)])
    found, keys, read = store.dataset_statements("ns1", "d0")
    [only] = found
    assert (only.run_id, only.writes, only.completes) == (event["run"]["runId"], True, True)
    assert only.key is not None and only.key.startswith(FINGERPRINT)
    assert keys == {only.key: event_key(event, "ns1", "d0")}  # found by reading its event
    assert list(read) == [only.event_id]
    assert sorted(only.facets) == ["documentation", "schema"] and only.aliases == []
    [table] = store.dataset_statements("hive", "w.t")[0]
    assert table.aliases == [["ns1", "t"]] and table.key is None and table.facets == ["symlinks"]


def test_a_runs_start_and_end_state_in_its_mentions_its_heartbeats_each_in_its_own() -> None:
    """START and COMPLETE (or FAIL, ABORT) put their statements of a dataset in the run's
    mention of it and of the job in one ``stated`` mention of (run, job), one entry an event; a
    RUNNING event's are mentions of its own, so a long run's heartbeats never grow one row; a
    redelivery adds nothing."""
    run = str(uuid.uuid4())
    events = [
        make_run_event(event_type=kind, run_id=run, seconds=i, inputs=[("ns1", "d0")])
        for i, kind in enumerate(["START", "RUNNING", "RUNNING", "COMPLETE"])
    ]
    recs = [validate_event(e) for e in events]
    rows = derive([*recs, recs[0]])
    stated = sorted(
        (m.source, m.source_id, m.kind, m.key, m.role, len(m.detail or ()), m.first_seen)
        for m in rows.mentions
        if m.detail
    )
    ids, at = [r.event_id for r in recs], [r.event_time for r in recs]
    job = (events[0]["job"]["namespace"], events[0]["job"]["name"])
    assert stated == sorted(
        [
            ("run", run, "DATASET", ("ns1", "d0"), "input", 2, at[0]),
            ("run", run, "JOB", job, "stated", 2, at[0]),
            *(("event", ids[i], "DATASET", ("ns1", "d0"), "stated", 1, at[i]) for i in (1, 2)),
            *(("event", ids[i], "JOB", job, "stated", 1, at[i]) for i in (1, 2)),
        ]
    )
