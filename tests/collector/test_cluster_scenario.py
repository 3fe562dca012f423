"""Issue 13, item 5, the whole scenario: a fleet on a RabbitMQ cluster survives its queue
leader's death and a collector's.

A private 3-node cluster on loopback (tests/brokers.py). 2 producer processes record
``LINEAGE_SCENARIO_RUNS`` runs in all (20,000 by default: 40,000 START and COMPLETE events)
through the SDK and the RabbitMQ exporter, each given all three addresses; 3
``lineage-collector run`` processes write into a PostgreSQL database made for the test. Mid-stream
the node that leads the main quorum queue is SIGKILLed (one producer and one collector are
connected to it, and reconnect while the queue elects a new leader), then one collector is
SIGKILLed; then both are started again. At the end the store holds every event exactly once
(compared as sets of ids) and the dead-letter queue is empty. The figures (recovery after the
kill, runtime) are printed; run with ``-s`` to see them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest
import sqlalchemy as sa
from brokers import RabbitCluster, RabbitNode
from collector_helpers import wait_until
from leftovers import suite_name

from lineage_sdk.collector.topology import Topology
from lineage_sdk.config.schema import LineageConfig

pytestmark = [
    pytest.mark.rabbitmq,
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.timeout(400),
]

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
PRODUCER = str(Path(__file__).resolve().parent / "cluster_producer.py")
RUNS = int(os.environ.get("LINEAGE_SCENARIO_RUNS", "20000"))  # in all, over both producers
PRODUCERS, COLLECTORS = 2, 3
RATE = 1000.0  # runs a second per producer: the stream lasts RUNS / 2000 s


def _admin(statement: str) -> None:
    engine = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(statement))
    finally:
        engine.dispose()


@pytest.fixture
def database() -> Iterator[str]:
    """A PostgreSQL database of the test's own, dropped afterwards."""
    name = suite_name("lineage_scenario")  # tagged: the session-end check finds a leftover
    _admin(f'CREATE DATABASE "{name}"')
    try:
        yield sa.make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)
    finally:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _leader(node: RabbitNode, queue: str) -> str:
    for line in node.ctl("list_queues", "name", "leader").splitlines():
        name, _, leader = line.partition("\t")
        if name == queue:
            return leader.strip()
    return ""


def _declare_ok(url: str, queue: str) -> Any:
    """The broker's Queue.DeclareOk for ``queue`` (message and consumer counts)."""
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        return connection.channel().queue_declare(queue, passive=True).method
    finally:
        connection.close()


def _depth(url: str, queue: str) -> int:
    return int(_declare_ok(url, queue).message_count)


def _consumers(url: str, queue: str) -> int:
    return int(_declare_ok(url, queue).consumer_count)


def _lines(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def _rotate(urls: list[str], first: int) -> str:
    return ",".join(urls[first:] + urls[:first])


def test_fleet_survives_the_queue_leaders_death_and_a_collectors(
    tmp_path: Path, database: str
) -> None:
    started = time.monotonic()
    topic = f"lt_scenario_{uuid.uuid4().hex[:8]}"
    topology = Topology.from_config(LineageConfig(collector_topic=topic))
    engine = sa.create_engine(database)

    def stored_count() -> int:
        try:
            with engine.connect() as conn:
                query = sa.text("SELECT count(*) FROM lineage_ev")
                return int(conn.execute(query).scalar_one())
        except sa.exc.DBAPIError:
            return 0  # the collectors have not created the tables yet

    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGE_", "OPENLINEAGE_"))}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    env["LINEAGE_RABBITMQ_RECONNECT_MAX_MS"] = "1000"
    processes: list[subprocess.Popen[bytes]] = []

    def collector(number: int, urls: str) -> subprocess.Popen[bytes]:
        with open(tmp_path / f"collector-{number}.log", "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "lineage_sdk.collector.cli", "run"],
                env={
                    **env,
                    "LINEAGE_COLLECTOR_TOPIC": topic,
                    "LINEAGE_RABBITMQ_URLS": urls,
                    "LINEAGE_STORE_BACKEND": "sql",
                    "LINEAGE_STORE_SQL_URL": database,
                    "LINEAGE_COLLECTOR_RETRY_DELAYS_MS": "200,400",
                },
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=tmp_path,
            )
        processes.append(process)
        return process

    with RabbitCluster(3) as cluster:
        cluster_up = time.monotonic() - started
        connection = pika.BlockingConnection(pika.URLParameters(cluster.urls[0]))
        try:
            topology.declare(connection.channel())
        finally:
            connection.close()
        leader_name = _leader(cluster.nodes[0], topology.queue)
        leader = next(node for node in cluster.nodes if node.node == leader_name)
        survivor = next(node for node in cluster.nodes if node is not leader)
        # The leader's address first, then the others: producer 0 and collector 0 connect to
        # the leader and must reconnect elsewhere while the queue elects a new one.
        urls = [leader.url, *(n.url for n in cluster.nodes if n is not leader)]
        try:
            collectors = [collector(i, _rotate(urls, i)) for i in range(COLLECTORS)]
            wait_until(
                lambda: _consumers(survivor.url, topology.queue) == COLLECTORS, 60, 0.2, "consumers"
            )
            ids = [tmp_path / f"ids-{i}.txt" for i in range(PRODUCERS)]
            producers = []
            for i in range(PRODUCERS):
                args = [topic, str(tmp_path / f"spool-{i}"), str(ids[i]), str(RUNS // PRODUCERS)]
                producers.append(
                    subprocess.Popen(
                        [sys.executable, PRODUCER, _rotate(urls, i), *args, str(RATE)],
                        env=env,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                    )
                )
            processes.extend(producers)
            stream_start = time.monotonic()

            # 1. The queue's leader dies mid-stream.
            wait_until(lambda: sum(map(_lines, ids)) >= RUNS // 5, 120, 0.05, "a fifth sent")
            leader.kill()
            killed_at = time.monotonic()
            at_kill = stored_count()
            wait_until(lambda: stored_count() >= at_kill + 1000, 60, 0.1, "storing again")
            recovery_s = time.monotonic() - killed_at
            assert at_kill < 2 * RUNS, "the leader was not killed mid-stream"

            # 2. Then a collector dies (the one that was connected to the leader).
            collectors[0].kill()
            collectors[0].wait(10)
            before_collector_kill = stored_count()

            # 3. Both come back.
            leader.spawn()
            collectors.append(collector(COLLECTORS, _rotate(urls, 0)))

            results, warnings = [], []
            for producer in producers:
                try:
                    out, err = producer.communicate(timeout=180)
                except subprocess.TimeoutExpired:
                    producer.kill()
                    out, err = producer.communicate()
                    raise AssertionError(err.decode()[-4000:]) from None
                assert producer.returncode == 0, err.decode()[-3000:]
                warnings.append(err.decode())
                results.append(json.loads(out.decode().strip().splitlines()[-1]))
            stream_s = time.monotonic() - stream_start
            assert all(r["spool_bytes"] == 0 for r in results), results
            leader.await_startup()

            expected = {
                (run_id, kind)
                for path in ids
                for run_id in path.read_text().split()
                for kind in ("START", "COMPLETE")
            }
            assert len(expected) == 2 * RUNS
            wait_until(lambda: stored_count() >= len(expected), 180, 0.5, "every event stored")
            drained_s = time.monotonic() - stream_start
            time.sleep(1.0)  # anything redelivered late would be stored by now
            with engine.connect() as conn:
                rows = [
                    (str(run_id), str(kind))
                    for run_id, kind in conn.execute(
                        sa.text("SELECT run_id, event_type FROM lineage_ev")
                    )
                ]
            assert len(rows) == len(set(rows)) == len(expected)
            assert set(rows) == expected
            assert _depth(survivor.url, topology.dead_letter_queue) == 0
            assert _depth(survivor.url, topology.queue) == 0
            assert _leader(survivor, topology.queue) not in ("", leader_name)
            assert all(p.poll() is None for p in collectors[1:]), "a collector exited"
            logs = "".join(warnings) + "".join(
                path.read_text() for path in tmp_path.glob("collector-*.log")
            )
            print(
                f"\nscenario: {RUNS} runs, {len(expected)} events from {PRODUCERS} producers"
                f" through {COLLECTORS} collectors; cluster up in {cluster_up:.0f}s; leader"
                f" killed at {at_kill} stored, storing again (+1000) {recovery_s:.1f}s later;"
                f" collector killed at {before_collector_kill}; producers done in"
                f" {stream_s:.0f}s, all stored {drained_s:.0f}s after the stream began;"
                f" retried by the exporters {sum(r['retried'] for r in results)}, which"
                f" reconnected {logs.count('has nacked every publish')} time(s) after only"
                f" nacks; collectors reconnected {logs.count('none reached this consumer')}"
                " time(s) for a consumer fed nothing;"
                f" total {time.monotonic() - started:.0f}s"
            )
        finally:
            for process in processes:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(5)
            engine.dispose()
