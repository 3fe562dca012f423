"""How RabbitMQ destinations are named as OpenLineage datasets.

A message is named by where it was *published*, which both sides know: the producer from its
``basic_publish(exchange, routing_key)``, the consumer from the delivery's ``method.exchange`` and
``method.routing_key``. So the producer's output and the consumer's input are the same dataset:

- namespace ``rabbitmq://{host}:{port}`` of the connection (IPv6 hosts in brackets), the same
  for pika and aio-pika so services on either client meet on one dataset;
- name ``{exchange}:{routing_key}`` (the ``messaging.destination.name`` form of OpenTelemetry's
  RabbitMQ conventions), or, for the default exchange ``""`` (which routes by queue name), just
  the routing key, i.e. the queue, falling back to the consuming queue if the key is empty.

The queue and consumer tag are not part of the name (many queues can be bound to one exchange and
key); they go in the ``lineagesdk_messaging`` dataset facet.
"""

from __future__ import annotations

from typing import Any

from lineage_sdk.models.dataset import LineageDataset

__all__ = [
    "MESSAGING_FACET_KEY",
    "MESSAGING_FACET_URL",
    "dataset_name",
    "messaging_dataset",
    "namespace_for",
]

MESSAGING_FACET_KEY = "lineagesdk_messaging"
MESSAGING_FACET_URL = (
    "https://lineage-sdk.github.io/spec/facets/1-0-0/MessagingDatasetFacet.json"
    "#/$defs/MessagingDatasetFacet"
)


def namespace_for(host: str | None, port: int | None, default_port: int = 5672) -> str:
    """``rabbitmq://host:port`` of a broker address (the client library knows where it is)."""
    text = str(host or "localhost")
    if ":" in text and not text.startswith("["):
        text = f"[{text}]"
    return f"rabbitmq://{text}:{port or default_port}"


def dataset_name(exchange: str, routing_key: str, queue: str | None = None) -> str:
    """The dataset name of a message published to ``exchange`` with ``routing_key``."""
    if exchange:
        return f"{exchange}:{routing_key}"
    return routing_key or queue or "amq.default"


def messaging_dataset(
    namespace: str,
    exchange: str,
    routing_key: str,
    producer: str,
    *,
    queue: str | None = None,
    consumer_tag: str | None = None,
) -> LineageDataset:
    """The dataset with its ``lineagesdk_messaging`` facet (queue and tag: consumer side only)."""
    facet: dict[str, Any] = {
        "_producer": producer,
        "_schemaURL": MESSAGING_FACET_URL,
        "system": "rabbitmq",
        "destination": exchange,
        "routingKey": routing_key,
    }
    if queue:
        facet["queue"] = queue
    if consumer_tag:
        facet["consumerTag"] = consumer_tag
    return LineageDataset(
        namespace, dataset_name(exchange, routing_key, queue), {MESSAGING_FACET_KEY: facet}
    )
