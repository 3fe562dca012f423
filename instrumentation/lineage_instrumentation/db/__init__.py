"""Database instrumentors: the tables and collections a program reads and writes, as datasets.

- :class:`~lineage_instrumentation.db.psycopg3.PsycopgInstrumentor` (psycopg 3),
- :class:`~lineage_instrumentation.db.sqlite.Sqlite3Instrumentor` (the standard ``sqlite3``),
- :class:`~lineage_instrumentation.db.sqlalchemy_events.SQLAlchemyInstrumentor` (every dialect),
- :class:`~lineage_instrumentation.db.pymongo_monitor.PymongoInstrumentor` (pymongo 4).

SQL is read by ``openlineage-sql`` (see :mod:`._sql`); :func:`sql_stats` counts the statements
it read and those it could not. Where datasets go (the current run, or a run per transaction)
is :mod:`._record`. Importing this package imports none of the drivers.
"""

from __future__ import annotations

from lineage_instrumentation.config import DbInstrumentationConfig
from lineage_instrumentation.db._record import TransactionRolledBack
from lineage_instrumentation.db._sql import SqlStats, clear_cache, sql_stats

__all__ = [
    "DbInstrumentationConfig",
    "SqlStats",
    "TransactionRolledBack",
    "clear_cache",
    "sql_stats",
]
