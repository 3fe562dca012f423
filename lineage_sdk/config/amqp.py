"""AMQP connection settings shared by the RabbitMQ exporter and the collector.

Both read the ``[lineage.rabbitmq]`` table: the exporter's class extends this one with its
publishing keys, and the collector connects with these.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from lineage_sdk.config.schema import check_url
from lineage_sdk.config.sections import Section, UriSetting

__all__ = ["AmqpConnectionConfig"]


class AmqpConnectionConfig(Section):
    """How to reach the broker: URL, heartbeat, connection name and TLS."""

    url: Annotated[str, UriSetting()] = Field(
        default="amqp://guest:guest@127.0.0.1:5672/%2F",
        description="AMQP URL (`amqp://` or `amqps://`), with credentials and vhost.",
    )
    urls: list[str] = Field(
        default_factory=list,
        description=(
            "Several broker addresses (the nodes of a cluster), each an AMQP URL like `url`. When "
            "set, it replaces `url`: the first is tried first, and each reconnect after a failure "
            "or a lost connection tries the next one, round robin."
        ),
    )
    heartbeat_s: int = Field(default=30, ge=0, description="AMQP heartbeat interval in seconds.")
    connection_name: str | None = Field(
        default=None,
        description=(
            "Connection name shown in the broker UI; defaults to `<job_namespace>/<process name>`."
        ),
    )
    publish_timeout_ms: int = Field(
        default=10000,
        ge=1,
        description="How long to wait for publisher confirms before treating a publish as failed.",
    )
    reconnect_initial_ms: int = Field(
        default=200,
        ge=1,
        description="First reconnect delay; doubles with jitter up to `reconnect_max_ms`.",
    )
    reconnect_max_ms: int = Field(default=30000, ge=1, description="Longest reconnect delay.")
    tls_ca_file: str | None = Field(default=None, description="CA bundle for amqps:// connections.")
    tls_cert_file: str | None = Field(
        default=None,
        description="Client certificate for amqps:// connections.",
    )
    tls_key_file: str | None = Field(
        default=None,
        description="Client key for amqps:// connections.",
    )
    tls_verify: bool = Field(
        default=True,
        description="Verify the broker's certificate and host name.",
    )

    @field_validator("url")
    @classmethod
    def _amqp_url(cls, value: str) -> str:
        check_url(value, ("amqp", "amqps"))
        return value

    @field_validator("urls")
    @classmethod
    def _amqp_urls(cls, value: list[str]) -> list[str]:
        for number, url in enumerate(value, 1):
            try:
                check_url(url, ("amqp", "amqps"))
            except ValueError as exc:
                raise ValueError(f"address {number}: {exc}") from None
        return value

    @property
    def broker_urls(self) -> list[str]:
        """The addresses to connect to, in order: ``urls`` when set, else ``url`` alone."""
        return list(self.urls) or [self.url]
