"""The ``[lineage.instrumentation]`` table (which instrumentors load, and the pika options) and
the instrumentors' own tables.

The pika instrumentor's keys keep their ``pika_`` names in this table (an instrumentor added later
gets its own ``[lineage.instrumentation.<kind>]`` table through its ``config_class``: aio-pika's
:class:`AioPikaConfig`, and :class:`DbInstrumentationConfig` for each database instrumentor).
They live here, apart from the instrumentors, so that reading them imports no instrumentor (nor
the OpenTelemetry SDK): the ``lineage_sdk.config_sections`` entry points name them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from lineage_sdk.config.sections import Section

__all__ = [
    "AioPikaConfig",
    "ConsumeMode",
    "DbInstrumentationConfig",
    "HeartbeatIntervalMs",
    "InstrumentationConfig",
    "PublisherJobName",
    "StreamingIntervalMs",
]

# The options pika and aio-pika share (one copy of each definition; each table names its keys).
ConsumeMode = Annotated[
    Literal["per_message", "streaming"],
    Field(description="per_message: one run per delivery; streaming: one long run per consumer."),
]
StreamingIntervalMs = Annotated[
    int,
    Field(
        ge=1,
        description="In streaming mode, how often a RUNNING event aggregates the datasets seen.",
    ),
]
HeartbeatIntervalMs = Annotated[
    int,
    Field(
        ge=0,
        description=(
            "In streaming mode, milliseconds between RUNNING heartbeats (with every dataset seen), "
            "sent even when no message arrives, so the run's edges and liveness show while it "
            "runs; the API reads the run as STALE after 3 intervals without one. 0 disables."
        ),
    ),
]
PublisherJobName = Annotated[
    str | None,
    Field(description="Job of publishes made outside any run; defaults to the program's name."),
]


class InstrumentationConfig(Section):
    """Auto-instrumentation by `lineage-instrument`."""

    disabled_instrumentations: list[str] = Field(
        default_factory=list,
        description="Instrumentors not to load (LINEAGE_DISABLED_INSTRUMENTATIONS also sets it).",
    )
    pika_mode: ConsumeMode = "per_message"
    pika_consumer_job_name: str | None = Field(
        default=None,
        description="Job name of consumers; defaults to `<queue>.<callback name>`.",
    )
    pika_streaming_interval_ms: StreamingIntervalMs = 60000
    pika_heartbeat_interval_ms: HeartbeatIntervalMs = 60000
    pika_publisher_job_name: PublisherJobName = None


# [lineage.instrumentation.aio_pika]: pika's options, in a table of the instrumentor's own.
class AioPikaConfig(Section):
    """The aio-pika instrumentor of `lineage-instrument`."""

    mode: ConsumeMode = "per_message"
    consumer_job_name: str | None = Field(
        default=None,
        description="Job name of consumers; defaults to `<queue>.<callback name>` "
        "(`<queue>.iterator` for `queue.iterator()`).",
    )
    streaming_interval_ms: StreamingIntervalMs = 60000
    heartbeat_interval_ms: HeartbeatIntervalMs = 60000
    publisher_job_name: PublisherJobName = None


# [lineage.instrumentation.<kind>] of every database instrumentor (psycopg, sqlite3, sqlalchemy,
# pymongo), each its own table: LINEAGE_INSTRUMENTATION_PSYCOPG_OUTSIDE_RUN.
class DbInstrumentationConfig(Section):
    """A database instrumentor: what happens to statements run outside any lineage run."""

    outside_run: Literal["ignore", "run_per_transaction"] = Field(
        default="ignore",
        description="Statements outside any run: ignore (record nothing), or run_per_transaction "
        "(one run per database transaction, under a job named after the program).",
    )
    job_name: str | None = Field(
        default=None,
        min_length=1,
        description="Job of the runs opened by run_per_transaction; defaults to the program's "
        "name.",
    )
