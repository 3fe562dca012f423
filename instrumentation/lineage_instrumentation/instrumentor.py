"""``BaseInstrumentor``: the interface every lineage auto-instrumentation implements.

It follows OpenTelemetry's ``BaseInstrumentor`` so the same class can be listed under both the
``lineage_sdk.instrumentors`` and ``opentelemetry_instrumentor`` entry-point groups:

- ``instrument()`` / ``uninstrument()`` are idempotent (a second call is a no-op returning False);
- each subclass is a singleton, so two ``PikaInstrumentor()`` objects share one state;
- ``instrumentation_dependencies()`` names the supported library versions, checked before patching,
  so an absent or unsupported library is skipped instead of half-patched.

Patching is done with :class:`Patcher`, which remembers exactly what it replaced (including
whether the attribute was inherited) and puts it back, so ``uninstrument()`` restores the
original functions object-for-object.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import importlib.metadata
import importlib.util
import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = [
    "BaseInstrumentor",
    "DependencyConflict",
    "LibraryRequirement",
    "Patcher",
    "register_exit_hook",
    "warn_once",
]

_LOG = logging.getLogger("lineage_instrumentation")
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class LibraryRequirement:
    """A library an instrumentor patches: its distribution, import name and version range.

    ``requirement`` is a PEP 508 specifier such as ``"pika>=1.1,<2"``; checked with ``packaging``
    (the same check ``opentelemetry-instrument`` does) only when the library is importable.
    """

    requirement: str
    module: str

    @property
    def distribution(self) -> str:
        from packaging.requirements import Requirement

        return Requirement(self.requirement).name

    def __str__(self) -> str:
        return self.requirement


@dataclass(frozen=True, slots=True)
class DependencyConflict:
    """Why an instrumentor cannot run here: its library is missing or at another version."""

    requirement: LibraryRequirement
    found: str | None  # the installed version, None when the library is missing

    @property
    def missing(self) -> bool:
        return self.found is None

    def __str__(self) -> str:
        if self.found is None:
            return f"{self.requirement.module} is not installed (needs {self.requirement})"
        module, req = self.requirement.module, self.requirement
        return f"{module} {self.found} is installed, but {req} is supported"


def find_conflict(requirements: Collection[LibraryRequirement]) -> DependencyConflict | None:
    """The first requirement not met, or None. A library that cannot be imported is missing."""
    for req in requirements:
        try:
            spec = importlib.util.find_spec(req.module)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            return DependencyConflict(req, None)
        from packaging.requirements import Requirement

        parsed = Requirement(req.requirement)
        try:
            version = importlib.metadata.version(parsed.name)
        except importlib.metadata.PackageNotFoundError:
            return DependencyConflict(req, None)
        if not parsed.specifier.contains(version, prereleases=True):
            return DependencyConflict(req, version)
    return None


class Patcher:
    """Replaces attributes of classes or modules and restores exactly what was there.

    An attribute that was inherited (absent from the owner's ``__dict__``) is deleted again on
    restore rather than pinned to the parent's value, so later changes to the parent still show.
    """

    __slots__ = ("_patches",)

    def __init__(self) -> None:
        self._patches: list[tuple[Any, str, Any]] = []

    def patch(self, owner: Any, name: str, make_wrapper: Callable[[Any], Any]) -> None:
        """Replace ``owner.name`` with ``make_wrapper(original)``; ``original`` is what lookup
        gives (possibly inherited). The wrapper gets ``__wrapped__`` pointing at the original."""
        own = owner.__dict__.get(name, _MISSING) if hasattr(owner, "__dict__") else _MISSING
        original = getattr(owner, name)
        wrapper = make_wrapper(original)
        try:
            wrapper.__wrapped__ = original
            wrapper.__lineage_instrumented__ = True
        except (AttributeError, TypeError):  # builtins or slotted wrappers: nothing to annotate
            pass
        setattr(owner, name, wrapper)
        self._patches.append((owner, name, own))

    def restore(self) -> None:
        """Undo every patch, newest first."""
        while self._patches:
            owner, name, own = self._patches.pop()
            if own is _MISSING:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)
            else:
                setattr(owner, name, own)

    def __len__(self) -> int:
        return len(self._patches)


class BaseInstrumentor(abc.ABC):
    """Auto-instrumentation of one library. Subclasses implement ``_instrument``/``_uninstrument``.

    ``name`` is the key users write in ``LINEAGE_DISABLED_INSTRUMENTATIONS``; it matches the
    entry-point name.
    """

    name: ClassVar[str] = ""
    _instances: ClassVar[dict[type[BaseInstrumentor], BaseInstrumentor]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()
    _is_instrumented: bool

    def __new__(cls, *args: Any, **kwargs: Any) -> BaseInstrumentor:
        # One object per class: instrument() from the bootstrap and from a test share the state.
        with BaseInstrumentor._lock:
            instance = BaseInstrumentor._instances.get(cls)
            if instance is None:
                instance = super().__new__(cls)
                instance._is_instrumented = False
                BaseInstrumentor._instances[cls] = instance
            return instance

    @abc.abstractmethod
    def instrumentation_dependencies(self) -> Collection[LibraryRequirement]:
        """The libraries (with supported version ranges) this instrumentor patches."""

    @abc.abstractmethod
    def _instrument(self, **kwargs: Any) -> None:
        """Patch the library. Called once per ``instrument()`` that finds it uninstrumented."""

    @abc.abstractmethod
    def _uninstrument(self, **kwargs: Any) -> None:
        """Restore the library's original functions."""

    @property
    def is_instrumented(self) -> bool:
        return self._is_instrumented

    def dependency_conflict(self) -> DependencyConflict | None:
        """None when every library is importable at a supported version, else the first conflict."""
        return find_conflict(self.instrumentation_dependencies())

    def instrument(self, *, skip_dep_check: bool = False, **kwargs: Any) -> bool:
        """Patch the library; True if this call did it. Harmless when already instrumented.

        With an unmet dependency nothing is patched and False is returned (logged at DEBUG for a
        missing library, WARNING for an unsupported version). Unknown ``kwargs`` are ignored by
        the base class, so ``opentelemetry-instrument`` can pass its own.
        """
        with BaseInstrumentor._lock:
            if self._is_instrumented:
                _LOG.debug("%s is already instrumented", type(self).__name__)
                return False
            if not skip_dep_check:
                conflict = self.dependency_conflict()
                if conflict is not None:
                    level = logging.DEBUG if conflict.missing else logging.WARNING
                    _LOG.log(level, "lineage instrumentation %r skipped: %s", self.name, conflict)
                    return False
            self._instrument(**kwargs)
            self._is_instrumented = True
            return True

    def uninstrument(self, **kwargs: Any) -> bool:
        """Restore the originals; True if this call did it, False when not instrumented."""
        with BaseInstrumentor._lock:
            if not self._is_instrumented:
                _LOG.debug("%s is not instrumented", type(self).__name__)
                return False
            self._uninstrument(**kwargs)
            self._is_instrumented = False
            return True


def warn_once(
    logger: logging.Logger, seen: set[str], label: str, what: str, exc: BaseException
) -> None:
    """Log a failure of the instrumentation itself once per ``what`` (remembered in ``seen``):
    lineage is lost, never the application's work. One copy for every instrumentor."""
    if what in seen:
        return
    seen.add(what)
    logger.warning(
        "lineage %s instrumentation: %s failed (%s: %s); continuing without it",
        label,
        what,
        type(exc).__name__,
        exc,
    )
    logger.debug("details", exc_info=exc)


def register_exit_hook(hook: Callable[[], None]) -> None:
    """Run ``hook`` at exit before the pipeline's final flush.

    Called only once the SDK exists (its pipeline registered its own hook when it was built);
    atexit runs hooks last-in first-out, so the events an instrumentor queues here (a stream's
    COMPLETE, an open transaction's ABORT) are still exported.
    """
    atexit.register(hook)
