"""Loading ``LineageConfig`` from defaults, a TOML file, the environment and overrides.

Every source is first flattened to ``(path, value, source)`` entries, so a bad value can always be
reported with the key, where it came from (file, environment variable or override) and what is
allowed, and a pydantic traceback never reaches a user. Only the core is validated here; each
component's table is validated from the same sources when the component is built
(``LineageConfig.section``), so a process validates only what it builds.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lineage_sdk.config._fields import BOOL_WORDS, Leaf, display_value, walk_leaves
from lineage_sdk.config.keys import CONFIG_FILE_ENV, resolve_path
from lineage_sdk.config.names import closest
from lineage_sdk.config.openlineage_client import ClientConfig, read_client_config
from lineage_sdk.config.redaction import redact
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.config.sections import (
    ENV_ALIASES,
    ENV_PREFIX,
    Entry,
    SectionInputs,
    env_name,
    flatten_table,
    registered_sections,
    text_entry,
    text_override,
    validate_model,
)
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
    "OPENLINEAGE_CONFIG": "Path of the OpenLineage client's `openlineage.yml`, whose transport "
    "is mapped onto the exporters (see the next section).",
}

_logger = logging.getLogger("lineage_sdk.config")
_app_logger = logging.getLogger("lineage_sdk")
_TOML_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")
_TYPO_CUTOFF = 0.8
_CORE_FIELDS = frozenset(LineageConfig.model_fields)
_CORE_VARIABLES = frozenset(
    {env_name(leaf.path) for leaf in walk_leaves(LineageConfig, ())} | {CONFIG_FILE_ENV}
)


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


def _lineage_table(doc: Mapping[str, Any], file: Path) -> Mapping[str, Any]:
    source = f"file {file}"
    if "lineage" not in doc:
        known = [*_CORE_FIELDS, *{path[0] for path in registered_sections()}]
        strays = sorted(set(doc) & set(known))
        if strays:
            raise ConfigError(
                f"{strays[0]}",
                display_value(strays[0], doc[strays[0]]),
                "keys must be inside a [lineage] table",
                source=source,
            )
        return {}
    table = doc["lineage"]
    if not isinstance(table, Mapping):
        raise ConfigError(
            "lineage", display_value(None, table), "must be a table ([lineage])", source=source
        )
    return table


def _core_env_entries(environ: Mapping[str, str]) -> list[Entry]:
    """Entries of the core's variables; other ``LINEAGE_*`` wait for their section."""
    core = {env_name(leaf.path): leaf for leaf in walk_leaves(LineageConfig, ())}
    entries: list[Entry] = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX):
            continue
        leaf = core.get(name)
        if leaf is not None:
            text = environ[name]
            if text.strip():  # an empty variable counts as unset, as in OpenTelemetry
                entries.append(text_entry(leaf, leaf.path, text, f"environment variable {name}"))
        elif not _belongs_to_a_section(name):
            _warn_unknown(name, core)
    return entries


def _belongs_to_a_section(name: str) -> bool:
    if name in ENV_ALIASES or name == CONFIG_FILE_ENV or name.startswith(IGNORED_ENV_PREFIXES):
        return True
    return any(name.startswith(env_name(path) + "_") for path in registered_sections())


def _warn_unknown(name: str, core: Mapping[str, Leaf]) -> None:
    """A ``LINEAGE_*`` variable nobody reads: name the closest one, if any is close."""
    guess = closest(name, [*core, *ENV_ALIASES, CONFIG_FILE_ENV], cutoff=_TYPO_CUTOFF)
    guess = guess or _misspelt_table(name)
    if guess:
        _logger.warning("unknown environment variable %s is ignored; did you mean %s?", name, guess)


def _misspelt_table(name: str) -> str | None:
    """``LINEAGE_RABITMQ_URL`` -> ``LINEAGE_RABBITMQ_URL``: a table's prefix, misspelt."""
    best: tuple[float, str] | None = None
    for path in registered_sections():
        prefix = env_name(path) + "_"
        for cut, char in enumerate(name):
            if char != "_" or cut < len(ENV_PREFIX):
                continue
            ratio = difflib.SequenceMatcher(None, name[: cut + 1], prefix).ratio()
            if ratio >= _TYPO_CUTOFF and (best is None or ratio > best[0]):
                best = (ratio, prefix + name[cut + 1 :])
    return best[1] if best else None


def _openlineage_entries(
    environ: Mapping[str, str], exporters_in_file: bool, client: ClientConfig
) -> list[Entry]:
    entries: list[Entry] = []
    url = environ.get("OPENLINEAGE_URL", "").strip()
    if url and _client_transport_wins(client):
        # As in the OpenLineage client: a configured transport decides, and OPENLINEAGE_URL is
        # only one more member of a composite (which here has an http member already).
        why = (
            f"there is one http exporter, set by the composite transport from {client.type_source}"
            if client.transport_type == "composite"
            else f"transport.type {client.transport_type} (from {client.type_source}) decides "
            "where events go, as in the OpenLineage client"
        )
        for var in ("OPENLINEAGE_URL", "OPENLINEAGE_ENDPOINT", "OPENLINEAGE_API_KEY"):
            if environ.get(var, "").strip():
                _logger.warning("environment variable %s is ignored: %s", var, why)
    elif url:
        entries.append(Entry(("http", "url"), url, "environment variable OPENLINEAGE_URL", url))
        for var, key in (("OPENLINEAGE_ENDPOINT", "endpoint"), ("OPENLINEAGE_API_KEY", "api_key")):
            text = environ.get(var, "").strip()
            if text:
                entries.append(Entry(("http", key), text, f"environment variable {var}", text))
        if (
            client.transport_type is None
            and not environ.get(ENV_PREFIX + "EXPORTERS", "").strip()
            and not exporters_in_file
        ):
            entries.append(
                Entry(("exporters",), ["http"], "environment variable OPENLINEAGE_URL", url)
            )
    namespace = environ.get("OPENLINEAGE_NAMESPACE", "")
    if namespace.strip():
        entries.append(
            Entry(
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
                Entry(("enabled",), False, "environment variable OPENLINEAGE_DISABLED", disabled)
            )
    return entries


def _client_transport_wins(client: ClientConfig) -> bool:
    """True when the OpenLineage client's transport leaves no room for ``OPENLINEAGE_URL``."""
    if client.transport_type is None:
        return False
    return client.transport_type != "composite" or client.http_member


def _exporters_set_by(
    table: Mapping[str, Any], file_source: str, env: Mapping[str, str], above: list[Entry]
) -> str | None:
    """The source of lineage-sdk's own ``exporters`` setting, if any sets it."""
    for entry in above:
        if entry.path == ("exporters",):
            return entry.source
    if env.get(ENV_PREFIX + "EXPORTERS", "").strip():
        return f"environment variable {ENV_PREFIX}EXPORTERS"
    if "exporters" in table:
        return file_source
    return None


def _home(environ: Mapping[str, str] | None) -> str | None:
    """The home folder for ``~/.openlineage``: the given environment's ``HOME`` only, so a
    caller passing ``environ`` (a test) never reads the real one; else the user's."""
    if environ is not None:
        return environ.get("HOME") or None
    try:
        return os.environ.get("HOME") or str(Path.home())
    except RuntimeError:  # no home folder can be determined
        return None


def _override_entries(overrides: Mapping[str, Any]) -> list[Entry]:
    entries: list[Entry] = []
    for key, value in overrides.items():
        source = f"override {key!r}"
        try:
            parts, leaf = resolve_path(key)
        except ConfigError as exc:
            raise ConfigError(
                exc.key, display_value(key.rsplit(".", 1)[-1], value), exc.allowed, source=source
            ) from None
        if isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, str):
            entries.append(Entry(parts, value, source, value))
        elif parts[0] in _CORE_FIELDS:
            entries.append(text_entry(leaf, parts, value, source))
        else:
            entries.append(text_override(parts, value, source))
    return entries


def load_config(
    *,
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    openlineage_client: bool = True,
) -> LineageConfig:
    """Build the configuration from every source, highest precedence last.

    defaults < the OpenLineage client's transport (``openlineage.yml``, ``OPENLINEAGE__*``; see
    :mod:`lineage_sdk.config.openlineage_client`) < TOML file (``path``, else
    ``$LINEAGE_CONFIG``, else ``./lineage.toml`` if present; its ``[lineage]`` table) <
    ``OPENLINEAGE_*`` variables < ``LINEAGE_*`` variables < ``overrides`` (dotted keys such as
    ``"rabbitmq.url"``, from command-line flags).

    ``openlineage_client=False`` leaves the OpenLineage client's transport out: the collector
    and the ``lineage`` CLI send no events, so an application's ``openlineage.yml`` in their
    working folder (a Kafka transport, say) neither stops nor warns them.

    ``environ`` defaults to ``os.environ``. The core is validated now; each component's table
    when the component asks for it with ``config.section(...)``. Either raises
    :class:`ConfigError` naming the key, its source, the bad value (secrets redacted) and what is
    allowed.
    """
    env = os.environ if environ is None else environ
    table: Mapping[str, Any] = {}
    file_source = ""
    chosen = _choose_file(path, env)
    if chosen is not None:
        file, chosen_by = chosen
        table = _lineage_table(_read_toml(file, chosen_by), file)
        file_source = f"file {file}"
    above_env = _override_entries(overrides or {})
    client = (
        read_client_config(
            env,
            exporters_set_by=_exporters_set_by(table, file_source, env, above_env),
            home=_home(environ),
        )
        if openlineage_client
        else ClientConfig()
    )
    below_env = _openlineage_entries(env, "exporters" in table, client)
    core = validate_model(
        LineageConfig,
        (),
        [
            *(e for e in client.entries if e.path[0] in _CORE_FIELDS),
            *flatten_table(LineageConfig, table, (), file_source),
            *(e for e in below_env if e.path[0] in _CORE_FIELDS),
            *_core_env_entries(env),
            *(e for e in above_env if e.path[0] in _CORE_FIELDS),
        ],
    )
    return core.with_inputs(
        SectionInputs(
            file_table=table,
            file_source=file_source,
            client=tuple(e for e in client.entries if e.path[0] not in _CORE_FIELDS),
            environ={k: v for k, v in env.items() if k.startswith(ENV_PREFIX)},
            below_env=tuple(e for e in below_env if e.path[0] not in _CORE_FIELDS),
            above_env=tuple(e for e in above_env if e.path[0] not in _CORE_FIELDS),
            claimed=_CORE_VARIABLES,
        )
    )


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
