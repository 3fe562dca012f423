"""The collector's own configuration tables: the store choice, connections, queues and the API.

Only ``lineage-collector`` (and the ``lineage`` CLI) validates these; an application never does.
They are registered in the ``lineage_sdk.config_sections`` entry-point group.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from lineage_sdk.config.schema import field_error
from lineage_sdk.config.sections import Section, UriSetting

__all__ = ["ApiConfig", "CollectorConfig", "ConnectionConfig", "StoreConfig"]


class ConnectionConfig(Section):
    """A named server connection (`[lineage.connections.NAME]`), referred to by the document and
    graph stores.
    """

    named_tables = True

    uri: Annotated[str, UriSetting()] = Field(
        default=...,
        min_length=1,
        description="Server URI, e.g. mongodb://host:27017/db or neo4j://host:7687.",
    )
    username: str | None = Field(
        default=None,
        description="User name, where the URI does not carry it.",
    )
    password: str | None = Field(
        default=None,
        description="Password, where the URI does not carry it. Never logged.",
    )
    database: str | None = Field(
        default=None,
        description="Database name, where the URI does not carry it.",
    )
    timeout_ms: int = Field(
        default=10000,
        ge=1,
        description="Connect and server-selection timeout.",
    )


class StoreConfig(Section):
    """Where the collector writes events."""

    backend: str = Field(
        default="sql",
        description=(
            "Store the collector writes to: logging | sql | openlineage_http | document | graph |"
            " composite, or a plugin's name."
        ),
    )
    backends: list[str] = Field(
        default_factory=list,
        description=(
            "With backend='composite', the stores written to: each batch goes to all of them"
            " concurrently and waits for every one; if any fails, the whole batch goes to retry"
            " (or the dead-letter queue), and the stores that succeeded keep one copy."
        ),
    )

    @model_validator(mode="after")
    def _composite_needs_backends(self) -> StoreConfig:
        if self.backend == "composite" and not self.backends:
            raise field_error("backends", "must list at least one store when backend = 'composite'")
        if "composite" in self.backends:
            raise field_error("backends", "must not contain 'composite' (composites do not nest)")
        if len(set(self.backends)) != len(self.backends):
            raise field_error("backends", "must not list a store twice")
        if any(not name.strip() for name in self.backends):
            raise field_error("backends", "must not contain an empty name")
        return self


class CollectorConfig(Section):
    """The `lineage-collector` service: queues, retries, batching and the health endpoint."""

    queue: str | None = Field(
        default=None,
        description="Main queue; defaults to `<collector_topic>.collector`.",
    )
    binding_key: str = Field(
        default="#",
        description="Routing pattern binding the main queue to the exchange.",
    )
    retry_delays_ms: list[int] = Field(
        default_factory=lambda: [1000, 5000, 30000],
        description="Delay of each retry queue, growing; a failed event waits in the next one.",
    )
    max_attempts: int = Field(
        default=5,
        ge=1,
        description="Attempts before an event is parked in the dead-letter queue.",
    )
    dead_letter_queue: str | None = Field(
        default=None,
        description="Parking-lot queue; defaults to `<collector_topic>.dlq`.",
    )
    queue_type: Literal["quorum", "classic"] = Field(
        default="quorum",
        description=(
            "Type of the main, retry and dead-letter queues. Quorum queues are replicated on a"
            " cluster and dead-letter at least once; an existing topology of the other type is"
            " refused with the command that migrates it (`lineage-collector topology migrate`)."
        ),
    )
    delivery_limit: int = Field(
        default=20,
        ge=0,
        description=(
            "Quorum queues only: deliveries of one message from the main queue (including"
            " redeliveries after a collector crashed or lost its connection) before the broker"
            " parks it in the dead-letter queue; a backstop against a message that kills the"
            " collector. 0 turns it off."
        ),
    )
    prefetch: int = Field(
        default=500,
        ge=1,
        description="Unacknowledged messages the broker sends ahead.",
    )
    batch_size: int = Field(
        default=200,
        ge=1,
        description="Events written to the stores in one batch.",
    )
    batch_timeout_ms: int = Field(default=50, ge=1, description="Longest wait to fill a batch.")
    max_message_bytes: int = Field(
        default=4 << 20,
        ge=1,
        description="Messages larger than this go straight to the dead-letter queue.",
    )
    health_host: str = Field(
        default="127.0.0.1",
        description="Address of the health, readiness and metrics endpoint.",
    )
    health_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="Port of the health endpoint; 0 turns it off.",
    )

    @field_validator("retry_delays_ms")
    @classmethod
    def _growing_delays(cls, value: list[int]) -> list[int]:
        if any(delay < 1 for delay in value) or value != sorted(value):
            raise ValueError("must be a list of integers >= 1 in increasing order")
        return value


class ApiConfig(Section):
    """The collector's HTTP API (`lineage-collector serve`): ingest, reads and the graph page."""

    host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description=(
            "Listen address of the API; a non-loopback address needs `api_key`"
            " (or `serve --insecure`)."
        ),
    )
    port: int = Field(default=5000, ge=1, le=65535, description="Listen port of the API.")
    api_key: str | None = Field(
        default=None,
        description="Key required on ingest (`Authorization: Bearer` or `X-API-Key`).",
    )
    protect_reads: bool = Field(default=False, description="Require the API key on reads too.")
    max_body_bytes: int = Field(
        default=4 << 20, ge=1, description="Largest request body accepted (after decompression)."
    )
