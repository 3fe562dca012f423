"""The window and granularity a graph read is asked at (issue 33), checked alike by the HTTP routes
and the ``lineage`` CLI: no web framework here.

``since`` is inclusive and ``until`` exclusive (the backends' rule); each is RFC 3339 or a plain
date (its start, UTC), a blank one is absent. A read refuses, with a ValueError naming the
parameter: an unknown granularity, an unreadable time, a window whose start is not before its end
(an equal pair is an empty window), ``asOf`` with a window (``asOf`` is ``until`` with no
``since``), ``runId`` with a window or a granularity other than ``job``, a ``run:<runId>`` node at
another granularity than ``run``, and a job node at granularity ``run`` (a run view starts at a
dataset or a run).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from lineage_sdk.collector.api.history import parse_instant
from lineage_sdk.collector.engine.views import check_node
from lineage_sdk.collector.store import GRANULARITIES, Granularity

__all__ = ["View", "check_node", "read_view"]


@dataclass(frozen=True)
class View:
    """A graph read's window (either end may be absent) and granularity."""

    since: datetime | None
    until: datetime | None
    granularity: Granularity


def read_view(
    since: str | None,
    until: str | None,
    granularity: str | None,
    *,
    as_of: str | None = None,
    run_id: str | None = None,
    allowed: tuple[Granularity, ...] = GRANULARITIES,
    names: Mapping[str, str] | None = None,
) -> View:
    """The asked window and granularity (None: ``job``); ValueError naming the parameter for what
    a read refuses (see the module). ``names`` spells the parameters as the caller's user knows
    them (the CLI's ``--since``); by default the HTTP query parameters' names."""

    def named(param: str) -> str:
        return (names or {}).get(param, param)

    chosen = "job" if granularity is None else granularity
    if chosen not in allowed:
        raise ValueError(
            f"{named('granularity')} must be one of {', '.join(allowed)}, got {chosen!r}"
        )
    times: list[datetime | None] = []
    for value, param in ((since, "since"), (until, "until")):
        if value is None or not value.strip():
            times.append(None)
        else:
            times.append(parse_instant(value, named(param)))
    start, end = times
    if start is not None and end is not None and start >= end:
        raise ValueError(
            f"{named('since')} must be before {named('until')} (which is exclusive), "
            f"got {since!r} and {until!r}"
        )
    windowed = start is not None or end is not None
    if windowed and as_of is not None and as_of.strip():
        raise ValueError(
            f"{named('asOf')} cannot be combined with {named('since')} or {named('until')} "
            f"({named('asOf')} is {named('until')} with no {named('since')})"
        )
    if run_id is not None and (windowed or chosen != "job"):
        raise ValueError(
            f"{named('runId')} cannot be combined with {named('since')}, {named('until')} or "
            f"a {named('granularity')} other than job"
        )
    return View(start, end, chosen)
