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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lineage_sdk.collector.settings import CollectorConfig
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.transport.unrouted import declare_event_exchange

__all__ = [
    "ATTEMPT_HEADER",
    "PARK_HEADERS",
    "RetryQueue",
    "Topology",
    "attempts_so_far",
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


@dataclass(frozen=True, slots=True)
class RetryQueue:
    name: str
    delay_ms: int


@dataclass(frozen=True, slots=True)
class Topology:
    """Names and arguments of everything the collector declares."""

    exchange: str
    queue: str
    binding_key: str
    retry_queues: tuple[RetryQueue, ...]
    dead_letter_queue: str

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
        )

    def declare(self, channel: Any) -> None:
        """Declare exchange, queues and binding; harmless when they already exist."""
        declare_event_exchange(channel, self.exchange)  # with its holding queue for the unrouted
        channel.queue_declare(queue=self.queue, durable=True)
        channel.queue_bind(queue=self.queue, exchange=self.exchange, routing_key=self.binding_key)
        for retry in self.retry_queues:
            channel.queue_declare(
                queue=retry.name,
                durable=True,
                arguments={
                    "x-message-ttl": retry.delay_ms,
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": self.queue,
                },
            )
        channel.queue_declare(queue=self.dead_letter_queue, durable=True)

    def retry_queue_for(self, attempt: int) -> RetryQueue:
        """The queue a message waits in after its ``attempt``-th failure (1-based); the delays grow
        with each attempt and the last one repeats."""
        index = min(max(attempt, 1), len(self.retry_queues)) - 1
        return self.retry_queues[index]


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
