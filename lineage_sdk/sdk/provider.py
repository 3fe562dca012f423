"""The process-wide lineage SDK: its TracerProvider, processor, pipeline and exporters.

``configure()`` builds it explicitly; otherwise the first lineage run builds it from the
environment. A bad configuration is logged loudly once and lineage is disabled: telemetry never
stops the application.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.sdk.events import EventBuilder
from lineage_sdk.sdk.export import LineageExporter
from lineage_sdk.sdk.exporters import create_exporter
from lineage_sdk.sdk.pipeline import BatchPipeline, PipelineStats
from lineage_sdk.sdk.processor import LineageSpanProcessor
from lineage_sdk.version import __version__

__all__ = ["LineageSDK", "configure", "force_flush", "get_sdk", "shutdown"]

_LOG = logging.getLogger("lineage_sdk")
INSTRUMENTATION_SCOPE = "lineage_sdk"


class LineageSDK:
    """Everything one process needs to record lineage. ``enabled`` is False when turned off."""

    def __init__(
        self,
        config: LineageConfig,
        exporters: Sequence[LineageExporter],
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.config = config
        self.enabled = config.enabled
        self.job_namespace = config.producer.job_namespace
        self.builder = EventBuilder(config.producer.producer_uri)
        pipeline_config = config.pipeline
        self.processor = LineageSpanProcessor(None, self.builder, self.job_namespace)  # type: ignore[arg-type]
        self.pipeline: BatchPipeline[Any] = BatchPipeline(
            exporters,
            self.processor.encode,
            max_queue_size=pipeline_config.max_queue_size,
            max_export_batch_size=pipeline_config.max_export_batch_size,
            schedule_delay=pipeline_config.schedule_delay_ms / 1000,
            export_timeout=pipeline_config.export_timeout_ms / 1000,
            overflow=pipeline_config.overflow,
            block_timeout=pipeline_config.block_timeout_ms / 1000,
            shutdown_timeout=pipeline_config.shutdown_timeout_ms / 1000,
        )
        self.processor._pipeline = self.pipeline
        self.owns_provider = tracer_provider is None
        if tracer_provider is None:
            # Always on: an application's trace sampling must never drop lineage.
            tracer_provider = TracerProvider(
                sampler=ALWAYS_ON,
                resource=Resource.create({"service.namespace": self.job_namespace}),
                shutdown_on_exit=False,  # the pipeline flushes itself at exit
            )
        tracer_provider.add_span_processor(self.processor)
        self.tracer_provider = tracer_provider
        self.tracer: trace.Tracer = tracer_provider.get_tracer(INSTRUMENTATION_SCOPE, __version__)

    @property
    def exporters(self) -> Sequence[LineageExporter]:
        return self.pipeline.exporters

    def stats(self) -> PipelineStats:
        return self.pipeline.stats()

    def force_flush(self, timeout: float = 30.0) -> bool:
        return self.pipeline.force_flush(timeout)

    def shutdown(self, timeout: float = 30.0) -> None:
        self.pipeline.shutdown(timeout)


class _GlobalState:
    __slots__ = ("sdk",)

    def __init__(self) -> None:
        self.sdk: LineageSDK | None = None


STATE = _GlobalState()
_CONFIGURE_LOCK = threading.RLock()


def configure(
    config: LineageConfig | None = None,
    *,
    exporters: Sequence[LineageExporter] | None = None,
    tracer_provider: TracerProvider | None = None,
    strict: bool = False,
) -> LineageSDK | None:
    """Set up lineage for this process, replacing (and flushing) any earlier setup.

    ``config`` defaults to the TOML file and environment. ``exporters`` replaces the configured
    ones (handy in tests). ``tracer_provider`` makes lineage spans come from the application's
    own provider (the processor is added to it) instead of the SDK's always-on one.
    A bad configuration raises ConfigError only with ``strict=True``; otherwise it is logged and
    lineage is disabled (the return value is then None).
    """
    with _CONFIGURE_LOCK:
        previous, STATE.sdk = STATE.sdk, None
        if previous is not None:
            previous.shutdown(5.0)
        try:
            if config is None:
                from lineage_sdk.config import load_config

                config = load_config()
            if not config.enabled:
                STATE.sdk = None
                _mark_disabled()
                return None
            if exporters is None:
                exporters = [
                    create_exporter(kind, config) for kind in dict.fromkeys(config.exporters)
                ]
            sdk = LineageSDK(config, exporters, tracer_provider)
        except ConfigError as exc:
            if strict:
                raise
            _LOG.error("lineage disabled: %s", exc)
            _mark_disabled()
            return None
        STATE.sdk = sdk
        _mark_enabled(sdk)
        return sdk


def get_sdk() -> LineageSDK | None:
    """The configured SDK, configuring it from the environment on first use."""
    sdk = STATE.sdk
    if sdk is None and not _disabled.is_set():
        with _CONFIGURE_LOCK:
            if STATE.sdk is None and not _disabled.is_set():
                configure()
            sdk = STATE.sdk
    return sdk


def force_flush(timeout: float = 30.0) -> bool:
    """Export everything recorded so far; True when done within ``timeout`` seconds."""
    sdk = STATE.sdk
    return True if sdk is None else sdk.force_flush(timeout)


def shutdown(timeout: float = 30.0) -> None:
    """Flush and stop lineage; later runs are not recorded until ``configure()`` again."""
    with _CONFIGURE_LOCK:
        sdk, STATE.sdk = STATE.sdk, None
        _mark_disabled()
        if sdk is not None:
            sdk.shutdown(timeout)


# A flag the decorator reads without a lock: set = "known to be disabled, don't configure".
_disabled = threading.Event()
_listeners: list[Any] = []


def _mark_disabled() -> None:
    _disabled.set()
    for listener in _listeners:
        listener(None)


def _mark_enabled(sdk: LineageSDK) -> None:
    _disabled.clear()
    for listener in _listeners:
        listener(sdk)


def add_state_listener(listener: Any) -> None:
    """Called with the new SDK (or None) whenever lineage is configured or disabled."""
    _listeners.append(listener)
