"""The batch pipeline: a bounded queue between the application and one worker thread.

The application thread only appends a reference to a deque (no lock unless it must wake the
worker). The worker encodes items into ``EncodedEvent`` batches and hands them to every exporter.
Nothing here raises into the caller: failures are counted and logged once per interval.
"""

from __future__ import annotations

import atexit
import collections
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from lineage_sdk._logging import RateLimitedLog
from lineage_sdk.sdk.export import EncodedEvent, ExportResult, LineageExporter
from lineage_sdk.sdk.suppression import suppress_for_current_thread

__all__ = ["BatchPipeline", "OverflowPolicy", "PipelineStats"]

_LOG = logging.getLogger("lineage_sdk.pipeline")

T = TypeVar("T")
OverflowPolicy = Literal["drop_newest", "drop_oldest", "block"]
Encoder = Callable[[T], Sequence[EncodedEvent]]

_LOG_INTERVAL_S = 10.0


@dataclass(frozen=True, slots=True)
class PipelineStats:
    """Counters since start (or since fork, in a child process)."""

    queued: int
    exported: int
    dropped_queue_full: int
    dropped_after_shutdown: int
    encode_failures: int
    export_failures: int


class _FlushMarker:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class BatchPipeline(Generic[T]):
    """Bounded queue + worker thread + exporters. Fork-safe; flushed at interpreter exit."""

    def __init__(
        self,
        exporters: Sequence[LineageExporter],
        encoder: Encoder[T],
        *,
        max_queue_size: int = 65536,
        max_export_batch_size: int = 512,
        schedule_delay: float = 0.2,
        export_timeout: float = 30.0,
        overflow: OverflowPolicy = "block",
        block_timeout: float = 0.1,
        shutdown_timeout: float = 5.0,
        flush_at_exit: bool = True,
    ) -> None:
        self._exporters = list(exporters)
        self._encoder = encoder
        self._max_queue_size = max_queue_size
        self._batch_size = max_export_batch_size
        self._schedule_delay = schedule_delay
        self._export_timeout = export_timeout
        self._overflow = overflow
        self._block_timeout = block_timeout
        self._shutdown_timeout = shutdown_timeout
        self._drop_log = RateLimitedLog(_LOG, _LOG_INTERVAL_S)
        self._error_log = RateLimitedLog(_LOG, _LOG_INTERVAL_S)
        self._init_state()
        self._shutdown_done = False
        if hasattr(os, "register_at_fork"):
            weak_reinit = weakref.WeakMethod(self._at_fork_reinit)
            os.register_at_fork(after_in_child=lambda: (m := weak_reinit()) and m())
        if flush_at_exit:
            weak_exit = weakref.WeakMethod(self._at_exit)
            atexit.register(lambda: (m := weak_exit()) and m())

    def _init_state(self) -> None:
        self._queue: collections.deque[T | _FlushMarker] = collections.deque()
        self._wake = threading.Event()
        self._space = threading.Event()
        self._shutdown = False
        self._queued = 0
        self._exported = 0
        self._dropped_full = 0
        self._dropped_shutdown = 0
        self._encode_failures = 0
        self._export_failures = 0
        self._worker = threading.Thread(target=self._run, name="lineage-sdk-worker", daemon=True)
        self._worker.start()

    def _at_fork_reinit(self) -> None:
        # The parent still owns (and will export) what was queued before the fork.
        self._init_state()

    def _at_exit(self) -> None:
        self.shutdown(self._shutdown_timeout)

    # --- application side -------------------------------------------------------------------

    def submit(self, item: T) -> None:
        """Queue ``item``; never raises, blocks at most ``block_timeout`` under 'block'."""
        queue = self._queue
        if self._shutdown:
            self._dropped_shutdown += 1
            return
        if len(queue) >= self._max_queue_size and not self._make_room():
            return
        queue.append(item)
        self._queued += 1
        if len(queue) >= self._batch_size and not self._wake.is_set():
            self._wake.set()

    def _make_room(self) -> bool:
        """Apply the overflow policy; False when the new item is dropped."""
        queue = self._queue
        if self._overflow == "drop_oldest":
            try:
                oldest = queue.popleft()
            except IndexError:
                return True
            if isinstance(oldest, _FlushMarker):  # never lose a flush request; drop the new item
                queue.appendleft(oldest)
            else:
                self._count_drop()
                return True
        elif self._overflow == "block" and self._block_timeout > 0:
            deadline = time.monotonic() + self._block_timeout
            self._wake.set()
            while len(queue) >= self._max_queue_size:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._space.clear()
                if len(queue) < self._max_queue_size:
                    break
                self._space.wait(remaining)
            if len(queue) < self._max_queue_size:
                return True
        self._count_drop()
        return False

    def _count_drop(self) -> None:
        self._dropped_full += 1
        self._drop_log.warning(
            "lineage queue full (%d events): dropping under overflow policy %r; %d dropped so far",
            self._max_queue_size,
            self._overflow,
            self._dropped_full,
        )

    # --- worker side ------------------------------------------------------------------------

    def _run(self) -> None:
        suppress_for_current_thread()
        while True:
            self._wake.wait(self._schedule_delay)
            self._wake.clear()
            try:
                self._drain()
            except Exception:  # noqa: BLE001 - the worker must outlive any bug below it
                self._error_log.warning("lineage worker error", exc_info=True)
            if self._shutdown and not self._queue:
                return

    def _drain(self) -> None:
        queue = self._queue
        batch: list[EncodedEvent] = []
        while True:
            try:
                item = queue.popleft()
            except IndexError:
                break
            if isinstance(item, _FlushMarker):
                self._export(batch)
                batch = []
                self._flush_exporters()
                item.done.set()
                continue
            try:
                batch.extend(self._encoder(item))
            except Exception:  # noqa: BLE001 - one bad record must not stop the pipeline
                self._encode_failures += 1
                self._error_log.warning("lineage event could not be built", exc_info=True)
            if len(batch) >= self._batch_size:
                self._export(batch)
                batch = []
                self._space.set()
        self._export(batch)
        self._space.set()

    def _export(self, batch: list[EncodedEvent]) -> None:
        if not batch:
            return
        for exporter in self._exporters:
            try:
                result = exporter.export(batch)
            except Exception:  # noqa: BLE001 - an exporter bug must not kill the worker
                result = ExportResult.FAILURE
                self._error_log.warning(
                    "exporter %r raised", type(exporter).__name__, exc_info=True
                )
            if result is not ExportResult.SUCCESS:
                self._export_failures += len(batch)
        self._exported += len(batch)

    def _flush_exporters(self) -> None:
        for exporter in self._exporters:
            try:
                exporter.force_flush(self._export_timeout)
            except Exception:  # noqa: BLE001
                self._error_log.warning(
                    "exporter %r failed to flush", type(exporter).__name__, exc_info=True
                )

    # --- control ------------------------------------------------------------------------------

    def force_flush(self, timeout: float = 30.0) -> bool:
        """Export everything queued before this call; True if done within ``timeout`` seconds."""
        if self._shutdown_done or not self._worker.is_alive():
            return self._shutdown_done and not self._queue
        marker = _FlushMarker()
        self._queue.append(marker)
        self._wake.set()
        return marker.done.wait(timeout)

    def shutdown(self, timeout: float = 30.0) -> None:
        """Flush, stop the worker and shut the exporters down. Safe to call more than once."""
        if self._shutdown_done:
            return
        deadline = time.monotonic() + timeout
        if self._worker.is_alive():
            self.force_flush(timeout)  # also flushes the exporters' own buffers
        self._shutdown_done = True
        self._shutdown = True
        self._wake.set()
        self._worker.join(max(0.0, deadline - time.monotonic()))
        for exporter in self._exporters:
            try:
                exporter.shutdown(max(0.0, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001
                _LOG.warning(
                    "exporter %r failed to shut down", type(exporter).__name__, exc_info=True
                )

    @property
    def exporters(self) -> Sequence[LineageExporter]:
        return tuple(self._exporters)

    def stats(self) -> PipelineStats:
        return PipelineStats(
            queued=self._queued,
            exported=self._exported,
            dropped_queue_full=self._dropped_full,
            dropped_after_shutdown=self._dropped_shutdown,
            encode_failures=self._encode_failures,
            export_failures=self._export_failures,
        )
