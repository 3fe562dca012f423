"""``PikaInstrumentor``: lineage from pika consumers and publishers without code changes.

Patched (and restored exactly by ``uninstrument()``):

- ``BlockingChannel.basic_consume``: the ``on_message_callback`` runs inside the delivery's run;
- ``BlockingChannel.consume``: the generator's loop body runs inside the delivery's run;
- ``pika.channel.Channel.basic_consume``: callbacks of ``SelectConnection``, ``AsyncioConnection``
  (and the other asynchronous adapters), which all use this channel class;
- ``pika.channel.Channel.basic_publish``: inside a lineage run, adds the exchange and routing key
  as an output dataset and puts the run context in the message headers (``BlockingChannel``
  publishes through it too);
- ``pika.channel.Channel.basic_cancel``: ends a streaming consumer's run.

Nothing is recorded while ``is_instrumentation_suppressed()`` is true: the lineage pipeline's
worker thread sets it, so the RabbitMQ exporter's own traffic is never instrumented.

Importing this module does not import pika; ``instrument()`` does, after checking the version.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Mapping
from typing import Any

from lineage_instrumentation.amqp.consumers import Overrides, end_all_streams, end_stream
from lineage_instrumentation.amqp.naming import (
    MESSAGING_FACET_KEY,
    MESSAGING_FACET_URL,
    dataset_name,
)
from lineage_instrumentation.amqp.publisher import (
    end_publisher_streams,
    prepare_program_publish,
    record_publish,
)
from lineage_instrumentation.instrumentor import BaseInstrumentor, LibraryRequirement, Patcher
from lineage_instrumentation.pika._consumers import (
    PIKA,
    consumer_for,
    instrumented_consume,
    namespace_of,
    wrap_callback,
)
from lineage_sdk.sdk.runs import CURRENT_RUN
from lineage_sdk.sdk.suppression import is_instrumentation_suppressed

__all__ = [
    "MESSAGING_FACET_KEY",
    "MESSAGING_FACET_URL",
    "PikaInstrumentor",
    "dataset_name",
    "namespace_of",
]


class PikaInstrumentor(BaseInstrumentor):
    """Lineage for pika 1.x consumers and publishers (see the module docstring).

    ``instrument(mode=..., consumer_job_name=..., streaming_interval_ms=...,
    heartbeat_interval_ms=...)`` overrides the
    ``[lineage.instrumentation]`` settings (``pika_mode``, ``pika_consumer_job_name``,
    ``pika_streaming_interval_ms``, ``pika_heartbeat_interval_ms``), which are otherwise read
    from the SDK's configuration when each consumer starts.
    """

    name = "pika"

    def instrumentation_dependencies(self) -> Collection[LibraryRequirement]:
        # basic_consume(queue, on_message_callback) is the 1.x signature; 2.x is untested.
        return (LibraryRequirement("pika>=1.1,<2", "pika"),)

    def _instrument(self, **kwargs: Any) -> None:
        overrides = Overrides.from_kwargs(
            kwargs, lambda key: f"instrumentation.pika_{key}", "PikaInstrumentor.instrument()"
        )

        import pika.adapters.blocking_connection as blocking
        import pika.channel
        import pika.spec

        PIKA.overrides = overrides
        patcher = Patcher()
        blocking_channel = blocking.BlockingChannel
        patcher.patch(blocking_channel, "basic_consume", _blocking_basic_consume)
        patcher.patch(blocking_channel, "consume", _blocking_consume)
        patcher.patch(
            pika.channel.Channel,
            "basic_consume",
            lambda original: _channel_basic_consume(original, blocking_channel),
        )
        patcher.patch(
            pika.channel.Channel,
            "basic_publish",
            lambda original: _basic_publish(original, pika.spec.BasicProperties),
        )
        patcher.patch(pika.channel.Channel, "basic_cancel", _basic_cancel)
        self._patcher = patcher
        PIKA.active = True

    def _uninstrument(self, **kwargs: Any) -> None:
        PIKA.active = False  # callbacks wrapped earlier now pass straight through
        self._patcher.restore()
        end_all_streams(PIKA)
        end_publisher_streams(PIKA)


def _blocking_basic_consume(original: Callable[..., Any]) -> Callable[..., Any]:
    def basic_consume(
        self: Any,
        queue: str,
        on_message_callback: Any,
        auto_ack: bool = False,
        exclusive: bool = False,
        consumer_tag: str | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> Any:
        consumer, sdk = None, None
        if PIKA.active and not is_instrumentation_suppressed() and callable(on_message_callback):
            consumer, sdk = consumer_for(self._impl, queue, on_message_callback)
        tag = original(
            self,
            queue=queue,
            on_message_callback=on_message_callback
            if consumer is None
            else wrap_callback(consumer, on_message_callback),
            auto_ack=auto_ack,
            exclusive=exclusive,
            consumer_tag=consumer_tag,
            arguments=arguments,
        )
        if consumer is not None:
            consumer.start_stream(sdk, tag)
        return tag

    return basic_consume


def _blocking_consume(original: Callable[..., Any]) -> Callable[..., Any]:
    def consume(
        self: Any,
        queue: str,
        auto_ack: bool = False,
        exclusive: bool = False,
        arguments: dict[str, Any] | None = None,
        inactivity_timeout: float | None = None,
        consumer_tag: str | None = None,
    ) -> Any:
        inner = original(
            self,
            queue=queue,
            auto_ack=auto_ack,
            exclusive=exclusive,
            arguments=arguments,
            inactivity_timeout=inactivity_timeout,
            consumer_tag=consumer_tag,
        )
        if not PIKA.active or is_instrumentation_suppressed():
            return inner
        consumer, sdk = consumer_for(self._impl, queue, "consume")
        if consumer is None:
            return inner
        return instrumented_consume(inner, consumer, sdk)

    return consume


def _channel_basic_consume(
    original: Callable[..., Any], blocking_channel: type[Any]
) -> Callable[..., Any]:
    def basic_consume(
        self: Any,
        queue: str,
        on_message_callback: Any,
        auto_ack: bool = False,
        exclusive: bool = False,
        consumer_tag: str | None = None,
        arguments: dict[str, Any] | None = None,
        callback: Any = None,
    ) -> Any:
        consumer, sdk = None, None
        if (
            PIKA.active
            and not is_instrumentation_suppressed()
            and callable(on_message_callback)
            # BlockingChannel subscribes its own dispatcher here; its callbacks are wrapped above.
            and not isinstance(getattr(on_message_callback, "__self__", None), blocking_channel)
        ):
            consumer, sdk = consumer_for(self, queue, on_message_callback)
        tag = original(
            self,
            queue=queue,
            on_message_callback=on_message_callback
            if consumer is None
            else wrap_callback(consumer, on_message_callback),
            auto_ack=auto_ack,
            exclusive=exclusive,
            consumer_tag=consumer_tag,
            arguments=arguments,
            callback=callback,
        )
        if consumer is not None:
            consumer.start_stream(sdk, tag)
        return tag

    return basic_consume


def _with_headers(properties: Any, headers: Mapping[str, Any], basic_properties: type[Any]) -> Any:
    """Properties carrying the lineage headers: a new object, never the caller's one changed.

    A caller reusing one ``BasicProperties`` for many messages would otherwise see headers of an
    old run appear on later messages.
    """
    if properties is None:
        return basic_properties(headers=dict(headers))
    new = copy.copy(properties)
    old = getattr(properties, "headers", None)
    new.headers = {**old, **headers} if old else dict(headers)
    return new


def _basic_publish(original: Callable[..., Any], basic_properties: type[Any]) -> Callable[..., Any]:
    def basic_publish(
        self: Any,
        exchange: str,
        routing_key: str,
        body: bytes,
        properties: Any = None,
        mandatory: bool = False,
    ) -> Any:
        def publish(props: Any) -> Any:
            return original(
                self,
                exchange=exchange,
                routing_key=routing_key,
                body=body,
                properties=props,
                mandatory=mandatory,
            )

        if not PIKA.active or is_instrumentation_suppressed():
            return publish(properties)
        run = CURRENT_RUN.get()
        if run is None:
            prepared = prepare_program_publish(
                PIKA, namespace_of(getattr(self, "connection", None)), exchange, routing_key
            )
            if prepared is None:
                return publish(properties)
            scope, headers = prepared
            try:
                properties = _with_headers(properties, headers, basic_properties)
            except Exception as exc:  # noqa: BLE001 - publish as the caller asked
                PIKA.warn_once("recording a publish", exc)
            return publish(properties) if scope is None else scope.call(publish, properties)
        try:
            namespace = namespace_of(getattr(self, "connection", None))
            headers = record_publish(run, namespace, exchange, routing_key)
            properties = _with_headers(properties, headers, basic_properties)
        except Exception as exc:  # noqa: BLE001 - publish as the caller asked
            PIKA.warn_once("recording a publish", exc)
        return publish(properties)

    return basic_publish


def _basic_cancel(original: Callable[..., Any]) -> Callable[..., Any]:
    def basic_cancel(self: Any, consumer_tag: str = "", callback: Any = None) -> Any:
        if PIKA.active:
            try:
                end_stream(self, consumer_tag)
            except Exception as exc:  # noqa: BLE001
                PIKA.warn_once("ending a cancelled consumer's run", exc)
        return original(self, consumer_tag=consumer_tag, callback=callback)

    return basic_cancel
