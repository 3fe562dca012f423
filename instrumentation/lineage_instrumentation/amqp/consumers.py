"""Consumer-side lineage shared by the AMQP instrumentors (pika, aio-pika).

One run per delivery (``per_message``) or one long run per consumer (``streaming``); the
library-specific modules only adapt their callback signatures and channel events to this.

Everything here runs on the application's thread (or the client's I/O loop) and must never raise
into the client library: bookkeeping failures are logged once and the delivery goes on without
lineage, while an exception of the application's callback reaches the library unchanged.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind

from lineage_instrumentation.amqp.naming import messaging_dataset
from lineage_instrumentation.instrumentor import register_exit_hook, warn_once
from lineage_instrumentation.jobs import job_type_facet, periodic_accumulative
from lineage_instrumentation.propagation import (
    extract_context,
    extract_parent,
    parent_from_environment,
)
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY, HEARTBEAT_FACET_SCHEMA_URL
from lineage_sdk.models.dataset import LineageDataset
from lineage_sdk.sdk.heartbeat import HEARTBEATS, Heartbeat
from lineage_sdk.sdk.provider import LineageSDK
from lineage_sdk.sdk.runs import CURRENT_RUN, ParentRef
from lineage_sdk.sdk.scope import RunScope

__all__ = [
    "MODES",
    "Consumer",
    "Library",
    "Overrides",
    "Settings",
    "Stream",
    "callable_name",
    "end_all_streams",
    "end_channel_streams",
    "end_stream",
    "normal_close",
]

_LOG = logging.getLogger("lineage_instrumentation")
_MAX_DATASETS = 10_000  # distinct (exchange, routing key) pairs remembered per consumer
_EMPTY: Mapping[str, Any] = {}
MODES = ("per_message", "streaming")


@dataclass(frozen=True, slots=True)
class Settings:
    """What a consumer or a publish outside any run needs to know, resolved once."""

    mode: str = "per_message"
    consumer_job_name: str | None = None
    streaming_interval_ms: int = 60_000
    publisher_job_name: str | None = None
    env_parent: ParentRef | None = None
    heartbeat_interval_ms: int = 60_000


@dataclass(frozen=True, slots=True)
class Overrides:
    """What ``instrument(...)`` was told; None means "from configuration"."""

    mode: str | None = None
    consumer_job_name: str | None = None
    streaming_interval_ms: int | None = None
    env_parent: ParentRef | None = None
    heartbeat_interval_ms: int | None = None

    @classmethod
    def from_kwargs(
        cls, kwargs: Mapping[str, Any], key: Callable[[str], str], source: str
    ) -> Overrides:
        """Check the keyword arguments of ``instrument()``; ``key("mode")`` names the config key
        each one overrides, for the error message."""
        mode = kwargs.get("mode")
        if mode is not None and mode not in MODES:
            raise ConfigError(key("mode"), mode, "per_message or streaming", source=source)
        interval = kwargs.get("streaming_interval_ms")
        if interval is not None and (
            not isinstance(interval, int) or isinstance(interval, bool) or interval < 1
        ):
            raise ConfigError(
                key("streaming_interval_ms"), interval, "an integer >= 1", source=source
            )
        job_name = kwargs.get("consumer_job_name")
        if job_name is not None and (not isinstance(job_name, str) or not job_name):
            raise ConfigError(
                key("consumer_job_name"), job_name, "a non-empty string", source=source
            )
        heartbeat = kwargs.get("heartbeat_interval_ms")
        if heartbeat is not None and (
            not isinstance(heartbeat, int) or isinstance(heartbeat, bool) or heartbeat < 0
        ):
            raise ConfigError(
                key("heartbeat_interval_ms"),
                heartbeat,
                "an integer number of milliseconds >= 0 (0 disables heartbeats)",
                source=source,
            )
        return cls(
            mode,
            job_name,
            interval,
            parent_from_environment(),
            heartbeat,
        )

    def over(self, configured: Settings) -> Settings:
        """``configured`` with what ``instrument()`` said on top."""
        return Settings(
            self.mode or configured.mode,
            self.consumer_job_name or configured.consumer_job_name,
            self.streaming_interval_ms or configured.streaming_interval_ms,
            configured.publisher_job_name,
            self.env_parent,
            configured.heartbeat_interval_ms
            if self.heartbeat_interval_ms is None
            else self.heartbeat_interval_ms,
        )


class Library:
    """One instrumented client library's state: whether its wrappers are live, what
    ``instrument()`` said, how to read its configuration, and how to watch a channel close."""

    __slots__ = ("_warned", "active", "configured", "name", "overrides", "watch_channel")

    def __init__(
        self,
        name: str,
        configured: Callable[[LineageSDK | None], Settings],
        watch_channel: Callable[[Any], None],
    ) -> None:
        self.name = name
        self.active = False
        self.overrides = Overrides()
        self.configured = configured
        self.watch_channel = watch_channel  # makes the channel's close end its streams
        self._warned: set[str] = set()

    def settings(self, sdk: LineageSDK | None) -> Settings:
        return self.overrides.over(self.configured(sdk))

    def warn_once(self, what: str, exc: BaseException) -> None:
        """Log a failure of the instrumentation itself once per kind: lineage is lost, not the
        application's message."""
        warn_once(_LOG, self._warned, self.name, what, exc)


def callable_name(callback: Any) -> str:
    """``module-less`` qualified name of a callback, without ``<locals>`` noise."""
    if isinstance(callback, str):
        return callback
    func = callback
    while isinstance(func, functools.partial):
        func = func.func
    name = getattr(func, "__qualname__", None) or type(func).__qualname__
    return str(name).replace("<locals>.", "")


class Consumer:
    """One subscription: its job name and its datasets.

    Datasets are cached per (exchange, routing key), so a delivery costs a dict lookup; the job
    facets are one dict per producer URI, which keeps the event builder's job cache warm.
    """

    __slots__ = (
        "_datasets",
        "_job_facets",
        "_producer",
        "channel",
        "env_parent",
        "heartbeat_interval_s",
        "job_name",
        "library",
        "mode",
        "namespace",
        "queue",
        "stream",
        "streaming_interval_ms",
    )

    def __init__(
        self,
        library: Library,
        channel: Any,
        namespace: str,
        queue: str,
        callback_name: str,
        sdk: LineageSDK | None,
    ) -> None:
        settings = library.settings(sdk)
        self.library = library
        self.channel = channel  # the key its streams are found by when the channel closes
        self.namespace = namespace
        self.queue = queue
        self.job_name = settings.consumer_job_name or f"{queue}.{callback_name}"
        self.mode = settings.mode
        self.streaming_interval_ms = settings.streaming_interval_ms
        self.heartbeat_interval_s = settings.heartbeat_interval_ms / 1000
        self.env_parent = settings.env_parent
        self.stream: Stream | None = None
        self._datasets: dict[tuple[str, str], LineageDataset] = {}
        self._producer = ""
        self._job_facets: Mapping[str, Any] = _EMPTY

    def job_facets(self, sdk: LineageSDK) -> Mapping[str, Any]:
        producer = sdk.builder.producer
        if producer != self._producer:
            self._producer = producer
            self._datasets = {}
            if self.mode == "streaming":
                facet = job_type_facet(producer, "STREAMING", "CONSUMER", self.emission_pattern())
            else:
                facet = job_type_facet(producer, "BATCH", "CONSUMER")
            self._job_facets = {"jobType": facet}
        return self._job_facets

    def emission_pattern(self) -> dict[str, Any]:
        """How a streaming consumer's run emits (``jobType.emissionPattern``, 2-0-4): periodic
        RUNNING heartbeats every ``heartbeat_interval_ms``, each listing every dataset the run
        has seen so far (or, with heartbeats off, a RUNNING at most every
        ``streaming_interval_ms`` with the datasets seen since the previous one); every event
        adds to the run's datasets, so a reader takes their union (ACCUMULATIVE)."""
        interval_s = self.heartbeat_interval_s or self.streaming_interval_ms / 1000
        return periodic_accumulative(interval_s)

    def dataset(
        self, sdk: LineageSDK, exchange: str | None, routing_key: str | None, tag: str | None
    ) -> LineageDataset | None:
        exchange = exchange or ""
        routing_key = routing_key or ""
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
                consumer_tag=tag or None,
            )
        return found

    def open_run(
        self,
        sdk: LineageSDK,
        exchange: str | None,
        routing_key: str | None,
        tag: str | None,
        headers: Mapping[str, Any] | None,
    ) -> RunScope:
        """Start the run of one delivery (per_message mode), child of the publishing run."""
        dataset = self.dataset(sdk, exchange, routing_key, tag)
        inputs = (dataset,) if dataset is not None else ()
        parent = extract_parent(headers) if headers else None
        ctx = extract_context(headers) if headers else None
        if parent is None:
            parent = self.env_parent
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

    def start_stream(self, sdk: LineageSDK | None, consumer_tag: str | None) -> None:
        """In streaming mode, start the consumer's long run (START now)."""
        if self.mode != "streaming" or sdk is None:
            return
        try:
            self.stream = Stream(sdk, self, consumer_tag)
        except Exception as exc:  # noqa: BLE001
            self.library.warn_once("starting a streaming run", exc)


class Stream:
    """The long run of one consumer in streaming mode.

    START when the consumer starts; every ``streaming_interval_ms`` (checked on delivery) a
    RUNNING event lists the datasets seen since the previous one; every ``heartbeat_interval_ms``
    (on the SDK's heartbeat thread, whether or not messages arrive) a RUNNING heartbeat lists
    every dataset seen so far; COMPLETE (or FAIL, if the last callback raised) when the consumer
    is cancelled, its channel closes, or the process exits. Every event of the run carries the
    ``lineagesdk_heartbeat`` facet naming the interval, so a reader can tell when it stopped.
    """

    __slots__ = (
        "_lock",
        "beat",
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
        heartbeat_s = consumer.heartbeat_interval_s
        run_facets: Mapping[str, Any] = _EMPTY
        if heartbeat_s > 0:
            run_facets = {
                HEARTBEAT_FACET_KEY: {
                    "_producer": sdk.builder.producer,
                    "_schemaURL": HEARTBEAT_FACET_SCHEMA_URL,
                    "intervalS": heartbeat_s,
                }
            }
        self.scope = RunScope(
            sdk,
            consumer.job_name,
            None,
            (),
            (),
            run_facets,
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
        self.beat: Heartbeat | None = None
        if heartbeat_s > 0:
            self.beat = HEARTBEATS.schedule(heartbeat_s, self.heartbeat)
        if consumer_tag:
            self.register(consumer_tag)

    def register(self, tag: str) -> None:
        """Make a cancel of ``tag`` and the channel's close end this run."""
        if self.tag is not None:
            return
        self.tag = tag
        _register(self)

    def note(self, exchange: str | None, routing_key: str | None, tag: str | None) -> None:
        """A delivery from ``exchange`` with ``routing_key``: its dataset joins the run (a
        RUNNING event when the interval has passed). Never raises."""
        try:
            if self.tag is None and tag:
                self.register(tag)
            dataset = self.consumer.dataset(self.sdk, exchange, routing_key, tag)
            if dataset is not None:
                if dataset not in self.seen:
                    self.seen.add(dataset)
                    self.scope.run.add_input(dataset)
                self.window[id(dataset)] = dataset
            now = time.time_ns()
            if now >= self.next_running_ns:
                self.running(now)
        except Exception as exc:  # noqa: BLE001
            self.consumer.library.warn_once("recording a streamed delivery", exc)

    def running(self, now: int) -> None:
        window, self.window = self.window, {}
        self.next_running_ns = now + self.interval_ns
        if window:
            self.sdk.processor.emit_running(self.scope.run, now, list(window.values()), ())

    def heartbeat(self, _now_ns: int) -> None:
        """RUNNING with every dataset seen so far (on the heartbeat thread); nothing once the run
        ended. The event's time is taken under the lock ``end`` takes, so no heartbeat is ever
        timed after COMPLETE/FAIL. Never raises."""
        try:
            with self._lock:
                if self.ended:
                    return
                run = self.scope.run
                self.sdk.processor.emit_running(
                    run, time.time_ns(), tuple(run.inputs), tuple(run.outputs)
                )
        except Exception as exc:  # noqa: BLE001
            self.consumer.library.warn_once("sending a streaming heartbeat", exc)

    def call(self, callback: Callable[..., Any], *args: Any) -> Any:
        """``callback(*args)`` inside the stream's run (which goes on); remembers its error."""
        scope = self.scope
        ctx_token = otel_context.attach(scope.context)
        run_token = CURRENT_RUN.set(scope.run)
        try:
            result = callback(*args)
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            CURRENT_RUN.reset(run_token)
            otel_context.detach(ctx_token)
        self.error = None
        return result

    async def acall(self, callback: Callable[..., Any], *args: Any) -> Any:
        """``await callback(*args)`` inside the stream's run (see ``call``)."""
        scope = self.scope
        ctx_token = otel_context.attach(scope.context)
        run_token = CURRENT_RUN.set(scope.run)
        try:
            result = await callback(*args)
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
        if self.beat is not None:
            self.beat.cancel()
        _unregister(self)
        try:
            self.scope.end(error if error is not None else self.error)
        except Exception as exc:  # noqa: BLE001
            self.consumer.library.warn_once("ending a streaming run", exc)


# --- where streams are found when a consumer or channel goes away ------------------------------

_BY_CHANNEL: weakref.WeakKeyDictionary[Any, dict[str, Stream]] = weakref.WeakKeyDictionary()
_LIVE: set[Stream] = set()
_REGISTRY_LOCK = threading.Lock()
_atexit_registered = False


def _register(stream: Stream) -> None:
    global _atexit_registered
    channel = stream.consumer.channel
    watch = False
    with _REGISTRY_LOCK:
        _LIVE.add(stream)
        streams = _BY_CHANNEL.get(channel)
        if streams is None:
            streams = _BY_CHANNEL[channel] = {}
            watch = True
        streams[stream.tag or ""] = stream
        if not _atexit_registered:
            register_exit_hook(end_all_streams)
            _atexit_registered = True
    if watch:
        try:
            stream.consumer.library.watch_channel(channel)
        except Exception as exc:  # noqa: BLE001
            stream.consumer.library.warn_once("watching a channel for close", exc)


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


def normal_close(reason: BaseException | None) -> bool:
    """True when a channel closed because the application asked (no FAIL for that)."""
    if reason is None:
        return True
    if type(reason).__name__ in ("ChannelClosedByClient", "ConnectionClosedByClient"):
        return True
    return getattr(reason, "reply_code", None) == 200 or getattr(reason, "code", None) == 200


def end_channel_streams(channel: Any, reason: BaseException | None = None) -> None:
    """A channel closed: end its streams, FAIL with the reason unless it was a normal close.

    Never raises (it runs in the client library's close callbacks)."""
    try:
        with _REGISTRY_LOCK:
            streams = list((_BY_CHANNEL.pop(channel, None) or {}).values())
        error = None if normal_close(reason) else reason
        for stream in streams:
            stream.end(error)
    except Exception as exc:  # noqa: BLE001
        _LOG.debug("ending streams of a closed channel failed", exc_info=exc)


def end_all_streams(library: Library | None = None) -> None:
    """End every live stream (of ``library``, or all): at exit, or when uninstrumented."""
    with _REGISTRY_LOCK:
        streams = [s for s in _LIVE if library is None or s.consumer.library is library]
    for stream in streams:
        stream.end()
