"""The batch pipeline: a bounded queue between the application and one worker thread.

The application thread only appends a record to a deque (no lock unless it must wake the worker
or drop). The worker turns records into ``EncodedEvent`` batches with the pipeline's encoder and
hands them to every exporter. Nothing here raises into the caller: failures are counted and logged
once per interval.
"""

from __future__ import annotations

import atexit
import collections
import itertools
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
    """Counters since start (or since fork, in a child process).

    - ``queued``: records accepted into the queue (a record handed on to the next pipeline after
      a reconfiguration is counted there, not here).
    - ``exported``: events that every exporter confirmed (``ExportResult.SUCCESS``). An event that
      one of several exporters failed to send is not exported, even if the others sent it.
    - ``export_failures``: events an exporter failed to send, once per failing exporter.
    - ``dropped_queue_full`` / ``dropped_after_shutdown``: records dropped by the overflow policy,
      or submitted after shutdown with no pipeline to hand them on to.
    - ``encode_failures``: records the encoder could not turn into events.
    """

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


class _ThreadSafeCounter:
    """An exact count of calls from many threads, without a lock on the hot path.

    ``itertools.count.__next__`` is a single C call, so under the GIL no increment is lost (a
    ``self.n += 1`` can lose one when a thread switch falls between its read and its write).
    """

    __slots__ = ("_count", "increment")

    def __init__(self) -> None:
        self._count = itertools.count()
        self.increment: Callable[[], int] = self._count.__next__

    @property
    def value(self) -> int:
        # repr is "count(N)", N the next value to hand out: the number of increments so far.
        return int(repr(self._count)[6:-1])


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
        self._successor: BatchPipeline[T] | None = None
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
        self._queued = _ThreadSafeCounter()
        self._count_queued = self._queued.increment
        # Drops are rare, and counted from application threads: a lock keeps them exact.
        self._drop_lock = threading.Lock()
        self._dropped_full = 0
        self._dropped_shutdown = 0
        # Written by the worker thread only.
        self._exported = 0
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
            self._submit_after_shutdown(item)
            return
        if len(queue) >= self._max_queue_size and not self._make_room():
            return
        queue.append(item)
        self._count_queued()
        if len(queue) >= self._batch_size and not self._wake.is_set():
            self._wake.set()

    def hand_over_to(self, successor: BatchPipeline[T]) -> None:
        """Send records that arrive after this pipeline's shutdown to ``successor`` instead.

        A reconfiguration swaps the processor's pipeline and then shuts the old one down; a record
        an application thread submitted to the old one in between is exported once, by the new
        one, rather than dropped.
        """
        self._successor = successor

    def _submit_after_shutdown(self, item: T) -> None:
        successor = self._successor
        if successor is not None:
            successor.submit(item)
            return
        with self._drop_lock:
            self._dropped_shutdown += 1

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
        with self._drop_lock:
            self._dropped_full += 1
            dropped = self._dropped_full
        self._drop_log.warning(
            "lineage queue full (%d events): dropping under overflow policy %r; %d dropped so far",
            self._max_queue_size,
            self._overflow,
            dropped,
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
        confirmed = True
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
                confirmed = False
        if confirmed:
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
            queued=self._queued.value,
            exported=self._exported,
            dropped_queue_full=self._dropped_full,
            dropped_after_shutdown=self._dropped_shutdown,
            encode_failures=self._encode_failures,
            export_failures=self._export_failures,
        )
