"""Where a spool's events were meant to go: broker addresses, vhost, user and exchange.

A spool holds only routing keys and bodies; nothing in an event names the broker, the vhost or
the exchange. So every spool instance records the destination it was written for in
``destination.json`` (never the password), and an exporter adopts an instance only if that record
equals its own destination. The default spool folder is named after the same record, so two
destinations never share one.

"Same destination" is equality: the same exchange and the same *set* of broker endpoints, each
``(TLS or not, host, port, vhost, user)``; the order of ``urls`` does not matter, and neither
does the password. Lists that merely overlap are different destinations: one shared address does
not prove that the other addresses reach the same cluster, and a spool published to the wrong
tenant cannot be taken back, while a spool left alone can still be replayed on purpose
(``python -m lineage_exporters.rabbitmq.replay``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import orjson

__all__ = [
    "RECORD_NAME",
    "UNREADABLE",
    "Destination",
    "Endpoint",
    "Unreadable",
    "read_destination",
    "write_destination",
]

RECORD_NAME = "destination.json"
_FORMAT = 1
_SLUG_CHARS = 60
_ESCAPES = str.maketrans({"%": "%25", "/": "%2F", "\\": "%5C", "\0": "%00"})


@dataclass(frozen=True, order=True, slots=True)
class Endpoint:
    """One broker address as the connection uses it (pika's host, port, vhost and user)."""

    tls: bool
    host: str
    port: int
    vhost: str
    user: str

    def describe(self) -> str:
        """``amqp://user@host:port/vhost``, for log lines (the vhost as is, unquoted)."""
        scheme = "amqps" if self.tls else "amqp"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{self.user}@{host}:{self.port}/{self.vhost}"


@dataclass(frozen=True, slots=True)
class Destination:
    """An exchange and the set of broker endpoints it is reached at; compare with ``==``."""

    exchange: str
    endpoints: tuple[Endpoint, ...]

    @classmethod
    def of(cls, exchange: str, endpoints: list[Endpoint]) -> Destination:
        """The canonical form: host lower-cased, duplicates dropped, endpoints sorted."""
        norm = {
            Endpoint(e.tls, e.host.lower().rstrip("."), int(e.port), e.vhost, e.user)
            for e in endpoints
        }
        return cls(exchange, tuple(sorted(norm)))

    def to_json(self) -> bytes:
        """The record: canonical JSON, so equal destinations give equal bytes (and hash)."""
        return orjson.dumps(
            {
                "format": _FORMAT,
                "exchange": self.exchange,
                "endpoints": [
                    {"tls": e.tls, "host": e.host, "port": e.port, "vhost": e.vhost, "user": e.user}
                    for e in self.endpoints
                ],
            },
            option=orjson.OPT_SORT_KEYS,
        )

    @classmethod
    def from_json(cls, data: bytes) -> Destination | None:
        """The destination a record names; None if it is not a record this version reads."""
        try:
            doc = orjson.loads(data)
            if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
                return None
            endpoints = [
                Endpoint(
                    bool(e["tls"]), str(e["host"]), int(e["port"]), str(e["vhost"]), str(e["user"])
                )
                for e in doc["endpoints"]
            ]
            exchange = doc["exchange"]
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None
        if not isinstance(exchange, str) or not endpoints:
            return None
        return cls.of(exchange, endpoints)

    @property
    def key(self) -> str:
        """16 hex digits of the record's SHA-256: names the default folder."""
        return hashlib.sha256(self.to_json()).hexdigest()[:16]

    def folder_name(self) -> str:
        """``<exchange>@<vhost>-<key>``: readable, and unique per destination thanks to the key."""
        vhosts = sorted({e.vhost for e in self.endpoints})
        slug = f"{self.exchange}@{'+'.join(vhosts)}".translate(_ESCAPES)
        return f"{slug[:_SLUG_CHARS]}-{self.key}"

    def describe(self) -> str:
        """``exchange 'x' at amqp://user@host:port/vhost, ...``, for log lines (no password)."""
        return f"exchange {self.exchange!r} at " + ", ".join(e.describe() for e in self.endpoints)


def write_destination(directory: Path, destination: Destination) -> None:
    """Write ``directory/destination.json`` atomically (a 0600 temp file, fsynced, renamed)."""
    tmp = directory / f".{RECORD_NAME}.tmp"
    fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(destination.to_json())
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, directory / RECORD_NAME)
    with contextlib.suppress(OSError):  # make the rename durable; not every filesystem can
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class Unreadable:
    """A record that exists but cannot be trusted or parsed (the instance is left alone)."""


UNREADABLE = Unreadable()


def read_destination(directory: Path) -> Destination | Unreadable | None:
    """The record of an instance directory: None when there is none (a spool of the old layout),
    :data:`UNREADABLE` when it is not a regular file of our uid or does not parse."""
    try:
        fd = os.open(directory / RECORD_NAME, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError:
        return UNREADABLE
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            return UNREADABLE
        if info.st_size > 1 << 20:
            return UNREADABLE
        data = os.read(fd, info.st_size + 1)
    except OSError:
        return UNREADABLE
    finally:
        os.close(fd)
    return Destination.from_json(data) or UNREADABLE
