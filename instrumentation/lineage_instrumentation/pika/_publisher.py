"""Publisher-side lineage for pika.

Inside a lineage run (a consumer's run, a ``@track_lineage`` function, ...), ``basic_publish``
adds the exchange and routing key as an output dataset of that run, and the run (with the W3C
trace context) travels in the message headers so the consumer's run can name it as parent.

A publish outside any run still belongs to a job, the publishing program (a producer service has
no lineage code to open a run). Its job is named after the program (``sys.argv[0]`` without
``.py``, e.g. ``producer_service``) in the configured job namespace:

- ``per_message`` mode: the publish is one short run of that job (START, COMPLETE or FAIL);
- ``streaming`` mode: one long run per process, START at the first publish, RUNNING every
  ``pika_streaming_interval_ms`` with the destinations published to since the last one, COMPLETE
  at exit.
"""

from __future__ import annotations

import copy
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import SpanKind

from lineage_instrumentation.pika._consumers import (
    STATE_PIKA,
    job_type_facet,
    register_exit_hook,
    run_in_scope,
    warn_once,
)
from lineage_instrumentation.pika._naming import messaging_dataset, namespace_of
from lineage_instrumentation.propagation import inject
from lineage_sdk.models.dataset import LineageDataset
from lineage_sdk.sdk.provider import STATE, LineageSDK, get_sdk
from lineage_sdk.sdk.runs import LineageRun
from lineage_sdk.sdk.scope import RunScope

__all__ = ["end_publisher_stream", "prepare_publish", "program_job_name", "publish_without_run"]

_CACHE: dict[tuple[str, str, str, str], LineageDataset] = {}
_MAX_CACHE = 4096
_MAX_OUTPUTS_SCANNED = 256
_EMPTY: Mapping[str, Any] = {}


def program_job_name() -> str:
    """The job of publishes made outside any run: the program's name."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ""
    name = os.path.splitext(os.path.basename(argv0))[0]
    if name == "__main__":  # python -m package: the package folder names the program
        name = os.path.basename(os.path.dirname(argv0))
    return name or "python"


def _dataset(channel: Any, exchange: str, routing_key: str, producer: str) -> LineageDataset:
    namespace = namespace_of(getattr(channel, "connection", None))
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


def with_lineage_headers(
    properties: Any, run: LineageRun, basic_properties: type[Any], context: Context | None = None
) -> Any:
    """Properties carrying the run's headers: a new object, never the caller's one changed.

    A caller reusing one ``BasicProperties`` for many messages would otherwise see headers of an
    old run appear on later messages.
    """
    headers: dict[str, Any] = {}
    inject(headers, run, context)
    if properties is None:
        return basic_properties(headers=headers)
    new = copy.copy(properties)
    old = getattr(properties, "headers", None)
    new.headers = {**old, **headers} if old else headers
    return new


def prepare_publish(
    channel: Any,
    exchange: str,
    routing_key: str,
    properties: Any,
    run: LineageRun,
    basic_properties: type[Any],
) -> Any:
    """Record the output dataset on ``run`` and return the properties to publish with."""
    sdk = STATE.sdk
    if sdk is not None:
        _add_output(run, _dataset(channel, exchange or "", routing_key or "", sdk.builder.producer))
    return with_lineage_headers(properties, run, basic_properties)


_JOB_FACETS: dict[str, Mapping[str, Any]] = {}


def _batch_job_facets(producer: str) -> Mapping[str, Any]:
    # One dict per producer: the event builder caches the job's JSON by the dict's identity.
    found = _JOB_FACETS.get(producer)
    if found is None:
        found = _JOB_FACETS[producer] = {"jobType": job_type_facet(producer, "BATCH", "PRODUCER")}
    return found


class _PublisherStream:
    """The process's one publisher run in streaming mode."""

    __slots__ = ("ended", "interval_ns", "lock", "next_running_ns", "scope", "sdk", "window")

    def __init__(self, sdk: LineageSDK, interval_ms: int) -> None:
        self.sdk = sdk
        facets = {"jobType": job_type_facet(sdk.builder.producer, "STREAMING", "PRODUCER")}
        self.scope = RunScope(
            sdk, program_job_name(), None, (), (), _EMPTY, facets, span_kind=SpanKind.PRODUCER
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


_STREAM: list[_PublisherStream] = []
_STREAM_LOCK = threading.Lock()


def _publisher_stream(sdk: LineageSDK, interval_ms: int) -> _PublisherStream:
    with _STREAM_LOCK:
        if _STREAM and not _STREAM[0].ended and _STREAM[0].sdk is sdk:
            return _STREAM[0]
        stream = _PublisherStream(sdk, interval_ms)
        if not _STREAM:
            register_exit_hook(end_publisher_stream)
        _STREAM[:] = [stream]
        return stream


def end_publisher_stream() -> None:
    """COMPLETE the process's publisher run (at exit, or when uninstrumented)."""
    with _STREAM_LOCK:
        stream = _STREAM[0] if _STREAM else None
    if stream is not None:
        stream.end()


def publish_without_run(
    publish: Callable[[Any], Any],
    channel: Any,
    exchange: str,
    routing_key: str,
    properties: Any,
    basic_properties: type[Any],
) -> Any:
    """Publish outside any run: in a run of the program's job (see the module docstring).

    ``publish(properties)`` does the real publish; its exception reaches the caller unchanged.
    """
    scope: RunScope | None = None
    try:
        sdk = STATE.sdk or get_sdk()
        if sdk is None:
            return publish(properties)
        mode, _job, interval = STATE_PIKA.settings.resolve(sdk)
        dataset = _dataset(channel, exchange or "", routing_key or "", sdk.builder.producer)
        if mode == "streaming":
            stream = _publisher_stream(sdk, interval)
            stream.note(dataset)
            properties = with_lineage_headers(
                properties, stream.scope.run, basic_properties, stream.scope.context
            )
        else:
            scope = RunScope(
                sdk,
                program_job_name(),
                None,
                (),
                (dataset,),
                _EMPTY,
                _batch_job_facets(sdk.builder.producer),
                span_kind=SpanKind.PRODUCER,
            )
            properties = with_lineage_headers(
                properties, scope.run, basic_properties, scope.context
            )
    except Exception as exc:  # noqa: BLE001 - publish as the caller asked
        warn_once("recording a publish", exc)
    if scope is None:
        return publish(properties)
    return run_in_scope(scope, publish, properties)
