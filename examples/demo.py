"""The lineage-sdk demo: a small ETL pipeline recorded with @track_lineage, no server needed.

It shows nested runs (each step is a child of the pipeline run), async steps running at once,
a generator step, datasets found at run time, and a failing step whose FAIL event carries the
error. The events are captured in memory and printed as a run tree, then stored through the
collector's LineageManager in the embedded SQLite store, and the lineage graph of the report is
printed from that store. ``--serve`` then serves the graph page on http://127.0.0.1:5000/.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import lineage_sdk
from lineage_sdk import LineageDataset, current_run, track_lineage
from lineage_sdk.config import load_config
from lineage_sdk.config.schema import LineageConfig, ProducerConfig
from lineage_sdk.testing import capture_lineage

PG = "postgres://db.example.com:5432"
LAKE = "s3://lake"
ORDERS = LineageDataset(PG, "shop.public.orders")
CUSTOMERS = LineageDataset(PG, "shop.public.customers")
CLEAN_ORDERS = LineageDataset(LAKE, "clean/orders")
ENRICHED = LineageDataset(LAKE, "enriched/orders")
REPORT = LineageDataset(LAKE, "reports/daily_revenue")


@track_lineage(job_name="extract_orders", inputs=[ORDERS], outputs=[CLEAN_ORDERS])
def extract_orders() -> list[dict[str, Any]]:
    return [{"id": i, "customer": i % 3, "amount": 10.0 * i} for i in range(1, 7)]


@track_lineage(job_name="fetch_customer", inputs=[CUSTOMERS])
async def fetch_customer(customer_id: int) -> dict[str, Any]:
    await asyncio.sleep(0.01)
    return {"id": customer_id, "country": ["FR", "DE", "US"][customer_id]}


@track_lineage(job_name="enrich_orders", inputs=[CLEAN_ORDERS], outputs=[ENRICHED])
async def enrich_orders(orders: list[dict[str, Any]]) -> list[dict[str, Any]]:
    customers = await asyncio.gather(*(fetch_customer(c) for c in {o["customer"] for o in orders}))
    by_id = {c["id"]: c for c in customers}
    return [{**o, "country": by_id[o["customer"]]["country"]} for o in orders]


@track_lineage(job_name="stream_report_rows", inputs=[ENRICHED])
def stream_report_rows(orders: list[dict[str, Any]]):  # a generator: one run for the iteration
    totals: dict[str, float] = defaultdict(float)
    for order in orders:
        totals[order["country"]] += order["amount"]
    current_run().add_output(REPORT)  # a dataset known only at run time
    yield from sorted(totals.items())


@track_lineage(job_name="notify_finance", inputs=[REPORT])
def notify_finance() -> None:
    raise ConnectionError("smtp.example.com refused the connection")


@track_lineage(job_name="daily_revenue_pipeline")
def pipeline() -> list[tuple[str, float]]:
    orders = extract_orders()
    enriched = asyncio.run(enrich_orders(orders))
    rows = list(stream_report_rows(enriched))
    try:
        notify_finance()
    except ConnectionError as exc:
        print(f"  (notify_finance failed as planned: {exc})")
    return rows


def print_run_tree(events: list[dict[str, Any]]) -> None:
    runs: dict[str, dict[str, Any]] = {}
    children: dict[str | None, list[str]] = defaultdict(list)
    for event in events:
        run_id = event["run"]["runId"]
        run = runs.setdefault(run_id, {"job": event["job"]["name"], "events": [], "outputs": set()})
        run["events"].append(event["eventType"])
        run["outputs"].update(f"{d['namespace']}/{d['name']}" for d in event.get("outputs", []))
        parent = event["run"]["facets"].get("parent")
        run["parent"] = parent["run"]["runId"] if parent else None
    for run_id, run in runs.items():
        children[run["parent"]].append(run_id)

    def show(run_id: str, depth: int) -> None:
        run = runs[run_id]
        state = run["events"][-1]
        mark = {"COMPLETE": "ok  ", "FAIL": "FAIL"}.get(state, state)
        outputs = f"  -> {', '.join(sorted(run['outputs']))}" if run["outputs"] else ""
        print(f"  {'   ' * depth}[{mark}] {run['job']}  ({' > '.join(run['events'])}){outputs}")
        for child in children[run_id]:
            show(child, depth + 1)

    for root in children[None]:
        show(root, 0)


def store_in_sqlite(events: list[dict[str, Any]], workdir: Path) -> Path:
    """Write the events through the collector's own path into the embedded SQLite store."""
    from lineage_sdk.collector.manager import LineageManager
    from lineage_sdk.collector.service import LineageCollectorService

    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "lineage.db"
    config_file = workdir / "lineage.toml"
    config_file.write_text(
        '[lineage]\n[lineage.store]\nbackend = "sql"\n'
        f'[lineage.store.sql]\nurl = "sqlite:///{db}"\n'
    )
    manager = LineageManager(load_config(path=config_file, environ={}))
    manager.build()
    manager.connect_sync()
    try:
        service = LineageCollectorService(manager)
        for event in events:
            service.handle_lineage_event_sync(event)
    finally:
        manager.close_sync()
    return config_file


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true", help="also print every event as JSON")
    parser.add_argument("--serve", action="store_true", help="serve the graph page afterwards")
    parser.add_argument("--port", type=int, default=5000, help="port for --serve")
    parser.add_argument(
        "--workdir", type=Path, default=Path(".demo"), help="where the SQLite file goes"
    )
    args = parser.parse_args()

    config = LineageConfig(
        producer=ProducerConfig(
            job_namespace="demo",
            producer_uri="https://github.com/lineage-sdk/lineage-sdk/tree/main/examples",
        )
    )
    print("Running the example pipeline with lineage recorded in memory...")
    with capture_lineage(config) as captured:
        rows = pipeline()
    events = captured.events
    lineage_sdk.shutdown()
    print(f"  report rows: {rows}")
    print(
        f"\n{len(events)} OpenLineage events from {len({e['run']['runId'] for e in events})} runs:\n"
    )
    print_run_tree(events)
    if args.json:
        import json

        for event in events:
            print(json.dumps(event, indent=2))
    failed = [e for e in events if e["eventType"] == "FAIL"]
    if failed:
        print(f"\nFAIL event error: {failed[0]['run']['facets']['errorMessage']['message']}")

    config_file = store_in_sqlite(events, args.workdir.resolve())
    node = f"dataset:{REPORT.namespace}:{REPORT.name}"
    print(f"\nStored in the embedded SQLite store ({config_file.parent / 'lineage.db'}).")
    print(f"Upstream lineage of {node}, read back from the store:\n")
    from lineage_sdk.cli import app as lineage_cli

    try:
        lineage_cli(
            ["--config", str(config_file), "graph", node, "--upstream", "--depth", "5"],
            standalone_mode=False,
        )
    except SystemExit as exc:  # typer exits 0 after a command
        if exc.code not in (0, None):
            return int(exc.code)
    if args.serve:
        from lineage_sdk.collector.api import serve

        print(f"\nGraph page: http://127.0.0.1:{args.port}/#nodeId={node}  (Ctrl-C to stop)")
        serve(load_config(path=config_file, environ={}), "127.0.0.1", args.port)
    else:
        print(
            "\nSee it as a graph: ./dev -s demo -- --serve, then open "
            f"http://127.0.0.1:{args.port}/#nodeId={node}"
        )
        cli = Path(sys.executable).parent / "lineage"
        print(f"Or ask the CLI: {cli} --config {config_file} impact job:demo:extract_orders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
