"""A package's names imported on first use, so importing the package stays cheap.

``lineage_sdk`` itself (whose public API loads the OpenTelemetry SDK) and the ``rabbitmq``
exporter package (pika) use it: a process that only reads the configuration, such as the
commands listing their flags, never imports what it does not run. A leaf module.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name of ``homes`` (name -> the module it
    lives in) is imported when first asked for, then kept as a plain attribute."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
