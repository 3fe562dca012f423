"""The collector's own configuration tables: the store choice, connections, queues and the API.

Only ``lineage-collector`` (and the ``lineage`` CLI) validates these; an application never does.
They are registered in the ``lineage_sdk.config_sections`` entry-point group.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from lineage_sdk.config.schema import field_error
from lineage_sdk.config.sections import Section, UriSetting
from lineage_sdk.exceptions import ConfigError

__all__ = [
    "ApiConfig",
    "ApiKeyConfig",
    "CollectorConfig",
    "ConnectionConfig",
    "StoreConfig",
    "parse_age",
]


class ConnectionConfig(Section):
    """A named server connection (`[lineage.connections.NAME]`), referred to by the document and
    graph stores.
    """

    named_tables = True

    uri: Annotated[str, UriSetting()] = Field(
        default=...,
        min_length=1,
        description="Server URI, e.g. mongodb://host:27017/db or neo4j://host:7687.",
    )
    username: str | None = Field(
        default=None,
        description="User name, where the URI does not carry it.",
    )
    password: str | None = Field(
        default=None,
        description="Password, where the URI does not carry it.",
    )
    database: str | None = Field(
        default=None,
        description="Database name, where the URI does not carry it.",
    )
    timeout_ms: int = Field(
        default=10000,
        ge=1,
        description="Connect and server-selection timeout.",
    )


class StoreConfig(Section):
    """Where the collector writes events."""

    backend: str = Field(
        default="sql",
        description=(
            "Store the collector writes to: logging | sql | openlineage_http | document | graph |"
            " memory | composite, or a plugin's name."
        ),
    )
    backends: list[str] = Field(
        default_factory=list,
        description=(
            "With backend='composite', the stores written to: each batch goes to all of them"
            " concurrently and waits for every one; if any fails, the whole batch goes to retry"
            " (or the dead-letter queue), and the stores that succeeded keep one copy."
        ),
    )

    @model_validator(mode="after")
    def _composite_needs_backends(self) -> StoreConfig:
        if self.backend == "composite" and not self.backends:
            raise field_error("backends", "must list at least one store when backend = 'composite'")
        if "composite" in self.backends:
            raise field_error("backends", "must not contain 'composite' (composites do not nest)")
        if len(set(self.backends)) != len(self.backends):
            raise field_error("backends", "must not list a store twice")
        if any(not name.strip() for name in self.backends):
            raise field_error("backends", "must not contain an empty name")
        return self


_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_age(value: str, key: str = "--older-than") -> timedelta:
    """``90d``, ``12h``, ``30m``, ``45s``, ``2w`` as a timedelta; ConfigError naming ``key``."""
    match = _AGE.match(value) if isinstance(value, str) else None
    if match is None or float(match.group(1)) <= 0:
        raise ConfigError(key, value, "a positive age such as 90d, 12h, 30m, 45s or 2w")
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


class CollectorConfig(Section):
    """The `lineage-collector` service: queues, retries, batching and the health endpoint."""

    queue: str | None = Field(
        default=None,
        description="Main queue; defaults to `<collector_topic>.collector`.",
    )
    binding_key: str = Field(
        default="#",
        description="Routing pattern binding the main queue to the exchange.",
    )
    retry_delays_ms: list[int] = Field(
        default_factory=lambda: [1000, 5000, 30000],
        description="Delay of each retry queue, growing; a failed event waits in the next one.",
    )
    max_attempts: int = Field(
        default=5,
        ge=1,
        description="Attempts before an event is parked in the dead-letter queue.",
    )
    dead_letter_queue: str | None = Field(
        default=None,
        description="Parking-lot queue; defaults to `<collector_topic>.dlq`.",
    )
    queue_type: Literal["quorum", "classic"] = Field(
        default="quorum",
        description=(
            "Type of the main, retry and dead-letter queues. Quorum queues are replicated on a"
            " cluster and dead-letter at least once; an existing topology of the other type is"
            " refused with the command that migrates it (`lineage-collector topology migrate`)."
        ),
    )
    delivery_limit: int = Field(
        default=20,
        ge=0,
        description=(
            "Quorum queues only: deliveries of one message from the main queue (including"
            " redeliveries after a collector crashed or lost its connection) before the broker"
            " parks it in the dead-letter queue; a backstop against a message that kills the"
            " collector. 0 turns it off."
        ),
    )
    prefetch: int = Field(
        default=500,
        ge=1,
        description="Unacknowledged messages the broker sends ahead.",
    )
    batch_size: int = Field(
        default=200,
        ge=1,
        description="Events written to the stores in one batch.",
    )
    batch_timeout_ms: int = Field(default=50, ge=1, description="Longest wait to fill a batch.")
    max_message_bytes: int = Field(
        default=4 << 20,
        ge=1,
        description="Messages larger than this go straight to the dead-letter queue.",
    )
    health_host: str = Field(
        default="127.0.0.1",
        description="Address of the health, readiness and metrics endpoint.",
    )
    health_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="Port of the health endpoint; 0 turns it off.",
    )
    retention_older_than: str | None = Field(
        default=None,
        description=(
            "Periodic retention in `lineage-collector run`: remove raw events (and what they "
            "derived) older than this age, e.g. 90d, 12h, 2w; unset turns it off."
        ),
    )
    retention_interval_ms: int = Field(
        default=3_600_000,
        ge=1,
        description="Time between retention passes, in ms (the first pass after this long).",
    )
    retention_batch_size: int = Field(
        default=1000, ge=1, description="Events removed per retention transaction."
    )
    wait_for_services: int = Field(
        default=0,
        ge=0,
        description=(
            "`run` and `serve` (also `--wait-for-services SECONDS`): seconds to wait at start-up"
            " for a broker or store that cannot be reached yet, retrying; then exit 1 with one"
            " line. 0 exits at once. A refusal (wrong password or login, missing vhost or"
            " database) exits 2 at once whatever this is."
        ),
    )

    @field_validator("retention_older_than")
    @classmethod
    def _retention_age(cls, value: str | None) -> str | None:
        if value is not None:
            parse_age(value, "collector.retention_older_than")
        return value

    @field_validator("retry_delays_ms")
    @classmethod
    def _growing_delays(cls, value: list[int]) -> list[int]:
        if any(delay < 1 for delay in value) or value != sorted(value):
            raise ValueError("must be a list of integers >= 1 in increasing order")
        return value


class ApiConfig(Section):
    """The collector's HTTP API (`lineage-collector serve`): ingest, reads and the graph page."""

    host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description=(
            "Listen address of the API; a non-loopback address needs `api_key`"
            " (or `serve --insecure`)."
        ),
    )
    port: int = Field(default=5000, ge=1, le=65535, description="Listen port of the API.")
    api_key: str | None = Field(
        default=None,
        description="Key required on ingest (`Authorization: Bearer` or `X-API-Key`).",
    )
    protect_reads: bool | None = Field(
        default=None,
        description=(
            "Require a key on reads too. Unset: yes when `[lineage.api.keys.*]` are configured,"
            " no otherwise (reads stay open with only `api_key`, as before); `false` is refused"
            " with named keys, whose read scopes would be bypassed."
        ),
    )
    max_body_bytes: int = Field(
        default=4 << 20, ge=1, description="Largest request body accepted (after decompression)."
    )


#: How a key's hash is written: the algorithm, a colon, 64 lowercase hex digits.
KEY_HASH_PATTERN = re.compile(r"sha256:[0-9a-f]{64}")


class ApiKeyConfig(Section):
    """One named API key (`[lineage.api.keys.NAME]`): its hash and the namespaces it may write
    and read. The key itself is never in the configuration, only its SHA-256 (see
    `lineage-collector api-key new`); patterns are namespaces, where `*` matches any run of
    characters (`*` alone: every namespace, `team.*`: `team.a`, `team.a.b`)."""

    named_tables = True

    key_hash: str = Field(
        default=...,
        description=(
            "`sha256:` and the 64 hex digits of the key's SHA-256, as printed by"
            " `lineage-collector api-key new` or `api-key hash`; never the key itself."
        ),
    )
    write: list[str] = Field(
        default_factory=list,
        description="Namespaces the key may ingest events into (see docs/api.md, Writes).",
    )
    read: list[str] = Field(
        default_factory=list,
        description="Namespaces whose jobs, datasets, runs and events the key may read.",
    )

    @field_validator("key_hash")
    @classmethod
    def _is_a_hash(cls, value: str) -> str:
        text = value.strip().lower()
        if not KEY_HASH_PATTERN.fullmatch(text):
            raise ValueError(
                "must be sha256:<64 hex digits>, the hash of the key (run `lineage-collector"
                " api-key hash` and paste its output), not the key itself"
            )
        return text

    @field_validator("write", "read")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        cleaned = [item.strip() for item in value]
        if any(not item for item in cleaned):
            raise ValueError("must not contain an empty namespace pattern")
        return cleaned

    @model_validator(mode="after")
    def _grants_something(self) -> ApiKeyConfig:
        if not self.write and not self.read:
            raise field_error(
                "read", "a key must be allowed to write or read some namespace (`*` for all)"
            )
        return self
