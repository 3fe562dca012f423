"""A backend as the collector's store: derive once on write, answer through the engine."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from lineage_sdk.collector.backend import LineageBackend, Position, Provisioned, Rows, Touched
from lineage_sdk.collector.decode import PoisonMessage, validate_event
from lineage_sdk.collector.engine.derive import DERIVATION_VERSION, derive, record_of
from lineage_sdk.collector.engine.lineage_facet import warn_skipped
from lineage_sdk.collector.engine.reads import Engine
from lineage_sdk.collector.store import LineageRecord, RawEvent

__all__ = ["EngineStore", "PreEngineLayout"]

_log = logging.getLogger(__name__)

#: Events copied per ``append`` when an earlier release's layout is upgraded, or derived again
#: per ``append`` when the derivation rules changed.
UPGRADE_BATCH = 1000
#: Seconds between progress lines while upgrading.
_PROGRESS_EVERY_S = 10.0


class PreEngineLayout(Protocol):
    """The raw events a store of a release before the engine left in its own tables,
    collections or vertices, read only; :meth:`drop` removes that whole layout.

    ``count_raw_events`` is 0 when the database holds no such layout (or it was dropped, or
    holds no event); :meth:`drop` is then cheap, and removes what is left of it;
    ``iter_raw_events`` yields them ordered by ``(event_time, event_id)``, after ``after``.
    ``copied`` is the position of the last event :meth:`mark_copied` recorded (kept in the same
    database, beside the layout, so a copy interrupted by a crash resumes after it), None
    before the first.
    """

    def count_raw_events(self) -> int: ...

    def iter_raw_events(
        self, *, after: tuple[datetime, str] | None = None, batch_size: int = 1000
    ) -> Iterator[RawEvent]: ...

    def copied(self) -> tuple[datetime, str] | None: ...

    def mark_copied(self, position: tuple[datetime, str]) -> None: ...

    def drop(self) -> None: ...


class EngineStore(Engine):
    """The four-method store contract over a :class:`LineageBackend`, with the engine's reads.

    ``write_batch`` derives the batch's rows once (pure CPU) and appends them; the backend
    stores them. The read names are the :class:`Engine`'s.

    ``earlier``, when given, is the layout the same database may hold from a release before the
    engine: :meth:`open` copies its events into the backend's rows (each validated and derived
    as on ingest), then drops it. The copy resumes after an interruption: the layout records
    the last event of each batch once the batch is appended (an append is idempotent, so a
    batch copied again after a crash is stored once).

    A backend that keeps the version of the rules its derived rows were made by
    (:class:`~lineage_sdk.collector.backend.Provisioned`) has them derived again at :meth:`open`
    when the version is older than :data:`~lineage_sdk.collector.engine.derive.DERIVATION_VERSION`:
    every derived row is removed and every stored event derived again, in position order. The
    version is marked 0 first, so a re-derivation interrupted by a crash starts again at the
    next open. A backend written by newer rules is left as it is, with a warning.
    """

    def __init__(
        self,
        backend: LineageBackend,
        *,
        earlier: PreEngineLayout | None = None,
        upgrade_batch: int = UPGRADE_BATCH,
    ) -> None:
        super().__init__(backend)
        self.address = backend.address
        self._earlier = earlier
        self._upgrade_batch = upgrade_batch

    def open(self) -> None:
        self.backend.open()
        versioned = self.backend if isinstance(self.backend, Provisioned) else None
        # The copy first: until it drops the earlier layout, a backend may read that layout's
        # events as its own (the graph's share the ``Event`` label).
        if self._earlier is not None:
            self._upgrade(self._earlier, versioned)
        if versioned is not None:
            self._derive_again_if_older(versioned)

    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        warn_skipped(records)  # once per write: not on a deletion's or an open's derivation
        self.write_rows(derive(records))  # derived before the lock: a deletion may hold it

    def write_rows(self, rows: Rows) -> None:
        """Append rows :func:`derive` made of a batch (a composite of several engine stores
        derives each batch once for all of them)."""
        with self.writing:
            self.backend.append(rows)

    def missing(self) -> list[str]:
        """What :meth:`open` would create or copy (``lineage-collector check``), found without
        changing anything."""
        return self.backend.missing() if isinstance(self.backend, Provisioned) else []

    def check(self) -> None:
        self.backend.check()

    def close(self) -> None:
        self.backend.close()

    def _derive_again_if_older(self, versioned: Provisioned) -> None:
        """Derive every stored event's rows again when they were made by older rules (see the
        class docstring); a store without events is marked with today's version."""
        stored = versioned.derivation()
        if stored == DERIVATION_VERSION:
            return
        total = self.backend.events(limit=0, count=True).total
        if not total:
            versioned.mark_derivation(DERIVATION_VERSION)
            return
        if stored is None:
            stored = 1  # rows of the engine's first layout, which kept no version
            if stored == DERIVATION_VERSION:
                versioned.mark_derivation(stored)
                return
        if stored > DERIVATION_VERSION:
            _log.warning(
                "store %s (%s) holds rows derived by newer rules (version %d; this release "
                "derives by version %d): they are kept as they are",
                self.name,
                self.address,
                stored,
                DERIVATION_VERSION,
            )
            return
        _log.warning(
            "store %s (%s): the rows of its %d event(s) were derived by the rules of version %d; "
            "deriving them again by version %d (the store opens when done)",
            self.name,
            self.address,
            total,
            stored,
            DERIVATION_VERSION,
        )
        versioned.mark_derivation(0)
        self.backend.replace(Touched(every=True), Rows())
        after: Position | None = None
        done, shown = 0, time.monotonic()
        while page := list(self.backend.events(after=after, limit=self._upgrade_batch)):
            self.backend.append(replace(derive(map(record_of, page)), events=()))
            after, done = page[-1].position, done + len(page)
            if time.monotonic() - shown >= _PROGRESS_EVERY_S:
                shown = time.monotonic()
                _log.warning("derivation of %s: %d of %d event(s)", self.name, done, total)
        versioned.mark_derivation(DERIVATION_VERSION)
        _log.warning("derivation of %s done: %d event(s)", self.name, done)

    def _upgrade(self, earlier: PreEngineLayout, versioned: Provisioned | None) -> None:
        """Copy ``earlier``'s events into the backend, then drop it (see the class docstring)."""
        total = earlier.count_raw_events()
        if not total:
            earlier.drop()  # what is left of an earlier layout without events (a no-op if none)
            return
        after = earlier.copied()
        if after is None and versioned is not None and versioned.derivation() is None:
            # A first copy: the new rows hold nothing yet, and it derives by today's rules.
            versioned.mark_derivation(DERIVATION_VERSION)
        _log.warning(
            "store %s (%s) holds %d event(s) in the layout of a release before the engine: "
            "copying them into the new layout%s (the store opens when done)",
            self.name,
            self.address,
            total,
            f", resuming after {after[0].isoformat()}" if after else "",
        )
        copied = refused = 0
        batch: list[LineageRecord] = []
        shown = time.monotonic()
        last: tuple[datetime, str] | None = None

        def flush() -> None:
            nonlocal copied
            if batch:
                self.write_batch(batch)
                copied += len(batch)
                batch.clear()
            if last is not None:
                earlier.mark_copied(last)

        for event in earlier.iter_raw_events(after=after, batch_size=self._upgrade_batch):
            try:
                batch.append(validate_event(event.data()))
            except (PoisonMessage, ValueError) as exc:
                refused += 1
                _log.warning("upgrade of %s skips event %s: %s", self.name, event.event_id, exc)
            last = event.position
            if len(batch) >= self._upgrade_batch:
                flush()
                if time.monotonic() - shown >= _PROGRESS_EVERY_S:
                    shown = time.monotonic()
                    _log.warning("upgrade of %s: %d of %d event(s)", self.name, copied, total)
        flush()
        earlier.drop()
        _log.warning(
            "upgrade of %s done: %d event(s) copied this time, %d skipped as invalid; "
            "the earlier layout is dropped",
            self.name,
            copied,
            refused,
        )
