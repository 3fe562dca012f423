"""The public recording API: cheap calls on the application thread."""

from lineage_sdk.api.decorator import track_lineage
from lineage_sdk.api.producer import LineageProducer
from lineage_sdk.models.dataset import LineageDataset
from lineage_sdk.sdk.runs import LineageRun, current_run

__all__ = ["LineageDataset", "LineageProducer", "LineageRun", "current_run", "track_lineage"]
