"""The ``composite`` store: several stores written concurrently, failing as one.

The collector acks a message only after every store wrote it. The stores are independent servers,
so a batch is written to all of them at once (the first store on the caller's thread, the others
on a small pool owned by the composite) and takes about as long as the slowest, not the sum. The
batch waits for every store before it returns, even after one has failed, so no write of a failed
batch is still in flight when the collector retries it. If any store fails, the batch raises one
StoreError naming a failing store and the message goes to retry (or, when permanent or out of
attempts, to the dead-letter queue) as a whole; the stores that succeeded see the events again
and, being idempotent per event id, keep one copy.

Engine stores take the batch's rows, derived once for all of them, not each its own.

The composite does not own its stores: :class:`~lineage_sdk.collector.manager.LineageManager`
opens them before it builds the composite and closes them after it. The composite's own
``open`` and ``close`` start and end its writer pool, nothing else.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from lineage_sdk.collector.backend import Rows
from lineage_sdk.collector.engine import EngineStore, derive
from lineage_sdk.collector.engine.lineage_facet import warn_skipped
from lineage_sdk.collector.store import BaseLineageStore, LineageRecord, LineageStoreProtocol
from lineage_sdk.exceptions import StoreError

__all__ = ["CompositeStore", "engine_stores", "leaf_stores", "pick_query_store"]


def _write(
    store: LineageStoreProtocol, records: Sequence[LineageRecord], rows: Rows | None
) -> StoreError | None:
    """Write one store (an engine store the batch's ``rows``, when derived once for all);
    any failure comes back as a StoreError naming it (never raised)."""
    try:
        if rows is not None and isinstance(store, EngineStore):
            store.write_rows(rows)
        else:
            store.write_batch(records)
    except StoreError as exc:
        return exc
    except Exception as exc:  # noqa: BLE001 - a plugin store may raise anything
        error = StoreError(store.name, f"{type(exc).__name__}: {exc}")
        error.__cause__ = exc
        return error
    return None


class CompositeStore(BaseLineageStore):
    """Writes every batch to all ``stores`` (already open) concurrently; any failure raises.

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
        self._lock = threading.Lock()

    def open(self) -> None:
        """Start the writer pool (one thread per store after the first); the stores stay as
        they are."""
        if len(self.stores) < 2:
            return
        with self._lock:
            if self._pool is None:
                pool = ThreadPoolExecutor(
                    max_workers=len(self.stores) - 1, thread_name_prefix="lineage-composite"
                )
                # An opened composite that is never closed still ends its idle threads when
                # it is collected.
                weakref.finalize(self, pool.shutdown, False)
                self._pool = pool

    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        # The rows of the batch, derived once when two stores or more are engine stores
        # (derivation is a fifth of an engine store's write, and the same for every backend).
        rows = None
        if sum(isinstance(store, EngineStore) for store in self.stores) > 1:
            try:
                rows = derive(records)
            except Exception:  # noqa: BLE001 - each store derives again, and fails as itself
                rows = None
            else:
                warn_skipped(records)  # as each engine store's write_batch would have
        if len(self.stores) == 1:
            errors = [_write(self.stores[0], records, rows)]
        else:
            pool = self._pool
            if pool is None:
                raise RuntimeError("the composite store is not open: call open() first")
            futures: list[Future[StoreError | None]] = [
                pool.submit(_write, store, records, rows) for store in self.stores[1:]
            ]
            first = _write(self.stores[0], records, rows)
            errors = [first, *(future.result() for future in futures)]
        failed = [error for error in errors if error is not None]
        if failed:
            retryable = [error for error in failed if not error.permanent]
            raise (retryable or failed)[0]

    def check(self) -> None:
        for store in self.stores:
            store.check()

    def close(self) -> None:
        """End the writer pool, after the writes in flight; the stores are not closed."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


def leaf_stores(stores: Iterable[LineageStoreProtocol]) -> list[LineageStoreProtocol]:
    """The leaf stores, looking into a composite (whose ``stores`` are its leaves)."""
    leaves: list[LineageStoreProtocol] = []
    for store in stores:
        leaves.extend(store.stores if isinstance(store, CompositeStore) else [store])
    return leaves


def engine_stores(stores: Iterable[LineageStoreProtocol]) -> list[EngineStore]:
    """The leaf stores that keep events and answer reads: the engine's (sql, document, graph,
    memory), in configured order."""
    return [s for s in leaf_stores(stores) if isinstance(s, EngineStore)]


def pick_query_store(stores: Iterable[LineageStoreProtocol]) -> EngineStore | None:
    """The store that answers reads: ``sql`` first, then ``graph``, then any other engine store,
    looking into composites (a ``[document, graph, sql]`` composite reads from sql)."""
    engines = engine_stores(stores)
    for preferred in ("sql", "graph"):
        for store in engines:
            if store.name == preferred:
                return store
    return engines[0] if engines else None
