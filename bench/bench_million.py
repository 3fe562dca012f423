"""The million-event benchmark of issue 16: a large graph loaded into every store, then queried.

    python bench/bench_million.py [--phases generate,load,export,roundtrip,query,retention]
        [--stores sqlite,postgres,document,graph] [--events 1000000] [--load-limit N]
        [--queries 200] [--kinds lineage,dataset,...] [--reuse] [--keep] [--data /work/bench-data]

The graph (deterministic, seed ``--seed``): 20 layers of ``events / 200`` jobs (5,000 at 1M events)
and twice as many datasets per layer (10,000); job ``j`` of layer ``l`` writes datasets ``2j`` and
``2j+1`` of its layer and reads 2-3 datasets of the previous layer picked at random (layer 0 reads
``source`` datasets); each job runs 5 times, START + COMPLETE, so 1,000,000 events over 100,000
jobs and 200,000 datasets (+10,000 sources). COMPLETE events carry a schema facet (4 fields) on
each output and a columnLineage facet mapping each output field to its namesake in every input.
Run ``r`` of all jobs falls in days ``20r .. 20r+20`` (100 days in all), jobs in layer order, so
``asOf`` and "the oldest 10%" mean something, and the first 20% of the file already holds the
whole graph (the later runs add events, not edges): a store loaded with a prefix has the full
topology. Parent jobs (issue 33's ``parent`` view): the jobs of a layer are in groups of
``APP`` (5) consecutive ones, and in every other group the first job is the parent of the other
four (their events carry the ``parent`` run facet naming the parent's run of the same cycle,
which starts earlier): 40% of the jobs are children, 10% parents. The facet adds no event, job,
dataset or edge (a parent is a job of the graph, with its own inputs and outputs, as a Spark
application's), so the other figures keep their meaning; it adds a ``parent`` mention per child
job and the parent run to its run rows. The events are written once as NDJSON to
``--data`` (``events-N-sSEED-parents.ndjson``; files without the facet had no ``-parents``).

Times: a run of every job takes 20 days in layer order, so a day holds 1% of the file's runs
and the runs of about one layer (``5,000`` jobs at 1M events, a job every 17 s). The 24-hour
windows of the views' kinds (``WINDOW``) each hold the root's own run and start at a random
point of the day before it: a realistic share of runs (one day of a hundred), but the walk in it
reaches about one layer up or down (the previous layer's jobs ran in the day before, the next
layer's in the day after), so its answers are small. ``window_cycle`` asks the same roots in a
window of one whole cycle (20 days, every job once), where the walk goes as deep as the job
view's; it has no target.

Phases (each reuses what earlier runs left in ``--data``; ``--reuse`` keeps loaded stores; a
store loaded by the stores before the engine, in their own tables, is not read by the engine
here: load it again, without ``--reuse``):

* ``load``: each store (sql on SQLite and on PostgreSQL, document on SecantusDB, graph on FalkorDB
  through its Redis protocol; each the engine, ``EngineStore``, over ``SqlBackend``,
  ``DocumentBackend`` or ``GraphBackend``, as ``store.type`` opens it) is filled by ``import_events``, the path of ``lineage-collector
  import`` (decode, validation, the "already present" lookup, ``handle_lineage_events``): that is
  the import figure. The rate of the first ``--probe`` events is printed first; ``--load-limit``
  and ``--load-seconds`` stop early (a later ``--reuse`` run continues where it stopped).
* ``export``: ``export_events`` of everything loaded, to a file (events/s).
* ``roundtrip``: export everything loaded, import that file into an empty store of the same
  kind (the import path above), and compare the two: sql, every table (rows digested in key
  order); document and graph (on SecantusDB and FalkorDB), the copy's export byte for byte, the
  counts of what each derived, and 30 lineage answers. Events/s each way, and whether the
  stores are identical.
* ``query``: the real API app (uvicorn on loopback) over each store: ``GET /api/v1/lineage`` at
  depth 10 from random jobs and datasets of layers 8-12 (upstream, downstream, both), the first
  (cold) query apart (``--serve``: ``lineage-collector serve`` in its own process, as
  deployed, sql kinds); with ``asOf`` at random times; ``GET /api/v1/column-lineage`` at depth 5
  from random output fields; and the same walks asked of the store object alone (no HTTP/JSON).
  The views (issue 33, ``VIEWS``; ``view_plan`` says how each is asked): the ``lineage``
  kind's roots, directions and depth in the ``dataset`` and ``parent`` views, and in the job
  view in a 24-hour window (``window``) and in a 20-day one (``window_cycle``); and the ``run``
  view (granularity ``run``) of a random dataset of layers 8-12 in a 24-hour window holding its
  writer's run, both ways at depth 1 (the runs that wrote or read it that day and what they
  named). Windows fall in the runs loaded (a 20% prefix: the first run). Each is reported beside
  the job view (``lineage``) of the same run, with the ratios of their p50 and p95; ``--kinds``
  picks the kinds asked.
  Each kind takes ``--queries`` samples or ``--query-seconds``, whichever comes first. Every
  read takes ``nodeLimit`` ``--node-limit`` (1,000, the API's default); ``--unbounded`` measures
  without (the store walks unlimited, the API at its largest, 100,000), kept as its own figures.
* ``catalogue``: the browsing reads over the store object (``namespaces``, a first and a middle
  page of 100 jobs and of 100 datasets, a ``search`` that matches and one that matches nothing,
  so reads every name), each asked ``CATALOGUE_REPEATS`` times, the median reported.
* ``retention``: on a copy (SQLite: the file; PostgreSQL: ``CREATE DATABASE .. TEMPLATE``;
  SecantusDB: its data directory, copied while the server is stopped, served by a second one;
  FalkorDB: ``GRAPH.COPY`` on the same server),
  ``purge_older_than`` of the oldest 10% of the loaded events with a writer alongside, against
  the writer alone before and after (``bench_retention``'s loop).

Figures accumulate in ``--data``/million-results.json and are printed as a markdown table, with
the load average at each phase. PostgreSQL uses the database ``lineage_bench_1m`` on 127.0.0.1:5432
(``LINEAGE_BENCH_PG`` names another; dropped at the end unless ``--keep``); SecantusDB and
FalkorDB are started on free ports with their data under ``--data`` and stopped at the end
(FalkorDB snapshots to ``graph.rdb``). With ``LINEAGE_TEST_MONGODB_URI`` (a real MongoDB:
database ``lineage_bench``) or ``LINEAGE_TEST_NEO4J_URI`` (a real Neo4j through the neo4j
driver, with ``..._USER``, ``..._PASSWORD``, ``..._DATABASE`` as for the tests), the document or
graph store is measured there instead: neither server installs on this project's machines.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import fcntl
import hashlib
import itertools
import json
import os
import pstats
import random
import shutil
import signal
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import sqlalchemy as sa
from _bench_common import load_average, serving
from bench_retention import records, retention_alongside, take
from servers import (
    MONGODB_URI_ENV,
    POSTGRES_URL,
    FalkorDBRespRunner,
    FalkorDBServer,
    SecantusServer,
    neo4j_from_env,
)

from lineage_sdk.collector.api import ApiServer, create_app, queries
from lineage_sdk.collector.api.history import parse_instant
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.portability import export_events, import_events
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.startup import tune_gc
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import StoreError

PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/bench"
RUN_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
SCHEMA_FACET = (
    "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"
)
COLUMN_FACET = (
    "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json"
    "#/$defs/ColumnLineageDatasetFacet"
)
NS = "postgres://warehouse.bench:5432"
JOB_NS = "bench.million"
LAYERS, RUNS = 20, 5
FIELDS = (("id", "BIGINT"), ("key", "VARCHAR"), ("value", "DOUBLE"), ("updated_at", "TIMESTAMP"))
T0 = datetime(2025, 1, 1, tzinfo=UTC)
RUN_SPAN = timedelta(days=20)  # run r of every job falls in [T0 + 20r days, T0 + 20(r+1) days)
BATCH = 1000
PARENT_FACET = "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json#/$defs/ParentRunFacet"
#: Jobs in groups of ``APP`` consecutive ones of a layer; every other group is an application:
#: its first job the parent of the others (40% of the jobs are children, 10% parents).
APP = 5
#: The window of the windowed kinds (issue 33): a day, 1% of the file's 100 days.
WINDOW = timedelta(hours=24)
#: p95 (and p99) targets in ms, HTTP; the views' (issue 33) at the kinds below.
TARGETS = {
    "lineage": (100.0, 250.0),
    "asof": (150.0, None),
    "columns": (100.0, None),
    "dataset": (150.0, None),
    "parent": (150.0, None),
    "window": (150.0, None),
    "run": (100.0, None),
}
STORES = ("sqlite", "postgres", "document", "graph")


# ---------------------------------------------------------------------------------------- the graph


class Graph:
    """The shape of the graph for ``events`` events: names, and each job's inputs (seeded)."""

    def __init__(self, events: int, seed: int, *, parents: bool = False) -> None:
        self.parents = parents  # whether jobs have parent jobs (``parent``)
        self.jobs_per_layer = max(events // (RUNS * 2 * LAYERS), 1)
        self.datasets_per_layer = 2 * self.jobs_per_layer
        self.jobs = self.jobs_per_layer * LAYERS
        self.events = self.jobs * RUNS * 2
        self.seed = seed
        self.step = RUN_SPAN / self.jobs  # between two jobs' starts within a run

    @staticmethod
    def dataset(layer: int, index: int) -> str:
        """Layer -1 holds the sources layer 0 reads."""
        return f"src.t{index:05d}" if layer < 0 else f"l{layer:02d}.t{index:05d}"

    @staticmethod
    def job(layer: int, index: int) -> str:
        return f"l{layer:02d}.job{index:05d}"

    def parent(self, index: int) -> int | None:
        """The index (same layer) of the parent job of job ``index``, when it has one: the
        first job of an application group (``APP``), with ``parents``."""
        first = index - index % APP
        if not self.parents or (index // APP) % 2 or first == index:
            return None
        return first

    def run_id(self, run: int, layer: int, index: int) -> str:
        return str(
            uuid.UUID(int=(run * self.jobs + layer * self.jobs_per_layer + index) + 1, version=4)
        )

    def inputs(self, layer: int, index: int) -> list[int]:
        rng = random.Random(self.seed * 10_000_019 + layer * self.jobs_per_layer + index)
        return rng.sample(range(self.datasets_per_layer), 2 + (rng.random() < 0.5))

    def time(self, run: int, layer: int, index: int) -> datetime:
        return T0 + run * RUN_SPAN + (layer * self.jobs_per_layer + index) * self.step

    def cutoff(self, fraction: float) -> datetime:
        """The time before which ``fraction`` of the first ``events`` events lie (events are in
        time order, two per job slot)."""
        return T0 + int(self.events * fraction / 2) * self.step - timedelta(microseconds=1)


def _stamp(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def job_events(graph: Graph, run: int, layer: int, index: int) -> list[dict[str, Any]]:
    """START and COMPLETE of run ``run`` of job ``index`` of ``layer`` (5 s apart)."""
    reads = [graph.dataset(layer - 1, i) for i in graph.inputs(layer, index)]
    writes = [graph.dataset(layer, 2 * index + k) for k in (0, 1)]
    run_id = graph.run_id(run, layer, index)
    run_facets: dict[str, Any] = {}
    parent = graph.parent(index)
    if parent is not None:
        run_facets["parent"] = {
            "_producer": PRODUCER,
            "_schemaURL": PARENT_FACET,
            "run": {"runId": graph.run_id(run, layer, parent)},
            "job": {"namespace": JOB_NS, "name": graph.job(layer, parent)},
        }
    start = graph.time(run, layer, index)
    columns = {
        "_producer": PRODUCER,
        "_schemaURL": COLUMN_FACET,
        "fields": {
            name: {"inputFields": [{"namespace": NS, "name": src, "field": name} for src in reads]}
            for name, _ in FIELDS
        },
    }
    schema = {
        "_producer": PRODUCER,
        "_schemaURL": SCHEMA_FACET,
        "fields": [{"name": name, "type": kind} for name, kind in FIELDS],
    }
    out = []
    for kind, when in (("START", start), ("COMPLETE", start + timedelta(seconds=5))):
        complete = kind == "COMPLETE"
        out.append(
            {
                "eventType": kind,
                "eventTime": _stamp(when),
                "producer": PRODUCER,
                "schemaURL": RUN_SCHEMA,
                "run": {"runId": run_id, "facets": run_facets},
                "job": {"namespace": JOB_NS, "name": graph.job(layer, index), "facets": {}},
                "inputs": [{"namespace": NS, "name": name, "facets": {}} for name in reads],
                "outputs": [
                    {
                        "namespace": NS,
                        "name": name,
                        "facets": {"schema": schema, "columnLineage": columns} if complete else {},
                    }
                    for name in writes
                ],
            }
        )
    return out


def generate(graph: Graph, runs: range = range(RUNS)) -> Iterator[dict[str, Any]]:
    """Every event in time order: run by run, jobs in layer order."""
    for run in runs:
        for layer in range(LAYERS):
            for index in range(graph.jobs_per_layer):
                yield from job_events(graph, run, layer, index)


def events_file(graph: Graph, data: Path) -> Path:
    """The NDJSON file of the graph's events, written once (atomically) and reused."""
    tag = "-parents" if graph.parents else ""
    path = data / f"events-{graph.events}-s{graph.seed}{tag}.ndjson"
    if path.exists():
        return path
    started = time.perf_counter()
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as fh:
        chunk: list[bytes] = []
        for event in generate(graph):
            chunk.append(orjson.dumps(event))
            if len(chunk) >= 10_000:
                fh.write(b"\n".join(chunk) + b"\n")
                chunk.clear()
        if chunk:
            fh.write(b"\n".join(chunk) + b"\n")
    tmp.rename(path)
    size = path.stat().st_size
    print(
        f"generated {graph.events:,} events in {time.perf_counter() - started:.0f} s: "
        f"{path} ({size / 1e6:,.0f} MB, {size / graph.events:,.0f} bytes/event)",
        flush=True,
    )
    return path


def lines_from(path: Path, skip: int) -> Iterator[tuple[int, bytes, int]]:
    """``ndjson_lines`` of the file after its first ``skip`` lines (the file read once)."""
    done = 0
    with path.open("rb") as fh:
        for number, line in enumerate(fh, 1):
            if number > skip:
                done += len(line)
                yield number, line, done


# ------------------------------------------------------------------------------------------- stores


def pg_name(events: int) -> str:
    """The PostgreSQL database of a graph of ``events`` events (``LINEAGE_BENCH_PG`` names
    another: two trees' loads side by side, for an A/B of a derivation change)."""
    if named := os.environ.get("LINEAGE_BENCH_PG"):
        return named
    return "lineage_bench_1m" if events == 1_000_000 else f"lineage_bench_{events}"


def secantus_store(server: SecantusServer, collection: str = "million") -> EngineStore:
    """The bench's document store on a SecantusDB server."""
    return EngineStore(
        DocumentBackend(
            ConnectionConfig(uri=server.uri, database="bench", timeout_ms=600_000),
            collection_name=collection,
        )
    )


def sql_engine(store: EngineStore) -> sa.Engine:
    """The SQLAlchemy engine of an open store over the sql backend (past its contract: a
    bench's ``VACUUM ANALYZE`` and table digests)."""
    backend = store.backend
    assert isinstance(backend, SqlBackend)
    return backend._db


def on_bench_server(kind: str) -> bool:
    """Whether ``kind`` is kept where the bench may copy it (a sql database, the SecantusDB or
    FalkorDB it starts), not on a real MongoDB or Neo4j that the environment names."""
    if kind == "document":
        return not os.environ.get(MONGODB_URI_ENV)
    if kind == "graph":
        return neo4j_from_env() is None
    return True


class Stores:
    """Opens the stores by name, starting SecantusDB and FalkorDB (data under ``data``) once."""

    def __init__(self, data: Path, events: int) -> None:
        self.data = data
        self.pg_name = pg_name(events)
        self.secantus: SecantusServer | None = None
        self.falkor: FalkorDBServer | None = None
        self.opened: list[Any] = []

    def pg_url(self, name: str | None = None) -> str:
        name = name or self.pg_name
        admin = sa.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            found = conn.execute(
                sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}
            ).first()
            if found is None:
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        return POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"

    def open(self, kind: str) -> Any:
        store: Any
        if kind == "sqlite":
            store = EngineStore(SqlBackend(f"sqlite:///{self.data}/sqlite/lineage.db"))
            (self.data / "sqlite").mkdir(exist_ok=True)
        elif kind == "postgres":
            store = EngineStore(SqlBackend(self.pg_url()))
        elif kind == "document" and not on_bench_server(kind):
            store = EngineStore(  # a real MongoDB: its database "lineage_bench"
                DocumentBackend(
                    ConnectionConfig(
                        uri=os.environ[MONGODB_URI_ENV],
                        database="lineage_bench",
                        timeout_ms=600_000,
                    ),
                    collection_name="million",
                )
            )
        elif kind == "graph" and (neo4j := neo4j_from_env()) is not None:
            uri, user, password, database = neo4j
            store = EngineStore(  # a real Neo4j, through the neo4j driver as deployed
                GraphBackend(
                    ConnectionConfig(
                        uri=uri,
                        username=user,
                        password=password,
                        database=database,
                        timeout_ms=3_600_000,
                    )
                )
            )
        elif kind == "document":
            store = secantus_store(self.secantus_server())
        elif kind == "graph":
            store = EngineStore(GraphBackend(runner=self.graph_runner("million")))
        else:
            raise SystemExit(f"unknown store {kind!r}: one of {', '.join(STORES)}")
        for _ in range(600):  # a restarted FalkorDB answers only once its snapshot is loaded
            try:
                store.open()
                break
            except StoreError as exc:
                if "loading" not in str(exc):
                    raise
                time.sleep(1)
        self.opened.append(store)
        return store

    def secantus_server(self) -> SecantusServer:
        """The bench's SecantusDB, started on the data under ``data`` once."""
        if self.secantus is None:
            (self.data / "secantus").mkdir(exist_ok=True)
            self.secantus = SecantusServer(storage_dir=self.data / "secantus")
            self.secantus.start(timeout=300)  # its start reads the whole data directory
        return self.secantus

    def graph_runner(self, name: str) -> FalkorDBRespRunner:
        """A runner on graph ``name`` of the bench's FalkorDB, started on the data under
        ``data`` once."""
        if self.falkor is None:
            server = FalkorDBServer(persistent=True)
            with contextlib.suppress(OSError):
                server.data_dir.rmdir()  # its own temporary folder: ours is kept instead
            server.data_dir = self.data / "falkordb"
            server.data_dir.mkdir(exist_ok=True)
            server.start()
            self.falkor = server
        return FalkorDBRespRunner("127.0.0.1", self.falkor.redis_port, name, timeout_s=3600)

    def graph_copy(self, name: str) -> FalkorDBRespRunner:
        """A runner on ``name``, a ``GRAPH.COPY`` of the loaded graph on the same FalkorDB
        (replacing an earlier copy of that name)."""
        if self.falkor is None:
            self.open("graph")  # waits while a restarted FalkorDB loads its snapshot
        runner = self.graph_runner(name)
        runner.drop()
        started = time.perf_counter()
        self.graph_runner("million").copy(name)
        print(f"  copied in {time.perf_counter() - started:.0f} s", flush=True)
        return runner

    def empty(self, kind: str, name: str) -> Any:
        """An empty store of ``kind`` named ``name`` beside the loaded one (document: a
        collection on the same SecantusDB; graph: a graph on the same FalkorDB), opened."""
        store: Any
        if kind == "document":
            store = secantus_store(self.secantus_server(), name)
            store.open()
            store.backend.drop()
        else:
            runner = self.graph_runner(name)
            runner.drop()
            store = EngineStore(GraphBackend(runner=runner))
        store.open()
        self.opened.append(store)
        return store

    def close_stores(self) -> None:
        for store in reversed(self.opened):
            with contextlib.suppress(Exception):
                store.close()
        self.opened.clear()

    def stop_secantus(self) -> None:
        """Stop SecantusDB (its next ``open`` starts it again on the same data)."""
        if self.secantus is not None:
            self.secantus.stop()
            self.secantus = None

    def close(self, *, drop_pg: bool) -> None:
        self.close_stores()
        if self.falkor is not None:
            started = time.perf_counter()
            self.falkor.stop()  # SHUTDOWN SAVE: graph.rdb under data/falkordb
            print(f"FalkorDB snapshot saved in {time.perf_counter() - started:.0f} s", flush=True)
            self.falkor = None
        self.stop_secantus()
        if drop_pg:
            _drop_pg(self.pg_name)


# ------------------------------------------------------------------------------------------ results


class Results:
    """Figures kept across runs in ``million-results.json``: ``{store: {figure: value}}``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}

    def put(self, store: str, key: str, value: Any) -> None:
        self._update(lambda data: data.setdefault(store, {}).__setitem__(key, value))

    def drop(self, store: str) -> None:
        self._update(lambda data: data.pop(store, None))

    def _update(self, change: Callable[[dict[str, Any]], Any]) -> None:
        """Re-read, change and write under a lock: several runs may load stores at once."""
        with (self.path.parent / ".million-results.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.path.exists():
                self.data = json.loads(self.path.read_text())
            change(self.data)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data, indent=1, default=str))
            tmp.replace(self.path)

    def get(self, store: str, key: str, default: Any = None) -> Any:
        return self.data.get(store, {}).get(key, default)


def phase(name: str) -> str:
    load = load_average()
    print(f"\n== {name}  [{datetime.now(UTC):%H:%M:%S} UTC, load average {load}]", flush=True)
    return load


# --------------------------------------------------------------------------------------------- load


def load(kind: str, stores: Stores, source: Path, results: Results, args: Any) -> None:
    """Import the file's next lines into the store, as ``lineage-collector import`` would."""
    already = results.get(kind, "loaded", 0) if args.reuse else 0
    want = args.load_limit if args.load_limit is not None else None
    todo = None if want is None else max(want - already, 0)
    if todo == 0:
        print(f"{kind}: {already:,} events already loaded", flush=True)
        return
    load_avg = phase(f"load {kind} (from line {already + 1:,})")
    store = stores.open(kind)
    started = time.perf_counter()
    probe_rate: float | None = None

    def loaded(done: int) -> None:
        nonlocal probe_rate
        results.put(kind, "loaded", already + done)
        elapsed = time.perf_counter() - started
        if probe_rate is None and done >= args.probe:
            probe_rate = done / elapsed
            total = graph_events(source)
            eta = (total - already - done) / probe_rate
            print(
                f"  {kind}: first {done:,} events at {probe_rate:,.0f} events/s "
                f"(the rest of {total:,} would take {eta / 60:.0f} min)",
                flush=True,
            )
            results.put(kind, "import_probe", {"events": done, "per_s": round(probe_rate)})

    done = import_file(
        kind, store, source, skip=already, todo=todo, seconds=args.load_seconds, progress=loaded
    )
    elapsed = time.perf_counter() - started
    rate = done / elapsed if elapsed else 0.0
    print(
        f"  {kind}: imported {done:,} events in {elapsed:.0f} s: {rate:,.0f} events/s", flush=True
    )
    runs = results.get(kind, "import_runs", [])
    runs.append(
        {
            "from": already,
            "events": done,
            "seconds": round(elapsed, 1),
            "per_s": round(rate),
            "load": load_avg,
        }
    )
    results.put(kind, "import_runs", runs)


def import_file(
    kind: str,
    store: Any,
    source: Path,
    *,
    skip: int = 0,
    todo: int | None = None,
    seconds: float = 24 * 3600,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Import ``source``'s lines after the first ``skip`` (``todo`` of them, or all, or what
    ``seconds`` allow) into ``store`` the way ``lineage-collector import`` does: decode,
    validation, the "already present" lookup, ``handle_lineage_events``. Returns how many."""
    service = LineageCollectorService(LineageManager(LineageConfig(), stores=[store]))
    started = time.perf_counter()
    done = 0
    chunk = 10_000
    lines = lines_from(source, skip)
    while todo is None or done < todo:
        size = chunk if todo is None else min(chunk, todo - done)
        report = asyncio.run(
            import_events(service, itertools.islice(lines, size), batch_size=BATCH)
        )
        if report.refused:
            raise SystemExit(f"{kind}: {report.refused} events refused on import")
        got = report.imported + report.already_present
        done += got
        if progress is not None:
            progress(done)
        if got < size or time.perf_counter() > started + seconds:
            break
        if done % 100_000 == 0:
            elapsed = time.perf_counter() - started
            print(f"  {kind}: {skip + done:,} imported, {done / elapsed:,.0f} events/s", flush=True)
    return done


def graph_events(source: Path) -> int:
    return int(source.name.split("-")[1])


# ------------------------------------------------------------------------------------------- export


def timed_export(store: Any, out: Path) -> tuple[int, float]:
    """``export_events`` of the whole store to ``out``: (events, seconds)."""
    started = time.perf_counter()
    with out.open("wb") as fh:
        count = export_events(store, fh, batch_size=BATCH)
    return count, time.perf_counter() - started


def remove_sqlite(path: Path) -> None:
    """A SQLite database file and its WAL and shared-memory files, where they exist."""
    for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        stale.unlink(missing_ok=True)


def export(kind: str, stores: Stores, results: Results, args: Any) -> None:
    load_avg = phase(f"export {kind}")
    store = stores.open(kind)
    out = stores.data / f"export-{kind}.ndjson"
    count, elapsed = timed_export(store, out)
    out.unlink()
    print(
        f"  {kind}: exported {count:,} events in {elapsed:.0f} s: {count / elapsed:,.0f} events/s"
    )
    results.put(
        kind,
        "export",
        {
            "events": count,
            "seconds": round(elapsed, 1),
            "per_s": round(count / elapsed),
            "load": load_avg,
        },
    )


def roundtrip(kind: str, stores: Stores, graph: Graph, results: Results, args: Any) -> None:
    """Export everything loaded, import that file into an empty store of the same kind, and
    check the two stores are identical: issue 16's "export, then import into empty stores",
    events/s each way. sql: every table's rows, digested in key order; document and graph (on
    SecantusDB and FalkorDB): the raw events exported again from the copy byte for byte, the
    derived collections' or labels' counts, and ``ROUNDTRIP_ANSWERS`` lineage answers."""
    loaded = results.get(kind, "loaded", 0)
    if not on_bench_server(kind) or not loaded:
        print(f"roundtrip: {kind} skipped (a real MongoDB or Neo4j is not copied; loaded only)")
        return
    load_avg = phase(f"roundtrip {kind} ({loaded:,} events loaded)")
    original = stores.open(kind)
    out = stores.data / f"roundtrip-{kind}.ndjson"
    exported, export_s = timed_export(original, out)
    print(f"  {kind}: exported {exported:,} events in {export_s:.0f} s", flush=True)
    copy_name = f"{stores.pg_name}_roundtrip"
    copy: Any
    if kind == "sqlite":
        path = stores.data / "sqlite" / "roundtrip.db"
        remove_sqlite(path)
        copy = EngineStore(SqlBackend(f"sqlite:///{path}"))
        copy.open()
    elif kind == "postgres":
        _drop_pg(copy_name)
        copy = EngineStore(SqlBackend(stores.pg_url(copy_name)))
        copy.open()
    else:
        copy = stores.empty(kind, "million_roundtrip")
    try:
        started = time.perf_counter()
        imported = import_file(kind, copy, out)
        import_s = time.perf_counter() - started
        print(f"  {kind}: imported {imported:,} events in {import_s:.0f} s", flush=True)
        started = time.perf_counter()
        if isinstance(original.backend, SqlBackend):
            left, right = table_digests(original), table_digests(copy)
            differ = sorted(name for name in left if left[name] != right.get(name))
            identical = not differ and left.keys() == right.keys()
            held = {name: rows for name, (rows, _) in left.items()}
        else:
            digest = hashlib.sha256(out.read_bytes()).hexdigest()
            again = stores.data / f"roundtrip-{kind}-copy.ndjson"
            timed_export(copy, again)
            held, copied = derived_counts(original), derived_counts(copy)
            differ = sorted(k for k in held.keys() | copied.keys() if held.get(k) != copied.get(k))
            if hashlib.sha256(again.read_bytes()).hexdigest() != digest:
                differ.append("raw events")
            again.unlink()
            plan = query_plan(graph, args.seed)[: 3 * ROUNDTRIP_ANSWERS : 3]
            if [answer(original, p) for _, p in plan] != [answer(copy, p) for _, p in plan]:
                differ.append("lineage answers")
            identical = not differ
        fig = {
            "events": exported,
            "export_s": round(export_s, 1),
            "export_per_s": round(exported / export_s),
            "imported": imported,
            "import_s": round(import_s, 1),
            "import_per_s": round(imported / import_s),
            "tables": held,
            "identical": identical,
            "differ": differ,
            "compare_s": round(time.perf_counter() - started, 1),
            "load": load_avg,
        }
        print(f"  {kind}: {fig}", flush=True)
        results.put(kind, "roundtrip", fig)
    finally:
        out.unlink(missing_ok=True)
        if kind == "sqlite":
            copy.close()
            remove_sqlite(path)
        elif kind == "postgres":
            copy.close()
            if not args.keep:
                _drop_pg(copy_name)
        elif kind == "document":
            copy.backend.drop()
        else:
            copy.backend.runner.drop()


#: Lineage answers compared between a store and its round-trip copy (the query phase's roots).
ROUNDTRIP_ANSWERS = 30


def answer(store: Any, params: dict[str, Any]) -> list[Any]:
    """A lineage answer of the store object, as comparable data."""
    found = store.lineage(
        params["nodeId"], depth=params["depth"], direction=params["direction"], node_limit=1000
    )
    return sorted(
        (
            n.id,
            n.data.get("latestRun", {}).get("state"),
            sorted((e.origin, e.destination) for e in n.out_edges),
        )
        for n in found.nodes.values()
    )


def derived_counts(store: Any) -> dict[str, int]:
    """What a document or graph store derived from its events, counted: each collection's
    documents (the backend's row kinds), or each label's nodes and each type's relationships."""
    backend = store.backend
    if isinstance(backend, DocumentBackend):
        return {
            kind: int(backend._coll(kind).estimated_document_count())
            for kind in ("events", "mentions", "edges", "runs", "columns", "nodes")
        }
    rows = backend.runner.run("MATCH (n) RETURN labels(n)[0] AS kind, count(n) AS n", None)
    rows += backend.runner.run("MATCH ()-[r]->() RETURN type(r) AS kind, count(r) AS n", None)
    return {str(r["kind"]): int(r["n"]) for r in rows}


def table_digests(store: EngineStore) -> dict[str, tuple[int, str]]:
    """Each table of the sql backend: (rows, sha256 of its rows in primary-key order, or in the
    order of all its columns for a table without one)."""
    out: dict[str, tuple[int, str]] = {}
    backend = store.backend
    assert isinstance(backend, SqlBackend)
    with sql_engine(store).connect() as conn:
        for name, table in sorted(backend._t.items()):
            digest, rows = hashlib.sha256(), 0
            order = list(table.primary_key.columns) or list(table.columns)
            query = sa.select(table).order_by(*order)
            for row in conn.execution_options(yield_per=5000).execute(query):
                digest.update(repr(tuple(row)).encode())
                rows += 1
            out[name] = (rows, digest.hexdigest())
    return out


def _drop_pg(name: str) -> None:
    admin = sa.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


# -------------------------------------------------------------------------------------------- query


def _percentiles(samples: list[float]) -> dict[str, Any]:
    s = sorted(samples)

    def at(q: float) -> float:
        return round(s[min(int(q * len(s)), len(s) - 1)], 1)

    return {
        "n": len(s),
        "p50_ms": round(statistics.median(s), 1),
        "p95_ms": at(0.95),
        "p99_ms": at(0.99),
        "max_ms": round(s[-1], 1),
    }


def query_plan(graph: Graph, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """Random roots of layers 8-12, the same for every store: ``(kind, params)``."""
    rng = random.Random(seed)
    plan: list[tuple[str, dict[str, Any]]] = []
    for i in range(100_000):
        layer = rng.randint(8, 12)
        direction = ("upstream", "downstream", "both")[i % 3]
        if rng.random() < 0.5:
            node = f"job:{JOB_NS}:{graph.job(layer, rng.randrange(graph.jobs_per_layer))}"
        else:
            node = f"dataset:{NS}:{graph.dataset(layer, rng.randrange(graph.datasets_per_layer))}"
        plan.append(("lineage", {"nodeId": node, "depth": 10, "direction": direction}))
        when = T0 + timedelta(seconds=rng.uniform(0, 5 * RUN_SPAN.total_seconds()))
        plan.append(
            ("asof", {"nodeId": node, "depth": 10, "direction": direction, "asOf": _stamp(when)})
        )
        field = rng.choice(FIELDS)[0]
        ds = graph.dataset(layer, rng.randrange(graph.datasets_per_layer))
        plan.append(("columns", {"nodeId": f"datasetField:{NS}:{ds}:{field}", "depth": 5}))
    return plan


#: The views' kinds (issue 33), each from the ``lineage`` kind's roots (the run view: its own
#: dataset roots): ``(granularity, windowed, depth)``. ``window_cycle`` is a window of one whole
#: run of every job (20 days), where a day's window walks about one layer (see ``view_plan``).
VIEWS: dict[str, tuple[str, str | None, int]] = {
    "dataset": ("dataset", None, 10),
    "parent": ("parent", None, 10),
    "window": ("job", "day", 10),
    "window_cycle": ("job", "cycle", 10),
    "run": ("run", "day", 1),
}


def _slot(node: str) -> tuple[int, int]:
    """The (layer, job index) of a root: its job's, or the job that writes the dataset."""
    name = node.rsplit(":", 1)[1]
    layer, index = int(name[1:3]), int(name[-5:])
    return layer, index if ".job" in name else index // 2


def view_plan(graph: Graph, seed: int, runs: int) -> list[tuple[str, dict[str, Any]]]:
    """The views' asks (``VIEWS``), the same for every store: the ``lineage`` kind's roots,
    directions and depth, with ``granularity``, and, for the windowed kinds, a window holding
    the root's job's run (the dataset's writer's) of a run picked among the first ``runs``
    (those loaded). A day's window starts at a random point of the day before that run, so it
    holds that run and about a day of others: 1% of the file's runs (100 days), the jobs of
    about one layer (a run of every job spreads over 20 days in layer order). The run view
    asks random datasets of layers 8-12, both ways at depth 1: the runs that wrote and read it
    in the day, and what those runs named."""
    rng = random.Random(seed + 33)
    roots = [p for k, p in query_plan(graph, seed) if k == "lineage"]
    plan: list[tuple[str, dict[str, Any]]] = []
    for params in roots:
        for what, (granularity, windowed, depth) in VIEWS.items():
            ask = dict(params, depth=depth, granularity=granularity)
            if what == "run":
                layer = rng.randint(8, 12)
                ds = graph.dataset(layer, rng.randrange(graph.datasets_per_layer))
                ask |= {"nodeId": f"dataset:{NS}:{ds}", "direction": "both"}
            run = rng.randrange(max(runs, 1))
            if windowed == "day":
                start = graph.time(run, *_slot(ask["nodeId"]))
                since = start - timedelta(seconds=rng.randrange(int(WINDOW.total_seconds())))
                ask |= {"since": _stamp(since), "until": _stamp(since + WINDOW)}
            elif windowed == "cycle":
                since = T0 + run * RUN_SPAN
                ask |= {"since": _stamp(since), "until": _stamp(since + RUN_SPAN)}
            plan.append((what, ask))
    return plan


def _size(body: Any) -> tuple[int, Any]:
    if isinstance(body, dict):
        return len(body.get("graph", [])), body.get("truncated")
    return 0, None


@contextlib.contextmanager
def api_url(kind: str, store: Any, stores: Stores, *, serve: bool) -> Iterator[str]:
    """The API over ``store``: ``lineage-collector serve`` in its own process, as deployed
    (``--serve``, sql kinds), or the app on a thread of this process (the default), with the
    cyclic-garbage tuning ``serve`` applies (``tune_gc``): at CPython's default thresholds a
    1,000-node answer ran the old generations' collections, up to 200 ms a query on FalkorDB."""
    if not serve:
        tune_gc()
        with ApiServer(create_app(store, max_body_bytes=64 << 20)) as server:
            yield server.url
        return
    if kind == "sqlite":
        url = f"sqlite:///{stores.data}/sqlite/lineage.db"
    elif kind == "postgres":
        url = stores.pg_url()
    else:
        raise SystemExit(f"--serve: sqlite and postgres only, not {kind}")
    folder = stores.data / f"serve-{kind}"
    folder.mkdir(exist_ok=True)
    toml = f'[lineage.store]\nbackend = "sql"\n[lineage.store.sql]\nurl = "{url}"\n'
    with serving(toml, folder) as base:
        yield base


def query(kind: str, stores: Stores, graph: Graph, results: Results, args: Any) -> None:
    load_avg = phase(f"query {kind}")
    store = stores.open(kind)
    if kind == "postgres":
        # The shared server runs with autovacuum off: without statistics after the bulk load,
        # the planner expects ~40,000 rows per key, and JIT-compiles every walk query (~35 ms
        # each instead of 0.1); without a vacuum, no page is marked all-visible, so no walk
        # query can be answered from an index alone (each key costs a heap visit). A
        # deployment's autovacuum does both after a bulk insert; here, the bench does.
        started = time.perf_counter()
        with sql_engine(store).connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text("VACUUM ANALYZE"))
        print(f"  VACUUM ANALYZE in {time.perf_counter() - started:.1f} s", flush=True)
    runs = min(results.get(kind, "loaded", 0) // (2 * graph.jobs), RUNS)  # whole runs loaded
    plan = query_plan(graph, args.seed) + view_plan(graph, args.seed, runs)
    kinds = [k for k in ("lineage", *VIEWS, "asof", "columns") if k in args.kinds.split(",")]
    paths = {k: "/api/v1/lineage" for k in kinds} | {"columns": "/api/v1/column-lineage"}
    figures: dict[str, Any] = {"load": load_avg, "runs_loaded": runs}
    timed_out: set[str] = set()  # kinds whose HTTP query timed out: not asked of the store
    # --unbounded: the store walks take no limit, the API its largest (100,000 nodes).
    limit = {"nodeLimit": 100_000 if args.unbounded else args.node_limit}
    cut = {"node_limit": None if args.unbounded else args.node_limit}
    with (
        api_url(kind, store, stores, serve=args.serve) as url,
        httpx.Client(base_url=url, timeout=args.query_timeout) as client,
    ):
        for what in kinds:
            asks = [p for k, p in plan if k == what]
            samples: list[float] = []
            nodes: list[int] = []
            truncated = 0
            statuses: dict[int, int] = {}
            started = time.perf_counter()
            cold = None
            for i, params in enumerate(asks):
                t0 = time.perf_counter()
                try:
                    response = client.get(paths[what], params=params | limit)
                except httpx.TimeoutException:
                    print(f"  {what}: no answer within {args.query_timeout:.0f} s: {params}")
                    timed_out.add(what)
                    break
                ms = (time.perf_counter() - t0) * 1000
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                if response.status_code == 200:
                    size, was_cut = _size(response.json())
                    nodes.append(size)
                    truncated += bool(was_cut)
                elif response.status_code != 404:
                    print(f"  {what} {params}: {response.status_code} {response.text[:200]}")
                if i == 0:
                    cold = {
                        "ms": round(ms, 1),
                        "nodes": nodes[-1] if nodes else 0,
                        "params": params,
                    }
                else:
                    samples.append(ms)
                if (
                    len(samples) >= args.queries
                    or time.perf_counter() - started > args.query_seconds
                ):
                    break
            fig = _percentiles(samples) if samples else {"n": 0}
            fig |= {
                "cold_ms": cold["ms"] if cold else None,
                "cold_nodes": cold["nodes"] if cold else None,
                "nodes_median": statistics.median(nodes) if nodes else 0,
                "nodes_max": max(nodes) if nodes else 0,
                "truncated": truncated,
                "statuses": statuses,
                "timed_out": what in timed_out,
            }
            figures[f"{what}_http"] = fig
            print(f"  {kind} {what} HTTP: {fig}", flush=True)

        # The store alone: the walks behind the same requests, no HTTP and no JSON (the views:
        # the API's query function, as asOf).
        def view(p: dict[str, Any]) -> Any:
            times = {k: parse_instant(p[k]) for k in ("since", "until") if k in p}
            return queries.lineage(
                store,
                p["nodeId"],
                direction=p["direction"],
                depth=p["depth"],
                granularity=p["granularity"],
                **times,
                **cut,
            )

        for what, call in (
            (
                "lineage",
                lambda p: store.lineage(p["nodeId"], direction=p["direction"], depth=10, **cut),
            ),
            ("columns", lambda p: store.column_lineage(p["nodeId"], depth=5, **cut)),
            (  # asOf has no store call of its own: the API's query function, without HTTP
                "asof",
                lambda p: queries.lineage(
                    store,
                    p["nodeId"],
                    direction=p["direction"],
                    depth=10,
                    as_of=parse_instant(p["asOf"]),
                    **cut,
                ),
            ),
            *((name, view) for name in VIEWS),
        ):
            if what in timed_out or what not in kinds:
                continue
            asks = [p for k, p in plan if k == what]
            samples = []
            profiler = cProfile.Profile() if args.profile else None
            started = time.perf_counter()
            for params in asks[1:]:
                t0 = time.perf_counter()
                with contextlib.suppress(queries.NotFound), profiler or contextlib.nullcontext():
                    call(params)
                samples.append((time.perf_counter() - t0) * 1000)
                if (
                    len(samples) >= args.queries
                    or time.perf_counter() - started > args.query_seconds / 2
                ):
                    break
            figures[f"{what}_store"] = _percentiles(samples)
            print(f"  {kind} {what} store alone: {figures[f'{what}_store']}", flush=True)
            if profiler is not None:  # where the time goes, by cumulative time
                pstats.Stats(profiler).sort_stats("cumulative").print_stats(r"lineage_sdk", 18)
    label = "query_unbounded" if args.unbounded else "query_bounded"
    if args.profile:  # profiled figures are slower: kept apart, out of the table
        label += "_profiled"
    results.put(kind, label, figures)


# ---------------------------------------------------------------------------------------- retention


def retention(kind: str, stores: Stores, graph: Graph, results: Results, args: Any) -> None:
    """The oldest 10% of the loaded events removed from a copy, with a writer alongside."""
    loaded = results.get(kind, "loaded", 0)
    if not on_bench_server(kind) or not loaded:
        print(f"retention: {kind} skipped (a real MongoDB or Neo4j is not copied; loaded only)")
        return
    load_avg = phase(f"retention {kind} ({loaded:,} events loaded)")
    stores.close_stores()  # the copy needs the original quiet (SQLite's WAL, PG's template)
    secantus_copy: SecantusServer | None = None
    graph_copy: FalkorDBRespRunner | None = None
    store: Any
    if kind == "graph":
        graph_copy = stores.graph_copy("million_retention")
        store = EngineStore(GraphBackend(runner=graph_copy))
    elif kind == "document":  # a copy of SecantusDB's data directory, the server stopped meanwhile
        stores.stop_secantus()
        copy = stores.data / "secantus-retention"
        shutil.rmtree(copy, ignore_errors=True)
        started = time.perf_counter()
        shutil.copytree(stores.data / "secantus", copy, ignore=shutil.ignore_patterns("*.log"))
        print(f"  copied in {time.perf_counter() - started:.0f} s", flush=True)
        secantus_copy = SecantusServer(storage_dir=copy)
        started = time.perf_counter()
        secantus_copy.start(timeout=900)  # its start reads the whole data directory
        print(f"  started on the copy in {time.perf_counter() - started:.0f} s", flush=True)
        store = secantus_store(secantus_copy)
    elif kind == "sqlite":
        copy = stores.data / "sqlite" / "retention.db"
        started = time.perf_counter()
        shutil.copyfile(stores.data / "sqlite" / "lineage.db", copy)
        print(f"  copied in {time.perf_counter() - started:.0f} s")
        store = EngineStore(SqlBackend(f"sqlite:///{copy}"))
    else:
        name = f"{stores.pg_name}_retention"
        admin = sa.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            started = time.perf_counter()
            conn.execute(sa.text(f'CREATE DATABASE "{name}" TEMPLATE "{stores.pg_name}"'))
            print(f"  copied in {time.perf_counter() - started:.0f} s")
        admin.dispose()
        store = EngineStore(SqlBackend(POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"))
    store.open()
    try:
        fraction = args.retention * loaded / graph.events  # the oldest 10% of what is loaded
        cutoff = graph.cutoff(fraction)
        # The writer's events: runs after the five of the file (new runs, later times).
        lines = (orjson.dumps(e) for e in generate(graph, range(RUNS, RUNS + 10)))
        reserve = iter(lambda: take(source_records, BATCH), [])
        source_records = records(lines)
        baseline = 10 * BATCH
        run = retention_alongside(store, reserve, cutoff, baseline)
        before, during, after = run.before, run.during, run.after
        alone_rate = (before[0] + after[0]) / (before[1] + after[1])
        during_rate = during[0] / during[1]
        fig = {
            "loaded": loaded,
            "fraction": args.retention,
            "removed": run.removed,
            "removed_seconds": round(run.seconds, 1),
            "removed_per_s": round(run.removed / run.seconds),
            "writer_alone_per_s": round(alone_rate),
            "writer_alongside_per_s": round(during_rate),
            "alongside_over_alone": round(during_rate / alone_rate, 2),
            "load": load_avg,
        }
        print(f"  {kind}: {fig}", flush=True)
        results.put(kind, "retention", fig)
    finally:
        store.close()
        if graph_copy is not None:
            graph_copy.drop()
        elif secantus_copy is not None:
            secantus_copy.stop()
            shutil.rmtree(copy, ignore_errors=True)
        elif kind == "sqlite":
            remove_sqlite(copy)
        else:
            _drop_pg(f"{stores.pg_name}_retention")


# ---------------------------------------------------------------------------------------- catalogue

CATALOGUE_REPEATS = 5


def catalogue(kind: str, stores: Stores, graph: Graph, results: Results, args: Any) -> None:
    """The browsing reads, timed over the store object (median of ``CATALOGUE_REPEATS``)."""
    if not results.get(kind, "loaded", 0):
        print(f"catalogue: {kind} skipped (not loaded)")
        return
    load_avg = phase(f"catalogue {kind}")
    store = stores.open(kind)
    jobs, datasets = store.jobs(JOB_NS, limit=1).total, store.datasets(NS, limit=1).total
    asks: dict[str, Callable[[], Any]] = {
        "namespaces": lambda: store.namespaces(limit=100),
        "jobs_first_page": lambda: store.jobs(JOB_NS, limit=100),
        "jobs_middle_page": lambda: store.jobs(JOB_NS, limit=100, offset=jobs // 2),
        "datasets_first_page": lambda: store.datasets(NS, limit=100),
        "datasets_middle_page": lambda: store.datasets(NS, limit=100, offset=datasets // 2),
        "search_hit": lambda: store.search(graph.job(LAYERS // 2, 42), limit=50),
        "search_miss": lambda: store.search("no such name", limit=50),
    }
    fig: dict[str, Any] = {"jobs": jobs, "datasets": datasets, "load": load_avg}

    def timed(ask: Callable[[], Any]) -> tuple[float, Any]:
        started = time.perf_counter()
        answer = ask()
        return round((time.perf_counter() - started) * 1000, 1), answer

    for name, ask in asks.items():
        samples = [timed(ask) for _ in range(CATALOGUE_REPEATS)]
        fig[name] = statistics.median(ms for ms, _ in samples)
        print(f"  {kind} {name}: {fig[name]} ms (of {[ms for ms, _ in samples]})", flush=True)
    results.put(kind, "catalogue", fig)


# ------------------------------------------------------------------------------------------- report


def table(results: Results) -> str:
    """Every figure as a markdown table, one column per store."""
    stores = [s for s in STORES if s in results.data]
    rows: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
        ("events loaded", lambda d: f"{d.get('loaded', 0):,}"),
        ("import, first events (events/s)", lambda d: d.get("import_probe", {}).get("per_s")),
        ("import, all runs (events/s)", lambda d: _runs_rate(d.get("import_runs", []))),
        ("export (events/s)", lambda d: d.get("export", {}).get("per_s")),
    ]
    for label in ("query_unbounded", "query_bounded"):
        tag = "no node limit" if label == "query_unbounded" else "nodeLimit 1000"
        for what, name in (
            ("lineage", "lineage d10"),
            ("asof", "asOf d10"),
            ("columns", "columns d5"),
        ):
            rows.append((f"{name} HTTP cold ms ({tag})", _get(label, f"{what}_http", "cold_ms")))
            rows.append((f"{name} HTTP p50/p95/p99 ms ({tag})", _pcts(label, f"{what}_http")))
            rows.append(
                (f"{name} HTTP nodes median/max, truncated ({tag})", _nodes(label, f"{what}_http"))
            )
        for what, name in VIEW_NAMES.items():
            rows.append((f"{name} HTTP p50/p95/p99 ms ({tag})", _pcts(label, f"{what}_http")))
            rows.append((f"{name} / job view HTTP p50, p95 ({tag})", _ratio(label, what)))
            rows.append(
                (f"{name} HTTP nodes median/max, truncated ({tag})", _nodes(label, f"{what}_http"))
            )
            rows.append(
                (f"{name} store alone p50/p95/p99 ms ({tag})", _pcts(label, f"{what}_store"))
            )
        rows.append(
            (f"lineage d10 store alone p50/p95/p99 ms ({tag})", _pcts(label, "lineage_store"))
        )
        rows.append(
            (f"columns d5 store alone p50/p95/p99 ms ({tag})", _pcts(label, "columns_store"))
        )
        rows.append((f"asOf d10 without HTTP p50/p95/p99 ms ({tag})", _pcts(label, "asof_store")))
        rows.append((f"load average at query ({tag})", _get(label, "load")))
    for key in (
        "namespaces",
        "jobs_first_page",
        "jobs_middle_page",
        "datasets_first_page",
        "datasets_middle_page",
        "search_hit",
        "search_miss",
    ):
        rows.append((f"catalogue: {key} ms (median)", _get("catalogue", key)))
    for key, name in (
        ("removed", "retention: events removed"),
        ("removed_per_s", "retention: removed events/s"),
        ("writer_alone_per_s", "writer alone (events/s)"),
        ("writer_alongside_per_s", "writer alongside retention (events/s)"),
        ("alongside_over_alone", "writer alongside / alone"),
        ("load", "load average at retention"),
    ):
        rows.append((name, _get("retention", key)))
    for key, name in (
        ("export_per_s", "round trip: export (events/s)"),
        ("import_per_s", "round trip: import of the export into an empty store (events/s)"),
        ("identical", "round trip: stores identical"),
        ("load", "load average at round trip"),
    ):
        rows.append((name, _get("roundtrip", key)))
    out = ["| figure | " + " | ".join(stores) + " |", "|---|" + "---|" * len(stores)]
    for name, get in rows:
        cells = [get(results.data[s]) for s in stores]
        if all(c in (None, "", "-") for c in cells):
            continue
        out.append(f"| {name} | " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    return "\n".join(out)


#: The views' kinds as the table names them (target p95 in ms).
VIEW_NAMES = {
    "dataset": "dataset view d10 (< 150)",
    "parent": "parent view d10 (< 150)",
    "window": "job view d10, 24 h window (< 150)",
    "window_cycle": "job view d10, 20-day window",
    "run": "run view d1 of a dataset, 24 h window (< 100)",
}


def _ratio(label: str, what: str) -> Callable[[dict[str, Any]], Any]:
    """A view's HTTP p50 and p95 over the job view's (``lineage``) of the same run."""

    def get(d: dict[str, Any]) -> Any:
        view, job = d.get(label, {}).get(f"{what}_http"), d.get(label, {}).get("lineage_http")
        if not view or not job or not view.get("n") or not job.get("n"):
            return None
        return ", ".join(
            f"{view[k] / job[k]:.2f}x" if job[k] else "-" for k in ("p50_ms", "p95_ms")
        )

    return get


def _runs_rate(runs: list[dict[str, Any]]) -> Any:
    events = sum(r["events"] for r in runs)
    seconds = sum(r["seconds"] for r in runs)
    return round(events / seconds) if seconds else None


def _get(*keys: str) -> Callable[[dict[str, Any]], Any]:
    def get(d: dict[str, Any]) -> Any:
        for key in keys:
            if not isinstance(d, dict) or key not in d:
                return None
            d = d[key]
        return d

    return get


def _pcts(label: str, what: str) -> Callable[[dict[str, Any]], Any]:
    def get(d: dict[str, Any]) -> Any:
        f = d.get(label, {}).get(what)
        if f and f.get("timed_out"):
            done = f" after n={f['n']}" if f.get("n") else ""
            return f"a query timed out{done}"
        if not f or not f.get("n"):
            return None
        return f"{f['p50_ms']}/{f['p95_ms']}/{f['p99_ms']} (n={f['n']})"

    return get


def _nodes(label: str, what: str) -> Callable[[dict[str, Any]], Any]:
    def get(d: dict[str, Any]) -> Any:
        f = d.get(label, {}).get(what)
        if not f:
            return None
        return f"{f['nodes_median']}/{f['nodes_max']}, {f['truncated']}"

    return get


# --------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phases", default="generate,load,export,query,retention")
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the graph")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument(
        "--data", type=Path, default=Path(os.environ.get("LINEAGE_BENCH_DATA", "/work/bench-data"))
    )
    parser.add_argument("--probe", type=int, default=20_000, help="events of the first load rate")
    parser.add_argument("--load-limit", type=int, default=None, help="load up to this many events")
    parser.add_argument("--load-seconds", type=float, default=24 * 3600, help="stop loading after")
    parser.add_argument("--queries", type=int, default=200, help="samples of each query kind")
    parser.add_argument("--query-seconds", type=float, default=120, help="time per query kind")
    parser.add_argument(
        "--unbounded", action="store_true", help="no node limit (the API's largest over HTTP)"
    )
    parser.add_argument("--node-limit", type=int, default=1000, help="nodeLimit of the queries")
    parser.add_argument(
        "--query-timeout", type=float, default=300, help="give up a kind after a query this long"
    )
    parser.add_argument(
        "--retention", type=float, default=0.1, help="the oldest fraction of events to remove"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the store calls")
    parser.add_argument(
        "--kinds",
        default=",".join(("lineage", *VIEWS, "asof", "columns")),
        help="the query kinds asked (lineage is the job view the views are compared with)",
    )
    parser.add_argument(
        "--serve", action="store_true", help="query lineage-collector serve in its own process"
    )
    parser.add_argument("--reuse", action="store_true", help="keep what earlier runs loaded")
    parser.add_argument("--keep", action="store_true", help="keep the PostgreSQL database")
    parser.add_argument("--report", action="store_true", help="only print the table")
    args = parser.parse_args(argv)
    args.data.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # finally blocks stop the servers
    results = Results(args.data / "million-results.json")
    if args.report:
        print(table(results))
        return 0
    graph = Graph(args.events, args.seed, parents=True)
    phases = args.phases.split(",")
    kinds = args.stores.split(",")
    print(
        f"graph: {graph.events:,} events, {graph.jobs:,} jobs, "
        f"{graph.datasets_per_layer * LAYERS:,} datasets (+{graph.datasets_per_layer:,} sources) "
        f"in {LAYERS} layers; cpus {os.cpu_count()}; load average {load_average()}",
        flush=True,
    )
    source = events_file(graph, args.data)
    if not args.reuse and "load" in phases:
        _reset(kinds, args.data, results, pg_name(args.events))
    stores = Stores(args.data, args.events)
    try:
        for kind in kinds:
            if "load" in phases:
                load(kind, stores, source, results, args)
            if "export" in phases:
                export(kind, stores, results, args)
            if "roundtrip" in phases:
                roundtrip(kind, stores, graph, results, args)
            if "query" in phases:
                query(kind, stores, graph, results, args)
            if "catalogue" in phases:
                catalogue(kind, stores, graph, results, args)
            if "retention" in phases:
                retention(kind, stores, graph, results, args)
            stores.close_stores()
    finally:
        stores.close(drop_pg=not args.keep and "postgres" in kinds)
    print("\n" + table(results))
    return 0


def _reset(kinds: list[str], data: Path, results: Results, pg: str) -> None:
    """A fresh load: the stores' earlier data removed."""
    for kind in kinds:
        results.drop(kind)
        if kind == "sqlite":
            shutil.rmtree(data / "sqlite", ignore_errors=True)
        elif kind == "document":
            shutil.rmtree(data / "secantus", ignore_errors=True)
        elif kind == "graph":
            shutil.rmtree(data / "falkordb", ignore_errors=True)
        elif kind == "postgres":
            _drop_pg(pg)


if __name__ == "__main__":
    sys.exit(main())
