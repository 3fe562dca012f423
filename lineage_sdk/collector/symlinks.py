"""Dataset identity across aliases: the OpenLineage ``symlinks`` dataset facet.

One dataset often has several names: Spark reports a Glue table by its S3 location and lists the
table in ``symlinks`` (``{"identifiers": [{"namespace", "name", "type": "TABLE"}]}``), while
another integration reports the table itself. Both must be one node, in lineage and in column
lineage.

**The canonical name rule.** A dataset entry (a run's input or output, a DatasetEvent's dataset)
resolves to the least ``(namespace, name)`` among its ``symlinks`` identifiers of type ``TABLE``
(case-insensitive); an entry without such an identifier keeps its own name. The rule reads only
the entry itself, so it gives the same answer whatever order events arrive in and in every store,
and an integration that reports the table directly lands on the same name as one that reports
its location with the table as symlink. A location reported without any ``symlinks`` facet stays
a name of its own (nothing in that event says what it is an alias of).

The collector applies the rule when it extracts an event (:func:`lineage_sdk.collector.records.
build_record`), so every store indexes canonical names; the reads apply it again when they fold
raw events (which keep the names as sent).

**Every name finds the node.** The other names (:func:`event_aliases`) are kept as alias
mentions (:mod:`lineage_sdk.collector.engine.derive`), and a name that is no node's resolves to
the node an event that gave it resolved it to
(:meth:`lineage_sdk.collector.engine.Engine.dataset_name`), in every read and in deletion. A
name that is a node's own (a location also reported without ``symlinks``) stays that node's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["canonical", "entry_name", "event_aliases", "other_names"]


def canonical(namespace: str, name: str, facets: Any) -> tuple[str, str]:
    """The name a dataset entry resolves to (see the module's rule)."""
    symlinks = facets.get("symlinks") if isinstance(facets, Mapping) else None
    identifiers = symlinks.get("identifiers") if isinstance(symlinks, Mapping) else None
    if not isinstance(identifiers, list) or not identifiers:
        return namespace, name
    tables = [
        (i["namespace"], i["name"])
        for i in identifiers
        if isinstance(i, Mapping)
        and isinstance(i.get("namespace"), str)
        and isinstance(i.get("name"), str)
        and i["namespace"]
        and i["name"]
        and str(i.get("type", "")).upper() == "TABLE"
    ]
    return min(tables) if tables else (namespace, name)


def entry_name(item: Any) -> tuple[str, str] | None:
    """The canonical (namespace, name) of one dataset entry of a raw event; None if malformed."""
    if not isinstance(item, Mapping):
        return None
    namespace, name = item.get("namespace"), item.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str):
        return None
    return canonical(namespace, name, item.get("facets"))


def event_aliases(event: Mapping[str, Any]) -> dict[tuple[str, str], tuple[str, str]]:
    """Every name an event gives a dataset that is not its canonical one, mapped to the canonical
    name: each entry's own name and its symlink identifiers. Column lineage names its input
    fields by any of them."""
    aliases: dict[tuple[str, str], tuple[str, str]] = {}
    items: list[Any] = []
    for key in ("inputs", "outputs"):
        value = event.get(key)
        if isinstance(value, list):
            items.extend(value)
    items.append(event.get("dataset"))
    for item in items:
        resolved = entry_name(item)
        if resolved is None or not isinstance(item, Mapping):
            continue
        own = (item["namespace"], item["name"])
        if own != resolved:
            aliases[own] = resolved
            facets = item.get("facets")
            symlinks = facets.get("symlinks") if isinstance(facets, Mapping) else None
            found = symlinks.get("identifiers") if isinstance(symlinks, Mapping) else None
            for ident in found if isinstance(found, list) else ():
                if isinstance(ident, Mapping):
                    ns, nm = ident.get("namespace"), ident.get("name")
                    if isinstance(ns, str) and isinstance(nm, str) and (ns, nm) != resolved:
                        aliases.setdefault((ns, nm), resolved)
    return aliases


def other_names(events: Iterable[Mapping[str, Any]], key: tuple[str, str]) -> list[tuple[str, str]]:
    """The names ``events`` give the dataset ``key`` (canonical) besides ``key``, sorted."""
    found = {alias for e in events for alias, node in event_aliases(e).items() if node == key}
    return sorted(found)
