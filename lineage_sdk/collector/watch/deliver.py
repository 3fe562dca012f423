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

What one send costs is kept small, since a cause makes one alert per matching rule (50 rules:
50 sends): each receiver keeps its connections open between sends (HTTP/1.1 keep-alive, at most
``per_rule`` of them, the stdlib's ``http.client``: a 14 KB POST to the benchmarks' sink on
loopback cost 111 us of process CPU where the shared ``httpx.Client`` of before cost 386 us, min
of 3 x 2,000), each rule's signing key is decoded once (13 to 11 us a signature: the HMAC of the
body is the rest), alerts are claimed ahead (:meth:`Deliverer.run_once`), and a URL an
``HTTP(S)_PROXY`` of the environment applies to goes through ``httpx`` (which honours it) as
before. Each of connect, send and every read may take ``timeout`` (a hung
receiver holds one of its rule's senders that long, never another's), and a kept connection the
receiver closed meanwhile is opened again once before the attempt counts as failed.
"""

from __future__ import annotations

import base64
import http.client
import logging
import os
import random
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import httpx
from standardwebhooks import Webhook

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


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after", "")
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


#: A receiver's answer: status, reason phrase, and the headers read (lower-case names).
_Answer = tuple[int, str, dict[str, str]]
#: Errors of a kept connection the receiver closed while it was idle: it is opened again.
_GONE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


def _proxied(url: urllib.parse.SplitResult) -> bool:
    """Whether an ``HTTP(S)_PROXY`` (or ``ALL_PROXY``) of the environment applies to ``url``
    (``NO_PROXY`` not excluding its host), as ``httpx`` decides it."""
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get(url.scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(url.hostname or "")


class _Receiver:
    """One rule's receiver: its URL parsed, its signing key decoded and its idle keep-alive
    connections kept, once (the deliverer's ``per_rule`` bounds the sends at once, so the
    connections kept too)."""

    def __init__(self, url: str, secret: str, timeout: float) -> None:
        self.url, self.secret, self.timeout = url, secret, timeout
        self.signer = Webhook(secret)
        parts = urllib.parse.urlsplit(url)
        self.proxied = _proxied(parts)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.headers = {"Host": parts.netloc.rpartition("@")[2], "User-Agent": _USER_AGENT}
        if parts.username is not None or parts.password is not None:
            pair = f"{urllib.parse.unquote(parts.username or '')}:"
            pair += urllib.parse.unquote(parts.password or "")
            self.headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._tls: ssl.SSLContext | None = None

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """An idle kept connection (True), or a new one (False)."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        if self._https:
            if self._tls is None:  # the CA bundle httpx trusts (certifi, or SSL_CERT_FILE/DIR)
                self._tls = httpx.create_ssl_context()
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self._host, self._port, timeout=self.timeout, context=self._tls
            )
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
        return conn, False

    def post(self, body: bytes, headers: dict[str, str]) -> _Answer:
        """POST ``body``; the answer, or the error: named as ``httpx`` names it for a failed
        connect (``ConnectError``, ``ConnectTimeout``) and a timeout (``WriteTimeout``,
        ``ReadTimeout``), else OSError or HTTPException. A kept connection the receiver closed
        meanwhile is replaced once by a new one."""
        while True:
            conn, kept = self._connection()
            try:
                if not kept:
                    try:
                        conn.connect()  # DNS, TCP and TLS
                    except TimeoutError as exc:
                        raise httpx.ConnectTimeout(str(exc) or "timed out") from None
                    except OSError as exc:
                        raise httpx.ConnectError(str(exc)) from None
                try:
                    conn.request("POST", self._target, body=body, headers=self.headers | headers)
                except TimeoutError as exc:
                    raise httpx.WriteTimeout(str(exc) or "timed out") from None
                try:
                    response = conn.getresponse()
                    response.read()  # the whole answer, so that the connection can serve again
                except TimeoutError as exc:
                    raise httpx.ReadTimeout(str(exc) or "timed out") from None
            except _GONE:
                conn.close()
                if kept:
                    continue
                raise
            except BaseException:
                conn.close()
                raise
            answer = (
                response.status,
                response.reason or "",
                {k.lower(): v for k, v in response.getheaders()},
            )
            if response.will_close:
                conn.close()
            else:
                with self._lock:
                    self._idle.append(conn)
            return answer

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


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
        claim_ahead: int = 4,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.store = store
        self.claim_ahead = max(1, claim_ahead)
        self._targets: dict[str, _Receiver] = {
            r.key: _Receiver(str(r.url), _secret_text(r.secret), timeout) for r in rules
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
        #: For the receivers behind a proxy of the environment (see the module) only.
        self._client = (
            httpx.Client(
                timeout=httpx.Timeout(timeout),
                follow_redirects=False,
                headers={"User-Agent": _USER_AGENT},
                limits=httpx.Limits(max_connections=self.workers * 2),
            )
            if any(t.proxied for t in self._targets.values())
            else None
        )
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="lineage-watch-deliver")
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._flying: dict[str, int] = {}  # rule key -> alerts in flight
        self._in_flight = 0
        #: Claimed ahead, not started: (monotonic time of the claim, alert), claim order.
        self._ready: deque[tuple[float, Alert]] = deque()
        self._chain = True  # senders start the next alert claimed ahead (ingest not busy)
        self._outcomes: list[Outcome] = []  # attempts ended, not yet written
        self._unwritten = 0  # those, and the ones being written
        self._writing = False  # a pool thread is writing outcomes
        self._closed = False
        #: Set each time an attempt ends: a sender is free (the worker's loop waits on it).
        self.freed = threading.Event()

    # -- the worker loop's side ---------------------------------------------------------------

    def run_once(self, now: datetime | None = None, *, limit: int | None = None) -> int:
        """Start sending what there is room for (in the pool; this returns at once): the alerts
        claimed ahead first, then a claim of the alerts due by ``now``; how many were started.

        Without ``limit``, the claim takes up to ``claim_ahead`` times the senders' number, and
        each sender that ends starts the next one claimed (so a burst of alerts costs a claim
        for many, not a claim and a worker pass each); ``limit`` (ingest is busy): at most that
        many claimed and started, and none started by the senders themselves."""
        now = now or self.clock()
        with self._lock:
            if self._closed:
                return 0
            self._chain = limit is None
            start, back = self._take_ready(limit)
            left = None if limit is None else limit - len(start)
            want = (
                self.workers * self.claim_ahead - self._in_flight - len(self._ready)
                if left is None
                else min(left, self.workers - self._in_flight)
            )
            kept = self.per_rule * self.claim_ahead
            waiting: dict[str, int] = {}
            for _, alert in self._ready:
                waiting[alert.rule] = waiting.get(alert.rule, 0) + 1
            rules = [k for k in self._targets if self._flying.get(k, 0) + waiting.get(k, 0) < kept]
        claimed: list[Alert] = []
        if want > 0 and rules:
            claimed = self.store.claim_alerts(self.owner, now, want, self.lease_s, rules=rules)
        with self._lock:
            if self._closed:  # closed meanwhile: what was claimed goes back
                back += [a.id for a in claimed]
            else:
                at = time.monotonic()
                self._ready.extend((at, alert) for alert in claimed)
                more, late = self._take_ready(left)
                start += more
                back += late
        self._begin(start, back)
        return len(start)

    def _take_ready(self, limit: int | None) -> tuple[list[Alert], list[str]]:
        """With the lock held: the alerts claimed ahead that may start now (their rule and the
        pool have room; at most ``limit``), counted as in flight; and those whose lease is half
        gone, to give back unsent (a sender keeps its lease to itself)."""
        start: list[Alert] = []
        back: list[str] = []
        if not self._ready:
            return start, back
        stale = time.monotonic() - self.lease_s / 2
        keep: deque[tuple[float, Alert]] = deque()
        for claimed_at, alert in self._ready:
            if claimed_at < stale:
                back.append(alert.id)
            elif (
                self._in_flight < self.workers
                and self._flying.get(alert.rule, 0) < self.per_rule
                and (limit is None or len(start) < limit)
            ):
                self._flying[alert.rule] = self._flying.get(alert.rule, 0) + 1
                self._in_flight += 1
                start.append(alert)
            else:
                keep.append((claimed_at, alert))
        self._ready = keep
        return start, back

    def _begin(self, start: list[Alert], back: list[str]) -> None:
        """Give ``back`` to the store and submit ``start`` to the pool (the lock not held)."""
        if back:
            self.store.release(back, self.owner)
        for alert in start:
            self._pool.submit(self._attempt, alert)

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
            back = [a.id for _, a in self._ready]
            self._ready.clear()
        if back:  # claimed ahead and not started: claimable again at once, by any collector
            try:
                self.store.release(back, self.owner)
            except Exception:  # noqa: BLE001 - their leases end; they are sent then
                _log.exception("lineage watch: giving back %d claimed alert(s) failed", len(back))
        self._pool.shutdown(wait=wait, cancel_futures=True)
        if wait:
            for target in self._targets.values():
                target.close()
            if self._client is not None:
                self._client.close()

    # -- one attempt ------------------------------------------------------------------------------

    def _attempt(self, alert: Alert) -> None:
        outcome: Outcome | None = None
        try:
            outcome = self._deliver(alert)
        except Exception:  # noqa: BLE001 - the row stays claimed; its lease ends, it is retried
            _log.exception("lineage watch: delivering alert %s failed", alert.id)
        finally:
            start: list[Alert] = []
            back: list[str] = []
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
                if self._chain and not self._closed:
                    start, back = self._take_ready(None)
                self._idle.notify_all()
            if not start:  # nothing claimed ahead could start: the worker may claim more
                self.freed.set()
        try:
            self._begin(start, back)
        except Exception:  # noqa: BLE001 - the rows stay claimed; their leases end, resent
            # The store refused the give-back, or the pool was shut down meanwhile (a close).
            _log.exception(
                "lineage watch: giving back %d and starting %d claimed alert(s) failed",
                len(back),
                len(start),
            )
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
        target = self._targets[alert.rule]
        try:
            self._post(alert, target)
        except _Send as failed:
            now = self.clock()
            error = redact(str(failed), target.secret)
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

    def _post(self, alert: Alert, target: _Receiver) -> None:
        # The webhook-id is the CloudEvent's id: the cause's, the same for every rule and replay.
        headers = signed_headers(alert.body, alert.cause_id, target.signer, self.clock())
        where = redact(target.url)
        try:
            code, reason, answered = self._send(target, alert.body, headers)
        except httpx.TimeoutException as exc:
            raise _Send(
                f"{where}: no answer within {self.timeout:g} s ({type(exc).__name__})",
                transient=True,
            ) from None
        except (OSError, http.client.HTTPException, httpx.HTTPError) as exc:
            # connection refused or reset, DNS, TLS, protocol errors
            raise _Send(f"{where}: {type(exc).__name__}: {exc}", transient=True) from None
        if 200 <= code < 300:
            return
        reason = f"{where}: HTTP {code} {reason}".rstrip()
        if code >= 500 or code == 429:
            raise _Send(reason, transient=True, wait_s=_retry_after(answered))
        if 300 <= code < 400:
            where_to = answered.get("location", "")
            raise _Send(
                f"{reason}: redirects are not followed; set the rule's url to where it points"
                f" ({redact(where_to)})",
                transient=False,
            )
        raise _Send(f"{reason}: the receiver refuses the alert (not retried)", transient=False)

    def _send(self, target: _Receiver, body: bytes, headers: dict[str, str]) -> _Answer:
        """One POST: on the receiver's kept connections, or through ``httpx`` when a proxy of
        the environment applies to it."""
        if self._client is None or not target.proxied:
            return target.post(body, headers)
        response = self._client.post(target.url, content=body, headers=headers)
        return response.status_code, response.reason_phrase, dict(response.headers)
