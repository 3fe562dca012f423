"""lineage-sdk: OpenLineage lineage recorded as OpenTelemetry spans, without slowing the caller.

Typical use::

    from lineage_sdk import LineageDataset, track_lineage

    ORDERS = LineageDataset("postgres://db:5432", "shop.public.orders")

    @track_lineage(job_name="load_orders", inputs=[ORDERS])
    def load_orders() -> None: ...
"""

from lineage_sdk.api import LineageDataset, LineageProducer, LineageRun, current_run, track_lineage
from lineage_sdk.sdk.provider import LineageSDK, configure, force_flush, get_sdk, shutdown
from lineage_sdk.service import BaseService
from lineage_sdk.version import __version__

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
