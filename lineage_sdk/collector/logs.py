"""The log of ``lineage-collector run`` and ``serve``: one format for both, secrets redacted.

By default every record is one JSON object on stderr: time, level, logger, message and any
``extra`` fields; ``--log-format text`` writes the same records as plain lines
(``time level logger: message key=value``). uvicorn's error and access logs go through the same
handler (``serve`` starts uvicorn without a logging configuration of its own). Messages pass
through :func:`lineage_sdk.config.redaction.redact`, so a URL with a password that reaches a log
call anyway shows ``***``. The ``logging`` store's logger writes its own JSON lines to stdout
unchanged.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

from lineage_sdk.config.redaction import redact

__all__ = ["LOG_FORMATS", "JsonFormatter", "TextFormatter", "configure_logging"]

#: The values of ``--log-format``; the first is the default.
LOG_FORMATS = ("json", "text")
# Record attributes that are no extra field; uvicorn's color_message repeats the message with
# terminal colours.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",
}


def _fields(formatter: logging.Formatter, record: logging.LogRecord) -> dict[str, Any]:
    """The record as the fields both formats write, redacted."""
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
        doc["exception"] = redact(formatter.formatException(record.exc_info))
    return doc


class JsonFormatter(logging.Formatter):
    """One JSON object per record; extra attributes become fields."""

    def format(self, record: logging.LogRecord) -> str:
        return orjson.dumps(_fields(self, record), default=str).decode()


class TextFormatter(logging.Formatter):
    """``time level logger: message key=value ...``, then the traceback if any, for people."""

    def format(self, record: logging.LogRecord) -> str:
        doc = _fields(self, record)
        exception = doc.pop("exception", None)
        head = [doc.pop(k) for k in ("time", "level", "logger", "message")]
        line = f"{head[0]} {str(head[1]).upper()} {head[2]}: {head[3]}"
        line += "".join(f" {key}={value}" for key, value in doc.items())
        return f"{line}\n{exception}" if exception else line


class _Plain(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return record.getMessage()


def configure_logging(
    level: str = "INFO", *, events_logger: str = "lineage.events", log_format: str = "json"
) -> None:
    """Logs on stderr for the service, JSON lines or (``log_format="text"``) plain lines; the
    events logger prints its lines as they are."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TextFormatter() if log_format == "text" else JsonFormatter())
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
