"""The alert on the wire: a CloudEvents 1.0 JSON object in structured mode, signed as Standard
Webhooks specify.

The body is built once, when the alert is decided, by the CloudEvents SDK (its v1 event model
validates the attributes; its JSON format writes them), and stored as sent: a retry or a replay
sends the same bytes with the same id. The signature is made at send time (the
``webhook-timestamp`` is the send's), by the ``standardwebhooks`` library: the ``v1,`` base64
HMAC-SHA256 of ``<id>.<timestamp>.<body>``, keyed by the bytes after the secret's ``whsec_``.
"""

from __future__ import annotations

import base64
import math
import secrets
from datetime import UTC, datetime
from typing import Any

from cloudevents.core.bindings.http import to_structured
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent
from standardwebhooks import Webhook

from lineage_sdk.collector.watch.model import Cause
from lineage_sdk.collector.watch.rules import SECRET_PREFIX

__all__ = [
    "CONTENT_TYPE",
    "DATA_CONTENT_TYPE",
    "EVENT_TYPE_PREFIX",
    "cloud_event",
    "event_type",
    "new_secret",
    "signed_headers",
]

#: The request's ``Content-Type``: a CloudEvent in structured mode, as JSON.
CONTENT_TYPE = JSONFormat.CONTENT_TYPE
#: The event's ``datacontenttype``: its ``data`` is a JSON object.
DATA_CONTENT_TYPE = "application/json"
EVENT_TYPE_PREFIX = "lineage."
_FORMAT = JSONFormat()
_SECRET_BYTES = 32


def event_type(cause: Cause) -> str:
    """The CloudEvent ``type`` of a cause: ``lineage.run_failed`` and so on."""
    return EVENT_TYPE_PREFIX + cause.kind


def cloud_event(
    cause: Cause, impact: list[dict[str, Any]], *, source: str, rule_depth: int
) -> bytes:
    """The alert of ``cause`` for one rule, as the bytes sent: a CloudEvents 1.0 JSON object
    (structured mode). ``id`` is the cause's (the same cause sent twice, by any collector, has
    the same id), ``source`` the collector's producer URI, ``subject`` the cause's node id;
    ``data`` holds the cause, the impact downstream (nearest first) and the rule's depth.

    Raises the SDK's ``CloudEventValidationError`` for an attribute the spec refuses (an empty
    ``source``)."""
    event = CloudEvent(
        {
            "specversion": "1.0",
            "id": cause.id,
            "source": source,
            "type": event_type(cause),
            "time": cause.time.astimezone(UTC),
            "subject": cause.subject,
            "datacontenttype": DATA_CONTENT_TYPE,
        },
        {"cause": cause.data, "impact": impact, "depth": rule_depth},
    )
    return to_structured(event, _FORMAT).body


def signed_headers(
    body: bytes, msg_id: str, secret: str | Webhook, timestamp: datetime
) -> dict[str, str]:
    """The headers of one delivery of ``body``: ``webhook-id`` (the CloudEvent's id),
    ``webhook-timestamp`` (Unix seconds of ``timestamp``, the send's time), ``webhook-signature``
    (``v1,`` and the base64 HMAC-SHA256 of ``<id>.<timestamp>.<body>``) and the structured
    mode's ``Content-Type``. The secret goes into the HMAC only; a sender of many alerts passes
    its ``Webhook`` (the secret's key decoded once) instead of the secret."""
    when = timestamp if timestamp.tzinfo is not None else timestamp.replace(tzinfo=UTC)
    signer = secret if isinstance(secret, Webhook) else Webhook(secret)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(math.floor(when.timestamp())),
        "webhook-signature": signer.sign(msg_id, when, body),
        "Content-Type": CONTENT_TYPE,
    }


def new_secret() -> str:
    """A new Standard Webhooks secret: ``whsec_`` and the base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(_SECRET_BYTES)).decode("ascii")
