"""``SQLAlchemyInstrumentor``: datasets from every SQLAlchemy engine, whatever its dialect.

Listens, on the ``Engine`` class (so every engine, made before or after), to
``before_cursor_execute``/``after_cursor_execute``/``handle_error`` for the statements and to
``commit``/``rollback`` for transactions; ``uninstrument()`` removes the listeners. While
SQLAlchemy runs a statement, the psycopg and sqlite3 instrumentors leave it to this one.

Naming from the engine's URL (see :mod:`._naming`): PostgreSQL, SQLite, MySQL/MariaDB and SQL
Server as in the OpenLineage naming spec; any other backend as ``{backend}://{host}:{port}``.
Statements are what SQLAlchemy sends to the driver (Core, ORM and ``text()`` alike).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from lineage_instrumentation.db._dbapi import IN_SQLALCHEMY, SQLALCHEMY_LISTENING, DbInstrumentor
from lineage_instrumentation.db._naming import (
    Target,
    host_port,
    intern_target,
    postgres_target,
    sqlite_target,
)
from lineage_instrumentation.db._record import warn_once
from lineage_instrumentation.instrumentor import LibraryRequirement

__all__ = ["SQLAlchemyInstrumentor", "target_of_url"]

# SQLAlchemy backend name -> openlineage-sql dialect; any other backend is parsed as "generic".
_DIALECTS = {
    "postgresql": "postgres",
    "sqlite": "sqlite",
    "mysql": "mysql",
    "mariadb": "mysql",
    "mssql": "mssql",
    "snowflake": "snowflake",
    "bigquery": "bigquery",
    "redshift": "redshift",
    "hive": "hive",
    "databricks": "databricks",
    "duckdb": "duckdb",
    "clickhouse": "clickhouse",
}
_TARGETS: weakref.WeakKeyDictionary[Any, Target | None] = weakref.WeakKeyDictionary()


def target_of_url(url: Any) -> Target | None:
    """The naming of an engine's ``sqlalchemy.engine.URL`` (None: an in-memory SQLite)."""
    backend = url.get_backend_name()
    if backend == "postgresql":
        return postgres_target(url.host, url.port, url.database)
    if backend == "sqlite":
        return sqlite_target(url.database)
    if backend in ("mysql", "mariadb"):
        namespace = f"mysql://{host_port(url.host, url.port, 3306)}"
        return intern_target(Target(namespace, "mysql", url.database, None))
    if backend == "mssql":
        namespace = f"mssql://{host_port(url.host, url.port, 1433)}"
        return intern_target(Target(namespace, "mssql", url.database, "dbo"))
    host = url.host or "localhost"
    authority = f"{host}:{url.port}" if url.port else host
    dialect = _DIALECTS.get(backend, "generic")
    return intern_target(Target(f"{backend}://{authority}", dialect, url.database, None))


def _target(connection: Any) -> Target | None:
    engine = connection.engine
    try:
        return _TARGETS[engine]
    except KeyError:
        pass
    try:
        found = _TARGETS[engine] = target_of_url(engine.url)
    except Exception as exc:  # noqa: BLE001
        warn_once("naming an engine's database", exc)
        found = None
    return found


class SQLAlchemyInstrumentor(DbInstrumentor):
    """Lineage from SQLAlchemy engines (see the module docstring)."""

    name = "sqlalchemy"
    module = "sqlalchemy"
    requirements = (LibraryRequirement("sqlalchemy>=1.4,<3", "sqlalchemy"),)

    def _patch(self) -> None:
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        self._listeners: list[tuple[str, Callable[..., Any]]] = [
            ("before_cursor_execute", _before),
            ("after_cursor_execute", _after),
            ("handle_error", _error),
            ("commit", _commit),
            ("rollback", _rollback),
        ]
        for name, listener in self._listeners:
            event.listen(Engine, name, listener)
        SQLALCHEMY_LISTENING.on = True

    def _unpatch(self) -> None:
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        for name, listener in self._listeners:
            if event.contains(Engine, name, listener):
                event.remove(Engine, name, listener)
        SQLALCHEMY_LISTENING.on = False
        IN_SQLALCHEMY.depth = 0


def _before(*_args: Any) -> None:
    IN_SQLALCHEMY.depth += 1


def _after(
    conn: Any, _cursor: Any, statement: Any, _params: Any, _context: Any, _many: Any
) -> None:
    if IN_SQLALCHEMY.depth:
        IN_SQLALCHEMY.depth -= 1
    kind = SQLAlchemyInstrumentor.kind
    if not kind.active or not isinstance(statement, str) or kind.idle():
        return
    try:
        target = _target(conn)
    except Exception as exc:  # noqa: BLE001
        warn_once("naming an engine's database", exc)
        return
    kind.statement(conn, statement, target, None, _in_transaction)


def _in_transaction(conn: Any) -> bool:
    return bool(conn.in_transaction())


def _error(context: Any) -> None:
    if context.execution_context is not None and IN_SQLALCHEMY.depth:
        IN_SQLALCHEMY.depth -= 1
    kind = SQLAlchemyInstrumentor.kind
    conn = context.connection
    statement = context.statement
    if not kind.active or conn is None or not isinstance(statement, str):
        return
    error = context.original_exception
    kind.statement(conn, statement, None, error)


def _commit(conn: Any) -> None:
    kind = SQLAlchemyInstrumentor.kind
    if kind.transactions:
        kind.end_transaction(conn, committed=True)


def _rollback(conn: Any) -> None:
    kind = SQLAlchemyInstrumentor.kind
    if kind.transactions:
        kind.end_transaction(conn, committed=False)
