"""The collector's queues: main, delayed retries and the parking lot, declared idempotently.

::

    exchange <collector_topic> (topic) --binding_key--> <queue>            (consumed)
    <queue>.retry.<N>ms   (x-message-ttl N, dead-letters to "" / <queue>)  one per delay
    <dead_letter_queue>   (parking lot, read by `lineage-collector dlq ...`)
    <collector_topic>.unrouted  (holding queue behind the exchange's alternate exchange; see
                                 lineage_sdk.transport.unrouted)

Retry queues carry their delay in their name, so changing ``retry_delays_ms`` declares new queues
instead of failing on a changed ``x-message-ttl`` (RabbitMQ refuses to redeclare with new
arguments). Their messages dead-letter through the default exchange straight into this
collector's main queue, not back through the topic exchange, so a retry never reaches other
consumers bound to the same exchange.

Queue types (``collector.queue_type``):

- ``quorum`` (the default): every queue is a replicated quorum queue. The main and retry queues
  dead-letter *at least once* (``x-dead-letter-strategy: at-least-once``, which needs
  ``x-overflow: reject-publish``): the broker keeps a dead-lettered message until the target
  queue has confirmed it. The main queue dead-letters into the parking lot once a message has been
  delivered more than ``delivery_limit`` times (``x-delivery-limit``): a backstop against a
  message that kills the collector before it can park it. The parking lot itself has no delivery
  limit, since ``dlq list`` peeks by taking and returning messages.
- ``classic``: the arguments of earlier versions, unchanged, for brokers without quorum queues.

RabbitMQ refuses to redeclare a queue with other arguments (``PRECONDITION_FAILED``);
:meth:`Topology.declare` turns that refusal into :class:`TopologyMismatch`, which names the queue
and ``lineage-collector topology migrate`` (:mod:`lineage_sdk.collector.migration`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pika
import pika.exceptions

from lineage_sdk.collector.settings import CollectorConfig
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import LineageError
from lineage_sdk.transport.unrouted import (
    declare_event_exchange,
    holding_queue,
    unrouted_exchange,
)

__all__ = [
    "ATTEMPT_HEADER",
    "BROKER_HEADERS",
    "DECLARE_COMMAND",
    "MIGRATE_COMMAND",
    "PARK_HEADERS",
    "QueueSpec",
    "RetryQueue",
    "Topology",
    "TopologyMismatch",
    "attempts_so_far",
    "broker_connection",
    "declare_queue",
]

# Failed attempts so far, set by the collector on each retry publish.
ATTEMPT_HEADER = "x-lineage-attempt"
# Headers of a parked message: why it is there.
PARK_HEADERS = (
    "x-lineage-reason",
    "x-lineage-error",
    "x-lineage-store",
    "x-lineage-attempts",
    "x-lineage-parked-at",
    "x-lineage-source-queue",
    "x-lineage-original-exchange",
    "x-lineage-original-routing-key",
    "x-lineage-batch-index",
)
# Headers the broker sets on delivery; dropped when the collector republishes a message.
BROKER_HEADERS = ("x-delivery-count",)
MIGRATE_COMMAND = "lineage-collector topology migrate"
DECLARE_COMMAND = "lineage-collector topology declare"
_AT_LEAST_ONCE: dict[str, Any] = {
    "x-dead-letter-strategy": "at-least-once",
    "x-overflow": "reject-publish",
}
_INEQUIVALENT = re.compile(r"inequivalent arg '([^']+)'.*?: (received .*)$")


class TopologyMismatch(LineageError):
    """A queue exists with other arguments (usually another type) than the configuration's."""

    def __init__(self, queue: str, queue_type: str, detail: str) -> None:
        self.queue = queue
        match = _INEQUIVALENT.search(detail)
        broker_says = f"{match.group(1)}: {match.group(2)}" if match else detail
        super().__init__(
            f"queue {queue!r} exists with other arguments than collector.queue_type ="
            f" {queue_type!r} declares (a queue of the other type, or another delivery_limit;"
            f" the broker says {broker_says}); run `{MIGRATE_COMMAND}` with every collector"
            " stopped to recreate it with its messages, or set collector.queue_type to the"
            " existing queues' type"
        )


@dataclass(frozen=True, slots=True)
class RetryQueue:
    name: str
    delay_ms: int


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """One queue as the configuration declares it; ``bound`` if it is bound to the exchange."""

    name: str
    arguments: dict[str, Any]
    bound: bool = False


@dataclass(frozen=True, slots=True)
class Topology:
    """Names and arguments of everything the collector declares."""

    exchange: str
    queue: str
    binding_key: str
    retry_queues: tuple[RetryQueue, ...]
    dead_letter_queue: str
    queue_type: str = "quorum"
    delivery_limit: int = 0

    @classmethod
    def from_config(cls, config: LineageConfig) -> Topology:
        topic = config.collector_topic
        c = config.section("collector", CollectorConfig)
        queue = c.queue or f"{topic}.collector"
        delays = c.retry_delays_ms or [1000]
        return cls(
            exchange=topic,
            queue=queue,
            binding_key=c.binding_key,
            retry_queues=tuple(RetryQueue(f"{queue}.retry.{d}ms", d) for d in delays),
            dead_letter_queue=c.dead_letter_queue or f"{topic}.dlq",
            queue_type=c.queue_type,
            delivery_limit=c.delivery_limit,
        )

    @property
    def quorum(self) -> bool:
        return self.queue_type == "quorum"

    def queues(self) -> tuple[QueueSpec, ...]:
        """Every queue with its arguments, the parking lot first (the others dead-letter into
        it or into the main queue, so targets are declared before their sources)."""
        # Classic queues take no type or dead-letter strategy; quorum queues take both, and the
        # main queue dead-letters (at least once) into the dead-letter queue.
        quorum: dict[str, Any] = {"x-queue-type": "quorum"} if self.quorum else {}
        at_least_once: dict[str, Any] = {**quorum, **_AT_LEAST_ONCE} if self.quorum else {}
        main: dict[str, Any] = {}
        if self.quorum:
            main = {
                **at_least_once,
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": self.dead_letter_queue,
            }
            if self.delivery_limit:
                main["x-delivery-limit"] = self.delivery_limit
        return (
            QueueSpec(self.dead_letter_queue, quorum),
            QueueSpec(self.queue, main, bound=True),
            *(
                QueueSpec(
                    r.name,
                    {
                        **at_least_once,
                        "x-message-ttl": r.delay_ms,
                        "x-dead-letter-exchange": "",
                        "x-dead-letter-routing-key": self.queue,
                    },
                )
                for r in self.retry_queues
            ),
        )

    def declare_exchange(self, channel: Any) -> None:
        """Declare the events exchange with its holding queue for the unrouted (also used alone
        by the topology migration)."""
        declare_event_exchange(channel, self.exchange)

    def declare(self, channel: Any) -> None:
        """Declare exchange, queues and binding; harmless when they already exist.

        Raises :class:`TopologyMismatch` if a queue exists with other arguments (the broker
        closes ``channel`` then).
        """
        self.declare_exchange(channel)
        for spec in self.queues():
            declare_queue(channel, spec, self.queue_type)
            if spec.bound:
                channel.queue_bind(
                    queue=spec.name, exchange=self.exchange, routing_key=self.binding_key
                )

    def missing(self, connection: Any) -> list[str]:
        """What :meth:`declare` would create and the broker lacks (``exchange X``, ``queue Y``),
        found with passive declares, which change nothing. A passive declare of something
        missing closes its channel (404), so each check after one runs on a fresh channel.

        A queue that exists is declared again with the configuration's arguments, which changes
        nothing when they match and is refused when they differ: :class:`TopologyMismatch`.
        Bindings cannot be read and are not compared."""
        wanted: list[tuple[str, str, QueueSpec | None]] = [
            ("exchange", self.exchange, None),
            ("exchange", unrouted_exchange(self.exchange), None),
            ("queue", holding_queue(self.exchange), None),
            *(("queue", spec.name, spec) for spec in self.queues()),
        ]
        absent: list[str] = []
        channel = None
        try:
            for kind, name, spec in wanted:
                if channel is None or not channel.is_open:
                    channel = connection.channel()
                try:
                    if kind == "exchange":
                        channel.exchange_declare(name, passive=True)
                    else:
                        channel.queue_declare(name, passive=True)
                except pika.exceptions.ChannelClosedByBroker as exc:
                    if exc.reply_code != 404:  # NOT_FOUND; anything else (403) is no answer
                        raise
                    absent.append(f"{kind} {name}")
                    continue
                if spec is not None:  # exists: the same arguments, or TopologyMismatch
                    declare_queue(channel, spec, self.queue_type)
        finally:
            if channel is not None and channel.is_open:
                channel.close()
        return absent

    def retry_queue_for(self, attempt: int) -> RetryQueue:
        """The queue a message waits in after its ``attempt``-th failure (1-based); the delays grow
        with each attempt and the last one repeats."""
        index = min(max(attempt, 1), len(self.retry_queues)) - 1
        return self.retry_queues[index]


@contextlib.contextmanager
def broker_connection(params: Any) -> Iterator[Any]:
    """A blocking connection for one short task (declare, look, check), closed afterwards if
    the broker has not closed it already."""
    connection = pika.BlockingConnection(params)
    try:
        yield connection
    finally:
        if connection.is_open:
            connection.close()


def declare_queue(channel: Any, spec: QueueSpec, queue_type: str) -> None:
    """Declare one durable queue; a refusal for other arguments becomes TopologyMismatch."""
    try:
        channel.queue_declare(queue=spec.name, durable=True, arguments=spec.arguments or None)
    except pika.exceptions.ChannelClosedByBroker as exc:
        if exc.reply_code == 406 and "inequivalent arg" in str(exc.reply_text):
            raise TopologyMismatch(spec.name, queue_type, str(exc.reply_text)) from None
        raise


def attempts_so_far(
    headers: Mapping[str, Any] | None, retry_queue_names: tuple[str, ...] = ()
) -> int:
    """Failed attempts recorded on a message: our own header, or RabbitMQ's ``x-death`` count of
    expiries from the retry queues (whichever is larger, so either alone suffices)."""
    if not headers:
        return 0
    own = headers.get(ATTEMPT_HEADER)
    count = int(own) if isinstance(own, int | str) and str(own).isdigit() else 0
    deaths = headers.get("x-death")
    if isinstance(deaths, list):
        total = 0
        for entry in deaths:
            if isinstance(entry, Mapping) and (
                not retry_queue_names or entry.get("queue") in retry_queue_names
            ):
                value = entry.get("count", 0)
                total += value if isinstance(value, int) else 0
        count = max(count, total)
    return count
