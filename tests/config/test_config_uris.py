"""URI settings: a Markdown link is read as its target, anything else must be an absolute URI."""

from __future__ import annotations

import logging

import pytest

from lineage_sdk.config import load_config
from lineage_sdk.exceptions import ConfigError

ISSUE_VALUE = "[https://github.com/my-org/my-service](https://github.com/my-org/my-service)"


def test_a_markdown_link_is_read_as_its_target_with_one_warning(tmp_path, caplog):
    path = tmp_path / "lineage.toml"
    path.write_text(f'[lineage.producer]\nproducer_uri = "{ISSUE_VALUE}"\n')
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.config"):
        config = load_config(path=path, environ={})
    assert config.producer.producer_uri == "https://github.com/my-org/my-service"
    (line,) = [r.getMessage() for r in caplog.records]
    assert "lineage.producer.producer_uri" in line and str(path) in line
    assert "Markdown link" in line


def test_a_markdown_link_in_an_environment_variable_too(caplog):
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.config"):
        config = load_config(
            environ={"LINEAGE_RABBITMQ_URL": "[broker](amqp://guest:guest@127.0.0.1:5672/%2F)"}
        )
        url = config.section("rabbitmq").url  # type: ignore[attr-defined]
    assert url == "amqp://guest:guest@127.0.0.1:5672/%2F"
    (line,) = [r.getMessage() for r in caplog.records]
    assert "lineage.rabbitmq.url" in line and "LINEAGE_RABBITMQ_URL" in line
    assert "guest:guest" not in line  # the password is hidden in the warning


@pytest.mark.parametrize("value", ["my-service", "github.com/my-org/my-service", "a b:c", "[x]"])
@pytest.mark.parametrize("source", ["environment", "override"])
def test_a_producer_uri_that_is_not_absolute_is_refused_naming_the_key(value, source):
    given = (
        {"environ": {"LINEAGE_PRODUCER_PRODUCER_URI": value}}
        if source == "environment"
        else {"environ": {}, "overrides": {"producer.producer_uri": value}}
    )
    with pytest.raises(ConfigError) as info:
        load_config(**given)
    assert info.value.key == "lineage.producer.producer_uri"
    assert "absolute URI" in str(info.value)
