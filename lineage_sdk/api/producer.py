"""``LineageProducer``: lineage for work that is not a function call (the reference design).

Each method queues one event and returns at once; building and sending happen on the worker
thread like every other event, and the configured exporter publishes it (the ``rabbitmq``
exporter: to the ``collector_topic`` exchange, ``platform.lineage.events`` by default). The
``async`` methods exist so that asyncio code can ``await`` them in the Data Lineage API's style;
they never block the event loop on I/O, and the ``_sync`` twins serve synchronous code.

The producer is a :class:`~lineage_sdk.service.BaseService`: ``connect()`` sets lineage up from
the configuration (once per process, as the first recorded event would), so a bad file shows at
start-up; ``close()`` flushes what was queued to the exporters. Neither is required: an
unconnected producer records too, setting lineage up on first use.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import uuid_utils

from lineage_sdk.models.dataset import LineageDataset, facets_to_dicts
from lineage_sdk.sdk.events import EventBuilder
from lineage_sdk.sdk.provider import STATE, force_flush, get_sdk
from lineage_sdk.sdk.runs import CURRENT_RUN, LineageRun
from lineage_sdk.service import BaseService

__all__ = ["EventType", "LineageProducer"]

EventType = Literal["START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"]
_EVENT_TYPES = frozenset(("START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"))


class LineageProducer(BaseService):
    """Records consumption and production of data by a named source of events.

    ``producer_uri`` and ``job_namespace`` identify that source; they default to the configured
    ``[lineage.producer]`` values.
    """

    def __init__(self, producer_uri: str | None = None, job_namespace: str | None = None) -> None:
        super().__init__()
        self.producer_uri = producer_uri
        self.job_namespace = job_namespace
        self._builders: dict[str, EventBuilder] = {}

    async def _connect(self) -> None:
        # Configuring reads the file and builds the exporters: not on the event loop.
        await asyncio.to_thread(get_sdk)

    async def _close(self) -> None:
        await asyncio.to_thread(force_flush)

    def record_consumption_sync(
        self,
        event_type: EventType,
        job_name: str,
        job_namespace: str | None = None,
        run_id: str | None = None,
        inputs: Iterable[LineageDataset] | None = None,
        outputs: Iterable[LineageDataset] | None = None,
        producer_uri: str | None = None,
        *,
        run_facets: Mapping[str, Any] | None = None,
        job_facets: Mapping[str, Any] | None = None,
    ) -> str | None:
        """Queue one RunEvent; returns its run id (a new UUIDv7 unless given), or None when off.

        Inside a lineage run, the event gets that run as its ``parent``. ``run_facets`` and
        ``job_facets`` (facet dicts or the pydantic facet models of ``lineage_sdk.models``) go on
        the event's run and job; bad ones raise ``TypeError``/``ValueError`` here.
        """
        if event_type not in _EVENT_TYPES:
            raise ValueError(
                f"event_type must be one of {', '.join(sorted(_EVENT_TYPES))}, got {event_type!r}"
            )
        if not isinstance(job_name, str) or not job_name:
            raise ValueError(f"job_name must be a non-empty string, got {job_name!r}")
        run_extra = facets_to_dicts(run_facets, owner=f"run of job {job_name}")
        job_extra = facets_to_dicts(job_facets, owner=f"job {job_name}")
        sdk = STATE.sdk or get_sdk()
        if sdk is None:
            return None
        enclosing = CURRENT_RUN.get()
        run = LineageRun(
            run_id or str(uuid_utils.uuid7()),
            job_namespace or self.job_namespace or sdk.job_namespace,
            job_name,
            list(inputs or ()),
            list(outputs or ()),
            run_extra,
            job_extra,
            enclosing.as_parent() if enclosing is not None else None,
        )
        uri = producer_uri or self.producer_uri
        builder = None
        if uri is not None and uri != sdk.builder.producer:
            builder = self._builders.get(uri)
            if builder is None:
                builder = self._builders[uri] = EventBuilder(uri)
        sdk.processor.emit_event(event_type, run, time.time_ns(), builder)
        return run.run_id

    async def record_consumption(
        self,
        event_type: EventType,
        job_name: str,
        job_namespace: str | None = None,
        run_id: str | None = None,
        inputs: Iterable[LineageDataset] | None = None,
        outputs: Iterable[LineageDataset] | None = None,
        producer_uri: str | None = None,
        *,
        run_facets: Mapping[str, Any] | None = None,
        job_facets: Mapping[str, Any] | None = None,
    ) -> str | None:
        """Async twin of :meth:`record_consumption_sync` (queuing never waits on I/O)."""
        return self.record_consumption_sync(
            event_type,
            job_name,
            job_namespace,
            run_id,
            inputs,
            outputs,
            producer_uri,
            run_facets=run_facets,
            job_facets=job_facets,
        )

    def record_message_consumption_sync(
        self, topic: str, group_id: str, source_namespace: str
    ) -> str | None:
        """A consumer group read a topic: the topic is the input dataset and the group the job.

        Emits one COMPLETE event of a new run of job ``group_id`` reading dataset
        ``source_namespace``/``topic`` (e.g. ``kafka://broker:9092``, ``rabbitmq://host:5672``).
        """
        return self.record_consumption_sync(
            "COMPLETE", group_id, inputs=[LineageDataset(source_namespace, topic)]
        )

    async def record_message_consumption(
        self, topic: str, group_id: str, source_namespace: str
    ) -> str | None:
        """Async twin of :meth:`record_message_consumption_sync`."""
        return self.record_message_consumption_sync(topic, group_id, source_namespace)
