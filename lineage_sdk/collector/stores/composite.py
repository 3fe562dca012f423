"""The ``composite`` store: several stores written in order, fail-fast.

The collector acks a message only after every store wrote it, so the first failure stops the
batch and the message is retried as a whole; stores already written see the events again and,
being idempotent, keep one copy.
"""

from __future__ import annotations

from collections.abc import Sequence

from lineage_sdk.collector.store import BaseLineageStore, LineageRecord, LineageStoreProtocol
from lineage_sdk.exceptions import StoreError

__all__ = ["CompositeStore"]


class CompositeStore(BaseLineageStore):
    """Writes to ``stores`` in order; a failure raises StoreError naming the failing store."""

    name = "composite"

    def __init__(self, stores: Sequence[LineageStoreProtocol]) -> None:
        if not stores:
            raise ValueError("a composite store needs at least one store")
        self.stores = list(stores)

    def open(self) -> None:
        for store in self.stores:
            store.open()

    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        for store in self.stores:
            try:
                store.write_batch(records)
            except StoreError:
                raise
            except Exception as exc:
                raise StoreError(store.name, f"{type(exc).__name__}: {exc}") from exc

    def check(self) -> None:
        for store in self.stores:
            store.check()

    def close(self) -> None:
        errors: list[str] = []
        for store in reversed(self.stores):
            try:
                store.close()
            except Exception as exc:  # noqa: BLE001 - close every store even if one fails
                errors.append(f"{store.name}: {exc}")
        if errors:
            raise StoreError(self.name, "closing failed: " + "; ".join(errors))
