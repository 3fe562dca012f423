"""A tiny producer service with no lineage code: it publishes a few orders to an exchange.

Run it under the wrapper to get lineage without touching it::

    lineage-instrument --exporters console python examples/producer_service.py

Settings come from the environment: AMQP_URL (default amqp://guest:guest@127.0.0.1:5672/%2F),
EXCHANGE (default ``orders``, a topic exchange), ROUTING_KEY (``orders.created``), COUNT (3).
"""

import json
import os
import sys

import pika


def main() -> int:
    url = os.environ.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
    exchange = os.environ.get("EXCHANGE", "orders")
    routing_key = os.environ.get("ROUTING_KEY", "orders.created")
    count = int(os.environ.get("COUNT", "3"))
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    channel.exchange_declare(exchange, exchange_type="topic", auto_delete=False)
    for number in range(count):
        body = json.dumps({"order": number}).encode()
        channel.basic_publish(
            exchange, routing_key, body, pika.BasicProperties(content_type="application/json")
        )
    connection.close()
    print(f"published {count} orders to {exchange}:{routing_key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
