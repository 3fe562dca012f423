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
database's write lock. Ingest is busy (:class:`IngestLoad`) when batches were being stored
(validated, written, noticed) more than three quarters of the last two seconds, or of the time
since writes began (after half a second without one) when that is shorter, and during the first
quarter second after writes begin. While it is busy, a pass settles ten schema candidates,
resolves one cause and sends at most two alerts (none claimed ahead), and the worker then
pauses so that it takes about 5% of the time (at least one pass every two seconds: alerts are
delayed, never dropped); the pause ends early once ingest is no longer busy, and a whole pass
that finds ingest busy between two causes gives the rest back and ends. Unyielding, the worker
cut a saturated ingest to 0.64x.

The signal is a share of the time, not a rate. The rate it replaces (more than 500 events
stored in the last half second) counted any steady flow above 1,000 events/s as busy however
far below what the collector sustains, and the worker then kept to 5% of the time while the
process had most of a core to spare: at a steady 2,336 events/s it used 0.71 of a core and
alerts were 335 s late (p95). A share of each second spent writing, tried before, let whole
passes through at a saturated ingest's start and in its dips (ingest 0.82x): hence the time
since writes began, the quarter second before it tells, the two seconds, and the pass that ends
when ingest turns busy. ``bench_api --watch`` (docs/watch.md, Cost, for the loads and the
rest): a saturated ingest read 0.76 to 1.00 (0.93 and up at load 2 or less), never quiet from
its first batch to its last, so its ratio is the rate line's (0.86x to 0.95x with 50 rules,
against 0.89x to 0.92x: the 5% and the write path's recording, not the line); steady flows of
events without causes read 0.26 (900 events/s) and 0.52 (2,300 events/s, about 55% of
saturation), and their alerts went out as on a quiet collector (p95 0.90 s, at a line of 0.5,
and 1.02 s; the rate line 37.6 s, 2,032 events/s reached); 900 events/s of new causes (430
alerts/s) 5.3 s (the rate line 33 to 45 s), now limited by the process's one core (about 370
alerts sent a second). At a line of 0.5, 2,300 events/s read busy (p95 30 s).
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

__all__ = ["IngestLoad", "Watcher"]

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
#: Ingest is busy (:class:`IngestLoad`) when batches were being stored more than ``_BUSY_SHARE``
#: of the last ``_LOAD_WINDOW_S`` seconds, or of the time since writes began (after
#: ``_LOAD_IDLE_S`` without one) once ``_LOAD_LEAST_S`` of it was seen (before: busy).
_BUSY_SHARE = 0.75
_LOAD_WINDOW_S = 2.0
_LOAD_LEAST_S = 0.25
_LOAD_IDLE_S = 0.5
#: The share of the time the worker takes while ingest is busy, its longest pause (cut short
#: when ingest is no longer busy: a check every ``_PAUSE_STEP_S``), and what one pass does then.
_SHARE = 0.05
_LONGEST_PAUSE_S = 2.0
_PAUSE_STEP_S = 0.1
_CROWDED_CAUSES = 1
_CROWDED_SENDS = 2
_CROWDED_SCHEMAS = 10


def _now() -> datetime:
    return datetime.now(UTC)


class IngestLoad:
    """How busy ingest is: the share of the recent time during which a batch was being stored
    (validated, written, noticed; overlapping batches count once). Ingest marks each batch
    (:meth:`begin`, :meth:`end`); the worker asks :meth:`busy`.

    A share, not a rate: a steady flow far below what the collector sustains leaves most of the
    time free, and is not busy however many events a second it brings. It is judged over the
    last ``window_s`` seconds, or over the time since writes began when that is shorter (they
    begin anew after ``idle_s`` without one); until ``least_s`` of that time was seen, ingest
    counts as busy: a saturated ingest's start is not taken for a quiet one (the share of a
    few milliseconds says nothing). ``clock``: monotonic seconds."""

    def __init__(
        self,
        *,
        line: float = _BUSY_SHARE,
        window_s: float = _LOAD_WINDOW_S,
        least_s: float = _LOAD_LEAST_S,
        idle_s: float = _LOAD_IDLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.line, self.window_s, self.least_s, self.idle_s = line, window_s, least_s, idle_s
        self.clock = clock
        self._lock = threading.Lock()
        self._active = 0  # batches being stored now
        self._since = 0.0  # when the batches being stored now began (with _active)
        self._began: float | None = None  # when writes began (None: none yet)
        #: The stretches of time batches were being stored, ended, oldest first; none overlap.
        self._spans: deque[tuple[float, float]] = deque()

    def begin(self) -> None:
        """A batch's store begins."""
        with self._lock:
            if self._active == 0:
                now = self.clock()
                last = self._spans[-1][1] if self._spans else None
                if last is None or now - last > self.idle_s:
                    self._began = now
                    self._spans.clear()
                self._since = now
            self._active += 1

    def end(self) -> None:
        """A batch's store ended (written or failed)."""
        with self._lock:
            self._active -= 1
            if self._active == 0:
                self._spans.append((self._since, self.clock()))

    def share(self) -> float | None:
        """The share of the time judged (see the class) batches were being stored; None while
        less than ``least_s`` of it was seen; 0.0 before any."""
        with self._lock:
            now = self.clock()
            if self._began is None:
                return 0.0
            start = max(now - self.window_s, self._began)
            if now - start < self.least_s:
                return None
            while self._spans and self._spans[0][1] <= start:
                self._spans.popleft()
            busy = sum(end - max(begin, start) for begin, end in self._spans)
            if self._active:
                busy += now - max(self._since, start)
            return busy / (now - start)

    def busy(self) -> bool:
        """Whether ingest is busy: stored batches more than ``line`` of the time judged, or too
        little time seen to tell."""
        share = self.share()
        return share is None or share > self.line


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
        load: IngestLoad | None = None,
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
        #: How busy ingest is: the write path marks each batch it stores.
        self.load = load or IngestLoad()

    # -- the ingest path ------------------------------------------------------------------------

    def notice(self, records: Sequence[LineageRecord]) -> None:
        """Record what a stored batch says, in one transaction (raises StoreError: the batch is
        then not acknowledged, and its redelivery records it again)."""
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
            crowded = self.load.busy()
            started = time.monotonic()
            try:
                busy = self.run_once(crowded=crowded)
            except Exception:  # noqa: BLE001 - the watch never stops: log, retry next pass
                _log.exception("lineage watch: a pass failed; retrying")
                busy = 0
            if busy and crowded:
                spent = time.monotonic() - started  # the sends of the pass included
                self._pause(min(_LONGEST_PAUSE_S, spent * (1 / _SHARE - 1)))
            elif not busy:
                self._wake.wait(self.interval_s)
                self._wake.clear()

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, less when ingest is no longer busy or on a stop."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self._stop.wait(min(left, _PAUSE_STEP_S)) or not self.load.busy():
                return

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
        lease ends); not ``sends`` (ingest was not busy), ingest turning busy ends it too, the
        rest given back."""
        causes = self.store.claim_causes(self.owner, limit, _LEASE_S, wait_s=wait_s)
        for done, cause in enumerate(causes):
            if self._stop.is_set():
                return done
            if done and sends is None and self.load.busy():
                self.store.release([c.id for c in causes[done:]], self.owner, kind="causes")
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
