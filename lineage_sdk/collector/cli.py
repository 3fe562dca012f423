"""``lineage-collector``: run the collector, check its configuration, manage the parking lot.

Every configuration key of the sections the collector reads gets a flag named by the project's
rule (``collector.prefetch`` -> ``--collector-prefetch``), generated from
:func:`lineage_sdk.config.config_keys`, so flags, ``LINEAGE_*`` variables and TOML keys never
drift apart. Flag values are text and are parsed exactly like environment variables.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import signal
import sys
import threading
import time
import typing
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Annotated, Any, BinaryIO, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from lineage_sdk.collector.settings import CollectorConfig
from lineage_sdk.collector.startup import StartupError
from lineage_sdk.config import config_keys, load_config, redact
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError, LineageError, StoreError

__all__ = ["app", "main"]

_SECTIONS = (
    "collector_topic",
    "rabbitmq.",
    "store.",
    "collector.",
    "connections.",
    "api.",
    "alerts.",
)
F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(
    name="lineage-collector",
    help="Consume OpenLineage events from RabbitMQ and write them to the configured stores.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
dlq_app = typer.Typer(
    help="Inspect, replay or purge the dead-letter (parking-lot) queue.", no_args_is_help=True
)
app.add_typer(dlq_app, name="dlq")
topology_app = typer.Typer(
    help="Bring the broker's queues in line with the configuration.", no_args_is_help=True
)
app.add_typer(topology_app, name="topology")
store_app = typer.Typer(
    help="Create what the configured stores need (tables, indexes).", no_args_is_help=True
)
app.add_typer(store_app, name="store")
api_key_app = typer.Typer(
    help="Make API keys for [lineage.api.keys.NAME]: the configuration holds only their hash.",
    no_args_is_help=True,
)
app.add_typer(api_key_app, name="api-key")
alerts_app = typer.Typer(
    help="Alerts to webhooks (\\[\\[lineage.alerts.webhook]]): make a signing secret, list and"
    " replay parked alerts.",
    no_args_is_help=True,
)
app.add_typer(alerts_app, name="alerts")
err = Console(stderr=True)
out = Console()


def _flag_keys() -> list[tuple[str, str, str, str]]:
    """(python identifier, flag, dotted path, help) for every non-templated collector key."""
    found = []
    for key in config_keys():
        if key.templated or not key.path.startswith(_SECTIONS):
            continue
        ident = "cfg_" + key.path.replace(".", "__")
        help_text = key.description + ("" if key.secret else f" [default: {key.default!r}]")
        found.append((ident, key.flag, key.path, f"{help_text} (env {key.env_var})"))
    return found


def with_config_flags(func: F) -> F:
    """Add ``--config`` and one option per configuration key to a typer command; the wrapped
    function receives the loaded :class:`LineageConfig` as ``config``."""
    specs = _flag_keys()
    sig = inspect.signature(func)
    hints = typing.get_type_hints(func, include_extras=True)
    params = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in sig.parameters.values()
        if p.name != "config"
    ]
    params.append(
        inspect.Parameter(
            "config_path",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Path | None,
            default=typer.Option(
                None,
                "--config",
                "-c",
                help="TOML file with a \\[lineage] table "
                "(default: $LINEAGE_CONFIG, else ./lineage.toml if present).",
                exists=False,
                dir_okay=False,
            ),
        )
    )
    for ident, flag, path, help_text in specs:
        panel = "Configuration: " + (path.split(".", 1)[0] if "." in path else "general")
        params.append(
            inspect.Parameter(
                ident,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=str | None,
                default=typer.Option(
                    None, flag, help=help_text, rich_help_panel=panel, show_default=False
                ),
            )
        )
    by_ident = {ident: path for ident, _, path, _ in specs}

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        overrides = {by_ident[k]: kwargs.pop(k) for k in list(kwargs) if k in by_ident}
        overrides = {k: v for k, v in overrides.items() if v is not None}
        config_path = kwargs.pop("config_path", None)
        kwargs["config"] = _load(config_path, overrides)
        return func(*args, **kwargs)

    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def _load(path: Path | None, overrides: dict[str, Any]) -> LineageConfig:
    if path is not None and not path.is_file():
        raise ConfigError("--config", str(path), "an existing TOML file")
    return load_config(path=path, overrides=overrides, openlineage_client=False)


def _events_logger(config: LineageConfig) -> str:
    """The logging store's logger, so its JSON lines are routed apart from the collector's log."""
    from lineage_sdk.collector.stores.logging import LoggingStoreConfig

    return config.section("store.logging", LoggingStoreConfig).logger_name


def _fail(message: str, code: int = 2) -> typer.Exit:
    err.print(  # escaped: "[lineage.api]" in a message is text, not markup
        f"[bold red]lineage-collector: error:[/] {escape(redact(message))}",
        highlight=False,
        markup=True,
        soft_wrap=True,
    )
    return typer.Exit(code)


def _say(text: str) -> None:
    """One line of a command's result on stdout, as written (no markup, no wrapping)."""
    out.print(text, highlight=False, markup=False, soft_wrap=True)


LogLevel = Annotated[str, typer.Option("--log-level", help="DEBUG, INFO, WARNING or ERROR.")]
LogFormat = Annotated[
    str,
    typer.Option(
        "--log-format", help="json (one JSON object a line, the default) or text (plain lines)."
    ),
]
WaitForServices = Annotated[
    int | None,
    typer.Option(
        "--wait-for-services",
        metavar="SECONDS",
        min=0,
        help="Wait up to SECONDS at start-up for a broker or store that cannot be reached yet; "
        "a refused password, a missing vhost or database still exits at once "
        "(default: collector.wait_for_services, env LINEAGE_COLLECTOR_WAIT_FOR_SERVICES, 0).",
        show_default=False,
    ),
]


def _start_logging(config: LineageConfig, log_level: str, log_format: str) -> None:
    from lineage_sdk.collector.logs import LOG_FORMATS, configure_logging

    if log_format not in LOG_FORMATS:
        raise typer.BadParameter(
            f"{log_format!r} is not one of {', '.join(LOG_FORMATS)}", param_hint="--log-format"
        )
    configure_logging(log_level, events_logger=_events_logger(config), log_format=log_format)


def _wait_s(config: LineageConfig, flag: int | None) -> int:
    """``--wait-for-services``, else ``collector.wait_for_services``."""
    if flag is not None:
        return flag
    return config.section("collector", CollectorConfig).wait_for_services


@app.command()
@with_config_flags
def run(
    config: LineageConfig,
    log_level: LogLevel = "INFO",
    log_format: LogFormat = "json",
    wait_for_services: WaitForServices = None,
) -> None:
    """Run the collector until SIGTERM or SIGINT (the default command).

    At start-up a refused password or login, or a vhost or database that does not exist, exits
    2 with one line; an unreachable broker or store exits 1, or is waited for with
    --wait-for-services. Once running, every failure is retried."""
    from lineage_sdk.collector.consumer import LineageCollector
    from lineage_sdk.collector.health import HealthServer
    from lineage_sdk.collector.startup import connect_broker, open_stores, tune_gc

    _start_logging(config, log_level, log_format)
    collector = LineageCollector(config)
    collector.manager.build()  # configuration errors of the stores surface before connecting
    _check_alert_rules(config)  # and of the alert rules (the watch starts once connected)
    settings = config.section("collector", CollectorConfig)
    done = threading.Event()  # live while it waits for the services, then as the collector is
    health = None
    if settings.health_port:
        health = HealthServer(
            settings.health_host,
            settings.health_port,
            registry=collector.metrics.registry,
            live=lambda: collector.alive or not done.is_set(),
            ready=lambda: collector.ready,
        )
        health.start()
    retention = None
    try:
        wait = _wait_s(config, wait_for_services)
        deadline = time.monotonic() + wait  # one wait for the stores and the broker together
        open_stores(collector.manager, wait, deadline)
        try:
            connect_broker(config, wait, deadline)
        except BaseException:
            collector.manager.close_sync()
            raise

        def _on_signal(signum: int, _frame: FrameType | None) -> None:
            collector.stop()

        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)
        retention = _retention_task(collector.manager.stores, settings)
        tune_gc()
        collector.run()
    finally:
        done.set()
        if retention is not None:
            retention.stop()
        if health is not None:
            health.close()


def _retention_task(stores: list[Any], settings: CollectorConfig) -> Any:
    """The periodic retention of ``collector.retention_older_than``, started; None when unset."""
    if settings.retention_older_than is None:
        return None
    from lineage_sdk.collector.retention import RetentionTask, deleters, parse_age

    task = RetentionTask(
        deleters(stores),
        parse_age(settings.retention_older_than, "collector.retention_older_than"),
        interval_s=settings.retention_interval_ms / 1000,
        batch_size=settings.retention_batch_size,
    )
    task.start()
    return task


def _check_api_keys(config: LineageConfig) -> None:
    """The rules across [lineage.api] and its keys (distinct hashes, protect_reads), as
    ``serve`` applies them."""
    from lineage_sdk.collector.api.access import AccessPolicy
    from lineage_sdk.collector.api.server import api_settings

    settings = api_settings(config)
    AccessPolicy(
        api_key=settings["api_key"], keys=settings["keys"], protect_reads=settings["protect_reads"]
    )


def _check_alert_rules(config: LineageConfig) -> None:
    """The rules across [[lineage.alerts.webhook]] tables (one rule per URL), as the watch
    builds them."""
    from lineage_sdk.collector.watch.rules import rules_of

    rules_of(config)


@app.command()
@with_config_flags
def check(config: LineageConfig) -> None:
    """Validate the configuration (every table, exporter and store names included), reach the
    broker and every store, and report what is missing; changes nothing. Exits 0 when all is
    well, 1 when something is missing or unreachable, 2 on a configuration error."""
    from lineage_sdk.collector.consumer import broker_addresses
    from lineage_sdk.collector.manager import LineageManager
    from lineage_sdk.collector.topology import (
        DECLARE_COMMAND,
        Topology,
        TopologyMismatch,
        broker_connection,
    )
    from lineage_sdk.transport.amqp import describe_failure

    config.validate_sections()  # every table and the exporter names, not only what it builds
    _check_api_keys(config)
    _check_alert_rules(config)
    manager = LineageManager(config)
    manager.build()  # a bad store name is a configuration error too
    table = Table(title="lineage-collector check")
    table.add_column("part")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    failed = False
    topology = Topology.from_config(config)
    brokers = broker_addresses(config)
    for params, shown in brokers:  # every node of a cluster: a failover target must work too
        part = "broker" if len(brokers) == 1 else f"broker {shown}"
        try:
            with broker_connection(params) as connection:
                missing = topology.missing(connection)
        except ConfigError:
            raise
        except TopologyMismatch as exc:
            failed = True
            table.add_row(part, "[red]failed[/]", escape(str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - any failure to reach the broker is reported
            failed = True
            table.add_row(part, "[red]failed[/]", escape(describe_failure(exc, params)[0]))
            continue
        if missing:
            failed = True
            detail = (
                f"{shown}: missing {', '.join(missing)}; create with `{DECLARE_COMMAND}` (or "
                "`lineage-collector run`, which declares them at start)"
            )
            table.add_row(part, "[red]missing[/]", escape(detail))
        else:
            detail = f"{shown} queue {topology.queue}, dead-letter {topology.dead_letter_queue}"
            table.add_row(part, "[green]ok[/]", escape(detail))
    addresses = {store.name: getattr(store, "address", "") for store in manager.stores}
    for name, problem in manager.probe().items():
        failed = failed or problem is not None
        detail = redact(problem) if problem else addresses.get(name, "")
        status = "[green]ok[/]"
        if problem:
            status = "[red]missing[/]" if problem.startswith("missing ") else "[red]failed[/]"
        table.add_row(f"store {name}", status, escape(detail))
    failed = _check_watch(config, table) or failed
    out.print(table)
    if failed:
        raise typer.Exit(1)


def _check_watch(config: LineageConfig, table: Table) -> bool:
    """The alerts' row of ``check``: the rules (their URLs redacted) and the watch's store,
    what it misses (created at start) or why it cannot be reached; True when it cannot."""
    from lineage_sdk.collector.watch.rules import alerts_settings, rules_of
    from lineage_sdk.collector.watch.store import WatchStore

    rules = rules_of(config)
    if not rules:
        return False
    store = WatchStore(alerts_settings(config).store_url(config))
    sent_to = ", ".join(rule.shown for rule in rules)
    try:
        missing = store.missing()
    except StoreError as exc:
        table.add_row("alerts", "[red]failed[/]", escape(redact(str(exc))))
        return True
    detail = f"{len(rules)} rule(s) sending to {sent_to}; watch store {store.address}"
    if missing:
        detail += f" (created at start: {', '.join(missing)})"
    table.add_row("alerts", "[green]ok[/]", escape(detail))
    return False


@app.command()
@with_config_flags
def serve(
    config: LineageConfig,
    host: Annotated[str | None, typer.Option(help="Listen address (default: api.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port (default: api.port).")] = None,
    log_level: LogLevel = "INFO",
    insecure: Annotated[
        bool,
        typer.Option(
            "--insecure",
            help="Listen on a non-loopback address without api.api_key (logged as a warning).",
        ),
    ] = False,
    log_format: LogFormat = "json",
    wait_for_services: WaitForServices = None,
) -> None:
    """Serve the HTTP API: OpenLineage ingest, Marquez-compatible reads, the graph page at /.

    A non-loopback address needs api.api_key, unless --insecure is given. At start-up a refused
    login or a missing database exits 2 with one line; an unreachable store exits 1, or is
    waited for with --wait-for-services."""
    from lineage_sdk.collector.api import serve as serve_api
    from lineage_sdk.collector.startup import open_stores

    _start_logging(config, log_level, log_format)
    wait = _wait_s(config, wait_for_services)
    serve_api(
        config,
        host,
        port,
        log_level=log_level,
        insecure=insecure,
        open_stores=lambda manager: open_stores(manager, wait),
    )


@dlq_app.command("list")
@with_config_flags
def dlq_list(
    config: LineageConfig,
    limit: Annotated[int, typer.Option(help="Most messages to show.")] = 20,
    json_output: Annotated[bool, typer.Option("--json", help="JSON lines.")] = False,
) -> None:
    """Show parked messages with the reason, store, error and attempts (they stay parked)."""
    import orjson

    from lineage_sdk.collector.dlq import DeadLetterQueue

    dlq = DeadLetterQueue(config)
    total = dlq.count()
    messages = dlq.list(limit)
    if json_output:
        for m in messages:
            sys.stdout.write(
                orjson.dumps(
                    {
                        "reason": m.reason,
                        "store": m.store,
                        "error": m.error,
                        "attempts": m.attempts,
                        "message_id": m.message_id,
                        "content_type": m.content_type,
                        "body": m.body.decode("utf-8", "replace")[:2000],
                    }
                ).decode()
                + "\n"
            )
        return
    table = Table(title=f"{dlq.topology.dead_letter_queue}: {total} parked message(s)")
    for col in ("reason", "store", "attempts", "error", "body"):
        table.add_column(col, overflow="fold")
    for m in messages:
        table.add_row(
            m.reason,
            m.store,
            str(m.attempts),
            m.error[:200],
            m.body[:80].decode("utf-8", "replace"),
        )
    out.print(table)


@dlq_app.command("replay")
@with_config_flags
def dlq_replay(
    config: LineageConfig,
    limit: Annotated[int | None, typer.Option(help="Most messages to replay.")] = None,
    reason: Annotated[
        str | None, typer.Option(help="Only messages parked for this reason.")
    ] = None,
) -> None:
    """Send parked messages back to the collector's queue, with fresh attempts."""
    from lineage_sdk.collector.dlq import DeadLetterQueue

    dlq = DeadLetterQueue(config)
    with Progress(
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=False,
    ) as progress:
        task = progress.add_task("replay", total=None)

        def _progress(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        replayed = dlq.replay(limit, reason=reason, progress=_progress)
    out.print(f"replayed {replayed} message(s) to {dlq.topology.queue}")


@dlq_app.command("purge")
@with_config_flags
def dlq_purge(
    config: LineageConfig,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Delete every parked message."""
    from lineage_sdk.collector.dlq import DeadLetterQueue

    dlq = DeadLetterQueue(config)
    if not yes and not typer.confirm(
        f"Delete all {dlq.count()} message(s) in {dlq.topology.dead_letter_queue}?"
    ):
        raise typer.Exit(1)
    out.print(f"purged {dlq.purge()} message(s)")


@topology_app.command("declare")
@with_config_flags
def topology_declare(config: LineageConfig) -> None:
    """Declare the exchange, queues and binding the configuration names (what `run` declares at
    start); harmless when they exist. `check` reports what is missing without declaring."""
    from lineage_sdk.collector.consumer import connection_parameters
    from lineage_sdk.collector.topology import Topology, TopologyMismatch, broker_connection
    from lineage_sdk.transport.amqp import describe_failure

    topology = Topology.from_config(config)
    params = connection_parameters(config)
    try:
        with broker_connection(params) as connection:
            topology.declare(connection.channel())
    except TopologyMismatch as exc:
        raise _fail(str(exc), 1) from None
    except Exception as exc:  # noqa: BLE001 - any broker failure is one line
        raise _fail(f"topology declare: {describe_failure(exc, params)[0]}", 1) from None
    queues = ", ".join(spec.name for spec in topology.queues())
    _say(f"declared exchange {topology.exchange} and queues {queues}")


@store_app.command("init")
@with_config_flags
def store_init(config: LineageConfig) -> None:
    """Create the tables, collections and indexes of the configured stores (what `run` and
    `serve` do at start); harmless when they exist."""
    from lineage_sdk.collector.manager import LineageManager

    manager = LineageManager(config)
    manager.init_stores()
    _say(f"initialized store(s): {', '.join(s.name for s in manager.stores)}")


@topology_app.command("migrate")
@with_config_flags
def topology_migrate(config: LineageConfig) -> None:
    """Recreate queues whose type or arguments differ from the configuration (e.g. classic to
    quorum), moving their messages in transactions the broker commits once the copies are
    confirmed. Stop every collector first; safe to run again after an interruption, and a no-op
    when nothing differs."""
    from lineage_sdk.collector.migration import HOLDING_SUFFIX, migrate_topology

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err,
        transient=False,
    ) as progress:
        tasks: dict[tuple[str, str], Any] = {}

        def _progress(source: str, target: str, moved: int, total: int) -> None:
            key = (source, target)
            if key not in tasks:
                tasks[key] = progress.add_task(f"{source} -> {target}", total=total)
            progress.update(tasks[key], completed=moved, total=total)

        steps = migrate_topology(config, _progress)
    queue_type = config.section("collector", CollectorConfig).queue_type
    if not steps:
        out.print(f"every queue already matches the configuration (queue_type = {queue_type!r})")
        return
    queues = {s.target for s in steps if not s.target.endswith(HOLDING_SUFFIX)}
    kept = sum(s.moved for s in steps if s.target in queues)
    out.print(f"migrated to {queue_type}: {', '.join(sorted(queues))}; {kept} message(s) moved")


def _toml_list(items: list[str]) -> str:
    import json

    return "[" + ", ".join(json.dumps(item) for item in items) + "]"


@api_key_app.command("new")
def api_key_new(
    name: Annotated[str, typer.Option(help="The key's name: its table [lineage.api.keys.NAME].")],
    write: Annotated[
        list[str] | None,
        typer.Option(help="A namespace (or pattern, `team.*`, `*`) it may write; repeatable."),
    ] = None,
    read: Annotated[
        list[str] | None,
        typer.Option(help="A namespace (or pattern) it may read; repeatable."),
    ] = None,
) -> None:
    """Generate a key: the key on stderr (shown once; give it to the client), its configuration
    table on stdout (holding only the hash), so `... >> lineage.toml` stores no key."""
    import re

    from lineage_sdk.collector.api.access import hash_key, new_key

    if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
        raise _fail("--name must be letters, digits, '_' or '-' (it names a TOML table)")
    if not write and not read:
        raise _fail("give --write and/or --read (a namespace, a pattern such as team.*, or *)")
    key = new_key()
    err.print(f"API key {name} (shown once; store it in the client's secret store):")
    err.print(key, highlight=False, soft_wrap=True)
    lines = [f"[lineage.api.keys.{name}]", f'key_hash = "{hash_key(key)}"']
    lines.append(f"write = {_toml_list(write or [])}")
    lines.append(f"read = {_toml_list(read or [])}")
    sys.stdout.write("\n".join(lines) + "\n")


@alerts_app.command("secret")
def alerts_secret() -> None:
    """Print a new Standard Webhooks signing secret (`whsec_` and base64 of 32 random bytes)
    for a rule's `secret`, and give the same to its receiver."""
    from lineage_sdk.collector.watch.envelope import new_secret

    sys.stdout.write(new_secret() + "\n")


def _watch_store(config: LineageConfig) -> Any:
    """The watch's store of ``config`` ([lineage.alerts] store), opened."""
    from lineage_sdk.collector.watch.rules import alerts_settings
    from lineage_sdk.collector.watch.store import WatchStore

    store = WatchStore(alerts_settings(config).store_url(config))
    store.open()
    return store


def _alert_json(alert: Any, urls: dict[str, str]) -> dict[str, Any]:
    """One alert row as ``alerts list --format json`` shows it (the body's type and subject)."""
    import orjson

    from lineage_sdk.collector.records import format_time

    try:
        event = orjson.loads(alert.body)
    except orjson.JSONDecodeError:
        event = {}
    return {
        "id": alert.id,
        "causeId": alert.cause_id,
        "rule": alert.rule,
        "url": urls.get(alert.rule),
        "type": event.get("type"),
        "subject": event.get("subject"),
        "status": alert.status,
        "attempts": alert.attempts,
        "firstAt": format_time(alert.first_at),
        "nextAt": format_time(alert.next_at),
        "sentAt": None if alert.sent_at is None else format_time(alert.sent_at),
        "lastError": alert.last_error,
    }


@alerts_app.command("list")
@with_config_flags
def alerts_list(
    config: LineageConfig,
    status: Annotated[
        str | None,
        typer.Option(help="Only alerts in this status: parked, pending or sent."),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="Most alerts to show (the latest).")] = 100,
    output: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
) -> None:
    """Show alerts (the latest first) with their status, attempts and last error; parked ones
    wait for `alerts replay`."""
    import orjson

    from lineage_sdk.collector.watch.rules import rules_of
    from lineage_sdk.collector.watch.store import ALERT_STATUSES

    if status is not None and status not in ALERT_STATUSES:
        raise typer.BadParameter(
            f"{status!r} is not one of {', '.join(ALERT_STATUSES)}", param_hint="--status"
        )
    if output not in ("table", "json"):
        raise typer.BadParameter(f"{output!r} is not table or json", param_hint="--format")
    urls = {rule.key: rule.shown for rule in rules_of(config)}
    store = _watch_store(config)
    try:
        rows = [_alert_json(a, urls) for a in store.alerts(status=status, limit=limit)]
        counts = store.counts()
    finally:
        store.close()
    if output == "json":
        sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    shown = ", ".join(f"{n} {s}" for s, n in counts.items())
    table = Table(title=f"alerts in {redact(store.address)}: {shown}")
    for col in ("id", "status", "attempts", "type", "subject", "receiver", "when", "last error"):
        table.add_column(col, overflow="fold")
    for row in rows:
        when = row["sentAt"] if row["status"] == "sent" else row["nextAt"]
        table.add_row(
            row["id"],
            row["status"],
            str(row["attempts"]),
            row["type"] or "",
            row["subject"] or "",
            row["url"] or row["rule"],
            when or "",
            (row["lastError"] or "")[:200],
        )
    out.print(table)


@alerts_app.command("replay")
@with_config_flags
def alerts_replay(
    config: LineageConfig,
    ids: Annotated[
        list[str] | None, typer.Argument(metavar="ID", help="Alerts to send again.")
    ] = None,
    all_parked: Annotated[bool, typer.Option("--all-parked", help="Every parked alert.")] = False,
) -> None:
    """Make parked alerts (or the alerts named, whatever their status) pending again, with a
    fresh retry time: the running collectors send them (same id, signed anew)."""
    if not ids and not all_parked:
        raise _fail("give alert ids (see `lineage-collector alerts list`) or --all-parked")
    store = _watch_store(config)
    try:
        count = 0
        if all_parked:
            count += store.replay(None)
        if ids:
            known = [i for i in dict.fromkeys(ids) if store.alert(i) is not None]
            missing = [i for i in dict.fromkeys(ids) if i not in known]
            count += store.replay(known)
    finally:
        store.close()
    _say(f"replayed {count} alert(s): pending now, sent by the running collectors")
    if ids and missing:
        raise _fail(f"no such alert: {', '.join(missing)}", 1)


@api_key_app.command("hash")
def api_key_hash() -> None:
    """Print the key_hash line for a key read from stdin (or typed at a hidden prompt), never
    from the command line, where shells and `ps` would keep it."""
    from lineage_sdk.collector.api.access import hash_key

    tty = sys.stdin.isatty()
    key = (typer.prompt("API key", hide_input=True) if tty else sys.stdin.readline()).strip()
    if not key:
        raise _fail(
            "no key given: pipe it on stdin, e.g. `printenv MY_KEY | lineage-collector "
            "api-key hash`"
        )
    sys.stdout.write(f'key_hash = "{hash_key(key)}"\n')


# -- portability: export, import, rebuild (the logic is in lineage_sdk.collector.portability) ----


def _when(value: str | None, option: str) -> datetime | None:
    """An ISO-8601 date or date-time option (offset-less is UTC), or a clear usage error."""
    if value is None:
        return None
    from lineage_sdk.collector.records import parse_event_time
    from lineage_sdk.exceptions import InvalidEventError

    try:
        return parse_event_time(value).astimezone(UTC)
    except InvalidEventError:
        raise typer.BadParameter(
            f"{value!r} is not an ISO-8601 date or date-time (e.g. 2025-03-01T12:00:00Z)",
            param_hint=option,
        ) from None


def _progress(description: str) -> Progress:
    """A progress bar on stderr, shown only when stderr is a terminal."""
    return Progress(
        TextColumn(description),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
        console=err,
        transient=False,
        disable=not err.is_terminal,
    )


def _tick(progress: Progress, task: Any, started: float) -> Callable[[int], None]:
    def update(done: int) -> None:
        elapsed = time.perf_counter() - started
        rate = f"{done / elapsed:,.0f}/s" if elapsed > 0 else ""
        progress.update(task, completed=done, rate=rate)

    return update


Since = Annotated[
    str | None,
    typer.Option("--since", help="Only events at or after this time (ISO-8601; UTC if no offset)."),
]
Until = Annotated[
    str | None,
    typer.Option("--until", help="Only events before this time (ISO-8601; UTC if no offset)."),
]
BatchSize = Annotated[int, typer.Option("--batch-size", min=1, help="Events per read or write.")]


@app.command("export")
@with_config_flags
def export_cmd(
    config: LineageConfig,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(help="Only events of this job namespace (a DatasetEvent: its dataset's)."),
    ] = None,
    since: Since = None,
    until: Until = None,
    store: Annotated[
        str | None,
        typer.Option(help="Read from this configured store (default: sql, document, graph)."),
    ] = None,
    batch_size: BatchSize = 1000,
) -> None:
    """Write every raw event the stores hold as NDJSON, one event per line, as received, in
    (eventTime, event id) order; streamed, so any size fits in constant memory."""
    from lineage_sdk.collector.manager import LineageManager
    from lineage_sdk.collector.portability import export_events, opened, raw_source

    start, end = _when(since, "--since"), _when(until, "--until")
    source = raw_source(LineageManager(config).build(), store)
    with opened(source):
        total = source.count_raw_events(namespace=namespace, since=start, until=end)
        partial = output.with_name(output.name + ".partial") if output else None
        with contextlib.ExitStack() as stack:
            sink: BinaryIO = (
                stack.enter_context(partial.open("wb")) if partial else sys.stdout.buffer
            )
            progress = stack.enter_context(_progress(f"export from {source.name}"))
            task = progress.add_task("export", total=total, rate="")
            try:
                written = export_events(
                    source,
                    sink,
                    namespace=namespace,
                    since=start,
                    until=end,
                    batch_size=batch_size,
                    progress=_tick(progress, task, time.perf_counter()),
                )
            except BrokenPipeError:  # `export | head`: the reader has all it wanted
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                raise typer.Exit(141) from None
    if output is not None and partial is not None:
        partial.replace(output)  # only a complete export takes the file's name
    err.print(
        f"exported {written} event(s) from the {source.name} store", highlight=False, soft_wrap=True
    )


@app.command("import")
@with_config_flags
def import_cmd(
    config: LineageConfig,
    path: Annotated[str, typer.Argument(help="NDJSON file, one event per line; - for stdin.")],
    batch_size: BatchSize = 500,
) -> None:
    """Store the events of an NDJSON file through the ingest path (same validation, idempotent).

    A bad line is reported with its number and reason and skipped; the good ones are stored.
    Exits 1 when any line was refused."""
    import asyncio

    from lineage_sdk.collector.manager import LineageManager
    from lineage_sdk.collector.portability import import_events, ndjson_lines
    from lineage_sdk.collector.service import LineageCollectorService

    max_bytes = config.section("collector", CollectorConfig).max_message_bytes
    if path == "-":
        stream: BinaryIO = sys.stdin.buffer
        size = None
    else:
        file = Path(path)
        if not file.is_file():
            raise _fail(f"import: {path}: no such file")
        stream = file.open("rb")
        size = file.stat().st_size

    def refused(number: int, reason: str) -> None:
        err.print(
            f"{path}:{number}: refused: {reason}", highlight=False, markup=False, soft_wrap=True
        )

    async def run_import() -> Any:
        service = LineageCollectorService(LineageManager(config))
        async with service:
            with _progress("import (bytes)") as progress:
                task = progress.add_task("import", total=size, rate="")

                def bytes_done(done: int) -> None:
                    progress.update(task, completed=done)

                return await import_events(
                    service,
                    ndjson_lines(stream),
                    batch_size=batch_size,
                    max_bytes=max_bytes,
                    on_refused=refused,
                    progress=bytes_done,
                )

    try:
        report = asyncio.run(run_import())
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    out.print(
        f"imported {report.imported}, already present {report.already_present}, "
        f"refused {report.refused}",
        highlight=False,
        soft_wrap=True,
    )
    if report.refused:
        raise typer.Exit(1)


@app.command("rebuild")
@with_config_flags
def rebuild_cmd(
    config: LineageConfig,
    source_name: Annotated[
        str, typer.Option("--from", help="The store whose raw events are copied: document or sql.")
    ],
    target_name: Annotated[
        str, typer.Option("--to", help="The store rebuilt from them: graph, sql or document.")
    ],
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            help="Where progress is kept, to resume after an interruption "
            "(default: ./lineage-rebuild-FROM-TO.checkpoint.json; removed when done)."
        ),
    ] = None,
    batch_size: BatchSize = 1000,
    stop_after: Annotated[
        int | None,
        typer.Option(
            "--stop-after", min=1, help="Copy at most this many events, then stop (resumable)."
        ),
    ] = None,
) -> None:
    """Rebuild one configured store from another's raw events (e.g. after a change of the graph
    model). Resumable: run the same command again after an interruption and it continues."""
    from lineage_sdk.collector.manager import LineageManager
    from lineage_sdk.collector.portability import opened, raw_source, rebuild_store
    from lineage_sdk.collector.stores.composite import leaf_stores

    if source_name not in ("document", "sql"):
        raise typer.BadParameter("must be document or sql", param_hint="--from")
    if target_name not in ("graph", "sql", "document"):
        raise typer.BadParameter("must be graph, sql or document", param_hint="--to")
    path = checkpoint or Path(f"lineage-rebuild-{source_name}-{target_name}.checkpoint.json")
    manager = LineageManager(config)
    source = raw_source(manager.build(), source_name)
    targets = [s for s in leaf_stores(manager.stores) if s.name == target_name]
    if not targets:
        raise ConfigError(
            "store.backends",
            manager.backend_names(),
            f"a list that holds {target_name!r}, the store to rebuild",
        )
    with opened(source, targets[0]):
        total = source.count_raw_events()

        def refused(count: int, reason: str) -> None:
            err.print(f"skipped (invalid): {reason}", highlight=False, markup=False, soft_wrap=True)

        with _progress(f"rebuild {target_name} from {source_name}") as progress:
            task = progress.add_task("rebuild", total=total, rate="")
            try:
                report = rebuild_store(
                    source,
                    targets[0],
                    checkpoint=path,
                    batch_size=batch_size,
                    limit=stop_after,
                    on_refused=refused,
                    progress=_tick(progress, task, time.perf_counter()),
                )
            except StoreError as exc:
                raise _fail(
                    f"rebuild stopped: {exc}; {path} keeps the progress: "
                    "run the same command again to resume",
                    1,
                ) from None
    resumed = (
        f" (resumed after {report.resumed_from[0].isoformat()})" if report.resumed_from else ""
    )
    state = "complete" if report.complete else f"stopped; resume with the same command ({path})"
    out.print(
        f"rebuild {target_name} from {source_name}: copied {report.copied} event(s){resumed}, "
        f"skipped {report.refused}; {state}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


# -- retention and hard deletion (the logic is in lineage_sdk.collector.retention) -------------

delete_app = typer.Typer(
    help="Hard delete (compliance): remove every raw event naming a job, a dataset or a "
    "namespace, and everything derived from them, from every configured store.",
    no_args_is_help=True,
)
app.add_typer(delete_app, name="delete")
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="Count what would be removed; remove nothing.")
]


def _purge_command(
    config: LineageConfig,
    what: str,
    run: Callable[[list[Any], bool, Callable[[str, int], None]], Any],
    *,
    dry_run: bool,
    totals: Callable[[Any], int | None] = lambda store: None,
) -> None:
    """Open the stores that keep raw events, run one purge with a progress bar per store (stderr,
    a terminal only), and print what each store removed."""
    from lineage_sdk.collector.manager import LineageManager
    from lineage_sdk.collector.portability import opened
    from lineage_sdk.collector.retention import deleters

    stores = deleters(LineageManager(config).build())
    with opened(*stores), _progress(what) as progress:
        tasks = {s.name: progress.add_task(s.name, total=totals(s), rate="") for s in stores}
        started = time.perf_counter()

        def tick(name: str, done: int) -> None:
            _tick(progress, tasks[name], started)(done)

        try:
            report = run(stores, dry_run, tick)
        except StoreError as exc:
            raise _fail(
                f"{what} stopped: {exc}; what was removed stays removed: run the "
                "same command again to finish",
                1,
            ) from None
    verb = "would remove" if dry_run else "removed"
    for name, count in report.removed.items():
        out.print(f"{verb} {count} event(s) from {name}", highlight=False, soft_wrap=True)


@app.command("retention")
@with_config_flags
def retention_cmd(
    config: LineageConfig,
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than", help="Remove events whose event time is older than this: 90d, 12h, 2w."
        ),
    ],
    namespace: Annotated[
        str | None,
        typer.Option(help="Only events of this job namespace (a DatasetEvent: its dataset's)."),
    ] = None,
    dry_run: DryRun = False,
    batch_size: BatchSize = 1000,
) -> None:
    """Remove the raw events older than --older-than and everything derived from them (runs,
    edges, column edges, jobs and datasets no longer named), in batches; idempotent."""
    from lineage_sdk.collector.retention import parse_age, purge_older_than

    try:
        age = parse_age(older_than)
    except ConfigError:
        raise typer.BadParameter(
            f"{older_than!r} is not an age: a positive number and a unit, "
            "such as 90d, 12h, 30m, 45s or 2w",
            param_hint="--older-than",
        ) from None
    now = datetime.now(UTC)
    _purge_command(
        config,
        f"retention (older than {older_than})",
        lambda stores, dry, tick: purge_older_than(
            stores,
            age,
            namespace=namespace,
            now=now,
            batch_size=batch_size,
            dry_run=dry,
            progress=tick,
        ),
        dry_run=dry_run,
        totals=lambda store: store.count_raw_events(namespace=namespace, until=now - age),
    )


def _delete(
    config: LineageConfig,
    target: Any,
    namespace: str,
    name: str | None,
    dry_run: bool,
    batch_size: int,
) -> None:
    from lineage_sdk.collector.retention import purge_mentioning

    label = f"{namespace}:{name}" if name is not None else namespace
    _purge_command(
        config,
        f"delete {target} {label}",
        lambda stores, dry, tick: purge_mentioning(
            stores, target, namespace, name, batch_size=batch_size, dry_run=dry, progress=tick
        ),
        dry_run=dry_run,
    )


NamespaceArg = Annotated[str, typer.Argument(help="The namespace.")]
NameArg = Annotated[str, typer.Argument(help="The name within the namespace.")]


@delete_app.command("job")
@with_config_flags
def delete_job(
    config: LineageConfig,
    namespace: NamespaceArg,
    name: NameArg,
    dry_run: DryRun = False,
    batch_size: BatchSize = 1000,
) -> None:
    """Remove every event of the job or naming it as a parent, and all they derived."""
    _delete(config, "job", namespace, name, dry_run, batch_size)


@delete_app.command("dataset")
@with_config_flags
def delete_dataset(
    config: LineageConfig,
    namespace: NamespaceArg,
    name: NameArg,
    dry_run: DryRun = False,
    batch_size: BatchSize = 1000,
) -> None:
    """Remove every event naming the dataset, and all they derived (see the docs)."""
    _delete(config, "dataset", namespace, name, dry_run, batch_size)


@delete_app.command("namespace")
@with_config_flags
def delete_namespace(
    config: LineageConfig,
    namespace: NamespaceArg,
    dry_run: DryRun = False,
    batch_size: BatchSize = 1000,
) -> None:
    """Remove every event naming a job, parent job or dataset of the namespace."""
    _delete(config, "namespace", namespace, None, dry_run, batch_size)


_COMMANDS = frozenset(
    {
        "run",
        "check",
        "dlq",
        "serve",
        "topology",
        "store",
        "api-key",
        "alerts",
        "export",
        "import",
        "rebuild",
        "retention",
        "delete",
    }
)


def main(argv: list[str] | None = None) -> None:
    """Console script; ``run`` is the default command. Exits 2 on configuration errors and on
    what a service refuses at start-up, 1 on other errors (a service unreachable at start-up),
    each with one line (no traceback)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or (args[0] not in _COMMANDS and args[0] not in ("--help", "-h")):
        args.insert(0, "run")
    try:
        app(args=args, prog_name="lineage-collector")
    except StartupError as exc:
        raise SystemExit(_fail(str(exc), exc.exit_code).exit_code) from None
    except KeyboardInterrupt:  # e.g. while waiting for the services at start-up
        raise SystemExit(130) from None
    except ConfigError as exc:
        raise SystemExit(_fail(str(exc)).exit_code) from None
    except LineageError as exc:
        raise SystemExit(_fail(str(exc), 1).exit_code) from None


if __name__ == "__main__":
    main()
