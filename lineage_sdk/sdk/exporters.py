"""The dependency-free exporters (console, file, memory) and discovery of exporters by ``kind``.

Exporters are found through the ``lineage_sdk.exporters`` entry-point group, so a third party
adds one by registering a class that has ``from_config(config) -> LineageExporter``.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import IO, TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import orjson
from pydantic import Field

from lineage_sdk.config.names import EXPORTER_GROUP, unknown_component
from lineage_sdk.config.sections import Section
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.sdk.export import EncodedEvent, ExportResult, LineageExporter
from lineage_sdk.version import DISTRIBUTION

if TYPE_CHECKING:
    from lineage_sdk.config.schema import LineageConfig

__all__ = [
    "EXPORTER_ENTRY_POINT_GROUP",
    "ConsoleExporter",
    "ConsoleExporterConfig",
    "ExporterFactory",
    "FileExporter",
    "FileExporterConfig",
    "InMemoryExporter",
    "available_exporters",
    "create_exporter",
]

EXPORTER_ENTRY_POINT_GROUP = EXPORTER_GROUP


class ExporterFactory(Protocol):
    """What an entry point must name: a class (or object) building an exporter from config.

    ``config_class`` (optional) is the exporter's own table, ``[lineage.<kind>]``: its keys get
    ``LINEAGE_<KIND>_*`` variables and a place in the reference, and ``from_config`` reads it with
    ``config.section(kind, config_class)``, so only the exporters a process uses are validated.
    """

    def from_config(self, config: LineageConfig) -> LineageExporter: ...


class ConsoleExporterConfig(Section):
    """The `console` exporter: JSON lines on a standard stream."""

    stream: Literal["stdout", "stderr"] = Field(
        default="stdout",
        description="Where the console exporter writes JSON lines.",
    )


class FileExporterConfig(Section):
    """The `file` exporter: JSON lines appended to a file."""

    path: str = Field(
        default="lineage-events.jsonl",
        description="File the file exporter appends JSON lines to.",
    )


class ConsoleExporter(LineageExporter):
    """One JSON line per event on stdout or stderr."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream

    config_class: ClassVar[type[Section]] = ConsoleExporterConfig

    @classmethod
    def from_config(cls, config: LineageConfig) -> ConsoleExporter:
        settings = config.section("console", ConsoleExporterConfig)
        return cls(sys.stderr if settings.stream == "stderr" else None)

    def export(self, batch: Sequence[EncodedEvent]) -> ExportResult:
        stream = self._stream or sys.stdout  # looked up late so that redirection is honoured
        try:
            stream.write("".join(e.payload.decode() + "\n" for e in batch))
            stream.flush()
        except (OSError, ValueError):
            return ExportResult.FAILURE
        return ExportResult.SUCCESS

    def shutdown(self, timeout: float = 30.0) -> None:
        return None


class FileExporter(LineageExporter):
    """Appends one JSON line per event; whole lines, so concurrent processes don't interleave."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)
        self._fd: int | None = None

    config_class: ClassVar[type[Section]] = FileExporterConfig

    @classmethod
    def from_config(cls, config: LineageConfig) -> FileExporter:
        return cls(config.section("file", FileExporterConfig).path)

    def export(self, batch: Sequence[EncodedEvent]) -> ExportResult:
        data = b"".join(e.payload + b"\n" for e in batch)
        try:
            if self._fd is None:
                self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError:
            return ExportResult.FAILURE
        return ExportResult.SUCCESS

    def shutdown(self, timeout: float = 30.0) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class InMemoryExporter(LineageExporter):
    """Keeps events in memory, for tests; ``events`` decodes them to dicts on demand."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._encoded: list[EncodedEvent] = []

    @classmethod
    def from_config(cls, config: LineageConfig) -> InMemoryExporter:
        return cls()

    def export(self, batch: Sequence[EncodedEvent]) -> ExportResult:
        with self._lock:
            self._encoded.extend(batch)
        return ExportResult.SUCCESS

    @property
    def encoded(self) -> list[EncodedEvent]:
        with self._lock:
            return list(self._encoded)

    @property
    def events(self) -> list[dict[str, Any]]:
        return [orjson.loads(e.payload) for e in self.encoded]

    def clear(self) -> None:
        with self._lock:
            self._encoded.clear()

    def shutdown(self, timeout: float = 30.0) -> None:
        return None


_BUILTIN: dict[str, type[LineageExporter]] = {
    "console": ConsoleExporter,
    "file": FileExporter,
    "memory": InMemoryExporter,
}


def available_exporters() -> dict[str, Any]:
    """Every exporter kind: the built-in ones and those registered as entry points."""
    found: dict[str, Any] = dict(_BUILTIN)
    for ep in entry_points(group=EXPORTER_ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def create_exporter(kind: str, config: LineageConfig) -> LineageExporter:
    """Build the exporter named ``kind``; ConfigError names the kinds that exist."""
    found = available_exporters()
    target = found.get(kind)
    if target is None:
        raise unknown_component("lineage.exporters", kind, found, group=EXPORTER_ENTRY_POINT_GROUP)
    if not isinstance(target, type):
        try:
            target = target.load()
        except ImportError as exc:
            raise ConfigError(
                "lineage.exporters",
                kind,
                f"exporter {kind!r} needs an optional dependency ({exc.name or exc}); "
                f"pip install '{DISTRIBUTION}[{kind}]'",
            ) from None
    exporter = target.from_config(config)
    if not isinstance(exporter, LineageExporter):
        raise ConfigError(
            "lineage.exporters", kind, "its entry point did not build a LineageExporter"
        )
    return exporter
