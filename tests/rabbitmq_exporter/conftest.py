"""Fixtures of the RabbitMQ exporter tests; the helpers live in rabbitmq_support (a unique name,
so test modules can import them without clashing with other folders' conftest.py)."""

from rabbitmq_support import make_exporter, proxy, topology

__all__ = ["make_exporter", "proxy", "topology"]
