"""``[lineage.instrumentation.<kind>]``: the options every database instrumentor shares.

Each database instrumentor (``psycopg``, ``sqlite3``, ``sqlalchemy``, ``pymongo``) names this class
as its ``config_class``, so each gets a table of its own, e.g. ``[lineage.instrumentation.psycopg]``
or ``LINEAGE_INSTRUMENTATION_PSYCOPG_OUTSIDE_RUN``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from lineage_sdk.config.sections import Section

__all__ = ["DbInstrumentationConfig"]


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
