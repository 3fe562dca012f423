"""The collector: ``lineage-collector`` consumes lineage events from RabbitMQ into the stores.

Import what you need from the submodules (``consumer.LineageCollector``,
``manager.LineageManager``, ``service.LineageCollectorService``, ``store``); this package
imports nothing itself, so that ``lineage_sdk.collector.store`` stays cheap to import.
"""

__all__: list[str] = []
