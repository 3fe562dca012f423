"""The ``[lineage.instrumentation.aio_pika]`` table: the aio-pika instrumentor's options.

The same options as pika's (whose keys keep their older ``pika_`` names in
``[lineage.instrumentation]``), in a table of the instrumentor's own.
"""

from __future__ import annotations

from pydantic import Field

from lineage_instrumentation.config import (
    ConsumeMode,
    HeartbeatIntervalMs,
    PublisherJobName,
    StreamingIntervalMs,
)
from lineage_sdk.config.sections import Section

__all__ = ["AioPikaConfig"]


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
