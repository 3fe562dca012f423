"""Heartbeats of long runs: one daemon thread per process calls each registered beat on time.

A streaming consumer that receives nothing must still say that it lives, so its heartbeat cannot
wait for the application's next delivery, and the application's thread must not pay for it: the
beat runs on this thread and only queues a ``RunRunning`` record, which the pipeline's worker
builds and exports like any other. The thread exists only while some beat is registered.

Never raises into the caller; a failing beat is logged (rate-limited) and keeps its schedule.
Fork-safe: a child process forgets the parent's beats (the parent's runs are not the child's to
keep alive) and starts its own thread when it registers one.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable

from lineage_sdk._logging import RateLimitedLog
from lineage_sdk.sdk.suppression import suppress_for_current_thread

__all__ = ["HEARTBEATS", "Heartbeat", "HeartbeatScheduler"]

_LOG = logging.getLogger("lineage_sdk.heartbeat")


class Heartbeat:
    """One registered beat: ``callback(epoch_ns)`` every ``interval_s``, until ``cancel()``."""

    __slots__ = ("callback", "cancelled", "due", "interval")

    def __init__(self, interval_s: float, callback: Callable[[int], None]) -> None:
        self.interval = interval_s
        self.callback = callback
        self.due = time.monotonic() + interval_s
        self.cancelled = False

    def cancel(self) -> None:
        """No beat starts after this returns (one already running finishes)."""
        self.cancelled = True


class HeartbeatScheduler:
    """The process's beats and the thread that fires them (see the module docstring)."""

    def __init__(self) -> None:
        self._log = RateLimitedLog(_LOG, 60.0)
        self._reset()
        if hasattr(os, "register_at_fork"):
            weak_reset = weakref.WeakMethod(self._reset)
            os.register_at_fork(after_in_child=lambda: (m := weak_reset()) and m())

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._beats: list[Heartbeat] = []
        self._thread: threading.Thread | None = None

    def schedule(self, interval_s: float, callback: Callable[[int], None]) -> Heartbeat:
        """Call ``callback(time.time_ns())`` every ``interval_s`` seconds (> 0) from now on."""
        if not interval_s > 0:
            raise ValueError(f"heartbeat interval must be > 0 seconds, got {interval_s!r}")
        beat = Heartbeat(interval_s, callback)
        with self._lock:
            self._beats.append(beat)
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="lineage-sdk-heartbeat")
                thread.daemon = True
                self._thread = thread
                thread.start()
        self._wake.set()
        return beat

    def active(self) -> int:
        """How many beats are registered and not cancelled (tests, stats)."""
        with self._lock:
            return sum(1 for b in self._beats if not b.cancelled)

    def _run(self) -> None:
        suppress_for_current_thread()  # what a beat does is lineage's own work, never recorded
        while True:
            with self._lock:
                self._beats = beats = [b for b in self._beats if not b.cancelled]
                if not beats:
                    self._thread = None
                    return
                now = time.monotonic()
                due = [b for b in beats if b.due <= now]
            for beat in due:
                self._fire(beat, now)
            with self._lock:
                pending = [b.due for b in self._beats if not b.cancelled]
            wait = min(pending) - time.monotonic() if pending else 0.0
            if wait > 0:
                self._wake.wait(wait)
            self._wake.clear()

    def _fire(self, beat: Heartbeat, now: float) -> None:
        # The next beat counts from this one's due time (no drift), but never in the past: a
        # stalled process beats once when it resumes, not once per missed interval.
        beat.due = max(beat.due + beat.interval, now + beat.interval / 2)
        if beat.cancelled:
            return
        try:
            beat.callback(time.time_ns())
        except Exception:  # noqa: BLE001 - a beat's failure must not stop the others
            self._log.warning("lineage heartbeat failed", exc_info=True)


#: The process's scheduler.
HEARTBEATS = HeartbeatScheduler()
