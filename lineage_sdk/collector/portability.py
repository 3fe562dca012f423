"""Portability: export every raw event, import events, rebuild one store from another's events.

Every query store (sql, document, graph) keeps each event exactly as it was received, so the raw
events are the system of record and everything else is derived from them. This module moves them:

* :func:`export_events` streams a :class:`~lineage_sdk.collector.engine.Engine`'s events
  as NDJSON (one event per line, in ``(eventTime, event id)`` order), in constant memory;
* :func:`import_events` takes NDJSON through the very path of ingest: each line is decoded and
  validated by :func:`~lineage_sdk.collector.decode.decode_message` (what a broker message goes
  through, so :func:`~lineage_sdk.models.codec.check_ingest_event`), and batches are written by
  :meth:`~lineage_sdk.collector.service.LineageCollectorService.handle_lineage_events` into the
  manager's store. A bad line is reported with its number and skipped; it never costs the others;
* :func:`rebuild_store` copies one store's raw events into another store (for example the graph
  after a change of its model), resumable from a checkpoint file holding the last position
  copied. Writes are idempotent per event, so a batch written twice (an interruption between
  the write and the checkpoint) changes nothing, and a resumed rebuild ends as an uninterrupted
  one would.

The commands in :mod:`lineage_sdk.collector.cli` are thin wrappers around these functions.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from lineage_sdk.collector.decode import (
    JSON_CONTENT_TYPE,
    PoisonMessage,
    decode_message,
    validate_event,
)
from lineage_sdk.collector.engine import Engine, EngineStore
from lineage_sdk.collector.records import parse_event_time
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.store import (
    LineageRecord,
    LineageStoreProtocol,
)
from lineage_sdk.collector.stores.composite import engine_stores, leaf_stores
from lineage_sdk.exceptions import ConfigError, StoreError

__all__ = [
    "RAW_SOURCE_PREFERENCE",
    "Checkpoint",
    "ImportReport",
    "RebuildReport",
    "export_events",
    "import_events",
    "leaf_stores",
    "ndjson_lines",
    "opened",
    "raw_source",
    "rebuild_store",
]

#: Which store an export reads when none is named: sql (an indexed table, streamed by the
#: database), then document (the text exactly as received), then graph.
RAW_SOURCE_PREFERENCE = ("sql", "document", "graph")
_ARRAY_LINE = "a line must hold one event object; this one holds a JSON array"

Progress = Callable[[int], None]
"""Called with how many events (export, rebuild) or bytes (import) are done so far."""
Refused = Callable[[int, str], None]
"""Called with a line number (import) or a running count (rebuild) and the reason."""


def raw_source(stores: Iterable[Any], name: str | None = None) -> EngineStore:
    """The store raw events are read from: the one called ``name``, else the first of
    :data:`RAW_SOURCE_PREFERENCE` configured; ConfigError naming what is configured otherwise."""
    sources = {s.name: s for s in engine_stores(stores)}
    if name is not None:
        if name not in sources:
            raise ConfigError(
                "store.backend",
                name,
                "a configured store that keeps raw events ("
                + (", ".join(sorted(sources)) or "none is configured: sql, document or graph")
                + ")",
            )
        return sources[name]
    for preferred in RAW_SOURCE_PREFERENCE:
        if preferred in sources:
            return sources[preferred]
    if sources:
        return next(iter(sources.values()))
    raise ConfigError(
        "store.backend",
        sorted({s.name for s in leaf_stores(stores)}),
        "a store that keeps raw events (sql, document or graph)",
    )


@contextlib.contextmanager
def opened(*stores: Any) -> Iterator[None]:
    """Open only ``stores`` (those a command uses, not every configured one: an export from sql
    must not need the graph server up), closing them after, last opened first."""
    with contextlib.ExitStack() as stack:
        for store in stores:
            store.open()
            stack.callback(store.close)
        yield


# ------------------------------------------------------------------------------------------ export


def export_events(
    source: Engine,
    out: BinaryIO,
    *,
    namespace: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    batch_size: int = 1000,
    progress: Progress | None = None,
) -> int:
    """Write every event of ``source`` passing the filters to ``out`` as NDJSON; returns how many.

    Each line is the stored JSON text as it is (no decoding and encoding again): parsed, it is
    the event as received. Lines are written a batch at a time.
    """
    written = 0
    chunk: list[bytes] = []
    for event in source.iter_raw_events(
        namespace=namespace, since=since, until=until, batch_size=batch_size
    ):
        chunk.append(event.json.encode())
        if len(chunk) >= batch_size:
            written += _write_lines(out, chunk)
            if progress is not None:
                progress(written)
    written += _write_lines(out, chunk)
    out.flush()
    if progress is not None:
        progress(written)
    return written


def _write_lines(out: BinaryIO, lines: list[bytes]) -> int:
    if not lines:
        return 0
    out.write(b"\n".join(lines) + b"\n")
    count = len(lines)
    lines.clear()
    return count


# ------------------------------------------------------------------------------------------ import


@dataclass
class ImportReport:
    """What an import did: every non-blank line is counted in exactly one of the three."""

    imported: int = 0
    already_present: int = 0
    refused: int = 0

    @property
    def lines(self) -> int:
        return self.imported + self.already_present + self.refused


def ndjson_lines(stream: BinaryIO) -> Iterator[tuple[int, bytes, int]]:
    """``(line number, line, bytes read so far)`` of a binary stream, split on ``\\n`` only
    (JSON text may hold U+2028 and other separators that ``str.splitlines`` would cut at)."""
    done = 0
    for number, line in enumerate(stream, 1):
        done += len(line)
        yield number, line, done


def _decode_line(line: bytes, max_bytes: int) -> LineageRecord:
    """One NDJSON line -> a validated record, exactly as a single-event broker message."""
    if line.lstrip()[:1] == b"[":
        raise PoisonMessage("not_an_event", _ARRAY_LINE)
    decoded = decode_message(line, JSON_CONTENT_TYPE, max_bytes=max_bytes)
    return decoded.records[0]


def _present_everywhere(stores: Sequence[Engine], ids: list[str]) -> set[str]:
    """The ids every store that can tell already holds (none can tell: none is present)."""
    if not stores or not ids:
        return set()
    present = stores[0].stored_event_ids(ids)
    for store in stores[1:]:
        if not present:
            break
        present &= store.stored_event_ids(sorted(present))
    return present


async def import_events(
    service: LineageCollectorService,
    lines: Iterable[tuple[int, bytes, int]],
    *,
    batch_size: int = 500,
    max_bytes: int = 4 << 20,
    on_refused: Refused | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Store NDJSON ``lines`` (from :func:`ndjson_lines`) through the service's ingest path.

    Blank lines are skipped. A line that is not a valid event, and an event a store refuses
    permanently, is counted as refused and reported to ``on_refused(line number, reason)``; the
    other events are stored. An event every raw-event store already held (or that came earlier in
    the same file) counts as already present. A store that is unavailable stops the import with
    :class:`StoreError` saying from which line to resume (running it again is safe: the stores
    are idempotent). The service's stores must be open (``async with service``). Store calls
    block the running loop, between batches: this is meant for a loop of its own, as the
    command's ``asyncio.run``.
    """
    report = ImportReport()
    checkers = engine_stores(service.lineage_manager.stores)
    pending: list[tuple[int, LineageRecord]] = []

    def refuse(number: int, reason: str) -> None:
        report.refused += 1
        if on_refused is not None:
            on_refused(number, reason)

    async def flush() -> None:
        if not pending:
            return
        ids = [rec.event_id for _, rec in pending]
        present = _present_everywhere(checkers, ids)
        fresh: list[tuple[int, LineageRecord]] = []
        for number, rec in pending:
            if rec.event_id in present:
                report.already_present += 1
            else:
                fresh.append((number, rec))
                present.add(rec.event_id)  # a second copy later in the batch is "present"
        pending.clear()
        await _store(service, fresh, report, refuse)

    done = 0
    for number, line, done in lines:
        if not line.strip():
            continue
        try:
            record = _decode_line(line, max_bytes)
        except PoisonMessage as exc:
            refuse(number, f"{exc.reason}: {exc.detail}")
            continue
        pending.append((number, record))
        if len(pending) >= batch_size:
            await flush()
            if progress is not None:
                progress(done)
    await flush()
    if progress is not None:
        progress(done)
    return report


async def _store(
    service: LineageCollectorService,
    batch: list[tuple[int, LineageRecord]],
    report: ImportReport,
    refuse: Callable[[int, str], None],
) -> None:
    """Write one batch; on a permanent store refusal, write its events one by one so that only
    the refused events are lost to the import (each reported with its line)."""
    if not batch:
        return
    try:
        await service.handle_lineage_events([rec for _, rec in batch], off_loop=False)
        report.imported += len(batch)
        return
    except StoreError as exc:
        if not exc.permanent:
            raise StoreError(
                exc.store,
                f"{_detail(exc)}; stopped at line {batch[0][0]}: the lines before it are "
                "stored, and the import is idempotent, so run it again to finish",
            ) from exc
    for number, rec in batch:
        try:
            await service.handle_lineage_events([rec], off_loop=False)
            report.imported += 1
        except StoreError as exc:
            if not exc.permanent:
                raise
            refuse(number, f"store {exc.store} refused the event: {_detail(exc)}")


def _detail(exc: StoreError) -> str:
    """The store's message without the ``<store>: `` prefix StoreError adds."""
    text = str(exc)
    prefix = f"{exc.store}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


# ----------------------------------------------------------------------------------------- rebuild


@dataclass(frozen=True)
class Checkpoint:
    """How far a rebuild got: the last position copied, kept in a small JSON file.

    It names the source and target stores, so a checkpoint is never applied to another pair.
    """

    source: str
    target: str
    after: tuple[datetime, str] | None = None
    copied: int = 0

    @classmethod
    def load(cls, path: Path, source: str, target: str) -> Checkpoint:
        """The checkpoint in ``path``, or a fresh one when there is none."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(source, target)
        except (OSError, ValueError) as exc:
            raise ConfigError(
                "--checkpoint", str(path), f"a rebuild checkpoint file ({exc})"
            ) from None
        try:
            found = (data["source"], data["target"])
            after = data.get("after")
            position = (parse_event_time(after[0]), str(after[1])) if after else None
            copied = int(data.get("copied", 0))
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            raise ConfigError(
                "--checkpoint", str(path), f"a rebuild checkpoint file (bad content: {exc})"
            ) from None
        if found != (source, target):
            raise ConfigError(
                "--checkpoint",
                str(path),
                f"a checkpoint of a rebuild from {source} to {target}; this one is from "
                f"{found[0]} to {found[1]} (delete it, or pass another --checkpoint)",
            )
        return cls(source, target, position, copied)

    def save(self, path: Path) -> None:
        """Write atomically (a temporary file renamed over the old one)."""
        data = {
            "source": self.source,
            "target": self.target,
            "after": None if self.after is None else [self.after[0].isoformat(), self.after[1]],
            "copied": self.copied,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


@dataclass
class RebuildReport:
    """What a rebuild did in this run; ``complete`` is False when it stopped at ``limit``."""

    copied: int = 0
    refused: int = 0
    resumed_from: tuple[datetime, str] | None = None
    complete: bool = False
    total_copied: int = 0


def rebuild_store(
    source: Engine,
    target: LineageStoreProtocol,
    *,
    checkpoint: Path,
    batch_size: int = 1000,
    limit: int | None = None,
    on_refused: Refused | None = None,
    progress: Progress | None = None,
) -> RebuildReport:
    """Copy ``source``'s raw events into ``target`` (both open), resuming after ``checkpoint``.

    Each event is validated and made a record exactly as on ingest, then written with
    ``target.write_batch`` a batch at a time; the checkpoint is saved after every batch and
    removed when the copy completes. ``limit`` stops after that many events (the checkpoint is
    kept, so the next run continues). An event that no longer passes validation is skipped and
    reported. ``progress`` is called with the events copied so far, this run and earlier ones.
    """
    if source.name == target.name:
        raise ConfigError("rebuild --to", target.name, "a store other than the source (--from)")
    state = Checkpoint.load(checkpoint, source.name, target.name)
    report = RebuildReport(resumed_from=state.after, total_copied=state.copied)
    position = state.after
    batch: list[LineageRecord] = []
    last: tuple[datetime, str] | None = None

    def write() -> None:
        nonlocal state
        if batch:
            target.write_batch(batch)
            report.copied += len(batch)
            report.total_copied += len(batch)
            batch.clear()
        if last is not None:
            state = Checkpoint(source.name, target.name, last, report.total_copied)
            state.save(checkpoint)
        if progress is not None:
            progress(report.total_copied)

    stopped = False
    events = source.iter_raw_events(after=position, batch_size=batch_size)
    try:
        for event in events:
            if limit is not None and report.copied + len(batch) >= limit:
                stopped = True
                break
            try:
                batch.append(validate_event(event.data()))
            except (PoisonMessage, ValueError) as exc:
                report.refused += 1
                if on_refused is not None:
                    on_refused(report.refused, f"event {event.event_id}: {exc}")
            last = event.position
            if len(batch) >= batch_size:
                write()
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()  # release the source's cursor now, not when the generator is collected
    write()
    if not stopped:
        report.complete = True
        with contextlib.suppress(FileNotFoundError):
            checkpoint.unlink()
    return report
