"""One AMQP connection setup for the RabbitMQ exporter and the collector.

Both read the same settings (URL, heartbeat, connection name, TLS files) and must reject a bad
value with the same sentence, naming the key the user set, with the password hidden. Each caller
then sets the timeouts that suit its own loop. Imports pika: only users of the ``rabbitmq`` extra
import this module.
"""

from __future__ import annotations

import socket
import ssl
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
    "connection_parameters",
    "describe_failure",
    "persistent_copy",
    "safe_url",
    "tls_context",
    "url_password",
]

DEFAULT_KEY = "lineage.rabbitmq"
"""The configuration table of the broker settings, as error messages name it."""


def url_password(url: str, *, key: str = DEFAULT_KEY) -> str | None:
    """Check the shape of an AMQP URL; returns its password, to hide it from any message."""
    try:
        parts = urlsplit(url)
        password = unquote(parts.password) if parts.password else None
        port = parts.port
    except ValueError as exc:
        raise ConfigError(
            f"{key}.url", redact(url), f"a URL like amqp://user:password@host:5672/vhost ({exc})"
        ) from None
    if parts.scheme not in ("amqp", "amqps"):
        raise ConfigError(
            f"{key}.url", redact(url, password), "a URL whose scheme is amqp:// or amqps://"
        )
    if not parts.hostname:
        raise ConfigError(
            f"{key}.url",
            redact(url, password),
            "a URL that names the broker's host, e.g. amqp://guest:guest@127.0.0.1:5672/%2F",
        )
    if port == 0:
        raise ConfigError(f"{key}.url", redact(url, password), "a port from 1 to 65535")
    return password


def safe_url(url: str, password: str | None = None) -> str:
    """``url`` for a log line: the password hidden, the user name kept (even if it equals it)."""
    text = redact(url)
    head, sep, tail = text.rpartition("@")
    return head + sep + redact(tail, password)


def connection_parameters(
    settings: AmqpConnectionConfig, *, name: str, product: str, key: str = DEFAULT_KEY
) -> pika.URLParameters:
    """pika parameters for ``settings``: URL, heartbeat, connection name and TLS.

    ``name`` is the connection name shown in the broker's UI, ``key`` the configuration table
    that error messages name. Raises :class:`ConfigError` for a malformed URL or TLS files that
    do not load; the caller sets its own timeouts and retry counts on the result.
    """
    password = url_password(settings.url, key=key)
    try:
        params = pika.URLParameters(settings.url)
    except Exception as exc:  # noqa: BLE001 - pika raises several types on bad query args
        raise ConfigError(
            f"{key}.url",
            redact(settings.url, password),
            f"a valid AMQP URL ({redact(str(exc), password)})",
        ) from None
    params.heartbeat = settings.heartbeat_s
    params.client_properties = {"connection_name": name, "product": product, "version": __version__}
    if urlsplit(settings.url).scheme == "amqps":
        params.ssl_options = pika.SSLOptions(
            tls_context(settings, key=key), server_hostname=params.host
        )
    return params


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


def describe_failure(
    exc: BaseException, params: Any, *, key: str = DEFAULT_KEY
) -> tuple[str, bool]:
    """``(sentence, is_configuration_problem)`` for a connection or channel failure.

    ``params`` are the connection's :class:`pika.ConnectionParameters`; the sentence names the
    broker and, for a configuration problem, the key to check, and never holds the password.
    """
    sentence, config = _describe(exc, params, key)
    return redact(sentence, getattr(params.credentials, "password", None)), config


def _describe(exc: BaseException, params: Any, key: str) -> tuple[str, bool]:
    host, port, vhost = params.host, params.port, params.virtual_host
    user = getattr(params.credentials, "username", "")
    root = _root(exc)
    auth_errors = (pika.exceptions.ProbableAuthenticationError, pika.exceptions.AuthenticationError)
    if isinstance(root, auth_errors):
        return (
            f"the broker refused the credentials of user {user!r} (ACCESS_REFUSED); "
            f"check the user and password in {key}.url",
            True,
        )
    if isinstance(root, pika.exceptions.ProbableAccessDeniedError):
        return (
            f"access to virtual host {vhost!r} was refused: it does not exist or user {user!r} "
            f"has no permission on it; check the vhost in {key}.url",
            True,
        )
    if isinstance(root, ConnectionRefusedError):
        return (
            f"connection refused by {host}:{port} (is the broker running, is the port right?)",
            False,
        )
    if isinstance(root, socket.gaierror):
        return f"host name {host!r} does not resolve ({root.strerror})", True
    if isinstance(root, ssl.SSLError):
        return f"TLS handshake with {host}:{port} failed ({root.reason or root})", True
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
    return f"{type(root).__name__}: {root}", False
