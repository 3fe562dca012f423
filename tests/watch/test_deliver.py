"""Delivery to real HTTP receivers on loopback: retries with backoff until a 2xx, parking (a
receiver down for the whole retry time; a 4xx at once) and `alerts replay`, a slow receiver
that holds no other receiver's alerts, a fleet of three delivering each alert exactly once,
and a process killed (SIGKILL) with alerts pending whose successor delivers them."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from serve_process import free_port
from servers import postgres_database
from standardwebhooks import Webhook
from webhook_receiver import Receiver, receiver

from lineage_sdk.collector.watch.deliver import Deliverer, backoff
from lineage_sdk.collector.watch.model import CAUSE_KINDS, Alert, Cause, Noticed, cause_id
from lineage_sdk.collector.watch.rules import Rule
from lineage_sdk.collector.watch.store import Outcome, WatchStore

HERE = Path(__file__).parent
SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
OTHER_SECRET = "whsec_" + base64.b64encode(b"fedcba9876543210fedcba9876543210").decode()


def rule(url: str, secret: str = SECRET) -> Rule:
    return Rule(url, secret, frozenset(CAUSE_KINDS), None, 10)


def add_alerts(store: WatchStore, rules: list[Rule], n: int, tag: str = "") -> list[Alert]:
    """``n`` causes, each resolved into one pending alert per rule (as the worker does)."""
    now = datetime.now(UTC)
    made: list[Alert] = []
    for i in range(n):
        cid = cause_id("run_failed", f"{tag}{i}")
        c = Cause(cid, "run_failed", f"job:shop:j{i}", "shop", now, {"what": f"{tag}{i}"})
        store.record(Noticed(causes=(c,)))
        alerts = [
            Alert(
                f"{cid}/{r.key}",
                cid,
                r.key,
                json.dumps({"id": cid, "type": "lineage.run_failed"}).encode(),
                "pending",
                0,
                now,
                now,
            )
            for r in rules
        ]
        store.resolve(cid, alerts)
        made += alerts
    return made


@contextlib.contextmanager
def delivering(store: WatchStore, rules: list[Rule], **options: Any) -> Iterator[Deliverer]:
    """A :class:`Deliverer` of ``rules``, closed at the end of the block."""
    deliverer = Deliverer(store, rules, **options)
    try:
        yield deliverer
    finally:
        deliverer.close()


def alert_is(store: WatchStore, alert_id: str, status: str) -> Callable[[], bool]:
    """Whether the alert is stored with ``status`` now (for :func:`pump`)."""

    def check() -> bool:
        found = store.alert(alert_id)
        return found is not None and found.status == status

    return check


def pump(deliverer: Deliverer, until: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Passes of the worker loop until ``until()`` (True) or ``timeout`` seconds (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        deliverer.run_once()
        if until():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def store(tmp_path: Path) -> Iterator[WatchStore]:
    with WatchStore(f"sqlite:///{tmp_path / 'watch.db'}") as s:
        yield s


def test_backoff_is_exponential_with_jitter_and_bounded() -> None:
    assert [backoff(n, base_s=1, max_s=100, rand=lambda: 1.0) for n in (1, 2, 3, 4)] == [
        1,
        2,
        4,
        8,
    ]
    assert [backoff(n, base_s=1, max_s=100, rand=lambda: 0.0) for n in (1, 2, 3)] == [0.5, 1, 2]
    assert backoff(40, base_s=1, max_s=100, rand=lambda: 1.0) == 100
    assert backoff(10_000, base_s=1, max_s=100, rand=lambda: 0.0) == 50


def test_500_three_times_then_200_is_delivered_once_after_the_retries(store: WatchStore) -> None:
    with receiver() as hook:
        hook.script = [500, 503, 500]
        r = rule(hook.url)
        [alert] = add_alerts(store, [r], 1)
        with delivering(store, [r], retry_for=60, backoff_s=0.05, max_backoff_s=0.4) as deliverer:
            assert pump(deliverer, alert_is(store, alert.id, "sent"))
            deliverer.wait_idle(10)
            time.sleep(0.3)  # nothing more arrives
            deliverer.run_once()
            deliverer.wait_idle(10)
        assert [x.status for x in hook.received] == [500, 503, 500, 200]
        assert len(hook.ok()) == 1
        # one id for every attempt (the cause's: the CloudEvent's), each signed at its send time
        assert {x.webhook_id for x in hook.received} == {alert.cause_id}
        for x in hook.received:
            assert Webhook(SECRET).verify(x.body, x.headers) is not None
            assert x.body == alert.body
            assert x.headers["content-type"] == "application/cloudevents+json"
        # exponential backoff: each wait at least half its step (equal jitter)
        gaps = [b.at - a.at for a, b in zip(hook.received, hook.received[1:], strict=False)]
        assert all(gap >= 0.05 * 2**i / 2 for i, gap in enumerate(gaps)), gaps
        sent = store.alert(alert.id)
        assert sent is not None
        assert (sent.status, sent.attempts, sent.last_error) == ("sent", 4, None)
        assert sent.sent_at is not None


def test_a_refusing_receiver_parks_the_alert_at_once(store: WatchStore) -> None:
    with receiver() as hook:
        hook.status = 410
        r = rule(hook.url)
        [alert] = add_alerts(store, [r], 1)
        with delivering(store, [r], retry_for=60, backoff_s=0.05) as deliverer:
            assert pump(deliverer, alert_is(store, alert.id, "parked"))
        assert len(hook.received) == 1
        parked = store.alert(alert.id)
        assert parked is not None
        assert "HTTP 410" in (parked.last_error or "")
        assert "refuses" in (parked.last_error or "")
        assert SECRET not in (parked.last_error or "")


def test_429_and_502_are_retried(store: WatchStore) -> None:
    with receiver() as hook:
        hook.script = [429, 502]
        r = rule(hook.url)
        [alert] = add_alerts(store, [r], 1)
        with delivering(store, [r], retry_for=60, backoff_s=0.05, max_backoff_s=0.2) as deliverer:
            assert pump(deliverer, alert_is(store, alert.id, "sent"))
        assert [x.status for x in hook.received] == [429, 502, 200]


def run_collector_cli(
    *args: str, store_url: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGE_")}
    env["LINEAGE_ALERTS_STORE"] = store_url
    env.pop("COLUMNS", None)
    return subprocess.run(
        [sys.executable, "-m", "lineage_sdk.collector.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def test_a_receiver_down_for_the_retry_time_is_parked_then_replay_delivers(
    store: WatchStore, tmp_path: Path
) -> None:
    port = free_port()
    r = rule(f"http://127.0.0.1:{port}/hook")
    [alert] = add_alerts(store, [r], 1)
    with delivering(store, [r], retry_for=2.0, backoff_s=0.05, max_backoff_s=0.2) as deliverer:
        assert pump(deliverer, alert_is(store, alert.id, "parked"))
        parked = store.alert(alert.id)
        assert parked is not None
        assert parked.attempts >= 2, parked  # retried, then parked
        assert "ConnectError" in (parked.last_error or "")
        assert "parked" in (parked.last_error or "")
        url = f"sqlite:///{tmp_path / 'watch.db'}"
        listed = run_collector_cli(
            "alerts", "list", "--status", "parked", "--format", "json", store_url=url
        )
        assert listed.returncode == 0, listed.stderr
        [row] = json.loads(listed.stdout)
        assert (row["id"], row["status"], row["attempts"]) == (alert.id, "parked", parked.attempts)
        table = run_collector_cli("alerts", "list", store_url=url)
        assert table.returncode == 0, table.stderr
        assert "parked" in table.stdout
        with receiver(port) as hook:
            deliverer.run_once()
            deliverer.wait_idle(10)
            assert hook.received == []  # parked: not sent until replayed
            refused = run_collector_cli("alerts", "replay", store_url=url)
            assert refused.returncode == 2 and "--all-parked" in refused.stderr
            replayed = run_collector_cli("alerts", "replay", "--all-parked", store_url=url)
            assert replayed.returncode == 0, replayed.stderr
            assert "replayed 1 alert(s)" in replayed.stdout
            assert pump(deliverer, alert_is(store, alert.id, "sent"))
            assert [x.webhook_id for x in hook.ok()] == [alert.cause_id]
            # by id, whatever the status: sent again, with the same id
            again = run_collector_cli("alerts", "replay", alert.id, "nope", store_url=url)
            assert again.returncode == 1 and "nope" in again.stderr
            assert "replayed 1 alert(s)" in again.stdout
            assert pump(deliverer, lambda: len(hook.ok()) == 2)
            assert {x.webhook_id for x in hook.ok()} == {alert.cause_id}


def test_a_slow_receiver_holds_no_other_receivers_alerts(store: WatchStore) -> None:
    with receiver() as slow, receiver() as fast:
        slow.hold = threading.Event()
        slow_rule, fast_rule = rule(slow.url), rule(fast.url, OTHER_SECRET)
        slow_alerts = add_alerts(store, [slow_rule], 5, "slow")
        deliverer = Deliverer(
            store,
            [slow_rule, fast_rule],
            retry_for=60,
            timeout=1.0,
            workers=3,
            per_rule=2,
            backoff_s=0.05,
            max_backoff_s=0.2,
        )
        try:
            # The slow receiver holds as many attempts as the rule may have under way...
            assert pump(deliverer, lambda: slow.holding == 2)
            fast_alerts = add_alerts(store, [fast_rule], 3, "fast")
            # ...and the other receiver gets its alerts meanwhile.
            assert pump(deliverer, lambda: len(fast.ok()) == 3)
            assert slow.holding >= 1 and slow.received == []
            assert {x.webhook_id for x in fast.ok()} == {a.cause_id for a in fast_alerts}
            for x in fast.ok():
                Webhook(OTHER_SECRET).verify(x.body, x.headers)
            # The slow attempts time out and are retried; once it answers, all are sent.
            assert pump(
                deliverer,
                lambda: any("no answer within 1 s" in (a.last_error or "") for a in store.alerts()),
            )
            slow.hold.set()
            assert pump(
                deliverer,
                lambda: {a.status for a in store.alerts(limit=20)} == {"sent"},
            )
            assert {x.webhook_id for x in slow.ok()} == {a.cause_id for a in slow_alerts}
        finally:
            slow.hold.set()
            deliverer.close()


def _send_one_at_a_time(store: WatchStore, hook: Receiver, count: int) -> list[Alert]:
    """``count`` alerts for ``hook``'s rule, sent by one sender, one after another; each row
    as it ended."""
    r = rule(hook.url)
    made = []
    with delivering(store, [r], retry_for=60, workers=1, per_rule=1, backoff_s=0.05) as deliverer:
        for i in range(count):
            [alert] = add_alerts(store, [r], 1, f"one-at-a-time{i}")
            assert pump(deliverer, alert_is(store, alert.id, "sent"))
            assert deliverer.wait_idle(10)
            made.append(store.alert(alert.id))
    return [a for a in made if a is not None]


def test_a_receiver_keeps_one_connection_for_its_alerts(store: WatchStore) -> None:
    """Keep-alive: five alerts to one receiver that keeps connections open go over one."""
    with receiver() as hook:
        hook.keep_alive = True
        sent = _send_one_at_a_time(store, hook, 5)
    assert [(a.status, a.attempts) for a in sent] == [("sent", 1)] * 5
    assert len(hook.ok()) == 5
    assert len({x.port for x in hook.received}) == 1
    for x in hook.received:
        Webhook(SECRET).verify(x.body, x.headers)


def test_a_kept_connection_the_receiver_closed_is_opened_again(store: WatchStore) -> None:
    """A receiver that closes each connection after its answer without saying so: the next
    alert finds its kept connection dead and goes over a new one, in the same attempt."""
    with receiver() as hook:
        hook.keep_alive = hook.drop_idle = True
        sent = _send_one_at_a_time(store, hook, 3)
    assert [(a.status, a.attempts, a.last_error) for a in sent] == [("sent", 1, None)] * 3
    assert len(hook.ok()) == 3
    assert len({x.port for x in hook.received}) == 3


def test_a_proxy_of_the_environment_is_used(
    store: WatchStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rule's URL that an HTTP_PROXY of the environment applies to is sent through the proxy
    (here a receiver: it gets the request for a host that does not resolve)."""
    with receiver() as proxy:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "https_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy.url.removesuffix("/hook"))
        monkeypatch.setenv("http_proxy", proxy.url.removesuffix("/hook"))
        r = rule("http://alerts.example.invalid/hook")
        [alert] = add_alerts(store, [r], 1)
        with delivering(store, [r], retry_for=60, backoff_s=0.05) as deliverer:
            assert pump(deliverer, alert_is(store, alert.id, "sent"))
    [got] = proxy.ok()
    assert got.headers["host"] == "alerts.example.invalid"
    Webhook(SECRET).verify(got.body, got.headers)


class SlowWritingStore(WatchStore):
    """A real store whose outcome writes take 0.2 s more (a busy disk), counting each write."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.writes: list[int] = []

    def settle(self, outcomes: Sequence[Outcome]) -> None:
        self.writes.append(len(outcomes))
        time.sleep(0.2)
        super().settle(outcomes)


def test_outcomes_that_end_during_a_write_are_written_together(tmp_path: Path) -> None:
    """A group commit: the sends that end while an outcome is being written are written in the
    next transaction together (one commit for many, not one each), and each is sent once."""
    with receiver() as a, receiver() as b, SlowWritingStore(f"sqlite:///{tmp_path / 'w.db'}") as s:
        rules = [rule(a.url), rule(b.url, OTHER_SECRET)]
        alerts = add_alerts(s, rules, 12)
        with delivering(s, rules, workers=4, per_rule=2) as deliverer:
            assert pump(deliverer, lambda: {x.status for x in s.alerts(limit=50)} == {"sent"})
            assert deliverer.wait_idle(10) and deliverer.in_flight == 0
        assert sum(s.writes) == len(alerts) == 24
        assert len(s.writes) <= 12 and max(s.writes) >= 3, s.writes
        assert sorted(x.webhook_id for x in a.ok() + b.ok()) == sorted(x.cause_id for x in alerts)


def start_delivery(
    url: str, hooks: list[tuple[str, str]], owner: str, lease_s: float, timeout_s: float
) -> subprocess.Popen[str]:
    rules = json.dumps([{"url": u, "secret": s} for u, s in hooks])
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "deliver_proc.py"),
            url,
            rules,
            owner,
            str(lease_s),
            str(timeout_s),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def stop(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def wait(predicate: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_three_processes_on_one_postgres_store_deliver_each_alert_exactly_once() -> None:
    with postgres_database("lineage_watch_fleet") as url, receiver() as a, receiver() as b:
        hooks = [(a.url, SECRET), (b.url, OTHER_SECRET)]
        rules = [rule(u, s) for u, s in hooks]
        store = WatchStore(url)
        store.open()
        try:
            procs = [start_delivery(url, hooks, f"collector-{i}", 30, 5) for i in range(3)]
            try:
                made = add_alerts(store, rules, 40)
                assert wait(lambda: store.counts()["sent"] == len(made)), store.counts()
                time.sleep(0.5)  # any duplicate would arrive meanwhile
            finally:
                stop(procs)
            assert all(p.returncode == 0 for p in procs)
            for hook, r in ((a, rules[0]), (b, rules[1])):
                got = Counter(x.webhook_id for x in hook.received)
                assert set(got) == {x.cause_id for x in made if x.rule == r.key}
                assert set(got.values()) == {1}, "an alert was sent twice"
            assert all(x.status == 200 for x in a.received + b.received)
        finally:
            store.close()


def test_a_process_killed_with_alerts_pending_delivers_them_after_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'watch.db'}"
    with receiver() as hook:
        hook.hold = threading.Event()  # the first attempts hang: alerts claimed when killed
        r = rule(hook.url)
        with WatchStore(url) as store:
            made = add_alerts(store, [r], 10)
            first = start_delivery(url, [(hook.url, SECRET)], "first", 2.0, 30)
            try:
                assert wait(lambda: hook.holding >= 2)
                os.kill(first.pid, signal.SIGKILL)
                first.wait(30)
            finally:
                if first.poll() is None:
                    first.kill()
                    first.wait()
            assert first.returncode == -signal.SIGKILL
            assert store.counts() == {"pending": 10, "sent": 0, "parked": 0}
            hook.hold.set()
            second = start_delivery(url, [(hook.url, SECRET)], "second", 2.0, 5)
            try:
                # the claims of the killed process run out, then its alerts are sent too
                assert wait(lambda: store.counts()["sent"] == 10), store.counts()
            finally:
                stop([second])
            assert {x.webhook_id for x in hook.ok()} == {a.cause_id for a in made}
