"""The project's exceptions: raised on misconfiguration and bad input, never from telemetry."""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "InvalidEventError",
    "LineageError",
    "StoreError",
]


class LineageError(Exception):
    """Base class of every error this project raises on purpose."""


class ConfigError(LineageError):
    """A configuration value is wrong; the message names the key, the value and what is allowed."""

    def __init__(self, key: str, value: object, allowed: str, *, source: str | None = None) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        self.source = source
        where = f" (from {source})" if source else ""
        super().__init__(f"invalid configuration {key}={value!r}{where}: {allowed}")


class InvalidEventError(LineageError):
    """Bytes or a mapping that are not a valid OpenLineage event; the message says why."""


class StoreError(LineageError):
    """A store failed to write; ``permanent`` tells the collector not to retry."""

    def __init__(self, store: str, message: str, *, permanent: bool = False) -> None:
        self.store = store
        self.permanent = permanent
        super().__init__(f"{store}: {message}")
