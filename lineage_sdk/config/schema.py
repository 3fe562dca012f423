"""The ``[lineage]`` configuration schema: one pydantic model per TOML table.

Every field's description is the documentation: ``lineage_sdk.config.reference`` renders this
module into ``docs/configuration.md``, and every key has an environment variable named by its
path joined with ``_`` in upper case (``lineage.rabbitmq.url`` is ``LINEAGE_RABBITMQ_URL``).
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

__all__ = [
    "ApiConfig",
    "CollectorConfig",
    "ConnectionConfig",
    "ConsoleExporterConfig",
    "DocumentStoreConfig",
    "FileExporterConfig",
    "GraphStoreConfig",
    "HttpExporterConfig",
    "HttpStoreConfig",
    "InstrumentationConfig",
    "LineageConfig",
    "LoggingStoreConfig",
    "PipelineConfig",
    "ProducerConfig",
    "RabbitMQConfig",
    "SqlStoreConfig",
    "StoreConfig",
]

DEFAULT_PRODUCER_URI = "https://github.com/lineage-sdk/lineage-sdk"


class _Section(BaseModel):
    # Unknown keys are a user mistake worth naming, not something to ignore silently.
    # hide_input_in_errors: a URL with a password must not leak through a pydantic error when a
    # section is built directly in code (the loader redacts its own messages).
    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_default=True, hide_input_in_errors=True
    )


def _check_url(value: str | None, schemes: tuple[str, ...]) -> str | None:
    """Reject URLs with the wrong scheme or no host, the commonest copy-paste mistake."""
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme.lower() not in schemes or not parts.hostname:
        raise ValueError(
            "must be a URL starting with "
            + " or ".join(f"{s}://" for s in schemes)
            + " and naming a host"
        )
    return value


def _field_error(field: str, message: str) -> PydanticCustomError:
    # ctx["field"] lets the loader report the key itself rather than its whole table.
    return PydanticCustomError("lineage_config", message, {"field": field})


class ProducerConfig(_Section):
    """Identity of the events' source: the job namespace and the producer URI."""

    job_namespace: str = Field(
        default="default",
        min_length=1,
        description="Namespace of the jobs this process runs (OPENLINEAGE_NAMESPACE also sets it).",
    )
    producer_uri: str = Field(
        default=DEFAULT_PRODUCER_URI,
        description="URI identifying the software that emits the events (the event's `producer`).",
    )


class PipelineConfig(_Section):
    """The bounded queue and batching worker between the application thread and the exporters."""

    max_queue_size: int = Field(
        default=65536,
        ge=1,
        description="Events waiting between the application thread and the worker.",
    )
    max_export_batch_size: int = Field(
        default=512,
        ge=1,
        description="Largest batch handed to an exporter at once.",
    )
    schedule_delay_ms: int = Field(
        default=200,
        ge=1,
        description="Longest time an event waits before the worker exports a partial batch.",
    )
    export_timeout_ms: int = Field(
        default=30000,
        ge=1,
        description="Time allowed for one export call.",
    )
    overflow: Literal["drop_newest", "drop_oldest", "block"] = Field(
        default="block",
        description=(
            "What happens when the queue is full: drop the new event, drop the oldest one, or "
            "block the caller for at most `block_timeout_ms` and then drop the new event."
        ),
    )
    block_timeout_ms: int = Field(
        default=100,
        ge=0,
        description="With overflow='block', the longest a caller waits for room.",
    )
    shutdown_timeout_ms: int = Field(
        default=5000,
        ge=0,
        description="Time allowed to flush the queue at interpreter exit.",
    )


class ConsoleExporterConfig(_Section):
    """The `console` exporter: JSON lines on a standard stream."""

    stream: Literal["stdout", "stderr"] = Field(
        default="stdout",
        description="Where the console exporter writes JSON lines.",
    )


class FileExporterConfig(_Section):
    """The `file` exporter: JSON lines appended to a file."""

    path: str = Field(
        default="lineage-events.jsonl",
        description="File the file exporter appends JSON lines to.",
    )


class HttpExporterConfig(_Section):
    """The `http` exporter: POSTs events to an OpenLineage HTTP endpoint such as Marquez."""

    url: str | None = Field(
        default=None,
        description="OpenLineage HTTP endpoint base URL (OPENLINEAGE_URL also sets it).",
    )
    endpoint: str = Field(default="api/v1/lineage", description="Path appended to `url`.")
    api_key: str | None = Field(
        default=None,
        description=(
            "Bearer token sent as `Authorization: Bearer ...` (OPENLINEAGE_API_KEY also sets it)."
        ),
    )
    timeout_ms: int = Field(default=5000, ge=1, description="Timeout of one HTTP request.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return _check_url(value, ("http", "https"))


class RabbitMQConfig(_Section):
    """The `rabbitmq` exporter: publishing to the `collector_topic` exchange, with an in-memory
    buffer and an on-disk spool while the broker is away.
    """

    url: str = Field(
        default="amqp://guest:guest@127.0.0.1:5672/%2F",
        description="AMQP URL (`amqp://` or `amqps://`), with credentials and vhost.",
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
        _check_url(value, ("amqp", "amqps"))
        return value


class ConnectionConfig(_Section):
    """A named server connection (`[lineage.connections.NAME]`), referred to by the document and
    graph stores.
    """

    uri: str = Field(
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


class LoggingStoreConfig(_Section):
    """The collector's `logging` store."""

    logger_name: str = Field(
        default="lineage.events",
        description="Logger the logging store writes one JSON line per event to.",
    )


class SqlStoreConfig(_Section):
    """The collector's `sql` store (SQLite or PostgreSQL through SQLAlchemy)."""

    url: str = Field(
        default="sqlite:///lineage.db",
        description="SQLAlchemy URL: sqlite:///path (default) or postgresql+psycopg://...",
    )
    connection_name: str | None = Field(
        default=None,
        description="Optional [lineage.connections.NAME] holding the URL instead.",
    )


class DocumentStoreConfig(_Section):
    """The collector's `document` store (MongoDB)."""

    collection_name: str = Field(
        default="audit_lineage_events",
        min_length=1,
        description="MongoDB collection for the raw events.",
    )
    document_connection_name: str = Field(
        default="default_mongo",
        min_length=1,
        description="Name of the [lineage.connections.NAME] section with the MongoDB URI.",
    )


class GraphStoreConfig(_Section):
    """The collector's `graph` store (Neo4j or another Bolt server)."""

    graph_connection_name: str = Field(
        default="default_graph",
        min_length=1,
        description="Name of the [lineage.connections.NAME] section with the Bolt URI.",
    )


class HttpStoreConfig(_Section):
    """The collector's `openlineage_http` store (a Marquez-compatible endpoint)."""

    url: str | None = Field(
        default=None,
        description=(
            "Base URL of an OpenLineage HTTP endpoint (Marquez-compatible); events go to "
            "{url}/api/v1/lineage."
        ),
    )
    api_key: str | None = Field(
        default=None,
        description="Bearer token for the endpoint. Never logged.",
    )
    timeout_ms: int = Field(default=5000, ge=1, description="Timeout of one request.")
    max_concurrency: int = Field(default=8, ge=1, description="Requests in flight at once.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return _check_url(value, ("http", "https"))


class StoreConfig(_Section):
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
    logging: LoggingStoreConfig = Field(default_factory=LoggingStoreConfig)
    sql: SqlStoreConfig = Field(default_factory=SqlStoreConfig)
    openlineage_http: HttpStoreConfig = Field(default_factory=HttpStoreConfig)
    document: DocumentStoreConfig = Field(default_factory=DocumentStoreConfig)
    graph: GraphStoreConfig = Field(default_factory=GraphStoreConfig)

    @model_validator(mode="after")
    def _composite_needs_backends(self) -> StoreConfig:
        if self.backend == "composite" and not self.backends:
            raise _field_error(
                "backends", "must list at least one store when backend = 'composite'"
            )
        if "composite" in self.backends:
            raise _field_error("backends", "must not contain 'composite' (composites do not nest)")
        if len(set(self.backends)) != len(self.backends):
            raise _field_error("backends", "must not list a store twice")
        if any(not name.strip() for name in self.backends):
            raise _field_error("backends", "must not contain an empty name")
        return self


class CollectorConfig(_Section):
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


class InstrumentationConfig(_Section):
    """Auto-instrumentation by `lineage-instrument`."""

    disabled_instrumentations: list[str] = Field(
        default_factory=list,
        description="Instrumentors not to load (LINEAGE_DISABLED_INSTRUMENTATIONS also sets it).",
    )
    pika_mode: Literal["per_message", "streaming"] = Field(
        default="per_message",
        description="per_message: one run per delivery; streaming: one long run per consumer.",
    )
    pika_consumer_job_name: str | None = Field(
        default=None,
        description="Job name of consumers; defaults to `<queue>.<callback name>`.",
    )
    pika_streaming_interval_ms: int = Field(
        default=60000,
        ge=1,
        description="In streaming mode, how often a RUNNING event aggregates the datasets seen.",
    )
    pika_publisher_job_name: str | None = Field(
        default=None,
        description="Job of publishes made outside any run; defaults to the program's name.",
    )


class ApiConfig(_Section):
    """The collector's HTTP API (`lineage-collector serve`): ingest, reads and the graph page."""

    host: str = Field(default="127.0.0.1", min_length=1, description="Listen address of the API.")
    port: int = Field(default=5000, ge=1, le=65535, description="Listen port of the API.")
    api_key: str | None = Field(
        default=None,
        description="Key required on ingest (`Authorization: Bearer` or `X-API-Key`).",
    )
    protect_reads: bool = Field(default=False, description="Require the API key on reads too.")
    max_body_bytes: int = Field(
        default=4 << 20, ge=1, description="Largest request body accepted (after decompression)."
    )


class LineageConfig(_Section):
    """The whole `[lineage]` table."""

    enabled: bool = Field(
        default=True,
        description="Master switch; OPENLINEAGE_DISABLED=true also turns lineage off.",
    )
    collector_topic: str = Field(
        default="platform.lineage.events",
        min_length=1,
        description="Topic exchange events are published to.",
    )
    exporters: list[str] = Field(
        default_factory=lambda: ["rabbitmq"],
        description=(
            "Exporters to send events to: console | file | memory | rabbitmq | http, or a "
            "plugin's name."
        ),
    )
    producer: ProducerConfig = Field(default_factory=ProducerConfig)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    console: ConsoleExporterConfig = Field(default_factory=ConsoleExporterConfig)
    file: FileExporterConfig = Field(default_factory=FileExporterConfig)
    http: HttpExporterConfig = Field(default_factory=HttpExporterConfig)
    rabbitmq: RabbitMQConfig = Field(default_factory=RabbitMQConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    connections: dict[str, ConnectionConfig] = Field(default_factory=dict)
    collector: CollectorConfig = Field(default_factory=CollectorConfig)
    instrumentation: InstrumentationConfig = Field(default_factory=InstrumentationConfig)
    api: ApiConfig = Field(default_factory=ApiConfig)

    @field_validator("exporters")
    @classmethod
    def _exporter_names(cls, value: list[str]) -> list[str]:
        if any(not name.strip() for name in value):
            raise ValueError("must not contain an empty exporter name")
        if len(set(value)) != len(value):
            raise ValueError("must not list an exporter twice")
        return value
