"""Removing secrets from text before it reaches a log line or an error message."""

from __future__ import annotations

import re

__all__ = ["REDACTED", "redact"]

REDACTED = "***"

# scheme://user:password@host -> keep the user (useful when debugging), hide the password.
# The password stops at the last "@" before whitespace, so an unescaped "/" or ":" in it is
# still hidden (over-redacting a malformed URL is the safe side).
_USERINFO = re.compile(r"(?P<prefix>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*):(?P<secret>[^\s@]*)@")
# ?password=...&api_key=... and similar query or key=value pairs.
_PAIRS = re.compile(
    r"(?P<prefix>\b(?:password|passwd|pwd|api_key|apikey|api-key|token|access_token|secret)=)"
    r"(?P<secret>[^&\s;,]+)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<prefix>\bBearer\s+)(?P<secret>[^\s,;]+)", re.IGNORECASE)
# An API key of the collector (``lsk_`` and URL-safe base64), wherever it was pasted.
_API_KEY = re.compile(r"\blsk_[A-Za-z0-9_\-]+")
# A Standard Webhooks secret (``whsec_`` and base64) of an alert rule, wherever it was pasted.
_WEBHOOK_SECRET = re.compile(r"\bwhsec_[A-Za-z0-9+/=_\-]+")


def redact(text_or_url: str, *secrets: str | None) -> str:
    """``text_or_url`` with every URL password, ``password=``-style pair, bearer token, API key
    (``lsk_``) and webhook secret (``whsec_``) hidden, and every literal ``secrets`` value too
    (a password or API key the caller knows, which may also appear where no pattern finds it,
    e.g. in a library's error text).

    >>> redact("amqp://user:secret@host:5672/%2F")
    'amqp://user:***@host:5672/%2F'
    >>> redact("login failed for s3cr3t", "s3cr3t", None)
    'login failed for ***'
    """
    text = _USERINFO.sub(lambda m: f"{m['prefix']}:{REDACTED}@", text_or_url)
    text = _PAIRS.sub(lambda m: f"{m['prefix']}{REDACTED}", text)
    text = _BEARER.sub(lambda m: f"{m['prefix']}{REDACTED}", text)
    text = _API_KEY.sub(REDACTED, text)
    text = _WEBHOOK_SECRET.sub(REDACTED, text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text
