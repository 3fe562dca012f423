"""LineageCollectorService: validate events, make their records, write them through the manager.

The broker consumer and the HTTP ingest both end in :meth:`LineageCollectorService.
handle_lineage_events` (one event: :meth:`~LineageCollectorService.handle_lineage_event`), so
every path into the stores applies the same validation, the same metrics and the same errors:
:class:`~lineage_sdk.exceptions.InvalidEventError` for a bad event, and
:class:`~lineage_sdk.exceptions.StoreError` (``permanent`` or not) when a store fails, which the
consumer turns into a retry or a dead-letter and the HTTP ingest into a 503 or a 422.

The store write blocks (drivers are synchronous), so it runs in a worker thread and the caller's
event loop (``serve``'s) is never blocked by a store. The queue consumer's loop is private and
runs nothing else, so the consumer has the write run on it directly (``off_loop=False``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from lineage_sdk.collector.decode import PoisonMessage, validate_event
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.metrics import CollectorMetrics
from lineage_sdk.collector.store import LineageRecord
from lineage_sdk.collector.watch.setup import watcher_of
from lineage_sdk.exceptions import InvalidEventError, StoreError
from lineage_sdk.service import BaseService

if TYPE_CHECKING:
    from lineage_sdk.collector.watch.worker import Watcher

__all__ = ["LineageCollectorService"]


class LineageCollectorService(BaseService):
    """Writes events to ``lineage_manager.get_store()``; raises InvalidEventError or StoreError.

    Its lifecycle (:class:`~lineage_sdk.service.BaseService`) is the manager's: ``connect()``
    opens the stores (``lineage_manager.connect()``) and ``close()`` closes them.
    """

    def __init__(
        self, lineage_manager: LineageManager, metrics: CollectorMetrics | None = None
    ) -> None:
        super().__init__()
        self.lineage_manager = lineage_manager
        self.metrics = metrics or CollectorMetrics()
        #: The alerts' watch (:mod:`lineage_sdk.collector.watch`) when rules are configured: it
        #: records what each stored batch says before the batch counts as stored.
        self.watcher: Watcher | None = None

    async def _connect(self) -> None:
        await self.lineage_manager.connect()
        await asyncio.to_thread(self.start_watch)

    async def _close(self) -> None:
        await asyncio.to_thread(self.stop_watch)
        await self.lineage_manager.close()

    def start_watch(self) -> None:
        """Open and start the alerts' watch when rules are configured (the stores must be open:
        an alert's impact is a lineage read); ConfigError or StoreError when it cannot start."""
        if self.watcher is None:
            self.watcher = watcher_of(self.lineage_manager)
            if self.watcher is not None:
                self.watcher.start()

    def stop_watch(self) -> None:
        """Stop the watch's thread and close its store (what is pending stays there)."""
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            watcher.close()

    def to_record(self, event: Any) -> LineageRecord:
        """A model, a raw mapping or a record -> validated record; InvalidEventError says what
        is wrong."""
        if isinstance(event, LineageRecord):
            return event
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

    async def handle_lineage_event(
        self, event: Any, raw_message: Any = None, **kwargs: Any
    ) -> LineageRecord:
        """Store one event (a ``LineageEvent`` model or a raw dict) in every configured store.

        ``raw_message`` (the bytes as received) and ``kwargs`` (what the messaging layer
        injects: ``message_key``, ``raw_headers``, ...) are accepted for the Data Lineage API's
        signature; the built-in stores keep the event itself, so they are not used. Returns the
        stored record; raises InvalidEventError or StoreError.
        """
        records = await self.handle_lineage_events([event])
        return records[0]

    async def handle_lineage_events(
        self, events: Iterable[Any], *, off_loop: bool = True
    ) -> list[LineageRecord]:
        """Store a batch (models, dicts or decoded records) with one ``write_batch``.

        Every event is validated first (InvalidEventError: nothing is written); then the store
        (composite: all of them concurrently, waiting for all) writes the batch, raising
        StoreError if any store failed. The write runs in a worker thread, so the caller's loop
        goes on; ``off_loop=False`` writes on the loop's own thread instead, for a loop that
        runs nothing else (the queue consumer's), saving two thread switches per batch.
        """
        with self._storing():
            records = [self.to_record(event) for event in events]
            if records:
                if off_loop:
                    await asyncio.to_thread(self._write_batch, records)
                else:
                    self._write_batch(records)
        return records

    def handle_lineage_event_sync(
        self, event: Any, raw_message: Any = None, **kwargs: Any
    ) -> LineageRecord:
        """:meth:`handle_lineage_event` for synchronous code: the same validation and write,
        on the calling thread (which it blocks: from a coroutine, await the async form)."""
        with self._storing():
            record = self.to_record(event)
            self._write_batch([record])
        return record

    @contextmanager
    def _storing(self) -> Iterator[None]:
        """A batch being stored (validated, written): the watch, when there is one, yields to
        ingest by how much of the time this takes (its ``load``)."""
        watcher = self.watcher
        if watcher is None:
            yield
            return
        watcher.load.begin()
        try:
            yield
        finally:
            watcher.load.end()

    def _write_batch(self, records: list[LineageRecord]) -> None:
        """Write a batch to the store, counting per store (blocking: runs in a worker thread)."""
        manager = self.lineage_manager
        store = manager.get_store()
        started = time.perf_counter()
        try:
            store.write_batch(records)
        except StoreError as exc:
            self.metrics.store_failures.labels(exc.store).inc()
            raise
        except Exception as exc:
            self.metrics.store_failures.labels(store.name).inc()
            raise StoreError(store.name, f"{type(exc).__name__}: {exc}") from exc
        if self.watcher is not None:  # before the batch counts as stored: nothing is lost
            try:
                self.watcher.notice(records)
            except StoreError:
                raise
            except Exception as exc:
                raise StoreError("watch", f"{type(exc).__name__}: {exc}") from exc
        self.metrics.batch_seconds.observe(time.perf_counter() - started)
        self.metrics.batch_events.observe(len(records))
        for leaf in manager.stores:
            self.metrics.events_stored.labels(leaf.name).inc(len(records))
