"""Start-up of ``lineage-collector run`` and ``serve``: fail at once on what retrying cannot fix,
and tune the process once it is up (:func:`tune_gc`).

Before consuming (``run``) or listening (``serve``) the collector opens its stores and
(``run``) connects to the broker and declares its queues, once. What it meets decides:

- **permanent** (a refused password or login, a virtual host or database that does not exist,
  no permission on the vhost, a queue of the other type): no retry cures it, so the command
  exits 2 at once with one line naming the cause and the key to check, even with
  ``--wait-for-services``;
- **transient** (a refused connection, a timeout, a host name that does not resolve yet): with
  ``collector.wait_for_services`` (``--wait-for-services SECONDS``) the attempt is repeated with
  backoff until that many seconds have passed, then the command exits 1 with one line; without
  it (0, the default), it exits 1 at once.

Once running, a lost broker or a failing store write is retried as always.
"""

from __future__ import annotations

import gc
import logging
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError, LineageError

if TYPE_CHECKING:
    from lineage_sdk.collector.manager import LineageManager

__all__ = [
    "GC_THRESHOLDS",
    "StartupError",
    "connect_broker",
    "open_stores",
    "store_refusal",
    "tune_gc",
    "wait_for",
]

_log = logging.getLogger("lineage_sdk.collector")


#: CPython's cyclic collector thresholds for the collector's processes (the default is (700, 10,
#: 10)). Both allocate far more objects than survive, and reference counting frees nearly all:
#:
#: - ``serve``: a 1,000-node lineage answer allocates some hundred thousand objects; at the
#:   default the collector ran over and over while one was built, and its older generations'
#:   passes made the tail. Million-event SQLite store, ``serve`` in its own process, 200 depth-10
#:   queries, same run: p95 130 ms at the default, 62-64 ms with these.
#: - ``run``: a batch's derived rows live until the batch is written, long enough to be promoted
#:   and to trigger full passes over everything the process holds. 20,000 events of the
#:   ``bench_million`` shape written in batches of 200 into SQLite: 2.5-4.0 s of 9-12 s in the
#:   collector at the default, none with these (the store before the engine: 0.1-0.5 of 6.0-6.5 s).
GC_THRESHOLDS = (100_000, 50, 100)


def tune_gc() -> None:
    """Collect cycles less often (:data:`GC_THRESHOLDS`), and leave what start-up allocated
    (modules, the app, the stores) out of every later pass (``gc.freeze``)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


_FIRST_DELAY_S = 0.2
_MAX_DELAY_S = 5.0
# What a store's server answers when retrying cannot help: a database or role that does not
# exist, a refused password or login (PostgreSQL, MongoDB, Neo4j and their drivers' wording).
_STORE_REFUSALS = re.compile(
    r'database "[^"]*" does not exist|role "[^"]*" does not exist|authentication failed'
    r"|no pg_hba\.conf entry|unauthorized|DatabaseNotFound|Authentication failed",
    re.IGNORECASE,
)


class StartupError(LineageError):
    """``run`` or ``serve`` cannot start; ``exit_code`` 2 for a refusal, 1 for an absence."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        self.permanent = permanent
        self.exit_code = 2 if permanent else 1
        super().__init__(message)


def store_refusal(exc: BaseException) -> bool:
    """Whether a store's failure to open is a refusal (see :data:`_STORE_REFUSALS`): looks at the
    error and every error it was raised from or during."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if getattr(current, "permanent", False) or _STORE_REFUSALS.search(str(current)):
            return True
        current = current.__cause__ or current.__context__
    return False


def wait_for(
    what: str,
    attempt: Callable[[], None],
    classify: Callable[[BaseException], tuple[str, bool]],
    wait_s: float,
    *,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Run ``attempt`` until it succeeds; ``classify(exc)`` gives ``(sentence, permanent)``.

    A permanent failure raises :class:`StartupError` at once; a transient one is retried with
    backoff until ``deadline`` (default: ``wait_s`` seconds from now; several services share
    one), with one log line when the waiting starts, then raises. :class:`ConfigError` passes
    through untouched.
    """
    if deadline is None:
        deadline = clock() + wait_s
    delay = _FIRST_DELAY_S
    attempts = 0
    while True:
        attempts += 1
        try:
            attempt()
            return
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified: the sentence says what it was
            sentence, permanent = classify(exc)
        if permanent:
            raise StartupError(f"cannot start: {what}: {sentence}", permanent=True)
        left = deadline - clock()
        if left <= 0:
            waited = (
                f"; gave up after waiting {wait_s:g}s ({attempts} attempts)"
                if wait_s > 0
                else "; to wait for it at start-up, pass --wait-for-services SECONDS"
            )
            raise StartupError(f"cannot start: {what}: {sentence}{waited}", permanent=False)
        if attempts == 1:
            _log.warning("waiting for %s (--wait-for-services %g): %s", what, wait_s, sentence)
        sleep(min(delay, left))
        delay = min(delay * 2, _MAX_DELAY_S)


def open_stores(manager: LineageManager, wait_s: float, deadline: float | None = None) -> None:
    """Open the manager's stores (creating their tables, as always), waiting for them up to
    ``wait_s`` seconds (or until ``deadline``); a refused login or a missing database fails at
    once."""
    manager.build()  # configuration errors first, without waiting

    def classify(exc: BaseException) -> tuple[str, bool]:
        return str(exc), store_refusal(exc)

    wait_for("the stores", manager.connect_sync, classify, wait_s, deadline=deadline)


def connect_broker(config: LineageConfig, wait_s: float, deadline: float | None = None) -> None:
    """Connect to the broker (any address of a cluster) and declare the topology, as ``run``
    will; a refused password, a missing vhost, no permission or a queue of the other type
    fails at once, an unreachable broker is waited for up to ``wait_s`` seconds (or until
    ``deadline``)."""
    from lineage_sdk.collector.consumer import broker_addresses
    from lineage_sdk.collector.topology import Topology, TopologyMismatch, broker_connection
    from lineage_sdk.transport.amqp import describe_failure, unresolved_host

    topology = Topology.from_config(config)
    addresses = broker_addresses(config)
    last: list[tuple[Any, str]] = [addresses[0]]  # the address of the last failure

    def permanent(exc: BaseException, params: Any) -> bool:
        return isinstance(exc, TopologyMismatch) or (
            describe_failure(exc, params)[1] and not unresolved_host(exc)
        )

    def attempt() -> None:
        """Every address in turn (a cluster starts if one node answers); a refusal at once."""
        failure: BaseException | None = None
        for params, shown in addresses:
            try:
                with broker_connection(params) as connection:
                    topology.declare(connection.channel())
                return
            except Exception as exc:
                last[0], failure = (params, shown), exc
                if permanent(exc, params):
                    raise
        assert failure is not None
        raise failure

    def classify(exc: BaseException) -> tuple[str, bool]:
        params, shown = last[0]
        if isinstance(exc, TopologyMismatch):
            return str(exc), True
        return f"{shown}: {describe_failure(exc, params)[0]}", permanent(exc, params)

    wait_for("the broker", attempt, classify, wait_s, deadline=deadline)
