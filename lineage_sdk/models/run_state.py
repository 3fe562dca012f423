"""Which run state an OpenLineage run is in, given its events: one table for every store and API.

Events of a run may arrive in any order. A terminal state (COMPLETE, FAIL, ABORT) outranks
RUNNING, which outranks START; OTHER events do not change the state.
"""

from __future__ import annotations

from typing import Final

__all__ = ["STATE_RANK", "TERMINAL_STATES"]

#: Run states after which nothing else is expected; they outrank START/RUNNING whatever the order.
TERMINAL_STATES: Final = frozenset({"COMPLETE", "FAIL", "ABORT"})

#: The rank of each state-changing event type; a higher rank wins, whatever the event times.
STATE_RANK: Final[dict[str, int]] = {"START": 1, "RUNNING": 2, **dict.fromkeys(TERMINAL_STATES, 3)}
