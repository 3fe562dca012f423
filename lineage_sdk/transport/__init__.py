"""Broker connections shared by the exporters and the collector.

``amqp`` imports pika: only users of the ``rabbitmq`` extra import it.
"""

__all__: list[str] = []
