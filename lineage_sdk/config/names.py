"""Names of components (exporters, stores, instrumentors) and the one "did you mean" for typos.

A misspelt name must be answered with the nearest real one wherever a name is resolved: the
configuration's keys and tables, the SDK's exporter factory, the collector's store factory and
``lineage-instrument``'s instrumentor selection. They all call :func:`closest` (one cutoff per
kind of name, one copy of the rule) and name components through :func:`unknown_component`.
Component names come from entry-point names alone: nothing is imported to know them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from importlib.metadata import entry_points

from lineage_sdk.exceptions import ConfigError

__all__ = [
    "EXPORTER_GROUP",
    "INSTRUMENTOR_GROUP",
    "STORE_GROUP",
    "check_component_names",
    "closest",
    "component_names",
    "did_you_mean",
    "unknown_component",
]

EXPORTER_GROUP = "lineage_sdk.exporters"
STORE_GROUP = "lineage_sdk.stores"
INSTRUMENTOR_GROUP = "lineage_sdk.instrumentors"
#: What each group's members are called in a message.
_KINDS = {EXPORTER_GROUP: "exporter", STORE_GROUP: "store", INSTRUMENTOR_GROUP: "instrumentor"}
#: Close enough to be a typo of a short component name ("rabbitmg", "sqll", "pikka").
NAME_CUTOFF = 0.6


def closest(name: str, known: Iterable[str], *, cutoff: float = NAME_CUTOFF) -> str | None:
    """The known name nearest to ``name`` (``difflib``'s ratio at least ``cutoff``), or None."""
    found = difflib.get_close_matches(name, list(known), n=1, cutoff=cutoff)
    return found[0] if found else None


def did_you_mean(name: str, known: Iterable[str], *, cutoff: float = NAME_CUTOFF) -> str:
    """``" (did you mean 'rabbitmq'?)"`` for a near miss, else ``""``."""
    near = closest(name, known, cutoff=cutoff)
    return f" (did you mean {near!r}?)" if near is not None else ""


def component_names(group: str) -> list[str]:
    """The registered names of an entry-point group, sorted (nothing is imported)."""
    return sorted({ep.name for ep in entry_points(group=group)})


def unknown_component(
    key: str, name: str, known: Iterable[str], *, group: str, source: str | None = None
) -> ConfigError:
    """The error for a component name nobody registered: the nearest name and every name.

    ``invalid configuration lineage.exporters='rabbitmg': unknown exporter 'rabbitmg' (did you
    mean 'rabbitmq'?); one of console, file, http, memory, rabbitmq``
    """
    names = sorted(set(known))
    kind = _KINDS.get(group, "name")
    return ConfigError(
        key,
        name,
        f"unknown {kind} {name!r}{did_you_mean(name, names)}; one of {', '.join(names)}",
        source=source,
    )


def check_component_names(
    key: str,
    names: Iterable[str],
    *,
    group: str,
    extra: Iterable[str] = (),
    source: str | None = None,
) -> None:
    """Raise :func:`unknown_component` for the first of ``names`` that is neither registered in
    ``group`` nor one of ``extra`` (names that are no entry point, such as ``composite``)."""
    known = [*component_names(group), *extra]
    for name in names:
        if name not in known:
            raise unknown_component(key, name, known, group=group, source=source)
