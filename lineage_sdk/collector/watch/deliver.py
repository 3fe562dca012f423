"""Delivery of alert rows to the rules' webhooks: at least once, signed at send time, retried
with exponential backoff, parked when the receiver refuses or the retry time ran out.

:meth:`Deliverer.run_once` (called by the watch's worker loop) leases the alerts that are due
from the :class:`~lineage_sdk.collector.watch.store.WatchStore` and hands them to a small
thread pool, returning at once: a slow or dead receiver holds one of its threads until its
timeout, never the loop, ingest, or another rule's alerts (each rule has at most
``per_rule`` alerts in flight; the others' alerts are claimed meanwhile). What happened is
written to the alert's row before its lease is released, so a collector killed mid-send leaves
the alert to be claimed again when its lease runs out, by itself after a restart or by another
collector of the fleet. The outcomes of attempts that end while one is being written are
written together, in one transaction (a group commit): a burst of alerts costs a few commits,
not one each, and the store's write lock, which ingest shares on SQLite, is taken less often.

Outcomes of one attempt:

* 2xx: sent.
* a timeout, a connection error, 5xx or 429: retried after ``backoff_s * 2**attempts`` (at most
  ``max_backoff_s``, with jitter; a ``Retry-After`` in seconds is honoured up to that bound),
  or parked once ``retry_for`` seconds have passed since the first attempt;
* any other status (a 4xx: the receiver refuses the alert itself; a redirect, which is not
  followed): parked at once, the reason in ``last_error``.

Parked alerts wait for ``lineage-collector alerts replay``.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import httpx

from lineage_sdk.collector.watch.envelope import signed_headers
from lineage_sdk.collector.watch.model import Alert
from lineage_sdk.collector.watch.store import Outcome, WatchStore
from lineage_sdk.config.redaction import redact

__all__ = ["Deliverer", "Target", "backoff"]

_log = logging.getLogger("lineage_sdk.collector.watch.deliver")
_USER_AGENT = "lineage-collector-watch"


class Target(Protocol):
    """What delivery needs of a rule (:class:`~lineage_sdk.collector.watch.rules.Rule`)."""

    @property
    def key(self) -> str: ...
    @property
    def url(self) -> Any: ...  # str or a pydantic URL
    @property
    def secret(self) -> Any: ...  # str or a pydantic SecretStr


def _secret_text(value: Any) -> str:
    get = getattr(value, "get_secret_value", None)
    return str(get() if callable(get) else value)


def _now() -> datetime:
    return datetime.now(UTC)


def backoff(
    attempts: int, *, base_s: float, max_s: float, rand: Callable[[], float] = random.random
) -> float:
    """The wait before the next attempt after ``attempts`` failed ones: ``base_s * 2**(n-1)``
    at most ``max_s``, then drawn from its upper half ("equal jitter": never 0, and collectors
    retrying the same receiver spread out)."""
    step = min(max_s, base_s * 2.0 ** max(0, min(attempts - 1, 62)))
    return step / 2 + step / 2 * rand()


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # absent, or an HTTP date: the backoff decides


class _Send(Exception):
    """One attempt's failure: ``transient`` ones are retried, others parked at once."""

    def __init__(self, message: str, *, transient: bool, wait_s: float | None = None) -> None:
        super().__init__(message)
        self.transient = transient
        self.wait_s = wait_s


class Deliverer:
    """Sends the alert rows of a :class:`WatchStore` to the rules' receivers (see the module).

    ``rules``: the configured rules (each with ``key``, ``url`` and ``secret``); an alert whose
    rule this collector does not know is left pending for one that does. ``retry_for``: seconds
    from the first attempt after which a failing alert is parked. ``timeout``: seconds each of
    connect, write and read may take. ``workers``: threads sending at once; ``per_rule``: at most
    this many of them for one rule. ``lease_s``: how long a claimed alert is this collector's
    (longer than an attempt takes, or another may send it meanwhile; by default four timeouts
    and ten seconds: what a collector killed mid-send delays its alerts by).
    """

    def __init__(
        self,
        store: WatchStore,
        rules: Iterable[Target],
        *,
        retry_for: float = 3600.0,
        timeout: float = 10.0,
        workers: int = 8,
        per_rule: int = 2,
        lease_s: float | None = None,
        backoff_s: float = 1.0,
        max_backoff_s: float = 300.0,
        owner: str | None = None,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.store = store
        self._targets: dict[str, tuple[str, str]] = {
            r.key: (str(r.url), _secret_text(r.secret)) for r in rules
        }
        self.retry_for = timedelta(seconds=retry_for)
        self.timeout = timeout
        self.workers = max(1, workers)
        self.per_rule = max(1, min(per_rule, self.workers))
        # An attempt starts at its claim (there was room) and each of its four phases (pool,
        # connect, write, read) takes at most ``timeout``; ten seconds more for marking the row.
        self.lease_s = lease_s if lease_s is not None else 4 * timeout + 10.0
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:deliver:{id(self):x}"
        self.clock = clock
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,
            headers={"User-Agent": _USER_AGENT},
            limits=httpx.Limits(max_connections=self.workers * 2),
            transport=transport,
        )
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="lineage-watch-deliver")
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._flying: dict[str, int] = {}  # rule key -> alerts in flight
        self._in_flight = 0
        self._outcomes: list[Outcome] = []  # attempts ended, not yet written
        self._unwritten = 0  # those, and the ones being written
        self._writing = False  # a pool thread is writing outcomes
        self._closed = False
        #: Set each time an attempt ends: a sender is free (the worker's loop waits on it).
        self.freed = threading.Event()

    # -- the worker loop's side ---------------------------------------------------------------

    def run_once(self, now: datetime | None = None, *, limit: int | None = None) -> int:
        """Claim the alerts due by ``now`` that there is room for (at most ``limit``) and start
        sending them (in the pool; this returns at once); how many were claimed."""
        now = now or self.clock()
        with self._lock:
            if self._closed:
                return 0
            room = self.workers - self._in_flight
            if limit is not None:
                room = min(room, limit)
            rules = [k for k in self._targets if self._flying.get(k, 0) < self.per_rule]
        if room <= 0 or not rules:
            return 0
        claimed = self.store.claim_alerts(self.owner, now, room, self.lease_s, rules=rules)
        started: list[Alert] = []
        back: list[str] = []
        with self._lock:
            for alert in claimed:
                # The claim holds at most ``room`` alerts, but maybe more of one rule than it
                # has room for: those go back to pending untouched, for a later pass.
                if self._closed or self._flying.get(alert.rule, 0) >= self.per_rule:
                    back.append(alert.id)
                    continue
                self._flying[alert.rule] = self._flying.get(alert.rule, 0) + 1
                self._in_flight += 1
                started.append(alert)
        if back:
            self.store.release(back, self.owner)
        for alert in started:
            self._pool.submit(self._attempt, alert)
        return len(started)

    @property
    def in_flight(self) -> int:
        """Alerts being sent, or sent and their outcome not yet written."""
        with self._lock:
            return self._in_flight + self._unwritten

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no alert is being sent and every outcome is written (True), or
        ``timeout`` seconds (False)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight + self._unwritten == 0, timeout)

    def close(self, wait: bool = True) -> None:
        """Stop taking alerts; ``wait``: let the attempts under way finish (each within its
        timeout), then close the connections. An alert claimed and not finished is sent again
        after its lease."""
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=wait, cancel_futures=True)
        if wait:
            self._client.close()

    # -- one attempt ------------------------------------------------------------------------------

    def _attempt(self, alert: Alert) -> None:
        outcome: Outcome | None = None
        try:
            outcome = self._deliver(alert)
        except Exception:  # noqa: BLE001 - the row stays claimed; its lease ends, it is retried
            _log.exception("lineage watch: delivering alert %s failed", alert.id)
        finally:
            with self._idle:
                self._in_flight -= 1
                left = self._flying.get(alert.rule, 1) - 1
                if left > 0:
                    self._flying[alert.rule] = left
                else:
                    self._flying.pop(alert.rule, None)
                if outcome is not None:
                    self._outcomes.append(outcome)
                    self._unwritten += 1
                self._idle.notify_all()
            self.freed.set()
        if outcome is not None:
            self._write_outcomes()

    def _write_outcomes(self) -> None:
        """Write the outcomes gathered so far, and those that arrive meanwhile, unless another
        thread is at it (it takes them: one transaction for all that ended while it wrote)."""
        with self._lock:
            if self._writing:
                return
            self._writing = True
        while True:
            with self._idle:
                batch, self._outcomes = self._outcomes, []
                if not batch:
                    self._writing = False
                    self._idle.notify_all()
                    return
            try:
                self.store.settle(batch)
            except Exception:  # noqa: BLE001 - the rows stay claimed; their leases end, resent
                _log.exception("lineage watch: writing %d alert outcome(s) failed", len(batch))
            finally:
                with self._idle:
                    self._unwritten -= len(batch)
                    self._idle.notify_all()

    def _deliver(self, alert: Alert) -> Outcome:
        url, secret = self._targets[alert.rule]
        try:
            self._post(alert, url, secret)
        except _Send as failed:
            now = self.clock()
            error = redact(str(failed), secret)
            if not failed.transient:
                _log.warning("lineage watch: alert %s parked: %s", alert.id, error)
                return Outcome(alert.id, "parked", now, None, error)
            if now - alert.first_at > self.retry_for:
                error = f"{error} (retried for {self.retry_for.total_seconds():g} s: parked)"
                _log.warning("lineage watch: alert %s parked: %s", alert.id, error)
                return Outcome(alert.id, "parked", now, None, error)
            wait = backoff(alert.attempts + 1, base_s=self.backoff_s, max_s=self.max_backoff_s)
            if failed.wait_s is not None:
                wait = max(wait, min(failed.wait_s, self.max_backoff_s))
            return Outcome(alert.id, "pending", now, now + timedelta(seconds=wait), error)
        return Outcome(alert.id, "sent", self.clock())

    def _post(self, alert: Alert, url: str, secret: str) -> None:
        # The webhook-id is the CloudEvent's id: the cause's, the same for every rule and replay.
        headers = signed_headers(alert.body, alert.cause_id, secret, self.clock())
        where = redact(url)
        try:
            response = self._client.post(url, content=alert.body, headers=headers)
        except httpx.TimeoutException as exc:
            raise _Send(
                f"{where}: no answer within {self.timeout:g} s ({type(exc).__name__})",
                transient=True,
            ) from None
        except httpx.HTTPError as exc:  # connection refused or reset, DNS, protocol errors
            raise _Send(f"{where}: {type(exc).__name__}: {exc}", transient=True) from None
        code = response.status_code
        if 200 <= code < 300:
            return
        reason = f"{where}: HTTP {code} {response.reason_phrase}".rstrip()
        if code >= 500 or code == 429:
            raise _Send(reason, transient=True, wait_s=_retry_after(response))
        if 300 <= code < 400:
            where_to = response.headers.get("location", "")
            raise _Send(
                f"{reason}: redirects are not followed; set the rule's url to where it points"
                f" ({redact(where_to)})",
                transient=False,
            )
        raise _Send(f"{reason}: the receiver refuses the alert (not retried)", transient=False)
