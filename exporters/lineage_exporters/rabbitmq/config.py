"""The ``[lineage.rabbitmq]`` table of the ``rabbitmq`` exporter."""

from __future__ import annotations

from pydantic import Field

from lineage_sdk.config.amqp import AmqpConnectionConfig

__all__ = ["RabbitMQConfig"]


class RabbitMQConfig(AmqpConnectionConfig):
    """The `rabbitmq` exporter: publishing to the `collector_topic` exchange, with an in-memory
    buffer and an on-disk spool while the broker is away. The collector connects with the same
    table's connection keys.
    """

    declare_exchange: bool = Field(
        default=True,
        description="Declare the durable topic exchange if it is missing.",
    )
    events_per_message: int = Field(
        default=1,
        ge=1,
        le=10000,
        description=(
            "1 sends one OpenLineage event per message; more enables batch mode (content type "
            "application/vnd.lineage-sdk.batch+json)."
        ),
    )
    max_in_flight: int = Field(
        default=256,
        ge=1,
        description="Unconfirmed publishes allowed at once.",
    )
    memory_buffer_events: int = Field(
        default=100000,
        ge=0,
        description="Events held in memory while the broker is away before spilling to the spool.",
    )
    spool_dir: str | None = Field(
        default=None,
        description="Directory for the on-disk spool; defaults to a per-user cache directory.",
    )
    spool_max_bytes: int = Field(
        default=1 << 30,
        ge=0,
        description="Size cap of the spool; past both caps events are dropped and counted.",
    )
