"""Several broker addresses (issue 13, item 5): `urls` replaces `url`, each address is validated
like `url`, and both clients get one pika parameter set per address, in order."""

from __future__ import annotations

import pytest

from lineage_sdk.config import load_config
from lineage_sdk.config.amqp import AmqpConnectionConfig
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.transport.amqp import connection_parameter_list

SECRET = "s3cr3t-pw"


def _rabbitmq(**environ: str) -> AmqpConnectionConfig:
    config = load_config(environ=environ)
    config.validate_sections()
    return config.section("rabbitmq", AmqpConnectionConfig)


def test_urls_replace_url_in_order():
    rmq = _rabbitmq(
        LINEAGE_RABBITMQ_URL="amqp://u:p@single:5672/%2F",
        LINEAGE_RABBITMQ_URLS="amqp://u:p@n1:5672/%2F,amqp://u:p@n2:5673/%2F,amqps://u:p@n3/%2F",
    )
    assert rmq.broker_urls == [
        "amqp://u:p@n1:5672/%2F",
        "amqp://u:p@n2:5673/%2F",
        "amqps://u:p@n3/%2F",
    ]
    addresses = connection_parameter_list(rmq, name="test", product="test")
    assert [(p.host, p.port) for p, _ in addresses] == [("n1", 5672), ("n2", 5673), ("n3", 5671)]
    assert addresses[0][1] == "amqp://u:***@n1:5672/%2F"
    assert all(p.heartbeat == rmq.heartbeat_s for p, _ in addresses)


def test_url_alone_without_urls():
    rmq = _rabbitmq(LINEAGE_RABBITMQ_URL="amqp://u:p@single:5672/%2F")
    assert rmq.broker_urls == ["amqp://u:p@single:5672/%2F"]
    ((params, shown),) = connection_parameter_list(rmq, name="test", product="test")
    assert (params.host, shown) == ("single", "amqp://u:***@single:5672/%2F")


def test_each_address_is_validated_and_its_password_hidden():
    with pytest.raises(ConfigError) as info:
        _rabbitmq(LINEAGE_RABBITMQ_URLS=f"amqp://u:p@n1/%2F,http://u:{SECRET}@n2:5672/%2F")
    text = str(info.value)
    assert "lineage.rabbitmq.urls" in text
    assert "address 2" in text and "amqp:// or amqps://" in text
    assert SECRET not in text


def test_a_bad_port_names_the_address():
    rmq = AmqpConnectionConfig(urls=["amqp://u:p@n1/%2F", "amqp://u:p@n2:0/%2F"])
    with pytest.raises(ConfigError) as info:
        connection_parameter_list(rmq, name="test", product="test")
    assert "lineage.rabbitmq.urls[2]" in str(info.value)
