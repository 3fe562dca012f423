"""Plumbing shared by the Data Lineage API tests: the documented file verbatim, where the graph
server is, and a queue reading the ``platform.lineage.events`` exchange. None of it is under test.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
import pika
from servers import FalkorDBServer, bolt_warmup
from vhosts import session_vhost

from lineage_sdk.transport.unrouted import declare_event_exchange

# This process's private vhost (tests/vhosts.py), never the shared broker's ``/``: the documented
# file names no address, so documented_env gives it as a deployment would, LINEAGE_RABBITMQ_URL.
RABBIT_URL = session_vhost().url
EXCHANGE = "platform.lineage.events"

# The file, byte for byte (indentation included).
DOCUMENTED_TOML = """\
[lineage]
enabled = true
collector_topic = "platform.lineage.events"

[lineage.producer]
job_namespace = "my-service-ns"
producer_uri = "[https://github.com/my-org/my-service](https://github.com/my-org/my-service)"

[lineage.store]
backend = "composite"
backends = ["document", "graph"]

    [lineage.store.document]
    collection_name = "audit_lineage_events"
    document_connection_name = "default_mongo"

    [lineage.store.graph]
    graph_connection_name = "analytics_graph"
"""


@dataclass
class GraphServer:
    uri: str
    username: str | None = None
    password: str | None = None
    falkordb: FalkorDBServer | None = None

    def warm_up(self) -> None:
        """FalkorDB may ignore the first Bolt connection after a client left (services.md):
        a raw handshake first, before each new driver."""
        if self.falkordb is not None:
            bolt_warmup("127.0.0.1", self.falkordb.bolt_port)


class ExchangeReader:
    """An exclusive, auto-deleted queue bound to the exchange: what producers publish there."""

    def __init__(self, exchange: str = EXCHANGE) -> None:
        self.connection = pika.BlockingConnection(pika.URLParameters(RABBIT_URL))
        self.channel = self.connection.channel()
        # Idempotent, with the exporter's own declaration (alternate exchange and holding queue),
        # whichever of the two comes first; the product's exchange is never deleted.
        declare_event_exchange(self.channel, exchange)
        self.queue = self.channel.queue_declare(
            f"test.documented-api.{uuid.uuid4().hex[:10]}", exclusive=True, auto_delete=True
        ).method.queue
        self.channel.queue_bind(self.queue, exchange, routing_key="#")

    def events(self, predicate: Any, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
        """The first ``count`` events (batch messages unpacked) matching ``predicate``; other
        processes may publish to the shared exchange too."""
        found: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while len(found) < count and time.monotonic() < deadline:
            method, _props, body = self.channel.basic_get(self.queue, auto_ack=True)
            if method is None:
                self.connection.sleep(0.05)
                continue
            decoded = orjson.loads(body)
            for event in decoded if isinstance(decoded, list) else [decoded]:
                if predicate(event):
                    found.append(event)
        assert len(found) >= count, f"{len(found)} of {count} events read off {EXCHANGE}"
        return found

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.connection.close()


def connect() -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.URLParameters(RABBIT_URL))
