"""Nothing is unroutable: events published while no queue matches are held, not dropped.

The events exchange ``<topic>`` is declared with an *alternate exchange*::

    <topic> (topic, alternate-exchange=<topic>.unrouted)
        --no binding matches--> <topic>.unrouted (fanout) --> queue <topic>.unrouted (holding)

A message no queue is bound for (typically: the application ran before any collector had
declared its queue) lands in the durable holding queue instead of being returned and lost. A
collector, once its own queue is bound, moves what the holding queue held back through the
exchange (:func:`release_unrouted`), so each message reaches every queue bound for it by then;
what still matches nothing goes back to the holding queue and waits for the next collector.
This stays correct with several collectors, a custom ``collector.queue`` or ``binding_key``: the
broker routes, not the exporter. The exporter and the collector declare the same arguments
through :func:`event_exchange_arguments`; an exchange that already exists without them is used as
it is, with one warning (RabbitMQ refuses to redeclare with other arguments; a policy can add
the alternate exchange: docs/rabbitmq-exporter.md).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pika
import pika.exceptions

__all__ = [
    "declare_event_exchange",
    "event_exchange_arguments",
    "holding_queue",
    "holding_queue_arguments",
    "release_unrouted",
    "unrouted_exchange",
    "warn_missing_alternate_exchange",
]

_LOG = logging.getLogger("lineage_sdk.transport")
_PRECONDITION_FAILED = 406
_NOT_FOUND = 404
_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def unrouted_exchange(exchange: str) -> str:
    """The fanout exchange named as ``exchange``'s alternate exchange."""
    return f"{exchange}.unrouted"


def holding_queue(exchange: str) -> str:
    """The durable queue that holds ``exchange``'s unroutable messages (declared by every side
    with :func:`holding_queue_arguments`)."""
    return f"{exchange}.unrouted"


def holding_queue_arguments() -> dict[str, Any]:
    """A quorum queue, whatever ``collector.queue_type`` is (the exporter cannot know it): in a
    cluster the held events survive the loss of any one node, and on a single node a quorum
    queue is a durable queue with one replica. A classic holding queue an earlier version
    declared is used as it is (the broker's 406 for the other type is ignored)."""
    return {"x-queue-type": "quorum"}


def event_exchange_arguments(exchange: str) -> dict[str, Any]:
    """The arguments the events exchange is declared with, by the exporter and the collector."""
    return {"alternate-exchange": unrouted_exchange(exchange)}


def warn_missing_alternate_exchange(exchange: str) -> None:
    """Once per exchange and process: it exists without our alternate exchange."""
    with _WARNED_LOCK:
        if exchange in _WARNED:
            return
        _WARNED.add(exchange)
    _LOG.warning(
        "exchange %r exists without the alternate exchange %r: events published while no queue "
        "is bound for them are returned as unroutable and lost. Add it without re-creating the "
        "exchange: rabbitmqctl set_policy lineage-unrouted '^%s$' "
        '\'{"alternate-exchange":"%s"}\' --apply-to exchanges',
        exchange,
        unrouted_exchange(exchange),
        exchange.replace(".", r"\."),
        unrouted_exchange(exchange),
    )


def declare_event_exchange(channel: Any, exchange: str) -> bool:
    """Declare the events exchange with its alternate exchange and holding queue (pika
    ``BlockingChannel``); False when the exchange already exists without them (used as is).

    The declarations run on a channel of their own, so a refusal (406) never closes ``channel``.
    """
    probe = channel.connection.channel()
    try:
        # The exchange first: one that exists without the argument gets no unused holding queue.
        probe.exchange_declare(
            exchange, "topic", durable=True, arguments=event_exchange_arguments(exchange)
        )
    except pika.exceptions.ChannelClosedByBroker as exc:
        if exc.reply_code != _PRECONDITION_FAILED:
            raise
        warn_missing_alternate_exchange(exchange)
        channel.exchange_declare(exchange, "topic", passive=True)
        return False
    try:
        probe.exchange_declare(unrouted_exchange(exchange), "fanout", durable=True)
        probe.queue_declare(
            holding_queue(exchange), durable=True, arguments=holding_queue_arguments()
        )
        probe.queue_bind(holding_queue(exchange), unrouted_exchange(exchange))
    except pika.exceptions.ChannelClosedByBroker as exc:
        # 404: the holding queue lives on a cluster node that is down (a classic queue has one
        # home node); the events exchange is fine, so consuming and publishing go on without it.
        if exc.reply_code not in (_PRECONDITION_FAILED, _NOT_FOUND):
            raise
        _LOG.debug("the holding side of %r is unavailable or differs: %s", exchange, exc)
    finally:
        if probe.is_open:
            probe.close()
    return True


def release_unrouted(connection: Any, exchange: str) -> int:
    """Move the messages held for ``exchange`` back through it (pika ``BlockingConnection``);
    returns how many. Call it once the caller's queue is bound.

    Each message is republished with its routing key and properties and acked only after the
    broker confirmed the republish, so a crash redelivers instead of losing (a copy may be
    published twice; collectors store idempotently). It stops after the count the queue held at
    the start: a message that still matches no queue comes back to the holding queue and is not
    moved again in a loop.
    """
    channel = connection.channel()
    try:
        try:
            held = int(
                channel.queue_declare(holding_queue(exchange), passive=True).method.message_count
            )
        except pika.exceptions.ChannelClosedByBroker as exc:
            if exc.reply_code == _NOT_FOUND:
                return 0
            raise
        if not held:
            return 0
        channel.confirm_delivery()
        channel.basic_qos(prefetch_count=min(held, 1000))
        moved = 0
        for method, props, body in channel.consume(holding_queue(exchange), inactivity_timeout=1.0):
            if method is None:
                break
            channel.basic_publish(exchange, method.routing_key, body, props)
            channel.basic_ack(method.delivery_tag)
            moved += 1
            if moved >= held:
                break
        _LOG.info(
            "moved %d event message(s) held in %s (published before any queue was bound) "
            "back through exchange %r",
            moved,
            holding_queue(exchange),
            exchange,
        )
        return moved
    finally:
        if channel.is_open:
            channel.close()  # anything prefetched and not moved goes back to the holding queue
