"""How busy ingest is, as the watch's worker judges it (IngestLoad): the share of the time
batches were being stored, over the last two seconds or since writes began, busy until a
quarter second of it was seen. Pure logic on a fake clock: no timings."""

from __future__ import annotations

import pytest

from lineage_sdk.collector.watch.worker import IngestLoad


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def load(clock: Clock) -> IngestLoad:
    return IngestLoad(line=0.5, window_s=2.0, least_s=0.25, idle_s=0.5, clock=clock)


def batch(load: IngestLoad, clock: Clock, seconds: float, then_idle: float) -> None:
    """One batch stored in ``seconds``, then ``then_idle`` seconds with none."""
    load.begin()
    clock.now += seconds
    load.end()
    clock.now += then_idle


def test_no_batch_yet_is_quiet(load: IngestLoad, clock: Clock) -> None:
    assert load.share() == 0.0
    assert not load.busy()
    clock.now += 100
    assert not load.busy()


def test_writes_that_just_began_count_as_busy_until_a_quarter_second_was_seen(
    load: IngestLoad, clock: Clock
) -> None:
    """A saturated ingest's start is not taken for a quiet one: the share of its first
    milliseconds says nothing."""
    batch(load, clock, 0.001, 0.1)  # one small batch, a tenth of a second ago
    assert load.share() is None
    assert load.busy()
    clock.now += 0.15  # 0.251 s since writes began: now it tells
    assert load.share() == pytest.approx(0.001 / 0.251)
    assert not load.busy()


def test_a_batch_being_stored_counts_up_to_now(load: IngestLoad, clock: Clock) -> None:
    load.begin()
    clock.now += 0.3
    assert load.share() == pytest.approx(1.0)
    assert load.busy()
    clock.now += 0.3
    load.end()
    clock.now += 0.6  # 0.6 of 1.2 s: half, not more
    assert load.share() == pytest.approx(0.5)
    assert not load.busy()  # not more than the line


def test_a_steady_flow_far_below_saturation_is_not_busy(load: IngestLoad, clock: Clock) -> None:
    """Batches of 500 at 900 events/s, each stored in 0.1 s: busy a fifth of the time, however
    many events a second (the rate line called this busy)."""
    for _ in range(20):
        batch(load, clock, 0.1, 0.455)
        assert not load.busy()
    assert load.share() == pytest.approx(0.1 / 0.555, abs=0.05)


def test_a_saturated_flow_is_busy_and_a_dip_leaves_it_busy(load: IngestLoad, clock: Clock) -> None:
    for _ in range(20):
        batch(load, clock, 0.4, 0.05)
        assert load.busy()
    clock.now += 0.4  # a dip of 0.45 s (under idle_s: writes go on, judged over the window)
    assert load.busy()
    batch(load, clock, 0.4, 0.05)
    assert load.busy()


def test_ingest_is_quiet_again_within_the_window_after_saturation_ends(
    load: IngestLoad, clock: Clock
) -> None:
    for _ in range(20):
        batch(load, clock, 0.4, 0.05)
    clock.now += 1.0  # 1.05 s without a batch: 0.85 busy of the last 2 s, less than half
    assert not load.busy()
    clock.now += 5
    assert load.share() == 0.0


def test_writes_begin_anew_after_idle_s_without_one(load: IngestLoad, clock: Clock) -> None:
    """A burst after a pause is judged from its own start: busy at once, not diluted by the
    quiet seconds before it."""
    for _ in range(5):
        batch(load, clock, 0.01, 0.4)  # a trickle
    clock.now += 0.2  # 0.6 s without a batch: writes begin anew at the next one
    load.begin()
    clock.now += 0.1
    assert load.share() is None
    assert load.busy()
    load.end()
    clock.now += 0.01
    batch(load, clock, 0.3, 0.0)  # 0.4 of the 0.41 s since the burst began
    assert load.share() == pytest.approx(0.4 / 0.41)
    assert load.busy()


def test_overlapping_batches_count_once(load: IngestLoad, clock: Clock) -> None:
    """Two clients' batches stored at once: the time is busy once, not twice."""
    for _ in range(4):
        load.begin()
        clock.now += 0.1
        load.begin()
        clock.now += 0.1
        load.end()
        clock.now += 0.1
        load.end()
        clock.now += 0.7  # 0.3 busy of each second
    assert load.share() == pytest.approx(0.3, abs=0.01)
    assert not load.busy()


def test_only_the_window_counts(load: IngestLoad, clock: Clock) -> None:
    """Batches older than the window are forgotten: a busy minute long ago is not busy now,
    while a flow that goes on is judged over its last two seconds."""
    for _ in range(100):
        batch(load, clock, 0.45, 0.05)  # 0.9 of the time
    for _ in range(8):
        batch(load, clock, 0.05, 0.45)  # then 0.1 of it, for four seconds
    assert load.share() == pytest.approx(0.1, abs=0.01)
    assert not load.busy()


def test_the_default_line_between_half_load_and_saturation(clock: Clock) -> None:
    """At the defaults: batches stored 55% of the time (a steady 2,300 events/s where 4,100
    saturate) leave the worker its passes; 93% (saturated, as measured) do not."""
    load = IngestLoad(clock=clock)
    for n in range(20):
        batch(load, clock, 0.12, 0.097)
        assert load.busy() == (n == 0)  # the first 0.217 s: too little seen to tell
    clock.now += 1.0  # writes begin anew after a pause
    for _ in range(20):
        batch(load, clock, 0.2, 0.015)
        assert load.busy()
