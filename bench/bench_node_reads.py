"""What a dataset or job read costs for a node touched by many runs (issue 31; engine.md
section 5, step 0): the Marquez-shaped reads of one hot dataset and one hot job over loopback
HTTP, against the same reads of a cold node touched by 10 runs, in the same run.

    python bench/bench_node_reads.py [--stores sqlite,postgres,document,graph] [--runs 5000]
                                     [--queries 30] [--warmup 3] [--seconds 240] [--json PATH]

The store holds ``hot_job`` with ``--runs`` runs (a START and a COMPLETE each, so 10,000 events
at 5,000 runs), every run reading ``hot_input`` and writing ``hot_ds``, and ``cold_job`` with 10
runs reading ``cold_input`` and writing ``cold_ds``, spread over the same weeks. Events carry what
a real producer sends: a schema facet of 10 fields and a dataSource facet on every dataset, an
outputStatistics facet on each COMPLETE's output, three run facets (nominalTime,
processing_engine, a custom one) and two job facets. They go in through the collector's write
path (``LineageCollectorService.handle_lineage_events``: validation, then the store's
``write_batch``) in batches of 500.

The real API app then serves the store on loopback (uvicorn on a thread of this process, with
the garbage-collector tuning ``serve`` applies, as ``bench_million`` does) and each read is timed
end to end (HTTP + JSON) ``--queries`` times after ``--warmup`` untimed ones, hot and cold
alternating so both see the same machine:

* ``GET /api/v1/namespaces/{ns}/datasets/{name}`` and ``.../datasets/{name}/versions``, of the
  dataset the runs write (``hot_ds``) and of the one they read (``hot_input``);
* ``GET /api/v1/namespaces/{ns}/jobs/{name}``, ``.../jobs/{name}/versions`` and
  ``.../jobs/{name}/runs``.

Reported per read and store: p50, p95 and max in ms, hot and cold, and the ratio hot / cold of
the p50 and p95 (the project reports performance as same-run ratios); the issue's target is
absolute: p95 < 100 ms for the hot node. ``--seconds`` bounds the timed rounds of one store (at
least ``--min-queries`` are taken), so a slow read costs minutes, not an hour.

Stores, each the engine (``EngineStore``) over its backend as ``store.type`` opens it: ``sqlite``
(a file in a temporary folder), ``postgres`` (a database of the bench's own on
127.0.0.1:5432, created and dropped; ``VACUUM ANALYZE`` after the load, as a deployment's
autovacuum would do: the shared server runs without it), ``document`` (SecantusDB, started here)
and ``graph`` (FalkorDB, started here, through its native protocol).

Baseline before the engine (main at dc2eb4b; the sql store and the API as on main), 2 cores,
``--stores sqlite,postgres --runs 5000``, 30 timed reads each, p50 / p95 ms, hot (5,000 runs)
and cold (10 runs). Run 1 was quiet (load average about 1); run 2 shared the machine with a test
run (load average up to 5.7 during its sqlite part, so its sqlite figures are noisy):

    read              sqlite 1    sqlite 2    postgres 1  postgres 2  cold (sqlite)
    dataset            751/790    1139/1511    703/755     700/752     4.9/6.3
    dataset versions   741/775     981/1523    698/763     682/732     5.1/6.1
    input dataset        -        1081/1467      -         651/744     5.7/19.7 (run 2)
    input versions       -         884/1319      -         675/734     6.5/13.5 (run 2)
    job                357/384     431/870     389/431     386/440     6.6/8.2
    job versions       497/557     560/1287    537/586     515/1052    3.8/4.3
    job runs            12/13       13/47        8/11        7/11      3.0/3.5

Hot / cold (p50), quiet run: dataset 153x, its versions 145x, job 54x, job versions 131x, job
runs 4x on SQLite; 108x, 94x, 37x, 114x and 2x on PostgreSQL. Every hot read but ``runs``
(paged, 100) misses p95 < 100 ms by 4-15x; the issue's 1.9 s was not reproduced with these
events (0.7-0.8 s quiet, up to 1.5 s p95 under load). Each hot versions read answers 1 version
(the facets do not change between runs).

After the statements (issue 31, ``271c058``: each read folds a small row per event and reads only
the events carrying each facet's latest value; ``docs/design/engine.md`` section 13), the same
command with ``--stores sqlite,postgres,graph``, 30 timed reads, load average about 1.2; before:
``ca59499``, SQLite only, 15 reads, the same session:

    read              sqlite before  sqlite after  postgres after  graph (FalkorDB) after
    dataset            1270/1779       76/110        117/156          246/325
    dataset versions   1203/1790       72/104        138/157          258/346
    input dataset      1259/1547       74/112        135/157          248/328
    input versions     1261/1624       80/127        144/175          265/312
    job                 608/783        81/140        128/166          363/439
    job versions        774/1064       98/147        131/183          301/364
    job runs             20/30         19/28          15/19           115/148

p50/p95 ms: 7-17x faster, still over the 100 ms p95 target: a hot read folds 10,000 statements
(about 5 us each in Python and the driver on SQLite, more on PostgreSQL and FalkorDB).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import sqlalchemy as sa
from _bench_common import load_average, postgres_database
from servers import FalkorDBRespRunner, falkordb_server, secantus_server

from lineage_sdk.collector.api import ApiServer, create_app
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.startup import tune_gc
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.config.schema import LineageConfig

__all__ = ["READS", "STORES", "events", "main"]

PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/bench"
RUN_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
FACETS = "https://openlineage.io/spec/facets"
SCHEMA_FACET = f"{FACETS}/1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"
SOURCE_FACET = f"{FACETS}/1-0-1/DatasourceDatasetFacet.json#/$defs/DatasourceDatasetFacet"
STATS_FACET = (
    f"{FACETS}/1-0-2/OutputStatisticsOutputDatasetFacet.json"
    "#/$defs/OutputStatisticsOutputDatasetFacet"
)
NOMINAL_FACET = f"{FACETS}/1-0-1/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet"
ENGINE_FACET = f"{FACETS}/1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet"
JOB_TYPE_FACET = f"{FACETS}/2-0-3/JobTypeJobFacet.json#/$defs/JobTypeJobFacet"
DOC_FACET = f"{FACETS}/1-1-0/DocumentationJobFacet.json#/$defs/DocumentationJobFacet"
DS_NS = "postgres://warehouse.bench:5432"
JOB_NS = "bench.nodes"
FIELDS = (
    ("id", "BIGINT"),
    ("customer_id", "BIGINT"),
    ("order_id", "BIGINT"),
    ("amount", "DECIMAL(18,2)"),
    ("currency", "VARCHAR(3)"),
    ("status", "VARCHAR"),
    ("country", "VARCHAR(2)"),
    ("created_at", "TIMESTAMP"),
    ("updated_at", "TIMESTAMP"),
    ("batch_id", "VARCHAR"),
)
T0 = datetime(2025, 1, 1, tzinfo=UTC)
COLD_RUNS = 10
BATCH = 500
TARGET_P95_MS = 100.0
STORES = ("sqlite", "postgres", "document", "graph")
#: The reads, by label: a path under /api/v1/namespaces/ with ``{n}`` for hot or cold.
READS = {
    "dataset": f"{quote(DS_NS, safe='')}/datasets/{{n}}_ds",
    "dataset versions": f"{quote(DS_NS, safe='')}/datasets/{{n}}_ds/versions",
    "input dataset": f"{quote(DS_NS, safe='')}/datasets/{{n}}_input",
    "input versions": f"{quote(DS_NS, safe='')}/datasets/{{n}}_input/versions",
    "job": f"{JOB_NS}/jobs/{{n}}_job",
    "job versions": f"{JOB_NS}/jobs/{{n}}_job/versions",
    "job runs": f"{JOB_NS}/jobs/{{n}}_job/runs",
}


def _stamp(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def _facet(schema_url: str, **fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": schema_url, **fields}


def _dataset(name: str) -> dict[str, Any]:
    return {
        "namespace": DS_NS,
        "name": name,
        "facets": {
            "schema": _facet(
                SCHEMA_FACET,
                fields=[{"name": n, "type": t, "description": f"the {n}"} for n, t in FIELDS],
            ),
            "dataSource": _facet(SOURCE_FACET, name="warehouse", uri=DS_NS),
        },
    }


def _run_events(prefix: str, run: int, start: datetime) -> list[dict[str, Any]]:
    """The START and COMPLETE of run ``run`` of ``{prefix}_job``."""
    run_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{prefix}/{run}"))
    run_facets = {
        "nominalTime": _facet(NOMINAL_FACET, nominalStartTime=_stamp(start)),
        "processing_engine": _facet(
            ENGINE_FACET, version="3.5.1", name="spark", openlineageAdapterVersion="1.24.2"
        ),
        "bench_run": _facet(
            "https://github.com/lineage-sdk/lineage-sdk/bench_run.json",
            attempt=1,
            queue="nightly",
        ),
    }
    job = {
        "namespace": JOB_NS,
        "name": f"{prefix}_job",
        "facets": {
            "jobType": _facet(
                JOB_TYPE_FACET, processingType="BATCH", integration="SPARK", jobType="JOB"
            ),
            "documentation": _facet(DOC_FACET, description=f"{prefix} orders rollup"),
        },
    }
    out = []
    for event_type, at in (("START", start), ("COMPLETE", start + timedelta(seconds=300))):
        output = _dataset(f"{prefix}_ds")
        if event_type == "COMPLETE":
            output["outputFacets"] = {
                "outputStatistics": _facet(STATS_FACET, rowCount=1000 + run, size=64_000 + run)
            }
        out.append(
            {
                "eventType": event_type,
                "eventTime": _stamp(at),
                "run": {"runId": run_id, "facets": run_facets},
                "job": job,
                "inputs": [_dataset(f"{prefix}_input")],
                "outputs": [output],
                "producer": PRODUCER,
                "schemaURL": RUN_SCHEMA,
            }
        )
    return out


def events(runs: int) -> list[dict[str, Any]]:
    """``runs`` runs of ``hot_job`` an hour apart, and 10 of ``cold_job`` over the same span."""
    out: list[dict[str, Any]] = []
    for run in range(runs):
        out += _run_events("hot", run, T0 + timedelta(hours=run))
    step = max(runs // COLD_RUNS, 1)
    for run in range(COLD_RUNS):
        out += _run_events("cold", run, T0 + timedelta(hours=run * step, minutes=30))
    out.sort(key=lambda e: str(e["eventTime"]))
    return out


@contextlib.contextmanager
def opened_store(kind: str, folder: Path) -> Iterator[Any]:
    """An empty store of ``kind``, opened, on a server or file of the bench's own."""
    store: Any
    with contextlib.ExitStack() as stack:
        if kind == "sqlite":
            store = EngineStore(SqlBackend(f"sqlite:///{folder}/nodes.db"))
        elif kind == "postgres":
            url = stack.enter_context(postgres_database("lineage_bench_nodes"))
            store = EngineStore(SqlBackend(url))
        elif kind == "document":
            server = stack.enter_context(secantus_server())
            store = EngineStore(
                DocumentBackend(
                    ConnectionConfig(uri=server.uri, database="bench", timeout_ms=600_000),
                    collection_name="nodes",
                )
            )
        elif kind == "graph":
            falkor = stack.enter_context(falkordb_server(persistent=False))
            runner = FalkorDBRespRunner("127.0.0.1", falkor.redis_port, "nodes", timeout_s=600)
            store = EngineStore(GraphBackend(runner=runner))
        else:
            raise SystemExit(f"unknown store {kind!r}: one of {', '.join(STORES)}")
        store.open()
        try:
            yield store
        finally:
            store.close()


def load(manager: LineageManager, all_events: list[dict[str, Any]]) -> float:
    """Write the events through the collector's service, in batches; seconds taken."""
    service = LineageCollectorService(manager)
    started = time.perf_counter()

    async def write() -> None:
        for start in range(0, len(all_events), BATCH):
            await service.handle_lineage_events(all_events[start : start + BATCH], off_loop=False)

    asyncio.run(write())
    return time.perf_counter() - started


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 1),
        "max_ms": round(ordered[-1], 1),
    }


def measure(url: str, args: argparse.Namespace) -> dict[str, dict[str, dict[str, float]]]:
    """Each read of the hot and the cold node, alternated, timed end to end."""
    samples: dict[str, dict[str, list[float]]] = {r: {"hot": [], "cold": []} for r in READS}
    with httpx.Client(base_url=f"{url}/api/v1/namespaces/", timeout=600) as client:

        def get(path: str) -> float:
            started = time.perf_counter()
            response = client.get(path)
            took = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                raise SystemExit(f"GET {path}: {response.status_code} {response.text[:300]}")
            return took

        for _ in range(args.warmup):
            for path in READS.values():
                for node in ("hot", "cold"):
                    get(path.format(n=node))
        started = time.perf_counter()
        for round_ in range(args.queries):
            for read, path in READS.items():
                for node in ("hot", "cold") if round_ % 2 == 0 else ("cold", "hot"):
                    samples[read][node].append(get(path.format(n=node)))
            if round_ + 1 >= args.min_queries and time.perf_counter() - started > args.seconds:
                break
    return {
        read: {node: _percentiles(values) for node, values in by_node.items()}
        for read, by_node in samples.items()
    }


def sizes(url: str) -> dict[str, int]:
    """How many versions and runs the hot reads answer with (their first page)."""
    out: dict[str, int] = {}
    with httpx.Client(base_url=f"{url}/api/v1/namespaces/", timeout=600) as client:
        for read, key in (
            ("dataset versions", "versions"),
            ("input versions", "versions"),
            ("job versions", "versions"),
            ("job runs", "runs"),
        ):
            body = client.get(READS[read].format(n="hot")).json()
            out[read] = len(body.get(key, []))
    return out


def run_store(kind: str, all_events: list[dict[str, Any]], args: argparse.Namespace) -> Any:
    with (
        tempfile.TemporaryDirectory(prefix="bench-nodes-") as tmp,
        opened_store(kind, Path(tmp)) as store,
    ):
        manager = LineageManager(LineageConfig(), stores=[store])
        load_s = load(manager, all_events)
        print(
            f"\n{kind}: {len(all_events):,} events written in {load_s:.1f} s "
            f"({len(all_events) / load_s:,.0f}/s); load average {load_average()}",
            flush=True,
        )
        if kind == "postgres":
            engine = store.backend._db  # the sql backend's own SQLAlchemy engine
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(sa.text("VACUUM ANALYZE"))
        tune_gc()
        with ApiServer(create_app(manager, max_body_bytes=64 << 20)) as server:
            answered = sizes(server.url)
            figures = measure(server.url, args)
    report(kind, figures)
    print(f"  first page of the hot reads: {answered}; load average {load_average()}")
    return {"load_s": round(load_s, 1), "page_sizes": answered, "reads": figures}


def report(kind: str, figures: dict[str, dict[str, dict[str, float]]]) -> None:
    print(
        f"  {'read':17} {'hot p50':>9} {'p95':>8} {'max':>8}   {'cold p50':>8} {'p95':>6}"
        f"   {'hot/cold p50':>12} {'p95':>6}   n   p95 < {TARGET_P95_MS:.0f} ms"
    )
    for read, by_node in figures.items():
        hot, cold = by_node["hot"], by_node["cold"]
        met = "met" if hot["p95_ms"] < TARGET_P95_MS else "NOT met"
        print(
            f"  {read:17} {hot['p50_ms']:9.1f} {hot['p95_ms']:8.1f} {hot['max_ms']:8.1f}"
            f"   {cold['p50_ms']:8.1f} {cold['p95_ms']:6.1f}"
            f"   {hot['p50_ms'] / cold['p50_ms']:11.1f}x {hot['p95_ms'] / cold['p95_ms']:5.1f}x"
            f"  {hot['n']:3.0f}   {met}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="sqlite", help=f"of {','.join(STORES)}")
    parser.add_argument("--runs", type=int, default=5000, help="runs of the hot job")
    parser.add_argument("--queries", type=int, default=30, help="timed reads of each kind")
    parser.add_argument("--min-queries", type=int, default=10, help="even past --seconds")
    parser.add_argument("--warmup", type=int, default=3, help="untimed reads of each kind first")
    parser.add_argument("--seconds", type=float, default=240, help="timed rounds, per store")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    kinds = [k for k in args.stores.split(",") if k]
    all_events = events(args.runs)
    print(
        f"hot node: {args.runs:,} runs ({2 * args.runs:,} events); cold node: {COLD_RUNS} runs; "
        f"{args.queries} timed reads after {args.warmup} warm-ups; cpus {os.cpu_count()}"
    )
    results: dict[str, Any] = {"runs": args.runs, "cold_runs": COLD_RUNS}
    for kind in kinds:
        results[kind] = run_store(kind, all_events, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
