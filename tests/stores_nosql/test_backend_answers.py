"""The engine over each backend answers every read as over the memory backend (issue 31).

The memory backend is the reference every backend is held to: the sql backend (SQLite and
PostgreSQL), the document backend and the graph backend, fed the same events written in order,
shuffled in small batches, or twice over in reverse, must give the same answer to each of the
store reads the API asks as the memory backend fed them in order (the memory backend itself,
fed them shuffled or twice, too). The corpus mixes what the
reads fold: runs spanning the ``asOf`` times, parents and children, a heartbeat, JobEvents and
DatasetEvents, column lineage stated twice, several namespaces, and equal event times.
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import orjson
import pytest
from nosql_events import BASE_TIME, STORE_KINDS, column_lineage, run_event
from test_retention import AS_OF, CORPUS, DAY, NODES

from lineage_sdk.collector.columns import ColumnGraph
from lineage_sdk.collector.records import build_record, compute_event_id
from lineage_sdk.collector.store import LineageGraph, LineageRecord

pytestmark = pytest.mark.mongodb  # make_store's fixtures start the session's servers


def _more() -> list[dict[str, Any]]:
    """What the retention corpus lacks: equal event times, a heartbeat, a failed run, a grand
    child, two statements of one column edge by two jobs, and a job's many runs."""
    beat = {"lineagesdk_heartbeat": {"_producer": "p", "_schemaURL": "s", "intervalS": 30}}
    cols = {"columnLineage": column_lineage({"t": [("ns3", "src", "v")]})}
    tie = [
        run_event(
            job=f"tie{i}",
            namespace="ns3",
            run_id=f"0190aaaa-0000-7000-8000-00000000000{i}",
            inputs=[("ns3", "src")],
            outputs=[("ns3", "dst")],
            seconds=7 * DAY,
            dataset_facets=cols,
        )
        for i in (2, 1)
    ]
    many = [
        run_event(
            job="busy",
            namespace="ns3",
            run_id=f"0190bbbb-0000-7000-8000-0000000000{i:02d}",
            event_type=kind,
            inputs=[("ns3", "dst")],
            outputs=[("ns3", f"out{i % 3}")],
            seconds=8 * DAY + i * 10 + (5 if kind != "START" else 0),
            run_facets=beat if kind == "RUNNING" else None,
        )
        for i in range(12)
        for kind in ("START", "RUNNING" if i == 11 else ("FAIL" if i % 5 == 0 else "COMPLETE"))
    ]
    child = run_event(
        job="grandchild",
        namespace="ns3",
        parent=("0190bbbb-0000-7000-8000-000000000003", "ns3", "busy"),
        inputs=[("ns3", "out0")],
        seconds=9 * DAY,
    )
    # two runs of one job whose last events share a time: the least run id is the latest
    twins = [
        run_event(
            job="twin",
            namespace="ns3",
            run_id=f"0190cccc-0000-7000-8000-00000000000{i}",
            event_type=kind,
            outputs=[("ns3", "dst")],
            seconds=6 * DAY + (0 if kind == "START" else 9),
        )
        for i in (2, 1)
        for kind in ("START", "COMPLETE")
    ]
    return [*tie, *many, child, *twins, *_declaring()]


def _declaring() -> list[dict[str, Any]]:
    """Two jobs' ``lineage`` facets (issue 32): dataset -> dataset with a field, another job
    reading a dataset (stated by both, so deleting one's events keeps it), another job writing."""

    def ds(name: str, field: str | None = None) -> dict[str, Any]:
        found = {"namespace": "ns3", "name": name, "type": "DATASET"}
        return found if field is None else {**found, "field": field}

    reads_dst = {"namespace": "ns3", "name": "other", "type": "JOB", "inputs": [ds("dst")]}
    entries = [
        {
            "namespace": "ns3",
            "name": "lin_t",
            "type": "DATASET",
            "inputs": [ds("src")],
            "fields": {"f": {"inputs": [ds("src", "v")]}},
        },
        reads_dst,
        {
            "namespace": "ns3",
            "name": "lin_k",
            "type": "DATASET",
            "inputs": [{"namespace": "ns3", "name": "other", "type": "JOB"}],
        },
    ]
    facet = {"lineage": {"_producer": "p", "_schemaURL": "s", "entries": entries}}
    again = {"lineage": {"_producer": "p", "_schemaURL": "s", "entries": [reads_dst]}}
    return [
        run_event(
            job=job,
            namespace="ns3",
            run_id=f"0190dddd-0000-7000-8000-00000000000{i}",
            event_type=kind,
            inputs=[("ns3", "src")],
            seconds=5 * DAY + i * 60 + (9 if kind == "COMPLETE" else 0),
            job_facets=facet if i == 1 else again,
        )
        for i, job in ((1, "declarer"), (2, "declarer2"))
        for kind in ("START", "COMPLETE")
    ]


EVENTS = [*CORPUS, *_more()]
RECORDS = [build_record(e) for e in EVENTS]
ALL_NODES = sorted(
    {*NODES}
    | {f"job:{r.job_namespace}:{r.job_name}" for r in RECORDS if r.job_name}
    | {f"dataset:{d.namespace}:{d.name}" for r in RECORDS for d in (*r.inputs, *r.outputs)}
    | {"job:ns3:other", "dataset:ns3:lin_t", "dataset:ns3:lin_k"}  # named by lineage facets
)
JOBS = sorted({(r.job_namespace or "", r.job_name or "") for r in RECORDS if r.job_name})
DATASETS = sorted({(d.namespace, d.name) for r in RECORDS for d in (*r.inputs, *r.outputs)})
RUNS = sorted({r.run_id for r in RECORDS if r.run_id})
TIMES = [*AS_OF, BASE_TIME + timedelta(days=8, seconds=55), BASE_TIME + timedelta(days=7)]


def _graph(graph: LineageGraph) -> Any:
    return (
        graph.truncated,
        sorted(
            (
                n.id,
                n.type,
                sorted(n.data.items(), key=lambda kv: kv[0]).__repr__(),
                sorted((e.origin, e.destination) for e in n.in_edges),
                sorted((e.origin, e.destination) for e in n.out_edges),
            )
            for n in graph.nodes.values()
        ),
    )


def _columns(graph: ColumnGraph) -> Any:
    return (
        graph.truncated,
        graph.roots,
        sorted(f.id for f in graph.fields),
        sorted((o.id, i.id, info) for (o, i), info in graph.edges.items()),
    )


def _ids(events: list[dict[str, Any]]) -> list[str]:
    return [compute_event_id(e) for e in events]


def _try(call: Any) -> Any:
    try:
        return call()
    except (LookupError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"


def answers(store: Any) -> dict[str, Any]:
    """Every read the API layer asks of a store, over every node of the corpus."""
    out: dict[str, Any] = {}
    for node in ALL_NODES:
        for direction in ("upstream", "downstream", "both"):
            for depth, limit in ((0, None), (1, None), (10, None), (10, 3)):
                out[f"lineage {node} {direction} {depth} {limit}"] = _graph(
                    store.lineage(node, direction=direction, depth=depth, node_limit=limit)
                )
        for i, as_of in enumerate(TIMES):
            out[f"asof {i} {node}"] = _try(
                lambda node=node, as_of=as_of: _graph(
                    store.lineage_as_of(node, depth=10, as_of=as_of)
                )
            )
        if node.startswith("dataset:"):
            for down, limit in ((False, None), (True, None), (True, 2)):
                out[f"col {node} {down} {limit}"] = _columns(
                    store.column_lineage(node, depth=10, with_downstream=down, node_limit=limit)
                )
    for field in ("datasetField:ns1:b:c", "datasetField:ns1:a:x", "datasetField:ns1:a:nope"):
        out[f"col {field}"] = _columns(store.column_lineage(field, with_downstream=True))
    for job in ("job:ns1:load", "job:ns3:tie1", "job:ns1:orchestrator"):
        out[f"col {job}"] = _columns(store.column_lineage(job, with_downstream=True))
    for ns, name in JOBS:
        for limit, offset in ((100, 0), (2, 1), (5, 10)):
            page = store.runs_of_job(ns, name, limit=limit, offset=offset)
            out[f"runs {ns}:{name} {limit} {offset}"] = (page.total, list(page))
        out[f"job events {ns}:{name}"] = _ids(store.events_of_job(ns, name))
        for i, as_of in enumerate(TIMES):
            out[f"job up to {i} {ns}:{name}"] = [
                i for i, _ in store.job_events_up_to([(ns, name)], as_of)
            ]
        out[f"has job {ns}:{name}"] = store.has_node("JOB", ns, name)
    out["latest runs"] = sorted(store.latest_runs([*JOBS, ("ns9", "nothing")]).items())
    every_job = [*JOBS, ("ns3", "other")]
    for i, as_of in enumerate([None, *TIMES]):
        out[f"declared {i}"] = sorted(store.declared(every_job, as_of=as_of))
    for ns, name in DATASETS:
        out[f"dataset events {ns}:{name}"] = _ids(store.events_of_dataset(ns, name))
        out[f"has dataset {ns}:{name}"] = store.has_node("DATASET", ns, name)
    out["has nothing"] = store.has_node("DATASET", "ns1", "nothing")
    for run in RUNS:
        out[f"run {run}"] = _ids(store.events_of_run(run))
        out[f"children {run}"] = store.child_runs(run)
    for limit, offset in ((None, 0), (2, 1)):
        page = store.namespaces(limit=limit, offset=offset)
        out[f"namespaces {limit} {offset}"] = (page.total, list(page))
    out["dataset namespaces"] = store.dataset_namespaces()
    for ns in (None, "ns1", "ns3", "none"):
        for limit, offset in ((100, 0), (3, 2)):
            jobs = store.jobs(ns, limit=limit, offset=offset)
            out[f"jobs {ns} {limit} {offset}"] = (jobs.total, list(jobs))
            datasets = store.datasets(ns, limit=limit, offset=offset)
            out[f"datasets {ns} {limit} {offset}"] = (datasets.total, list(datasets))
    for text, limit in (("", 1000), ("OUT", 50), ("ti", 2), ("%", 10), ("zzz", 5)):
        out[f"search {text} {limit}"] = store.search(text, limit=limit)
    out["static"] = _ids(
        store.static_events(
            jobs=[*JOBS, ("ns1", "static")], datasets=[*DATASETS, ("ns1", "declared")]
        )
    )
    for before, after in ((None, None), (TIMES[1], TIMES[0]), (TIMES[4], None)):
        for ns in (None, "ns1", "ns3"):
            for ascending, limit, offset in ((False, 100, 0), (True, 5, 3)):
                page = store.lineage_events(
                    before=before,
                    after=after,
                    namespace=ns,
                    ascending=ascending,
                    limit=limit,
                    offset=offset,
                )
                out[f"log {before} {after} {ns} {ascending} {limit} {offset}"] = (
                    page.total,
                    _ids(list(page)),
                )
    for ns in (None, "ns1", "ns2"):
        for since, until in ((None, None), (TIMES[0], TIMES[2])):
            raw = list(store.iter_raw_events(namespace=ns, since=since, until=until, batch_size=4))
            out[f"raw {ns} {since} {until}"] = [(r.event_id, r.event_time) for r in raw]
            assert [orjson.loads(r.json) for r in raw] == [
                EVENTS[[compute_event_id(e) for e in EVENTS].index(r.event_id)] for r in raw
            ]
            counted = store.count_raw_events(namespace=ns, since=since, until=until)
            if ns is None:
                out[f"count {since} {until}"] = counted
        if len(raw) > 2:
            after = list(store.iter_raw_events(namespace=ns, after=raw[2].position))
            out[f"raw after {ns}"] = [r.event_id for r in after]
    ids = [compute_event_id(e) for e in EVENTS[::3]]
    out["stored"] = sorted(store.stored_event_ids([*ids, "0" * 32]))
    return out


def _written(store: Any, how: str) -> Any:
    records: list[LineageRecord] = list(RECORDS)
    if how == "in order":
        store.write_batch(records)
    elif how == "shuffled":
        random.Random(31).shuffle(records)
        for i in range(0, len(records), 7):
            store.write_batch(records[i : i + 7])
    else:  # twice, the second time backwards
        store.write_batch(records)
        for record in reversed(records):
            store.write_batch([record])
    return store


#: Every backend, the reference among them (its answers fed shuffled or twice are held to its
#: answers fed in order).
KINDS = STORE_KINDS


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("how", ["in order", "shuffled", "twice"])
def test_backend_answers_as_the_memory_backend(make_store: Any, kind: str, how: str) -> None:
    reference = answers(_written(make_store("memory"), "in order"))
    got = answers(_written(make_store(kind), how))
    assert got.keys() == reference.keys()
    differ = [key for key in reference if got[key] != reference[key]]
    assert not differ, "\n".join(
        f"{k}:\n  {kind} {got[k]}\n  memory {reference[k]}" for k in differ[:5]
    )


@pytest.mark.parametrize("kind", KINDS)
def test_backend_forgets_as_the_memory_backend(make_store: Any, kind: str) -> None:
    """After deleting every third event, each store answers as one fed the others only."""
    gone = [compute_event_id(e) for e in EVENTS[::3]]
    kept = [r for r in RECORDS if r.event_id not in set(gone)]
    after: dict[str, Any] = {}
    for each in dict.fromkeys(("memory", kind)):
        store = _written(make_store(each), "shuffled")
        assert store.delete_events(gone) == len(gone)
        assert store.delete_events(gone) == 0
        after[each] = answers(store)
        fresh = make_store(each)
        fresh.write_batch(kept)
        assert answers(fresh) == after[each], each
    differ = [k for k in after["memory"] if after[kind][k] != after["memory"][k]]
    assert not differ, differ[:5]
