"""The lineage engine: the only code that knows what OpenLineage events mean.

It derives the rows of each event once (:mod:`.derive`), answers every read from a backend's
rows (:mod:`.reads`), and derives again what a deletion touched (:mod:`.forget`). Backends
(:mod:`lineage_sdk.collector.backend`) store and index rows and know nothing of OpenLineage.
"""

from __future__ import annotations

from lineage_sdk.collector.engine.derive import derive
from lineage_sdk.collector.engine.reads import Engine
from lineage_sdk.collector.engine.store import EngineStore

__all__ = ["Engine", "EngineStore", "derive"]
