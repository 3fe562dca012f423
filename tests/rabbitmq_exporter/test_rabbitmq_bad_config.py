"""Bad configuration: one clear line (or ConfigError for a malformed URL), no password, no crash."""

from __future__ import annotations

import logging
import socket

import pytest
from rabbitmq_support import make_events, wait_for

from lineage_exporters.rabbitmq import RabbitMQExporter
from lineage_exporters.rabbitmq.config import RabbitMQConfig
from lineage_sdk import LineageDataset, configure, shutdown, track_lineage
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.sdk.export import ExportResult

pytestmark = pytest.mark.rabbitmq

SECRET = "Sup3r-s3cret-pw"


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


BAD = {
    "wrong port": (
        lambda: f"amqp://guest:{SECRET}@127.0.0.1:{_closed_port()}/%2F",
        "connection refused",
    ),
    "wrong host": (
        lambda: f"amqp://guest:{SECRET}@no-such-host.invalid:5672/%2F",
        "does not resolve",
    ),
    "wrong credentials": (
        lambda: f"amqp://guest:{SECRET}@127.0.0.1:5672/%2F",
        "refused the credentials",
    ),
    "wrong vhost": (
        lambda: "amqp://guest:guest@127.0.0.1:5672/no-such-vhost",
        "virtual host 'no-such-vhost'",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_unreachable_or_refused_gives_one_line_and_events_are_kept(
    case: str, make_exporter, caplog
) -> None:
    url_factory, phrase = BAD[case]
    caplog.set_level(logging.DEBUG)
    exporter = make_exporter(
        "test.lineage.rmq.badconfig", url=url_factory(), memory_buffer_events=10
    )
    events = make_events(30)
    assert exporter.export(events) is ExportResult.SUCCESS
    assert wait_for(lambda: exporter.stats().connection_failures >= 3, timeout=30)
    assert exporter.force_flush(10)  # the broker is away: memory is moved to the spool
    stats = exporter.stats()
    assert stats.spooled == 30 and stats.dropped == 0 and stats.spool_bytes > 0
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) == 1, [r.getMessage() for r in loud]
    assert phrase in loud[0].getMessage()
    assert loud[0].name == "lineage_exporters.rabbitmq"
    for record in caplog.records:  # every level, ours and pika's
        assert SECRET not in record.getMessage()
    assert SECRET not in caplog.text


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        (f"http://guest:{SECRET}@127.0.0.1:5672/", "scheme is amqp"),
        (f"amqp://guest:{SECRET}@127.0.0.1:notaport/", "amqp://user:password@host"),
        (f"amqp://guest:{SECRET}@:5672/%2F", "names the broker's host"),
        (f"amqp://guest:{SECRET}@127.0.0.1:5672/%2F?heartbeat=soon", "a valid AMQP URL"),
    ],
)
def test_malformed_url_is_a_config_error_without_the_password(
    url: str, fragment: str, tmp_path
) -> None:
    # model_construct skips the schema's own URL check: this is the exporter's (for configs
    # built in code, or a future schema that lets more through).
    with pytest.raises(ConfigError) as info:
        RabbitMQExporter(RabbitMQConfig.model_construct(url=url, spool_dir=str(tmp_path)))
    message = str(info.value)
    assert "lineage.rabbitmq.url" in message
    assert fragment in message
    assert SECRET not in message
    assert SECRET not in repr(info.value.value)


def test_missing_tls_file_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="tls_ca_file"):
        RabbitMQExporter(
            RabbitMQConfig(
                url="amqps://guest:guest@127.0.0.1:5671/%2F",
                tls_ca_file=str(tmp_path / "missing.pem"),
                spool_dir=str(tmp_path),
            )
        )


def test_application_keeps_running_with_a_bad_broker(tmp_path, caplog) -> None:
    """Through configure() and the decorator: the calls work, the events wait in the spool."""
    config = LineageConfig(
        collector_topic="test.lineage.rmq.app",
        rabbitmq=RabbitMQConfig(
            url=f"amqp://guest:{SECRET}@127.0.0.1:5672/%2F",
            spool_dir=str(tmp_path),
            reconnect_initial_ms=50,
            memory_buffer_events=0,
        ),
    )
    sdk = configure(config)
    try:
        assert sdk is not None

        @track_lineage(job_name="still_running", inputs=[LineageDataset("file", "/in")])
        def work(x: int) -> int:
            return x * 2

        assert [work(i) for i in range(20)] == [i * 2 for i in range(20)]
        (exporter,) = sdk.exporters
        assert isinstance(exporter, RabbitMQExporter)
        assert sdk.force_flush(10)
        assert wait_for(lambda: exporter.stats().spooled == 40)
    finally:
        shutdown(5)
    assert SECRET not in caplog.text


def test_malformed_url_through_configure_disables_lineage_only(
    tmp_path, monkeypatch, caplog
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LINEAGE_EXPORTERS", "rabbitmq")
    monkeypatch.setenv("LINEAGE_RABBITMQ_URL", f"amqp://guest:{SECRET}@:5672/")
    with caplog.at_level(logging.ERROR):
        assert configure() is None

    @track_lineage(job_name="disabled")
    def work() -> str:
        return "ok"

    try:
        assert work() == "ok"
    finally:
        shutdown(1)
    assert "lineage.rabbitmq.url" in caplog.text
    assert SECRET not in caplog.text
