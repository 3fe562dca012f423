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
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Final

__all__ = ["STATE_RANK", "TERMINAL_STATES", "StateKey", "pick_link", "run_state", "state_key"]

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


def pick_link(values: Iterable[str | None]) -> str | None:
    """The one parent (or root, or job) a run's events name: the least of those named, if any."""
    named = [v for v in values if v]
    return min(named) if named else None
