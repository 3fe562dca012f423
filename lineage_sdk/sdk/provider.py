"""The process-wide lineage SDK: its TracerProvider, processor, pipeline and exporters.

``configure()`` builds it explicitly; otherwise the first lineage run builds it from the
environment. A bad configuration is logged loudly once and lineage is disabled: telemetry never
stops the application.

Configuring again is idempotent in what it records: each TracerProvider (the SDK's own one,
created once per process, or an application's) has exactly one lineage processor, and a new
configuration swaps that processor's pipeline. The previous pipeline is flushed, then hands any
record that still reaches it to the new one, so every run is exported once and counted once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

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
from lineage_sdk.sdk.processor import LineageSpanProcessor, lineage_processor_for
from lineage_sdk.sdk.records import LineageRecord, RecordEncoder
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
        self.pipeline: BatchPipeline[LineageRecord] = BatchPipeline(
            exporters,
            RecordEncoder(self.builder),
            max_queue_size=pipeline_config.max_queue_size,
            max_export_batch_size=pipeline_config.max_export_batch_size,
            schedule_delay=pipeline_config.schedule_delay_ms / 1000,
            export_timeout=pipeline_config.export_timeout_ms / 1000,
            overflow=pipeline_config.overflow,
            block_timeout=pipeline_config.block_timeout_ms / 1000,
            shutdown_timeout=pipeline_config.shutdown_timeout_ms / 1000,
        )
        self.owns_provider = tracer_provider is None
        if tracer_provider is None:
            tracer_provider = _own_provider()
        self.tracer_provider = tracer_provider
        self.processor: LineageSpanProcessor = lineage_processor_for(tracer_provider)
        self.tracer: trace.Tracer = tracer_provider.get_tracer(INSTRUMENTATION_SCOPE, __version__)
        self.activate()

    def activate(self) -> None:
        """Route the provider's lineage spans to this SDK's pipeline (done when it is built)."""
        self.processor.attach(self.pipeline, self.job_namespace)

    @property
    def exporters(self) -> Sequence[LineageExporter]:
        return self.pipeline.exporters

    def stats(self) -> PipelineStats:
        return self.pipeline.stats()

    def force_flush(self, timeout: float = 30.0) -> bool:
        return self.pipeline.force_flush(timeout)

    def shutdown(self, timeout: float = 30.0) -> None:
        self.pipeline.shutdown(timeout)


_OWN_PROVIDER: list[TracerProvider] = []
_OWN_PROVIDER_LOCK = threading.Lock()


def _own_provider() -> TracerProvider:
    """The SDK's own TracerProvider, one per process whatever the number of configurations."""
    with _OWN_PROVIDER_LOCK:
        if not _OWN_PROVIDER:
            # Always on: an application's trace sampling must never drop lineage. Its resource
            # is not part of any lineage event, so it names the SDK rather than a namespace.
            _OWN_PROVIDER.append(
                TracerProvider(
                    sampler=ALWAYS_ON,
                    resource=Resource.create({"service.name": INSTRUMENTATION_SCOPE}),
                    shutdown_on_exit=False,  # the pipeline flushes itself at exit
                )
            )
        return _OWN_PROVIDER[0]


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
    own provider (its one lineage processor is added on first use) instead of the SDK's always-on
    one. Calling it again, with the same provider or another, swaps pipelines: nothing is recorded
    twice or lost uncounted.
    A bad configuration raises ConfigError only with ``strict=True``; otherwise it is logged and
    lineage is disabled (the return value is then None).
    """
    with _CONFIGURE_LOCK:
        previous = STATE.sdk
        try:
            return _configure(config, exporters, tracer_provider, strict)
        finally:
            if previous is not None:
                if STATE.sdk is not None:
                    previous.pipeline.hand_over_to(STATE.sdk.pipeline)
                previous.shutdown(5.0)


def _configure(
    config: LineageConfig | None,
    exporters: Sequence[LineageExporter] | None,
    tracer_provider: TracerProvider | None,
    strict: bool,
) -> LineageSDK | None:
    """Build and install the new SDK; the caller retires the previous one afterwards.

    Until the new SDK is installed, runs keep going to the previous one.
    """
    try:
        if config is None:
            from lineage_sdk.config import load_config

            config = load_config()
        if not config.enabled:
            STATE.sdk = None
            _mark_disabled()
            return None
        if exporters is None:
            exporters = [create_exporter(kind, config) for kind in dict.fromkeys(config.exporters)]
        sdk = LineageSDK(config, exporters, tracer_provider)
    except ConfigError as exc:
        STATE.sdk = None
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


def _mark_disabled() -> None:
    _disabled.set()


def _mark_enabled(sdk: LineageSDK) -> None:
    _disabled.clear()
