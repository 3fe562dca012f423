"""pika-specific consumer glue: callbacks, the ``BlockingChannel.consume()`` generator, and the
channel events that end a streaming run. The runs themselves are ``lineage_instrumentation.amqp``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Generator
from typing import Any

from lineage_instrumentation.amqp.consumers import (
    Consumer,
    Library,
    Settings,
    Stream,
    callable_name,
    end_channel_streams,
    end_stream,
)
from lineage_instrumentation.amqp.naming import namespace_for
from lineage_instrumentation.config import InstrumentationConfig
from lineage_sdk.sdk.provider import STATE, LineageSDK, get_sdk
from lineage_sdk.sdk.scope import RunScope
from lineage_sdk.sdk.suppression import is_instrumentation_suppressed

__all__ = ["PIKA", "consumer_for", "instrumented_consume", "namespace_of", "wrap_callback"]


def namespace_of(connection: Any) -> str:
    """``rabbitmq://host:port`` of a pika connection (``pika.connection.Connection``)."""
    params = getattr(connection, "params", None)
    return namespace_for(getattr(params, "host", None), getattr(params, "port", None))


def _configured(sdk: LineageSDK | None) -> Settings:
    if sdk is None:
        return Settings()
    cfg = sdk.config.section("instrumentation", InstrumentationConfig)
    return Settings(
        cfg.pika_mode,
        cfg.pika_consumer_job_name,
        cfg.pika_streaming_interval_ms,
        cfg.pika_publisher_job_name,
        heartbeat_interval_ms=cfg.pika_heartbeat_interval_ms,
    )


def _on_broker_cancel(channel: Any, method_frame: Any) -> None:
    try:
        end_stream(channel, method_frame.method.consumer_tag)
    except Exception as exc:  # noqa: BLE001
        PIKA.warn_once("handling a broker cancel", exc)


def _watch_channel(channel: Any) -> None:
    channel.add_on_close_callback(end_channel_streams)
    channel.add_on_cancel_callback(functools.partial(_on_broker_cancel, channel))


PIKA = Library("pika", _configured, _watch_channel)


def consumer_for(channel: Any, queue: str, callback: Any) -> tuple[Consumer | None, Any]:
    """The ``Consumer`` of a subscription on a ``pika.channel.Channel``; never raises."""
    try:
        sdk = STATE.sdk or get_sdk()
        namespace = namespace_of(getattr(channel, "connection", None))
        return Consumer(PIKA, channel, namespace, queue, callable_name(callback), sdk), sdk
    except Exception as exc:  # noqa: BLE001 - lineage must never break the subscription
        PIKA.warn_once("setting up a consumer", exc)
        return None, None


def _open_run(consumer: Consumer, sdk: LineageSDK, method: Any, properties: Any) -> RunScope:
    return consumer.open_run(
        sdk,
        method.exchange,
        method.routing_key,
        method.consumer_tag,
        getattr(properties, "headers", None),
    )


def wrap_callback(consumer: Consumer, callback: Callable[..., Any]) -> Callable[..., Any]:
    """The callback pika will call: the user's, inside a run (or the stream's run)."""

    def on_message(channel: Any, method: Any, properties: Any, body: bytes) -> Any:
        if not PIKA.active or is_instrumentation_suppressed():
            return callback(channel, method, properties, body)
        stream = consumer.stream
        if stream is not None:
            if stream.ended:
                return callback(channel, method, properties, body)
            stream.note(method.exchange, method.routing_key, method.consumer_tag)
            return stream.call(callback, channel, method, properties, body)
        sdk = STATE.sdk or get_sdk()
        if sdk is None:
            return callback(channel, method, properties, body)
        try:
            scope = _open_run(consumer, sdk, method, properties)
        except Exception as exc:  # noqa: BLE001 - lineage must never break the delivery
            PIKA.warn_once("opening a consumer run", exc)
            return callback(channel, method, properties, body)
        return scope.call(callback, channel, method, properties, body)

    functools.update_wrapper(on_message, callback)
    return on_message


def _safe_deactivate(scope: RunScope) -> None:
    # Finalized in another context (or twice): there is nothing to restore there.
    with contextlib.suppress(ValueError, RuntimeError):
        scope.deactivate()


def instrumented_consume(
    inner: Generator[Any, None, None], consumer: Consumer, sdk: LineageSDK | None
) -> Generator[Any, None, None]:
    """Wrap ``BlockingChannel.consume()``: each delivery's run spans the caller's loop body.

    The run is made current when a message is yielded and ended when the caller asks for the next
    one (or closes the generator), so what the loop body reads, writes and publishes belongs to
    it. In streaming mode the consumer's one run is made current instead. An exception thrown
    into the generator ends the run with FAIL; an exception of the loop body cannot be seen by a
    generator and ends the run as COMPLETE when the generator is closed.
    """
    consumer.start_stream(sdk, None)
    scope: RunScope | None = None
    activated = False
    try:
        while True:
            try:
                item = next(inner)
            except StopIteration:
                return
            method, properties, _body = item
            if method is None or not PIKA.active or is_instrumentation_suppressed():
                yield item
                continue
            stream: Stream | None = consumer.stream
            try:
                if stream is not None:
                    stream.note(method.exchange, method.routing_key, method.consumer_tag)
                    scope = stream.scope
                else:
                    current_sdk = STATE.sdk or get_sdk()
                    scope = (
                        _open_run(consumer, current_sdk, method, properties)
                        if current_sdk
                        else None
                    )
            except Exception as exc:  # noqa: BLE001
                PIKA.warn_once("opening a consumer run", exc)
                scope = None
            if scope is None:
                yield item
                continue
            scope.activate()
            activated = True
            try:
                yield item
            except GeneratorExit:
                raise
            except BaseException as exc:
                activated = False
                _safe_deactivate(scope)
                if stream is None:
                    scope.end(exc)
                else:
                    stream.error = exc
                scope = None
                raise
            activated = False
            _safe_deactivate(scope)
            if stream is None:
                scope.end()
            scope = None
    finally:
        if scope is not None:
            if activated:
                _safe_deactivate(scope)
            if consumer.stream is None:
                scope.end()
        if consumer.stream is not None:
            consumer.stream.end()
        inner.close()
