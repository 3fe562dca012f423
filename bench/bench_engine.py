"""The engine against the stores it replaced, same events, same run (issue 31's ratio targets).

    python bench/bench_engine.py [--stores sqlite,postgres] [--events 100000] [--queries 200]
                                 [--write-events 20000] [--rounds 3] [--skip-write] [--json PATH]
                                 [--baseline REV] [--baseline-store old|engine]

The old stores (``SqlStore``, ``Neo4jLineageStore``) exist only in git after issue 31 (the last
commit with them is ``c501a8c``), so the bench sets two source trees against each other: the
baseline revision ``--baseline`` (default ``c501a8c``), checked out once as a git worktree under
``.bench-results/baseline-REV`` (``git worktree add --detach``; kept for the next run, remove it
with ``git worktree remove``), and the current tree. Each side is a process of its own
(``bench/_engine_worker.py``, ``PYTHONPATH`` its tree): the baseline holds the old store of
each kind (``--baseline-store engine``: the baseline's ``EngineStore`` instead, to compare the
engine with an earlier engine), the current side ``EngineStore`` over the current backend
(``SqlBackend`` with its own tables, ``GraphBackend`` on its own graph). Both are fed the same
events (one NDJSON file, each side building its records with its own code), asked in the same
order, and time each call themselves; this process only orders the calls, so at most one side
works at a time.

* **reads**: the ``bench_million`` graph shape at ``--events`` events (20 layers, each job run 5
  times, schema and column lineage on every output), loaded once into both with ``write_batch``
  in batches of 1,000. Then the store-object reads of ``bench_million``'s query phase, from the
  same random roots: lineage at depth 10 (``node_limit`` 1,000), the same with ``asOf`` (the
  API's query function, no HTTP), column lineage at depth 5. Old and new answer the same root
  one after the other (which goes first alternates), so both see the same machine; p50 / p95 /
  p99 ms and the ratio new / old.
* **writes**: ``--write-events`` events of the same shape written with ``write_batch`` (batches
  of 200) into an empty store, old and new alternating for ``--rounds`` rounds; events/s each and
  the ratio of the medians, by wall time and by the writing process's CPU.

``sqlite`` is a file in a temporary folder (one for each side); ``graph`` a graph on a FalkorDB
started here (its Redis protocol); ``postgres`` a database of the bench's own on 127.0.0.1:5432,
created and dropped, the two sides' tables in it under different prefixes, with ``VACUUM
ANALYZE`` after the load (the shared server runs without autovacuum; a deployment's would do
it). Both sides run with ``tune_gc``, as ``serve`` and ``run`` do (at CPython's default
thresholds the engine's writes spent a third of their time collecting).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from _bench_common import load_average, postgres_database
from bench_million import JOB_NS, NS, RUN_SPAN, T0, Graph, generate
from servers import FalkorDBServer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BASELINE = "c501a8c"  # the last commit with the old stores
FIELDS = ("id", "key", "value", "updated_at")
SIDES = ("old", "new")
#: Each side's table prefix on PostgreSQL (one database holds both).
PREFIX = {"old": "lineage_", "new": "engine_"}


def _run_git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def baseline_tree(rev: str) -> Path:
    """The worktree of ``rev`` under ``.bench-results/`` (added on first use, then kept)."""
    commit = _run_git("rev-parse", "--verify", f"{rev}^{{commit}}")
    path = ROOT / ".bench-results" / f"baseline-{commit[:12]}"
    if not (path / "lineage_sdk").is_dir():
        path.parent.mkdir(exist_ok=True)
        print(f"checking out {rev} ({commit[:12]}) as a worktree at {path}", flush=True)
        _run_git("worktree", "add", "--detach", str(path), commit)
    head = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    if head != commit:
        raise SystemExit(f"{path} is at {head[:12]}, not {commit[:12]}: remove it and run again")
    return path


class Worker:
    """One side's process (``_engine_worker.py`` over ``tree``): one request, one answer."""

    def __init__(self, tree: Path) -> None:
        env = dict(os.environ)
        paths = [tree, tree / "exporters", tree / "instrumentation"]
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
        env["BENCH_TREE"] = str(tree)
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "_engine_worker.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )

    def ask(self, op: str, **request: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(orjson.dumps({"op": op, **request}) + b"\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the {op!r} request ended the worker (exit {self.proc.wait()})")
        answer: dict[str, Any] = orjson.loads(line)
        return answer

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(BrokenPipeError, SystemExit):
                self.ask("exit")
        self.proc.wait(60)


class Kinds:
    """Where each kind's old and new store live: SQLite files, PostgreSQL databases of the
    bench's own, graphs on one FalkorDB started here (through its Redis protocol); and the two
    sides' processes."""

    def __init__(self, folder: Path, workers: dict[str, Worker], baseline_store: str) -> None:
        self.folder = folder
        self.workers = workers
        self.stores = {"old": baseline_store, "new": "engine"}
        self.falkor: FalkorDBServer | None = None

    @contextlib.contextmanager
    def pair(self, kind: str, label: str, *, only: str | None = None) -> Iterator[str | None]:
        """Open an empty store of ``kind`` named ``label`` on each side (or just ``only``);
        yields the PostgreSQL URL (None for the other kinds)."""
        opened: list[str] = []
        with contextlib.ExitStack() as stack:
            url = None
            if kind == "postgres":
                url = stack.enter_context(postgres_database(f"lineage_bench_engine_{label}"))
            elif kind == "graph":
                self._falkor()
            elif kind != "sqlite":
                raise SystemExit(f"unknown store kind {kind!r}: sqlite, postgres or graph")
            try:
                for side in SIDES:
                    if only not in (None, side):
                        continue
                    request: dict[str, Any] = {
                        "kind": kind,
                        "store": self.stores[side],
                        "label": label,
                        "url": url or f"sqlite:///{self.folder}/{label}-{side}.db",
                        "table_prefix": PREFIX[side],
                    }
                    if kind == "graph":
                        assert self.falkor is not None
                        request["redis_port"] = self.falkor.redis_port
                        request["graph"] = f"{label}_{side}"
                    self.workers[side].ask("open", **request)
                    opened.append(side)
                yield url
            finally:
                for side in reversed(opened):
                    self.workers[side].ask("close", label=label)

    def _falkor(self) -> None:
        if self.falkor is None:
            self.falkor = FalkorDBServer(persistent=False)
            self.falkor.start()

    def close(self) -> None:
        if self.falkor is not None:
            self.falkor.stop()


def _events_file(folder: Path, events: int, seed: int) -> Path:
    path = folder / f"events-{events}-{seed}.ndjson"
    if not path.exists():
        with path.open("wb") as fh:
            for event in generate(Graph(events, seed)):
                fh.write(orjson.dumps(event) + b"\n")
    return path


def _analyze(url: str | None) -> None:
    """PostgreSQL: ``VACUUM ANALYZE`` after a bulk load (see the module docstring)."""
    if url is None:
        return
    engine = sa.create_engine(url)
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text("VACUUM ANALYZE"))
    finally:
        engine.dispose()


def _percentiles(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)

    def at(q: float) -> float:
        return round(s[min(int(q * len(s)), len(s) - 1)], 1)

    return {"p50": round(statistics.median(s), 1), "p95": at(0.95), "p99": at(0.99)}


def _plan(graph: Graph, seed: int, count: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    plan = []
    for i in range(count):
        layer = rng.randint(8, 12)
        if rng.random() < 0.5:
            node = f"job:{JOB_NS}:{graph.job(layer, rng.randrange(graph.jobs_per_layer))}"
        else:
            node = f"dataset:{NS}:{graph.dataset(layer, rng.randrange(graph.datasets_per_layer))}"
        ds = graph.dataset(layer, rng.randrange(graph.datasets_per_layer))
        plan.append(
            {
                "node": node,
                "direction": ("upstream", "downstream", "both")[i % 3],
                "as_of": T0 + timedelta(seconds=rng.uniform(0, 5 * RUN_SPAN.total_seconds())),
                "field": f"datasetField:{NS}:{ds}:{rng.choice(FIELDS)}",
            }
        )
    return plan


READS = ("lineage", "asof", "columns")


def reads(kind: str, args: argparse.Namespace, kinds: Kinds) -> dict[str, Any]:
    graph = Graph(args.events, args.seed)
    source = _events_file(kinds.folder, args.events, args.seed)
    figures: dict[str, Any] = {}
    with kinds.pair(kind, "reads") as url:
        figures["load_s"] = {
            side: round(
                kinds.workers[side].ask("fill", label="reads", path=str(source), batch=1000)[
                    "seconds"
                ],
                1,
            )
            for side in SIDES
        }
        _analyze(url)
        plan = _plan(graph, args.seed, args.queries + 1)
        for p in plan:
            p["as_of"] = p["as_of"].isoformat()
        for what in READS:
            times: dict[str, list[float]] = {"old": [], "new": []}
            for i, params in enumerate(plan):
                for side in SIDES if i % 2 else SIDES[::-1]:
                    answer = kinds.workers[side].ask(
                        "read", label="reads", what=what, params=params
                    )
                    if i:  # the first (cold) read apart
                        times[side].append(answer["ms"])
            fig: dict[str, Any] = {side: _percentiles(s) for side, s in times.items()}
            for q in ("p50", "p95"):
                fig[f"ratio_{q}"] = round(fig["new"][q] / fig["old"][q], 2)
            figures[what] = fig
            print(f"  {kind} {what}: {fig} load {load_average()}", flush=True)
    return figures


def writes(kind: str, args: argparse.Namespace, kinds: Kinds) -> dict[str, Any]:
    source = _events_file(kinds.folder, args.write_events, args.seed + 1)
    rates: dict[str, list[float]] = {"old": [], "new": []}
    cpu: dict[str, list[float]] = {"old": [], "new": []}
    for round_ in range(args.rounds):
        for side in SIDES if round_ % 2 == 0 else SIDES[::-1]:
            label = f"w{round_}{side}"
            with kinds.pair(kind, label, only=side):
                took = kinds.workers[side].ask("fill", label=label, path=str(source), batch=200)
            rates[side].append(took["events"] / took["seconds"])
            cpu[side].append(took["events"] / took["cpu_s"])
            print(
                f"  {kind} write {side}: {rates[side][-1]:,.0f} events/s "
                f"({cpu[side][-1]:,.0f} a CPU second)",
                flush=True,
            )
    old, new = statistics.median(rates["old"]), statistics.median(rates["new"])
    old_cpu, new_cpu = statistics.median(cpu["old"]), statistics.median(cpu["new"])
    return {
        "old_per_s": round(old),
        "new_per_s": round(new),
        "ratio": round(new / old, 2),
        "old_per_cpu_s": round(old_cpu),
        "new_per_cpu_s": round(new_cpu),
        "ratio_cpu": round(new_cpu / old_cpu, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--write-events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-write", action="store_true")
    parser.add_argument("--skip-read", action="store_true")
    parser.add_argument(
        "--baseline", default=BASELINE, help="the revision whose stores are the baseline"
    )
    parser.add_argument(
        "--baseline-store",
        choices=("old", "engine"),
        default="old",
        help="the baseline's old stores, or its own engine",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"baseline": args.baseline, "baseline_store": args.baseline_store}
    base = baseline_tree(args.baseline)
    print(f"baseline {args.baseline} ({args.baseline_store} stores) at {base}", flush=True)
    workers: dict[str, Worker] = {}
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        try:
            workers["old"] = Worker(base)
            workers["new"] = Worker(ROOT)
            kinds = Kinds(Path(tmp), workers, args.baseline_store)
            try:
                for kind in args.stores.split(","):
                    print(f"== {kind} (load {load_average()})", flush=True)
                    results[kind] = {}
                    if not args.skip_read:
                        results[kind]["reads"] = reads(kind, args, kinds)
                    if not args.skip_write:
                        results[kind]["writes"] = writes(kind, args, kinds)
                        print(f"  {kind} writes: {results[kind]['writes']}", flush=True)
            finally:
                kinds.close()
        finally:
            for worker in workers.values():
                worker.close()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
