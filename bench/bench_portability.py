"""Export and import throughput of raw events (issue 16, item 6), SQLite and PostgreSQL.

    python bench/bench_portability.py [--events 100000] [--backends sqlite,postgres] [--json PATH]

The stores are the engine over the sql backend (``EngineStore(SqlBackend(url))``, what
``store.type: sql`` opens). For each backend, in one run and on the same events (an NDJSON file of SDK-shaped RunEvents,
~1 KB each, generated lazily so a million fit in flat memory):

1. store A is filled: the file's lines decoded and validated as broker messages
   (``decode_message``) and written with the store's own ``write_batch`` in batches of 1,000;
2. export against its baseline, alternated over two rounds: ``export_events`` from A to a file
   (ordered by eventTime then id, NDJSON), and A's event JSON column streamed by one plain
   SQLAlchemy cursor (no ordering, no objects): what the database can give;
3. import against its baseline, alternated chunk by chunk (10,000 lines, the first to go
   switching each time) over the exported file: ``import_events`` into an empty store B
   through the collector's ingest path (decode, ``check_ingest_event``, the "already present"
   lookup, ``handle_lineage_events``), and the raw ``decode_message`` + ``write_batch`` into
   an empty store C. Then A, B and C must each hold exactly the events.

Ratios: export / baseline read, import / baseline write: alternating puts both sides of each
ratio under the same load on a shared machine. PostgreSQL runs in a database created
here and dropped after (127.0.0.1:5432, as the tests). ``--events 1000000`` for the issue's scale.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from _bench_common import postgres_database

from lineage_sdk.collector.decode import JSON_CONTENT_TYPE, decode_message
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.portability import export_events, import_events
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.config.schema import LineageConfig

PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/bench"
BATCH = 1000
CHUNK = 10_000  # lines per turn when the baseline write and the import alternate
ROUNDS = 2  # alternated rounds of the read baseline and the export
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


def report(label: str, n: int, seconds: float) -> float:
    rate = n / seconds if seconds else float("inf")
    print(f"  {label:<40} {n:>9,} events  {seconds:8.2f} s  {rate:>10,.0f} events/s", flush=True)
    return rate


def write_lines(store: EngineStore, lines: list[bytes]) -> None:
    """The baseline: each line decoded and validated as one broker message (what import does
    too), then the store's own ``write_batch``, nothing else."""
    batch = []
    for line in lines:
        batch.append(decode_message(line, JSON_CONTENT_TYPE).records[0])
        if len(batch) >= BATCH:
            store.write_batch(batch)
            batch = []
    store.write_batch(batch)


def chunks(path: Path, size: int) -> Iterator[list[bytes]]:
    with path.open("rb") as fh:
        chunk: list[bytes] = []
        for line in fh:
            chunk.append(line)
            if len(chunk) >= size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk


def stream_payloads(store: EngineStore) -> int:
    """The read baseline: the event table's JSON column through one plain streamed cursor,
    unordered (the sql backend's own engine and table, reached past its contract)."""
    backend = store.backend
    assert isinstance(backend, SqlBackend)
    seen = 0
    with backend._db.connect() as conn:
        rows = conn.execution_options(stream_results=True, yield_per=BATCH).execute(
            sa.select(backend._t["ev"].c.json)
        )
        for _ in rows:
            seen += 1
    return seen


def bench_backend(
    name: str,
    stores: tuple[EngineStore, EngineStore, EngineStore],
    source: Path,
    n: int,
    work: Path,
) -> dict[str, Any]:
    """A is filled and exported; the export is imported into B and, chunk by chunk in turns,
    written by the baseline into C, so both see the same load."""
    print(f"\n{name}: {n:,} events", flush=True)
    a, b, c = stores
    for store in stores:
        store.open()
    try:
        started = time.perf_counter()
        for chunk in chunks(source, CHUNK):
            write_lines(a, chunk)
        report("fill store A (decode + write_batch)", n, time.perf_counter() - started)

        exported = work / f"{name}-export.ndjson"
        read_s = export_s = 0.0
        for _ in range(ROUNDS):  # alternated: the two share the machine's load alike
            started = time.perf_counter()
            seen = stream_payloads(a)
            read_s += time.perf_counter() - started
            started = time.perf_counter()
            with exported.open("wb") as fh:
                count = export_events(a, fh, batch_size=BATCH)
            export_s += time.perf_counter() - started
            assert seen == count == n, (seen, count, n)
        read = report(f"baseline read: JSON column x{ROUNDS}", n * ROUNDS, read_s)
        export = report(f"export: ordered NDJSON x{ROUNDS}", n * ROUNDS, export_s)

        service = LineageCollectorService(LineageManager(LineageConfig(), stores=[b]))
        write_s = import_s = 0.0
        imported = 0
        for index, chunk in enumerate(chunks(exported, CHUNK)):
            for step in (0, 1) if index % 2 == 0 else (1, 0):
                started = time.perf_counter()
                if step == 0:
                    write_lines(c, chunk)
                    write_s += time.perf_counter() - started
                else:
                    lines = ((i, line, 0) for i, line in enumerate(chunk, 1))
                    result = asyncio.run(import_events(service, lines, batch_size=BATCH))
                    import_s += time.perf_counter() - started
                    assert (result.refused, result.already_present) == (0, 0)
                    imported += result.imported
        write = report("baseline write: decode + write_batch", n, write_s)
        imports = report("import: the ingest path", imported, import_s)
        assert imported == n
        assert a.count_events() == b.count_events() == c.count_events() == n
        print(
            f"  export / baseline read  = {export / read:.2f}\n"
            f"  import / baseline write = {imports / write:.2f}",
            flush=True,
        )
        return {
            "events": n,
            "baseline_read_per_s": read,
            "export_per_s": export,
            "baseline_write_per_s": write,
            "import_per_s": imports,
            "export_over_read": export / read,
            "import_over_write": imports / write,
        }
    finally:
        for store in stores:
            store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    # SIGTERM runs the finally blocks too, so the PostgreSQL database is dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
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
                stores = tuple(EngineStore(SqlBackend(f"sqlite:///{work}/{x}.db")) for x in "abc")
                results["sqlite"] = bench_backend("sqlite", stores, source, args.events, work)  # type: ignore[arg-type]
            elif backend == "postgres":
                with postgres_database("lineage_portbench") as url:
                    stores = tuple(
                        EngineStore(SqlBackend(url, table_prefix=f"{x}_")) for x in "abc"
                    )
                    results["postgres"] = bench_backend(
                        "postgres", stores, source, args.events, work
                    )  # type: ignore[arg-type]
            else:
                sys.exit(f"unknown backend {backend!r}: sqlite or postgres")
            for path in work.glob("*-export.ndjson"):
                os.unlink(path)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
