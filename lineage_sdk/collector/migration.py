"""``lineage-collector topology migrate``: recreate queues whose arguments differ, keeping messages.

RabbitMQ cannot change a queue's type or arguments in place, so each queue that the configuration
declares differently (a classic queue when ``collector.queue_type = "quorum"``, or another
``delivery_limit``) is recreated in two phases; messages move in AMQP transactions, each holding
a batch of publishes and the ack of their originals, committed once the target has confirmed:

1. **drain**: declare ``<name>.migrating`` (a plain quorum queue: no TTL, no dead-lettering, so
   nothing leaves it by itself); for the main queue, bind it to the exchange and unbind the old
   queue, so new events land in it; move every message into it; delete the emptied old queue.
   Retry queues are drained first (their messages expire into the main queue, which must still
   exist), and all of them are drained whenever the main queue is, so none dead-letters into a
   main queue that is momentarily missing.
2. **refill**: declare the queue with the configured arguments (the parking lot first, then the
   main queue, then the retry queues), bind the main queue and unbind its holding queue, move the
   messages back, delete the holding queue.

The state lives in the broker (which queues and ``.migrating`` queues exist), so running the
command again after an interruption resumes where it stopped, and running it on a topology that
already matches does nothing. An interruption before a commit leaves that batch in the source; a
broker failing in the middle of a commit may leave it in both queues (duplicates, which the
idempotent stores absorb); nothing is lost.
A message published to the exchange in the instant between binding the new main queue and
unbinding the holding queue is delivered to both (again a duplicate, never a loss). Messages move
back into retry queues with a fresh delay. Collectors must be stopped: a queue with consumers is
refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pika
import pika.exceptions

from lineage_sdk.collector.consumer import connection_parameters
from lineage_sdk.collector.topology import (
    BROKER_HEADERS,
    QueueSpec,
    Topology,
    TopologyMismatch,
    declare_queue,
)
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import LineageError

__all__ = ["HOLDING_SUFFIX", "MigrationStep", "migrate_topology"]

HOLDING_SUFFIX = ".migrating"
_HOLDING_ARGUMENTS = {"x-queue-type": "quorum"}
_BATCH = 500  # messages per transaction


@dataclass(frozen=True, slots=True)
class MigrationStep:
    """One move of messages, ``moved`` of them (maybe none) from ``source`` to ``target``."""

    source: str
    target: str
    moved: int


Progress = Callable[[str, str, int, int], None]
"""``progress(source, target, moved, total)``, called while messages move."""


@dataclass(frozen=True, slots=True)
class _QueueState:
    exists: bool
    messages: int = 0
    consumers: int = 0


class _Migration:
    def __init__(self, config: LineageConfig, progress: Progress | None) -> None:
        self.topology = Topology.from_config(config)
        self.params = connection_parameters(config, role="collector-migrate")
        self.progress = progress
        self.steps: list[MigrationStep] = []
        self.connection: Any = None

    @contextmanager
    def _channel(self) -> Iterator[Any]:
        """A fresh channel: the broker closes a channel on a refused declare."""
        channel = self.connection.channel()
        try:
            yield channel
        finally:
            if channel.is_open:
                channel.close()

    def _state(self, name: str) -> _QueueState:
        with self._channel() as channel:
            try:
                ok = channel.queue_declare(queue=name, passive=True)
            except pika.exceptions.ChannelClosedByBroker as exc:
                if exc.reply_code == 404:
                    return _QueueState(False)
                raise
            return _QueueState(True, ok.method.message_count, ok.method.consumer_count)

    def _matches(self, spec: QueueSpec) -> bool:
        """Declare ``spec`` (creating it if missing); False if it exists with other arguments."""
        with self._channel() as channel:
            try:
                declare_queue(channel, spec, self.topology.queue_type)
            except TopologyMismatch:
                return False
            return True

    def run(self) -> list[MigrationStep]:
        topo = self.topology
        self.connection = pika.BlockingConnection(self.params)
        try:
            with self._channel() as channel:
                topo.declare_exchange(channel)
            specs = topo.queues()
            self._refuse_consumers(specs)
            dead_letter, main, *retries = specs
            stale = {s.name for s in specs if self._state(s.name).exists and not self._matches(s)}
            if main.name in stale:
                stale.update(r.name for r in retries if self._state(r.name).exists)
            for spec in (*retries, main, dead_letter):  # drain: sources of dead letters first
                if spec.name in stale:
                    self._drain(spec)
            for spec in specs:  # refill: targets of dead letters first
                if self._state(spec.name + HOLDING_SUFFIX).exists:
                    self._refill(spec)
            return self.steps
        finally:
            if self.connection.is_open:
                self.connection.close()

    def _refuse_consumers(self, specs: tuple[QueueSpec, ...]) -> None:
        for spec in specs:
            for name in (spec.name, spec.name + HOLDING_SUFFIX):
                state = self._state(name)
                if state.consumers:
                    raise LineageError(
                        f"queue {name!r} has {state.consumers} consumer(s); stop every"
                        " lineage-collector before migrating the topology"
                    )

    def _drain(self, spec: QueueSpec) -> None:
        holding = spec.name + HOLDING_SUFFIX
        topo = self.topology
        with self._channel() as channel:
            channel.queue_declare(queue=holding, durable=True, arguments=_HOLDING_ARGUMENTS)
            if spec.bound:
                channel.queue_bind(holding, topo.exchange, routing_key=topo.binding_key)
                channel.queue_unbind(spec.name, topo.exchange, routing_key=topo.binding_key)
        self._move_then_delete(spec.name, holding)

    def _refill(self, spec: QueueSpec) -> None:
        holding = spec.name + HOLDING_SUFFIX
        topo = self.topology
        with self._channel() as channel:
            declare_queue(channel, spec, topo.queue_type)
            if spec.bound:
                channel.queue_bind(spec.name, topo.exchange, routing_key=topo.binding_key)
                channel.queue_unbind(holding, topo.exchange, routing_key=topo.binding_key)
        self._move_then_delete(holding, spec.name)

    def _move_then_delete(self, source: str, target: str) -> None:
        """Move ``source`` into ``target``, then delete ``source`` once it is seen empty.

        Quorum queues refuse ``queue.delete`` with ``if-empty``, so emptiness is checked just
        before deleting; ``source`` is no longer bound to the exchange by then, and the
        collectors are stopped, so nothing else writes to it.
        """
        for _ in range(10):
            self._move(source, target)
            if self._state(source).messages == 0:
                with self._channel() as channel:
                    channel.queue_delete(source)
                return
        raise LineageError(f"queue {source!r} keeps receiving messages; stop the producers")

    def _move(self, source: str, target: str) -> None:
        """Move every message of ``source`` to ``target`` in transactions of ``_BATCH``.

        Each transaction holds the publishes and the ack of their originals; RabbitMQ answers
        ``tx.commit`` once the target queue has confirmed the publishes, and applies the ack
        then, so an interruption before the commit leaves the originals in ``source`` and the
        copies nowhere (or, if the broker fails mid-commit, in both: a duplicate, not a loss).
        """
        total = self._state(source).messages
        moved = 0
        if total == 0:  # nothing to wait for (no consumer holds any: they were refused)
            self.steps.append(MigrationStep(source, target, 0))
            return
        returned: list[str] = []
        channel = self.connection.channel()
        try:
            channel.add_on_return_callback(lambda *_args: returned.append(target))
            channel.tx_select()
            channel.basic_qos(prefetch_count=_BATCH)
            last_tag, in_batch = 0, 0
            for method, props, body in channel.consume(source, inactivity_timeout=1.0):
                if method is not None:
                    headers = dict(props.headers or {})
                    for key in BROKER_HEADERS:
                        headers.pop(key, None)
                    props.headers = headers or None
                    channel.basic_publish("", target, body, props, mandatory=True)
                    last_tag, in_batch = method.delivery_tag, in_batch + 1
                if in_batch and (method is None or in_batch == _BATCH or moved + in_batch >= total):
                    channel.basic_ack(last_tag, multiple=True)
                    channel.tx_commit()
                    if returned:
                        raise LineageError(
                            f"queue {target!r} disappeared during the migration; messages moved"
                            f" from {source!r} may be missing: check both queues"
                        )
                    moved, in_batch = moved + in_batch, 0
                    if self.progress is not None:
                        self.progress(source, target, moved, max(total, moved))
                if method is None or moved >= total:
                    break
            channel.cancel()
        finally:
            if channel.is_open:
                channel.close()
        self.steps.append(MigrationStep(source, target, moved))


def migrate_topology(
    config: LineageConfig, progress: Progress | None = None
) -> list[MigrationStep]:
    """Recreate every queue whose arguments differ from the configuration, keeping its messages;
    returns the moves made (none when the topology already matches). See the module docstring."""
    return _Migration(config, progress).run()
