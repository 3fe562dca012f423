"""The ``sql`` store: the engine over :class:`~.sql_backend.SqlBackend` (SQLite or PostgreSQL).

:class:`SqlStore` keeps the name, constructor and ``from_config`` of the store of the releases
before the engine, so code and entry points that name it run unchanged. A database such a
release wrote is copied into the engine's tables at the first :meth:`~EngineStore.open`
(:class:`~.sql_legacy.SqlPreEngineLayout`), then its old tables are dropped.
"""

from __future__ import annotations

from typing import ClassVar

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.store import named_connection
from lineage_sdk.collector.stores.sql_backend import SqlBackend, SqlStoreConfig
from lineage_sdk.collector.stores.sql_legacy import SqlPreEngineLayout
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.config.sections import Section

__all__ = ["SqlStore", "SqlStoreConfig"]


class SqlStore(EngineStore):
    """The engine over a :class:`SqlBackend` on ``url`` (entry point ``lineage_sdk.stores:sql``),
    its tables named ``{table_prefix}ev``, ``edge``, ... (see :mod:`.sql_backend`)."""

    config_class: ClassVar[type[Section]] = SqlStoreConfig

    @classmethod
    def from_config(cls, config: LineageConfig) -> SqlStore:
        """``store.sql.url``, or the ``uri`` of the ``[lineage.connections.NAME]`` that
        ``store.sql.connection_name`` names."""
        sql = config.section("store.sql", SqlStoreConfig)
        url = sql.url
        if sql.connection_name:
            url = named_connection(
                config, "store.sql.connection_name", sql.connection_name
            ).settings.uri
        return cls(url)

    def __init__(self, url: str, *, table_prefix: str = "lineage_", echo: bool = False) -> None:
        backend = SqlBackend(url, table_prefix=table_prefix, echo=echo)
        super().__init__(backend, earlier=SqlPreEngineLayout(url, table_prefix, echo=echo))
        self.backend: SqlBackend = backend
        #: The SQLAlchemy URL, password included (the ``lineage`` command reads a SQLite path
        #: from it, so a query never creates an empty database file).
        self.url = url
