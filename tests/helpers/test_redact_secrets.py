"""redact() with the literal secrets a caller knows (a password, an API key)."""

from __future__ import annotations

from lineage_sdk.config.redaction import redact


def test_literal_secrets_are_hidden_wherever_they_appear() -> None:
    text = "pika said: login refused for hunter2 at amqp://u:hunter2@h/ (key abc123)"
    assert redact(text, "hunter2", "abc123") == (
        "pika said: login refused for *** at amqp://u:***@h/ (key ***)"
    )


def test_no_secret_or_an_empty_one_changes_nothing_more() -> None:
    text = "amqp://u:pw@h/ and plain words"
    assert redact(text, None, "") == redact(text) == "amqp://u:***@h/ and plain words"
