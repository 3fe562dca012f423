"""Alert rules: the ``[[lineage.alerts.webhook]]`` array of tables and the ``[lineage.alerts]``
table, and the :class:`Rule` objects the worker matches causes against.

A rule names a receiver (an http(s) URL), the Standard Webhooks secret its alerts are signed
with, the causes it wants (``on``), optionally the namespaces it cares about (patterns where
``*`` matches any run of characters, as API keys' grants) and how far downstream the impact
goes (``depth``). The secret is checked here and never shown: not in a message, not in a
rule's ``repr``, not in its key (which is a hash of the URL).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from lineage_sdk.collector.namespaces import NamespaceScope
from lineage_sdk.collector.settings import parse_age
from lineage_sdk.collector.watch.model import CAUSE_KINDS, Cause, CauseKind
from lineage_sdk.config.names import closest
from lineage_sdk.config.schema import LineageConfig, check_url
from lineage_sdk.config.sections import Section, UriSetting, key_text
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.models.run_state import STALE_AFTER_HEARTBEATS

__all__ = [
    "ALERTS_TABLE",
    "DEFAULT_STORE_URL",
    "SECRET_BYTES",
    "SECRET_PREFIX",
    "WEBHOOK_TABLE",
    "AlertsConfig",
    "Rule",
    "WebhookConfig",
    "alerts_settings",
    "rule_key",
    "rules_of",
    "secret_key_bytes",
]

ALERTS_TABLE = "alerts"
WEBHOOK_TABLE = "alerts.webhook"
SECRET_PREFIX = "whsec_"  # noqa: S105 - the prefix of every Standard Webhooks secret
#: The watch's store when neither ``[lineage.alerts] store`` nor a ``sql`` store says one.
DEFAULT_STORE_URL = "sqlite:///lineage-watch.db"
#: How long a secret's key may be, in bytes (Standard Webhooks: 24 to 64 random bytes).
SECRET_BYTES = (24, 64)


def secret_key_bytes(secret: str) -> bytes:
    """The key bytes of a ``whsec_<base64>`` secret; ValueError (never naming the secret) when
    it is not one."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(
            f"must be a Standard Webhooks secret, {SECRET_PREFIX} and base64 (make one with"
            " `lineage-collector alerts secret`)"
        )
    text = secret[len(SECRET_PREFIX) :]
    try:
        key = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            f"must be {SECRET_PREFIX} followed by standard base64 (A-Z, a-z, 0-9, +, /, ="
            " padding); make one with `lineage-collector alerts secret`"
        ) from None
    low, high = SECRET_BYTES
    if not low <= len(key) <= high:
        raise ValueError(
            f"must hold {low} to {high} random bytes after {SECRET_PREFIX} (this one holds"
            f" {len(key)}); make one with `lineage-collector alerts secret`"
        )
    return key


class WebhookConfig(Section):
    """One alert rule (`[[lineage.alerts.webhook]]`, one table per receiver): the causes it
    wants, in which namespaces, sent as signed CloudEvents to its URL with the impact
    downstream. In the environment, each rule is named by its position: `0` for the first
    table of the file, and a variable of a position no table has adds a rule
    (`LINEAGE_ALERTS_WEBHOOK_0_SECRET` gives the first rule's secret). See docs/watch.md."""

    named_tables = True
    listed_tables = True

    url: Annotated[str, UriSetting()] = Field(
        default=...,
        description=(
            "Receiver: an http:// or https:// URL the alerts are POSTed to (CloudEvents JSON,"
            " structured mode, signed as Standard Webhooks specify). One rule per URL."
        ),
    )
    secret: str = Field(
        default=...,
        repr=False,
        description=(
            "Standard Webhooks signing secret: `whsec_` and the base64 of 24 to 64 random bytes,"
            " as `lineage-collector alerts secret` prints. Required."
        ),
    )
    on: list[str] = Field(
        default_factory=lambda: [str(kind) for kind in CAUSE_KINDS],
        description="Causes sent: run_failed | run_stale | schema_breaking | quality_failed.",
    )
    namespaces: list[str] | None = Field(
        default=None,
        description=(
            "Only causes in these namespaces (a job's for run causes, a dataset's otherwise);"
            " `*` matches any run of characters (`shop.*`). Unset: every namespace."
        ),
    )
    depth: int = Field(
        default=10,
        ge=0,
        description=(
            "How far downstream the alert's impact goes, in job hops as `GET /api/v1/lineage`"
            " counts them: from a job cause (run_failed, run_stale), 0 is the job's outputs;"
            " from a dataset cause (schema_breaking, quality_failed), 0 is nothing and 1 the"
            " jobs reading the dataset and their outputs."
        ),
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        check_url(value.strip(), ("http", "https"))
        return value.strip()

    @field_validator("secret")
    @classmethod
    def _a_secret(cls, value: str) -> str:
        secret_key_bytes(value.strip())
        return value.strip()

    @field_validator("on")
    @classmethod
    def _known_causes(cls, value: list[str]) -> list[str]:
        cleaned = [item.strip() for item in value]
        for item in cleaned:
            if item not in CAUSE_KINDS:
                close = closest(item, CAUSE_KINDS)
                hint = f" (did you mean {close}?)" if close else ""
                raise ValueError(
                    f"unknown cause {item!r}{hint}; each must be one of {', '.join(CAUSE_KINDS)}"
                )
        if not cleaned:
            raise ValueError(f"must name at least one cause: {', '.join(CAUSE_KINDS)}")
        return list(dict.fromkeys(cleaned))

    @field_validator("namespaces")
    @classmethod
    def _patterns(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        cleaned = [item.strip() for item in value]
        if not cleaned or any(not item for item in cleaned):
            raise ValueError(
                "must list namespaces (or patterns such as shop.*), none empty; leave it out"
                " for every namespace"
            )
        return cleaned


class AlertsConfig(Section):
    """Alerts to webhooks (issue 34): how long a delivery is retried, where the watch keeps its
    causes and alerts, when a run is stale. The rules themselves are `[[lineage.alerts.webhook]]`
    tables."""

    retry_for: str = Field(
        default="1h",
        description=(
            "How long an alert is retried (exponential backoff, on a timeout, a connection error"
            " or a 5xx) before it is parked for `lineage-collector alerts replay`: 1h, 30m, 2d."
        ),
    )
    store: Annotated[str | None, UriSetting()] = Field(
        default=None,
        description=(
            "SQLAlchemy URL of the watch's store (causes, alerts; shared by a fleet):"
            " sqlite:///path or postgresql+psycopg://... Unset: the `sql` store's database when"
            " the collector writes to it, else sqlite:///lineage-watch.db."
        ),
    )
    grace: int = Field(
        default=STALE_AFTER_HEARTBEATS,
        ge=1,
        description="Heartbeat intervals a running run may miss before it is `run_stale`.",
    )
    timeout_ms: int = Field(
        default=10000,
        ge=1,
        description="Timeout of one delivery (connect, send and the receiver's answer).",
    )

    @field_validator("retry_for")
    @classmethod
    def _an_age(cls, value: str) -> str:
        try:
            parse_age(value)
        except ConfigError as exc:
            raise ValueError(f"must be {exc.allowed}") from None
        return value.strip()

    @field_validator("store")
    @classmethod
    def _sql_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        scheme = urlsplit(value.strip()).scheme.lower().split("+", 1)[0]
        if scheme not in ("sqlite", "postgresql"):
            raise ValueError(
                "must be a SQLAlchemy URL: sqlite:///path or postgresql+psycopg://user@host/db"
            )
        return value.strip()

    @property
    def retry_window(self) -> timedelta:
        """``retry_for`` as a duration."""
        return parse_age(self.retry_for, "lineage.alerts.retry_for")

    @property
    def retry_for_seconds(self) -> float:
        """``retry_for`` in seconds."""
        return self.retry_window.total_seconds()

    @property
    def timeout_s(self) -> float:
        """``timeout_ms`` in seconds."""
        return self.timeout_ms / 1000

    def store_url(self, config: LineageConfig) -> str:
        """The watch's store: ``store`` when set; else the ``sql`` store's database when the
        collector writes to it (a fleet sharing a PostgreSQL store shares its watch too); else
        ``sqlite:///lineage-watch.db`` in the working directory."""
        if self.store is not None:
            return self.store
        from lineage_sdk.collector.settings import StoreConfig

        chosen = config.section("store", StoreConfig)
        names = chosen.backends if chosen.backend == "composite" else [chosen.backend]
        if "sql" in names:
            from lineage_sdk.collector.store import named_connection
            from lineage_sdk.collector.stores.settings import SqlStoreConfig

            sql = config.section("store.sql", SqlStoreConfig)
            url = sql.url
            if sql.connection_name:
                connection = named_connection(
                    config, "store.sql.connection_name", sql.connection_name
                )
                url = connection.settings.uri
            if not _in_memory(url):
                return url
        return DEFAULT_STORE_URL


def _in_memory(url: str) -> bool:
    """True for a SQLite URL of an in-memory database, which a second engine cannot share."""
    text = url.strip().lower()
    return text.startswith("sqlite") and (text.rstrip("/").endswith(":") or ":memory:" in text)


def rule_key(url: str) -> str:
    """A rule's stable key: a hash of its URL (the URL may hold a token; the key never does)."""
    return hashlib.sha256(url.strip().encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Rule:
    """One receiver's rule, as the worker and the deliverer use it."""

    url: str
    secret: str = field(repr=False)
    on: frozenset[CauseKind]
    #: Namespace patterns; None: every namespace.
    namespaces: tuple[str, ...] | None
    depth: int
    #: Its position among the ``[[lineage.alerts.webhook]]`` tables (for messages).
    index: int = 0
    _scope: NamespaceScope | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        scope = None if self.namespaces is None else NamespaceScope(self.namespaces)
        object.__setattr__(self, "_scope", scope)

    @property
    def key(self) -> str:
        """Stable across restarts and collectors: a hash of the URL, never the secret."""
        return rule_key(self.url)

    @property
    def shown(self) -> str:
        """The URL as it may be shown (a password or token in it hidden)."""
        from lineage_sdk.config.redaction import redact

        return redact(self.url)

    def matches(self, cause: Cause) -> bool:
        """True when this rule wants ``cause``: its kind is in ``on`` and its namespace matches
        one of ``namespaces`` (or the rule names none)."""
        if cause.kind not in self.on:
            return False
        return self._scope is None or self._scope.allows(cause.namespace)

    @classmethod
    def from_config(cls, table: WebhookConfig, index: int = 0) -> Rule:
        on = frozenset(kind for kind in CAUSE_KINDS if kind in table.on)
        namespaces = None if table.namespaces is None else tuple(table.namespaces)
        return cls(table.url, table.secret, on, namespaces, table.depth, index)


def rules_of(config: LineageConfig) -> tuple[Rule, ...]:
    """The rules of ``config``'s ``[[lineage.alerts.webhook]]`` tables, in order; ConfigError
    naming the key for a bad one, or for two rules of one URL (merge their `on` and
    `namespaces`: one receiver gets one alert per cause)."""
    tables = config.named(WEBHOOK_TABLE, WebhookConfig)
    rules = tuple(Rule.from_config(table, int(name)) for name, table in tables.items())
    seen: dict[str, Rule] = {}
    for rule in rules:
        first = seen.setdefault(rule.key, rule)
        if first is not rule:
            raise ConfigError(
                key_text(("alerts", "webhook", str(rule.index), "url")),
                rule.shown,
                f"the same URL as {key_text(('alerts', 'webhook', str(first.index)))}: one rule"
                " per receiver (merge their `on` and `namespaces`)",
            )
    return rules


def alerts_settings(config: LineageConfig) -> AlertsConfig:
    """``[lineage.alerts]`` of ``config``, validated."""
    return config.section(ALERTS_TABLE, AlertsConfig)
