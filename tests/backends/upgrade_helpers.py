"""An ``earlier`` layout that dies mid-copy, for the upgrade tests of every store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from lineage_sdk.collector.engine.store import PreEngineLayout
from lineage_sdk.collector.store import RawEvent

__all__ = ["Interrupting"]


class Interrupting:
    """A real layout that fails as a crash would: with a lost connection once ``events`` events
    were read (in the middle of a batch), or right after ``batches`` batches were marked copied
    (between two batches). ``afters`` records where each reading started, ``dropped`` whether
    the copy went through and dropped the layout."""

    def __init__(
        self, inner: PreEngineLayout, *, events: int | None = None, batches: int | None = None
    ) -> None:
        self.inner, self.events, self.batches = inner, events, batches
        self.afters: list[tuple[datetime, str] | None] = []
        self.marks = 0
        self.dropped = False

    def count_raw_events(self) -> int:
        return self.inner.count_raw_events()

    def iter_raw_events(
        self, *, after: tuple[datetime, str] | None = None, batch_size: int = 1000
    ) -> Iterator[RawEvent]:
        self.afters.append(after)
        events = self.inner.iter_raw_events(after=after, batch_size=batch_size)
        try:
            for read, event in enumerate(events):
                if read == self.events:
                    raise ConnectionError("the process died")
                yield event
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()

    def copied(self) -> tuple[datetime, str] | None:
        return self.inner.copied()

    def mark_copied(self, position: tuple[datetime, str]) -> None:
        self.inner.mark_copied(position)
        self.marks += 1
        if self.marks == self.batches:
            raise ConnectionError("the process died")

    def drop(self) -> None:
        self.dropped = True
        self.inner.drop()
