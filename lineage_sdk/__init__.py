"""lineage-sdk: OpenLineage lineage recorded as OpenTelemetry spans, without slowing the caller.

Typical use::

    from lineage_sdk import LineageDataset, track_lineage

    ORDERS = LineageDataset("postgres://db:5432", "shop.public.orders")

    @track_lineage(job_name="load_orders", inputs=[ORDERS])
    def load_orders() -> None: ...

Its names are imported on first use (:mod:`lineage_sdk._lazy`), so a process that only reads the
configuration (``lineage-collector``, ``lineage``, ``lineage-instrument``) never loads the
OpenTelemetry SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lineage_sdk._lazy import lazy_names
from lineage_sdk.version import __version__

if TYPE_CHECKING:
    from lineage_sdk.api import (
        LineageDataset,
        LineageProducer,
        LineageRun,
        current_run,
        track_lineage,
    )
    from lineage_sdk.sdk.provider import LineageSDK, configure, force_flush, get_sdk, shutdown
    from lineage_sdk.service import BaseService

__all__ = [
    "BaseService",
    "LineageDataset",
    "LineageProducer",
    "LineageRun",
    "LineageSDK",
    "__version__",
    "configure",
    "current_run",
    "force_flush",
    "get_sdk",
    "shutdown",
    "track_lineage",
]

if not TYPE_CHECKING:  # to mypy, only the names above exist
    __getattr__ = lazy_names(
        __name__,
        {
            "BaseService": "lineage_sdk.service",
            "LineageDataset": "lineage_sdk.api",
            "LineageProducer": "lineage_sdk.api",
            "LineageRun": "lineage_sdk.api",
            "current_run": "lineage_sdk.api",
            "track_lineage": "lineage_sdk.api",
            "LineageSDK": "lineage_sdk.sdk.provider",
            "configure": "lineage_sdk.sdk.provider",
            "force_flush": "lineage_sdk.sdk.provider",
            "get_sdk": "lineage_sdk.sdk.provider",
            "shutdown": "lineage_sdk.sdk.provider",
        },
    )


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
