"""The collector's watchdog against the real broker: a consumer that its queue stops feeding
reconnects, and one being fed, or with nothing to take, does not.

RabbitMQ 3.10 leaves a consumer that subscribed while a quorum queue elected a leader unfed for
its whole life (docs/deployment.md); the stand-in here is a queue with ready messages and no
consumer at all, which is what the watchdog sees in that case.
"""

from __future__ import annotations

import time
import uuid

import pika
import pytest
from collector_helpers import connect

from lineage_sdk.collector import consumer
from lineage_sdk.collector.consumer import ConsumerStalled

pytestmark = [pytest.mark.rabbitmq]


def _check_for(dog: consumer._Watchdog, seconds: float, *, fed: bool = False) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if fed:
            dog.delivered()
        dog.check()
        time.sleep(0.01)


def test_ready_messages_that_never_arrive_make_the_consumer_reconnect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(consumer, "_STALL_S", 0.2)
    monkeypatch.setattr(consumer, "_STALL_CHECK_S", 0.02)
    queue = f"test.watchdog.{uuid.uuid4().hex[:10]}"
    connection = connect()
    channel = connection.channel()
    channel.queue_declare(queue, durable=False)
    try:
        dog = consumer._Watchdog(connection, queue)
        _check_for(dog, 0.6)  # an empty queue: nothing to be fed, no alarm
        for _ in range(3):
            channel.basic_publish("", queue, b"{}", pika.BasicProperties(delivery_mode=1))
        _check_for(dog, 0.6, fed=True)  # deliveries keep arriving: no alarm
        with pytest.raises(
            ConsumerStalled, match=r"3 ready message\(s\).*none reached this consumer"
        ):
            _check_for(dog, 3.0)
    finally:
        channel.queue_delete(queue)
        connection.close()
