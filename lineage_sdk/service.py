"""``BaseService``: one lifecycle for the producer, the collector service and the store manager.

A service is connected once and closed once, whoever asks and however often: ``connect()`` runs
the subclass's ``_connect`` hook only when not connected, ``close()`` runs ``_close`` only when
connected, and concurrent callers on one event loop wait for the first one (an ``asyncio.Lock``,
made on first use because a service may be built before any loop exists). After ``close()`` a
service may be connected again.

Asynchronous code uses ``await connect()`` / ``await close()`` or ``async with``. Synchronous
code (threads, scripts, pika callbacks) uses ``connect_sync()`` / ``close_sync()`` or ``with``:
they run the same coroutine on a private event loop, and refuse, naming the async method to
await instead, when called from a thread whose event loop is running (blocking it would stall
every other task on that loop). Sync callers on several threads are serialized by a thread lock.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

__all__ = ["BaseService"]

_T = TypeVar("_T")


class BaseService:
    """Async lifecycle with idempotent ``connect``/``close``; subclasses override the hooks.

    ``_connect`` should leave nothing acquired when it raises: the service then stays
    disconnected and ``close()`` does nothing. Subclasses call ``super().__init__()``.
    """

    def __init__(self) -> None:
        self._connected = False
        self._lifecycle_lock: asyncio.Lock | None = None
        self._lifecycle_loop: asyncio.AbstractEventLoop | None = None
        self._sync_lock = threading.Lock()

    async def _connect(self) -> None:
        """Acquire what the service needs (connections, stores, threads). Runs once per
        connection."""

    async def _close(self) -> None:
        """Release what :meth:`_connect` acquired. Runs once per connection."""

    @property
    def is_connected(self) -> bool:
        """True between a successful ``connect()`` and the next ``close()``."""
        return self._connected

    def _lock(self) -> asyncio.Lock:
        """The lock of the running loop: made on first use, and again for a new loop (the sync
        methods run each call on a fresh private loop) unless the old one is held."""
        loop = asyncio.get_running_loop()
        lock = self._lifecycle_lock
        if lock is None or self._lifecycle_loop is not loop:
            if lock is not None and lock.locked():
                raise RuntimeError(
                    f"{type(self).__name__} is being connected or closed on another event loop"
                )
            lock = self._lifecycle_lock = asyncio.Lock()
            self._lifecycle_loop = loop
        return lock

    async def connect(self) -> None:
        """Run ``_connect`` unless connected; concurrent callers wait for the first one."""
        if self._connected:
            return
        async with self._lock():
            if not self._connected:
                await self._connect()
                self._connected = True

    async def close(self) -> None:
        """Run ``_close`` if connected; the service counts as closed even if ``_close`` raises."""
        if not self._connected:
            return
        async with self._lock():
            if self._connected:
                self._connected = False
                await self._close()

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the synchronous way in -----------------------------------------------------------------

    def _run_sync(self, coroutine: Coroutine[Any, Any, _T], instead: str) -> _T:
        """Run ``coroutine`` to completion on a private loop (refused inside a running loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coroutine.close()
            raise RuntimeError(
                f"{type(self).__name__}: called the synchronous form inside a running event "
                f"loop; use `await {instead}` there"
            )
        return asyncio.run(coroutine)

    def connect_sync(self) -> None:
        """:meth:`connect` for synchronous code (not from inside a running event loop)."""
        if not self._connected:
            with self._sync_lock:
                self._run_sync(self.connect(), "connect()")

    def close_sync(self) -> None:
        """:meth:`close` for synchronous code (not from inside a running event loop)."""
        if self._connected:
            with self._sync_lock:
                self._run_sync(self.close(), "close()")

    def __enter__(self) -> Self:
        self.connect_sync()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close_sync()
