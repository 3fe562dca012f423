"""The list of configuration keys, their environment variables and command-line flags.

Names follow one rule so nobody has to look them up: the key's path under ``lineage`` joined
with ``_`` in upper case is the environment variable, joined with ``-`` the flag
(``rabbitmq.url`` -> ``LINEAGE_RABBITMQ_URL`` -> ``--rabbitmq-url``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel

from lineage_sdk.config._fields import NAME_PLACEHOLDER, Leaf, walk_leaves
from lineage_sdk.config.names import closest
from lineage_sdk.config.sections import (
    ENV_ALIASES,
    ENV_PREFIX,
    SECTION_GROUP,
    env_name,
    registered_sections,
)
from lineage_sdk.exceptions import ConfigError

__all__ = [
    "CONFIG_FILE_ENV",
    "ENV_ALIASES",
    "ENV_PREFIX",
    "ConfigKey",
    "Table",
    "config_keys",
    "env_for_flags",
    "env_var_for",
    "flag_for",
    "overrides_from_flags",
    "refresh_registry",
    "resolve_path",
    "tables",
]

CONFIG_FILE_ENV = "LINEAGE_CONFIG"
_logger = logging.getLogger("lineage_sdk.config")


@dataclass(frozen=True)
class Table:
    """One configuration table and the model of its keys (``named``: one table per free name)."""

    path: tuple[str, ...]
    model: type[BaseModel]
    named: bool = False

    @property
    def name(self) -> str:
        parts = (*self.path, NAME_PLACEHOLDER) if self.named else self.path
        return ".".join(("lineage", *parts))

    def leaves(self) -> tuple[Leaf, ...]:
        if self.named:
            return walk_leaves(self.model, (*self.path, NAME_PLACEHOLDER))
        if not self.path:  # the core: its nested tables are tables of their own
            return tuple(leaf for leaf in walk_leaves(self.model, ()) if len(leaf.path) == 1)
        return walk_leaves(self.model, self.path)


@cache
def tables() -> tuple[Table, ...]:
    """Every table whose class can be imported here: the core's, then the components'.

    Imports every registered table's class (for the reference page, the CLI's flags and
    overrides; an application never calls this): from the module ``lineage_sdk.config_sections``
    names for it, else by importing its component. A table whose class cannot be imported (an
    extra not installed) is left out.
    """
    from lineage_sdk.config.schema import LineageConfig

    found = [Table((), LineageConfig)]
    for name, field in LineageConfig.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found.append(Table((name,), annotation))
    specs = list(registered_sections().values())
    tops = list(dict.fromkeys(spec.path[0] for spec in specs if spec.group != SECTION_GROUP))
    tops += [spec.path[0] for spec in specs if spec.group == SECTION_GROUP]
    specs.sort(key=lambda spec: (tops.index(spec.path[0]), len(spec.path)))
    for spec in specs:
        try:
            model = spec.model()
        except (ImportError, ConfigError) as exc:
            _logger.debug("configuration of %s left out: %s", spec.table, exc)
            continue
        if model is not None:
            found.append(Table(spec.path, model, model.named_tables))
    return tuple(found)


def leaves() -> tuple[Leaf, ...]:
    """Every key of every table, in table order."""
    return tuple(leaf for table in tables() for leaf in table.leaves())


def map_sections() -> tuple[Table, ...]:
    """Every table of free names (``connections``)."""
    return tuple(table for table in tables() if table.named)


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key as users meet it: TOML path, environment variable and flag.

    ``path`` is relative to the ``[lineage]`` table (``"rabbitmq.url"``). Keys of a named table
    such as ``connections`` contain ``<name>`` (``"connections.<name>.uri"``), and so do their
    ``env_var`` (``<NAME>``) and ``flag``.
    """

    path: str
    env_var: str
    type: str
    default: Any
    description: str
    flag: str
    secret: bool = False
    required: bool = False
    aliases: tuple[str, ...] = ()

    @property
    def toml_key(self) -> str:
        """The full dotted TOML key, ``lineage.rabbitmq.url``."""
        return f"lineage.{self.path}"

    @property
    def section(self) -> str:
        """The TOML table holding the key, ``lineage.rabbitmq``."""
        return self.toml_key.rsplit(".", 1)[0]

    @property
    def templated(self) -> bool:
        """True for keys of a named table, whose path holds ``<name>``."""
        return NAME_PLACEHOLDER in self.path

    def for_name(self, name: str) -> ConfigKey:
        """This templated key for one concrete name (``connections.<name>.uri`` -> ``...x.uri``)."""
        if not self.templated:
            return self
        path = self.path.replace(NAME_PLACEHOLDER, name)
        return ConfigKey(
            path=path,
            env_var=env_var_for(path),
            type=self.type,
            default=self.default,
            description=self.description,
            flag=flag_for(path),
            secret=self.secret,
            required=self.required,
        )


def _flag_name(parts: tuple[str, ...] | list[str]) -> str:
    return "--" + "-".join(parts).replace("_", "-").lower()


def _key_for(leaf: Leaf) -> ConfigKey:
    path = ".".join(leaf.path)
    aliases = tuple(alias for alias, target in ENV_ALIASES.items() if target == path)
    default = None if leaf.secret else leaf.default()
    description = (leaf.field.description or "").strip()
    return ConfigKey(
        path=path,
        env_var=env_name(leaf.path),
        type=leaf.type_text(),
        default=default,
        description=description,
        flag=_flag_name(leaf.path),
        secret=leaf.secret,
        required=leaf.required,
        aliases=aliases,
    )


@cache
def _keys() -> tuple[ConfigKey, ...]:
    return tuple(_key_for(leaf) for leaf in leaves())


@cache
def _leaf_by_path() -> dict[tuple[str, ...], Leaf]:
    return {leaf.path: leaf for leaf in leaves()}


def config_keys() -> list[ConfigKey]:
    """Every configuration key, in schema order; templated keys for ``connections``."""
    return list(_keys())


def resolve_path(path: str) -> tuple[tuple[str, ...], Leaf]:
    """Split a dotted key (optionally starting with ``lineage.``) and find its schema leaf.

    Raises :class:`ConfigError` naming the nearest known key when ``path`` is unknown.
    """
    parts = path.split(".")
    if parts and parts[0] == "lineage":
        parts = parts[1:]
    found = _leaf_by_path().get(tuple(parts))
    if found is not None:
        return tuple(parts), found
    for section in map_sections():
        depth = len(section.path)
        if tuple(parts[:depth]) == section.path and len(parts) == depth + 2 and parts[depth]:
            template = (*section.path, NAME_PLACEHOLDER, parts[depth + 1])
            leaf = _leaf_by_path().get(template)
            if leaf is not None:
                return tuple(parts), leaf
    known = [key.path for key in _keys()]
    close = closest(".".join(parts), known)
    hint = f"; did you mean {close}?" if close else "; see docs/configuration.md"
    raise ConfigError(f"lineage.{'.'.join(parts)}", None, f"unknown key{hint}")


def env_var_for(path: str) -> str:
    """The environment variable of a dotted key: ``store.document.collection_name`` ->
    ``LINEAGE_STORE_DOCUMENT_COLLECTION_NAME``. Raises :class:`ConfigError` if unknown."""
    parts, _ = resolve_path(path)
    return env_name(parts)


def flag_for(path: str) -> str:
    """The command-line flag of a dotted key: ``rabbitmq.url`` -> ``--rabbitmq-url``."""
    parts, _ = resolve_path(path)
    return _flag_name(parts)


@cache
def _path_by_flag() -> dict[str, str]:
    return {key.flag[2:]: key.path for key in _keys() if not key.templated}


def _flag_to_path(flag: str) -> str:
    name = flag.strip().lstrip("-").lower().replace("_", "-")
    found = _path_by_flag().get(name)
    if found is not None:
        return found
    for section in map_sections():
        prefix = "-".join(section.path).replace("_", "-") + "-"
        if not name.startswith(prefix):
            continue
        rest = name[len(prefix) :]
        suffixes = [
            key.path.rsplit(".", 1)[1]
            for key in _keys()
            if key.templated and key.path.startswith(".".join(section.path) + ".")
        ]
        for suffix in sorted(suffixes, key=len, reverse=True):
            dashed = "-" + suffix.replace("_", "-")
            if rest.endswith(dashed) and len(rest) > len(dashed):
                conn = rest[: -len(dashed)].replace("-", "_")
                return ".".join((*section.path, conn, suffix))
    close = closest(name, _path_by_flag())
    hint = f"; did you mean --{close}?" if close else ""
    raise ConfigError(f"--{name}", None, f"unknown option{hint}", source="command line")


def overrides_from_flags(flags: Mapping[str, Any]) -> dict[str, Any]:
    """``{"rabbitmq-url": "amqp://..."}`` -> ``{"rabbitmq.url": "amqp://..."}`` for ``overrides``.

    Keys may carry the leading ``--``; ``None`` values (flags not given) are skipped. Values stay
    as they are: :func:`load_config` parses text the same way as environment variables.
    """
    return {_flag_to_path(flag): value for flag, value in flags.items() if value is not None}


def _as_env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(_as_env_text(item) for item in value)
    return str(value)


def env_for_flags(flags: Mapping[str, Any]) -> dict[str, str]:
    """The ``LINEAGE_*`` variables equivalent to command-line flags.

    ``lineage-instrument --exporters console`` sets ``LINEAGE_EXPORTERS=console`` and then execs
    the program, whose bootstrap loads configuration from the environment.
    """
    return {
        env_var_for(path): _as_env_text(value)
        for path, value in overrides_from_flags(flags).items()
    }


def refresh_registry() -> None:
    """Forget the tables found so far: call after installing a plugin while the process runs."""
    from lineage_sdk.config import sections

    sections.registered_sections.cache_clear()
    sections.load_model.cache_clear()
    for cached in (tables, _keys, _leaf_by_path, _path_by_flag):
        cached.cache_clear()
