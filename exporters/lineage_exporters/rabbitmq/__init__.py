"""The ``rabbitmq`` exporter (pika): see docs/rabbitmq-exporter.md.

The exporter is imported on first use (it imports pika), so reading the ``[lineage.rabbitmq]``
table (:mod:`.config`) does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lineage_exporters.rabbitmq._messages import (
    BATCH_CONTENT_TYPE,
    HEADER_EVENT_COUNT,
    HEADER_EVENT_IDS,
    HEADER_EVENT_TYPE,
    HEADER_PRODUCER,
    HEADER_SCHEMA_URL,
    JSON_CONTENT_TYPE,
    batch_message_id,
    routing_key,
    sanitize_word,
)
from lineage_exporters.rabbitmq.config import RabbitMQConfig
from lineage_sdk._lazy import lazy_names

if TYPE_CHECKING:
    from lineage_exporters.rabbitmq.exporter import RabbitMQExporter, RabbitMQExporterStats

__all__ = [
    "BATCH_CONTENT_TYPE",
    "HEADER_EVENT_COUNT",
    "HEADER_EVENT_IDS",
    "HEADER_EVENT_TYPE",
    "HEADER_PRODUCER",
    "HEADER_SCHEMA_URL",
    "JSON_CONTENT_TYPE",
    "RabbitMQConfig",
    "RabbitMQExporter",
    "RabbitMQExporterStats",
    "batch_message_id",
    "routing_key",
    "sanitize_word",
]

if not TYPE_CHECKING:  # to mypy, only the names above exist
    _EXPORTER = "lineage_exporters.rabbitmq.exporter"
    __getattr__ = lazy_names(
        __name__, {"RabbitMQExporter": _EXPORTER, "RabbitMQExporterStats": _EXPORTER}
    )
