"""The ``document`` store: the engine over :class:`~.document_backend.DocumentBackend`
(MongoDB and servers of its wire protocol).

:class:`DocumentLineageStore` keeps the name, constructor and ``from_config`` of the store of
the releases before the engine (the Data Lineage API names it: docs/data-lineage-api.md), so
code and entry points that name it run unchanged. The events such a release left in
``collection_name`` are copied into the engine's collections at the first
:meth:`~EngineStore.open`, then its old collections are dropped
(:class:`~.document_legacy.DocumentPreEngineLayout`).
"""

from __future__ import annotations

from typing import ClassVar

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.store import named_connection
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.document_connector import DEFAULT_URI, DocumentStoreConfig
from lineage_sdk.collector.stores.document_legacy import DocumentPreEngineLayout
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.config.sections import Section

__all__ = ["DocumentLineageStore", "DocumentStoreConfig"]


class DocumentLineageStore(EngineStore):
    """The engine over a :class:`DocumentBackend` on ``connection``, its collections named
    ``{collection_name}_events``, ``_mentions``, ... (see :mod:`.document_backend`)."""

    config_class: ClassVar[type[Section]] = DocumentStoreConfig

    @classmethod
    def from_config(cls, config: LineageConfig) -> DocumentLineageStore:
        """Entry point ``lineage_sdk.stores:document``: reads ``[lineage.store.document]``."""
        settings = config.section("store.document", DocumentStoreConfig)
        connection = named_connection(
            config,
            "store.document.document_connection_name",
            settings.document_connection_name,
            default_uri=DEFAULT_URI,
        )
        store = cls(connection.settings, settings.collection_name)
        store.address = store.backend.address = connection.describe()
        return store

    def __init__(
        self, connection: ConnectionConfig, collection_name: str = "audit_lineage_events"
    ) -> None:
        backend = DocumentBackend(connection, collection_name)
        earlier = DocumentPreEngineLayout(backend.connector, collection_name)
        super().__init__(backend, earlier=earlier)
        self.backend: DocumentBackend = backend
