"""Consumer-side lineage for pika: one run per delivery, or one long run per consumer.

Everything here runs on the application's thread (or pika's I/O loop thread) and must never raise
into pika: bookkeeping failures are logged once and the delivery goes on without lineage, while an
exception of the application's callback reaches pika unchanged.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind

from lineage_instrumentation.config import InstrumentationConfig
from lineage_instrumentation.pika._naming import messaging_dataset, namespace_of
from lineage_instrumentation.propagation import extract_context, extract_parent
from lineage_sdk.models.dataset import LineageDataset
from lineage_sdk.sdk.events import JOB_TYPE_FACET_URL
from lineage_sdk.sdk.provider import STATE, LineageSDK, get_sdk
from lineage_sdk.sdk.runs import CURRENT_RUN, ParentRef
from lineage_sdk.sdk.scope import RunScope
from lineage_sdk.sdk.suppression import is_instrumentation_suppressed

__all__ = [
    "Consumer",
    "Settings",
    "end_all_streams",
    "end_channel_streams",
    "end_stream",
    "instrumented_consume",
    "job_type_facet",
    "register_exit_hook",
    "run_in_scope",
    "warn_once",
]

_LOG = logging.getLogger("lineage_instrumentation.pika")
_MAX_DATASETS = 10_000  # distinct (exchange, routing key) pairs remembered per consumer
_EMPTY: Mapping[str, Any] = {}
_warned: set[str] = set()


def run_in_scope(scope: RunScope, call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)`` as the scope's run: current while it runs, ended with what it raised."""
    scope.activate()
    try:
        result = call(*args)
    except BaseException as exc:
        scope.deactivate()
        scope.end(exc)
        raise
    scope.deactivate()
    scope.end()
    return result


def warn_once(what: str, exc: BaseException) -> None:
    """Log a failure of the instrumentation itself once per kind: lineage is lost, not the app."""
    if what not in _warned:
        _warned.add(what)
        _LOG.warning(
            "lineage pika instrumentation: %s failed (%s: %s); continuing without it",
            what,
            type(exc).__name__,
            exc,
        )
        _LOG.debug("details", exc_info=exc)


@dataclass(frozen=True, slots=True)
class Settings:
    """What the instrumentor was told in ``instrument(...)``; None means "from configuration"."""

    mode: str | None = None
    consumer_job_name: str | None = None
    streaming_interval_ms: int | None = None
    env_parent: ParentRef | None = None

    def resolve(self, sdk: LineageSDK | None) -> tuple[str, str | None, int]:
        cfg = (
            sdk.config.section("instrumentation", InstrumentationConfig)
            if sdk is not None
            else None
        )
        mode = self.mode or (cfg.pika_mode if cfg is not None else "per_message")
        job = self.consumer_job_name or (cfg.pika_consumer_job_name if cfg is not None else None)
        interval = self.streaming_interval_ms or (
            cfg.pika_streaming_interval_ms if cfg is not None else 60_000
        )
        return mode, job, interval


class _State:
    """Module state shared with the instrumentor: whether wrappers are live, and the settings."""

    __slots__ = ("active", "settings")

    def __init__(self) -> None:
        self.active = False
        self.settings = Settings()


STATE_PIKA = _State()


def callable_name(callback: Any) -> str:
    """``module-less`` qualified name of a callback, without ``<locals>`` noise."""
    if isinstance(callback, str):
        return callback
    func = callback
    while isinstance(func, functools.partial):
        func = func.func
    name = getattr(func, "__qualname__", None) or type(func).__qualname__
    return str(name).replace("<locals>.", "")


def job_type_facet(producer: str, processing_type: str, job_type: str) -> dict[str, Any]:
    """``jobType`` facet of instrumented jobs: STREAMING for the long runs of streaming mode."""
    return {
        "_producer": producer,
        "_schemaURL": JOB_TYPE_FACET_URL,
        "processingType": processing_type,
        "integration": "LINEAGE_SDK",
        "jobType": job_type,
    }


class Consumer:
    """One ``basic_consume``/``consume()`` subscription: its job name and its datasets.

    Datasets are cached per (exchange, routing key), so a delivery costs a dict lookup; the job
    facets are one dict per producer URI, which keeps the event builder's job cache warm.
    """

    __slots__ = (
        "_datasets",
        "_job_facets",
        "_producer",
        "channel",
        "job_name",
        "mode",
        "namespace",
        "queue",
        "stream",
        "streaming_interval_ms",
    )

    def __init__(
        self, channel: Any, queue: str, callback_name: str, sdk: LineageSDK | None
    ) -> None:
        mode, job_name, interval = STATE_PIKA.settings.resolve(sdk)
        self.channel = channel  # the pika.channel.Channel (the impl, for a BlockingChannel)
        self.queue = queue
        self.job_name = job_name or f"{queue}.{callback_name}"
        self.mode = mode
        self.streaming_interval_ms = interval
        self.namespace = namespace_of(getattr(channel, "connection", None))
        self.stream: Stream | None = None
        self._datasets: dict[tuple[str, str], LineageDataset] = {}
        self._producer = ""
        self._job_facets: Mapping[str, Any] = _EMPTY

    def job_facets(self, sdk: LineageSDK) -> Mapping[str, Any]:
        producer = sdk.builder.producer
        if producer != self._producer:
            self._producer = producer
            self._datasets = {}
            kind = "STREAMING" if self.mode == "streaming" else "BATCH"
            self._job_facets = {"jobType": job_type_facet(producer, kind, "CONSUMER")}
        return self._job_facets

    def dataset(self, sdk: LineageSDK, method: Any) -> LineageDataset | None:
        exchange = method.exchange or ""
        routing_key = method.routing_key or ""
        if self._producer != sdk.builder.producer:
            self.job_facets(sdk)
        key = (exchange, routing_key)
        found = self._datasets.get(key)
        if found is None:
            if len(self._datasets) >= _MAX_DATASETS:
                return None
            found = self._datasets[key] = messaging_dataset(
                self.namespace,
                exchange,
                routing_key,
                self._producer,
                queue=self.queue,
                consumer_tag=method.consumer_tag or None,
            )
        return found

    # --- per delivery --------------------------------------------------------------------

    def open_run(self, sdk: LineageSDK, method: Any, properties: Any) -> RunScope | None:
        """Start the run of one delivery (per_message mode); None when nothing to record."""
        dataset = self.dataset(sdk, method)
        inputs = (dataset,) if dataset is not None else ()
        headers = getattr(properties, "headers", None)
        parent = extract_parent(headers) if headers else None
        ctx = extract_context(headers) if headers else None
        if parent is None:
            parent = STATE_PIKA.settings.env_parent
        if parent is None:  # the enclosing run, if the callback runs inside one
            return RunScope(
                sdk,
                self.job_name,
                None,
                inputs,
                (),
                _EMPTY,
                self.job_facets(sdk),
                parent_context=ctx,
                span_kind=SpanKind.CONSUMER,
            )
        return RunScope(
            sdk,
            self.job_name,
            None,
            inputs,
            (),
            _EMPTY,
            self.job_facets(sdk),
            parent=parent,
            parent_context=ctx,
            span_kind=SpanKind.CONSUMER,
        )

    def wrap(self, callback: Callable[..., Any]) -> Callable[..., Any]:
        """The callback pika will call: the user's, inside a run (or the stream's context)."""
        consumer = self

        def on_message(channel: Any, method: Any, properties: Any, body: bytes) -> Any:
            if not STATE_PIKA.active or is_instrumentation_suppressed():
                return callback(channel, method, properties, body)
            stream = consumer.stream
            if stream is not None:
                return stream.deliver(callback, channel, method, properties, body)
            sdk = STATE.sdk or get_sdk()
            if sdk is None:
                return callback(channel, method, properties, body)
            try:
                scope = consumer.open_run(sdk, method, properties)
            except Exception as exc:  # noqa: BLE001 - lineage must never break the delivery
                warn_once("opening a consumer run", exc)
                scope = None
            if scope is None:
                return callback(channel, method, properties, body)
            return run_in_scope(scope, callback, channel, method, properties, body)

        functools.update_wrapper(on_message, callback)
        return on_message

    def start_stream(self, sdk: LineageSDK | None, consumer_tag: str | None) -> None:
        """In streaming mode, start the consumer's long run (START now)."""
        if self.mode != "streaming" or sdk is None:
            return
        try:
            self.stream = Stream(sdk, self, consumer_tag)
        except Exception as exc:  # noqa: BLE001
            warn_once("starting a streaming run", exc)


class Stream:
    """The long run of one consumer in streaming mode.

    START when the consumer starts; every ``streaming_interval_ms`` (checked on delivery) a
    RUNNING event lists the datasets seen since the previous one; COMPLETE (or FAIL, if the last
    callback raised) when the consumer is cancelled, its channel closes, or the process exits.
    """

    __slots__ = (
        "_lock",
        "consumer",
        "ended",
        "error",
        "interval_ns",
        "next_running_ns",
        "scope",
        "sdk",
        "seen",
        "tag",
        "window",
    )

    def __init__(self, sdk: LineageSDK, consumer: Consumer, consumer_tag: str | None) -> None:
        self.sdk = sdk
        self.consumer = consumer
        self.scope = RunScope(
            sdk,
            consumer.job_name,
            None,
            (),
            (),
            _EMPTY,
            consumer.job_facets(sdk),
            span_kind=SpanKind.CONSUMER,
        )
        self.interval_ns = consumer.streaming_interval_ms * 1_000_000
        self.next_running_ns = time.time_ns() + self.interval_ns
        self.seen: set[LineageDataset] = set()
        self.window: dict[int, LineageDataset] = {}
        self.error: BaseException | None = None
        self.ended = False
        self.tag: str | None = None
        self._lock = threading.Lock()
        if consumer_tag:
            self.register(consumer_tag)

    def register(self, tag: str) -> None:
        """Make ``basic_cancel(tag)``, the broker's cancel and a channel close end this run."""
        if self.tag is not None:
            return
        self.tag = tag
        _register(self)

    def note(self, method: Any) -> None:
        dataset = self.consumer.dataset(self.sdk, method)
        if dataset is not None:
            if dataset not in self.seen:
                self.seen.add(dataset)
                self.scope.run.add_input(dataset)
            self.window[id(dataset)] = dataset
        now = time.time_ns()
        if now >= self.next_running_ns:
            self.running(now)

    def running(self, now: int) -> None:
        window, self.window = self.window, {}
        self.next_running_ns = now + self.interval_ns
        if window:
            self.sdk.processor.emit_running(self.scope.run, now, list(window.values()), ())

    def deliver(
        self, callback: Callable[..., Any], channel: Any, method: Any, properties: Any, body: bytes
    ) -> Any:
        if self.ended:
            return callback(channel, method, properties, body)
        try:
            if self.tag is None and method.consumer_tag:
                self.register(method.consumer_tag)
            self.note(method)
        except Exception as exc:  # noqa: BLE001
            warn_once("recording a streamed delivery", exc)
        scope = self.scope
        ctx_token = otel_context.attach(scope.context)
        run_token = CURRENT_RUN.set(scope.run)
        try:
            result = callback(channel, method, properties, body)
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            CURRENT_RUN.reset(run_token)
            otel_context.detach(ctx_token)
        self.error = None
        return result

    def end(self, error: BaseException | None = None) -> None:
        """COMPLETE (or FAIL with ``error`` or the last callback's exception); idempotent."""
        with self._lock:
            if self.ended:
                return
            self.ended = True
        _unregister(self)
        try:
            self.scope.end(error if error is not None else self.error)
        except Exception as exc:  # noqa: BLE001
            warn_once("ending a streaming run", exc)


# --- where streams are found when a consumer or channel goes away ------------------------------

_BY_CHANNEL: weakref.WeakKeyDictionary[Any, dict[str, Stream]] = weakref.WeakKeyDictionary()
_LIVE: set[Stream] = set()
_REGISTRY_LOCK = threading.Lock()
_atexit_registered = False


def _register(stream: Stream) -> None:
    global _atexit_registered
    channel = stream.consumer.channel
    hook = False
    with _REGISTRY_LOCK:
        _LIVE.add(stream)
        streams = _BY_CHANNEL.get(channel)
        if streams is None:
            streams = _BY_CHANNEL[channel] = {}
            hook = True
        streams[stream.tag or ""] = stream
        if not _atexit_registered:
            register_exit_hook(end_all_streams)
            _atexit_registered = True
    if hook:
        try:
            channel.add_on_close_callback(end_channel_streams)
            channel.add_on_cancel_callback(functools.partial(_on_broker_cancel, channel))
        except Exception as exc:  # noqa: BLE001
            warn_once("watching a channel for close", exc)


def register_exit_hook(hook: Callable[[], None]) -> None:
    """Run ``hook`` at exit before the pipeline's final flush.

    Called only once the SDK exists (its pipeline registered its own hook when it was built);
    atexit runs hooks last-in first-out, so the COMPLETE events queued here are still exported.
    """
    atexit.register(hook)


def _unregister(stream: Stream) -> None:
    with _REGISTRY_LOCK:
        _LIVE.discard(stream)
        streams = _BY_CHANNEL.get(stream.consumer.channel)
        if streams is not None and streams.get(stream.tag or "") is stream:
            del streams[stream.tag or ""]


def end_stream(channel: Any, consumer_tag: str) -> None:
    """The consumer ``consumer_tag`` of ``channel`` is cancelled: COMPLETE its stream."""
    with _REGISTRY_LOCK:
        streams = _BY_CHANNEL.get(channel)
        stream = streams.get(consumer_tag) if streams else None
    if stream is not None:
        stream.end()


def _on_broker_cancel(channel: Any, method_frame: Any) -> None:
    try:
        end_stream(channel, method_frame.method.consumer_tag)
    except Exception as exc:  # noqa: BLE001
        warn_once("handling a broker cancel", exc)


def _normal_close(reason: BaseException | None) -> bool:
    if reason is None:
        return True
    if type(reason).__name__ in ("ChannelClosedByClient", "ConnectionClosedByClient"):
        return True
    return getattr(reason, "reply_code", None) == 200


def end_channel_streams(channel: Any, reason: BaseException | None = None) -> None:
    """A channel closed: end its streams, FAIL with the reason unless it was a normal close."""
    try:
        with _REGISTRY_LOCK:
            streams = list((_BY_CHANNEL.pop(channel, None) or {}).values())
        error = None if _normal_close(reason) else reason
        for stream in streams:
            stream.end(error)
    except Exception as exc:  # noqa: BLE001
        warn_once("ending streams of a closed channel", exc)


def end_all_streams() -> None:
    """End every live stream (at exit, or when the instrumentation is removed)."""
    with _REGISTRY_LOCK:
        streams = list(_LIVE)
    for stream in streams:
        stream.end()


# --- the BlockingChannel.consume() generator ----------------------------------------------------


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
            if method is None or not STATE_PIKA.active or is_instrumentation_suppressed():
                yield item
                continue
            stream = consumer.stream
            try:
                if stream is not None:
                    if stream.tag is None and method.consumer_tag:
                        stream.register(method.consumer_tag)
                    stream.note(method)
                    scope = stream.scope
                else:
                    current_sdk = STATE.sdk or get_sdk()
                    scope = (
                        consumer.open_run(current_sdk, method, properties) if current_sdk else None
                    )
            except Exception as exc:  # noqa: BLE001
                warn_once("opening a consumer run", exc)
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
