"""A fleet of collectors into PostgreSQL: 2 and 3 `lineage-collector run` processes against 1,
consuming the same pre-filled quorum queue, in the same run (rounds alternate the fleet sizes).

    python bench/bench_fleet.py [--events 20000] [--rounds 2] [--pg postgresql+psycopg://...]
                                [--json PATH]

Each fleet gets a PostgreSQL database of its own (created, then dropped) and a unique topic on
a vhost of the run's own on the broker at 127.0.0.1:5672 (both deleted afterwards). Time runs from the first stored event
to the last (process start-up is not counted), read from the store's row count. The ratios only
mean something on a machine with a core per collector plus one for the broker and one for
PostgreSQL; take figures on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pika
import sqlalchemy as sa
from bench_collector import URL, delete_queues, make_events, prefill

from lineage_sdk.collector.topology import Topology
from lineage_sdk.config.schema import LineageConfig

PG = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def _admin(pg: str, statement: str) -> None:
    engine = sa.create_engine(pg, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(statement))
    finally:
        engine.dispose()


def _count(engine: sa.Engine) -> int:
    try:
        with engine.connect() as conn:
            # The sql backend's events table (default prefix); lineage_events was the old store's.
            return int(conn.execute(sa.text("SELECT count(*) FROM lineage_ev")).scalar_one())
    except sa.exc.DBAPIError:
        return 0  # the tables are not there yet


def fleet_rate(bodies: list[bytes], collectors: int, pg: str, workdir: Path) -> float:
    """events/s stored by ``collectors`` processes sharing one queue and one database."""
    topic = f"bench.fleet.{uuid.uuid4().hex[:8]}"
    database = f"bench_fleet_{uuid.uuid4().hex[:8]}"
    db_url = sa.make_url(pg).set(database=database).render_as_string(hide_password=False)
    _admin(pg, f'CREATE DATABASE "{database}"')
    topology = Topology.from_config(LineageConfig(collector_topic=topic))
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    channel = conn.channel()
    engine = sa.create_engine(db_url)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        topology.declare(channel)
        prefill(topic, topology.queue, bodies)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGE_")}
        env.update(
            LINEAGE_COLLECTOR_TOPIC=topic,
            LINEAGE_RABBITMQ_URL=URL,
            LINEAGE_STORE_BACKEND="sql",
            LINEAGE_STORE_SQL_URL=db_url,
            LINEAGE_LOG_LEVEL="WARNING",
        )
        for number in range(collectors):
            log = open(workdir / f"{topic}-{number}.log", "wb")  # noqa: SIM115 - child keeps it
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "lineage_sdk.collector.cli", "run"],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        deadline = time.monotonic() + 300
        while (stored := _count(engine)) == 0:
            if time.monotonic() > deadline:
                raise RuntimeError("no collector stored anything")
            time.sleep(0.005)
        start, first = time.perf_counter(), stored
        while (stored := _count(engine)) < len(bodies):
            if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                raise RuntimeError(f"collectors stopped at {stored} of {len(bodies)}")
            time.sleep(0.02)
        return (len(bodies) - first) / (time.perf_counter() - start)
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        engine.dispose()
        delete_queues(channel, topology)
        channel.exchange_delete(topic)
        conn.close()
        _admin(pg, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pg", default=PG, help="an admin URL of the PostgreSQL server")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    bodies = make_events(args.events)
    workdir = Path(os.environ.get("TMPDIR", "/tmp"))
    rounds = []
    for round_no in range(1, args.rounds + 1):
        sizes = (1, 2, 3) if round_no % 2 else (3, 2, 1)
        rates = {n: fleet_rate(bodies, n, args.pg, workdir) for n in sizes}
        figures = {
            "one": rates[1],
            "two": rates[2],
            "three": rates[3],
            "two_ratio": rates[2] / rates[1],
            "three_ratio": rates[3] / rates[1],
        }
        rounds.append(figures)
        print(
            f"round {round_no}: 1 collector {rates[1]:7.0f} events/s, "
            f"2: {rates[2]:7.0f} ({figures['two_ratio']:.2f}x), "
            f"3: {rates[3]:7.0f} ({figures['three_ratio']:.2f}x)",
            flush=True,
        )
    summary = {"events": args.events, "rounds": rounds}
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
