"""One AMQP connection setup for the RabbitMQ exporter and the collector.

Both read the same settings (URL, heartbeat, connection name, TLS files) and must reject a bad
value with the same sentence, naming the key the user set, with the password hidden. Each caller
then sets the timeouts that suit its own loop. Imports pika: only users of the ``rabbitmq`` extra
import this module.
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pika
import pika.adapters.utils.connection_workflow as _workflow
import pika.exceptions

from lineage_sdk.config.amqp import AmqpConnectionConfig
from lineage_sdk.config.redaction import redact
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.version import __version__

__all__ = [
    "DEFAULT_KEY",
    "ConnectionStateLog",
    "connection_parameter_list",
    "connection_parameters",
    "describe_failure",
    "persistent_copy",
    "safe_url",
    "tls_context",
    "unresolved_host",
    "url_password",
]

DEFAULT_KEY = "lineage.rabbitmq"
"""The configuration table of the broker settings, as error messages name it."""


def url_password(url: str, *, key: str = DEFAULT_KEY, field: str = "url") -> str | None:
    """Check the shape of an AMQP URL; returns its password, to hide it from any message.

    ``field`` is the key that holds ``url`` in the ``key`` table (``urls[2]`` for one of several).
    """
    try:
        parts = urlsplit(url)
        password = unquote(parts.password) if parts.password else None
        port = parts.port
    except ValueError as exc:
        raise ConfigError(
            f"{key}.{field}",
            redact(url),
            f"a URL like amqp://user:password@host:5672/vhost ({exc})",
        ) from None
    if parts.scheme not in ("amqp", "amqps"):
        raise ConfigError(
            f"{key}.{field}", redact(url, password), "a URL whose scheme is amqp:// or amqps://"
        )
    if not parts.hostname:
        raise ConfigError(
            f"{key}.{field}",
            redact(url, password),
            "a URL that names the broker's host, e.g. amqp://guest:guest@127.0.0.1:5672/%2F",
        )
    if port == 0:
        raise ConfigError(f"{key}.{field}", redact(url, password), "a port from 1 to 65535")
    return password


def safe_url(url: str, password: str | None = None) -> str:
    """``url`` for a log line: the password hidden, the user name kept (even if it equals it)."""
    text = redact(url)
    head, sep, tail = text.rpartition("@")
    return head + sep + redact(tail, password)


def connection_parameters(
    settings: AmqpConnectionConfig,
    *,
    name: str,
    product: str,
    key: str = DEFAULT_KEY,
    url: str | None = None,
    field: str = "url",
) -> pika.URLParameters:
    """pika parameters for ``url`` (default: the first broker address of ``settings``).

    Adds the heartbeat, connection name and TLS of ``settings``. ``name`` is the connection name
    shown in the broker's UI, ``key`` the configuration table and ``field`` the key of ``url``
    that error messages name. Raises :class:`ConfigError` for a malformed URL or TLS files that
    do not load; the caller sets its own timeouts and retry counts on the result.
    """
    if url is None:
        url = settings.broker_urls[0]
        field = "urls[1]" if settings.urls else "url"
    password = url_password(url, key=key, field=field)
    try:
        params = pika.URLParameters(url)
    except Exception as exc:  # noqa: BLE001 - pika raises several types on bad query args
        raise ConfigError(
            f"{key}.{field}",
            redact(url, password),
            f"a valid AMQP URL ({redact(str(exc), password)})",
        ) from None
    params.heartbeat = settings.heartbeat_s
    params.client_properties = {"connection_name": name, "product": product, "version": __version__}
    if urlsplit(url).scheme == "amqps":
        params.ssl_options = pika.SSLOptions(
            tls_context(settings, key=key), server_hostname=params.host
        )
    return params


def connection_parameter_list(
    settings: AmqpConnectionConfig, *, name: str, product: str, key: str = DEFAULT_KEY
) -> list[tuple[pika.URLParameters, str]]:
    """:func:`connection_parameters` for every broker address, in order, each with its URL for a
    log line (password hidden). One failover rule for both clients: try them round robin."""
    urls = settings.broker_urls
    addresses = []
    for number, url in enumerate(urls, 1):
        field = f"urls[{number}]" if settings.urls else "url"
        params = connection_parameters(
            settings, name=name, product=product, key=key, url=url, field=field
        )
        addresses.append((params, safe_url(url, url_password(url, key=key, field=field))))
    return addresses


def tls_context(settings: AmqpConnectionConfig, *, key: str = DEFAULT_KEY) -> ssl.SSLContext:
    """The TLS context of an ``amqps://`` connection; an error names the file that failed."""
    files = (
        ("tls_ca_file", settings.tls_ca_file),
        ("tls_cert_file", settings.tls_cert_file),
        ("tls_key_file", settings.tls_key_file),
    )
    for name, path in files:
        if path is not None and not Path(path).is_file():
            raise ConfigError(f"{key}.{name}", path, "the path of a readable PEM file")
    try:
        context = ssl.create_default_context(cafile=settings.tls_ca_file)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"{key}.tls_ca_file", settings.tls_ca_file, f"a PEM CA bundle that loads ({exc})"
        ) from None
    if settings.tls_cert_file:
        try:
            context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(
                f"{key}.tls_cert_file",
                settings.tls_cert_file,
                f"a PEM certificate (and key) that load ({exc})",
            ) from None
    if not settings.tls_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def persistent_copy(props: pika.BasicProperties, headers: dict[str, Any]) -> pika.BasicProperties:
    """``props`` for republishing a message (retry, park, replay): persistent, with ``headers``."""
    return pika.BasicProperties(
        content_type=props.content_type,
        content_encoding=props.content_encoding,
        headers=headers,
        delivery_mode=2,
        message_id=props.message_id,
        timestamp=props.timestamp,
        type=props.type,
        app_id=props.app_id,
        correlation_id=props.correlation_id,
    )


_WORKFLOW_ERRORS = (_workflow.AMQPConnectorException, _workflow.AMQPConnectionWorkflowFailed)


def _root(exc: BaseException) -> BaseException:
    """The innermost useful cause of pika's connection-workflow wrappers."""
    seen = 0
    while seen < 8:
        seen += 1
        inner = getattr(exc, "exceptions", None)  # AMQPConnectionWorkflowFailed
        if inner:
            exc = inner[-1]
            continue
        inner = getattr(exc, "exception", None)
        if isinstance(inner, BaseException):
            exc = inner
            continue
        args = getattr(exc, "args", ())  # AMQPConnectionError(workflow error), connector errors
        if (
            isinstance(exc, (pika.exceptions.AMQPError, *_WORKFLOW_ERRORS))
            and args
            and isinstance(args[0], BaseException)
        ):
            exc = args[0]
            continue
        break
    return exc


def unresolved_host(exc: BaseException) -> bool:
    """Whether a connection failed because the broker's host name does not resolve (yet: an
    orchestrator may create the name only when the broker starts)."""
    return isinstance(_root(exc), socket.gaierror)


def describe_failure(
    exc: BaseException, params: Any, *, key: str = DEFAULT_KEY
) -> tuple[str, bool]:
    """``(sentence, is_configuration_problem)`` for a connection or channel failure.

    ``params`` are the connection's :class:`pika.ConnectionParameters`; the sentence names the
    broker and, for a configuration problem, the key to check, and never holds the password
    (a user name equal to it is shown, as :func:`safe_url` shows it).
    """
    user = str(getattr(params.credentials, "username", ""))
    sentence, config = _describe(exc, params, key, _USER_MARK)
    sentence = redact(sentence, getattr(params.credentials, "password", None))
    # The user name is shown even when it equals the password, as safe_url() does.
    return sentence.replace(repr(_USER_MARK), repr(user)), config


_USER_MARK = "\x00user\x00"
_CLOSED = pika.exceptions.ConnectionClosedByBroker


def _describe(exc: BaseException, params: Any, key: str, user: str) -> tuple[str, bool]:
    host, port, vhost = params.host, params.port, params.virtual_host
    root = _root(exc)
    auth_errors = (pika.exceptions.ProbableAuthenticationError, pika.exceptions.AuthenticationError)
    if isinstance(root, auth_errors):
        return (
            f"the broker refused the credentials of user {user!r} (ACCESS_REFUSED); "
            f"check the user and password in {key}.url",
            True,
        )
    not_allowed = isinstance(root, _CLOSED) and root.reply_code == 530  # NOT_ALLOWED
    if isinstance(root, pika.exceptions.ProbableAccessDeniedError) or not_allowed:
        if "not found" in str(root):
            return (
                f"virtual host {vhost!r} does not exist on {host}:{port}; "
                f"check the vhost in {key}.url",
                True,
            )
        return (
            f"user {user!r} has no access to virtual host {vhost!r}; grant it "
            f"(rabbitmqctl set_permissions) or check the vhost in {key}.url",
            True,
        )
    if isinstance(root, ConnectionRefusedError):
        return (
            f"connection refused by {host}:{port} (is the broker running, is the port right?)",
            False,
        )
    if isinstance(root, socket.gaierror):
        return f"host name {host!r} does not resolve ({root.strerror})", True
    if isinstance(root, ssl.SSLCertVerificationError):
        return (
            f"TLS: the certificate of {host}:{port} was not accepted "
            f"({root.verify_message or root.reason}); check {key}.tls_ca_file",
            True,
        )
    if isinstance(root, ssl.SSLError):
        return (
            f"TLS handshake with {host}:{port} failed ({root.reason or root}); "
            "is it the broker's TLS port (usually 5671)?",
            True,
        )
    if isinstance(root, TimeoutError | socket.timeout):
        return f"no answer from {host}:{port} in time (wrong host or port, or a firewall?)", False
    if isinstance(root, pika.exceptions.IncompatibleProtocolError):
        return (
            f"{host}:{port} does not speak AMQP 0-9-1 (wrong port, or amqp:// to a TLS port?)",
            True,
        )
    if isinstance(root, pika.exceptions.ConnectionClosedByBroker):
        return (f"the broker closed the connection ({root.reply_code} {root.reply_text})", False)
    if isinstance(root, pika.exceptions.ChannelClosedByBroker):
        config = root.reply_code in (403, 404, 406)
        return f"the broker closed the channel ({root.reply_code} {root.reply_text})", config
    if isinstance(root, pika.exceptions.StreamLostError):
        return f"connection to {host}:{port} lost ({root})", False
    if isinstance(root, pika.exceptions.AMQPHeartbeatTimeout):
        return f"no heartbeat from {host}:{port}; the connection was dropped", False
    if isinstance(root, OSError):
        return f"cannot reach {host}:{port} ({root.strerror or root})", False
    detail = str(root).strip()
    return (
        f"cannot connect to {host}:{port} ({type(root).__name__}"
        + (f": {detail})" if detail else ", no detail given)"),
        False,
    )


class ConnectionStateLog:
    """One log line per change of a consumer's broker connection state, not one per attempt.

    - the first failure, and any failure whose cause differs from the last one: a warning naming
      the broker and the cause (``cannot connect``, or ``lost the connection`` once it had been
      up); repeats of the same cause are counted quietly, with a reminder every
      ``reminder_s`` saying how many attempts failed;
    - the first success after failures: one line saying so, with the count.
    """

    def __init__(
        self,
        logger: logging.Logger,
        url: str,
        *,
        reminder_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self.url = url
        self.reminder_s = reminder_s
        self._clock = clock
        self._up = False
        self._cause: str | None = None
        self.failures = 0
        self._since = 0.0
        self._reminded = 0.0

    def connected(self) -> None:
        """The connection is up and in use."""
        if self._cause is not None:
            self._log.info(
                "connected to the broker at %s after %d failed attempt(s) over %.0fs",
                self.url,
                self.failures,
                self._clock() - self._since,
            )
        self._up, self._cause, self.failures = True, None, 0

    def failed(self, cause: str, retry_in_s: float) -> None:
        """An attempt failed, or the connection in use was lost, because of ``cause``."""
        now = self._clock()
        if self._up:
            self._up, self._cause, self.failures, self._since = False, cause, 1, now
            self._reminded = now
            self._log.warning(
                "lost the broker connection at %s: %s; reconnecting in %.1fs",
                self.url,
                cause,
                retry_in_s,
            )
            return
        self.failures += 1
        if cause != self._cause:
            if self._cause is None:
                self._since = now
            self._cause, self._reminded = cause, now
            self._log.warning(
                "cannot connect to the broker at %s: %s (retrying quietly with backoff)",
                self.url,
                cause,
            )
        elif now - self._reminded >= self.reminder_s:
            self._reminded = now
            self._log.warning(
                "still cannot connect to the broker at %s after %d attempt(s) over %.0fs: %s",
                self.url,
                self.failures,
                now - self._since,
                cause,
            )
