"""The OpenLineage client's own configuration, mapped onto our exporters.

A user migrating from ``openlineage-python`` keeps their ``openlineage.yml`` and their
``OPENLINEAGE__*`` variables. They are found and merged as that client does it:

- the file is the first of ``$OPENLINEAGE_CONFIG``, ``./openlineage.yml`` and
  ``~/.openlineage/openlineage.yml`` that exists and is readable;
- ``OPENLINEAGE__A__B=value`` sets key ``a.b`` (names in lower case); the value is read as JSON
  when it parses (``5``, ``true``, ``{"type": "api_key"}``), else kept as text;
- the file wins over the variables, key by key (a mapping is merged, anything else replaced).

Only ``transport`` has a meaning here: ``http`` (and ``async_http``), ``console``, ``file``,
``noop`` and ``composite`` become ``exporters`` and the ``[lineage.http]`` / ``[lineage.file]``
keys. Every other key is reported by one warning naming it (never its value), and a transport
type lineage-sdk cannot honour is an error while it decides ``exporters``. These values rank
below the ``[lineage]`` TOML table: our own settings win. :data:`MAPPING` is the table rendered
into ``docs/configuration.md``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from lineage_sdk.config._fields import BOOL_WORDS
from lineage_sdk.config.names import did_you_mean
from lineage_sdk.config.redaction import REDACTED, redact
from lineage_sdk.config.sections import Entry
from lineage_sdk.exceptions import ConfigError

__all__ = [
    "CLIENT_CONFIG_ENV",
    "CLIENT_FILE_NAME",
    "DYNAMIC_PREFIX",
    "MAPPING",
    "ClientConfig",
    "find_client_file",
    "read_client_config",
]

CLIENT_CONFIG_ENV = "OPENLINEAGE_CONFIG"
CLIENT_FILE_NAME = "openlineage.yml"
DYNAMIC_PREFIX = "OPENLINEAGE__"

# (OpenLineage client keys, the transport types they belong to, what they become here), as
# Markdown cells of the reference page.
MAPPING: tuple[tuple[str, str, str], ...] = (
    ("`transport.type`: `http`, `async_http`", "—", '`exporters = ["http"]`'),
    ("`transport.type`: `console`", "—", '`exporters = ["console"]` (JSON lines on stdout)'),
    ("`transport.type`: `file`", "—", '`exporters = ["file"]`'),
    ("`transport.type`: `noop`", "—", "`exporters = []`"),
    (
        "`transport.type`: `composite`",
        "—",
        "`exporters` lists each member's exporter, in order; a second member of the same type is "
        "ignored (warning), as each exporter has one table; with `OPENLINEAGE_URL` set and no "
        "`http` member, `http` is added (the client's `default_http` member)",
    ),
    (
        "`transport.type`: `kafka`, `msk_iam`, `datadog`, `gcplineage`, `amazon_datazone`, "
        "`transform`, a class name",
        "—",
        "error while it decides `exporters`; ignored (warning) when lineage-sdk's own "
        "`exporters` is set",
    ),
    ("`transport.url`", "http", "`http.url`"),
    ("`transport.endpoint`", "http", "`http.endpoint`"),
    ("`transport.timeout` (seconds)", "http", "`http.timeout_ms` (seconds times 1000)"),
    (
        "`transport.auth.type: api_key` with `apiKey` (or `api_key`, `apikey`)",
        "http",
        "`http.api_key`, sent as `Authorization: Bearer`",
    ),
    ("`transport.auth` of any other type, or without a type", "http", "ignored (warning)"),
    ("`transport.compression: gzip`", "http", '`http.compression = "gzip"`'),
    ("`transport.verify: true`", "http", "nothing to do: certificates are always verified"),
    (
        "`transport.verify: false`, `custom_headers`, `retry`, `ssl_context`, "
        "`max_queue_size`, `max_concurrent_requests`, any other key",
        "http",
        "ignored (warning)",
    ),
    ("`transport.log_file_path`", "file", "`file.path` (a `file://` URL as its local path)"),
    ("`transport.log_file_path`: `s3://...`, `gs://...`", "file", "error: local files only"),
    ("`transport.append: true`", "file", "nothing to do: the exporter appends JSON lines"),
    (
        "`transport.append: false`, or unset",
        "file",
        "warning: the exporter appends every event to the one file, where the client writes "
        "one file per event",
    ),
    (
        "`transport.storage_options`, `filesystem`, `fs_kwargs`, `debug_mode: true`, any other key",
        "file",
        "ignored (warning)",
    ),
    (
        "`transport.transports` (a list, or a mapping of names)",
        "composite",
        "each member mapped as above; its keys are named `transport.transports.<name>.<key>`",
    ),
    (
        "`transport.continue_on_failure: true`, `continue_on_success: true`, "
        "`sort_transports: false`",
        "composite",
        "nothing to do: every exporter gets every event, each on its own",
    ),
    (
        "`transport.continue_on_failure: false`, `continue_on_success: false`, "
        "`sort_transports: true`, any other key",
        "composite",
        "ignored (warning)",
    ),
    ("`transport.name`, `transport.priority`", "any", "nothing to do"),
    ("any key of `console` or `noop`", "console, noop", "ignored (warning)"),
    ("`facets`, `filters`, `tags`, `dataset`, any other top-level key", "—", "ignored (warning)"),
)

_logger = logging.getLogger("lineage_sdk.config")

# Transport types and the exporter each becomes (None: decided by the type's own rule).
_SUPPORTED: dict[str, str | None] = {
    "http": "http",
    "async_http": "http",
    "console": "console",
    "file": "file",
    "noop": None,
    "composite": None,
}
# Types of the OpenLineage client that lineage-sdk has no exporter for.
_UNSUPPORTED = ("kafka", "msk_iam", "datadog", "gcplineage", "amazon_datazone", "transform")
_ALL_TYPES = (*_SUPPORTED, *_UNSUPPORTED)
_SECRET_WORDS = ("key", "secret", "token", "password", "credential", "header")
_MEMBER_KEYS = frozenset({"type", "name", "priority"})
_HTTP_IGNORED = {
    "custom_headers": "lineage-sdk's http exporter sends no custom headers",
    "retry": "the http exporter does not retry (the rabbitmq exporter is the lossless one)",
    "ssl_context": "the http exporter verifies with the system's CA bundle and sends no client "
    "certificate",
    "sslcontext": "the http exporter verifies with the system's CA bundle and sends no client "
    "certificate",
    "sslContext": "the http exporter verifies with the system's CA bundle and sends no client "
    "certificate",
    "session": "a requests session cannot be configured here",
    "adapter": "a requests adapter cannot be configured here",
    "max_queue_size": "the SDK's own queue is lineage.pipeline.max_queue_size",
    "max_concurrent_requests": "the http exporter sends one request at a time",
}
_FILE_IGNORED = {
    "storage_options": "the file exporter writes local files only",
    "filesystem": "the file exporter writes local files only",
    "fs_kwargs": "the file exporter writes local files only",
}


@dataclass(frozen=True)
class _Node:
    """A value of the OpenLineage configuration and where it came from.

    ``value`` is a scalar, a ``dict[str, _Node]`` or a ``list[_Node]``; ``source`` is
    ``file <path>`` or ``environment variable <NAME>``; ``var_key`` is the key the variable
    itself names (to say which key inside a JSON value is meant).
    """

    value: Any
    source: str
    var_key: str = ""

    def where(self, key: str) -> str:
        if self.source.startswith("file ") or (self.var_key and self.var_key != key):
            return f"{self.source}, key {key}"
        return self.source


def _wrap(value: Any, source: str, var_key: str = "") -> _Node:
    if isinstance(value, Mapping):
        return _Node({str(k): _wrap(v, source, var_key) for k, v in value.items()}, source, var_key)
    if isinstance(value, list):
        return _Node([_wrap(v, source, var_key) for v in value], source, var_key)
    return _Node(value, source, var_key)


def _merge(low: _Node, high: _Node) -> _Node:
    """The OpenLineage client's ``deep_merge_dicts``: ``high`` wins, mappings merge."""
    if not (isinstance(low.value, dict) and isinstance(high.value, dict)):
        return high
    merged = dict(low.value)
    for key, node in high.value.items():
        merged[key] = _merge(merged[key], node) if key in merged else node
    return _Node(merged, high.source, high.var_key)


def _secret(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def _shown(key: str, value: Any) -> object:
    """A value safe to print: secrets as ***, URL passwords removed, tables as <table>."""
    if _secret(key):
        return REDACTED
    if isinstance(value, dict):
        return "<table>"
    if isinstance(value, list):
        return "<list>"
    if isinstance(value, str):
        return redact(value)
    return value


# --------------------------------------------------------------------------------------------
# Finding and reading the sources


def find_client_file(
    environ: Mapping[str, str], *, home: str | None = None
) -> tuple[Path, str] | None:
    """The OpenLineage client's file and what chose it: ``$OPENLINEAGE_CONFIG``, else
    ``./openlineage.yml``, else ``<home>/.openlineage/openlineage.yml`` (the first that exists
    and is readable, as that client looks). ``home`` defaults to ``environ["HOME"]``."""
    named = environ.get(CLIENT_CONFIG_ENV, "").strip()
    if named:
        path = Path(named)
        if path.is_file() and os.access(path, os.R_OK):
            return path, f"environment variable {CLIENT_CONFIG_ENV}"
        _logger.warning(
            "environment variable %s names %s, which is not a readable file; looking for %s in "
            "the working directory and in ~/.openlineage, as the OpenLineage client does",
            CLIENT_CONFIG_ENV,
            path,
            CLIENT_FILE_NAME,
        )
    here = Path(CLIENT_FILE_NAME)
    if here.is_file() and os.access(here, os.R_OK):
        return here.resolve(), f"{CLIENT_FILE_NAME} in the working directory"
    home = home if home is not None else environ.get("HOME")
    if home:
        in_home = Path(home) / ".openlineage" / CLIENT_FILE_NAME
        if in_home.is_file() and os.access(in_home, os.R_OK):
            return in_home, f"{CLIENT_FILE_NAME} in ~/.openlineage"
    return None


def _read_yaml(path: Path, chosen_by: str) -> _Node | None:
    import yaml  # only when a file is there: most processes never pay for the import

    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(
            "config file", str(path), "must be UTF-8 encoded YAML", source=chosen_by
        ) from None
    except OSError as exc:
        raise ConfigError(
            "config file", str(path), f"cannot be read: {exc.strerror or exc}", source=chosen_by
        ) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ConfigError(
            "config file", str(path), f"YAML syntax error{where}: {problem}", source=chosen_by
        ) from None
    if doc is None:
        _logger.debug("OpenLineage client file %s is empty", path)
        return None
    if not isinstance(doc, Mapping):
        raise ConfigError(
            "config file",
            str(path),
            f"must be a YAML mapping such as `transport: {{type: http, url: ...}}`, not a "
            f"{type(doc).__name__}",
            source=chosen_by,
        )
    return _wrap(doc, f"file {path}")


def _read_variables(environ: Mapping[str, str]) -> _Node | None:
    """``OPENLINEAGE__*`` as the client reads them: deepest names first, so that a variable
    naming a whole table (``OPENLINEAGE__TRANSPORT``) replaces the keys set inside it."""
    root: dict[str, _Node] = {}
    for name in sorted((n for n in environ if n.startswith(DYNAMIC_PREFIX)), reverse=True):
        text = environ[name]
        if not text.strip():
            continue  # an empty variable counts as unset, as everywhere in lineage-sdk
        keys = [part.lower() for part in name[len(DYNAMIC_PREFIX) :].split("__")]
        if not all(keys):
            raise ConfigError(
                name, None, "names an empty key (a triple underscore or a trailing __)"
            )
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        source = f"environment variable {name}"
        node = root
        for depth, key in enumerate(keys[:-1]):
            child = node.get(key)
            if child is None:
                child = _Node({}, source)
                node[key] = child
            if not isinstance(child.value, dict):
                raise ConfigError(
                    name,
                    None,
                    f"sets a key inside {'.'.join(keys[: depth + 1])}, which "
                    f"{child.source} sets to a value, not a table",
                )
            node = child.value
        node[keys[-1]] = _wrap(value, source, ".".join(keys))
    return _Node(root, "environment variables OPENLINEAGE__*") if root else None


# --------------------------------------------------------------------------------------------
# Mapping


@dataclass(frozen=True)
class _At:
    """Where a transport is: its key and its type's node (whose source names the transport)."""

    key: str
    type_node: _Node


@dataclass
class _Member:
    kind: str
    key: str
    node: _Node
    entries: list[Entry]


@dataclass
class ClientConfig:
    """What the OpenLineage client's configuration gives lineage-sdk.

    ``entries`` rank below the ``[lineage]`` file. ``transport_type`` is the top transport's
    type when one is configured (the OpenLineage client then ignores ``OPENLINEAGE_URL``, except
    that a composite gets it as one more member); ``http_member`` tells whether a transport
    already sets ``[lineage.http]``.
    """

    entries: list[Entry] = field(default_factory=list)
    transport_type: str | None = None
    type_source: str = ""
    http_member: bool = False
    file: Path | None = None


class _Mapper:
    def __init__(self, exporters_set_by: str | None, openlineage_url: bool) -> None:
        self.exporters_set_by = exporters_set_by
        self.openlineage_url = openlineage_url

    def ignore(self, node: _Node, key: str, why: str) -> None:
        """One warning per source of the ignored keys: the file, or each variable."""
        named: dict[str, str] = {}
        for _leaf_key, leaf in _leaves(node, key):
            var_key = leaf.var_key
            shown = key if not var_key or key.startswith(var_key) else var_key
            named.setdefault(leaf.source, shown)
        for source, shown in named.items():
            _logger.warning(
                "OpenLineage client setting %s (from %s) is ignored: %s", shown, source, why
            )

    def error(self, node: _Node, key: str, allowed: str) -> ConfigError:
        return ConfigError(key, _shown(key, node.value), allowed, source=node.where(key))

    # -- values

    def text(self, node: _Node, key: str) -> str:
        if not isinstance(node.value, str) or not node.value.strip():
            raise self.error(node, key, "must be a non-empty string")
        return node.value.strip()

    def flag(self, node: _Node, key: str) -> bool:
        value = node.value
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in BOOL_WORDS:
            return BOOL_WORDS[value.strip().lower()]
        raise self.error(node, key, "must be true or false")

    def table(self, node: _Node, key: str) -> dict[str, _Node]:
        if not isinstance(node.value, dict):
            raise self.error(node, key, "must be a mapping of keys to values")
        return node.value

    def entry(self, path: tuple[str, ...], value: Any, node: _Node, key: str) -> Entry:
        return Entry(path, value, node.where(key), node.value)

    # -- transports

    def transport(self, node: _Node, key: str) -> list[_Member]:
        """The members one transport becomes: one, none (noop) or several (composite)."""
        keys = self.table(node, key)
        type_node = keys.get("type")
        if type_node is None:
            raise ConfigError(
                f"{key}.type",
                None,
                f"required: one of {', '.join(_SUPPORTED)}",
                source=node.where(key),
            )
        written = self.text(type_node, f"{key}.type")
        kind = written.lower()
        if kind not in _SUPPORTED:
            self.unsupported(written, type_node, node, key)
            return []
        at = _At(key, type_node)
        rest = {k: v for k, v in keys.items() if k not in _MEMBER_KEYS}
        if kind == "composite":
            return self.composite(rest, at)
        if kind in ("http", "async_http"):
            return [_Member("http", key, node, self.http(rest, at, kind))]
        if kind == "file":
            return [_Member("file", key, node, self.file(rest, at))]
        for name, value in rest.items():
            self.ignore(value, f"{key}.{name}", f"the {kind} transport takes no settings")
        if kind == "console":
            return [_Member("console", key, node, [])]
        return []  # noop

    def missing(self, at: _At, name: str, what: str) -> ConfigError:
        key = f"{at.key}.type"
        return ConfigError(
            f"{at.key}.{name}", None, f"required: {what}", source=at.type_node.where(key)
        )

    def unsupported(self, kind: str, type_node: _Node, node: _Node, key: str) -> None:
        type_key = f"{key}.type"
        known = "." in kind or kind.lower() in _UNSUPPORTED
        what = (
            f"the {kind!r} transport has no lineage-sdk exporter"
            if known
            else f"unknown transport type {kind!r}{did_you_mean(kind.lower(), _ALL_TYPES)}"
        )
        if known and self.exporters_set_by is not None:
            self.ignore(
                node, key, f"{what}, and lineage.exporters is set by {self.exporters_set_by}"
            )
            return
        raise ConfigError(
            type_key,
            kind,
            f"{what}; lineage-sdk maps {', '.join(_SUPPORTED)}; or set lineage.exporters "
            "(LINEAGE_EXPORTERS) to console, file, http or rabbitmq instead",
            source=type_node.where(type_key),
        )

    def http(self, keys: dict[str, _Node], at: _At, kind: str) -> list[Entry]:
        key = at.key
        url = keys.pop("url", None)
        if url is None:
            raise self.missing(at, "url", f"the base URL of the {kind} transport's endpoint")
        entries = [self.entry(("http", "url"), self.text(url, f"{key}.url"), url, f"{key}.url")]
        endpoint = keys.pop("endpoint", None)
        if endpoint is not None:
            text = self.text(endpoint, f"{key}.endpoint")
            entries.append(self.entry(("http", "endpoint"), text, endpoint, f"{key}.endpoint"))
        timeout = keys.pop("timeout", None)
        if timeout is not None:
            seconds = timeout.value
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
                raise self.error(timeout, f"{key}.timeout", "must be a number of seconds above 0")
            millis = max(1, round(seconds * 1000))
            entries.append(self.entry(("http", "timeout_ms"), millis, timeout, f"{key}.timeout"))
        auth = keys.pop("auth", None)
        if auth is not None:
            entries += self.auth(auth, f"{key}.auth")
        compression = keys.pop("compression", None)
        if compression is not None and compression.value is not None:
            codec = self.text(compression, f"{key}.compression").lower()
            if codec != "gzip":
                raise self.error(compression, f"{key}.compression", "must be gzip (or unset)")
            entries.append(
                self.entry(("http", "compression"), "gzip", compression, f"{key}.compression")
            )
        verify = keys.pop("verify", None)
        if verify is not None and not self.flag(verify, f"{key}.verify"):
            self.ignore(verify, f"{key}.verify", "the http exporter always verifies certificates")
        for name, value in keys.items():
            why = _HTTP_IGNORED.get(name, "not a setting lineage-sdk's http exporter has")
            self.ignore(value, f"{key}.{name}", why)
        return entries

    def auth(self, node: _Node, key: str) -> list[Entry]:
        keys = self.table(node, key)
        type_node = keys.get("type")
        kind = self.text(type_node, f"{key}.type") if type_node is not None else None
        if kind != "api_key":
            why = (
                "without a type the OpenLineage client sends no credentials either"
                if kind is None
                else f"auth type {kind!r} is not supported; only api_key (a bearer token) is"
            )
            self.ignore(node, key, why)
            return []
        found = [(name, keys[name]) for name in ("apiKey", "apikey", "api_key") if name in keys]
        if not found:
            raise ConfigError(
                f"{key}.apiKey",
                None,
                "required when the auth type is api_key (apiKey or api_key)",
                source=node.where(key),
            )
        name, secret = found[0]
        token = self.text(secret, f"{key}.{name}")
        for other in keys:
            if other not in ("type", name):
                self.ignore(keys[other], f"{key}.{other}", "not a key of api_key auth")
        return [self.entry(("http", "api_key"), token, secret, f"{key}.{name}")]

    def file(self, keys: dict[str, _Node], at: _At) -> list[Entry]:
        key = at.key
        path_node = keys.pop("log_file_path", None)
        if path_node is None:
            raise self.missing(at, "log_file_path", "the file a file transport writes to")
        path = self.text(path_node, f"{key}.log_file_path")
        parts = urlsplit(path)
        if parts.scheme == "file":
            path = unquote(parts.path)
        elif "://" in path:
            raise self.error(
                path_node,
                f"{key}.log_file_path",
                "must be a local path or a file:// URL; lineage-sdk's file exporter does not "
                "write to remote file systems",
            )
        entries = [self.entry(("file", "path"), path, path_node, f"{key}.log_file_path")]
        append = keys.pop("append", None)
        if append is None or not self.flag(append, f"{key}.append"):
            reason = (
                "the file exporter appends every event as one JSON line to log_file_path; the "
                "OpenLineage client with append false (its default) writes one file per event"
            )
            if append is None:
                _logger.warning(
                    "OpenLineage client setting %s.append is not set (the transport is from "
                    "%s): %s",
                    key,
                    at.type_node.source,
                    reason,
                )
            else:
                self.ignore(append, f"{key}.append", reason)
        debug = keys.pop("debug_mode", None)
        if debug is not None and self.flag(debug, f"{key}.debug_mode"):
            self.ignore(debug, f"{key}.debug_mode", "the file exporter writes compact JSON lines")
        for name, value in keys.items():
            why = _FILE_IGNORED.get(name, "not a setting lineage-sdk's file exporter has")
            self.ignore(value, f"{key}.{name}", why)
        return entries

    def composite(self, keys: dict[str, _Node], at: _At) -> list[_Member]:
        key = at.key
        members_node = keys.pop("transports", None)
        if members_node is None:
            raise self.missing(at, "transports", "the members of a composite transport")
        for name, keep in (
            ("continue_on_failure", True),
            ("continue_on_success", True),
            ("sort_transports", False),
        ):
            value = keys.pop(name, None)
            if value is not None and self.flag(value, f"{key}.{name}") is not keep:
                self.ignore(
                    value,
                    f"{key}.{name}",
                    "lineage-sdk hands every event to every exporter, each on its own",
                )
        for name, value in keys.items():
            self.ignore(value, f"{key}.{name}", "not a setting of a composite transport")
        members: list[tuple[str, _Node]] = []
        if isinstance(members_node.value, dict):
            for name, member in members_node.value.items():
                if member.value:  # the client skips empty members
                    members.append((f"{key}.transports.{name}", member))
        elif isinstance(members_node.value, list):
            for index, member in enumerate(members_node.value):
                name_node = member.value.get("name") if isinstance(member.value, dict) else None
                label = name_node.value if name_node is not None else index
                members.append((f"{key}.transports.{label}", member))
        else:
            raise self.error(
                members_node, f"{key}.transports", "must be a list or a mapping of transports"
            )
        if not members:
            raise self.error(members_node, f"{key}.transports", "must name at least one transport")
        found: list[_Member] = []
        for member_key, member in members:
            found += self.transport(member, member_key)
        return found


def _leaves(node: _Node, key: str) -> Iterator[tuple[str, _Node]]:
    if isinstance(node.value, dict) and node.value:
        for name, child in node.value.items():
            yield from _leaves(child, f"{key}.{name}")
    elif isinstance(node.value, list) and node.value:
        for index, child in enumerate(node.value):
            yield from _leaves(child, f"{key}.{index}")
    else:
        yield key, node


def read_client_config(
    environ: Mapping[str, str],
    *,
    exporters_set_by: str | None,
    home: str | None = None,
) -> ClientConfig:
    """Read and map the OpenLineage client's configuration (see the module's doc).

    ``exporters_set_by`` names the source of lineage-sdk's own ``exporters`` when one sets it
    (then a transport type without an exporter is a warning, not an error). Raises
    :class:`ConfigError` for a malformed file or a wrong value, naming the key and its source;
    warns (``lineage_sdk.config`` logger) once for every key that is ignored.
    """
    found = find_client_file(environ, home=home)
    from_file = _read_yaml(*found) if found is not None else None
    from_env = _read_variables(environ)
    if from_file is None and from_env is None:
        return ClientConfig()
    if from_file is None or from_env is None:
        root = from_file or from_env
    else:
        root = _merge(from_env, from_file)  # the client's rule: the file wins
    assert root is not None
    mapper = _Mapper(exporters_set_by, bool(environ.get("OPENLINEAGE_URL", "").strip()))
    result = ClientConfig(file=found[0] if found is not None else None)
    top = mapper.table(root, "openlineage configuration")
    for name, value in top.items():
        if name != "transport":
            mapper.ignore(value, name, "lineage-sdk reads only the transport settings")
    transport = top.get("transport")
    if transport is None:
        return result
    keys = mapper.table(transport, "transport")
    if "type" not in keys:
        # The OpenLineage client ignores a transport without a type, too.
        mapper.ignore(transport, "transport", "it has no type")
        return result
    type_node = keys["type"]
    members = mapper.transport(transport, "transport")
    kind = mapper.text(type_node, "transport.type").lower()
    if kind not in _SUPPORTED:
        return result  # ignored, with a warning: lineage-sdk's own exporters decide
    result.transport_type = kind
    result.type_source = type_node.where("transport.type")
    kinds: list[str] = []
    for member in members:
        if member.kind in kinds:
            first = next(m for m in members if m.kind == member.kind)
            mapper.ignore(
                member.node,
                member.key,
                f"lineage-sdk has one {member.kind} exporter, set by {first.key}",
            )
            continue
        kinds.append(member.kind)
        result.entries += member.entries
    result.http_member = "http" in kinds
    if kind == "composite" and mapper.openlineage_url and not result.http_member:
        kinds.append("http")  # the client adds OPENLINEAGE_URL to a composite as default_http
    result.entries.insert(0, Entry(("exporters",), kinds, result.type_source, kinds))
    return result
