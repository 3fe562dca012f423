"""Configuration sections: one class per component, found by entry point, validated when built.

The ``[lineage]`` table has a small core (``enabled``, ``collector_topic``, ``exporters``,
``[lineage.producer]``, ``[lineage.pipeline]``) that every process validates at start-up. Every
other table belongs to a component: an exporter (``[lineage.<kind>]``), a store
(``[lineage.store.<kind>]``), an instrumentor (``[lineage.instrumentation.<kind>]``) or one of the
collector's own parts (entry-point group ``lineage_sdk.config_sections``). A component's table is
validated only when that component is built, so an application never fails on the collector's
settings, and a third-party plugin brings its own table by naming its ``config_class``.

Section names are known from entry-point names alone (nothing is imported to know them), which
is how an unknown table is still reported with "did you mean". A component may also name its
table's class in ``lineage_sdk.config_sections``, under the table's path (``"store.sql"``): the
class is then read from there, so listing the keys (the commands' flags, the reference page)
imports no component, its driver or the OpenTelemetry SDK.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from lineage_sdk.config._fields import (
    Leaf,
    TextError,
    describe_allowed,
    display_value,
    parse_text,
    section_fields,
    walk_leaves,
)
from lineage_sdk.config.names import closest
from lineage_sdk.config.redaction import redact
from lineage_sdk.exceptions import ConfigError

__all__ = [
    "COMPONENT_GROUPS",
    "ENV_ALIASES",
    "ENV_PREFIX",
    "NO_SETTINGS",
    "SECTION_GROUP",
    "Entry",
    "Section",
    "SectionInputs",
    "SectionSpec",
    "UriSetting",
    "registered_sections",
    "section_spec",
    "validate_model",
]

ENV_PREFIX = "LINEAGE_"
# Extra names for a key, kept because an issue or a sibling project names them so.
ENV_ALIASES: dict[str, str] = {
    "LINEAGE_DISABLED_INSTRUMENTATIONS": "instrumentation.disabled_instrumentations",
}
# Plain sections (the collector's own parts, the instrumentation switches): name = dotted path.
# A component's table named here too is read from here, without importing the component.
SECTION_GROUP = "lineage_sdk.config_sections"
#: What a component without settings names in SECTION_GROUP (``lineage_sdk.config.sections:
#: NO_SETTINGS``), so that nothing imports it to find out.
NO_SETTINGS = None
# Component groups and the table their members' tables live under.
COMPONENT_GROUPS: dict[str, tuple[str, ...]] = {
    "lineage_sdk.exporters": (),
    "lineage_sdk.stores": ("store",),
    "lineage_sdk.instrumentors": ("instrumentation",),
}

_logger = logging.getLogger("lineage_sdk.config")
M = TypeVar("M", bound=BaseModel)
S = TypeVar("S", bound="Section")
_TYPO_CUTOFF = 0.8


class UriSetting:
    """Marks a key whose value is a URI (``Annotated[str, UriSetting()]``): a Markdown link
    ``[text](url)``, as people paste it from rendered docs, is read as its ``url`` with one
    warning naming the key, before the key's own validation."""

    __slots__ = ()


_MARKDOWN_LINK = re.compile(r"^\s*\[[^\]]*\]\(\s*<?(?P<url>[^()\s<>]+)>?\s*\)\s*$")


def _unwrap_markdown_links(
    entries: Iterable[Entry], uri_keys: frozenset[tuple[str, ...]]
) -> Iterator[Entry]:
    for entry in entries:
        found = (
            _MARKDOWN_LINK.match(entry.value)
            if entry.path in uri_keys and isinstance(entry.value, str)
            else None
        )
        if found is None:
            yield entry
            continue
        target = found["url"]
        _logger.warning(
            "%s (from %s) is written as a Markdown link; using its target %s",
            ".".join(("lineage", *entry.path)),
            entry.source or "code",
            redact(target),
        )
        yield Entry(entry.path, target, entry.source, entry.raw)


class Section(BaseModel):
    """Base class of every configuration table: unknown keys are mistakes worth naming.

    ``hide_input_in_errors``: a URL with a password must not leak through a pydantic error when
    a section is built directly in code (the loader redacts its own messages). A section whose
    table holds one sub-table per free name (``[lineage.connections.NAME]``) sets
    ``named_tables = True``; an array of tables (``[[lineage.alerts.webhook]]``) sets
    ``listed_tables = True`` too: its entries are named tables whose names are their positions,
    0 for the first (``LINEAGE_ALERTS_WEBHOOK_0_URL``, ``lineage.alerts.webhook[0].url``).
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_default=True, hide_input_in_errors=True
    )
    named_tables: ClassVar[bool] = False
    listed_tables: ClassVar[bool] = False


@dataclass(frozen=True)
class SectionSpec:
    """A registered table: its path under ``[lineage]`` and where its class comes from
    (``config``: a component's table class named in :data:`SECTION_GROUP`)."""

    path: tuple[str, ...]
    group: str
    entry_point: EntryPoint
    config: EntryPoint | None = None

    @property
    def table(self) -> str:
        return ".".join(("lineage", *self.path))

    def model(self) -> type[Section] | None:
        """The section class (imports its module, else the component); None for a component
        without settings."""
        return load_model(self)


@cache
def load_model(spec: SectionSpec) -> type[Section] | None:
    source = spec.config or spec.entry_point
    loaded = source.load()
    model = loaded if source.group == SECTION_GROUP else getattr(loaded, "config_class", None)
    if model is None:
        return None
    if not (isinstance(model, type) and issubclass(model, Section)):
        raise ConfigError(
            spec.table,
            None,
            f"the plugin {source.value!r} declares a config class that is not a "
            "lineage_sdk.config.Section",
        )
    return model


@cache
def registered_sections() -> Mapping[tuple[str, ...], SectionSpec]:
    """Every registered table by path, from entry-point names only (nothing is imported)."""
    found: dict[tuple[str, ...], SectionSpec] = {}
    every = entry_points()  # one pass over the installed distributions, not one per group
    for group, base in (*COMPONENT_GROUPS.items(), (SECTION_GROUP, ())):
        for ep in every.select(group=group):
            path = (
                (*base, *ep.name.split("."))
                if group != SECTION_GROUP
                else tuple(ep.name.split("."))
            )
            known = found.get(path)
            if known is None:
                found[path] = SectionSpec(path, group, ep)
            elif group == SECTION_GROUP and known.group != SECTION_GROUP and known.config is None:
                found[path] = replace(known, config=ep)  # the component's table, named apart
    return found


def section_spec(path: tuple[str, ...]) -> SectionSpec | None:
    return registered_sections().get(path)


def _listed(path: tuple[str, ...]) -> bool:
    """True when the table at ``path`` is an array of tables (``[[lineage.alerts.webhook]]``)."""
    spec = section_spec(path)
    model = load_model(spec) if spec is not None else None
    return model is not None and model.listed_tables


def key_text(parts: tuple[str, ...]) -> str:
    """A key as users write it: ``lineage.`` and its path, an entry of an array of tables by
    its position (``lineage.alerts.webhook[0].url``)."""
    text = "lineage"
    for depth, part in enumerate(parts):
        listed = depth > 0 and part.isdigit() and _listed(parts[:depth])
        text += f"[{part}]" if listed else f".{part}"
    return text


def table_text(parts: tuple[str, ...]) -> str:
    """The TOML header of the table at ``parts``: ``[lineage.api]``, ``[[lineage.alerts.webhook]]``
    for an entry of an array of tables."""
    if len(parts) > 1 and parts[-1].isdigit() and _listed(parts[:-1]):
        return f"[[{key_text(parts[:-1])}]]"
    return f"[{key_text(parts)}]"


def child_sections(path: tuple[str, ...]) -> list[str]:
    """Names of the registered tables directly under ``path`` (``store`` -> sql, graph, ...)."""
    depth = len(path)
    return [p[depth] for p in registered_sections() if len(p) == depth + 1 and p[:depth] == path]


# --------------------------------------------------------------------------------------------
# Entries: one value from one source, before a model validates it


@dataclass(frozen=True)
class Entry:
    """One value from one source; ``raw`` is what the user wrote, for messages."""

    path: tuple[str, ...]
    value: Any
    source: str
    raw: Any


def env_name(parts: Iterable[str]) -> str:
    return ENV_PREFIX + "_".join(parts).upper()


def unknown_key(table: str, key: str, value: Any, known: Iterable[str], source: str) -> ConfigError:
    known = list(known)
    close = closest(key, known)
    hint = f" (did you mean {close}?)" if close else ""
    # In a key table, a misspelt key_hash (or a key pasted under any name) is a secret too.
    secret = table.startswith("lineage.api.keys")
    return ConfigError(
        f"{table}.{key}",
        "***" if secret else display_value(key, value),
        f"unknown key{hint}; known keys in [{table}]: {', '.join(known)}",
        source=source,
    )


def _must_be_table(path: tuple[str, ...], value: Any, source: str) -> ConfigError:
    table = key_text(path)
    spec = section_spec(path)
    model = spec.model() if spec is not None else None
    if model is not None and model.listed_tables:
        allowed = f"must be an array of tables ([[{table}]], one per entry), not a table or a value"
    elif model is not None and model.named_tables:
        allowed = f"must hold one table per name ([{table}.<name>]), not a list or a value"
    else:
        allowed = f"must be a table ({table_text(path)})"
    return ConfigError(table, display_value(path[-1], value), allowed, source=source)


def _shaped(path: tuple[str, ...], value: Any) -> bool:
    """True when ``value`` has the shape of the registered table at ``path``: a list (of tables)
    for an array of tables, a table otherwise."""
    return isinstance(value, list | tuple) if _listed(path) else isinstance(value, Mapping)


def flatten_table(
    model: type[BaseModel], table: Mapping[str, Any], prefix: tuple[str, ...], source: str
) -> list[Entry]:
    """Entries of a TOML table over ``model``'s fields, naming any unknown key.

    Keys that are registered sub-tables (``[lineage.store.sql]`` inside ``[lineage.store]``) are
    left to their own section.
    """
    fields = section_fields(model)
    subsections = child_sections(prefix)
    table_name = key_text(prefix)
    entries: list[Entry] = []
    for key, value in table.items():
        path = (*prefix, key)
        if key in subsections and key not in fields:
            if not _shaped(path, value):
                raise _must_be_table(path, value, source)
            continue
        found = fields.get(key)
        if found is None:
            raise unknown_key(table_name, key, value, [*fields, *subsections], source)
        annotation = found.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if not isinstance(value, Mapping):
                raise _must_be_table(path, value, source)
            entries.extend(flatten_table(annotation, value, path, source))
            continue
        entries.append(Entry(path, value, source, value))
    return entries


def text_entry(leaf: Leaf, parts: tuple[str, ...], text: str, source: str) -> Entry:
    """An entry from text (an environment variable or a flag), parsed by the key's type."""
    try:
        value = parse_text(leaf, text)
    except TextError as exc:
        raise ConfigError(
            "lineage." + ".".join(parts), display_value(leaf.name, text), exc.allowed, source=source
        ) from None
    return Entry(parts, value, source, text)


def merge(
    entries: Iterable[Entry], base: tuple[str, ...]
) -> tuple[dict[str, Any], dict[Any, Entry]]:
    """Nested data for the model at ``base`` (later entries win) and the winning entry per path."""
    data: dict[str, Any] = {}
    winners: dict[tuple[str, ...], Entry] = {}
    depth = len(base)
    for entry in entries:
        rel = entry.path[depth:]
        if not rel:
            continue
        node = data
        for part in rel[:-1]:
            node = node.setdefault(part, {})
        node[rel[-1]] = entry.value
        winners[entry.path] = entry
    return data, winners


def _strip_indices(loc: tuple[int | str, ...]) -> tuple[str, ...]:
    parts = list(loc)
    while parts and isinstance(parts[-1], int):
        parts.pop()
    return tuple(str(part) for part in parts)


def _source_for(parts: tuple[str, ...], winners: Mapping[tuple[str, ...], Entry]) -> str | None:
    entry = winners.get(parts)
    if entry is not None:
        return entry.source
    for path, candidate in winners.items():  # a missing key: blame whoever declared its table
        if path[: len(parts) - 1] == parts[:-1] and candidate.source:
            return candidate.source
    return None


def validate_model(
    model: type[M],
    base: tuple[str, ...],
    entries: Iterable[Entry],
    declared_by: str | None = None,
) -> M:
    """Validate ``model`` (the table at ``base``) from entries; errors become one ConfigError.

    ``declared_by`` is blamed for a missing key when no entry of the table is (an empty
    ``[lineage.connections.x]`` in a file).
    """
    uri_keys = frozenset(
        leaf.path
        for leaf in walk_leaves(model, base)
        if any(isinstance(meta, UriSetting) for meta in leaf.field.metadata)
    )
    data, winners = merge(_unwrap_markdown_links(entries, uri_keys), base)
    try:
        return model.model_validate(data, strict=True)
    except ValidationError as exc:
        error = _translate(exc, winners, model, base)
        if error.source is None and declared_by:
            error = ConfigError(error.key, error.value, error.allowed, source=declared_by)
        raise error from None


def _translate(
    exc: ValidationError,
    winners: Mapping[tuple[str, ...], Entry],
    model: type[BaseModel],
    base: tuple[str, ...],
) -> ConfigError:
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(first["loc"])
    ctx = first.get("ctx") or {}
    if "field" in ctx:  # model-level validators name the field they are about
        loc = (*loc, str(ctx["field"]))
    parts = (*base, *_strip_indices(loc))
    leaf = {leaf.path: leaf for leaf in walk_leaves(model, base)}.get(parts)
    entry = winners.get(parts)
    raw: Any = first.get("input")
    if entry is not None:
        raw = entry.raw
    elif "field" in ctx:  # the key was not given: the model saw its default
        given = raw.get(ctx["field"]) if isinstance(raw, Mapping) else None
        raw = given if given is not None else (leaf.default() if leaf is not None else None)
    name = parts[-1] if parts else None
    value = display_value(name, raw)
    kind = first["type"]
    if kind == "missing":
        table = table_text(parts[:-1])
        allowed = f"required: every {table} table needs {parts[-1]} (or {env_name(parts)})"
        value = None
    elif kind in ("value_error", "assertion_error") or "field" in ctx or leaf is None:
        allowed = redact(str(first["msg"]).removeprefix("Value error, "))
    else:
        allowed = describe_allowed(leaf)
    if len(errors) > 1:
        allowed += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    key = key_text(parts) if parts else "lineage"
    return ConfigError(key, value, allowed, source=_source_for(parts, winners))


# --------------------------------------------------------------------------------------------
# What was given for the sections, kept until a component asks for its table


@dataclass(frozen=True)
class SectionInputs:
    """Everything given for component tables: the ``[lineage]`` file table, ``LINEAGE_*``
    variables, ``OPENLINEAGE_*``-derived values, the OpenLineage client's configuration,
    overrides, and values passed in code.
    """

    file_table: Mapping[str, Any] = field(default_factory=dict)
    file_source: str = ""
    # The OpenLineage client's openlineage.yml and OPENLINEAGE__* values: beaten by every other
    # source, the [lineage] file included.
    client: tuple[Entry, ...] = ()
    environ: Mapping[str, str] = field(default_factory=dict)
    below_env: tuple[Entry, ...] = ()  # OPENLINEAGE_* values: beaten by LINEAGE_* variables
    above_env: tuple[Entry, ...] = ()  # overrides (command-line flags): beat everything
    given: Mapping[str, Any] = field(default_factory=dict)  # keyword arguments in code
    # Variables read elsewhere (the core's, LINEAGE_COLLECTOR_TOPIC): never a section's typo.
    claimed: frozenset[str] = frozenset()
    warned: set[str] = field(default_factory=set, compare=False, hash=False)

    def touches(self, path: tuple[str, ...]) -> bool:
        """True when any source says something about the table at ``path``."""
        return (
            self._given_at(path) is not None
            or self._file_at(path) is not None
            or self._has_text_for(path)
        )

    def _given_at(self, path: tuple[str, ...]) -> Any:
        node: Any = self.given
        for part in path:
            if isinstance(node, list | tuple):  # an array of tables, by position
                node = _item(node, part)
            elif isinstance(node, BaseModel):
                node = getattr(node, part, None)
            elif isinstance(node, Mapping):
                node = node.get(part)
            else:
                return None
            if node is None:
                return None
        return node

    def _file_at(self, path: tuple[str, ...]) -> Any:
        node: Any = self.file_table
        for part in path:
            if isinstance(node, list):  # an array of tables, by position
                node = _item(node, part)
            elif not isinstance(node, Mapping):
                return None
            else:
                node = node.get(part)
            if node is None:
                return None
        return node

    def _has_text_for(self, path: tuple[str, ...]) -> bool:
        prefix = env_name(path) + "_"
        return any(
            name.startswith(prefix) and text.strip() for name, text in self.environ.items()
        ) or any(
            e.path[: len(path)] == path for e in (*self.client, *self.below_env, *self.above_env)
        )

    def build(self, path: tuple[str, ...], model: type[S]) -> S:
        """The table at ``path`` validated by ``model``, from every source."""
        given = self._given_at(path)
        if (
            isinstance(given, model)
            and self._file_at(path) is None
            and not self._has_text_for(path)
        ):
            return given
        return validate_model(
            model,
            path,
            self._entries_for(path, model, given),
            self.file_source if self._file_at(path) is not None else None,
        )

    def build_named(self, path: tuple[str, ...], model: type[S]) -> dict[str, S]:
        """Each ``[lineage.<path>.NAME]`` table validated by ``model``, by name; for an array of
        tables (``listed_tables``), each entry by its position ("0", "1", ...), in order."""
        leaves = walk_leaves(model, ())
        names: dict[str, None] = {}
        listed = model.listed_tables
        for table, source in (
            (self._given_at(path), "code"),
            (self._file_at(path), self.file_source),
        ):
            if listed and table is not None and not isinstance(table, list | tuple):
                raise _must_be_table(path, table, source)
            items: Iterable[tuple[Any, Any]] = (
                enumerate(table)
                if listed and table is not None
                else table.items()
                if isinstance(table, Mapping)
                else ()
            )
            for name, sub in items:
                if not isinstance(sub, Mapping | BaseModel):
                    raise _must_be_table((*path, str(name)), sub, source)
                names[str(name)] = None
        suffixes = sorted(
            (("_" + "_".join(leaf.path).upper(), leaf) for leaf in leaves),
            key=lambda item: len(item[0]),
            reverse=True,
        )
        prefix = env_name(path) + "_"
        for var in sorted(self.environ):
            if not var.startswith(prefix):
                continue
            for suffix, _leaf in suffixes:
                if var.endswith(suffix) and len(var) > len(prefix) + len(suffix):
                    if self.environ[var].strip():
                        name = var[len(prefix) : -len(suffix)].lower()
                        source = f"environment variable {var}"
                        names[_position(path, name, source) if listed else name] = None
                    break
            else:  # LINEAGE_CONNECTIONS_MAIN_URL: compare with the keys of that name
                head = var[len(prefix) :].rsplit("_", 1)[0]
                self._warn_unknown(var, [prefix + head + suffix for suffix, _ in suffixes], prefix)
        for entry in (*self.below_env, *self.above_env):
            if entry.path[: len(path)] == path and len(entry.path) > len(path):
                name = entry.path[len(path)]
                names[_position(path, name, entry.source) if listed else name] = None
        if listed:
            names = dict.fromkeys(sorted(names, key=int))
        return {
            name: validate_model(
                model,
                (*path, name),
                self._entries_for((*path, name), model, self._given_at((*path, name))),
                self.file_source if self._file_at((*path, name)) is not None else None,
            )
            for name in names
        }

    def _entries_for(
        self, path: tuple[str, ...], model: type[Section], given: Any
    ) -> Iterator[Entry]:
        leaves = walk_leaves(model, path)
        by_path = {leaf.path: leaf for leaf in leaves}
        yield from self._given_entries(path, by_path, self.client)
        if isinstance(given, BaseModel):
            given = given.model_dump()
        if isinstance(given, Mapping):
            yield from flatten_table(model, given, path, "code")
        table = self._file_at(path)
        if table is not None:
            if not isinstance(table, Mapping):
                raise _must_be_table(path, table, self.file_source)
            yield from flatten_table(model, table, path, self.file_source)
        yield from self._given_entries(path, by_path, self.below_env)
        names = {env_name(leaf.path): leaf for leaf in leaves}
        for alias, target in ENV_ALIASES.items():
            leaf = by_path.get(tuple(target.split(".")))
            text = self.environ.get(alias, "")
            if leaf is not None and text.strip():
                yield text_entry(leaf, leaf.path, text, f"environment variable {alias}")
        for name, leaf in names.items():
            text = self.environ.get(name, "")
            if text.strip():  # an empty variable counts as unset, as in OpenTelemetry
                yield text_entry(leaf, leaf.path, text, f"environment variable {name}")
        yield from self._given_entries(path, by_path, self.above_env)
        if not model.named_tables:
            self._warn_typos(path, names)

    @staticmethod
    def _given_entries(
        path: tuple[str, ...], by_path: Mapping[tuple[str, ...], Leaf], entries: Iterable[Entry]
    ) -> Iterator[Entry]:
        for entry in entries:
            if entry.path[: len(path)] != path:
                continue
            leaf = by_path.get(entry.path)
            if leaf is None:
                continue  # a key of a table below this one (store.sql.url under store)
            if entry.raw is _TEXT:
                yield text_entry(leaf, entry.path, entry.value, entry.source)
            else:
                yield entry

    def _warn_typos(self, path: tuple[str, ...], known: Mapping[str, Leaf]) -> None:
        prefix = env_name(path) + "_"
        children = [env_name((*path, child)) + "_" for child in child_sections(path)]
        for var in self.environ:
            if (
                var.startswith(prefix)
                and var not in known
                and var not in self.claimed
                and var not in ENV_ALIASES
                and not var.startswith(tuple(children))
            ):
                self._warn_unknown(var, list(known), prefix)

    def _warn_unknown(self, var: str, candidates: list[str], _prefix: str) -> None:
        if var in self.warned:
            return
        self.warned.add(var)
        close = closest(var, candidates, cutoff=_TYPO_CUTOFF)
        if close:
            _logger.warning(
                "unknown environment variable %s is ignored; did you mean %s?", var, close
            )


def _item(items: Sequence[Any], part: str) -> Any:
    """The entry at position ``part`` of an array of tables, or None."""
    index = int(part) if part.isdigit() else -1
    return items[index] if 0 <= index < len(items) else None


def _position(path: tuple[str, ...], name: str, source: str) -> str:
    """The position naming an entry of an array of tables in a variable or a flag
    (``LINEAGE_ALERTS_WEBHOOK_0_URL``), as its canonical text ("0", never "00")."""
    if not name.isdigit() or name != str(int(name)):
        raise ConfigError(
            key_text(path),
            name,
            f"{table_text((*path, '0'))} is an array of tables: its entries are named by position"
            f" (0 for the first), as in {env_name((*path, '0'))}_<KEY>",
            source=source,
        )
    return str(int(name))


# Marks an entry whose value is text still to be parsed by the key's type (an override given as
# a string), as opposed to a typed value.
_TEXT = object()


def text_override(path: tuple[str, ...], text: str, source: str) -> Entry:
    """An override given as text, parsed by its key's type when its section is built."""
    return Entry(path, text, source, _TEXT)
