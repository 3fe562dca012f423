"""The watch of a collector, built from its configuration: None when no alert rule is set, so
a collector without alerts imports none of the watch's dependencies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lineage_sdk.collector.manager import LineageManager

if TYPE_CHECKING:
    from lineage_sdk.collector.watch.worker import Watcher

__all__ = ["watcher_of"]


def watcher_of(manager: LineageManager) -> Watcher | None:
    """The collector's watch, opened and not yet started; None without rules. ConfigError when
    rules are set but no store answers queries (the impact of an alert is a lineage read)."""
    from lineage_sdk.collector.watch.rules import alerts_settings, rules_of

    rules = rules_of(manager.config)
    if not rules:
        return None
    from lineage_sdk.collector.watch.deliver import Deliverer
    from lineage_sdk.collector.watch.store import WatchStore
    from lineage_sdk.collector.watch.worker import Watcher

    settings = alerts_settings(manager.config)
    engine = manager.query_store()
    store = WatchStore(settings.store_url(manager.config))
    store.open()
    deliverer = Deliverer(
        store, rules, retry_for=settings.retry_for_seconds, timeout=settings.timeout_s
    )
    return Watcher(
        store,
        engine,
        rules,
        deliverer,
        source=manager.config.producer.producer_uri,
        grace=settings.grace,
    )
