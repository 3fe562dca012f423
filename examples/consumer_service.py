"""A tiny consumer service with no lineage code: it takes orders from a queue and acks them.

Run it under the wrapper to get lineage without touching it::

    lineage-instrument --exporters console python examples/consumer_service.py

Settings come from the environment: AMQP_URL, EXCHANGE (``orders``), ROUTING_KEY
(``orders.*``), QUEUE (``billing.orders``), COUNT (stop after this many messages, default 3),
STYLE (``callback``: BlockingChannel.basic_consume; ``generator``: BlockingChannel.consume();
``select``: SelectConnection), FAIL_ON (an order number whose handling raises, to show FAIL;
the exception then ends the program with exit code 1), READY_FILE (touched once subscribed).
"""

import json
import os
import pathlib
import sys

import pika

URL = os.environ.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
EXCHANGE = os.environ.get("EXCHANGE", "orders")
ROUTING_KEY = os.environ.get("ROUTING_KEY", "orders.*")
QUEUE = os.environ.get("QUEUE", "billing.orders")
COUNT = int(os.environ.get("COUNT", "3"))
FAIL_ON = os.environ.get("FAIL_ON")
READY_FILE = os.environ.get("READY_FILE")

handled = []


def ready() -> None:
    if READY_FILE:
        pathlib.Path(READY_FILE).touch()


def handle(body: bytes) -> None:
    order = json.loads(body)["order"]
    if FAIL_ON is not None and order == int(FAIL_ON):
        raise ValueError(f"cannot bill order {order}")
    handled.append(order)


def declare(channel) -> None:
    channel.exchange_declare(EXCHANGE, exchange_type="topic", auto_delete=False)
    channel.queue_declare(QUEUE, auto_delete=False)
    channel.queue_bind(QUEUE, EXCHANGE, routing_key=ROUTING_KEY)


def on_order(channel, method, properties, body) -> None:
    handle(body)
    channel.basic_ack(method.delivery_tag)
    if len(handled) >= COUNT:
        channel.stop_consuming()


def run_callback() -> None:
    connection = pika.BlockingConnection(pika.URLParameters(URL))
    channel = connection.channel()
    declare(channel)
    channel.basic_consume(QUEUE, on_order)
    ready()
    try:
        channel.start_consuming()
    finally:
        connection.close()


def run_generator() -> None:
    connection = pika.BlockingConnection(pika.URLParameters(URL))
    channel = connection.channel()
    declare(channel)
    ready()
    for method, _properties, body in channel.consume(QUEUE, inactivity_timeout=30):
        if method is None:
            break
        handle(body)
        channel.basic_ack(method.delivery_tag)
        if len(handled) >= COUNT:
            break
    channel.cancel()
    connection.close()


def run_select() -> None:
    def on_message(channel, method, _properties, body) -> None:
        handle(body)
        channel.basic_ack(method.delivery_tag)
        if len(handled) >= COUNT:
            channel.close()

    def on_channel(channel) -> None:
        channel.add_on_close_callback(lambda *_: connection.close())
        channel.exchange_declare(
            EXCHANGE,
            exchange_type="topic",
            auto_delete=False,
            callback=lambda _f: channel.queue_declare(
                QUEUE,
                auto_delete=False,
                callback=lambda _f: channel.queue_bind(
                    QUEUE, EXCHANGE, routing_key=ROUTING_KEY, callback=lambda _f: subscribe(channel)
                ),
            ),
        )

    def subscribe(channel) -> None:
        channel.basic_consume(QUEUE, on_message)
        ready()

    connection = pika.SelectConnection(
        pika.URLParameters(URL),
        on_open_callback=lambda conn: conn.channel(on_open_callback=on_channel),
        on_close_callback=lambda *_: connection.ioloop.stop(),
    )
    connection.ioloop.start()


def main() -> int:
    style = os.environ.get("STYLE", "callback")
    {"callback": run_callback, "generator": run_generator, "select": run_select}[style]()
    print(f"billed orders {sorted(handled)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
