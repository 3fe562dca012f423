"""Loading ``LineageConfig`` from defaults, a TOML file, the environment and overrides.

Every source is first flattened to ``(path, value, source)`` entries over the schema's keys, so a
bad value can always be reported with the key, where it came from (file, environment variable or
override) and what is allowed, and a pydantic traceback never reaches a user.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from lineage_sdk.config._fields import (
    BOOL_WORDS,
    NAME_PLACEHOLDER,
    Leaf,
    TextError,
    describe_allowed,
    display_value,
    leaves,
    map_sections,
    parse_text,
    section_fields,
)
from lineage_sdk.config.keys import (
    CONFIG_FILE_ENV,
    ENV_ALIASES,
    ENV_PREFIX,
    config_keys,
    resolve_path,
)
from lineage_sdk.config.redaction import redact
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "IGNORED_ENV_PREFIXES",
    "OPENLINEAGE_VARIABLES",
    "load_config",
    "load_config_or_disabled",
]

DEFAULT_CONFIG_FILE = "lineage.toml"
# LINEAGE_* variables that belong to the project's tooling, not to the configuration: never
# reported as typos.
IGNORED_ENV_PREFIXES = ("LINEAGE_TEST_", "LINEAGE_SHARED_DIR", "LINEAGE_BENCH_", "LINEAGE__")
# OpenLineage client variables honoured, with what they set (rendered into the reference page).
OPENLINEAGE_VARIABLES: dict[str, str] = {
    "OPENLINEAGE_URL": "Sets `http.url`; when neither `LINEAGE_EXPORTERS` nor the file sets "
    '`exporters`, also makes `exporters = ["http"]`.',
    "OPENLINEAGE_ENDPOINT": "Sets `http.endpoint` (only together with `OPENLINEAGE_URL`).",
    "OPENLINEAGE_API_KEY": "Sets `http.api_key` (only together with `OPENLINEAGE_URL`).",
    "OPENLINEAGE_NAMESPACE": "Sets `producer.job_namespace`.",
    "OPENLINEAGE_DISABLED": "`true` (or 1/yes/on) sets `enabled = false`; `false` changes nothing.",
}

_logger = logging.getLogger("lineage_sdk.config")
_app_logger = logging.getLogger("lineage_sdk")
_TOML_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")
_TYPO_CUTOFF = 0.8


@dataclass(frozen=True)
class _Entry:
    """One value from one source, before the schema validates it."""

    path: tuple[str, ...]
    value: Any
    source: str
    raw: Any  # what the user wrote (environment text, TOML value), for messages


# --------------------------------------------------------------------------------------------
# Sources


def _choose_file(
    path: str | os.PathLike[str] | None, environ: Mapping[str, str]
) -> tuple[Path, str] | None:
    if path is not None:
        return Path(path), "the path argument"
    named = environ.get(CONFIG_FILE_ENV, "").strip()
    if named:
        return Path(named), f"environment variable {CONFIG_FILE_ENV}"
    default = Path(DEFAULT_CONFIG_FILE)
    if default.is_file():
        return default.resolve(), f"{DEFAULT_CONFIG_FILE} in the working directory"
    return None


def _read_toml(file: Path, chosen_by: str) -> dict[str, Any]:
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            "config file", str(file), "the file does not exist", source=chosen_by
        ) from None
    except OSError as exc:
        raise ConfigError(
            "config file", str(file), f"cannot be read: {exc.strerror or exc}", source=chosen_by
        ) from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(
            "config file", str(file), "must be UTF-8 encoded TOML", source=chosen_by
        ) from None
    except tomllib.TOMLDecodeError as exc:
        text = str(exc)
        found = _TOML_LINE.search(text)
        if found:
            where = f"line {found[1]}, column {found[2]}: "
        elif "end of document" in text:
            lines = raw.decode("utf-8").rstrip().count("\n") + 1
            where = f"end of file, after line {lines}: "
        else:
            where = ""
        reason = _TOML_LINE.sub("", text).replace("(at end of document)", "").strip()
        raise ConfigError(
            "config file", str(file), f"TOML syntax error at {where}{reason}", source=chosen_by
        ) from None


def _unknown_key(
    table: str, key: str, value: Any, known: Iterable[str], source: str
) -> ConfigError:
    known = list(known)
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return ConfigError(
        f"{table}.{key}",
        display_value(key, value),
        f"unknown key{hint}; known keys in [{table}]: {', '.join(known)}",
        source=source,
    )


def _flatten_table(
    model: type[BaseModel], table: Mapping[str, Any], prefix: tuple[str, ...], source: str
) -> list[_Entry]:
    """Entries of a TOML table over ``model``'s fields, naming any unknown key."""
    fields = section_fields(model)
    table_name = ".".join(("lineage", *prefix))
    entries: list[_Entry] = []
    maps = {section.path: section for section in map_sections()}
    for key, value in table.items():
        field = fields.get(key)
        path = (*prefix, key)
        if field is None:
            raise _unknown_key(table_name, key, value, fields, source)
        annotation = field.annotation
        nested_model = (
            annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel)
            else None
        )
        if nested_model is not None or path in maps:
            if not isinstance(value, Mapping):
                raise ConfigError(
                    ".".join(("lineage", *path)),
                    display_value(key, value),
                    f"must be a table ([{'.'.join(('lineage', *path))}])",
                    source=source,
                )
            if nested_model is not None:
                entries.extend(_flatten_table(nested_model, value, path, source))
                continue
            for name, sub in value.items():
                sub_path = (*path, name)
                if not isinstance(sub, Mapping):
                    raise ConfigError(
                        ".".join(("lineage", *sub_path)),
                        display_value(None, sub),
                        f"must be a table ([{'.'.join(('lineage', *sub_path))}])",
                        source=source,
                    )
                entries.extend(_flatten_table(maps[path].model, sub, sub_path, source))
                if not sub:
                    # An empty [lineage.connections.x] still declares x (and then lacks a uri).
                    entries.append(_Entry(sub_path, {}, source, {}))
            continue
        entries.append(_Entry(path, value, source, value))
    return entries


def _file_entries(doc: Mapping[str, Any], file: Path) -> list[_Entry]:
    source = f"file {file}"
    if "lineage" not in doc:
        strays = sorted(set(doc) & set(section_fields(LineageConfig)))
        if strays:
            raise ConfigError(
                f"{strays[0]}",
                display_value(strays[0], doc[strays[0]]),
                "keys must be inside a [lineage] table",
                source=source,
            )
        return []
    table = doc["lineage"]
    if not isinstance(table, Mapping):
        raise ConfigError(
            "lineage", display_value(None, table), "must be a table ([lineage])", source=source
        )
    return _flatten_table(LineageConfig, table, (), source)


def _text_entry(leaf: Leaf, parts: tuple[str, ...], text: str, source: str) -> _Entry:
    try:
        value = parse_text(leaf, text)
    except TextError as exc:
        raise ConfigError(
            "lineage." + ".".join(parts),
            display_value(leaf.name, text),
            exc.allowed,
            source=source,
        ) from None
    return _Entry(parts, value, source, text)


def _connection_suffixes() -> list[tuple[tuple[str, ...], str, Leaf]]:
    """(map path, upper-case key suffix, leaf) for each key of a named table, longest first."""
    out = []
    for leaf in leaves():
        if NAME_PLACEHOLDER in leaf.path:
            idx = leaf.path.index(NAME_PLACEHOLDER)
            out.append((leaf.path[:idx], "_" + "_".join(leaf.path[idx + 1 :]).upper(), leaf))
    return sorted(out, key=lambda item: len(item[1]), reverse=True)


def _env_entries(environ: Mapping[str, str]) -> list[_Entry]:
    plain = {key.env_var: key for key in config_keys() if not key.templated}
    leaf_by_path = {leaf.path: leaf for leaf in leaves()}
    entries: list[_Entry] = []
    # Aliases first so the canonical variable, applied later, wins when both are set.
    for alias, target in ENV_ALIASES.items():
        text = environ.get(alias, "")
        if text.strip():
            parts, leaf = resolve_path(target)
            entries.append(_text_entry(leaf, parts, text, f"environment variable {alias}"))
    known_names = [*plain, *ENV_ALIASES, CONFIG_FILE_ENV]
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in ENV_ALIASES or name == CONFIG_FILE_ENV:
            continue
        text = environ[name]
        key = plain.get(name)
        if key is not None:
            if text.strip():  # an empty variable counts as unset, as in OpenTelemetry
                leaf = leaf_by_path[tuple(key.path.split("."))]
                entries.append(_text_entry(leaf, leaf.path, text, f"environment variable {name}"))
            continue
        entry = _named_table_entry(name, text)
        if entry is not None:
            entries.append(entry)
            continue
        _warn_unknown(name, known_names)
    return entries


def _named_table_entry(name: str, text: str) -> _Entry | None:
    for map_path, suffix, leaf in _connection_suffixes():
        prefix = ENV_PREFIX + "_".join(map_path).upper() + "_"
        if (
            name.startswith(prefix)
            and name.endswith(suffix)
            and len(name) > len(prefix) + len(suffix)
        ):
            conn = name[len(prefix) : -len(suffix)].lower()
            if not text.strip():
                return _Entry((), None, "", None)  # empty: unset, but not a typo either
            parts = (*map_path, conn, leaf.name)
            return _text_entry(leaf, parts, text, f"environment variable {name}")
    return None


def _warn_unknown(name: str, known_names: list[str]) -> None:
    if name.startswith(IGNORED_ENV_PREFIXES):
        return
    candidates = list(known_names)
    for map_path, suffix, _leaf in _connection_suffixes():
        prefix = ENV_PREFIX + "_".join(map_path).upper() + "_"
        if name.startswith(prefix):
            # LINEAGE_CONNECTIONS_X_URL: compare against the keys of that connection name.
            head = name[len(prefix) :].rsplit("_", 1)[0]
            candidates.append(f"{prefix}{head}{suffix}")
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=_TYPO_CUTOFF)
    if close:
        _logger.warning(
            "unknown environment variable %s is ignored; did you mean %s?", name, close[0]
        )


def _openlineage_entries(environ: Mapping[str, str], file_entries: list[_Entry]) -> list[_Entry]:
    entries: list[_Entry] = []
    url = environ.get("OPENLINEAGE_URL", "").strip()
    if url:
        entries.append(_Entry(("http", "url"), url, "environment variable OPENLINEAGE_URL", url))
        for var, key in (("OPENLINEAGE_ENDPOINT", "endpoint"), ("OPENLINEAGE_API_KEY", "api_key")):
            text = environ.get(var, "").strip()
            if text:
                entries.append(_Entry(("http", key), text, f"environment variable {var}", text))
        exporters_in_file = any(entry.path == ("exporters",) for entry in file_entries)
        if not environ.get(ENV_PREFIX + "EXPORTERS", "").strip() and not exporters_in_file:
            entries.append(
                _Entry(("exporters",), ["http"], "environment variable OPENLINEAGE_URL", url)
            )
    namespace = environ.get("OPENLINEAGE_NAMESPACE", "")
    if namespace.strip():
        entries.append(
            _Entry(
                ("producer", "job_namespace"),
                namespace,
                "environment variable OPENLINEAGE_NAMESPACE",
                namespace,
            )
        )
    disabled = environ.get("OPENLINEAGE_DISABLED", "").strip()
    if disabled:
        flag = BOOL_WORDS.get(disabled.lower())
        if flag is None:
            raise ConfigError(
                "lineage.enabled",
                disabled,
                "OPENLINEAGE_DISABLED must be a boolean: true/false, 1/0, yes/no or on/off",
                source="environment variable OPENLINEAGE_DISABLED",
            )
        if flag:
            entries.append(
                _Entry(("enabled",), False, "environment variable OPENLINEAGE_DISABLED", disabled)
            )
    return entries


def _override_entries(overrides: Mapping[str, Any]) -> list[_Entry]:
    entries: list[_Entry] = []
    for key, value in overrides.items():
        source = f"override {key!r}"
        try:
            parts, leaf = resolve_path(key)
        except ConfigError as exc:
            raise ConfigError(
                exc.key, display_value(key.rsplit(".", 1)[-1], value), exc.allowed, source=source
            ) from None
        if isinstance(value, str):
            entries.append(_text_entry(leaf, parts, value, source))
        else:
            if isinstance(value, tuple):
                value = list(value)
            entries.append(_Entry(parts, value, source, value))
    return entries


# --------------------------------------------------------------------------------------------
# Merge and validate


def _merge(entries: Iterable[_Entry]) -> tuple[dict[str, Any], dict[tuple[str, ...], _Entry]]:
    data: dict[str, Any] = {}
    winners: dict[tuple[str, ...], _Entry] = {}
    for entry in entries:
        if not entry.path:
            continue
        node = data
        for part in entry.path[:-1]:
            child = node.setdefault(part, {})
            node = child
        if isinstance(entry.value, dict) and isinstance(node.get(entry.path[-1]), dict):
            continue  # an empty table marker never erases keys already set
        node[entry.path[-1]] = entry.value
        winners[entry.path] = entry
    return data, winners


def _strip_indices(loc: tuple[int | str, ...]) -> tuple[str, ...]:
    parts = list(loc)
    while parts and isinstance(parts[-1], int):
        parts.pop()
    return tuple(str(part) for part in parts)


def _leaf_for(parts: tuple[str, ...]) -> Leaf | None:
    by_path = {leaf.path: leaf for leaf in leaves()}
    found = by_path.get(parts)
    if found is not None:
        return found
    for section in map_sections():
        depth = len(section.path)
        if parts[:depth] == section.path and len(parts) == depth + 2:
            return by_path.get((*section.path, NAME_PLACEHOLDER, parts[-1]))
    return None


def _source_for(parts: tuple[str, ...], winners: Mapping[tuple[str, ...], _Entry]) -> str | None:
    entry = winners.get(parts)
    if entry is not None:
        return entry.source
    for path, candidate in winners.items():  # a missing key: blame whoever declared its table
        if path[: len(parts) - 1] == parts[:-1] and candidate.source:
            return candidate.source
    return None


def _translate(exc: ValidationError, winners: Mapping[tuple[str, ...], _Entry]) -> ConfigError:
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(first["loc"])
    ctx = first.get("ctx") or {}
    if "field" in ctx:  # model-level validators name the field they are about
        loc = (*loc, str(ctx["field"]))
    parts = _strip_indices(loc)
    leaf = _leaf_for(parts)
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
        table = ".".join(("lineage", *parts[:-1]))
        allowed = (
            f"required: every [{table}] table needs {parts[-1]} "
            f"(or {ENV_PREFIX}{'_'.join(parts).upper()})"
        )
        value = None
    elif kind in ("value_error", "assertion_error") or "field" in ctx or leaf is None:
        allowed = redact(str(first["msg"]).removeprefix("Value error, "))
    else:
        allowed = describe_allowed(leaf)
    if len(errors) > 1:
        allowed += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    key = ".".join(("lineage", *parts)) if parts else "lineage"
    return ConfigError(key, value, allowed, source=_source_for(parts, winners))


def load_config(
    *,
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> LineageConfig:
    """Build the configuration from every source, highest precedence last.

    defaults < TOML file (``path``, else ``$LINEAGE_CONFIG``, else ``./lineage.toml`` if present;
    its ``[lineage]`` table) < ``OPENLINEAGE_*`` variables < ``LINEAGE_*`` variables <
    ``overrides`` (dotted keys such as ``"rabbitmq.url"``, from command-line flags).

    ``environ`` defaults to ``os.environ``. Raises :class:`ConfigError` naming the key, its source,
    the bad value (secrets redacted) and what is allowed.
    """
    env = os.environ if environ is None else environ
    file_entries: list[_Entry] = []
    chosen = _choose_file(path, env)
    if chosen is not None:
        file, chosen_by = chosen
        file_entries = _file_entries(_read_toml(file, chosen_by), file)
    entries = [
        *file_entries,
        *_openlineage_entries(env, file_entries),
        *_env_entries(env),
        *_override_entries(overrides or {}),
    ]
    data, winners = _merge(entries)
    try:
        return LineageConfig.model_validate(data, strict=True)
    except ValidationError as exc:
        raise _translate(exc, winners) from None


def load_config_or_disabled(
    *,
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> LineageConfig:
    """:func:`load_config` for applications: a bad configuration disables lineage, loudly.

    The problem is logged once at ERROR on the ``lineage_sdk`` logger, without a traceback, and
    a default configuration with ``enabled=False`` is returned; this never raises, because a
    telemetry setting must not stop the application.
    """
    try:
        return load_config(path=path, environ=environ, overrides=overrides)
    except ConfigError as exc:
        _app_logger.error("lineage is DISABLED because of a configuration error: %s", exc)
    except Exception as exc:  # noqa: BLE001 - a bug here must not stop the application either
        _app_logger.error(
            "lineage is DISABLED because loading its configuration failed: %s: %s",
            type(exc).__name__,
            redact(str(exc)),
        )
    return LineageConfig(enabled=False)
