"""Quorum queues: the delivery limit parks a message delivered too often, a classic topology is
refused with the command that migrates it, and that command keeps every message once.

Retry and parking on quorum queues are covered by the other collector tests, which run with the
default ``queue_type = "quorum"``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pika
import pytest
import sqlalchemy as sa
from collector_helpers import (
    RABBIT_URL,
    connect,
    drain,
    dumps,
    event_id,
    json_props,
    many_events,
    publish,
    queue_depth,
    running,
    wait_until,
)
from vhosts import session_vhost

from lineage_sdk.collector.dlq import DeadLetterQueue
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.migration import HOLDING_SUFFIX, migrate_topology
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.collector.topology import MIGRATE_COMMAND, Topology, TopologyMismatch
from lineage_sdk.exceptions import LineageError

pytestmark = pytest.mark.rabbitmq


def _declare(topo: Topology) -> None:
    conn = connect()
    try:
        topo.declare(conn.channel())
    finally:
        conn.close()


def _queue_exists(name: str) -> bool:
    conn = connect()
    try:
        conn.channel().queue_declare(name, passive=True)
        return True
    except pika.exceptions.ChannelClosedByBroker:
        return False
    finally:
        if conn.is_open:
            conn.close()


def _delete(*names: str) -> None:
    conn = connect()
    try:
        ch = conn.channel()
        for name in names:
            ch.queue_delete(name)
    finally:
        conn.close()


def test_a_message_delivered_too_often_is_parked_by_the_broker(make_config):
    config = make_config(collector={"delivery_limit": 2})
    topo = Topology.from_config(config)
    _declare(topo)
    publish(config.collector_topic, [b'{"poison": true}'])
    conn = connect()
    try:
        counts = []
        for _ in range(5):  # a consumer that dies holding the message: its channel closes
            ch = conn.channel()
            method, props, _body = ch.basic_get(topo.queue, auto_ack=False)
            if method is None:
                break
            counts.append((props.headers or {}).get("x-delivery-count", 0))
            ch.close()
    finally:
        conn.close()
    assert counts == [0, 1, 2]  # a quorum queue counts deliveries; a classic one would loop
    wait_until(lambda: queue_depth(topo.dead_letter_queue) == 1, 10, message="parked")
    [parked] = DeadLetterQueue(config).list()
    assert parked.reason == "delivery_limit" and parked.body == b'{"poison": true}'
    assert DeadLetterQueue(config).replay(reason="delivery_limit") == 1
    [(props, body)] = drain(topo.queue)
    assert body == b'{"poison": true}'
    headers = props.headers or {}
    assert "x-death" not in headers and headers.get("x-delivery-count") == 0  # a fresh count


def test_a_classic_topology_is_refused_with_the_migrate_command(make_config, tmp_path):
    classic = make_config(collector={"queue_type": "classic"})
    _declare(Topology.from_config(classic))
    config = make_config()
    with pytest.raises(TopologyMismatch) as info, running(config):
        pass
    message = str(info.value)
    assert MIGRATE_COMMAND in message
    assert repr(Topology.from_config(config).dead_letter_queue) in message
    assert "collector.queue_type = 'quorum'" in message

    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGE_", "OPENLINEAGE_"))}
    env.update(
        {
            "LINEAGE_COLLECTOR_TOPIC": config.collector_topic,
            "LINEAGE_RABBITMQ_URL": RABBIT_URL,
            "LINEAGE_STORE_BACKEND": "sql",
            "LINEAGE_STORE_SQL_URL": f"sqlite:///{tmp_path}/cli.db",
            "LINEAGE_COLLECTOR_RETRY_DELAYS_MS": "200,400",
            "COLUMNS": "200",
        }
    )
    cli = [sys.executable, "-m", "lineage_sdk.collector.cli"]
    run = subprocess.run([*cli, "run"], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2  # refused at start-up: no retry can fix it
    assert "Traceback" not in run.stderr and "PRECONDITION_FAILED" not in run.stderr
    errors = [line for line in run.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and MIGRATE_COMMAND in errors[0], run.stderr
    check = subprocess.run([*cli, "check"], env=env, capture_output=True, text=True, timeout=60)
    assert check.returncode == 1
    assert "topology migrate" in " ".join(check.stdout.split()), check.stdout


def _queue_bodies(name: str) -> list[bytes]:
    return [body for _props, body in drain(name)]


def test_migrate_moves_every_message_once_and_is_idempotent(make_config, tmp_path):
    delays = {"retry_delays_ms": [600_000]}  # retried messages stay put during the test
    classic = make_config(collector={"queue_type": "classic", **delays})
    topo_classic = Topology.from_config(classic)
    _declare(topo_classic)
    events = many_events(600)
    main, retry, parked = events[:400], events[400:500], events[500:]
    publish(classic.collector_topic, [dumps(e) for e in main])
    retry_queue = topo_classic.retry_queues[0].name
    conn = connect()
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        for e in retry:
            ch.basic_publish("", retry_queue, dumps(e), json_props(), mandatory=True)
        for e in parked:
            props = json_props(headers={"x-lineage-reason": "store_rejected"})
            ch.basic_publish("", topo_classic.dead_letter_queue, dumps(e), props, mandatory=True)
    finally:
        conn.close()

    config = make_config(collector=delays)
    progress: list[tuple[str, str, int, int]] = []
    steps = migrate_topology(config, lambda *args: progress.append(args))
    topo = Topology.from_config(config)
    assert {s.target for s in steps} >= {topo.queue, retry_queue, topo.dead_letter_queue}
    assert progress and progress[-1][2] == progress[-1][3]
    assert not any(_queue_exists(s.name + HOLDING_SUFFIX) for s in topo.queues())
    _declare(topo)  # the quorum topology is accepted now
    assert migrate_topology(config) == []  # nothing left to do

    publish(config.collector_topic, [dumps(e) for e in events[:1]])  # still bound
    assert sorted(_queue_bodies(topo.queue)) == sorted([dumps(e) for e in main + events[:1]])
    assert sorted(_queue_bodies(retry_queue)) == sorted(dumps(e) for e in retry)
    moved_parked = drain(topo.dead_letter_queue)
    assert sorted(body for _p, body in moved_parked) == sorted(dumps(e) for e in parked)
    assert all(p.headers["x-lineage-reason"] == "store_rejected" for p, _b in moved_parked)


def test_an_interrupted_migration_resumes_without_loss(make_config, tmp_path):
    classic = make_config(collector={"queue_type": "classic"})
    topo = Topology.from_config(classic)
    _declare(topo)
    events = many_events(300)
    publish(classic.collector_topic, [dumps(e) for e in events[:200]])
    # As if a migration stopped half-way through draining the main queue: the holding queue
    # is bound and holds a part of the messages, the classic queue the rest.
    holding = topo.queue + HOLDING_SUFFIX
    conn = connect()
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare(holding, durable=True, arguments={"x-queue-type": "quorum"})
        ch.queue_bind(holding, topo.exchange, routing_key=topo.binding_key)
        ch.queue_unbind(topo.queue, topo.exchange, routing_key=topo.binding_key)
        for _ in range(120):
            method, props, body = ch.basic_get(topo.queue, auto_ack=False)
            ch.basic_publish("", holding, body, props, mandatory=True)
            ch.basic_ack(method.delivery_tag)
    finally:
        conn.close()
    publish(classic.collector_topic, [dumps(e) for e in events[200:]])  # lands in holding
    try:
        config = make_config()
        migrate_topology(config)
        assert not _queue_exists(holding)
        assert queue_depth(topo.queue) == 300
        with running(config):
            store = EngineStore(SqlBackend(f"sqlite:///{tmp_path}/lineage.db"))
            store.open()
            try:
                wait_until(lambda: store.count_events() == 300, 60, message="300 stored")
            finally:
                store.close()
        backend = SqlBackend(f"sqlite:///{tmp_path}/lineage.db")
        store = EngineStore(backend)
        store.open()
        try:
            with backend._db.connect() as conn:
                ids = conn.execute(sa.select(backend._t["ev"].c.event_id)).scalars().all()
            assert len(ids) == 300 and set(ids) == {event_id(e) for e in events}
        finally:
            store.close()
    finally:
        _delete(holding)


def test_migrate_refuses_while_a_collector_consumes(make_config):
    config = make_config()
    with running(config), pytest.raises(LineageError, match="consumer"):
        migrate_topology(make_config(collector={"queue_type": "classic"}))


def test_classic_queues_still_work_when_configured(make_config, tmp_path):
    config = make_config(collector={"queue_type": "classic"})
    events = many_events(50)
    with running(config) as collector:
        publish(config.collector_topic, [dumps(e) for e in events])
        wait_until(
            lambda: collector.metrics.events_consumed._value.get() >= 50, 30, message="consumed"
        )
    store = EngineStore(SqlBackend(f"sqlite:///{tmp_path}/lineage.db"))
    store.open()
    try:
        assert store.count_events() == 50
    finally:
        store.close()


def _broker_listing() -> dict[str, tuple[str, str]]:
    """``rabbitmqctl list_queues`` (read-only): name -> (type, arguments as Erlang terms)."""
    ctl = shutil.which("rabbitmqctl")
    if ctl is None:
        pytest.skip("rabbitmqctl is not installed here")
    result = subprocess.run(
        # the vhost the collector helpers declare in (tests/vhosts.py), not the default "/"
        [ctl, "-q", "list_queues", "-p", session_vhost().name, "name", "type", "arguments"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if result.returncode != 0:
        pytest.skip(f"rabbitmqctl cannot reach the node: {result.stderr.strip()[:200]}")
    rows = (line.split("\t") for line in result.stdout.splitlines())
    return {row[0]: (row[1], row[2]) for row in rows if len(row) == 3}


def test_the_broker_lists_the_declared_types_and_arguments(make_config):
    config = make_config(collector={"delivery_limit": 7})
    topo = Topology.from_config(config)
    _declare(topo)
    listing = _broker_listing()
    assert {listing[spec.name][0] for spec in topo.queues()} == {"quorum"}
    main = listing[topo.queue][1]
    for term in (
        '{"x-delivery-limit",7}',
        '{"x-dead-letter-strategy","at-least-once"}',
        '{"x-overflow","reject-publish"}',
        f'{{"x-dead-letter-routing-key","{topo.dead_letter_queue}"}}',
    ):
        assert term in main, main
    retry = listing[topo.retry_queues[0].name][1]
    assert '{"x-message-ttl",200}' in retry and '"at-least-once"' in retry
    assert f'{{"x-dead-letter-routing-key","{topo.queue}"}}' in retry
    assert "x-delivery-limit" not in listing[topo.dead_letter_queue][1]
