"""A backend as the collector's store: derive once on write, answer through the engine."""

from __future__ import annotations

from collections.abc import Sequence

from lineage_sdk.collector.backend import LineageBackend
from lineage_sdk.collector.engine.derive import derive
from lineage_sdk.collector.engine.reads import Engine
from lineage_sdk.collector.store import LineageRecord

__all__ = ["EngineStore"]


class EngineStore(Engine):
    """The four-method store contract over a :class:`LineageBackend`, with the engine's reads.

    ``write_batch`` derives the batch's rows once (pure CPU) and appends them; the backend
    stores them. The read names are the :class:`Engine`'s.
    """

    def __init__(self, backend: LineageBackend) -> None:
        super().__init__(backend)
        self.name = backend.name
        self.address = backend.address

    def open(self) -> None:
        self.backend.open()

    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        self.backend.append(derive(records))

    def check(self) -> None:
        self.backend.check()

    def close(self) -> None:
        self.backend.close()
