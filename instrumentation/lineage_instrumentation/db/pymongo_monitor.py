"""``PymongoInstrumentor``: the collections pymongo commands read and write, as datasets.

Through pymongo's command monitoring: ``instrument()`` wraps ``MongoClient.__init__`` so every
client made afterwards gets a ``CommandListener`` (``uninstrument()`` restores it; listeners of
clients made meanwhile then do nothing). The listener's ``started`` runs on the thread that sends
the command, so the current run is the caller's.

- ``find``, ``aggregate``, ``count`` and ``distinct`` read their collection (inputs);
- ``insert``, ``update``, ``delete``, ``findAndModify`` and ``bulkWrite`` write theirs (outputs);
- in pipelines (``aggregate``, and those nested in ``$lookup``, ``$unionWith`` and ``$facet``),
  ``$lookup``, ``$graphLookup`` and ``$unionWith`` add inputs, ``$out`` and ``$merge`` outputs.

Datasets are recorded when the command succeeds. Namespace ``mongodb://{host}:{port}`` of the
server that answered, name ``{database}.{collection}``. In ``run_per_transaction`` mode a command
in a multi-document transaction joins the run of its session's transaction (ended by
``commitTransaction`` or ``abortTransaction``); any other command is a run of its own.

Not seen: clients made before ``instrument()``, commands that name no collection, and
collections a server-side JavaScript function or a view's definition reads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from lineage_instrumentation.db._dbapi import DbInstrumentor
from lineage_instrumentation.db._naming import mongodb_target
from lineage_instrumentation.db._record import warn_once
from lineage_instrumentation.db._sql import Analysis
from lineage_instrumentation.instrumentor import LibraryRequirement, Patcher
from lineage_sdk.models.dataset import LineageDataset

__all__ = ["PymongoInstrumentor", "command_collections"]

_READS = {"find": "find", "aggregate": "aggregate", "count": "count", "distinct": "distinct"}
_WRITES = {
    "insert": "insert",
    "update": "update",
    "delete": "delete",
    "findAndModify": "findAndModify",
    "findandmodify": "findAndModify",
}
_TRANSACTION_ENDS = {"commitTransaction": True, "abortTransaction": False}
_MAX_DATASETS = 10_000
_DATASETS: dict[tuple[str, str], LineageDataset] = {}
_MAX_PENDING = 10_000


def _name(database: str, value: Any) -> str | None:
    """``database.collection`` of a stage's collection argument (a name or ``{db, coll}``)."""
    if isinstance(value, str):
        return f"{database}.{value}" if value else None
    if isinstance(value, Mapping):
        coll = value.get("coll")
        if isinstance(coll, str) and coll:
            db = value.get("db")
            return f"{db if isinstance(db, str) and db else database}.{coll}"
    return None


def _walk_pipeline(
    database: str, pipeline: Any, reads: dict[str, None], writes: dict[str, None]
) -> None:
    if not isinstance(pipeline, list | tuple):
        return
    for stage in pipeline:
        if not isinstance(stage, Mapping):
            continue
        for op, arg in stage.items():
            if op in ("$lookup", "$graphLookup"):
                if isinstance(arg, Mapping):
                    found = _name(database, arg.get("from"))
                    if found:
                        reads[found] = None
                    _walk_pipeline(database, arg.get("pipeline"), reads, writes)
            elif op == "$unionWith":
                if isinstance(arg, Mapping):
                    found = _name(database, arg.get("coll"))
                    _walk_pipeline(database, arg.get("pipeline"), reads, writes)
                else:
                    found = _name(database, arg)
                if found:
                    reads[found] = None
            elif op == "$facet" and isinstance(arg, Mapping):
                for sub in arg.values():
                    _walk_pipeline(database, sub, reads, writes)
            elif op == "$out":
                found = _name(database, arg)
                if found:
                    writes[found] = None
            elif op == "$merge":
                into = arg.get("into") if isinstance(arg, Mapping) else arg
                found = _name(database, into)
                if found:
                    writes[found] = None


def command_collections(
    command_name: str, command: Mapping[str, Any], database: str
) -> tuple[list[str], list[str]]:
    """``(read, written)``: the ``database.collection`` names a command reads and writes."""
    reads: dict[str, None] = {}
    writes: dict[str, None] = {}
    if command_name in _READS:
        found = _name(database, command.get(command_name))
        if found:
            reads[found] = None
        if command_name == "aggregate":
            _walk_pipeline(database, command.get("pipeline"), reads, writes)
    elif command_name in _WRITES:
        found = _name(database, command.get(command_name))
        if found:
            writes[found] = None
    elif command_name == "bulkWrite":
        for info in command.get("nsInfo") or ():
            ns = info.get("ns") if isinstance(info, Mapping) else None
            if isinstance(ns, str) and "." in ns:
                writes[ns] = None
    return list(reads), list(writes)


def _dataset(namespace: str, name: str) -> LineageDataset:
    key = (namespace, name)
    found = _DATASETS.get(key)
    if found is None:
        if len(_DATASETS) >= _MAX_DATASETS:
            _DATASETS.clear()
        found = _DATASETS[key] = LineageDataset(namespace, name)
    return found


class PymongoInstrumentor(DbInstrumentor):
    """Lineage from pymongo 4 (see the module docstring)."""

    name = "pymongo"
    module = "pymongo"
    requirements = (LibraryRequirement("pymongo>=4.0,<5", "pymongo"),)

    def _patch(self) -> None:
        import pymongo

        listener = _listener_class()()
        patcher = Patcher()
        for cls in _client_classes(pymongo):
            patcher.patch(cls, "__init__", lambda original: _client_init(original, listener))
        self._patcher = patcher

    def _unpatch(self) -> None:
        self._patcher.restore()


def _client_classes(pymongo: Any) -> Iterable[type[Any]]:
    yield pymongo.MongoClient
    try:
        from pymongo import AsyncMongoClient
    except ImportError:  # pymongo before 4.9
        return
    yield AsyncMongoClient


def _client_init(original: Callable[..., Any], listener: Any) -> Callable[..., Any]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if PymongoInstrumentor.kind.active:
            given = kwargs.get("event_listeners")
            listeners = list(given) if given else []
            if listener not in listeners:
                listeners.append(listener)
            kwargs["event_listeners"] = listeners
        original(self, *args, **kwargs)

    return __init__


class _Pending(threading.local):
    def __init__(self) -> None:
        self.by_request: dict[tuple[int, Any], tuple[Any, object, Analysis | None, str]] = {}


_PENDING_LOCAL = _Pending()


def _session_key(command: Mapping[str, Any]) -> tuple[str, bytes] | None:
    lsid = command.get("lsid")
    if command.get("autocommit") is False and isinstance(lsid, Mapping):
        raw: Any = lsid.get("id")
        try:
            return ("mongodb-session", bytes(raw))
        except Exception:  # noqa: BLE001
            return None
    return None


def _listener_class() -> type[Any]:
    from pymongo import monitoring

    class LineageCommandListener(monitoring.CommandListener):
        """Turns commands into datasets of the current run (see the module docstring)."""

        def started(self, event: Any) -> None:
            kind = PymongoInstrumentor.kind
            if not kind.active:
                return
            try:
                name = event.command_name
                command = event.command
                ends = _TRANSACTION_ENDS.get(name)
                if ends is not None:
                    key = _session_key({**command, "autocommit": False})
                    if key is not None:
                        pending = _PENDING_LOCAL.by_request
                        pending[(event.request_id, event.connection_id)] = (key, name, None, "")
                    return
                reads, writes = command_collections(name, command, event.database_name)
                if not reads and not writes:
                    return
                host, port = event.connection_id[:2]
                namespace = mongodb_target(str(host), int(port))
                analysis = Analysis(
                    tuple(_dataset(namespace, n) for n in reads),
                    tuple(_dataset(namespace, n) for n in writes),
                )
                session = _session_key(command)
                pending = _PENDING_LOCAL.by_request
                if len(pending) >= _MAX_PENDING:
                    pending.clear()
                pending[(event.request_id, event.connection_id)] = (
                    session,
                    hash((name, analysis.inputs, analysis.outputs)),
                    analysis,
                    f"{name} {event.database_name}",
                )
            except Exception as exc:  # noqa: BLE001
                warn_once("reading a MongoDB command", exc)

        def succeeded(self, event: Any) -> None:
            self._done(event, None)

        def failed(self, event: Any) -> None:
            failure = getattr(event, "failure", None)
            self._done(event, _CommandFailed(str(failure)))

        def _done(self, event: Any, error: BaseException | None) -> None:
            entry = _PENDING_LOCAL.by_request.pop((event.request_id, event.connection_id), None)
            if entry is None:
                return
            kind = PymongoInstrumentor.kind
            session, key, analysis, text = entry
            if analysis is None:  # commitTransaction / abortTransaction
                if kind.transactions:
                    committed = key == "commitTransaction" and error is None
                    kind.end_transaction(session, committed=committed, error=error)
                return
            found = analysis
            kind.observe(
                session if session is not None else object(),  # no transaction: a run of its own
                key,
                lambda _producer: found,
                text,
                error,
                None if session is not None else _not_in_transaction,
            )

    return LineageCommandListener


def _not_in_transaction(_key: object) -> bool:
    return False


class _CommandFailed(Exception):
    """A MongoDB command failed: the reason its run (in ``run_per_transaction`` mode) FAILs."""
