"""Publisher-side lineage shared by the AMQP instrumentors (pika, aio-pika).

Inside a lineage run (a consumer's run, a ``@track_lineage`` function, ...), a publish adds the
exchange and routing key as an output dataset of that run, and the run (with the W3C trace
context) travels in the message headers so the consumer's run can name it as parent.

A publish outside any run still belongs to a job, the publishing program (a producer service has
no lineage code to open a run). Its job is the configured publisher job name, else the program's
name (``sys.argv[0]`` without ``.py``, e.g. ``producer_service``), in the configured job
namespace:

- ``per_message`` mode: the publish is one short run of that job (START, COMPLETE or FAIL);
- ``streaming`` mode: one long run per process, START at the first publish, RUNNING every
  streaming interval with the destinations published to since the last one, COMPLETE at exit.

The library-specific modules put the returned headers on (a copy of) their message.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import SpanKind

from lineage_instrumentation.amqp.consumers import Library
from lineage_instrumentation.amqp.naming import messaging_dataset
from lineage_instrumentation.instrumentor import register_exit_hook
from lineage_instrumentation.jobs import (
    job_type_facet,
    periodic_accumulative,
    program_job_name,
)
from lineage_instrumentation.propagation import inject
from lineage_sdk.models.dataset import LineageDataset
from lineage_sdk.sdk.provider import STATE, LineageSDK, get_sdk
from lineage_sdk.sdk.runs import LineageRun
from lineage_sdk.sdk.scope import RunScope

__all__ = [
    "end_publisher_streams",
    "lineage_headers",
    "prepare_program_publish",
    "record_publish",
]

_CACHE: dict[tuple[str, str, str, str], LineageDataset] = {}
_MAX_CACHE = 4096
_MAX_OUTPUTS_SCANNED = 256
_EMPTY: Mapping[str, Any] = {}


def _dataset(namespace: str, exchange: str, routing_key: str, producer: str) -> LineageDataset:
    key = (namespace, exchange, routing_key, producer)
    found = _CACHE.get(key)
    if found is None:
        if len(_CACHE) >= _MAX_CACHE:
            _CACHE.clear()
        found = _CACHE[key] = messaging_dataset(namespace, exchange, routing_key, producer)
    return found


def _add_output(run: LineageRun, dataset: LineageDataset) -> bool:
    """Add ``dataset`` unless the run already has it; True if added."""
    outputs = run.outputs
    if outputs and outputs[-1] is dataset:
        return False
    if len(outputs) > _MAX_OUTPUTS_SCANNED:
        return False  # a run publishing to this many destinations: keep memory bounded
    for existing in outputs:
        if existing is dataset or (
            existing.name == dataset.name and existing.namespace == dataset.namespace
        ):
            return False
    run.add_output(dataset)
    return True


def lineage_headers(run: LineageRun, context: Context | None = None) -> dict[str, Any]:
    """The headers that make ``run`` the parent of the consumer's run (see propagation)."""
    headers: dict[str, Any] = {}
    inject(headers, run, context)
    return headers


def record_publish(
    run: LineageRun, namespace: str, exchange: str | None, routing_key: str | None
) -> dict[str, Any]:
    """A publish inside ``run``: its destination becomes an output; returns the headers."""
    sdk = STATE.sdk
    if sdk is not None:
        _add_output(
            run, _dataset(namespace, exchange or "", routing_key or "", sdk.builder.producer)
        )
    return lineage_headers(run)


_JOB_FACETS: dict[str, Mapping[str, Any]] = {}


def _batch_job_facets(producer: str) -> Mapping[str, Any]:
    # One dict per producer: the event builder caches the job's JSON by the dict's identity.
    found = _JOB_FACETS.get(producer)
    if found is None:
        found = _JOB_FACETS[producer] = {"jobType": job_type_facet(producer, "BATCH", "PRODUCER")}
    return found


class _PublisherStream:
    """The process's one publisher run of a library in streaming mode."""

    __slots__ = ("ended", "interval_ns", "lock", "next_running_ns", "scope", "sdk", "window")

    def __init__(self, sdk: LineageSDK, job_name: str, interval_ms: int) -> None:
        self.sdk = sdk
        # RUNNING at most every interval (on a publish), with the destinations since the last one.
        pattern = periodic_accumulative(interval_ms / 1000)
        facets = {"jobType": job_type_facet(sdk.builder.producer, "STREAMING", "PRODUCER", pattern)}
        self.scope = RunScope(
            sdk, job_name, None, (), (), _EMPTY, facets, span_kind=SpanKind.PRODUCER
        )
        self.interval_ns = interval_ms * 1_000_000
        self.next_running_ns = time.time_ns() + self.interval_ns
        self.window: dict[int, LineageDataset] = {}
        self.ended = False
        self.lock = threading.Lock()

    def note(self, dataset: LineageDataset) -> None:
        _add_output(self.scope.run, dataset)
        self.window[id(dataset)] = dataset
        now = time.time_ns()
        if now >= self.next_running_ns:
            window, self.window = self.window, {}
            self.next_running_ns = now + self.interval_ns
            self.sdk.processor.emit_running(self.scope.run, now, (), list(window.values()))

    def end(self) -> None:
        with self.lock:
            if self.ended:
                return
            self.ended = True
        self.scope.end()


_STREAMS: dict[str, _PublisherStream] = {}  # by library name
_STREAM_LOCK = threading.Lock()
_exit_hook_registered = False


def _publisher_stream(
    library: Library, sdk: LineageSDK, job_name: str, interval_ms: int
) -> _PublisherStream:
    global _exit_hook_registered
    with _STREAM_LOCK:
        found = _STREAMS.get(library.name)
        if found is not None and not found.ended and found.sdk is sdk:
            return found
        stream = _STREAMS[library.name] = _PublisherStream(sdk, job_name, interval_ms)
        if not _exit_hook_registered:
            register_exit_hook(end_publisher_streams)
            _exit_hook_registered = True
        return stream


def end_publisher_streams(library: Library | None = None) -> None:
    """COMPLETE the publisher run of ``library`` (or of all): at exit, or when uninstrumented."""
    with _STREAM_LOCK:
        streams = [s for name, s in _STREAMS.items() if library is None or name == library.name]
    for stream in streams:
        stream.end()


def prepare_program_publish(
    library: Library, namespace: str, exchange: str | None, routing_key: str | None
) -> tuple[RunScope | None, dict[str, Any]] | None:
    """A publish outside any run, in a run of the program's job (see the module docstring).

    Returns ``(scope, headers)``: the caller publishes with ``headers`` added, inside ``scope``
    (``scope.call``/``scope.acall``) when it is not None (per_message mode; in streaming mode the
    process's stream has recorded it already). None when nothing is recorded. Never raises.
    """
    try:
        sdk = STATE.sdk or get_sdk()
        if sdk is None:
            return None
        settings = library.settings(sdk)
        job_name = settings.publisher_job_name or program_job_name()
        dataset = _dataset(namespace, exchange or "", routing_key or "", sdk.builder.producer)
        if settings.mode == "streaming":
            stream = _publisher_stream(library, sdk, job_name, settings.streaming_interval_ms)
            stream.note(dataset)
            return None, lineage_headers(stream.scope.run, stream.scope.context)
        scope = RunScope(
            sdk,
            job_name,
            None,
            (),
            (dataset,),
            _EMPTY,
            _batch_job_facets(sdk.builder.producer),
            span_kind=SpanKind.PRODUCER,
        )
        return scope, lineage_headers(scope.run, scope.context)
    except Exception as exc:  # noqa: BLE001 - publish as the caller asked
        library.warn_once("recording a publish", exc)
        return None
