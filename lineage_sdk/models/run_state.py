"""Which run state an OpenLineage run is in, given its events: one rule for every store and API.

Events of a run arrive in any order, more than once, and through several collectors at once, so
everything derived from them is a pure function of the *set* of events, never of arrival order:

* **State**: the event with the greatest :func:`state_key` wins: rank first (a terminal state,
  COMPLETE/FAIL/ABORT, outranks RUNNING, which outranks START; OTHER events change nothing), then
  the later event time, then the state's name (two terminal events at the same instant: FAIL over
  COMPLETE over ABORT), then the event id. Only the last part needs the event id, and it never
  changes the state, so a store may keep (rank, time, state) alone.
* **Start and end**: ``started_at`` is the earliest START time, ``ended_at`` the latest terminal
  time (which is the winning event's time whenever the state is terminal).
* **Links** (parent run, root run, the run's job): a run names one of each; should its events
  disagree, the least value is kept (:func:`pick_link`), by every store alike.
* **Heartbeat**: a long run names its heartbeat interval in the ``lineagesdk_heartbeat`` run
  facet; the run's interval is the greatest any of its events names (:func:`heartbeat_interval`).
  Staleness is a *reading* (:func:`is_stale`), never stored: a START or RUNNING run whose winning
  event (its latest heartbeat) is older than ``STALE_AFTER_HEARTBEATS`` intervals reads STALE.
  A run without the facet is never stale.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY

__all__ = [
    "MARQUEZ_RUN_STATES",
    "STALE",
    "STALE_AFTER_HEARTBEATS",
    "STATE_RANK",
    "TERMINAL_STATES",
    "StateFold",
    "StateKey",
    "fold_states",
    "heartbeat_interval",
    "is_stale",
    "marquez_state",
    "pick_interval",
    "pick_link",
    "run_state",
    "state_key",
]

#: Run states after which nothing else is expected; they outrank START/RUNNING whatever the order.
TERMINAL_STATES: Final = frozenset({"COMPLETE", "FAIL", "ABORT"})

#: The rank of each state-changing event type; a higher rank wins, whatever the event times.
STATE_RANK: Final[dict[str, int]] = {"START": 1, "RUNNING": 2, **dict.fromkeys(TERMINAL_STATES, 3)}

#: (rank, event time, state, event id): the greatest key of a run's events names its state.
StateKey = tuple[int, datetime, str, str]


def run_state(event_type: str | None) -> str | None:
    """The state an event of ``event_type`` puts a run in, or None (OTHER, unknown, missing)."""
    if not event_type:
        return None
    state = event_type.upper()
    return state if state in STATE_RANK else None


def state_key(event_type: str | None, event_time: datetime, event_id: str) -> StateKey | None:
    """The key that orders a run's state-changing events (None for the others): the greatest
    wins. ``event_time`` must be timezone-aware, as every store's parsed times are."""
    state = run_state(event_type)
    if state is None:
        return None
    return (STATE_RANK[state], event_time, state, event_id)


@dataclass(frozen=True, slots=True)
class StateFold:
    """What a run's state-changing events state together: the winning key, the earliest START
    and the latest terminal time."""

    best: StateKey | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None

    @property
    def state(self) -> str | None:
        return None if self.best is None else self.best[2]

    @property
    def state_time(self) -> datetime | None:
        """The time of the event that decided the state."""
        return None if self.best is None else self.best[1]


def fold_states(events: Iterable[tuple[str | None, datetime, str]]) -> StateFold:
    """Fold ``(event type, event time, event id)`` of a run's events, in any order, by the rules
    above (events that change no state are passed over)."""
    best: StateKey | None = None
    started: datetime | None = None
    ended: datetime | None = None
    for event_type, event_time, event_id in events:
        key = state_key(event_type, event_time, event_id)
        if key is None:
            continue
        best = key if best is None or key > best else best
        if key[2] == "START" and (started is None or event_time < started):
            started = event_time
        if key[2] in TERMINAL_STATES and (ended is None or event_time > ended):
            ended = event_time
    return StateFold(best, started, ended)


def pick_link(values: Iterable[str | None]) -> str | None:
    """The one parent (or root, or job) a run's events name: the least of those named, if any."""
    named = [v for v in values if v]
    return min(named) if named else None


#: What a live-looking run reads as once its heartbeats stopped (never stored, never an event type).
STALE: Final = "STALE"
#: A run is stale after this many heartbeat intervals without a START/RUNNING event: one late or
#: lost heartbeat (a busy broker, a slow collector) must not flag a healthy consumer.
STALE_AFTER_HEARTBEATS: Final = 3


def heartbeat_interval(event: Mapping[str, Any]) -> float | None:
    """The heartbeat interval (seconds) ``event`` names in its ``lineagesdk_heartbeat`` run facet,
    or None: no facet, or a value that is not a positive finite number (then never stale)."""
    # Called for every run event on the write path: an absent part returns before the ABC
    # check (``isinstance(None, Mapping)`` is the slow one).
    run = event.get("run")
    facets = run.get("facets") if run is not None and isinstance(run, Mapping) else None
    if facets is None or not isinstance(facets, Mapping):
        return None
    facet = facets.get(HEARTBEAT_FACET_KEY)
    value = facet.get("intervalS") if facet is not None and isinstance(facet, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if value > 0 and math.isfinite(value) else None


def pick_interval(values: Iterable[float | None]) -> float | None:
    """A run's heartbeat interval: the greatest its events name (the most lenient), if any."""
    named = [v for v in values if v is not None]
    return max(named) if named else None


def is_stale(
    state: str | None, last_seen: datetime | None, interval_s: float | None, now: datetime
) -> bool:
    """Whether a run reads STALE at ``now``: it is START or RUNNING, names a heartbeat interval,
    and its winning START/RUNNING event (``last_seen``) is more than ``STALE_AFTER_HEARTBEATS``
    intervals old. Terminal runs, runs without the facet, and unknown times are never stale."""
    if state not in ("START", "RUNNING") or interval_s is None or last_seen is None:
        return False
    return (now - last_seen).total_seconds() > STALE_AFTER_HEARTBEATS * interval_s


#: OpenLineage eventType -> Marquez run state (Marquez's own mapping; START means running): the
#: API's runs and the watch's impact name states alike.
MARQUEZ_RUN_STATES: dict[str, str] = {
    "START": "RUNNING",
    "RUNNING": "RUNNING",
    "COMPLETE": "COMPLETED",
    "FAIL": "FAILED",
    "ABORT": "ABORTED",
}


def marquez_state(state: str | None) -> str:
    """``NEW`` when no state-changing event was seen (only OTHER events, or none)."""
    return MARQUEZ_RUN_STATES.get(state or "", "NEW")
