"""RateLimitedLog: one line per interval, and the count of what was held back (pure logic)."""

from __future__ import annotations

import logging

import pytest

from lineage_sdk._logging import RateLimitedLog


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


LOGGER = "tests.rate_limited_log"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def log(clock: FakeClock) -> RateLimitedLog:
    return RateLimitedLog(logging.getLogger(LOGGER), 10.0, clock=clock)


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_first_occurrence_is_logged_at_once_then_held_back_and_counted(
    log: RateLimitedLog, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, LOGGER):
        log.warning("queue full (%s)", "a")
        for _ in range(3):
            clock.now += 1
            log.warning("queue full (%s)", "b")
        assert _lines(caplog) == ["queue full (a)"]
        assert log.pending == 3
        clock.now += 10
        log.warning("queue full (%s)", "c")
    assert _lines(caplog) == ["queue full (a)", "queue full (c) (3 similar messages suppressed)"]
    assert log.pending == 0


def test_exc_info_reaches_the_record(log: RateLimitedLog, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, LOGGER):
        try:
            raise ValueError("boom")
        except ValueError:
            log.warning("failed", exc_info=True)
    (record,) = [r for r in caplog.records if r.name == LOGGER]
    assert record.exc_info is not None and record.exc_info[0] is ValueError


def test_a_tally_is_logged_with_its_total_once_per_interval(
    log: RateLimitedLog, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    msg = "dropped %d event(s) at %s"
    with caplog.at_level(logging.WARNING, LOGGER):
        log.add(2, msg, "x")  # first: logged at once
        clock.now += 1
        log.add(5, msg, "x")
        log.add(1, msg, "x")
        log.report(msg, "x")  # not due yet
        assert _lines(caplog) == ["dropped 2 event(s) at x"]
        assert log.pending == 6
        clock.now += 9.5
        log.report(msg, "y")  # due: the pending tally goes out without a new add
        log.report(msg, "y")  # nothing pending
    assert _lines(caplog) == ["dropped 2 event(s) at x", "dropped 6 event(s) at y"]
    assert log.pending == 0


def test_adding_nothing_logs_nothing(log: RateLimitedLog, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, LOGGER):
        log.add(0, "dropped %d")
        log.report("dropped %d")
    assert _lines(caplog) == []
