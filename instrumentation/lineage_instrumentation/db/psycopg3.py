"""``PsycopgInstrumentor``: the tables psycopg 3 statements read and write, as datasets.

Patched (restored exactly by ``uninstrument()``): ``execute``/``executemany`` of ``Cursor`` (so of
``ClientCursor``, ``RawCursor`` and ``Connection.execute``), ``ServerCursor.execute``, the same on
the async classes, ``commit``/``rollback``/``close`` of ``Connection``/``AsyncConnection``
(which end a transaction's run in ``run_per_transaction`` mode; closing with a transaction open
rolls it back), and the exit of ``Transaction``/``AsyncTransaction`` (``conn.transaction()``
blocks, which commit or roll back without calling ``commit``/``rollback``: the run ends when the
outermost block exits, COMPLETE on commit, FAIL when the block raised or asked for a rollback).

Namespace ``postgres://{host}:{port}`` from the connection, names ``{database}.{schema}.{table}``
(``public`` when the statement does not name a schema). ``Cursor.stream()`` and ``COPY`` are not
seen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lineage_instrumentation.db._dbapi import (
    IN_SQLALCHEMY,
    SQLALCHEMY_LISTENING,
    DbInstrumentor,
    statement_text,
)
from lineage_instrumentation.db._naming import Target, postgres_target
from lineage_instrumentation.db._record import seen_in_current_run, warn_once
from lineage_instrumentation.instrumentor import LibraryRequirement, Patcher
from lineage_sdk.sdk.runs import CURRENT_RUN, LineageRun

__all__ = ["PsycopgInstrumentor"]

_IDLE = 0  # libpq PQTRANS_IDLE: no transaction open


def _target(connection: Any) -> Target | None:
    try:
        found: Target | None = connection.__dict__.get("_lineage_target")
        if found is None:
            info = connection.info
            found = postgres_target(info.host, info.port, info.dbname)
            connection._lineage_target = found
        return found
    except Exception as exc:  # noqa: BLE001 - a closed or odd connection: no lineage from it
        warn_once("reading the connection's address", exc)
        return None


def _in_transaction(connection: Any) -> bool:
    return int(connection.pgconn.transaction_status) != _IDLE


def _block_ended(
    transaction: Any, exc_val: BaseException | None, error: BaseException | None
) -> None:
    """A ``conn.transaction()`` block exited (``exc_val``: what its body raised; ``error``: what
    the exit itself raised). If that closed the database transaction (the outermost block, not a
    savepoint), its run ends now: COMPLETE on commit, FAIL on an exception or a rollback."""
    kind = PsycopgInstrumentor.kind
    try:
        connection = getattr(transaction, "_conn", None)
        if connection is None or connection not in kind.transactions:
            return
        try:
            still_open = error is None and _in_transaction(connection)
        except Exception:  # noqa: BLE001 - a broken connection: its transaction is over
            still_open = False
        if still_open:
            return
        import psycopg

        failure = error
        if failure is None and exc_val is not None and not isinstance(exc_val, psycopg.Rollback):
            failure = exc_val
        committed = exc_val is None and error is None
    except Exception as exc:  # noqa: BLE001 - telemetry never breaks the block's exit
        warn_once("ending a transaction block's run", exc)
        return
    kind.end_transaction(connection, committed=committed, error=failure)


def _sync_block_exit(original: Callable[..., Any]) -> Callable[..., Any]:
    kind = PsycopgInstrumentor.kind

    def __exit__(self: Any, exc_type: Any, exc_val: Any, exc_tb: Any) -> Any:
        if not kind.transactions:
            return original(self, exc_type, exc_val, exc_tb)
        try:
            result = original(self, exc_type, exc_val, exc_tb)
        except BaseException as exc:
            _block_ended(self, exc_val, exc)
            raise
        _block_ended(self, exc_val, None)
        return result

    return __exit__


def _async_block_exit(original: Callable[..., Any]) -> Callable[..., Any]:
    kind = PsycopgInstrumentor.kind

    async def __aexit__(self: Any, exc_type: Any, exc_val: Any, exc_tb: Any) -> Any:
        if not kind.transactions:
            return await original(self, exc_type, exc_val, exc_tb)
        try:
            result = await original(self, exc_type, exc_val, exc_tb)
        except BaseException as exc:
            _block_ended(self, exc_val, exc)
            raise
        _block_ended(self, exc_val, None)
        return result

    return __aexit__


class PsycopgInstrumentor(DbInstrumentor):
    """Lineage from psycopg 3 (see the module docstring)."""

    name = "psycopg"
    module = "psycopg"
    requirements = (LibraryRequirement("psycopg>=3.1,<4", "psycopg"),)

    def _patch(self) -> None:
        import psycopg

        patcher = Patcher()
        for cls in (psycopg.Cursor, psycopg.ServerCursor):
            patcher.patch(cls, "execute", _sync_execute)
        patcher.patch(psycopg.Cursor, "executemany", _sync_executemany)
        for acls in (psycopg.AsyncCursor, psycopg.AsyncServerCursor):
            patcher.patch(acls, "execute", _async_execute)
        patcher.patch(psycopg.AsyncCursor, "executemany", _async_execute)
        patcher.patch(psycopg.Connection, "commit", lambda o: _sync_end(o, committed=True))
        patcher.patch(psycopg.Connection, "rollback", lambda o: _sync_end(o, committed=False))
        patcher.patch(psycopg.Connection, "close", lambda o: _sync_end(o, committed=False))
        patcher.patch(psycopg.AsyncConnection, "commit", lambda o: _async_end(o, committed=True))
        patcher.patch(psycopg.AsyncConnection, "rollback", lambda o: _async_end(o, committed=False))
        patcher.patch(psycopg.AsyncConnection, "close", lambda o: _async_end(o, committed=False))
        patcher.patch(psycopg.Transaction, "__exit__", _sync_block_exit)
        patcher.patch(psycopg.AsyncTransaction, "__aexit__", _async_block_exit)
        self._patcher = patcher

    def _unpatch(self) -> None:
        self._patcher.restore()


def _sync_execute(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Cursor.execute``/``ServerCursor.execute``: the hot path. ``params`` is named rather than
    forwarded through ``*args`` (that forwarding alone cost ~0.35 µs per statement here)."""
    kind = PsycopgInstrumentor.kind
    current = CURRENT_RUN.get
    sa = SQLALCHEMY_LISTENING

    def execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if not kind.active or (sa.on and IN_SQLALCHEMY.depth):
            return original(self, query, params, **kwargs)
        try:
            if kwargs:
                result = original(self, query, params, **kwargs)
            else:
                result = original(self, query, params)
        except BaseException as exc:
            _seen(self, query, exc)
            raise
        # Inline (a function call costs ~0.15 µs here): the statement object the connection
        # last recorded in this run is one identity check; outside any run, usually nothing.
        run = current()
        if run is not None:
            try:
                last = self._conn._lineage_last  # set by _recorded, on the connection's first
            except AttributeError:
                last = None
            if last is None or last[1] is not query or last[0] is not run:
                _recorded(self, query, run)
        elif not kind.quiet_outside_runs():
            _seen(self, query, None)
        return result

    return execute


def _sync_executemany(original: Callable[..., Any]) -> Callable[..., Any]:
    kind = PsycopgInstrumentor.kind

    def executemany(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if not kind.active or (SQLALCHEMY_LISTENING.on and IN_SQLALCHEMY.depth):
            return original(self, query, *args, **kwargs)
        try:
            result = original(self, query, *args, **kwargs)
        except BaseException as exc:
            _seen(self, query, exc)
            raise
        _succeeded(self, query)
        return result

    return executemany


def _async_execute(original: Callable[..., Any]) -> Callable[..., Any]:
    kind = PsycopgInstrumentor.kind

    async def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if not kind.active or (SQLALCHEMY_LISTENING.on and IN_SQLALCHEMY.depth):
            return await original(self, query, *args, **kwargs)
        try:
            result = await original(self, query, *args, **kwargs)
        except BaseException as exc:
            _seen(self, query, exc)
            raise
        _succeeded(self, query)
        return result

    return execute


def _succeeded(cursor: Any, query: Any) -> None:
    """What ``execute`` does inline after a statement succeeded, for the other entry points."""
    run = CURRENT_RUN.get()
    if run is not None:
        last = getattr(cursor._conn, "_lineage_last", None)
        if last is None or last[1] is not query or last[0] is not run:
            _recorded(cursor, query, run)
    elif not PsycopgInstrumentor.kind.quiet_outside_runs():
        _seen(cursor, query, None)


def _recorded(cursor: Any, query: Any, run: LineageRun) -> None:
    """A statement that succeeded in ``run`` and is not the connection's last one: recorded if
    the run has not seen its text yet. Then it becomes the connection's last statement, so its
    next execution (the same object: a constant, or a variable reused in a loop) is one identity
    check. The connection keeps a reference to that one statement and run until the next."""
    connection = cursor._conn
    last: tuple[LineageRun, Any] | None = (run, query)
    target = getattr(connection, "_lineage_target", None)
    if target is None or type(query) is not str or not seen_in_current_run(query, target):
        _seen(cursor, query, None)
        target = getattr(connection, "_lineage_target", None)
        if target is None or type(query) is not str or not seen_in_current_run(query, target):
            last = None  # not recorded (no text, unreadable address, run memo full): ask again
    try:
        connection._lineage_last = last
    except Exception as exc:  # noqa: BLE001 - a connection class without a __dict__
        warn_once("remembering a connection's last statement", exc)


def _seen(cursor: Any, query: Any, error: BaseException | None) -> None:
    try:
        connection = cursor.connection
        text = statement_text(query, cursor)
    except Exception as exc:  # noqa: BLE001
        warn_once("reading a statement", exc)
        return
    if text is None:
        return
    PsycopgInstrumentor.kind.statement(
        connection, text, _target(connection), error, _in_transaction
    )


def _sync_end(original: Callable[..., Any], *, committed: bool) -> Callable[..., Any]:
    kind = PsycopgInstrumentor.kind

    def end(self: Any) -> Any:
        if not kind.transactions:
            return original(self)
        try:
            result = original(self)
        except BaseException as exc:
            kind.end_transaction(self, committed=False, error=exc)
            raise
        kind.end_transaction(self, committed=committed)
        return result

    return end


def _async_end(original: Callable[..., Any], *, committed: bool) -> Callable[..., Any]:
    kind = PsycopgInstrumentor.kind

    async def end(self: Any) -> Any:
        if not kind.transactions:
            return await original(self)
        try:
            result = await original(self)
        except BaseException as exc:
            kind.end_transaction(self, committed=False, error=exc)
            raise
        kind.end_transaction(self, committed=committed)
        return result

    return end
