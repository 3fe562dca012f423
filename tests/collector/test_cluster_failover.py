"""Fail over between the nodes of a RabbitMQ cluster (issue 13, item 5).

A private 3-node cluster on loopback (tests/brokers.py). A producer process publishes through
the RabbitMQ exporter and a `lineage-collector run` process consumes into SQLite, both given all
three addresses, so both connect to the first one they are given. That node is SIGKILLed
mid-stream: both must move to another node, and
every event must be stored exactly once (compared as sets of ids), with the dead-letter queue
empty.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pika
import pytest
from brokers import RabbitCluster
from collector_helpers import wait_until

from lineage_sdk.collector.topology import Topology
from lineage_sdk.config.schema import LineageConfig

pytestmark = [pytest.mark.rabbitmq, pytest.mark.slow, pytest.mark.timeout(150)]

PRODUCER = str(Path(__file__).resolve().parent / "cluster_producer.py")
RUNS = 1500  # START and COMPLETE each: 3,000 events
RATE = 150.0


def _clients_of(port: int) -> int:
    """Established loopback TCP connections to ``port`` seen from the client side (this
    machine's /proc), counted without asking the broker."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                remote, state = fields[2], fields[3]
                if state == "01" and int(remote.rsplit(":", 1)[1], 16) == port:
                    count += 1
    return count


def _recorded(ids: Path) -> int:
    """How many runs the producer has recorded so far (one run id a line)."""
    return len(ids.read_text().split()) if ids.exists() else 0


def _stored(db: Path) -> list[tuple[str, str]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return list(conn.execute("SELECT run_id, event_type FROM lineage_ev"))


def _depth(url: str, queue: str) -> int:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        return int(connection.channel().queue_declare(queue, passive=True).method.message_count)
    finally:
        connection.close()


def _leader(cluster: RabbitCluster, queue: str, via: int) -> str:
    for line in cluster.nodes[via].ctl("list_queues", "name", "leader").splitlines():
        name, _, leader = line.partition("\t")
        if name == queue:
            return leader.strip()
    return ""


def test_producer_and_collector_fail_over_when_their_node_dies(tmp_path: Path) -> None:
    topic = f"lt_cluster_{uuid.uuid4().hex[:8]}"
    topology = Topology.from_config(LineageConfig(collector_topic=topic))
    db, ids, spool = tmp_path / "lineage.db", tmp_path / "ids.txt", tmp_path / "spool"
    with RabbitCluster(3) as cluster:
        # Declare the topology first, find the node that leads the main queue, and give both
        # clients the address of another node first: they connect there, and killing it fails
        # both over. (Killing the queue's leader is test_cluster_scenario.py's part.)
        connection = pika.BlockingConnection(pika.URLParameters(cluster.urls[0]))
        try:
            topology.declare(connection.channel())
        finally:
            connection.close()
        leader = _leader(cluster, topology.queue, 0)
        first = next(node for node in cluster.nodes if node.node != leader)
        others = [node for node in cluster.nodes if node is not first]
        urls = ",".join([first.url, *(node.url for node in others)])
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("LINEAGE_", "OPENLINEAGE_"))
        }
        env["PYTHONPATH"] = os.pathsep.join(sys.path)
        collector_env = {
            **env,
            "LINEAGE_COLLECTOR_TOPIC": topic,
            "LINEAGE_RABBITMQ_URLS": urls,
            "LINEAGE_RABBITMQ_RECONNECT_MAX_MS": "1000",
            "LINEAGE_STORE_BACKEND": "sql",
            "LINEAGE_STORE_SQL_URL": f"sqlite:///{db}",
            "LINEAGE_COLLECTOR_RETRY_DELAYS_MS": "200,400",
        }
        with open(tmp_path / "collector.log", "wb") as log:
            collector = subprocess.Popen(
                [sys.executable, "-m", "lineage_sdk.collector.cli", "run"],
                env=collector_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=tmp_path,
            )
        producer = None
        try:
            wait_until(lambda: len(first.ctl("list_consumers").split()) > 0, 30, 0.5, "consumer")
            producer = subprocess.Popen(
                [sys.executable, PRODUCER, urls, topic, str(spool), str(ids), str(RUNS), str(RATE)],
                env={**env, "LINEAGE_RABBITMQ_RECONNECT_MAX_MS": "1000"},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            # Kill once both ends are under way, by what they did rather than a fixed sleep, and
            # with no rabbitmqctl call in between: on a loaded machine one took longer than the
            # whole stream. Both clients' sockets to the first node are read from /proc instead.
            wait_until(lambda: _recorded(ids) >= RUNS // 10, 30, 0.05, "the producer's first runs")
            wait_until(lambda: db.exists() and len(_stored(db)) > 0, 30, 0.05, "a first store")
            assert _clients_of(first.amqp_port) >= 2, "both clients must be on the first node"
            stored_before = len(_stored(db))
            recorded_before = _recorded(ids)
            first.kill()  # SIGKILL: the node both clients are connected to

            try:
                out, err = producer.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                producer.kill()
                out, err = producer.communicate()
                raise AssertionError(err.decode()[-4000:]) from None
            assert producer.returncode == 0, err.decode()[-3000:]
            counters = json.loads(out.decode().strip().splitlines()[-1])
            assert counters["spool_bytes"] == 0
            expected = {
                (run_id, kind)
                for run_id in ids.read_text().split()
                for kind in ("START", "COMPLETE")
            }
            assert len(expected) == 2 * RUNS
            wait_until(lambda: len(_stored(db)) >= len(expected), 60, 0.2, "every event stored")
            time.sleep(1.0)  # anything redelivered late would be stored by now
            rows = _stored(db)
            assert len(rows) == len(set(rows)) == len(expected)
            assert set(rows) == expected
            assert 0 < stored_before < len(expected), "the node was not killed mid-stream"
            assert recorded_before < RUNS, "the producer had finished before the kill"
            live = others[0].url
            assert _depth(live, topology.dead_letter_queue) == 0
            assert _depth(live, topology.queue) == 0
            assert _leader(cluster, topology.queue, cluster.nodes.index(others[0])) == leader
            assert collector.poll() is None  # still running, on another node
            log_text = (tmp_path / "collector.log").read_text()
            assert "lost the broker connection" in log_text
        finally:
            for process in (producer, collector):
                if process is not None and process.poll() is None:
                    process.send_signal(signal.SIGTERM)
                    try:
                        process.wait(20)
                    except subprocess.TimeoutExpired:
                        process.kill()
