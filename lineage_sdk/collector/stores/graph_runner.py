"""The graph stores' seam to a server: Cypher runners, the dialect probe and node keys.

One copy, shared by the graph backend (:mod:`.graph_backend`), its tactics (:mod:`.falkordb`),
the reader of the pre-engine layout (:mod:`.graph_legacy`) and the store (:mod:`.graph`).
"""

from __future__ import annotations

import abc
import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import orjson

from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.config.redaction import redact
from lineage_sdk.exceptions import ConfigError, StoreError

__all__ = [
    "STORE_NAME",
    "GraphRunner",
    "Neo4jRunner",
    "StatementRunner",
    "detect_dialect",
    "name_key",
]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")
# Runs one statement with its parameters and returns the rows: ``GraphRunner.run``, or the same
# bound to one open transaction (``GraphRunner.transaction``).
StatementRunner = Callable[[str, Mapping[str, Any] | None], list[dict[str, Any]]]

STORE_NAME = "graph"


def name_key(*parts: str) -> str:
    """The fixed-size identity of a (namespace, name[, field]) node, which ``MERGE`` matches on
    (names are unbounded, index entries are not: docs/stores.md, ``graph``); the names are kept
    as properties."""
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()[:32]


class GraphRunner(abc.ABC):
    """Runs parameterised Cypher statements and returns their rows as dicts.

    The seam between the store and a server: :class:`Neo4jRunner` (the official driver over Bolt)
    is the default; a test harness may inject another (see tests/servers.py). Implementations raise
    :class:`StoreError` on any failure.
    """

    @abc.abstractmethod
    def run(self, query: str, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Execute ``query`` with ``parameters`` in its own transaction."""

    def transaction(self, work: Callable[[StatementRunner], _T]) -> _T:
        """``work(run)``; a runner that can runs all of ``work``'s statements in one transaction,
        so a batch lands whole and an answer built from several queries sees one snapshot."""
        return work(self.run)

    def run_all(self, statements: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Execute write statements in order, in one transaction where the runner can."""
        pending = list(statements)  # a transaction function may be run again

        def write(run: StatementRunner) -> None:
            for query, parameters in pending:
                run(query, parameters)

        self.transaction(write)

    @abc.abstractmethod
    def verify(self) -> None:
        """Raise StoreError unless the server answers."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections."""


class Neo4jRunner(GraphRunner):
    """The official neo4j driver: one long-lived driver, short timeouts, no driver-side retries.

    Each call is a managed transaction in a short-lived session from the driver's pool, not
    ``Driver.execute_query``: against FalkorDB's Bolt endpoint ``execute_query`` costs ~44 ms per
    call where a session's transaction costs 1-3 ms (measured with driver 6.4, docs/stores.md), and
    sessions let a whole batch of statements commit as one transaction.
    """

    def __init__(self, connection: ConnectionConfig, *, name: str = STORE_NAME) -> None:
        import neo4j

        self._neo4j = neo4j
        self._name = name
        self._database = connection.database
        timeout_s = connection.timeout_ms / 1000.0
        auth = (connection.username, connection.password or "") if connection.username else None
        try:
            self._driver = neo4j.GraphDatabase.driver(
                connection.uri,
                auth=auth,
                connection_timeout=timeout_s,
                connection_acquisition_timeout=timeout_s,
                max_transaction_retry_time=0.0,
                keep_alive=True,
            )
        except (neo4j.exceptions.ConfigurationError, ValueError) as exc:
            raise ConfigError(
                "connections.<graph_connection_name>.uri",
                redact(connection.uri, connection.password),
                f"not a usable Bolt URI ({type(exc).__name__})",
            ) from exc

    def transaction(self, work: Callable[[StatementRunner], _T]) -> _T:
        # A managed transaction with write access, reads included: they go to the leader, so a
        # lineage answer sees the last batch written.
        neo4j = self._neo4j
        kwargs: dict[str, Any] = {"database": self._database} if self._database else {}

        def in_transaction(tx: Any) -> _T:
            def run(query: str, parameters: Mapping[str, Any] | None) -> list[dict[str, Any]]:
                # Statements are module constants; event data only ever travels as parameters.
                return [record.data() for record in tx.run(query, dict(parameters or {}))]

            return work(run)

        try:
            with self._driver.session(**kwargs) as session:
                return session.execute_write(in_transaction)
        except (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, OSError) as exc:
            raise StoreError(self._name, f"{type(exc).__name__}: {_short(exc)}") from exc

    def run(self, query: str, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        return self.transaction(lambda run: run(query, parameters))

    def verify(self) -> None:
        self.run("RETURN 1 AS ok")

    def close(self) -> None:
        try:
            self._driver.close()
        except Exception:  # noqa: BLE001 - closing must not raise into shutdown
            _log.debug("graph driver close failed", exc_info=True)


def _short(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."


def detect_dialect(runner: GraphRunner) -> str:
    """``neo4j`` when the server answers ``dbms.components()`` and names itself, else
    ``opencypher`` (FalkorDB and other openCypher servers)."""
    try:
        rows = runner.run("CALL dbms.components() YIELD name RETURN name")
    except StoreError:
        return "opencypher"
    names = " ".join(str(r.get("name", "")) for r in rows).lower()
    return "neo4j" if "neo4j" in names else "opencypher"
