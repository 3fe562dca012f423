"""Prometheus metrics of one collector, on a registry of its own.

A private registry (not prometheus-client's global one) lets several collectors live in one
process, as they do in tests, without "duplicated timeseries" errors.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["CollectorMetrics"]


class CollectorMetrics:
    """Counters named ``lineage_collector_*``; see docs/collector.md for their meaning."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.messages_consumed = Counter(
            "lineage_collector_messages_consumed", "Broker messages received.", registry=r
        )
        self.events_consumed = Counter(
            "lineage_collector_events_consumed", "Valid events decoded from messages.", registry=r
        )
        self.events_stored = Counter(
            "lineage_collector_events_stored", "Events written, per store.", ["store"], registry=r
        )
        self.messages_retried = Counter(
            "lineage_collector_messages_retried",
            "Messages sent to a retry queue after a store failed.",
            registry=r,
        )
        self.dead_lettered = Counter(
            "lineage_collector_dead_lettered",
            "Messages or events parked in the dead-letter queue, by reason.",
            ["reason"],
            registry=r,
        )
        self.store_failures = Counter(
            "lineage_collector_store_failures",
            "Failed batch writes, per store.",
            ["store"],
            registry=r,
        )
        self.batch_seconds = Histogram(
            "lineage_collector_batch_seconds",
            "Time to write one batch to every store.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.batch_events = Histogram(
            "lineage_collector_batch_events",
            "Events per written batch.",
            buckets=(1, 5, 10, 25, 50, 100, 200, 500, 1000, 5000),
            registry=r,
        )
        self.connected = Gauge(
            "lineage_collector_connected", "1 while consuming from the broker.", registry=r
        )
        self.reconnects = Counter(
            "lineage_collector_reconnects",
            "Broker connections lost and re-established.",
            registry=r,
        )
