"""The MongoDB connection of the ``document`` store: settings, client, error mapping, upserts.

One copy for the document backend (:mod:`.document_backend`), its store (:mod:`.document`) and
the reader of the layout of a release before the engine (:mod:`.document_legacy`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field

from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.config.redaction import redact
from lineage_sdk.config.sections import Section
from lineage_sdk.exceptions import ConfigError, StoreError

__all__ = [
    "DEFAULT_DATABASE",
    "DEFAULT_URI",
    "DUPLICATE_KEY",
    "PERMANENT_CODES",
    "DocumentConnector",
    "DocumentStoreConfig",
    "ErrorMapper",
    "connect",
    "uri_database",
]

#: MongoDB's standard local address, assumed for a connection name that is not configured.
DEFAULT_URI = "mongodb://127.0.0.1:27017"
#: The database of a URI that names none and a connection without ``database``.
DEFAULT_DATABASE = "lineage"
DUPLICATE_KEY = 11000
#: Server error codes that will fail the same way on every retry.
PERMANENT_CODES = frozenset({2, 9, 14, 17, 52, 55, 121, 10334, 17419, 16733})


class DocumentStoreConfig(Section):
    """The collector's `document` store (MongoDB)."""

    collection_name: str = Field(
        default="audit_lineage_events",
        min_length=1,
        description="MongoDB collection for the raw events.",
    )
    document_connection_name: str = Field(
        default="default_mongo",
        min_length=1,
        description="Name of the [lineage.connections.NAME] section with the MongoDB URI.",
    )


def uri_database(uri: str) -> str | None:
    """The database a MongoDB URI names in its path, if any."""
    try:
        path = urlsplit(uri).path
    except ValueError:
        return None
    name = path.lstrip("/").split("?", 1)[0]
    return name or None


def connect(connection: ConnectionConfig) -> tuple[Any, Any]:
    """A pymongo client for ``connection`` and its database (the connection's ``database``, else
    the URI's, else :data:`DEFAULT_DATABASE`). Connects lazily: nothing is sent yet."""
    import pymongo
    from pymongo.errors import ConfigurationError, InvalidURI

    timeout = connection.timeout_ms
    kwargs: dict[str, Any] = {
        "serverSelectionTimeoutMS": timeout,
        "connectTimeoutMS": timeout,
        "socketTimeoutMS": timeout * 3,
        "tz_aware": True,
        "retryWrites": True,
        "appname": "lineage-collector",
    }
    if connection.username is not None:
        kwargs["username"] = connection.username
    if connection.password is not None:
        kwargs["password"] = connection.password
    try:
        client: Any = pymongo.MongoClient(connection.uri, **kwargs)
    except (ConfigurationError, InvalidURI, ValueError, TypeError) as exc:
        raise ConfigError(
            "connections.<document_connection_name>.uri",
            redact(connection.uri, connection.password),
            f"not a usable MongoDB URI: {type(exc).__name__}",
        ) from exc
    db_name = connection.database or uri_database(connection.uri) or DEFAULT_DATABASE
    return client, client[db_name]


class ErrorMapper:
    """Turns pymongo errors into StoreError: network/timeouts retryable, bad documents permanent."""

    def __init__(self, store: str, action: str) -> None:
        self._store = store
        self._action = action

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> Literal[False]:
        if exc is None or isinstance(exc, StoreError):
            return False
        from bson.errors import BSONError, InvalidDocument
        from pymongo.errors import (
            BulkWriteError,
            ConnectionFailure,
            DocumentTooLarge,
            OperationFailure,
            PyMongoError,
        )

        if isinstance(exc, BulkWriteError):
            raise StoreError(self._store, f"{self._action}: bulk write failed") from exc
        if isinstance(exc, DocumentTooLarge | InvalidDocument | BSONError | OverflowError):
            raise StoreError(
                self._store, f"{self._action}: event cannot be stored: {exc}", permanent=True
            ) from exc
        if isinstance(exc, ConnectionFailure):
            raise StoreError(
                self._store, f"{self._action}: server unreachable ({type(exc).__name__})"
            ) from exc
        if isinstance(exc, OperationFailure):
            raise StoreError(
                self._store,
                f"{self._action}: code {exc.code}: {str(exc)[:200]}",
                permanent=exc.code in PERMANENT_CODES and exc.code != DUPLICATE_KEY,
            ) from exc
        if isinstance(exc, PyMongoError):
            raise StoreError(
                self._store, f"{self._action}: {type(exc).__name__}: {str(exc)[:200]}"
            ) from exc
        return False


class DocumentConnector:
    """One MongoDB connection, opened lazily: its database, error mapping (errors name the store
    ``name``), bulk upserts with retries, ``ping`` and close. Creates nothing."""

    def __init__(self, connection: ConnectionConfig, name: str = "document") -> None:
        self._connection = connection
        self.name = name
        self._client: Any = None
        self._database: Any = None

    @property
    def database(self) -> Any:
        """The pymongo database (connects lazily)."""
        if self._database is None:
            self._client, self._database = connect(self._connection)
        return self._database

    def errors(self, action: str) -> ErrorMapper:
        return ErrorMapper(self.name, action)

    def bulk_upsert(self, collection: Any, ops: Sequence[Any], action: str) -> None:
        """``ops`` (upserts) in unordered bulks of 1,000, errors mapped by :meth:`errors`."""
        from pymongo.errors import BulkWriteError

        for start in range(0, len(ops), 1000):
            pending = list(ops[start : start + 1000])
            for attempt in range(3):
                try:
                    with self.errors(action):
                        collection.bulk_write(pending, ordered=False)
                    break
                except StoreError as exc:
                    # Two writers inserting one new document at once: the loser's upsert fails
                    # on the unique _id and succeeds as an update when tried again.
                    cause = exc.__cause__
                    if not isinstance(cause, BulkWriteError) or attempt == 2:
                        raise
                    failed = (cause.details or {}).get("writeErrors", [])
                    if not failed or any(e.get("code") != DUPLICATE_KEY for e in failed):
                        raise
                    pending = [pending[e["index"]] for e in failed]

    def check(self) -> None:
        with self.errors("ping"):
            self.database.client.admin.command("ping")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
            self._database = None
