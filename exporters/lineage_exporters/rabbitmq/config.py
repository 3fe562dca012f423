"""The ``[lineage.rabbitmq]`` table of the ``rabbitmq`` exporter."""

from __future__ import annotations

from typing import Literal

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
        description=(
            "Events held in memory waiting for the broker (while connected, or with "
            '`outage_buffer = "memory"`, or when the spool is full) before the spool takes them.'
        ),
    )
    outage_buffer: Literal["spool", "memory"] = Field(
        default="spool",
        description=(
            "Where events wait once the broker cannot confirm them (unreachable, connection lost "
            "or blocked): `spool` writes them to disk at once, so a crash loses at most "
            "`spool_fsync_interval_ms`; `memory` keeps up to `memory_buffer_events` in memory "
            "first (no disk writes for short outages, but a crash loses what memory holds)."
        ),
    )
    spool_fsync_interval_ms: int = Field(
        default=250,
        ge=1,
        le=60000,
        description=(
            "Longest time an event written to the spool waits for fsync; with the pipeline's "
            "`schedule_delay_ms` it bounds what a crash during an outage can lose."
        ),
    )
    spool_dir: str | None = Field(
        default=None,
        description=(
            "Directory for the on-disk spool; defaults to a per-user cache folder named after "
            "the destination (broker addresses, vhost, user, exchange). A spool is replayed "
            "only by an exporter with the destination it was written for."
        ),
    )
    spool_max_bytes: int = Field(
        default=1 << 30,
        ge=0,
        description="Size cap of the spool; past both caps events are dropped and counted.",
    )
