"""The reference of every configuration key and environment variable, rendered from the schema.

This is the one place the variables are documented: ``docs/configuration.md`` is its output, and a
test runs ``--check`` so the page cannot drift from the schema.

    python -m lineage_sdk.config.reference > docs/configuration.md
    python -m lineage_sdk.config.reference --check [docs/configuration.md]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from lineage_sdk.config._fields import NAME_PLACEHOLDER
from lineage_sdk.config.keys import CONFIG_FILE_ENV, ENV_ALIASES, ConfigKey, config_keys, tables
from lineage_sdk.config.loader import DEFAULT_CONFIG_FILE, OPENLINEAGE_VARIABLES
from lineage_sdk.config.openlineage_client import (
    CLIENT_CONFIG_ENV,
    CLIENT_FILE_NAME,
    DYNAMIC_PREFIX,
    MAPPING,
)

__all__ = ["DEFAULT_OUTPUT", "main", "render"]

DEFAULT_OUTPUT = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"

_EXAMPLE = """\
[lineage]
enabled = true
collector_topic = "platform.lineage.events"
exporters = ["rabbitmq"]          # console | file | memory | rabbitmq | http, several allowed

[lineage.producer]
job_namespace = "my-service-ns"
producer_uri = "https://github.com/my-org/my-service"

[lineage.store]
backend = "composite"
backends = ["document", "graph"]

    [lineage.store.document]
    collection_name = "audit_lineage_events"
    document_connection_name = "default_mongo"

    [lineage.store.graph]
    graph_connection_name = "analytics_graph"

[lineage.connections.default_mongo]
uri = "mongodb://127.0.0.1:27017/lineage"
"""


def _sections() -> list[tuple[str, type[BaseModel]]]:
    """(TOML table name, model) for every table: the core's, then each component's."""
    return [(table.name, table.model) for table in tables()]


def _toml_literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_literal(item) for item in value) + "]"
    return str(value)


def _default_text(key: ConfigKey) -> str:
    if key.required:
        return "required"
    if key.default is None:
        return "unset"
    return f"`{_toml_literal(key.default)}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _doc(model: type[BaseModel]) -> str:
    return " ".join((model.__doc__ or "").split())


def _precedence() -> list[str]:
    return [
        "## Where configuration comes from",
        "",
        "Sources, from lowest to highest precedence (a later one overrides an earlier one, "
        "key by key):",
        "",
        "1. the defaults below;",
        f"2. the OpenLineage client's transport configuration (`{CLIENT_FILE_NAME}` and "
        f"`{DYNAMIC_PREFIX}*` variables), mapped as the section below says; every "
        "lineage-sdk setting wins over it;",
        "3. the TOML file, its `[lineage]` table: the `path` given to `load_config`, else the "
        f"file named by `{CONFIG_FILE_ENV}`, else `{DEFAULT_CONFIG_FILE}` in the working "
        "directory if it exists (no file at all is fine);",
        "4. the simple `OPENLINEAGE_*` variables of the OpenLineage client, listed below (they "
        "rank above the file, as they always have);",
        "5. the `LINEAGE_*` variables;",
        '6. explicit overrides: `load_config(overrides={"rabbitmq.url": ...})`, which is what '
        "the command-line flags of `lineage-collector` and `lineage-instrument` produce.",
        "",
        "## Who validates what",
        "",
        "Each component owns its table and validates it when it is built, so a process checks "
        "only what it uses:",
        "",
        "- every process validates the core: `[lineage]` itself, `[lineage.producer]` and "
        "`[lineage.pipeline]`;",
        "- an application also validates the tables of the exporters it lists in `exporters` "
        "(`[lineage.rabbitmq]`, `[lineage.http]`, ...) and, under `lineage-instrument`, "
        "`[lineage.instrumentation]`. A bad collector setting in its environment cannot turn its "
        "lineage off;",
        "- `lineage-collector` validates `[lineage.rabbitmq]` (its connection keys), "
        "`[lineage.collector]`, `[lineage.store]`, the tables of the stores it writes to, the "
        "connections they name and, for `serve`, `[lineage.api]`; `lineage-collector check` "
        "validates every table;",
        "- a plugin (an exporter, store or instrumentor registered by entry point) brings its own "
        "table through its `config_class` (a `lineage_sdk.config.Section`): `[lineage.<kind>]` "
        "for an exporter, `[lineage.store.<kind>]` for a store, "
        "`[lineage.instrumentation.<kind>]` for an instrumentor, with `LINEAGE_<PATH>_*` "
        "variables and a section on this page.",
        "",
        'An unknown table or key in a table that is validated is an error with a "did you '
        'mean" hint.',
        "",
        "## Naming rules",
        "",
        "- Every key has an environment variable: its path under `lineage` joined with `_`, in "
        "upper case. `lineage.store.document.collection_name` is "
        "`LINEAGE_STORE_DOCUMENT_COLLECTION_NAME`.",
        "- Every key has a command-line flag: the same path joined with `-`, underscores as "
        "dashes. `lineage.rabbitmq.url` is `--rabbitmq-url`, `lineage.exporters` is "
        "`--exporters`.",
        "- Lists are comma-separated: `LINEAGE_EXPORTERS=console,file`, "
        "`LINEAGE_COLLECTOR_RETRY_DELAYS_MS=1000,5000`.",
        "- Booleans accept `true`/`false`, `1`/`0`, `yes`/`no` and `on`/`off`, in any case.",
        "- An empty environment variable counts as unset.",
        "- Connections are named tables: `LINEAGE_CONNECTIONS_<NAME>_<KEY>` sets "
        "`[lineage.connections.<name>]`, with the name in lower case "
        "(`LINEAGE_CONNECTIONS_DEFAULT_MONGO_URI` sets `connections.default_mongo.uri`).",
        "- Alert rules are an array of tables, named by position: in "
        "`LINEAGE_ALERTS_WEBHOOK_<NAME>_<KEY>` the name is the position of a "
        "`[[lineage.alerts.webhook]]` table, 0 for the first (a "
        "position the file has no table for adds a rule), so a secret can stay out of the "
        "file (`LINEAGE_ALERTS_WEBHOOK_0_SECRET`); messages name such a key "
        "`lineage.alerts.webhook[0].secret`.",
        "- An unknown `LINEAGE_*` variable close to a known one is reported as a warning naming "
        "the known one; it is not an error.",
        "- A bad value is one error naming the key, where it came from (file, environment "
        "variable or override), the value and what is allowed; passwords, API keys and URL "
        "passwords are shown as `***`. `lineage-collector` exits non-zero with that message; "
        "an application (`load_config_or_disabled`, the `lineage-instrument` bootstrap) logs it "
        "once at ERROR on the `lineage_sdk` logger and runs on with lineage disabled.",
        "",
    ]


def _special_variables() -> list[str]:
    lines = [
        "## Special variables",
        "",
        "| Environment variable | Meaning |",
        "|---|---|",
        f"| `{CONFIG_FILE_ENV}` | Path of the TOML file to read (see precedence above). |",
    ]
    for alias, target in ENV_ALIASES.items():
        canonical = "LINEAGE_" + target.replace(".", "_").upper()
        lines.append(
            f"| `{alias}` | Alias of `{canonical}` (`lineage.{target}`); the canonical name wins "
            "when both are set. |"
        )
    lines += [
        "",
        "## OpenLineage variables",
        "",
        "These variables of the OpenLineage client are honoured so an existing deployment keeps "
        "working; `LINEAGE_*` variables and overrides win over them. When the OpenLineage "
        "client's configuration (next section) names a transport, `OPENLINEAGE_URL`, "
        "`OPENLINEAGE_ENDPOINT` and `OPENLINEAGE_API_KEY` are ignored with a warning, as that "
        "client ignores them, except that a `composite` transport without an `http` member gets "
        "them as one more member.",
        "",
        "| Environment variable | Effect |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | {_cell(effect)} |" for name, effect in OPENLINEAGE_VARIABLES.items()]
    lines += _client_configuration()
    lines += ["", "## Example file", "", "```toml", _EXAMPLE.rstrip("\n"), "```", ""]
    return lines


def _client_configuration() -> list[str]:
    lines = [
        "",
        "## The OpenLineage client's configuration",
        "",
        "A user migrating from the OpenLineage Python client keeps its configuration. It is read "
        "as that client reads it:",
        "",
        f"- the file is the first of `${CLIENT_CONFIG_ENV}`, `./{CLIENT_FILE_NAME}` and "
        f"`~/.openlineage/{CLIENT_FILE_NAME}` that exists and is readable (an "
        f"`{CLIENT_CONFIG_ENV}` naming no readable file is a warning, and the search goes on);",
        f"- `{DYNAMIC_PREFIX}TRANSPORT__URL=...` sets `transport.url`: the name after "
        f"`{DYNAMIC_PREFIX}`, split at `__`, in lower case, is the key "
        f"(`{DYNAMIC_PREFIX}TRANSPORT__AUTH__API_KEY` is `transport.auth.api_key`, "
        f"`{DYNAMIC_PREFIX}TRANSPORT__TRANSPORTS__<NAME>__TYPE` the type of a composite's "
        "member); the value is read as JSON when it parses (`5`, `true`, "
        '`{"type": "api_key", "apiKey": "..."}`), else kept as text;',
        "- the file wins over these variables key by key (tables are merged, anything else is "
        "replaced), and every lineage-sdk setting (the `[lineage]` TOML table, `LINEAGE_*` "
        "variables, overrides) wins over both;",
        "- only `transport` is used. Every key lineage-sdk does not honour is named in one "
        "warning on the `lineage_sdk.config` logger, never with its value (API keys, header "
        "values). A malformed file, a wrong type or a missing required key is an error naming "
        "the key and where it came from (the file and key, or the variable), like any other "
        "bad setting;",
        "- `exporters` is set by the transport's type only while lineage-sdk's own `exporters` "
        "(file, `LINEAGE_EXPORTERS`, override) is unset.",
        "",
        "| OpenLineage client key | Transport type | lineage-sdk |",
        "|---|---|---|",
    ]
    lines += [f"| {_cell(key)} | {_cell(kind)} | {_cell(ours)} |" for key, kind, ours in MAPPING]
    return lines


def render() -> str:
    """The Markdown reference page, deterministic for a given schema."""
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python -m lineage_sdk.config.reference > docs/configuration.md` "
        "from lineage_sdk/config/schema.py. Do not edit by hand. -->",
        "",
        "lineage-sdk reads one `[lineage]` table of TOML, and an environment variable and a "
        "command-line flag for every key. Applications and `lineage-instrument` load it with "
        "`lineage_sdk.config.load_config_or_disabled()`, `lineage-collector` with "
        "`load_config()`.",
        "",
        *_precedence(),
        *_special_variables(),
    ]
    by_section: dict[str, list[ConfigKey]] = {}
    for key in config_keys():
        by_section.setdefault(key.section, []).append(key)
    for table, model in _sections():
        keys = by_section.get(table, [])
        if not keys:
            continue
        listed = bool(getattr(model, "listed_tables", False))  # [[lineage.alerts.webhook]]
        heading = f"[[{table.removesuffix('.' + NAME_PLACEHOLDER)}]]" if listed else f"[{table}]"
        lines += [f"## `{heading}`", ""]
        doc = _doc(model)
        if doc:
            lines += [doc, ""]
        lines += [
            "| Environment variable | TOML key | Type | Default | Description |",
            "|---|---|---|---|---|",
        ]
        for key in keys:
            env = f"`{key.env_var}`" + "".join(f"<br>`{alias}`" for alias in key.aliases)
            description = key.description + (" Secret: never logged." if key.secret else "")
            lines.append(
                f"| {env} | `{key.path.rsplit('.', 1)[-1]}` | `{_cell(key.type)}` | "
                f"{_cell(_default_text(key))} | {_cell(description)} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the page, write it (``--output``) or check it is current (``--check``)."""
    parser = argparse.ArgumentParser(
        prog="python -m lineage_sdk.config.reference",
        description="Render the configuration reference (docs/configuration.md) from the schema.",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--check",
        nargs="?",
        const=str(DEFAULT_OUTPUT),
        metavar="FILE",
        help="exit 1 if FILE (default: docs/configuration.md) is not current",
    )
    group.add_argument("--output", "-o", metavar="FILE", help="write the page to FILE")
    args = parser.parse_args(argv)
    text = render()
    if args.check is not None:
        target = Path(args.check)
        try:
            current = target.read_text(encoding="utf-8")
        except OSError as exc:
            print(
                f"{target}: cannot read ({exc.strerror or exc}); regenerate it with "
                "`python -m lineage_sdk.config.reference -o docs/configuration.md`",
                file=sys.stderr,
            )
            return 1
        if current != text:
            print(
                f"{target} is stale; regenerate it with "
                "`python -m lineage_sdk.config.reference -o docs/configuration.md`",
                file=sys.stderr,
            )
            return 1
        return 0
    if args.output is not None:
        Path(args.output).write_text(text, encoding="utf-8")
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
