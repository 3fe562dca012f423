"""The ``rabbitmq`` exporter: lossless, non-blocking publishing of lineage events with pika.

Threads: ``export()`` runs on the pipeline's worker thread and only turns events into messages
and hands them to the exporter's buffer (memory, or the spool during an outage), so it returns in
microseconds even when the broker is away. The exporter's own I/O thread runs a pika
``SelectConnection`` on one IOLoop for its whole life: it keeps up to ``max_in_flight`` publishes
unconfirmed at once (pika's BlockingConnection waits for each confirm in turn), services
heartbeats while idle, reconnects with exponential backoff and jitter, and replays the spool.

Outages: once the broker cannot confirm (a connection attempt failed, the connection was lost
or blocked, or no connection has been ready for ``spool_fsync_interval_ms``, 1 s for the first)
the exporter is *offline*: what memory holds goes to the front of the spool at once, and new
events go straight to the spool, fsynced within ``spool_fsync_interval_ms``. So a crash during an
outage loses at most what the pipeline had not handed over yet plus that interval
(docs/rabbitmq-exporter.md, "What a crash can lose"). ``outage_buffer = "memory"`` keeps the
older behaviour: memory first, the spool once memory is full.

Order: memory holds what is older than the spool, so while the spool has unread segments new
messages are appended to the spool too; the publisher drains memory, then the spool in order.
(Only when the spool is full or unusable during an outage does memory take newer events.)
"""

from __future__ import annotations

import enum
import functools
import logging
import os
import random
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, ParamSpec, TypeVar

import pika
import pika.adapters.select_connection
import pika.adapters.utils.connection_workflow
import pika.adapters.utils.io_services_utils
import pika.spec

from lineage_exporters.rabbitmq._destination import Destination, Endpoint
from lineage_exporters.rabbitmq._messages import (
    HEADER_EVENT_COUNT,
    OutboundMessage,
    build_messages,
    sanitize_word,
)
from lineage_exporters.rabbitmq._spool import (
    Spool,
    default_spool_root,
    unlabelled_instances,
    warn_unlabelled,
)
from lineage_exporters.rabbitmq.config import RabbitMQConfig
from lineage_sdk._logging import RateLimitedLog
from lineage_sdk.config.redaction import redact
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.config.sections import Section
from lineage_sdk.models.constants import DEFAULT_EXCHANGE
from lineage_sdk.sdk.export import EncodedEvent, ExportResult, LineageExporter
from lineage_sdk.sdk.suppression import suppress_for_current_thread
from lineage_sdk.transport.amqp import (
    connection_parameter_list,
    describe_failure,
    url_password,
)
from lineage_sdk.transport.unrouted import (
    event_exchange_arguments,
    holding_queue,
    holding_queue_arguments,
    unrouted_exchange,
    warn_missing_alternate_exchange,
)

__all__ = ["RabbitMQExporter", "RabbitMQExporterStats", "destination_for"]

_LOG = logging.getLogger("lineage_exporters.rabbitmq")
_P = ParamSpec("_P")
_R = TypeVar("_R")
_TICK_S = 0.25
_PRECONDITION_FAILED = 406
_NOT_FOUND = 404
_FIRST_CONNECT_S = 1.0
# After a nack, publishing pauses this long before the nacked messages go out again (no hot loop).
_NACK_PAUSE_S = 0.1
# Only nacks, no ack, for this long: the channel is taken to be stuck and the connection is
# dropped and opened again (on the next address). RabbitMQ 3.10 nacks every publish of a channel
# whose first publish to a quorum queue fell into its leader election; a new channel is fine.
_NACK_RESET_S = 1.0


@dataclass(frozen=True, slots=True)
class RabbitMQExporterStats:
    """A snapshot of the exporter's counters (events, not messages, unless said otherwise).

    ``exported``: confirmed by the broker and routed to at least one queue.
    ``retried``: published again after a nack, a lost connection or a publish timeout.
    ``spooled``: written to the spool directory. ``replayed``: read back from it to publish.
    ``dropped``: lost because memory and spool were both full (or the spool unusable).
    ``unroutable``: returned by the broker (mandatory flag): no queue matched the routing key.
    ``buffered``: in memory now, waiting or in flight. ``in_flight``: messages awaiting confirm.
    ``spool_bytes``: size of the spool now. ``connected``: a confirm channel is open.
    ``connection_failures``: failed connection attempts and lost connections so far.
    """

    exported: int
    retried: int
    spooled: int
    replayed: int
    dropped: int
    unroutable: int
    buffered: int
    in_flight: int
    spool_bytes: int
    connected: bool
    connection_failures: int


class _State(enum.Enum):
    CONNECTING = "connecting"
    READY = "ready"
    WAITING = "waiting"  # disconnected, a reconnect is scheduled; nothing is in flight
    STOPPED = "stopped"


# pika logs every failed attempt (several lines, some with tracebacks). On the exporter's own
# threads those records go to our logger at DEBUG instead, and we log one clear line ourselves.
_QUIET_THREADS: dict[int, str | None] = {}  # thread ident -> password to scrub
_FILTER_LOCK = threading.Lock()
_FILTER_INSTALLED = False


class _QuietOnExporterThreads(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread not in _QUIET_THREADS:
            return True
        if _LOG.isEnabledFor(logging.DEBUG):
            password = _QUIET_THREADS.get(record.thread or 0)
            _LOG.debug("pika %s: %s", record.name, redact(record.getMessage(), password))
        return False


def _install_pika_filter() -> None:
    global _FILTER_INSTALLED
    with _FILTER_LOCK:
        if _FILTER_INSTALLED:
            return
        quiet = _QuietOnExporterThreads()
        names = [
            n for n in logging.Logger.manager.loggerDict if n == "pika" or n.startswith("pika.")
        ]
        for name in names:
            logging.getLogger(name).addFilter(quiet)
        _FILTER_INSTALLED = True


def _guarded(method: Callable[_P, _R]) -> Callable[_P, _R | None]:
    """IOLoop callbacks must never raise: a raise would stop the loop and strand the buffer."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R | None:
        try:
            return method(*args, **kwargs)
        except Exception:  # noqa: BLE001 - telemetry never raises into the loop
            _LOG.exception("lineage RabbitMQ exporter: internal error in %s", method.__name__)
            return None

    return wrapper


_DROPPED = (
    "lineage RabbitMQ exporter dropped %d event(s): the memory buffer and the spool "
    "(%s) are both full while the broker is unavailable"
)
_UNROUTABLE = (
    "lineage RabbitMQ exporter: %d event(s) were unroutable (returned by the broker): no "
    "queue bound to exchange %r matches their routing keys"
)


_COALESCE_BYTES = 256 << 10


def _coalesce_writes(connection: Any) -> None:
    """Send the frames of many publishes with one ``send`` instead of one per message.

    pika's transport keeps one buffer per published message and sends them one syscall each;
    with many publishes in flight that syscall is most of the cost of a publish. Joining the
    waiting buffers (up to 256 KiB) before pika sends them keeps pika's own partial-send and
    error handling. It touches pika internals, so it is skipped if they are not as expected.
    """
    transport = getattr(connection, "_transport", None)
    buffers = getattr(transport, "_tx_buffers", None)
    produce = getattr(transport, "_produce", None)
    if not isinstance(buffers, deque) or not callable(produce):
        return

    def coalescing_produce() -> None:
        if len(buffers) > 1:
            chunk: list[bytes] = []
            size = 0
            while buffers and size < _COALESCE_BYTES:
                data = buffers.popleft()
                chunk.append(data)
                size += len(data)
            buffers.appendleft(b"".join(chunk))
        produce()

    transport._produce = coalescing_produce  # type: ignore[union-attr]


def _legacy_spool_dir(exchange: str) -> Path:
    """The default folder of older versions, named after the exchange alone."""
    return default_spool_root(sanitize_word(exchange).replace("/", "%2F"))


def _destination_of(params: Sequence[Any], exchange: str) -> Destination:
    """The destination of pika connection parameters: what each connection really uses."""
    return Destination.of(
        exchange,
        [
            Endpoint(
                tls=p.ssl_options is not None,
                host=str(p.host),
                port=int(p.port),
                vhost=str(p.virtual_host),
                user=str(p.credentials.username),
            )
            for p in params
        ],
    )


def destination_for(settings: RabbitMQConfig, exchange: str) -> Destination:
    """The destination an exporter built from ``settings`` publishes to (its spool's label);
    raises :class:`ConfigError` for what the exporter's construction would refuse."""
    addresses = connection_parameter_list(settings, name="-", product="lineage-sdk")
    return _destination_of([params for params, _ in addresses], exchange)


def _process_name() -> str:
    return Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"


class RabbitMQExporter(LineageExporter):
    """Publishes encoded events to a durable topic exchange, losing none while the broker is away.

    Build it with :meth:`from_config`, or directly from a :class:`RabbitMQConfig`. Construction
    raises :class:`ConfigError` only for a malformed URL or unreadable TLS files; every other
    problem (broker down, wrong credentials, vhost, port) is logged once and events wait in the
    buffer and spool until it is fixed. Counters: :meth:`stats`. The spool is labelled with
    :attr:`destination` (broker addresses, vhost, user, exchange; never the password) and only
    spools written for that same destination are replayed (_destination.py says why).
    """

    config_class: ClassVar[type[Section]] = RabbitMQConfig

    def __init__(
        self,
        settings: RabbitMQConfig | None = None,
        *,
        exchange: str = DEFAULT_EXCHANGE,
        job_namespace: str = "default",
        report_interval_s: float = 60.0,
    ) -> None:
        self.settings = settings = settings or RabbitMQConfig()
        self.exchange = exchange
        self.connection_name = settings.connection_name or f"{job_namespace}/{_process_name()}"
        self._addresses = self._build_addresses(settings)
        self._address = 0  # each reconnect after a failure or a loss tries the next, round robin
        self._use_address(0)
        self._publish_timeout_s = settings.publish_timeout_ms / 1000
        self._reconnect_initial_s = settings.reconnect_initial_ms / 1000
        self._reconnect_max_s = max(settings.reconnect_max_ms, settings.reconnect_initial_ms) / 1000
        self._spool_on_outage = settings.outage_buffer == "spool"
        self._fsync_interval_s = settings.spool_fsync_interval_ms / 1000
        self._tick_s = min(_TICK_S, self._fsync_interval_s / 2)
        self.destination = _destination_of([a[0] for a in self._addresses], exchange)
        self.spool_dir = (
            Path(settings.spool_dir)
            if settings.spool_dir
            else default_spool_root(self.destination.folder_name())
        )
        self._report_interval_s = report_interval_s

        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._export_lock = threading.Lock()
        self._queue: deque[OutboundMessage] = deque()
        self._mem_events = 0
        self._refilling = False
        self._flush_waiters = 0
        self._state = _State.CONNECTING
        self._offline = False  # the broker cannot confirm now: new events go to the spool
        self._not_ready_since = time.monotonic()
        self._shut = False
        self._counts = {
            "exported": 0,
            "retried": 0,
            "spooled": 0,
            "replayed": 0,
            "dropped": 0,
            "unroutable": 0,
            "connection_failures": 0,
        }
        self._drops = RateLimitedLog(_LOG, report_interval_s)
        self._unroutable = RateLimitedLog(_LOG, report_interval_s)
        self._start()

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_config(cls, config: LineageConfig) -> RabbitMQExporter:
        """The exporter for ``[lineage.rabbitmq]``, publishing to ``config.collector_topic``."""
        return cls(
            config.section("rabbitmq", RabbitMQConfig),
            exchange=config.collector_topic,
            job_namespace=config.producer.job_namespace,
        )

    def _build_addresses(self, s: RabbitMQConfig) -> list[tuple[Any, str, str | None]]:
        """(pika parameters, URL for a log line, password) of every broker address."""
        # A blocked connection (a broker resource alarm) confirms nothing: with the spool as the
        # outage buffer, drop it after the fsync interval so what is in flight reaches the disk.
        blocked_s = s.publish_timeout_ms / 1000
        if s.outage_buffer == "spool":
            blocked_s = min(blocked_s, max(s.spool_fsync_interval_ms / 1000, 0.1))
        addresses = connection_parameter_list(
            s, name=self.connection_name, product="lineage-sdk rabbitmq exporter"
        )
        built: list[tuple[Any, str, str | None]] = []
        for (params, shown), url in zip(addresses, s.broker_urls, strict=True):
            params.connection_attempts = 1
            params.retry_delay = 0
            params.socket_timeout = min(10.0, max(1.0, s.publish_timeout_ms / 1000))
            params.stack_timeout = min(15.0, max(2.0, s.publish_timeout_ms / 1000 * 1.5))
            params.blocked_connection_timeout = blocked_s
            built.append((params, shown, url_password(url)))
        return built

    def _use_address(self, index: int) -> None:
        """Make broker address ``index`` the one the next connection attempt goes to."""
        self._address = index
        self._params, self.safe_url, self._password = self._addresses[index]
        self._host = str(self._params.host)
        self._port = int(self._params.port)
        if threading.get_ident() in _QUIET_THREADS:
            _QUIET_THREADS[threading.get_ident()] = self._password

    def _start(self) -> None:
        """Open the spool and start the I/O thread (again in a forked child)."""
        self._pid = os.getpid()
        self._spool = Spool(
            self.spool_dir,
            self.settings.spool_max_bytes,
            destination=self.destination,
            fsync_interval_s=self._fsync_interval_s,
        )
        if not self.settings.spool_dir:  # what older versions left in their default folder
            legacy = _legacy_spool_dir(self.exchange)
            if found := unlabelled_instances(legacy):
                warn_unlabelled(legacy, len(found))
        self._ioloop = pika.adapters.select_connection.IOLoop()
        self._connection: Any = None
        self._channel: Any = None
        self._inflight: dict[int, tuple[OutboundMessage, float]] = {}
        self._order: deque[int] = deque()
        self._next_tag = 1
        self._returned: dict[str, int] = {}
        self._attempt = 0
        self._failure_key: str | None = None
        self._reconnect_timer: Any = None
        self._quiet_next_failure = False
        self._aborting = False
        self._stopping = False
        self._pump_pending = False
        self._ever_ready = False
        self._nacked_since: float | None = None  # first nack since the last ack on this channel
        self._hold_until = 0.0  # no publishing before this (a pause after a nack)
        _install_pika_filter()
        self._thread = threading.Thread(
            target=self._io_main, name="lineage-rabbitmq-io", daemon=True
        )
        self._thread.start()

    def _after_fork(self) -> None:
        """A forked child inherits the parent's buffer and spool: they stay the parent's."""
        self._spool.abandon_after_fork()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._export_lock = threading.Lock()
        self._queue.clear()
        self._mem_events = 0
        self._refilling = False
        self._flush_waiters = 0
        self._state = _State.CONNECTING
        self._offline = False
        self._not_ready_since = time.monotonic()
        self._counts = dict.fromkeys(self._counts, 0)  # the child's own counters
        self._start()

    # -- the pipeline's side ------------------------------------------------------------------

    def export(self, batch: Sequence[EncodedEvent]) -> ExportResult:
        """Hand ``batch`` to the buffer (memory, else spool); never blocks on the network."""
        try:
            if self._pid != os.getpid():
                self._after_fork()
            return self._export(batch)
        except Exception:  # noqa: BLE001 - never raise into the pipeline
            _LOG.exception("lineage RabbitMQ exporter: internal error in export()")
            return ExportResult.FAILURE

    def _export(self, batch: Sequence[EncodedEvent]) -> ExportResult:
        if not batch:
            return ExportResult.SUCCESS
        messages = build_messages(batch, self.settings.events_per_message)
        with self._export_lock:
            to_spool: list[OutboundMessage] = []
            cap = self.settings.memory_buffer_events
            with self._lock:
                offline_spool = self._offline and self._spool_on_outage
                if self._shut:
                    to_spool = messages
                else:
                    spool_first = offline_spool or self._refilling or self._spool.has_unread()
                    for i, msg in enumerate(messages):
                        if spool_first or self._mem_events + msg.event_count > cap:
                            to_spool = messages[i:]
                            break
                        self._queue.append(msg)
                        self._mem_events += msg.event_count
                wake = not self._pump_pending and len(to_spool) < len(messages)
                if wake:
                    self._pump_pending = True
            dropped = 0
            if to_spool:
                if self._shut:
                    accepted = 0
                else:
                    accepted = self._spool.append(to_spool)
                    if accepted:
                        wake = True  # the publisher may be idle with an empty memory queue
                spooled = sum(m.event_count for m in to_spool[:accepted])
                rest = to_spool[accepted:]
                with self._lock:
                    if rest and offline_spool and not self._shut:
                        # The spool is full or unusable: memory is the last resort before a drop.
                        kept = 0
                        for msg in rest:
                            if self._mem_events + msg.event_count > cap:
                                break
                            self._queue.append(msg)
                            self._mem_events += msg.event_count
                            kept += 1
                        rest = rest[kept:]
                    dropped = sum(m.event_count for m in rest)
                    self._counts["spooled"] += spooled
                    self._counts["dropped"] += dropped
                    if dropped:
                        self._drops.add(dropped, _DROPPED, self.spool_dir)
        if wake:
            self._wake()
        return ExportResult.FAILURE if dropped else ExportResult.SUCCESS

    def _wake(self) -> None:
        try:
            self._ioloop.add_callback_threadsafe(self._pump)
        except Exception:  # noqa: BLE001 - the loop is closed; shutdown spills the buffer
            _LOG.debug("lineage RabbitMQ exporter: I/O loop gone; not woken")

    def force_flush(self, timeout: float = 30.0) -> bool:
        """Wait until every buffered event is confirmed, or on disk if the broker is away."""
        try:
            return self._flush(timeout)
        except Exception:  # noqa: BLE001 - never raise into the pipeline
            _LOG.exception("lineage RabbitMQ exporter: internal error in force_flush()")
            return False

    def _flush(self, timeout: float) -> bool:
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._cond:
            self._flush_waiters += 1
            try:
                while True:
                    idle = self._mem_events == 0 and not self._refilling
                    away = self._state in (_State.WAITING, _State.STOPPED) or (
                        self._offline and self._state is _State.CONNECTING and not self._inflight
                    )
                    if idle and (away or not self._spool.has_unread()):
                        break  # all confirmed, or all on disk while the broker is away
                    if away and self._spill_locked():
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(min(remaining, 0.05))
            finally:
                self._flush_waiters -= 1
        self._spool.sync()
        return True

    def _spill_locked(self) -> bool:
        """Move memory to the front of the spool; caller holds the lock and nothing is in flight."""
        if not self._queue:
            return self._mem_events == 0
        messages = list(self._queue)
        if not self._spool.spill_front(messages):
            return False
        events = sum(m.event_count for m in messages)
        self._queue.clear()
        self._mem_events -= events
        self._counts["spooled"] += events
        return True

    def shutdown(self, timeout: float = 30.0) -> None:
        """Flush, stop the I/O thread, and spool whatever is still unconfirmed."""
        try:
            self._shutdown(timeout)
        except Exception:  # noqa: BLE001 - never raise into the pipeline
            _LOG.exception("lineage RabbitMQ exporter: internal error in shutdown()")

    def _shutdown(self, timeout: float) -> None:
        with self._lock:
            if self._shut:
                return
        deadline = time.monotonic() + max(timeout, 0.0)
        self._flush(max(timeout * 0.8, 0.0))
        with self._lock:
            self._shut = True
        try:
            self._ioloop.add_callback_threadsafe(self._begin_stop)
        except Exception:  # noqa: BLE001 - already closed is fine
            _LOG.debug("lineage RabbitMQ exporter: I/O loop already closed")
        self._thread.join(max(deadline - time.monotonic(), 0.5))
        with self._lock:
            if self._thread.is_alive():  # should not happen; spool in-flight copies, lose nothing
                self._requeue_locked([m for m, _ in self._inflight.values()], count_retry=False)
            self._state = _State.STOPPED
            if not self._spill_locked():
                lost = self._mem_events
                self._counts["dropped"] += lost
                _LOG.error(
                    "lineage RabbitMQ exporter lost %d unconfirmed event(s) at shutdown: "
                    "the spool (%s) is full or unusable",
                    lost,
                    self.spool_dir,
                )
                self._queue.clear()
                self._mem_events = 0
            self._drops.report(_DROPPED, self.spool_dir)
            self._cond.notify_all()
        self._spool.close()

    def stats(self) -> RabbitMQExporterStats:
        """The counters now; see :class:`RabbitMQExporterStats` and docs/rabbitmq-exporter.md."""
        with self._lock:
            c = dict(self._counts)
            buffered = self._mem_events
            in_flight = len(self._inflight)
            connected = self._state is _State.READY
        return RabbitMQExporterStats(
            exported=c["exported"],
            retried=c["retried"],
            spooled=c["spooled"],
            replayed=c["replayed"],
            dropped=c["dropped"],
            unroutable=c["unroutable"],
            buffered=buffered,
            in_flight=in_flight,
            spool_bytes=self._spool.total_bytes,
            connected=connected,
            connection_failures=c["connection_failures"],
        )

    # -- the I/O thread -----------------------------------------------------------------------

    def _io_main(self) -> None:
        suppress_for_current_thread()
        _QUIET_THREADS[threading.get_ident()] = self._password
        try:
            self._ioloop.add_callback_threadsafe(self._connect)
            self._ioloop.call_later(self._tick_s, self._tick)
            while True:
                try:
                    self._ioloop.start()
                    break
                except Exception:  # noqa: BLE001 - keep the I/O thread alive
                    # pika itself failed inside the loop; start over with a fresh connection.
                    _LOG.exception("lineage RabbitMQ exporter: I/O loop error; reconnecting")
                    self._connection = self._channel = None
                    self._connection_lost()
                    if self._stopping:
                        break
                    self._schedule_reconnect()
        finally:
            _QUIET_THREADS.pop(threading.get_ident(), None)
            with self._lock:
                self._requeue_locked([m for m, _ in self._inflight.values()], count_retry=False)
                self._inflight.clear()
                self._order.clear()
                self._state = _State.STOPPED
                self._cond.notify_all()
            try:
                self._ioloop.close()
            except Exception:  # noqa: BLE001
                _LOG.debug("lineage RabbitMQ exporter: I/O loop close failed", exc_info=True)

    @_guarded
    def _connect(self) -> None:
        self._reconnect_timer = None
        self._aborting = False
        if self._stopping:
            return
        self._set_state(_State.CONNECTING)
        try:
            # Resolve here first: pika resolves on a helper thread whose failure it logs at ERROR
            # on every attempt, and we want one clear line of our own instead.
            socket.getaddrinfo(self._host, self._port, type=socket.SOCK_STREAM)
            self._connection = pika.SelectConnection(
                self._params,
                on_open_callback=self._on_open,
                on_open_error_callback=self._on_open_error,
                on_close_callback=self._on_closed,
                custom_ioloop=self._ioloop,
            )
        except Exception as exc:  # noqa: BLE001 - any failure here is one more failed attempt
            self._connection = None
            with self._lock:
                self._go_offline_locked()
            try:
                self._report_failure(exc)
            finally:
                self._schedule_reconnect()

    @_guarded
    def _on_open(self, connection: Any) -> None:
        _coalesce_writes(connection)
        connection.add_on_connection_blocked_callback(self._on_blocked)
        connection.add_on_connection_unblocked_callback(self._on_unblocked)
        connection.channel(on_open_callback=self._on_channel_open)

    @_guarded
    def _on_blocked(self, _connection: Any, _frame: Any) -> None:
        """A resource alarm: nothing is confirmed now, so new events go to the spool; pika drops
        the connection after ``blocked_connection_timeout`` and what is in flight follows."""
        _LOG.warning(
            "lineage RabbitMQ exporter: %s blocked publishing (a resource alarm on the broker); "
            "events go to the spool %s",
            self.safe_url,
            self.spool_dir,
        )
        with self._lock:
            self._offline = True

    @_guarded
    def _on_unblocked(self, _connection: Any, _frame: Any) -> None:
        with self._lock:
            if self._state is _State.READY:
                self._offline = False
        self._pump()

    @_guarded
    def _on_channel_open(self, channel: Any) -> None:
        self._channel = channel
        channel.add_on_close_callback(self._on_channel_closed)
        channel.add_on_return_callback(self._on_return)
        if self.settings.declare_exchange and self._connection is not None:
            self._declare(0)
        else:
            self._on_exchange_ready(None)

    # The events exchange with its alternate exchange and holding queue (lineage_sdk.transport.
    # unrouted), declared on a channel of their own: a refusal (406, e.g. the exchange exists
    # without the alternate exchange) closes that channel only, and publishing goes on. The
    # exchange comes first, so an exchange refused that way gets no unused holding queue.
    _DECLARE_STEPS: ClassVar[tuple[str, ...]] = ("exchange", "alternate", "holding", "bind")

    def _declare(self, step: int) -> None:
        conn = self._connection
        if conn is None or not conn.is_open:
            return
        conn.channel(on_open_callback=lambda ch: self._declare_on(ch, step))

    @_guarded
    def _declare_on(self, channel: Any, step: int) -> None:
        state = {"step": step}
        channel.add_on_close_callback(
            lambda ch, exc: self._on_declare_channel_closed(exc, state["step"])
        )
        ex, alt, held = (
            self.exchange,
            unrouted_exchange(self.exchange),
            holding_queue(self.exchange),
        )

        def run(index: int) -> None:
            state["step"] = index
            then = (lambda _f: run(index + 1)) if index < 3 else self._declared(channel)
            name = self._DECLARE_STEPS[index]
            if name == "alternate":
                channel.exchange_declare(alt, "fanout", durable=True, callback=then)
            elif name == "holding":
                channel.queue_declare(
                    held, durable=True, arguments=holding_queue_arguments(), callback=then
                )
            elif name == "bind":
                channel.queue_bind(held, alt, callback=then)
            else:
                channel.exchange_declare(
                    ex,
                    "topic",
                    durable=True,
                    arguments=event_exchange_arguments(ex),
                    callback=then,
                )

        run(step)

    def _declared(self, channel: Any) -> Callable[[Any], None]:
        def done(_frame: Any) -> None:
            if channel.is_open:
                channel.close()
            self._on_exchange_ready(None)

        return done

    @_guarded
    def _on_declare_channel_closed(self, exc: BaseException, step: int) -> None:
        if not isinstance(exc, pika.exceptions.ChannelClosedByBroker):
            return  # closed by us once done, or the connection went: nothing to do
        if exc.reply_code == _PRECONDITION_FAILED:
            if self._DECLARE_STEPS[step] == "exchange":
                warn_missing_alternate_exchange(self.exchange)  # it exists: publish to it
            else:
                _LOG.debug("lineage RabbitMQ exporter: %s exists otherwise: %s", step, exc)
            self._on_exchange_ready(None)
            return
        if exc.reply_code == _NOT_FOUND and self._DECLARE_STEPS[step] in ("holding", "bind"):
            # The holding queue's home node is down (a cluster node was lost): publish anyway.
            _LOG.debug("lineage RabbitMQ exporter: holding queue unavailable: %s", exc)
            self._on_exchange_ready(None)
            return
        self._on_channel_closed(None, exc)  # e.g. access refused: report, reconnect

    @_guarded
    def _on_exchange_ready(self, _frame: Any) -> None:
        if self._channel is None:
            return
        self._channel.confirm_delivery(
            ack_nack_callback=self._on_confirm, callback=self._on_confirm_mode
        )

    @_guarded
    def _on_confirm_mode(self, _frame: Any) -> None:
        self._next_tag = 1
        self._attempt = 0
        self._nacked_since = None
        self._hold_until = 0.0
        if self._failure_key is not None:
            _LOG.warning(
                "lineage RabbitMQ exporter connected again to %s; %d buffered event(s) "
                "and the spool are being published",
                self.safe_url,
                self._mem_events,
            )
            self._failure_key = None
        else:
            _LOG.debug(
                "lineage RabbitMQ exporter connected to %s as %r",
                self.safe_url,
                self.connection_name,
            )
        self._set_state(_State.READY)
        self._ever_ready = True
        with self._lock:
            self._offline = False
        self._pump()

    @_guarded
    def _on_open_error(self, _connection: Any, exc: BaseException) -> None:
        self._connection = None
        self._retry_after(exc)

    @_guarded
    def _on_closed(self, _connection: Any, exc: BaseException) -> None:
        self._connection = self._channel = None
        self._connection_lost()
        self._retry_after(exc)

    def _retry_after(self, exc: BaseException) -> None:
        """The connection failed or closed: stop the loop if stopping, else report and retry."""
        if self._stopping:
            self._ioloop.stop()
            return
        with self._lock:
            if not self._inflight:
                self._go_offline_locked()
        try:
            self._report_failure(exc)
        finally:
            self._schedule_reconnect()

    @_guarded
    def _on_channel_closed(self, _channel: Any, exc: BaseException) -> None:
        self._channel = None
        if self._stopping:
            return
        if isinstance(exc, pika.exceptions.ChannelClosedByBroker):
            self._report_failure(exc)
            self._quiet_next_failure = True  # the connection close that follows is no news
        conn = self._connection
        if conn is not None and not (conn.is_closing or conn.is_closed):
            conn.close()

    def _report_failure(self, exc: BaseException) -> None:
        """One clear line per new kind of failure; repeats of the same one go to DEBUG."""
        with self._lock:
            self._counts["connection_failures"] += 1
        sentence, config = describe_failure(exc, self._params)
        if self._quiet_next_failure or sentence == self._failure_key:
            self._quiet_next_failure = False
            _LOG.debug("lineage RabbitMQ exporter: %s (already reported)", sentence)
            return
        self._failure_key = sentence
        _LOG.log(
            logging.ERROR if config else logging.WARNING,
            "lineage RabbitMQ exporter cannot publish to %s (exchange %r): %s; events wait in "
            "%s %s, and it keeps retrying with backoff",
            self.safe_url,
            self.exchange,
            sentence,
            "the spool" if self._spool_on_outage else "memory, then in the spool",
            self.spool_dir,
        )

    def _schedule_reconnect(self) -> None:
        self._set_state(_State.WAITING)
        self._use_address((self._address + 1) % len(self._addresses))  # fail over
        base = min(self._reconnect_max_s, self._reconnect_initial_s * (2 ** min(self._attempt, 30)))
        self._attempt += 1
        delay = base / 2 + random.uniform(0, base / 2)  # noqa: S311 - jitter, not cryptography
        self._reconnect_timer = self._ioloop.call_later(delay, self._connect)

    def _set_state(self, state: _State) -> None:
        with self._lock:
            if self._state is _State.READY and state is not _State.READY:
                self._not_ready_since = time.monotonic()
            self._state = state
            self._cond.notify_all()

    def _go_offline_locked(self) -> None:
        """Caller holds the lock and nothing is in flight: memory goes to the spool's front now,
        and new events go to the spool until a connection is ready again."""
        self._offline = True
        if self._spool_on_outage and self._queue and not self._spill_locked():
            _LOG.debug("lineage RabbitMQ exporter: the spool cannot take the memory buffer")

    def _connection_lost(self) -> None:
        """Everything in flight goes back to the front of the queue, in order, to be retried."""
        with self._lock:
            messages = [self._inflight[t][0] for t in self._order if t in self._inflight]
            self._inflight.clear()
            self._order.clear()
            self._returned.clear()
            self._requeue_locked(messages, count_retry=True)
            if self._state is _State.READY:
                self._not_ready_since = time.monotonic()
            self._state = _State.WAITING
            self._go_offline_locked()
            self._cond.notify_all()

    def _requeue_locked(self, messages: list[OutboundMessage], *, count_retry: bool) -> None:
        self._queue.extendleft(reversed(messages))
        if count_retry:
            self._counts["retried"] += sum(m.event_count for m in messages)

    @_guarded
    def _pump(self) -> None:
        """Publish from the queue (refilled from the spool) until ``max_in_flight`` are out."""
        with self._lock:
            self._pump_pending = False
        channel = self._channel
        if self._state is not _State.READY or channel is None:
            return
        if time.monotonic() < self._hold_until:
            return  # paused after a nack; _on_confirm scheduled the next pump
        budget = self.settings.max_in_flight - len(self._inflight)
        while budget > 0:
            batch = self._take(budget)
            if not batch:
                return
            now = time.monotonic()
            for i, msg in enumerate(batch):
                props = pika.BasicProperties(
                    content_type=msg.content_type,
                    delivery_mode=2,
                    message_id=msg.message_id,
                    headers=msg.amqp_headers(),
                )
                try:
                    channel.basic_publish(
                        self.exchange, msg.routing_key, msg.body, props, mandatory=True
                    )
                except Exception as exc:  # noqa: BLE001 - channel closing under us
                    with self._lock:
                        self._requeue_locked(batch[i:], count_retry=False)
                    _LOG.debug("lineage RabbitMQ exporter: publish failed: %s", exc)
                    return
                tag = self._next_tag
                self._next_tag = tag + 1
                self._inflight[tag] = (msg, now)
                self._order.append(tag)
            budget -= len(batch)

    def _take(self, n: int) -> list[OutboundMessage]:
        """Up to ``n`` messages from the head of the queue, refilling it from the spool first."""
        with self._lock:
            refill = len(self._queue) < n and not self._refilling and not self._stopping
            if refill:
                self._refilling = True
        if refill:
            messages: list[OutboundMessage] | None = None
            try:
                messages = self._spool.read_next()
            finally:
                with self._lock:
                    if messages:
                        events = sum(m.event_count for m in messages)
                        self._queue.extend(messages)
                        self._mem_events += events
                        self._counts["replayed"] += events
                    self._refilling = False
        with self._lock:
            q = self._queue
            return [q.popleft() for _ in range(min(n, len(q)))]

    @_guarded
    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        tag = int(method.delivery_tag)
        done: list[OutboundMessage] = []
        inflight, order = self._inflight, self._order
        if method.multiple:
            while order and order[0] <= tag:
                item = inflight.pop(order.popleft(), None)
                if item is not None:
                    done.append(item[0])
        else:
            item = inflight.pop(tag, None)
            if item is not None:
                done.append(item[0])
            while order and order[0] not in inflight:
                order.popleft()
        if not done:
            return
        acked = isinstance(method, pika.spec.Basic.Ack)
        with self._lock:
            if acked:
                exported = 0
                events = 0
                for msg in done:
                    events += msg.event_count
                    returned = self._returned.get(msg.message_id)
                    if returned:
                        if returned == 1:
                            del self._returned[msg.message_id]
                        else:
                            self._returned[msg.message_id] = returned - 1
                    else:
                        exported += msg.event_count
                    if msg.segment is not None:
                        self._spool.release(msg.segment, 1)
                self._mem_events -= events
                self._counts["exported"] += exported
            else:  # a nack: the broker could not take them; send them again
                self._requeue_locked(done, count_retry=True)
            if self._flush_waiters:
                self._cond.notify_all()
        if acked:
            self._nacked_since = None
            self._pump()
        else:
            self._on_nack()

    def _on_nack(self) -> None:
        """Nacked messages are back at the head of the queue: publish them again after a short
        pause, and drop the connection if this channel has had nothing but nacks for a while.

        A nack means the queue could not take the message now. On RabbitMQ 3.10 a channel whose
        first publish to a quorum queue falls into the election of a new leader gets every later
        publish nacked too, for as long as it lives (measured: over a minute), while a channel
        opened after the election is fine. So the cure is a new channel; reconnecting (to the
        next address) also makes the exporter go offline meanwhile, so events go to the spool.
        """
        now = time.monotonic()
        if self._nacked_since is None:
            self._nacked_since = now
        if now - self._nacked_since >= _NACK_RESET_S and not self._aborting:
            _LOG.warning(
                "lineage RabbitMQ exporter: %s has nacked every publish for %.1f s (a quorum "
                "queue without a leader, or a queue refusing publishes); reconnecting",
                self.safe_url,
                now - self._nacked_since,
            )
            self._nacked_since = None
            self._drop_connection("publishes nacked", "nacked")
            return
        if self._hold_until <= now:
            self._hold_until = now + _NACK_PAUSE_S
            self._ioloop.call_later(_NACK_PAUSE_S, self._pump)

    @_guarded
    def _on_return(self, _channel: Any, _method: Any, properties: Any, _body: bytes) -> None:
        headers = properties.headers or {}
        count = int(headers.get(HEADER_EVENT_COUNT, 1))
        mid = str(properties.message_id)
        with self._lock:
            self._returned[mid] = self._returned.get(mid, 0) + 1
            self._counts["unroutable"] += count
            self._unroutable.add(count, _UNROUTABLE, self.exchange)

    @_guarded
    def _tick(self) -> None:
        """Every 250 ms (less for a short fsync interval): publish-timeout check, offline check,
        spool fsync, rate-limited reports."""
        if self._stopping:
            return
        self._ioloop.call_later(self._tick_s, self._tick)
        if self._state is not _State.READY and not self._offline and not self._inflight:
            # A connection attempt that hangs. A process's first connection (handshake and
            # declarations, slower on a loaded machine) is given up to _FIRST_CONNECT_S.
            grace = self._fsync_interval_s
            if not self._ever_ready:
                grace = max(grace, _FIRST_CONNECT_S)
            with self._lock:
                if time.monotonic() - self._not_ready_since >= grace:
                    self._go_offline_locked()
        if self._state is _State.READY and self._order and not self._aborting:
            oldest = self._inflight.get(self._order[0])
            if oldest is not None and time.monotonic() - oldest[1] > self._publish_timeout_s:
                self._abort_connection()
        elif self._state is _State.READY and (self._queue or self._spool.has_unread()):
            self._pump()  # e.g. spooled while memory was empty
        elif self._connection is None and self._reconnect_timer is None:
            self._schedule_reconnect()  # safety net: never stay disconnected without a retry
        self._spool.sync_if_due(slack=self._tick_s)
        with self._lock:
            self._drops.report(_DROPPED, self.spool_dir)
            self._unroutable.report(_UNROUTABLE, self.exchange)

    def _abort_connection(self) -> None:
        """No confirm in time: drop the connection at once (a hung broker never sends Close-Ok)."""
        _LOG.warning(
            "lineage RabbitMQ exporter: no publisher confirm from %s within %.1f s; "
            "reconnecting and publishing the unconfirmed events again",
            self.safe_url,
            self._publish_timeout_s,
        )
        self._drop_connection("publisher confirm timeout", "timeout")

    def _drop_connection(self, reason: str, failure_key: str) -> None:
        """Abort the connection at once (a hung broker never sends Close-Ok); what is in flight
        is published again after the reconnect, which goes to the next address."""
        self._aborting = True
        self._quiet_next_failure = True
        self._failure_key = failure_key
        conn = self._connection
        if conn is None:
            return
        # pika has no public abort; _terminate_stream is what its own heartbeat checker uses.
        terminate = getattr(conn, "_terminate_stream", None)
        if callable(terminate):
            terminate(pika.exceptions.StreamLostError(reason))
        elif conn.is_open:
            conn.close(320, f"lineage-sdk: {reason}")

    @_guarded
    def _begin_stop(self) -> None:
        self._stopping = True
        conn = self._connection
        if conn is not None and not (conn.is_closing or conn.is_closed):
            conn.close()
            self._ioloop.call_later(2.0, self._ioloop.stop)
        else:
            self._ioloop.stop()
