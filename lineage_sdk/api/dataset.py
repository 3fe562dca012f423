"""``LineageDataset`` where the recording API has always offered it; it lives in the models."""

from lineage_sdk.models.dataset import LineageDataset

__all__ = ["LineageDataset"]
