"""The AMQP connection setup shared by the RabbitMQ exporter and the collector (no broker needed).

Both read the same settings, so a bad value must be refused by both with the same sentence, naming
the key the user set, without the password.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pika.exceptions
import pytest

from lineage_exporters.rabbitmq import RabbitMQExporter
from lineage_exporters.rabbitmq.config import RabbitMQConfig
from lineage_sdk.collector.consumer import connection_parameters as collector_parameters
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.transport import amqp

SECRET = "Sup3r-s3cret-pw"


def _settings(url: str, **extra: Any) -> RabbitMQConfig:
    # model_construct skips the schema's own URL check: these are the connection code's checks.
    return RabbitMQConfig.model_construct(**{**RabbitMQConfig().model_dump(), "url": url, **extra})


def _exporter_error(settings: RabbitMQConfig, tmp_path: Path) -> ConfigError:
    settings = settings.model_copy(update={"spool_dir": str(tmp_path)})
    with pytest.raises(ConfigError) as info:
        RabbitMQExporter(settings)
    return info.value


def _collector_error(settings: RabbitMQConfig) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        collector_parameters(LineageConfig(rabbitmq=settings))
    return info.value


@pytest.mark.parametrize(
    "url",
    [
        f"http://guest:{SECRET}@127.0.0.1:5672/",
        f"amqp://guest:{SECRET}@127.0.0.1:notaport/",
        f"amqp://guest:{SECRET}@:5672/%2F",
        f"amqp://guest:{SECRET}@127.0.0.1:5672/%2F?heartbeat=soon",
    ],
)
def test_exporter_and_collector_refuse_a_bad_url_with_the_same_sentence(
    url: str, tmp_path: Path
) -> None:
    exporter = _exporter_error(_settings(url), tmp_path)
    collector = _collector_error(_settings(url))
    assert str(collector) == str(exporter)
    assert collector.key == exporter.key == "lineage.rabbitmq.url"
    assert SECRET not in str(collector) and SECRET not in repr(collector.value)


@pytest.mark.parametrize("name", ["tls_ca_file", "tls_cert_file", "tls_key_file"])
def test_a_missing_tls_file_is_named_by_exporter_and_collector(name: str, tmp_path: Path) -> None:
    settings = _settings(
        "amqps://guest:guest@127.0.0.1:5671/%2F", **{name: str(tmp_path / "missing.pem")}
    )
    exporter = _exporter_error(settings, tmp_path)
    collector = _collector_error(settings)
    assert collector.key == exporter.key == f"lineage.rabbitmq.{name}"
    assert str(collector) == str(exporter)


def test_a_ca_bundle_that_does_not_load_is_named_as_the_ca_file(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    settings = _settings("amqps://guest:guest@127.0.0.1:5671/%2F", tls_ca_file=str(bad))
    assert _exporter_error(settings, tmp_path).key == "lineage.rabbitmq.tls_ca_file"
    assert _collector_error(settings).key == "lineage.rabbitmq.tls_ca_file"


def test_a_certificate_that_does_not_load_is_named_as_the_cert_file(tmp_path: Path) -> None:
    bad = tmp_path / "client.pem"
    bad.write_text("not a certificate\n")
    settings = _settings("amqps://guest:guest@127.0.0.1:5671/%2F", tls_cert_file=str(bad))
    with pytest.raises(ConfigError) as info:
        amqp.tls_context(settings)
    assert info.value.key == "lineage.rabbitmq.tls_cert_file"


def test_errors_name_the_table_the_caller_reads_from() -> None:
    with pytest.raises(ConfigError) as info:
        amqp.connection_parameters(
            _settings("http://h/"), name="n", product="p", key="lineage.collector.rabbitmq"
        )
    assert info.value.key == "lineage.collector.rabbitmq.url"


def test_parameters_carry_heartbeat_name_and_tls() -> None:
    plain = amqp.connection_parameters(
        _settings("amqp://u:p@broker:5672/v", heartbeat_s=7), name="svc/1", product="prod"
    )
    assert plain.heartbeat == 7
    assert plain.client_properties is not None
    assert plain.client_properties["connection_name"] == "svc/1"
    assert plain.client_properties["product"] == "prod"
    assert plain.ssl_options is None
    secure = amqp.connection_parameters(
        _settings("amqps://u:p@broker:5671/v", tls_verify=False), name="n", product="p"
    )
    assert secure.ssl_options is not None
    assert secure.ssl_options.server_hostname == "broker"
    context = secure.ssl_options.context
    assert context.check_hostname is False and context.verify_mode == ssl.CERT_NONE


def test_collector_keeps_its_connection_name_and_timeouts() -> None:
    params = collector_parameters(
        LineageConfig(rabbitmq=_settings("amqp://u:p@broker:5672/v")),
        role="collector-dlq",
    )
    assert params.client_properties is not None
    assert str(params.client_properties["connection_name"]).startswith("lineage-collector-dlq/")
    assert params.socket_timeout == 10


def test_safe_url_hides_the_password_and_keeps_a_user_equal_to_it() -> None:
    url = "amqp://guest:guest@broker:5672/%2F"
    assert amqp.safe_url(url, amqp.url_password(url)) == "amqp://guest:***@broker:5672/%2F"


def test_failure_sentences_name_the_key_and_never_the_password() -> None:
    params = amqp.connection_parameters(
        _settings(f"amqp://guest:{SECRET}@broker:5672/vh"), name="n", product="p"
    )
    sentence, is_config = amqp.describe_failure(
        pika.exceptions.ProbableAuthenticationError(f"refused {SECRET}"), params
    )
    assert is_config and "lineage.rabbitmq.url" in sentence and "'guest'" in sentence
    sentence, is_config = amqp.describe_failure(RuntimeError(f"odd failure {SECRET}"), params)
    assert not is_config and SECRET not in sentence and "RuntimeError" in sentence
    sentence, _ = amqp.describe_failure(ConnectionRefusedError(), params)
    assert sentence.startswith("connection refused by broker:5672")


def _closed(code: int, text: str) -> pika.exceptions.ProbableAccessDeniedError:
    return pika.exceptions.ProbableAccessDeniedError(f"ConnectionClosedByBroker: ({code}) '{text}'")


def test_a_missing_vhost_and_a_refused_vhost_are_told_apart() -> None:
    params = amqp.connection_parameters(
        _settings("amqp://guest:guest@broker:5672/orders"), name="n", product="p"
    )
    missing, is_config = amqp.describe_failure(
        _closed(530, "NOT_ALLOWED - vhost orders not found"), params
    )
    assert is_config and missing.startswith("virtual host 'orders' does not exist on broker:5672")
    refused, is_config = amqp.describe_failure(
        _closed(530, "NOT_ALLOWED - access to vhost 'orders' refused for user 'guest'"), params
    )
    assert is_config and refused.startswith("user 'guest' has no access to virtual host 'orders'")
    # The user name stays readable even when the password equals it, as in safe_url().
    assert "'***'" not in missing + refused


def test_tls_failures_and_causeless_errors_still_say_something() -> None:
    params = amqp.connection_parameters(
        _settings("amqps://u:p@broker:5671/v", tls_verify=False), name="n", product="p"
    )
    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    verify.verify_message = "self-signed certificate"
    sentence, is_config = amqp.describe_failure(verify, params)
    assert is_config and "self-signed certificate" in sentence and "tls_ca_file" in sentence
    sentence, _ = amqp.describe_failure(pika.exceptions.AMQPConnectionError(), params)
    assert sentence == "cannot connect to broker:5671 (AMQPConnectionError, no detail given)"
