"""The ``graph`` store: the engine over :class:`~.graph_backend.GraphBackend` (Neo4j and other
servers of the Bolt protocol and Cypher).

:class:`Neo4jLineageStore` keeps the name, constructor and ``from_config`` of the store of the
releases before the engine (the Data Lineage API names it: docs/data-lineage-api.md), so code
and entry points that name it run unchanged. A graph such a release wrote is copied into the
engine's model at the first :meth:`~EngineStore.open`, then the old model is removed
(:class:`~.graph_legacy.GraphPreEngineLayout`).
"""

from __future__ import annotations

from typing import ClassVar

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.store import named_connection
from lineage_sdk.collector.stores.graph_backend import DEFAULT_URI, GraphBackend, GraphStoreConfig
from lineage_sdk.collector.stores.graph_legacy import GraphPreEngineLayout
from lineage_sdk.collector.stores.graph_runner import GraphRunner
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.config.sections import Section

__all__ = ["GraphStoreConfig", "Neo4jLineageStore"]


class Neo4jLineageStore(EngineStore):
    """The engine over a :class:`GraphBackend` reached through ``connection`` (the neo4j
    driver) or ``runner`` (another :class:`GraphRunner`, e.g. FalkorDB's own protocol)."""

    config_class: ClassVar[type[Section]] = GraphStoreConfig

    @classmethod
    def from_config(cls, config: LineageConfig) -> Neo4jLineageStore:
        """Entry point ``lineage_sdk.stores:graph``: reads ``[lineage.store.graph]``."""
        settings = config.section("store.graph", GraphStoreConfig)
        connection = named_connection(
            config,
            "store.graph.graph_connection_name",
            settings.graph_connection_name,
            default_uri=DEFAULT_URI,
        )
        store = cls(connection.settings)
        store.address = store.backend.address = connection.describe()
        return store

    def __init__(
        self,
        connection: ConnectionConfig | None = None,
        *,
        runner: GraphRunner | None = None,
        max_rows_per_statement: int = 2000,
    ) -> None:
        backend = GraphBackend(
            connection, runner=runner, max_rows_per_statement=max_rows_per_statement
        )
        super().__init__(backend, earlier=GraphPreEngineLayout(lambda: backend.runner))
        self.backend: GraphBackend = backend
