"""What the DB-API instrumentors share: the instrumentor base, and statement text.

SQLAlchemy drives the same DB-API drivers; while its engine events handle a statement
(:data:`IN_SQLALCHEMY`), the driver-level instrumentors leave that statement alone so it is not
analysed twice.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Any, ClassVar

from lineage_instrumentation.db._config import DbInstrumentationConfig
from lineage_instrumentation.db._record import DbKind, new_kind
from lineage_instrumentation.instrumentor import BaseInstrumentor, LibraryRequirement
from lineage_sdk.sdk.provider import STATE

__all__ = ["IN_SQLALCHEMY", "DbInstrumentor", "statement_text"]


class _InSqlAlchemy(threading.local):
    depth = 0


IN_SQLALCHEMY = _InSqlAlchemy()


def statement_text(query: Any, context: Any = None) -> str | None:
    """The SQL text of a driver's query object: ``str``, ``bytes``, or a psycopg ``Composable``
    (rendered against ``context``, a cursor or connection). None when it has no text."""
    if isinstance(query, str):
        return query
    if isinstance(query, bytes | bytearray | memoryview):
        return bytes(query).decode("utf-8", "replace")
    as_string = getattr(query, "as_string", None)
    if as_string is not None:
        try:
            text = as_string(context)
        except Exception:  # noqa: BLE001 - an unrenderable query still runs; we just skip it
            return None
        return text if isinstance(text, str) else None
    return None


class DbInstrumentor(BaseInstrumentor):
    """A database instrumentor: ``instrument(outside_run=..., job_name=...)`` overrides its
    ``[lineage.instrumentation.<name>]`` table (``config_class``)."""

    config_class: ClassVar[type[DbInstrumentationConfig]] = DbInstrumentationConfig
    kind: ClassVar[DbKind]
    requirements: ClassVar[tuple[LibraryRequirement, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name:
            cls.kind = new_kind(cls.name)

    def instrumentation_dependencies(self) -> Collection[LibraryRequirement]:
        return self.requirements

    def _instrument(self, **kwargs: Any) -> None:
        self.kind.configure(kwargs.get("outside_run"), kwargs.get("job_name"), STATE.sdk)
        self._patch()
        self.kind.active = True

    def _uninstrument(self, **kwargs: Any) -> None:
        self.kind.active = False  # connections made earlier now pass straight through
        self._unpatch()
        self.kind.end_all()

    def _patch(self) -> None:
        raise NotImplementedError

    def _unpatch(self) -> None:
        raise NotImplementedError
