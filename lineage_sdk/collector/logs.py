"""Structured (JSON lines) logging for the collector, with secrets redacted.

Every record is one JSON object on stderr: time, level, logger, message and any ``extra`` fields.
Messages pass through :func:`lineage_sdk.config.redaction.redact`, so a URL with a password that
reaches a log call anyway shows ``***``. The ``logging`` store's logger writes its own JSON lines
to stdout unchanged.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

from lineage_sdk.config.redaction import redact

__all__ = ["JsonFormatter", "configure_logging"]

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per record; extra attributes become fields."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = redact(value) if isinstance(value, str) else value
        if record.exc_info:
            doc["exception"] = redact(self.formatException(record.exc_info))
        return orjson.dumps(doc, default=str).decode()


class _Plain(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return record.getMessage()


def configure_logging(level: str = "INFO", *, events_logger: str = "lineage.events") -> None:
    """JSON logs on stderr for the service; the events logger prints its lines as they are."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())
    # pika logs several ERROR records, some with tracebacks, for each failed connection attempt;
    # the collector reports the state of its connection itself, one line per change.
    logging.getLogger("pika").setLevel(logging.CRITICAL)
    events = logging.getLogger(events_logger)
    events.handlers.clear()
    out = logging.StreamHandler(sys.stdout)
    out.setFormatter(_Plain())
    events.addHandler(out)
    events.setLevel(logging.INFO)
    events.propagate = False
