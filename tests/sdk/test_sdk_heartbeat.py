"""The heartbeat thread: beats on time off the caller's thread, survives a failing beat, stops
when nothing is registered, and a forked child forgets its parent's beats."""

from __future__ import annotations

import os
import threading
import time

import pytest

from lineage_sdk.sdk.heartbeat import HeartbeatScheduler
from lineage_sdk.sdk.suppression import is_instrumentation_suppressed


def wait_until(check: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_beats_off_the_callers_thread_and_survive_a_failing_beat() -> None:
    scheduler = HeartbeatScheduler()
    seen: list[tuple[str, bool]] = []

    def good(_now: int) -> None:
        seen.append((threading.current_thread().name, is_instrumentation_suppressed()))

    def bad(_now: int) -> None:
        raise RuntimeError("a broken beat")

    failing = scheduler.schedule(0.02, bad)
    beat = scheduler.schedule(0.02, good)
    wait_until(lambda: len(seen) >= 3)
    assert {name for name, _ in seen} == {"lineage-sdk-heartbeat"}
    assert all(suppressed for _, suppressed in seen)  # never recorded as the app's own work
    beat.cancel()
    failing.cancel()
    count = len(seen)
    wait_until(lambda: scheduler.active() == 0 and scheduler._thread is None)
    time.sleep(0.06)
    assert len(seen) <= count + 1  # at most the beat that was already running
    again = scheduler.schedule(0.02, good)  # a new thread when needed again
    wait_until(lambda: len(seen) >= count + 2)
    again.cancel()


def test_bad_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="> 0"):
        HeartbeatScheduler().schedule(0, lambda _now: None)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_forgets_the_parents_beats() -> None:
    scheduler = HeartbeatScheduler()
    beat = scheduler.schedule(3600, lambda _now: None)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no beat of the parent's, and its own still work
        try:
            fired = threading.Event()
            scheduler.schedule(0.01, lambda _now: fired.set())
            ok = scheduler.active() == 1 and fired.wait(5)
            os.write(write, b"ok" if ok else b"no")
        finally:
            os._exit(0)
    os.close(write)
    try:
        answer = os.read(read, 2)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert answer == b"ok"
    assert scheduler.active() == 1  # the parent's beat is untouched
    beat.cancel()
