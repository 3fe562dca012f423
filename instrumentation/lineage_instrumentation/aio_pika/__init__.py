"""``AioPikaInstrumentor``: lineage from aio-pika consumers and publishers without code changes.

The same runs, datasets and headers as the pika instrumentor (``lineage_instrumentation.amqp``),
so services on either client link into one graph. Patched (and restored exactly by
``uninstrument()``):

- ``Queue.consume``: each delivery's callback runs inside the delivery's run (``per_message``) or
  the consumer's long run (``streaming``). aio-pika runs every callback in a task of its own,
  whose context holds the run, so concurrent deliveries never see each other's run;
- ``QueueIterator.__anext__`` (and ``RobustQueueIterator``'s): the run covers the loop body, from
  the message handed out to the next ``__anext__``; ``__aexit__`` ends it with the exception that
  left the ``async with`` block, ``close()`` ends it;
- ``Queue.cancel``: ends a streaming consumer's run (a channel's close ends its streams too);
- ``Exchange.publish``: inside a run, the exchange and routing key become an output and the run
  travels in the message headers (on a copy of the message); outside any run, the publish is a
  run of the program's job.

Nothing is recorded while ``is_instrumentation_suppressed()`` is true. Importing this module does
not import aio-pika; ``instrument()`` does, after checking the version.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import weakref
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, ClassVar

from lineage_instrumentation.amqp.consumers import (
    Consumer,
    Library,
    Overrides,
    Settings,
    callable_name,
    end_all_streams,
    end_channel_streams,
    end_stream,
)
from lineage_instrumentation.amqp.naming import namespace_for
from lineage_instrumentation.amqp.publisher import (
    end_publisher_streams,
    prepare_program_publish,
    record_publish,
)
from lineage_instrumentation.config import AioPikaConfig
from lineage_instrumentation.instrumentor import BaseInstrumentor, LibraryRequirement, Patcher
from lineage_sdk.sdk.provider import STATE, LineageSDK, get_sdk
from lineage_sdk.sdk.runs import CURRENT_RUN
from lineage_sdk.sdk.scope import RunScope
from lineage_sdk.sdk.suppression import is_instrumentation_suppressed

__all__ = ["AioPikaConfig", "AioPikaInstrumentor", "namespace_of"]

_TABLE = "instrumentation.aio_pika"


def namespace_of(channel: Any) -> str:
    """``rabbitmq://host:port`` of an aio-pika channel's connection URL."""
    connection = getattr(channel, "_connection", None) or getattr(channel, "connection", None)
    url = getattr(connection, "url", None)
    scheme = getattr(url, "scheme", "amqp")
    return namespace_for(
        getattr(url, "host", None),
        getattr(url, "explicit_port", None) or getattr(url, "port", None),
        5671 if scheme == "amqps" else 5672,
    )


def _configured(sdk: LineageSDK | None) -> Settings:
    if sdk is None:
        return Settings()
    cfg = sdk.config.section(_TABLE, AioPikaConfig)
    return Settings(
        cfg.mode,
        cfg.consumer_job_name,
        cfg.streaming_interval_ms,
        cfg.publisher_job_name,
        heartbeat_interval_ms=cfg.heartbeat_interval_ms,
    )


def _close_error(reason: BaseException | None) -> BaseException | None:
    """The error a channel closed with, or None for a close the application asked for: aiormq
    reports that as ``ChannelClosed``/``ConnectionClosed`` with no reply code (or 200)."""
    if reason is None or type(reason).__name__ not in ("ChannelClosed", "ConnectionClosed"):
        return reason
    code = reason.args[0] if reason.args else None
    return None if code in (None, 200) else reason


def _on_channel_close(channel: Any, *args: Any) -> None:
    reason = next((a for a in args if isinstance(a, BaseException)), None)
    end_channel_streams(channel, _close_error(reason))


def _watch_channel(channel: Any) -> None:
    channel.close_callbacks.add(_on_channel_close)


AIO_PIKA = Library("aio-pika", _configured, _watch_channel)


class AioPikaInstrumentor(BaseInstrumentor):
    """Lineage for aio-pika consumers and publishers (see the module docstring).

    ``instrument(mode=..., consumer_job_name=..., streaming_interval_ms=...,
    heartbeat_interval_ms=...)`` overrides the
    ``[lineage.instrumentation.aio_pika]`` table, which is otherwise read (and validated) from
    the SDK's configuration.
    """

    name = "aio_pika"
    config_class: ClassVar[type[AioPikaConfig]] = AioPikaConfig

    def instrumentation_dependencies(self) -> Collection[LibraryRequirement]:
        # Queue.consume(callback), QueueIterator and Exchange.publish(message, routing_key) are
        # the API of aio-pika 9 and 10; older majors are untested.
        return (LibraryRequirement("aio-pika>=9,<11", "aio_pika"),)

    def _instrument(self, **kwargs: Any) -> None:
        overrides = Overrides.from_kwargs(
            kwargs, lambda key: f"{_TABLE}.{key}", "AioPikaInstrumentor.instrument()"
        )
        sdk = STATE.sdk
        if sdk is not None:  # a bad table is one clear error now, not a warning per consumer
            sdk.config.section(_TABLE, AioPikaConfig)

        import aio_pika.exchange
        import aio_pika.queue
        import aio_pika.robust_queue

        queue_iterator = aio_pika.queue.QueueIterator
        patcher = Patcher()
        patcher.patch(
            aio_pika.queue.Queue, "consume", lambda orig: _queue_consume(orig, queue_iterator)
        )
        patcher.patch(aio_pika.queue.Queue, "cancel", _queue_cancel)
        for cls in (queue_iterator, aio_pika.robust_queue.RobustQueueIterator):
            if "__anext__" in cls.__dict__:
                patcher.patch(cls, "__anext__", _iterator_anext)
        patcher.patch(queue_iterator, "__aexit__", _iterator_aexit)
        patcher.patch(queue_iterator, "close", _iterator_close)
        patcher.patch(aio_pika.exchange.Exchange, "publish", _exchange_publish)
        self._patcher = patcher
        AIO_PIKA.overrides = overrides
        AIO_PIKA.active = True

    def _uninstrument(self, **kwargs: Any) -> None:
        AIO_PIKA.active = False  # callbacks wrapped earlier now pass straight through
        self._patcher.restore()
        end_all_streams(AIO_PIKA)
        end_publisher_streams(AIO_PIKA)


def _consumer_for(queue: Any, callback_name: str) -> tuple[Consumer | None, LineageSDK | None]:
    try:
        sdk = STATE.sdk or get_sdk()
        channel = queue.channel
        consumer = Consumer(
            AIO_PIKA, channel, namespace_of(channel), str(queue.name), callback_name, sdk
        )
        return consumer, sdk
    except Exception as exc:  # noqa: BLE001 - lineage must never break the subscription
        AIO_PIKA.warn_once("setting up a consumer", exc)
        return None, None


def _open_run(consumer: Consumer, sdk: LineageSDK, message: Any) -> RunScope:
    return consumer.open_run(
        sdk,
        getattr(message, "exchange", None),
        getattr(message, "routing_key", None),
        getattr(message, "consumer_tag", None),
        getattr(message, "headers", None),
    )


# --- queue.consume(callback) -------------------------------------------------------------------


def _wrap_callback(
    consumer: Consumer, callback: Callable[[Any], Awaitable[Any]]
) -> Callable[[Any], Awaitable[Any]]:
    """The coroutine function aio-pika runs per delivery (each in a task of its own)."""

    async def on_message(message: Any) -> Any:
        if not AIO_PIKA.active or is_instrumentation_suppressed():
            return await callback(message)
        stream = consumer.stream
        if stream is not None:
            if stream.ended:
                return await callback(message)
            stream.note(message.exchange, message.routing_key, message.consumer_tag)
            return await stream.acall(callback, message)
        sdk = STATE.sdk or get_sdk()
        if sdk is None:
            return await callback(message)
        try:
            scope = _open_run(consumer, sdk, message)
        except Exception as exc:  # noqa: BLE001 - lineage must never break the delivery
            AIO_PIKA.warn_once("opening a consumer run", exc)
            return await callback(message)
        return await scope.acall(callback, message)

    with contextlib.suppress(AttributeError, TypeError):
        functools.update_wrapper(on_message, callback)
    return on_message


def _queue_consume(
    original: Callable[..., Awaitable[Any]], queue_iterator: type[Any]
) -> Callable[..., Awaitable[Any]]:
    async def consume(self: Any, callback: Any, *args: Any, **kwargs: Any) -> Any:
        consumer, sdk = None, None
        if (
            AIO_PIKA.active
            and not is_instrumentation_suppressed()
            and callable(callback)
            # queue.iterator() subscribes its own buffer here; its loop body is covered below.
            and not isinstance(getattr(callback, "__self__", None), queue_iterator)
        ):
            consumer, sdk = _consumer_for(self, callable_name(callback))
        if consumer is None:
            return await original(self, callback, *args, **kwargs)
        from aio_pika.tools import ensure_awaitable  # a sync callback warns as it always did

        tag = await original(
            self, _wrap_callback(consumer, ensure_awaitable(callback)), *args, **kwargs
        )
        consumer.start_stream(sdk, tag)
        return tag

    return consume


def _queue_cancel(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def cancel(self: Any, consumer_tag: Any, *args: Any, **kwargs: Any) -> Any:
        if AIO_PIKA.active:
            try:
                end_stream(self.channel, consumer_tag)
            except Exception as exc:  # noqa: BLE001
                AIO_PIKA.warn_once("ending a cancelled consumer's run", exc)
        return await original(self, consumer_tag, *args, **kwargs)

    return cancel


# --- async with queue.iterator() as it: async for message in it ---------------------------------


class _IteratorRun:
    """Lineage state of one ``QueueIterator``: its consumer and the run of the message handed
    out last, current in the iterating task until the next ``__anext__``."""

    __slots__ = ("consumer", "inside", "pending", "task")

    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.pending: RunScope | None = None  # activated in ``task``, still to deactivate
        self.task: asyncio.Task[Any] | None = None
        self.inside = False  # guards against a subclass's __anext__ calling its parent's

    def begin(self, iterator: Any, message: Any) -> None:
        """Make the run of ``message`` current in this task; never raises."""
        try:
            sdk = STATE.sdk or get_sdk()
            if sdk is None:
                return
            consumer = self.consumer
            if consumer is None:
                consumer = self.consumer = Consumer(
                    AIO_PIKA,
                    iterator._amqp_queue.channel,
                    namespace_of(iterator._amqp_queue.channel),
                    str(iterator._amqp_queue.name),
                    "iterator",
                    sdk,
                )
                consumer.start_stream(sdk, getattr(iterator, "consumer_tag", None))
                weakref.finalize(iterator, self.abandon)
            stream = consumer.stream
            if stream is not None:
                if stream.ended:
                    return
                stream.note(message.exchange, message.routing_key, message.consumer_tag)
                scope = stream.scope
            else:
                scope = _open_run(consumer, sdk, message)
            scope.activate()
            self.pending = scope
            self.task = asyncio.current_task()
        except Exception as exc:  # noqa: BLE001 - the message is handed out all the same
            AIO_PIKA.warn_once("opening a consumer run", exc)

    def finish(self, error: BaseException | None) -> None:
        """End the run of the last message (FAIL with ``error``); never raises."""
        scope, self.pending = self.pending, None
        if scope is None:
            return
        try:
            if asyncio.current_task() is self.task:
                with contextlib.suppress(ValueError, RuntimeError):
                    scope.deactivate()
            stream = self.consumer.stream if self.consumer is not None else None
            if stream is not None and scope is stream.scope:
                stream.error = error  # the stream goes on; its end reports the last outcome
            else:
                scope.end(error)
        except Exception as exc:  # noqa: BLE001
            AIO_PIKA.warn_once("ending a consumer run", exc)

    def abandon(self) -> None:
        """The iterator was collected unclosed (a ``break`` out of a bare ``async for``): end
        what is still open. Runs from the garbage collector: never raises."""
        scope, self.pending = self.pending, None
        try:
            stream = self.consumer.stream if self.consumer is not None else None
            if scope is not None and (stream is None or scope is not stream.scope):
                scope.end()
            if stream is not None:
                stream.end()
        except Exception as exc:  # noqa: BLE001
            AIO_PIKA.warn_once("ending a consumer run", exc)


_ITERATORS: weakref.WeakKeyDictionary[Any, _IteratorRun] = weakref.WeakKeyDictionary()


def _finish_stream(consumer: Consumer) -> None:
    if consumer.stream is not None:
        consumer.stream.end()


def _iterator_anext(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def __anext__(self: Any) -> Any:
        state = _ITERATORS.get(self)
        if state is not None:
            if state.inside:
                return await original(self)
            state.finish(None)
        if not AIO_PIKA.active or is_instrumentation_suppressed():
            return await original(self)
        if state is None:
            state = _ITERATORS[self] = _IteratorRun()
        state.inside = True
        try:
            message = await original(self)
        finally:
            state.inside = False
        state.begin(self, message)
        return message

    return __anext__


def _iterator_aexit(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def __aexit__(self: Any, exc_type: Any, exc: Any, traceback: Any) -> Any:
        state = _ITERATORS.get(self)
        if state is not None:
            state.finish(exc)
            stream = state.consumer.stream if state.consumer is not None else None
            if stream is not None and exc is not None:
                stream.error = exc
        return await original(self, exc_type, exc, traceback)

    return __aexit__


def _iterator_close(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def close(self: Any) -> Any:
        state = _ITERATORS.get(self)
        if state is not None:
            state.finish(None)
            try:
                return await original(self)
            finally:
                if state.consumer is not None:
                    _finish_stream(state.consumer)
        return await original(self)

    return close


# --- exchange.publish(message, routing_key) ------------------------------------------------------


def _with_headers(message: Any, headers: Mapping[str, Any]) -> Any:
    """A copy of ``message`` carrying the lineage headers; the caller's message is unchanged
    (one ``Message`` published many times must not carry an old run's headers)."""
    new = copy.copy(message)
    old = getattr(message, "headers", None)
    new.headers = {**old, **headers} if old else dict(headers)
    return new


def _exchange_publish(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def publish(self: Any, message: Any, routing_key: str, *args: Any, **kwargs: Any) -> Any:
        if not AIO_PIKA.active or is_instrumentation_suppressed():
            return await original(self, message, routing_key, *args, **kwargs)
        run = CURRENT_RUN.get()
        scope: RunScope | None = None
        try:
            namespace = namespace_of(self.channel)
            if run is None:
                prepared = prepare_program_publish(AIO_PIKA, namespace, self.name, routing_key)
                if prepared is not None:
                    scope, headers = prepared
                    message = _with_headers(message, headers)
            else:
                message = _with_headers(
                    message, record_publish(run, namespace, self.name, routing_key)
                )
        except Exception as exc:  # noqa: BLE001 - publish as the caller asked
            AIO_PIKA.warn_once("recording a publish", exc)
        if scope is None:
            return await original(self, message, routing_key, *args, **kwargs)
        return await scope.acall(original, self, message, routing_key, *args, **kwargs)

    return publish
