"""Export and import throughput of raw events (issue 16, item 6), SQLite and PostgreSQL.

    python bench/bench_portability.py [--events 100000] [--backends sqlite,postgres] [--json PATH]

For each backend, in one run and on the same events (an NDJSON file of SDK-shaped RunEvents,
~1 KB each, generated lazily so a million fit in flat memory):

1. baseline write: the file's lines decoded and validated (``validate_event``) and written with
   the store's own ``write_batch`` in batches of 1,000 into an empty store A: what the store
   itself can take;
2. baseline read: A's ``payload`` column streamed by one plain SQLAlchemy cursor (no ordering,
   no objects): what the database can give;
3. export: ``export_events`` from A to a file (ordered by eventTime then id, NDJSON);
4. import: ``import_events`` of that file into an empty store B, through the collector's ingest
   path (decode, ``check_ingest_event``, the "already present" lookup, ``handle_lineage_events``),
   batches of 1,000; then B must hold exactly A's events.

Ratios: export / baseline read, import / baseline write. PostgreSQL runs in a database created
here and dropped after (127.0.0.1:5432, as the tests). ``--events 1000000`` for the issue's scale.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa

from lineage_sdk.collector.decode import validate_event
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.portability import export_events, import_events, ndjson_lines
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.stores.sql import SqlStore
from lineage_sdk.config.schema import LineageConfig

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/bench"
BATCH = 1000
START = datetime(2025, 1, 1, tzinfo=UTC)


def events(n: int) -> Iterator[bytes]:
    """START/COMPLETE pairs over 2,000 jobs in 20 layers, each reading one dataset and writing one."""
    for i in range(n):
        run = i // 2
        job = run % 2000
        layer = job % 20
        event = {
            "eventType": "START" if i % 2 == 0 else "COMPLETE",
            "eventTime": (START + timedelta(milliseconds=i)).isoformat().replace("+00:00", "Z"),
            "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {
                "runId": str(uuid.UUID(int=run + 1, version=4)),
                "facets": {
                    "processing_engine": {
                        "_producer": PRODUCER,
                        "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/"
                        "ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet",
                        "name": "lineage-sdk",
                        "version": "0.1.0",
                    }
                },
            },
            "job": {"namespace": f"bench{job % 4}", "name": f"pipeline.job{job}", "facets": {}},
            "inputs": [
                {"namespace": "postgres://db:5432", "name": f"l{layer}.t{job // 20}", "facets": {}}
            ],
            "outputs": [
                {
                    "namespace": "postgres://db:5432",
                    "name": f"l{layer + 1}.t{job // 20}",
                    "facets": {
                        "schema": {
                            "_producer": PRODUCER,
                            "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/"
                            "SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
                            "fields": [{"name": f"c{k}", "type": "VARCHAR"} for k in range(6)],
                        }
                    },
                }
            ],
        }
        yield orjson.dumps(event)


@contextmanager
def pg_database() -> Iterator[str]:
    name = f"lineage_bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def timed(label: str, n: int, started: float) -> float:
    seconds = time.perf_counter() - started
    rate = n / seconds if seconds else float("inf")
    print(f"  {label:<34} {n:>9,} events  {seconds:8.2f} s  {rate:>10,.0f} events/s", flush=True)
    return rate


def bench_backend(
    name: str, a: SqlStore, b: SqlStore, source: Path, n: int, work: Path
) -> dict[str, Any]:
    """Store A is written by the baseline and exported; B, empty, takes the import."""
    print(f"\n{name}: {n:,} events", flush=True)
    a.open()
    b.open()
    try:
        started = time.perf_counter()
        with source.open("rb") as fh:
            batch = []
            for line in fh:
                batch.append(validate_event(orjson.loads(line)))
                if len(batch) >= BATCH:
                    a.write_batch(batch)
                    batch = []
            a.write_batch(batch)
        write = timed("baseline: decode + write_batch", n, started)

        started = time.perf_counter()
        seen = 0
        with a.engine.connect() as conn:
            rows = conn.execution_options(stream_results=True, yield_per=BATCH).execute(
                sa.select(a.t["events"].c.payload)
            )
            for _ in rows:
                seen += 1
        read = timed("baseline: stream the payload column", seen, started)

        exported = work / f"{name}-export.ndjson"
        started = time.perf_counter()
        with exported.open("wb") as fh:
            count = export_events(a, fh, batch_size=BATCH)
        export = timed("export (ordered NDJSON)", count, started)

        service = LineageCollectorService(LineageManager(LineageConfig(), stores=[b]))
        started = time.perf_counter()
        with exported.open("rb") as fh:
            report = asyncio.run(import_events(service, ndjson_lines(fh), batch_size=BATCH))
        imported = timed("import (ingest path)", report.imported, started)
        assert (report.imported, report.refused, report.already_present) == (n, 0, 0)
        assert b.count_events() == a.count_events() == n
        print(
            f"  export / baseline read  = {export / read:.2f}\n"
            f"  import / baseline write = {imported / write:.2f}",
            flush=True,
        )
        return {
            "events": n,
            "baseline_write_per_s": write,
            "baseline_read_per_s": read,
            "export_per_s": export,
            "import_per_s": imported,
            "export_over_read": export / read,
            "import_over_write": imported / write,
        }
    finally:
        a.close()
        b.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="lineage-bench-port-") as tmp:
        work = Path(tmp)
        source = work / "events.ndjson"
        with source.open("wb") as fh:
            for line in events(args.events):
                fh.write(line + b"\n")
        print(f"{args.events:,} events, {source.stat().st_size / args.events:,.0f} bytes each")
        for backend in args.backends.split(","):
            if backend == "sqlite":
                a, b = SqlStore(f"sqlite:///{work}/a.db"), SqlStore(f"sqlite:///{work}/b.db")
                results["sqlite"] = bench_backend("sqlite", a, b, source, args.events, work)
            elif backend == "postgres":
                with pg_database() as url:
                    a, b = SqlStore(url), SqlStore(url, table_prefix="imported_")
                    results["postgres"] = bench_backend("postgres", a, b, source, args.events, work)
            else:
                sys.exit(f"unknown backend {backend!r}: sqlite or postgres")
            for path in work.glob("*-export.ndjson"):
                os.unlink(path)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
