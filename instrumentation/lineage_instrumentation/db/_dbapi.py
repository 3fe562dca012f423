"""What the DB-API instrumentors share: the instrumentor base, and statement text.

SQLAlchemy drives the same DB-API drivers; while its engine events handle a statement
(:data:`IN_SQLALCHEMY`), the driver-level instrumentors leave that statement alone so it is not
analysed twice.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
from collections.abc import Callable, Collection
from types import ModuleType
from typing import Any, ClassVar

from lineage_instrumentation.config import DbInstrumentationConfig
from lineage_instrumentation.db._record import DbKind, new_kind, warn_once
from lineage_instrumentation.instrumentor import BaseInstrumentor, LibraryRequirement
from lineage_sdk.sdk.provider import STATE

__all__ = [
    "IN_SQLALCHEMY",
    "SQLALCHEMY_LISTENING",
    "DbInstrumentor",
    "cancel_when_imported",
    "statement_text",
    "when_imported",
]


class _InSqlAlchemy(threading.local):
    depth = 0


IN_SQLALCHEMY = _InSqlAlchemy()


class _SqlAlchemyListening:
    """Whether SQLAlchemy's engine listeners are installed: only then can a driver call come
    from SQLAlchemy, and only then do the drivers read :data:`IN_SQLALCHEMY` (a thread-local
    read costs about 0.1 µs, a measurable part of a statement's instrumentation)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


SQLALCHEMY_LISTENING = _SqlAlchemyListening()


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


class _PostImportHooks(importlib.abc.MetaPathFinder):
    """Runs a callback right after a module is first imported (the import lock is held, so it
    runs before any other thread can use the module).

    A program under ``lineage-instrument`` then pays for importing SQLAlchemy, psycopg or
    pymongo only if it uses them: the instrumentor patches when the program imports its library.
    """

    def __init__(self) -> None:
        self.hooks: dict[str, Callable[[], None]] = {}
        self._busy: set[str] = set()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        hook = self.hooks.get(fullname)
        if hook is None or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)  # the other finders' answer
        finally:
            self._busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _HookLoader(spec.loader, fullname, self)
        return spec

    def fire(self, fullname: str) -> None:
        hook = self.hooks.pop(fullname, None)
        if hook is not None:
            hook()


class _HookLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, fullname: str, hooks: _PostImportHooks) -> None:
        self._loader = loader
        self._fullname = fullname
        self._hooks = hooks

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._hooks.fire(self._fullname)

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package, ...
        return getattr(self._loader, name)


_HOOKS = _PostImportHooks()
_HOOKS_LOCK = threading.Lock()


def when_imported(module: str, hook: Callable[[], None]) -> bool:
    """Run ``hook`` now if ``module`` is imported, else right after it is; True if it ran now."""
    with _HOOKS_LOCK:
        if module in sys.modules:
            run_now = True
        else:
            run_now = False
            _HOOKS.hooks[module] = hook
            if _HOOKS not in sys.meta_path:
                sys.meta_path.insert(0, _HOOKS)
    if run_now:
        hook()
    return run_now


def cancel_when_imported(module: str) -> None:
    with _HOOKS_LOCK:
        _HOOKS.hooks.pop(module, None)


class DbInstrumentor(BaseInstrumentor):
    """A database instrumentor: ``instrument(outside_run=..., job_name=...)`` overrides its
    ``[lineage.instrumentation.<name>]`` table (``config_class``).

    The library is patched when the program imports it (at once if it is imported already).
    """

    config_class: ClassVar[type[DbInstrumentationConfig]] = DbInstrumentationConfig
    kind: ClassVar[DbKind]
    requirements: ClassVar[tuple[LibraryRequirement, ...]] = ()
    module: ClassVar[str] = ""
    _patched: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name:
            cls.kind = new_kind(cls.name)

    def instrumentation_dependencies(self) -> Collection[LibraryRequirement]:
        return self.requirements

    def _instrument(self, **kwargs: Any) -> None:
        self.kind.configure(kwargs.get("outside_run"), kwargs.get("job_name"), STATE.sdk)
        self.kind.active = True
        when_imported(self.module, self._patch_now)

    def _patch_now(self) -> None:
        try:
            self._patch()
        except Exception as exc:  # noqa: BLE001 - the program's import must not fail for us
            warn_once(f"patching {self.module}", exc)
            return
        self._patched = True

    def _uninstrument(self, **kwargs: Any) -> None:
        self.kind.active = False  # connections made earlier now pass straight through
        cancel_when_imported(self.module)
        if self._patched:
            self._patched = False
            self._unpatch()
        self.kind.end_all()

    @property
    def is_patched(self) -> bool:
        """Whether the library is patched now (False while waiting for its import)."""
        return self._patched

    def _patch(self) -> None:
        raise NotImplementedError

    def _unpatch(self) -> None:
        raise NotImplementedError
