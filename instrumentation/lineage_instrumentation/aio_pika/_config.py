"""The ``[lineage.instrumentation.aio_pika]`` table: the aio-pika instrumentor's options.

The same options as pika's (whose keys keep their older ``pika_`` names in
``[lineage.instrumentation]``), in a table of the instrumentor's own.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from lineage_sdk.config.sections import Section

__all__ = ["AioPikaConfig"]


class AioPikaConfig(Section):
    """The aio-pika instrumentor of `lineage-instrument`."""

    mode: Literal["per_message", "streaming"] = Field(
        default="per_message",
        description="per_message: one run per delivery; streaming: one long run per consumer.",
    )
    consumer_job_name: str | None = Field(
        default=None,
        description="Job name of consumers; defaults to `<queue>.<callback name>` "
        "(`<queue>.iterator` for `queue.iterator()`).",
    )
    streaming_interval_ms: int = Field(
        default=60000,
        ge=1,
        description="In streaming mode, how often a RUNNING event aggregates the datasets seen.",
    )
    heartbeat_interval_ms: int = Field(
        default=60000,
        ge=0,
        description=(
            "In streaming mode, milliseconds between RUNNING heartbeats (with every dataset seen), "
            "sent even when no message arrives, so the run's edges and liveness show while it "
            "runs; the API reads the run as STALE after 3 intervals without one. 0 disables."
        ),
    )
    publisher_job_name: str | None = Field(
        default=None,
        description="Job of publishes made outside any run; defaults to the program's name.",
    )
