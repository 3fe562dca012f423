"""The ``rabbitmq`` exporter (pika): see docs/rabbitmq-exporter.md."""

from __future__ import annotations

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
