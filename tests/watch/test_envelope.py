"""The alert on the wire: a CloudEvents 1.0 structured-mode JSON object (checked attribute by
attribute, and read back by the CloudEvents SDK's own parser), signed as Standard Webhooks
specify (verified by the `standardwebhooks` library, and by the spec's formula computed here),
a wrong secret or an altered body, id or timestamp refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from cloudevents.core.bindings.http import HTTPMessage, from_http, from_structured_event
from cloudevents.core.exceptions import CloudEventValidationError
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from lineage_sdk.collector.watch.envelope import (
    CONTENT_TYPE,
    cloud_event,
    event_type,
    new_secret,
    signed_headers,
)
from lineage_sdk.collector.watch.model import CAUSE_KINDS, Cause, CauseKind, cause_id
from lineage_sdk.collector.watch.rules import secret_key_bytes

SOURCE = "https://github.com/lineage-sdk/lineage-sdk"
WHEN = datetime(2026, 12, 6, 3, 4, 5, 678000, tzinfo=UTC)
IMPACT: list[dict[str, Any]] = [
    {
        "nodeId": "dataset:shop:orders_clean",
        "type": "DATASET",
        "namespace": "shop",
        "name": "orders_clean",
        "distance": 1,
        "latestRun": None,
        "owners": [{"name": "team:data", "type": "MAINTAINER"}],
    },
    {
        "nodeId": "job:shop:report",
        "type": "JOB",
        "namespace": "shop",
        "name": "report",
        "distance": 2,
        "latestRun": {"id": "r-9", "state": "COMPLETED", "endedAt": "2026-12-06T02:00:00Z"},
        "owners": [],
    },
]


def _cause(kind: CauseKind = "run_failed") -> Cause:
    return Cause(
        id=cause_id(kind, "shop", "load", "run-1"),
        kind=kind,
        subject="job:shop:load",
        namespace="shop",
        time=WHEN,
        data={
            "job": {"namespace": "shop", "name": "load"},
            "runId": "run-1",
            "dataset": None,
            "what": "the run ended FAIL",
            "error": {"message": "división por cero ✗", "stackTrace": "line 1\nline 2"},
        },
    )


def _now() -> datetime:
    return datetime.now(UTC)


# -- the CloudEvent ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", CAUSE_KINDS)
def test_structure_and_required_attributes(kind: CauseKind) -> None:
    cause = _cause(kind)
    body = cloud_event(cause, IMPACT, source=SOURCE, rule_depth=4)
    assert isinstance(body, bytes)
    event = json.loads(body)
    # the spec's required attributes, then the optional ones the issue asks for; nothing else
    assert event["specversion"] == "1.0"
    assert event["id"] == cause.id
    assert event["source"] == SOURCE
    assert event["type"] == f"lineage.{kind}" == event_type(cause)
    assert event["subject"] == "job:shop:load"
    assert event["datacontenttype"] == "application/json"
    assert datetime.fromisoformat(event["time"]) == WHEN  # RFC 3339, UTC
    assert event["time"].endswith("Z")
    assert set(event) == {
        "specversion",
        "id",
        "source",
        "type",
        "subject",
        "time",
        "datacontenttype",
        "data",
    }
    assert event["data"] == {"cause": cause.data, "impact": IMPACT, "depth": 4}
    assert [item["distance"] for item in event["data"]["impact"]] == [1, 2]  # as given


def test_json_round_trip_through_the_sdks_parser() -> None:
    cause = _cause()
    body = cloud_event(cause, IMPACT, source=SOURCE, rule_depth=10)
    headers = {"content-type": CONTENT_TYPE}
    for parsed in (
        from_structured_event(HTTPMessage(headers=headers, body=body)),
        from_http(HTTPMessage(headers=headers, body=body), JSONFormat()),  # detects the mode
        JSONFormat().read(CloudEvent, body),
    ):
        assert isinstance(parsed, CloudEvent)
        assert parsed.get_specversion() == "1.0"
        assert parsed.get_id() == cause.id
        assert parsed.get_source() == SOURCE
        assert parsed.get_type() == "lineage.run_failed"
        assert parsed.get_subject() == "job:shop:load"
        assert parsed.get_time() == WHEN
        assert parsed.get_datacontenttype() == "application/json"
        assert parsed.get_data() == {"cause": cause.data, "impact": IMPACT, "depth": 10}
        # and written again by the SDK, it is the same JSON
        assert json.loads(JSONFormat().write(parsed)) == json.loads(body)


def test_the_same_cause_is_the_same_event() -> None:
    """id stable for one cause: built twice (a replay, another collector), byte for byte."""
    first = cloud_event(_cause(), IMPACT, source=SOURCE, rule_depth=10)
    again = cloud_event(_cause(), IMPACT, source=SOURCE, rule_depth=10)
    assert first == again
    other = cloud_event(_cause("run_stale"), IMPACT, source=SOURCE, rule_depth=10)
    assert json.loads(other)["id"] != json.loads(first)["id"]


def test_a_time_in_another_zone_is_written_in_utc() -> None:
    cause = _cause()
    shifted = Cause(
        cause.id,
        cause.kind,
        cause.subject,
        cause.namespace,
        WHEN.astimezone(timezone(timedelta(hours=-5))),
        cause.data,
    )
    event = json.loads(cloud_event(shifted, [], source=SOURCE, rule_depth=0))
    assert event["time"] == "2026-12-06T03:04:05.678000Z"
    assert event["data"]["impact"] == []


def test_an_empty_source_is_refused_by_the_sdk() -> None:
    with pytest.raises(CloudEventValidationError):
        cloud_event(_cause(), IMPACT, source="", rule_depth=1)


# -- the signature -------------------------------------------------------------------------------


def test_signed_as_standard_webhooks_specify() -> None:
    secret = new_secret()
    cause = _cause()
    body = cloud_event(cause, IMPACT, source=SOURCE, rule_depth=10)
    now = _now()
    headers = signed_headers(body, cause.id, secret, now)
    assert headers["webhook-id"] == cause.id
    assert headers["webhook-timestamp"] == str(int(now.timestamp()))
    assert headers["Content-Type"] == "application/cloudevents+json"
    # the spec's formula, computed here: v1, base64 HMAC-SHA256 of "<id>.<timestamp>.<body>",
    # keyed by the bytes the base64 after "whsec_" encodes
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{cause.id}.{headers['webhook-timestamp']}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    assert headers["webhook-signature"] == "v1," + base64.b64encode(digest).decode()
    # and the receivers' library verifies it (returning the parsed body)
    assert Webhook(secret).verify(body, headers) == json.loads(body)
    assert Webhook(secret).verify(body.decode(), headers) == json.loads(body)
    assert secret not in json.dumps(headers)


def test_a_wrong_secret_or_an_altered_message_is_refused() -> None:
    secret = new_secret()
    cause = _cause()
    body = cloud_event(cause, IMPACT, source=SOURCE, rule_depth=10)
    headers = signed_headers(body, cause.id, secret, _now())
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)
    altered = body.replace(b"the run ended FAIL", b"the run ended OK!!")
    assert altered != body
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(altered, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body + b" ", headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, {**headers, "webhook-id": cause.id + "x"})
    later = str(int(headers["webhook-timestamp"]) + 1)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, {**headers, "webhook-timestamp": later})
    missing = {k: v for k, v in headers.items() if k != "webhook-signature"}
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, missing)


def test_an_old_signature_is_refused_and_a_resend_signs_anew() -> None:
    """The timestamp is the send's: a retry an hour later is signed at that time, so a
    receiver's replay window (5 minutes in the library) accepts it."""
    secret = new_secret()
    body = cloud_event(_cause(), IMPACT, source=SOURCE, rule_depth=10)
    stale = signed_headers(body, _cause().id, secret, _now() - timedelta(hours=1))
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(secret).verify(body, stale)
    fresh = signed_headers(body, _cause().id, secret, _now())
    Webhook(secret).verify(body, fresh)


def test_a_naive_timestamp_is_utc() -> None:
    secret = new_secret()
    body = b"{}"
    aware = _now().replace(microsecond=0)
    naive = aware.replace(tzinfo=None)
    assert signed_headers(body, "i", secret, naive) == signed_headers(body, "i", secret, aware)


def test_new_secrets() -> None:
    made = {new_secret() for _ in range(20)}
    assert len(made) == 20
    for secret in made:
        assert secret.startswith("whsec_")
        assert len(secret_key_bytes(secret)) == 32  # the configuration's own check takes it
        assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
