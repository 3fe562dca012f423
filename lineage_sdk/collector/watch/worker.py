"""The watch's worker: one thread per collector that turns recorded causes into alerts and
delivers them, off the ingest path.

Each pass: settle the schema candidates (a field removed or retyped against the dataset's
previous schema is a ``schema_breaking`` cause), sweep the live runs (a run whose last event is
older than its heartbeat interval times ``grace`` is ``run_stale``, one cause per run and last
event), resolve the causes (the rules that match, the impact downstream, one CloudEvent per
rule), then deliver what is due. Everything it works from is in the
:class:`~lineage_sdk.collector.watch.store.WatchStore`, so a restart or another collector of
the fleet picks up where this one stopped.

A cause's cost grows with the cause, not with its rules: the impact is read once for all the
rules that match it, at the largest of their depths, and each rule's alert holds it cut to its
own depth (exactly what a read at that depth answers: :func:`impacts`); rules of one depth share
one body. The alerts are claimed ahead and sent over kept connections
(:mod:`~lineage_sdk.collector.watch.deliver`). Fifty rules matching every cause (``bench_api
--watch``: 190 causes, 9,500 alerts) cost 2.9 ms of process CPU an alert before, 1.4 ms after;
of what is left, the impact (a walk and its reads, about 30 ms a cause) is about 40%.

The worker yields to ingest: it shares the process (and the GIL) with it, and on SQLite the
database's write lock. While ingest is busy (more than ``_BUSY_EVENTS`` events stored in the
last half second: 1,000 a second), a pass settles ten schema candidates, resolves one cause and
sends at most two alerts (none claimed ahead), and the worker then pauses so that it takes
about 5% of the time (at least one pass every two seconds: alerts are delayed, never dropped).
Unyielding, it cut a saturated ingest to 0.64x. The signal is a rate, so any steady flow above
1,000 events/s counts as busy however far below what the collector sustains (4,300 events/s
here), and the worker then keeps to 5% of the time while ingest leaves the rest idle (at a
steady 2,336 events/s the process used 0.71 of a core). A share of the time spent writing
batches was tried and left out: it told a steady 900 events/s from a saturated ingest (median
0.17 against 0.78 of each second), but passes it let through at a saturated ingest's start and
dips cut the ingest ratio to 0.82x (docs/watch.md, Cost).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from lineage_sdk.collector.engine import Engine
from lineage_sdk.collector.records import format_time, parse_event_time
from lineage_sdk.collector.store import LineageRecord, node_id
from lineage_sdk.collector.watch.causes import breaking_changes, noticed, stated_schemas
from lineage_sdk.collector.watch.deliver import Deliverer
from lineage_sdk.collector.watch.envelope import cloud_event
from lineage_sdk.collector.watch.impact import impacts
from lineage_sdk.collector.watch.model import Alert, Beat, Cause, Noticed, SchemaSeen, cause_id
from lineage_sdk.collector.watch.rules import Rule
from lineage_sdk.collector.watch.store import WatchStore
from lineage_sdk.models.run_state import STALE_AFTER_HEARTBEATS, TERMINAL_STATES

__all__ = ["Watcher"]

_log = logging.getLogger("lineage_sdk.collector.watch")
_BATCH = 100
#: Causes claimed a pass: few, so a pass stays short and a stop or a fleet's other collectors
#: take the rest.
_CAUSES_A_PASS = 10
_LEASE_S = 60.0
#: A cause is resolved once it was noticed this long ago (Alertmanager's ``group_wait``, short):
#: the events that follow it at once (a run's end after a check failed on its start, as dbt-ol
#: sends them) are stored by then, so the impact's latest runs show them.
GROUP_WAIT_S = 0.5
#: Ingest is busy when more than ``_BUSY_EVENTS`` events were stored in the last
#: ``_BUSY_WINDOW_S`` seconds.
_BUSY_EVENTS = 500
_BUSY_WINDOW_S = 0.5
#: The share of the time the worker takes while ingest is saturated, its longest pause, and
#: what one pass does then.
_SHARE = 0.05
_LONGEST_PAUSE_S = 2.0
_CROWDED_CAUSES = 1
_CROWDED_SENDS = 2
_CROWDED_SCHEMAS = 10


def _now() -> datetime:
    return datetime.now(UTC)


class Watcher:
    """Records what stored batches say (:meth:`notice`, on the ingest path) and, in its own
    thread, resolves and delivers alerts (:meth:`run_once`)."""

    def __init__(
        self,
        store: WatchStore,
        engine: Engine,
        rules: Sequence[Rule],
        deliverer: Deliverer,
        *,
        source: str,
        grace: float = STALE_AFTER_HEARTBEATS,
        interval_s: float = 0.5,
        group_wait_s: float = GROUP_WAIT_S,
        owner: str | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.store, self.engine, self.rules = store, engine, list(rules)
        self.deliverer, self.source, self.grace = deliverer, source, grace
        self.interval_s, self.clock = interval_s, clock
        self.group_wait_s = group_wait_s
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self._stop = threading.Event()
        #: Set by new causes (:meth:`notice`) and by a sender coming free: the loop's pause
        #: ends at once when there is work, not at the next poll.
        self._wake = deliverer.freed
        self._thread: threading.Thread | None = None
        #: (monotonic time, events) of the batches stored lately (:meth:`notice`).
        self._stored: deque[tuple[float, int]] = deque()
        self._stored_lock = threading.Lock()

    # -- the ingest path ------------------------------------------------------------------------

    def notice(self, records: Sequence[LineageRecord]) -> None:
        """Record what a stored batch says, in one transaction (raises StoreError: the batch is
        then not acknowledged, and its redelivery records it again)."""
        with self._stored_lock:
            self._stored.append((time.monotonic(), len(records)))
        found = noticed(records)
        if found:
            self.store.record(found)
            if found.causes or found.schemas:
                self._wake.set()

    # -- the worker -----------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="lineage-watch", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the loop after the cause it is on (a pass checks between causes)."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                _log.warning("lineage watch: a pass still runs after %g s; closing anyway", timeout)

    def close(self) -> None:
        """Stop the thread, then release the receivers' connections and the store."""
        self.stop()
        self.deliverer.close()
        self.store.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            crowded = self._crowded()
            started = time.monotonic()
            try:
                busy = self.run_once(crowded=crowded)
            except Exception:  # noqa: BLE001 - the watch never stops: log, retry next pass
                _log.exception("lineage watch: a pass failed; retrying")
                busy = 0
            if busy and crowded:
                spent = time.monotonic() - started  # the sends of the pass included
                self._stop.wait(min(_LONGEST_PAUSE_S, spent * (1 / _SHARE - 1)))
            elif not busy:
                self._wake.wait(self.interval_s)
                self._wake.clear()

    def _crowded(self) -> bool:
        """Whether ingest is busy (see the module)."""
        since = time.monotonic() - _BUSY_WINDOW_S
        with self._stored_lock:
            while self._stored and self._stored[0][0] < since:
                self._stored.popleft()
            return sum(n for _, n in self._stored) > _BUSY_EVENTS

    def run_once(self, *, crowded: bool = False, group_wait: bool = True) -> int:
        """One pass (see the module); how much it did (0: nothing was waiting). ``crowded``
        (ingest is busy): a short one that waits (briefly) for its sends; not ``group_wait``:
        the causes noticed in the last ``group_wait_s`` are resolved too."""
        wait_s = self.group_wait_s if group_wait else 0.0
        now = self.clock()
        sends = _CROWDED_SENDS if crowded else None
        done = self._settle_schemas(_CROWDED_SCHEMAS if crowded else _BATCH)
        done += self._sweep(now)
        done += self._resolve(_CROWDED_CAUSES if crowded else _CAUSES_A_PASS, sends, wait_s)
        done += self.deliverer.run_once(self.clock(), limit=sends)
        if crowded:
            self.deliverer.wait_idle(0.2)
        return done

    def drain(self, timeout: float = 10.0) -> bool:
        """Passes until one finds nothing to do (True), or ``timeout`` seconds (False): what a
        test or a shutdown waits on (a cause is resolved at once: no ``group_wait``)."""
        deadline = self.clock() + timedelta(seconds=timeout)
        while self.clock() < deadline:
            if not self.run_once(group_wait=False):
                return True
        return False

    # -- schema_breaking ------------------------------------------------------------------------

    def _settle_schemas(self, limit: int = _BATCH) -> int:
        """Compare each claimed schema candidate with its dataset's schema before it, oldest
        first, and settle them all in one transaction (one each took the store's write lock
        hundreds of times a second under ingest)."""
        seen = self.store.claim_schemas(self.owner, limit, _LEASE_S)
        if not seen:
            return 0
        stored = self.store.previous_schemas({item.dataset for item in seen})
        settled: list[tuple[SchemaSeen, list[Cause]]] = []
        for item in seen:  # oldest first: each compared with the one before it
            previous = stored.get(item.dataset) or self._first_known(item)
            causes: list[Cause] = []
            if previous is not None and previous.event_time < item.event_time:
                changes = breaking_changes(previous.fields, item.fields)
                if changes:
                    causes.append(_schema_breaking(item, previous, changes))
            settled.append((item, causes))
            kept = stored.get(item.dataset)  # what the store will keep once this is settled
            if kept is None or (kept.event_time, kept.event_id) < (item.event_time, item.event_id):
                stored[item.dataset] = item
        self.store.settle_schemas(settled)
        return len(seen)

    def _first_known(self, item: SchemaSeen) -> SchemaSeen | None:
        """The dataset's schema before ``item`` as the stored events state it, when the watch
        has seen none (alerts enabled on a store with history): read once per dataset."""
        namespace, name = item.dataset
        events = [
            *self.engine.events_of_dataset(namespace, name),
            *self.engine.static_events(datasets=[item.dataset]),
        ]
        latest: SchemaSeen | None = None
        for event in events:
            at = parse_event_time(event.get("eventTime"))
            if at >= item.event_time or (latest is not None and at <= latest.event_time):
                continue
            for dataset, fields in stated_schemas(event):
                if dataset == item.dataset:
                    latest = SchemaSeen(dataset, "", at, None, None, fields)
        return latest

    # -- run_stale ------------------------------------------------------------------------------

    def _sweep(self, now: datetime) -> int:
        stale = [
            beat
            for beat in self.store.live_runs()
            if now - beat.last_event > timedelta(seconds=beat.interval_s * self.grace)
        ]
        if stale:
            # A heartbeat redelivered after its run's end makes the run live again: ask the
            # store's run rows, and let ended runs go instead of calling them stale.
            rows = self.engine.backend.runs(run_ids=[b.run_id for b in stale])
            over = {r.run_id for r in rows if r.state.value in TERMINAL_STATES}
            causes = tuple(_run_stale(b, self.grace) for b in stale if b.run_id not in over)
            self.store.record(Noticed(causes=causes, ended=tuple(sorted(over))))
        return 0  # recorded causes are resolved by this pass; a live run is no work

    # -- resolution -----------------------------------------------------------------------------

    def _impacts(self, cause: Cause, depths: set[int]) -> dict[int, list[dict[str, Any]]]:
        """What lies downstream of the cause's node at each of ``depths``, from one walk at the
        largest (:func:`impacts`: each exactly as read at its depth); nothing when the store no
        longer knows the node (deleted since: the alerts still go, with no impact)."""
        try:
            return impacts(self.engine, cause.subject, depths)
        except LookupError:
            return {depth: [] for depth in depths}

    def _resolve(self, limit: int, sends: int | None, wait_s: float = 0.0) -> int:
        """Resolve up to ``limit`` causes, each one's alerts sent as soon as it is resolved (a
        cause does not wait for the impact of the ones claimed after it; ``sends``: at most
        that many started); between causes, a stop ends the pass (the rest go back when their
        lease ends)."""
        causes = self.store.claim_causes(self.owner, limit, _LEASE_S, wait_s=wait_s)
        for done, cause in enumerate(causes):
            if self._stop.is_set():
                return done
            matching = [rule for rule in self.rules if rule.matches(cause)]
            # One walk for the cause, whatever its rules' depths; one body for rules alike.
            found = self._impacts(cause, {rule.depth for rule in matching}) if matching else {}
            bodies = {
                depth: cloud_event(cause, items, source=self.source, rule_depth=depth)
                for depth, items in found.items()
            }
            at = self.clock()
            alerts = [
                Alert(f"{cause.id}/{r.key}", cause.id, r.key, bodies[r.depth], "pending", 0, at, at)
                for r in matching
            ]
            self.store.resolve(cause.id, alerts)
            if alerts:
                self.deliverer.run_once(self.clock(), limit=sends)
        return len(causes)


def _schema_breaking(
    item: SchemaSeen, previous: SchemaSeen, changes: list[dict[str, Any]]
) -> Cause:
    ns, name = item.dataset
    removed = [c["name"] for c in changes if c["change"] == "removed"]
    retyped = [c["name"] for c in changes if c["change"] == "type"]
    parts = [
        f"removed {', '.join(removed)}" if removed else "",
        f"retyped {', '.join(retyped)}" if retyped else "",
    ]
    data: dict[str, Any] = {
        "job": None if item.job is None else {"namespace": item.job[0], "name": item.job[1]},
        "runId": item.run_id,
        "dataset": {"namespace": ns, "name": name},
        "what": f"the schema of {ns}:{name} changed: {'; '.join(p for p in parts if p)}",
        "fields": changes,
        "previousVersionTime": format_time(previous.event_time),
    }
    return Cause(
        cause_id("schema_breaking", ns, name, item.event_id),
        "schema_breaking",
        node_id("DATASET", ns, name),
        ns,
        item.event_time,
        data,
    )


def _run_stale(beat: Beat, grace: float) -> Cause:
    ns, name = beat.job
    data: dict[str, Any] = {
        "job": {"namespace": ns, "name": name},
        "runId": beat.run_id,
        "dataset": None,
        "what": (
            f"run {beat.run_id} of job {ns}:{name} sent no event since "
            f"{format_time(beat.last_event)} ({grace:g} heartbeat intervals of "
            f"{beat.interval_s:g} s)"
        ),
        "lastEventTime": format_time(beat.last_event),
        "heartbeatIntervalS": beat.interval_s,
    }
    return Cause(
        cause_id("run_stale", beat.run_id, ns, name, format_time(beat.last_event)),
        "run_stale",
        node_id("JOB", ns, name),
        ns,
        beat.last_event,
        data,
    )
