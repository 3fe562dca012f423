"""Describing connection failures in one readable, password-free sentence."""

from __future__ import annotations

import socket
import ssl

import pika.adapters.utils.connection_workflow as _workflow
import pika.exceptions

__all__ = ["describe_failure", "scrub", "scrub_url"]

try:  # the redaction helper of the config package; the fallback keeps this module importable
    from lineage_sdk.config.redaction import redact as _redact
except ImportError:  # pragma: no cover - only while the config package is being written
    import re

    def _redact(text_or_url: str) -> str:
        return re.sub(r"(://[^\s:/@]*):[^\s@]*@", r"\1:***@", text_or_url)


_WORKFLOW_ERRORS = (_workflow.AMQPConnectorException, _workflow.AMQPConnectionWorkflowFailed)


def scrub_url(url: str, password: str | None) -> str:
    """``url`` for a log line: the password hidden, the user name kept."""
    text = _redact(url)
    head, sep, tail = text.rpartition("@")
    if password and password in tail:
        tail = tail.replace(password, "***")
    return head + sep + tail


def scrub(text: str, password: str | None) -> str:
    """``text`` without URL passwords and without the literal ``password``."""
    text = _redact(text)
    if password:
        text = text.replace(password, "***")
    return text


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
    exc: BaseException, *, host: str, port: int, vhost: str, user: str
) -> tuple[str, bool]:
    """``(sentence, is_configuration_problem)`` for a connection or channel failure."""
    root = _root(exc)
    auth_errors = (pika.exceptions.ProbableAuthenticationError, pika.exceptions.AuthenticationError)
    if isinstance(root, auth_errors):
        return (
            f"the broker refused the credentials of user {user!r} (ACCESS_REFUSED); "
            "check the user and password in lineage.rabbitmq.url",
            True,
        )
    if isinstance(root, pika.exceptions.ProbableAccessDeniedError):
        return (
            f"access to virtual host {vhost!r} was refused: it does not exist or user {user!r} "
            "has no permission on it; check the vhost in lineage.rabbitmq.url",
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
