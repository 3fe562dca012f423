"""What a job's runs cost the document store: ``runs_of_job`` and ``latest_runs`` from the run
summaries (``<collection>_runs``, ``<collection>_latest``) against, as the baseline, the fold of
the job's events that answered them before (what a database whose summaries are not derived yet
still reads), interleaved in one run on one SecantusDB server, with the answers asserted equal.

The jobs are a streaming consumer whose one run holds ``--heartbeats`` RUNNING heartbeats (its
run never completes: every read of its runs grouped all of them) and a batch job of ``--runs``
runs, a START and a COMPLETE each. Run: ``python bench/bench_document_runs.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from _bench_common import load_average
from servers import secantus_server

from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.stores.document import DocumentLineageStore
from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY

PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/bench"
SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
NS = "bench.runs"
T0 = datetime(2025, 1, 1, tzinfo=UTC)
BEAT = {
    HEARTBEAT_FACET_KEY: {
        "_producer": PRODUCER,
        "_schemaURL": "https://github.com/lineage-sdk/lineage-sdk/heartbeat.json",
        "intervalS": 30,
    }
}


class _FoldedFromEvents(DocumentLineageStore):
    """The baseline: the summaries never read as derived, so every read folds the events."""

    def _ready(self, derived: Any) -> bool:
        return False


def _event(job: str, run_id: str, event_type: str, seconds: float, beat: bool) -> dict[str, Any]:
    return {
        "eventType": event_type,
        "eventTime": (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z"),
        "run": {"runId": run_id, "facets": dict(BEAT) if beat else {}},
        "job": {"namespace": NS, "name": job, "facets": {}},
        "inputs": [{"namespace": NS, "name": f"{job}_in", "facets": {}}],
        "outputs": [{"namespace": NS, "name": f"{job}_out", "facets": {}}],
        "producer": PRODUCER,
        "schemaURL": SCHEMA,
    }


def _events(heartbeats: int, runs: int) -> list[dict[str, Any]]:
    stream = str(uuid.uuid4())
    out = [_event("stream", stream, "START", 0, False)]
    out += [_event("stream", stream, "RUNNING", 30 * i, True) for i in range(1, heartbeats + 1)]
    for r in range(runs):
        run_id = str(uuid.uuid4())
        out += [_event("batch", run_id, "START", 3600 * r, False)]
        out += [_event("batch", run_id, "COMPLETE", 3600 * r + 60, False)]
    return out


def _time(
    read: Callable[[DocumentLineageStore], Any], store: DocumentLineageStore
) -> tuple[float, Any]:
    start = time.perf_counter()
    answer = read(store)
    return (time.perf_counter() - start) * 1000, answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--heartbeats", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--queries", type=int, default=15, help="timed reads per kind and code")
    args = parser.parse_args(argv)
    with secantus_server() as server:
        config = ConnectionConfig(uri=server.uri, database="bench", timeout_ms=600_000)
        store = DocumentLineageStore(config, collection_name="runs")
        store.open()
        baseline = _FoldedFromEvents(config, collection_name="runs")
        baseline.open()
        events = _events(args.heartbeats, args.runs)
        for start in range(0, len(events), 1000):
            store.write_batch([build_record(e) for e in events[start : start + 1000]])
        print(
            f"{len(events)} events: 'stream' 1 run of {args.heartbeats} heartbeats, "
            f"'batch' {args.runs} runs; load average {load_average()}"
        )
        reads: dict[str, Callable[[DocumentLineageStore], Any]] = {
            "runs_of_job stream": lambda s: list(s.runs_of_job(NS, "stream")),
            "runs_of_job batch (first page of 100)": lambda s: list(s.runs_of_job(NS, "batch")),
            "latest_runs of both": lambda s: s.latest_runs([(NS, "stream"), (NS, "batch")]),
        }
        print(f"{'read':40} {'summaries ms':>13} {'events ms':>10} {'ratio':>7}  (medians)")
        for name, read in reads.items():
            new: list[float] = []
            old: list[float] = []
            for _ in range(args.queries):  # alternated, so both see the same machine
                took, answer = _time(read, store)
                new.append(took)
                took, expected = _time(read, baseline)
                old.append(took)
                assert answer == expected, name
            a, b = statistics.median(new), statistics.median(old)
            print(f"{name:40} {a:13.1f} {b:10.1f} {a / b:6.3f}x")
        print(f"load average after: {load_average()}")
        store.close()
        baseline.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
