"""FalkorDB's windowed event reads (``stores/falkordb.py``) as pure logic: the windows, the
probes and the capped counts answered from a sorted list, the probe answering *any* event of its
range (FalkorDB's has no order), here a seeded random one. Every range, order, position and page
must give the events a sort of the list gives; the FalkorDB suite checks the real server's
statements (tests/stores_nosql/test_graph_backend_answers.py)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import UTC, datetime
from itertools import islice
from typing import Any

import pytest

from lineage_sdk.collector.records import format_time, from_micros, micros
from lineage_sdk.collector.stores.falkordb import windowed_events

MATCH = "MATCH (e:Event)\nWHERE e.eventUs >= $low AND e.eventUs < $high\n"
COLUMNS = "RETURN e.eventId AS id, e.eventTime AS t\n"
T0 = datetime(2025, 1, 1, tzinfo=UTC)


class ListServer:
    """Answers the four statements ``windowed_events`` sends, from ``events`` (us, id)."""

    def __init__(self, events: list[tuple[int, str]], seed: int) -> None:
        self.events = sorted(events)
        self.rng = random.Random(seed)
        self.statements = 0

    def run(self, query: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        self.statements += 1
        if "e.eventUs = $at" in query:  # one instant, whole, by id
            return [self._row(e) for e in self.events if e[0] == params["at"]]
        inside = [e for e in self.events if params["low"] <= e[0] < params["high"]]
        if "count(e)" in query:
            return [{"n": min(len(inside), params["cap"])}]
        if "LIMIT 1\n" in query:  # the probe: any event of the range
            return [{"us": self.rng.choice(inside)[0]}] if inside else []
        assert "ORDER BY t" in query, query
        descending = "ORDER BY t DESC" in query
        ordered = sorted(inside, key=lambda e: (-e[0], e[1]) if descending else e)
        return [self._row(e) for e in ordered[: params["limit"]]]

    @staticmethod
    def _row(event: tuple[int, str]) -> dict[str, Any]:
        return {"id": event[1], "t": format_time(from_micros(event[0])), "us": event[0]}


def _corpus(seed: int) -> list[tuple[int, str]]:
    """Clusters, gaps of years, one instant of 300 events and sparse outliers."""
    rng = random.Random(seed)
    start = micros(T0)
    times = [start + 3_600_000_000] * 300
    times += [start + rng.randrange(0, 86_400_000_000) for _ in range(700)]
    times += [start + 7 * 86_400_000_000 + 5_000_000 * i for i in range(200)]
    times += [start - 40 * 365 * 86_400_000_000, start + 30 * 365 * 86_400_000_000]
    return [(t, f"{rng.getrandbits(64):016x}") for t in times]


def _expected(
    events: list[tuple[int, str]],
    low: int,
    high: int,
    after: tuple[int, str] | None,
    descending: bool,
) -> list[str]:
    ordered = sorted(events, key=lambda e: (-e[0], e[1]) if descending else e)
    rows = [e for e in ordered if low <= e[0] < high]
    if after is not None:  # time descending, ties by id ascending: the row follows the position
        rows = [
            e
            for e in rows
            if (e[0] < after[0] if descending else e[0] > after[0])
            or (e[0] == after[0] and e[1] > after[1])
        ]
    return [e[1] for e in rows]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_windows_give_every_event_in_order_whatever_the_probes_find(seed: int) -> None:
    events = _corpus(seed)
    server = ListServer(events, seed)
    start, lowest, highest = micros(T0), micros(datetime.min), micros(datetime.max)
    bounds = [
        (lowest, highest),
        (start, start + 86_400_000_000),
        (start + 3_600_000_000, start + 3_600_000_001),  # the instant alone
        (start + 3_600_000_001, highest),
        (start + 10 * 86_400_000_000, start + 20 * 86_400_000_000),  # nothing
    ]
    ordered = sorted(events)
    positions = [None, ordered[150], ordered[599], ordered[-1], ordered[0]]
    checked = 0
    for low, high in bounds:
        for position in positions:
            after = None if position is None else (from_micros(position[0]), position[1])
            for descending in (False, True):
                want = _expected(events, low, high, position, descending)
                for stop in (1, 64, 150, None):
                    got = windowed_events(
                        server.run,
                        MATCH,
                        COLUMNS,
                        {"low": low, "high": high},
                        after,
                        descending,
                        stop,
                    )
                    ids = [row["id"] for row in islice(got, stop)]
                    assert ids == want[:stop], (low, high, position, descending, stop)
                    checked += 1
    assert checked == len(bounds) * len(positions) * 2 * 4


def test_the_first_event_after_a_time_takes_a_few_statements() -> None:
    """``has_events_after``'s read (``limit=1`` from a time to no bound): probes and capped
    counts, not a read of the rest, whatever event the first probe finds."""
    events = _corpus(4)
    start = micros(T0)
    for seed in range(20):
        server = ListServer(events, seed)
        low = start + 1_800_000_000
        got = windowed_events(
            server.run, MATCH, COLUMNS, {"low": low, "high": micros(datetime.max)}, None, False, 1
        )
        assert [row["id"] for row in islice(got, 1)] == _expected(events, low, 2**62, None, False)[
            :1
        ]
        assert server.statements < 80, server.statements


@pytest.mark.parametrize("descending", [False, True])
def test_a_whole_read_ends_at_the_first_probe_that_finds_nothing(descending: bool) -> None:
    """Reading every event, gaps of decades included: an empty window is followed by a probe,
    which skips the gap or ends the read, not by windows doubling across it."""
    events = _corpus(5)
    server = ListServer(events, 5)
    low, high = micros(datetime.min), micros(datetime.max)
    got = windowed_events(
        server.run, MATCH, COLUMNS, {"low": low, "high": high}, None, descending, 64
    )  # pages of 64 (a page's size, not a limit: the generator goes on while it is read)
    assert [row["id"] for row in got] == _expected(events, low, high, None, descending)
    # Seeded, so the count is exact: 45 ascending and 51 descending; 60 and 65 when an empty
    # window is followed by a doubled one instead of a probe.
    assert server.statements <= 55, server.statements
