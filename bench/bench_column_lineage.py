"""Column lineage to depth 5 over HTTP, from a 100,000-event store (issue 14 target: p95 < 100 ms).

    python bench/bench_column_lineage.py [--events 100000] [--queries 200]
                                         [--stores sqlite,postgresql,graph] [--json PATH]

For each store (the sql store on SQLite and on the PostgreSQL at 127.0.0.1:5432, in a database of
its own that is dropped afterwards; the graph store on FalkorDB, started here), each the engine
(``EngineStore``) over its backend (``SqlBackend``, ``GraphBackend``), written by the bench and
served by ``store.type`` ``sql`` or ``graph``:

1. ``--events`` events are written straight through the store's ``write_batch`` in batches of 500
   (the collector's write path without the broker): 50 pipelines of 20 stages, START and COMPLETE
   of each run, the COMPLETE carrying a ``columnLineage`` facet on its output (8 columns, each
   from its namesake upstream, ``amount`` also from ``currency``, ``customer_id`` also joined on a
   per-pipeline ``dim.customers``, in the current facet form with transformations);
2. the real ``lineage-collector serve`` runs as its own process on loopback over that store, and
   each request below is timed end to end (HTTP + JSON) ``--queries`` times, spread over the 50
   pipelines: column lineage of one field upstream at depth 5, of one field both ways at depth 5,
   and of a whole dataset (8 root fields) upstream at depth 5; the baselines, in the same run and
   against the same server: ``GET /api/v1/health`` and table-level ``GET /api/v1/lineage`` of the
   same dataset at depth 5; and, for scale, the column questions asked of the store object in
   the bench's own process (no HTTP, no JSON; the graph store through FalkorDB's native protocol).

The graph store is written through FalkorDB's native protocol (tests/servers.FalkorDBRespRunner,
see docs/stores.md on its Bolt parameter limit); ``serve`` reads it over Bolt with the neo4j driver,
as a deployment would. The nox ``bench`` session keeps the printed report in ``.bench-results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # servers.py

import httpx  # noqa: E402
from _bench_common import postgres_database, serving  # noqa: E402
from servers import FalkorDBRespRunner, bolt_warmup, falkordb_server  # noqa: E402

from lineage_sdk.collector.engine import EngineStore  # noqa: E402
from lineage_sdk.collector.records import build_record  # noqa: E402
from lineage_sdk.collector.stores.graph_backend import GraphBackend  # noqa: E402
from lineage_sdk.collector.stores.sql_backend import SqlBackend  # noqa: E402

PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/bench"
RUN_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
COLUMN_SCHEMA = (
    "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json"
    "#/$defs/ColumnLineageDatasetFacet"
)
NS = "postgres://warehouse.internal:5432"
PIPELINES, STAGES = 50, 20
COLUMNS = ("id", "customer_id", "amount", "currency", "status", "region", "created_at", "updated")
TARGET_P95_MS = 100.0
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def table(p: int, s: int) -> str:
    return f"analytics.p{p:02d}.stage{s:02d}_orders"


def _input(ds: str, col: str, kind: str, subtype: str) -> dict[str, Any]:
    return {
        "namespace": NS,
        "name": ds,
        "field": col,
        "transformations": [
            {"type": kind, "subtype": subtype, "description": "", "masking": False}
        ],
    }


def column_facet(p: int, s: int) -> dict[str, Any]:
    """What a SQL-aware producer states for stage ``s`` of pipeline ``p``."""
    src = table(p, s - 1)
    fields: dict[str, Any] = {}
    for col in COLUMNS:
        inputs = [_input(src, col, "DIRECT", "IDENTITY")]
        if col == "amount":
            inputs[0]["transformations"][0]["subtype"] = "TRANSFORMATION"
            inputs.append(_input(src, "currency", "DIRECT", "TRANSFORMATION"))
        if col == "customer_id":
            inputs.append(_input(f"dim.p{p:02d}.customers", "id", "INDIRECT", "JOIN"))
        fields[col] = {"inputFields": inputs}
    return {"_producer": PRODUCER, "_schemaURL": COLUMN_SCHEMA, "fields": fields}


def make_events(total: int) -> list[dict[str, Any]]:
    """START + COMPLETE per run, jobs round-robin; the facet dicts are shared between runs of a
    job (built once), which is what makes 100,000 events quick to generate."""
    facets = {(p, s): column_facet(p, s) for p in range(PIPELINES) for s in range(1, STAGES + 1)}
    events: list[dict[str, Any]] = []
    n = 0
    while len(events) < total:
        p, s = (n // STAGES) % PIPELINES, n % STAGES + 1
        run_id = str(uuid.UUID(int=n + 1, version=4))
        inputs = [
            {"namespace": NS, "name": table(p, s - 1), "facets": {}},
            {"namespace": NS, "name": f"dim.p{p:02d}.customers", "facets": {}},
        ]
        for k, etype in enumerate(("START", "COMPLETE")):
            when = (T0 + timedelta(seconds=2 * n + k)).isoformat().replace("+00:00", "Z")
            out_facets = {"columnLineage": facets[(p, s)]} if etype == "COMPLETE" else {}
            events.append(
                {
                    "eventType": etype,
                    "eventTime": when,
                    "producer": PRODUCER,
                    "schemaURL": RUN_SCHEMA,
                    "run": {"runId": run_id, "facets": {}},
                    "job": {"namespace": "etl", "name": f"p{p:02d}.stage{s:02d}", "facets": {}},
                    "inputs": inputs,
                    "outputs": [{"namespace": NS, "name": table(p, s), "facets": out_facets}],
                }
            )
        n += 1
    return events[:total]


def write_all(store: Any, events: list[dict[str, Any]], batch: int = 500) -> float:
    start = time.perf_counter()
    for i in range(0, len(events), batch):
        store.write_batch([build_record(e) for e in events[i : i + batch]])
    return time.perf_counter() - start


def percentiles(samples: list[float]) -> dict[str, float]:
    samples = sorted(samples)
    return {
        "p50_ms": round(statistics.median(samples), 2),
        "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 2),
        "max_ms": round(samples[-1], 2),
    }


def requests(p: int) -> dict[str, tuple[str, dict[str, Any]]]:
    last, middle = table(p, STAGES), table(p, STAGES // 2)
    return {
        "health (baseline)": ("/api/v1/health", {}),
        "table lineage, dataset, up, depth 5 (baseline)": (
            "/api/v1/lineage",
            {"nodeId": f"dataset:{NS}:{last}", "depth": 5, "direction": "upstream"},
        ),
        "column lineage, field, up, depth 5": (
            "/api/v1/column-lineage",
            {"nodeId": f"datasetField:{NS}:{last}:amount", "depth": 5},
        ),
        "column lineage, field, both ways, depth 5": (
            "/api/v1/column-lineage",
            {
                "nodeId": f"datasetField:{NS}:{middle}:customer_id",
                "depth": 5,
                "withDownstream": "true",
            },
        ),
        "column lineage, dataset (8 fields), up, depth 5": (
            "/api/v1/column-lineage",
            {"nodeId": f"dataset:{NS}:{last}", "depth": 5},
        ),
    }


def measure(url: str, count: int) -> dict[str, Any]:
    """Each request ``count`` times, interleaved (so load noise hits them alike), pipelines
    round-robin; also the answer's size for the record."""
    names = list(requests(0))
    samples: dict[str, list[float]] = {name: [] for name in names}
    sizes: dict[str, int] = {}
    with httpx.Client(base_url=url, timeout=60) as client:
        for i in range(-5, count):  # five warm-up rounds
            for name, (path, params) in requests(i % PIPELINES).items():
                start = time.perf_counter()
                response = client.get(path, params=params)
                elapsed = (time.perf_counter() - start) * 1000
                if response.status_code != 200:
                    raise SystemExit(f"{name}: {response.status_code} {response.text[:300]}")
                if i >= 0:
                    samples[name].append(elapsed)
                    body = response.json()
                    sizes[name] = len(body.get("graph", [])) if isinstance(body, dict) else 0
    return {name: {**percentiles(samples[name]), "nodes": sizes[name]} for name in names}


def store_alone(store: Any, count: int) -> dict[str, Any]:
    """The column questions asked of the store object in this process: no HTTP, no JSON."""
    out: dict[str, Any] = {}
    for name in [n for n in requests(0) if n.startswith("column")]:
        samples: list[float] = []
        for i in range(-5, count):
            _, params = requests(i % PIPELINES)[name]
            start = time.perf_counter()
            store.column_lineage(
                params["nodeId"], depth=5, with_downstream="withDownstream" in params
            )
            if i >= 0:
                samples.append((time.perf_counter() - start) * 1000)
        out[f"{name} (store alone)"] = {**percentiles(samples), "nodes": 0}
    return out


def report(label: str, build_s: float, events: int, figures: dict[str, Any]) -> None:
    print(f"\n{label}: {events:,} events written in {build_s:.1f} s ({events / build_s:,.0f}/s)")
    health = figures["health (baseline)"]["p50_ms"]
    table_p50 = figures["table lineage, dataset, up, depth 5 (baseline)"]["p50_ms"]
    print(
        f"  {'request':64} {'p50 ms':>8} {'p95 ms':>8} {'nodes':>6} {'x health':>9} {'x table':>8}"
    )
    for name, f in figures.items():
        verdict = ""
        if name.startswith("column") and not name.endswith("(store alone)"):
            verdict = "  ok" if f["p95_ms"] < TARGET_P95_MS else "  OVER TARGET"
        print(
            f"  {name:64} {f['p50_ms']:8.2f} {f['p95_ms']:8.2f} {f['nodes']:6d} "
            f"{f['p50_ms'] / health:9.1f} {f['p50_ms'] / table_p50:8.2f}{verdict}"
        )


def run_sql(label: str, url: str, events: list[dict[str, Any]], args: Any, folder: Path) -> Any:
    store = EngineStore(SqlBackend(url))
    store.open()
    try:
        build_s = write_all(store, events)
        alone = store_alone(store, args.queries)
    finally:
        store.close()
    toml = f'[lineage.store]\nbackend = "sql"\n[lineage.store.sql]\nurl = "{url}"\n'
    with serving(toml, folder) as base:
        figures = measure(base, args.queries) | alone
    report(label, build_s, len(events), figures)
    return {"build_s": round(build_s, 1), "requests": figures}


def run_graph(events: list[dict[str, Any]], args: Any, folder: Path) -> Any:
    with falkordb_server(persistent=False) as falkor:
        # "falkordb" is the graph FalkorDB's Bolt endpoint serves.
        runner = FalkorDBRespRunner("127.0.0.1", falkor.redis_port, "falkordb", timeout_s=300)
        store = EngineStore(GraphBackend(runner=runner))
        store.open()
        try:
            build_s = write_all(store, events)
            alone = store_alone(store, args.queries)  # through FalkorDB's native protocol
        finally:
            store.close()
        bolt_warmup("127.0.0.1", falkor.bolt_port)
        toml = (
            '[lineage.store]\nbackend = "graph"\n[lineage.store.graph]\n'
            'graph_connection_name = "bench"\n[lineage.connections.bench]\n'
            f'uri = "{falkor.bolt_uri}"\ntimeout_ms = 30000\n'
        )
        with serving(toml, folder) as base:
            figures = measure(base, args.queries) | alone
    report("graph store, FalkorDB (served over Bolt)", build_s, len(events), figures)
    return {"build_s": round(build_s, 1), "requests": figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200, help="timed requests of each kind")
    parser.add_argument("--stores", default="sqlite,postgresql,graph")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    started = time.perf_counter()
    events = make_events(args.events)
    print(
        f"{len(events):,} events generated in {time.perf_counter() - started:.1f} s; "
        f"{PIPELINES} pipelines x {STAGES} stages, {len(COLUMNS)} columns per table; "
        f"target: column lineage p95 < {TARGET_P95_MS:.0f} ms at depth 5; cpus: {os.cpu_count()}"
    )
    figures: dict[str, Any] = {"events": len(events), "target_p95_ms": TARGET_P95_MS}
    wanted = set(args.stores.split(","))
    runs: dict[str, Callable[[Path], Any]] = {
        "sqlite": lambda d: run_sql(
            "sql store, SQLite", f"sqlite:///{d}/bench.db", events, args, d
        ),
        "graph": lambda d: run_graph(events, args, d),
    }
    with tempfile.TemporaryDirectory(prefix="bench-columns-") as tmp:
        for name in ("sqlite", "postgresql", "graph"):
            if name not in wanted:
                continue
            folder = Path(tmp) / name
            folder.mkdir()
            if name == "postgresql":
                with postgres_database("lineage_bench_cols") as url:
                    figures[name] = run_sql("sql store, PostgreSQL", url, events, args, folder)
            else:
                figures[name] = runs[name](folder)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
