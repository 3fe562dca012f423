"""``Sqlite3Instrumentor``: the tables ``sqlite3`` statements read and write, as datasets.

``sqlite3.connect`` is a C function and ``sqlite3.Connection``/``Cursor`` are C types whose
methods cannot be replaced, so the instrumentor replaces the module attribute ``sqlite3.connect``
(and ``sqlite3.dbapi2.connect``) with a function that opens the connection with a factory
subclass of ``sqlite3.Connection`` (mixed into the caller's own ``factory=`` class if one is
given). That subclass hands out cursors of a ``sqlite3.Cursor`` subclass, so ``execute``,
``executemany`` and ``executescript`` are seen on the connection and on its cursors, and it ends
the transaction's run on ``commit``, ``rollback``, ``close`` and ``with connection:``.

Not seen: connections opened before ``instrument()`` or with a ``connect`` bound earlier
(``from sqlite3 import connect`` before instrumenting; under ``lineage-instrument`` the bootstrap
runs first, so this only concerns code that instruments by hand), connections built by calling
``sqlite3.Connection(...)`` directly, cursors of a ``factory=`` given to ``cursor()`` or of a
connection factory class that defines its own ``cursor()``, and
in-memory or temporary databases (no one else can read them; see :mod:`._naming`).

Namespace ``sqlite://{absolute path of the database file}``, names ``{schema}.{table}``
(``main`` unless the table is in an attached database).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from lineage_instrumentation.db._dbapi import IN_SQLALCHEMY, SQLALCHEMY_LISTENING, DbInstrumentor
from lineage_instrumentation.db._naming import Target, sqlite_target
from lineage_instrumentation.db._record import warn_once
from lineage_instrumentation.instrumentor import Patcher

__all__ = ["Sqlite3Instrumentor"]


class Sqlite3Instrumentor(DbInstrumentor):
    """Lineage from the standard library's ``sqlite3`` (see the module docstring)."""

    name = "sqlite3"
    # The standard library: nothing to check (a Python without _sqlite3 fails at import).
    module = "sqlite3"
    requirements = ()

    def _patch(self) -> None:
        import sqlite3
        import sqlite3.dbapi2

        patcher = Patcher()
        patcher.patch(sqlite3, "connect", _connect)
        patcher.patch(sqlite3.dbapi2, "connect", _connect)
        self._patcher = patcher

    def _unpatch(self) -> None:
        self._patcher.restore()


def _seen(connection: Any, sql: Any, error: BaseException | None) -> None:
    kind = Sqlite3Instrumentor.kind
    if not kind.active or (SQLALCHEMY_LISTENING.on and IN_SQLALCHEMY.depth):
        return
    if not isinstance(sql, str):
        return
    if error is None and kind.idle():
        return
    target: Target | None = getattr(connection, "_lineage_target", None)
    if target is None:
        return
    kind.statement(connection, sql, target, error, _in_transaction)


def _in_transaction(connection: Any) -> bool:
    return bool(connection.in_transaction)


def _cursor_class(base: type[Any]) -> type[Any]:
    class LineageCursor(base):  # type: ignore[misc]
        """A ``sqlite3.Cursor`` whose statements are recorded."""

        def execute(self, sql: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                result = super().execute(sql, *args, **kwargs)
            except BaseException as exc:
                _seen(self.connection, sql, exc)
                raise
            _seen(self.connection, sql, None)
            return result

        def executemany(self, sql: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                result = super().executemany(sql, *args, **kwargs)
            except BaseException as exc:
                _seen(self.connection, sql, exc)
                raise
            _seen(self.connection, sql, None)
            return result

        def executescript(self, sql_script: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                result = super().executescript(sql_script, *args, **kwargs)
            except BaseException as exc:
                _seen(self.connection, sql_script, exc)
                raise
            _seen(self.connection, sql_script, None)
            return result

    return LineageCursor


def _end(connection: Any, committed: bool, error: BaseException | None = None) -> None:
    kind = Sqlite3Instrumentor.kind
    if kind.transactions:
        kind.end_transaction(connection, committed=committed, error=error)


def _connection_class(base: type[Any], cursor_base: type[Any]) -> type[Any]:
    import sqlite3

    # A factory class with a cursor() of its own keeps it (its cursors are then not seen).
    own_cursor = base.cursor is not sqlite3.Connection.cursor

    class LineageConnection(base):  # type: ignore[misc]
        """A ``sqlite3.Connection`` that knows its dataset namespace and records statements."""

        _lineage_target: Target | None = None

        def cursor(self, *args: Any, **kwargs: Any) -> Any:
            if args or kwargs or own_cursor:  # the caller's (or the factory class's) choice
                return super().cursor(*args, **kwargs)
            return super().cursor(_CURSOR)

        # The C shortcuts make their cursor without calling cursor(): do what they do, with ours.
        def execute(self, sql: Any, *args: Any) -> Any:
            return self.cursor().execute(sql, *args)

        def executemany(self, sql: Any, *args: Any) -> Any:
            return self.cursor().executemany(sql, *args)

        def executescript(self, sql_script: Any) -> Any:
            return self.cursor().executescript(sql_script)

        def commit(self) -> None:
            try:
                super().commit()
            except BaseException as exc:
                _end(self, False, exc)
                raise
            _end(self, True)

        def rollback(self) -> None:
            super().rollback()
            _end(self, False)

        def close(self) -> None:
            super().close()
            _end(self, False)

        def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
            result = super().__exit__(exc_type, exc, tb)
            _end(self, exc_type is None)
            return result

    _CURSOR = cursor_base
    return LineageConnection


_CLASSES: dict[type[Any], type[Any]] = {}


def _factory_for(factory: type[Any] | None) -> type[Any]:
    import sqlite3

    base = factory or sqlite3.Connection
    found = _CLASSES.get(base)
    if found is None:
        found = _CLASSES[base] = _connection_class(base, _cursor_class(sqlite3.Cursor))
    return found


def _connect(original: Callable[..., Any]) -> Callable[..., Any]:
    import sqlite3

    def connect(database: Any, *args: Any, **kwargs: Any) -> Any:
        kind = Sqlite3Instrumentor.kind
        factory = kwargs.get("factory")
        if (
            not kind.active
            or len(args) >= 5
            or (  # factory given by position: leave it
                factory is not None
                and not (isinstance(factory, type) and issubclass(factory, sqlite3.Connection))
            )
        ):
            return original(database, *args, **kwargs)
        try:
            kwargs["factory"] = _factory_for(factory)
        except Exception as exc:  # noqa: BLE001 - connect as the caller asked
            warn_once("preparing a connection class", exc)
            return original(database, *args, **kwargs)
        connection = original(database, *args, **kwargs)
        try:
            path = os.fsdecode(database) if isinstance(database, str | bytes | os.PathLike) else ""
            connection._lineage_target = sqlite_target(path)
        except Exception as exc:  # noqa: BLE001
            warn_once("naming a database file", exc)
        return connection

    return connect
