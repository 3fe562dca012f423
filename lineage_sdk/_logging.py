"""Logging a recurring problem at most once per interval, without losing count of it.

Telemetry that fails often (a full queue, a broker that is away) must neither flood the
application's log nor go quiet: one line per interval, saying how many times it happened. A leaf
module: the SDK's pipeline, the exporters and the collector all use it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

__all__ = ["RateLimitedLog"]


class RateLimitedLog:
    """At most one warning per ``interval_s`` on ``logger``; what is held back is counted.

    Two ways to use one (pick one per instance):

    - :meth:`warning` for occurrences, logged as they come: one is logged when the interval has
      passed since the last line, and says how many were held back in between.
    - :meth:`add` and :meth:`report` for a tally: ``add(n, msg, *args)`` adds ``n`` and logs
      ``msg % (total, *args)`` when the interval has passed; :meth:`report` logs a tally that
      is still pending once it is due (call it from a timer).

    Thread-safe; the log call itself happens outside the lock.
    """

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self.interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last = -math.inf
        self._pending = 0

    @property
    def pending(self) -> int:
        """Held-back occurrences, or the tally not logged yet."""
        return self._pending

    def warning(self, msg: str, *args: object, exc_info: bool = False) -> None:
        """Log this occurrence now if the interval has passed, else count it as held back."""
        with self._lock:
            now = self._clock()
            if now - self._last < self.interval_s:
                self._pending += 1
                return
            held_back, self._pending, self._last = self._pending, 0, now
        extra = f" ({held_back} similar messages suppressed)" if held_back else ""
        self._logger.warning(msg + extra, *args, exc_info=exc_info)

    def add(self, n: int, msg: str, *args: object) -> None:
        """Add ``n`` to the tally and :meth:`report` it if due."""
        with self._lock:
            self._pending += n
        self.report(msg, *args)

    def report(self, msg: str, *args: object) -> None:
        """Log ``msg % (tally, *args)`` if a tally is pending and the interval has passed."""
        with self._lock:
            now = self._clock()
            if not self._pending or now - self._last < self.interval_s:
                return
            tally, self._pending, self._last = self._pending, 0, now
        self._logger.warning(msg, tally, *args)
