"""Retention and hard deletion: forget raw events, and everything derived from them, in batches.

Every query store keeps each raw event, and derives jobs, runs, datasets, edges and column edges
from them. Forgetting is therefore always the same operation: choose a set of raw events, and
have each store remove them and leave its derived state equal to what the remaining events
derive (:meth:`~lineage_sdk.collector.engine.Engine.delete_events`). What the remaining
events no longer name (a job, a dataset, an edge) is gone.

* :func:`purge_older_than` (``lineage-collector retention --older-than 90d``): the events with
  an event time before the cutoff, optionally of one namespace (as ``export --namespace``).
* :func:`purge_mentioning` (``lineage-collector delete job|dataset|namespace``): every event that
  *names* the job, the dataset or the namespace (see :func:`names_target`), wherever in the event:
  the job itself or a parent job facet, an input, an output, a DatasetEvent's dataset. For
  compliance the raw event that names a deleted dataset must not keep it, and rewriting a stored
  event would change its content identity (the event id) and what every export says was
  received; so the whole event goes, in every store alike. Its other datasets and jobs lose what
  only that event said of them; what other events say of them stays.

Each store selects its own events (so a store that missed or kept an event is still cleaned),
a batch at a time (``batch_size`` ids per ``delete_events`` call, one short transaction), reading
on from the last position after each batch, so a collector writing meanwhile is only ever
blocked for one batch. Running either again finds nothing more to delete: both are idempotent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import orjson

from lineage_sdk.collector.engine import Engine, EngineStore
from lineage_sdk.collector.settings import parse_age
from lineage_sdk.collector.store import RawEvent, event_mentions
from lineage_sdk.collector.stores.composite import engine_stores, leaf_stores
from lineage_sdk.exceptions import ConfigError, StoreError

__all__ = [
    "PurgeReport",
    "RetentionTask",
    "Target",
    "deleters",
    "names_target",
    "parse_age",
    "purge",
    "purge_mentioning",
    "purge_older_than",
]

_log = logging.getLogger("lineage_sdk.collector.retention")

Target = Literal["job", "dataset", "namespace"]
Progress = Callable[[int], None]
"""Called with how many events were removed (or, in a dry run, found) so far."""


def deleters(stores: Iterable[Any]) -> list[EngineStore]:
    """The leaf stores that can forget events (a composite is looked into); ConfigError when
    none is configured."""
    found = engine_stores(stores)
    if not found:
        raise ConfigError(
            "store.backend",
            sorted({s.name for s in leaf_stores(stores)}),
            "a store that keeps raw events (sql, document or graph)",
        )
    return found


@dataclass
class PurgeReport:
    """What one purge did per store: events removed (found, in a dry run)."""

    dry_run: bool = False
    removed: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return max(self.removed.values(), default=0)


def names_target(
    event: Any,
    target: Target,
    namespace: str,
    name: str | None = None,
    *,
    node: tuple[str, str] | None = None,
) -> bool:
    """Whether ``event`` names the job, dataset or namespace anywhere (see the module); a dataset
    by that name or by any name of ``node``, the dataset it is a name of (a symlinked dataset's
    every name deletes it whole)."""
    mentions = event_mentions(event)
    if target == "namespace":
        return namespace in mentions.namespaces
    if target == "job":
        return (namespace, name) in mentions.jobs or (namespace, name) in mentions.parent_jobs
    return (namespace, name) in mentions.datasets or node in mentions.datasets


def purge(
    store: Engine,
    *,
    select: Callable[[RawEvent], bool] | None = None,
    namespace: str | None = None,
    until: datetime | None = None,
    batch_size: int = 1000,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> int:
    """Remove from ``store`` the events its ``iter_raw_events(namespace, until)`` yields and
    ``select`` keeps, ``batch_size`` per transaction; returns how many (found, if ``dry_run``).

    The read is closed before each deletion and resumed after the last position read, so no
    cursor is held across a write and events written meanwhile are met (or not) by their time.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    done = 0
    after: tuple[datetime, str] | None = None
    while True:
        chosen: list[str] = []
        exhausted = True
        events = store.iter_raw_events(
            namespace=namespace, until=until, after=after, batch_size=batch_size
        )
        try:
            for event in events:
                after = event.position
                if select is None or select(event):
                    chosen.append(event.event_id)
                    if len(chosen) >= batch_size:
                        exhausted = False
                        break
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()
        if chosen:
            done += len(chosen) if dry_run else store.delete_events(chosen)
            if progress is not None:
                progress(done)
        if exhausted:
            return done


def _parsed(event: RawEvent) -> Any:
    try:
        return orjson.loads(event.json)
    except orjson.JSONDecodeError:
        import json

        return json.loads(event.json)


def purge_older_than(
    stores: Sequence[Engine],
    older_than: timedelta,
    *,
    namespace: str | None = None,
    now: datetime | None = None,
    batch_size: int = 1000,
    dry_run: bool = False,
    progress: Callable[[str, int], None] | None = None,
) -> PurgeReport:
    """Retention: remove from every store the events older than ``older_than`` before ``now``
    (their event time, not when they arrived), of ``namespace`` when given."""
    cutoff = (now or datetime.now(UTC)) - older_than
    report = PurgeReport(dry_run=dry_run)
    for store in stores:
        report.removed[store.name] = purge(
            store,
            namespace=namespace,
            until=cutoff,
            batch_size=batch_size,
            dry_run=dry_run,
            progress=None if progress is None else _named(progress, store.name),
        )
    return report


def purge_mentioning(
    stores: Sequence[Engine],
    target: Target,
    namespace: str,
    name: str | None = None,
    *,
    batch_size: int = 1000,
    dry_run: bool = False,
    progress: Callable[[str, int], None] | None = None,
) -> PurgeReport:
    """Hard delete: remove from every store every event that names the job, the dataset or the
    namespace (:func:`names_target`), and so everything derived from them."""
    if target not in ("job", "dataset", "namespace"):
        raise ValueError(f"target must be job, dataset or namespace, got {target!r}")
    if (target == "namespace") != (name is None) or not namespace:
        raise ValueError("a job or dataset needs a namespace and a name; a namespace only itself")
    report = PurgeReport(dry_run=dry_run)
    for store in stores:
        node = None if target != "dataset" or name is None else store.dataset_name(namespace, name)
        report.removed[store.name] = purge(
            store,
            select=lambda event, node=node: names_target(  # type: ignore[misc]
                _parsed(event), target, namespace, name, node=node
            ),
            batch_size=batch_size,
            dry_run=dry_run,
            progress=None if progress is None else _named(progress, store.name),
        )
    return report


def _named(progress: Callable[[str, int], None], name: str) -> Progress:
    return lambda done: progress(name, done)


class RetentionTask:
    """Retention as a periodic task of ``lineage-collector run``: every ``interval_s``, remove
    the events older than ``older_than`` from the stores, in a daemon thread of its own.

    A failing pass is logged and tried again at the next interval; it never stops the collector.
    """

    def __init__(
        self,
        stores: Sequence[Engine],
        older_than: timedelta,
        *,
        interval_s: float,
        batch_size: int = 1000,
    ) -> None:
        self.stores = list(stores)
        self.older_than = older_than
        self.interval_s = interval_s
        self.batch_size = batch_size
        self.passes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> PurgeReport | None:
        """One pass; None when a store failed (logged)."""
        try:
            report = purge_older_than(self.stores, self.older_than, batch_size=self.batch_size)
        except StoreError as exc:
            _log.warning("retention pass failed, trying again in %ss: %s", self.interval_s, exc)
            return None
        finally:
            self.passes += 1
        if report.total:
            _log.info("retention removed %s", report.removed)
        return report

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name="lineage-retention", daemon=True
            )
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.run_once()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
