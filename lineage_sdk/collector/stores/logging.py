"""The ``logging`` store: one structured JSON log line per event.

Useful in development and as a cheap audit trail shipped by the platform's log pipeline. A log
line cannot be taken back, so idempotency here is best effort: event ids seen recently are
remembered and a redelivered event is not logged twice within one process; after a crash a
redelivered event may appear again.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import ClassVar

from lineage_sdk.collector.store import BaseLineageStore, LineageRecord
from lineage_sdk.collector.stores.settings import LoggingStoreConfig
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.config.sections import Section
from lineage_sdk.models.json_exact import dumps_exact

__all__ = ["LoggingLineageStore", "LoggingStoreConfig"]


class LoggingLineageStore(BaseLineageStore):
    """Logs ``{"event_id": ..., "eventType": ..., "eventTime": ..., "event": {...}}`` at INFO."""

    name = "logging"
    config_class: ClassVar[type[Section]] = LoggingStoreConfig

    @classmethod
    def from_config(cls, config: LineageConfig) -> LoggingLineageStore:
        """Entry point ``lineage_sdk.stores:logging``: reads ``[lineage.store.logging]``."""
        return cls(config.section("store.logging", LoggingStoreConfig).logger_name)

    def __init__(self, logger_name: str = "lineage.events", *, remember: int = 100_000) -> None:
        self.logger = logging.getLogger(logger_name)
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._remember = remember

    def write_batch(self, records: Sequence[LineageRecord]) -> None:
        log = self.logger
        if not log.isEnabledFor(logging.INFO):
            return
        # makeRecord + handle is what Logger.info does, minus the stack walk that looks for the
        # caller (which is always this method): a third of the cost of a line, per event.
        make, handle, name = log.makeRecord, log.handle, log.name
        seen = self._seen
        for record in records:
            if record.event_id in seen:
                continue
            seen[record.event_id] = None
            line = dumps_exact(
                {
                    "event_id": record.event_id,
                    "eventType": record.event_type,
                    "eventTime": record.event_time_raw,
                    "job": f"{record.job_namespace}:{record.job_name}" if record.job_name else None,
                    "runId": record.run_id,
                    "event": record.event,
                }
            ).decode()
            handle(make(name, logging.INFO, __file__, 0, line, (), None, "write_batch"))
        while len(seen) > self._remember:
            seen.popitem(last=False)

    def close(self) -> None:
        self._seen.clear()
