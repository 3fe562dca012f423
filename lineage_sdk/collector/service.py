"""LineageCollectorService: validate an event, make its record, write it through the manager.

The broker consumer and the HTTP ingest both end here, so every path into the stores applies the
same validation and the same metrics.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from lineage_sdk.collector.decode import PoisonMessage, validate_event
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.metrics import CollectorMetrics
from lineage_sdk.collector.store import LineageRecord
from lineage_sdk.exceptions import InvalidEventError, StoreError

__all__ = ["LineageCollectorService"]


class LineageCollectorService:
    """Writes events to ``manager.get_store()``; raises InvalidEventError or StoreError."""

    def __init__(self, manager: LineageManager, metrics: CollectorMetrics | None = None) -> None:
        self.manager = manager
        self.metrics = metrics or CollectorMetrics()

    def to_record(self, event: Any) -> LineageRecord:
        """A model or a raw mapping -> validated record; InvalidEventError says what is wrong."""
        if not isinstance(event, Mapping):
            dump = getattr(event, "model_dump", None)
            if dump is None:
                raise InvalidEventError(
                    f"expected an OpenLineage event, got {type(event).__name__}"
                )
            from lineage_sdk.models import to_dict

            event = to_dict(event)
        try:
            return validate_event(dict(event))
        except PoisonMessage as exc:
            raise InvalidEventError(exc.detail) from None

    def handle_lineage_event(
        self, event: Any, raw_message: Any = None, **kwargs: Any
    ) -> LineageRecord:
        """Store one event (a LineageEvent model or a raw dict) in every configured store.

        ``raw_message`` and ``kwargs`` (delivery metadata) are accepted for the reference design's
        signature and ignored by the built-in stores. Returns the stored record.
        """
        record = self.to_record(event)
        self.write([record])
        return record

    def write(self, records: Sequence[LineageRecord]) -> None:
        """Write a batch to the store (composite: all of them concurrently, raising if any
        failed), counting per store."""
        if not records:
            return
        store = self.manager.get_store()
        started = time.perf_counter()
        try:
            store.write_batch(records)
        except StoreError as exc:
            self.metrics.store_failures.labels(exc.store).inc()
            raise
        except Exception as exc:
            self.metrics.store_failures.labels(store.name).inc()
            raise StoreError(store.name, f"{type(exc).__name__}: {exc}") from exc
        self.metrics.batch_seconds.observe(time.perf_counter() - started)
        self.metrics.batch_events.observe(len(records))
        for leaf in self.manager.stores:
            self.metrics.events_stored.labels(leaf.name).inc(len(records))
