"""A pika consumer that writes what it consumed into PostgreSQL: message -> consumer job -> table."""

from __future__ import annotations

import uuid

import pika
import psycopg
import pytest
from vhosts import session_vhost

from lineage_instrumentation.db.psycopg3 import PsycopgInstrumentor
from lineage_instrumentation.pika import PikaInstrumentor

pytestmark = [pytest.mark.rabbitmq, pytest.mark.postgres]

BROKER_URL = session_vhost().url  # this process's private vhost, never the shared "/"


def test_consumed_message_run_gets_the_table_it_wrote(pg_db, captured, instrumented):
    queue = f"test.i15.q.{uuid.uuid4().hex[:10]}"
    instrumented(PikaInstrumentor)
    instrumented(PsycopgInstrumentor)
    conn = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    try:
        ch = conn.channel()
        ch.queue_declare(queue)
        ch.basic_publish("", queue, b"42")
        db = psycopg.connect(f"host=127.0.0.1 port=5432 dbname={pg_db}")

        def store(channel, method, properties, body):
            with db.transaction():
                db.execute(
                    "INSERT INTO order_report (order_id, customer, amount) VALUES (%s, 'x', 1)",
                    (int(body),),
                )
            channel.basic_ack(method.delivery_tag)
            channel.stop_consuming()

        ch.basic_consume(queue, store)
        conn.call_later(15, ch.stop_consuming)  # a safety net, never reached when things work
        ch.start_consuming()
        db.close()
        ch.queue_delete(queue)
    finally:
        conn.close()
    [complete] = [
        e
        for e in captured.events()
        if e["eventType"] == "COMPLETE" and e["job"]["name"].endswith(".store")
    ]
    assert complete["job"]["name"].startswith(queue)
    assert [d["name"] for d in complete["inputs"]] == [queue]
    assert [(d["namespace"], d["name"]) for d in complete["outputs"]] == [
        ("postgres://127.0.0.1:5432", f"{pg_db}.public.order_report")
    ]
