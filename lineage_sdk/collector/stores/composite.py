"""The ``composite`` store: several stores written concurrently, failing as one.

The collector acks a message only after every store wrote it. The stores are independent servers,
so a batch is written to all of them at once (the first store on the caller's thread, the others
on a small pool owned by the composite) and takes about as long as the slowest, not the sum. The
batch waits for every store before it returns, so no write of a failed batch is still in flight
when the collector retries it. If any store fails, the batch raises StoreError naming that store
and the message is retried as a whole; stores that succeeded see the events again and, being
idempotent, keep one copy.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from lineage_sdk.collector.store import BaseLineageStore, LineageRecord, LineageStoreProtocol
from lineage_sdk.exceptions import StoreError

__all__ = ["CompositeStore"]


def _write(store: LineageStoreProtocol, records: Sequence[LineageRecord]) -> StoreError | None:
    """Write one store; any failure comes back as a StoreError naming it (never raised)."""
    try:
        store.write_batch(records)
    except StoreError as exc:
        return exc
    except Exception as exc:  # noqa: BLE001 - a plugin store may raise anything
        error = StoreError(store.name, f"{type(exc).__name__}: {exc}")
        error.__cause__ = exc
        return error
    return None


class CompositeStore(BaseLineageStore):
    """Writes every batch to all ``stores`` concurrently; any failure raises StoreError.

    The error raised names the failing store. When several fail, a retryable error wins over a
    permanent one (a later attempt may fix it, and the collector should retry rather than
    dead-letter), then the first in configured order.
    """

    name = "composite"

    def __init__(self, stores: Sequence[LineageStoreProtocol]) -> None:
        if not stores:
            raise ValueError("a composite store needs at least one store")
        self.stores = list(stores)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def _start_pool(self) -> ThreadPoolExecutor | None:
        """The writer pool (one thread per store after the first), created once."""
        if len(self.stores) < 2:
            return None
        with self._pool_lock:
            if self._pool is None:
                pool = ThreadPoolExecutor(
                    max_workers=len(self.stores) - 1, thread_name_prefix="lineage-composite"
                )
                # A composite built outside a LineageManager may never be closed: its idle
                # threads still end when it is collected.
                weakref.finalize(self, pool.shutdown, False)
                self._pool = pool
            return self._pool

    def open(self) -> None:
        for store in self.stores:
            store.open()
        self._start_pool()

    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        pool = self._start_pool()  # also when the manager opened the leaf stores itself
        if pool is None:
            errors = [_write(self.stores[0], records)]
        else:
            futures: list[Future[StoreError | None]] = [
                pool.submit(_write, store, records) for store in self.stores[1:]
            ]
            first = _write(self.stores[0], records)
            errors = [first, *(future.result() for future in futures)]
        failed = [error for error in errors if error is not None]
        if failed:
            retryable = [error for error in failed if not error.permanent]
            raise (retryable or failed)[0]

    def check(self) -> None:
        for store in self.stores:
            store.check()

    def stop_writers(self) -> None:
        """End the writer threads without closing the stores (the manager closes those)."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def close(self) -> None:
        self.stop_writers()
        errors: list[str] = []
        for store in reversed(self.stores):
            try:
                store.close()
            except Exception as exc:  # noqa: BLE001 - close every store even if one fails
                errors.append(f"{store.name}: {exc}")
        if errors:
            raise StoreError(self.name, "closing failed: " + "; ".join(errors))
