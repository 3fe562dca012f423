"""The core of the ``[lineage]`` configuration, and the way to every component's table.

Every process validates the core (``enabled``, ``collector_topic``, ``exporters``,
``[lineage.producer]``, ``[lineage.pipeline]``). Each component's table is validated by the
component's own class when it is built (:meth:`LineageConfig.section`): see
``lineage_sdk.config.sections``. Every field's description is the documentation, rendered into
``docs/configuration.md`` by ``lineage_sdk.config.reference``; every key has an environment
variable named by its path joined with ``_`` in upper case (``LINEAGE_RABBITMQ_URL``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar, overload
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    Field,
    PrivateAttr,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from lineage_sdk.config.names import EXPORTER_GROUP, check_component_names
from lineage_sdk.config.sections import (
    Section,
    SectionInputs,
    UriSetting,
    registered_sections,
    section_spec,
)
from lineage_sdk.exceptions import ConfigError

__all__ = [
    "DEFAULT_PRODUCER_URI",
    "AbsoluteUri",
    "LineageConfig",
    "PipelineConfig",
    "ProducerConfig",
    "absolute_uri",
    "check_url",
    "field_error",
]

DEFAULT_PRODUCER_URI = "https://github.com/lineage-sdk/lineage-sdk"
S = TypeVar("S", bound=Section)


def check_url(value: str | None, schemes: tuple[str, ...]) -> str | None:
    """Reject URLs with the wrong scheme or no host, the commonest copy-paste mistake."""
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme.lower() not in schemes or not parts.hostname:
        raise ValueError(
            "must be a URL starting with "
            + " or ".join(f"{s}://" for s in schemes)
            + " and naming a host"
        )
    return value


def absolute_uri(value: str) -> str:
    """Refuse a value that is not an absolute URI (``scheme:`` and something after it)."""
    parts = urlsplit(value.strip())
    if not parts.scheme or not (parts.netloc or parts.path) or " " in value.strip():
        raise ValueError(
            "must be an absolute URI such as https://github.com/my-org/my-service (a scheme, "
            "then the rest, no spaces)"
        )
    return value.strip()


# A URI setting: a Markdown link is read as its target, anything else must be an absolute URI.
AbsoluteUri = Annotated[str, UriSetting(), AfterValidator(absolute_uri)]


def field_error(field: str, message: str) -> PydanticCustomError:
    # ctx["field"] lets the loader report the key itself rather than its whole table.
    return PydanticCustomError("lineage_config", message, {"field": field})


class ProducerConfig(Section):
    """Identity of the events' source: the job namespace and the producer URI."""

    job_namespace: str = Field(
        default="default",
        min_length=1,
        description="Namespace of the jobs this process runs (OPENLINEAGE_NAMESPACE also sets it).",
    )
    producer_uri: AbsoluteUri = Field(
        default=DEFAULT_PRODUCER_URI,
        description=(
            "URI identifying the software that emits the events (the event's `producer`); an "
            "absolute URI such as https://github.com/my-org/my-service."
        ),
    )


class PipelineConfig(Section):
    """The bounded queue and batching worker between the application thread and the exporters."""

    max_queue_size: int = Field(
        default=65536,
        ge=1,
        description="Events waiting between the application thread and the worker.",
    )
    max_export_batch_size: int = Field(
        default=512,
        ge=1,
        description="Largest batch handed to an exporter at once.",
    )
    schedule_delay_ms: int = Field(
        default=200,
        ge=1,
        description="Longest time an event waits before the worker exports a partial batch.",
    )
    export_timeout_ms: int = Field(
        default=30000,
        ge=1,
        description="Time allowed for one export call.",
    )
    overflow: Literal["drop_newest", "drop_oldest", "block"] = Field(
        default="block",
        description=(
            "What happens when the queue is full: drop the new event, drop the oldest one, or "
            "block the caller for at most `block_timeout_ms` and then drop the new event."
        ),
    )
    block_timeout_ms: int = Field(
        default=100,
        ge=0,
        description="With overflow='block', the longest a caller waits for room.",
    )
    shutdown_timeout_ms: int = Field(
        default=5000,
        ge=0,
        description="Time allowed to flush the queue at interpreter exit.",
    )


class LineageConfig(Section):
    """The whole `[lineage]` table."""

    enabled: bool = Field(
        default=True,
        description="Master switch; OPENLINEAGE_DISABLED=true also turns lineage off.",
    )
    collector_topic: str = Field(
        default="platform.lineage.events",
        min_length=1,
        description="Topic exchange events are published to.",
    )
    exporters: list[str] = Field(
        default_factory=lambda: ["rabbitmq"],
        description=(
            "Exporters to send events to: console | file | memory | rabbitmq | http, or a "
            "plugin's name."
        ),
    )
    producer: ProducerConfig = Field(default_factory=ProducerConfig)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    _inputs: SectionInputs = PrivateAttr(default_factory=SectionInputs)
    _built: dict[tuple[str, ...], Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_component_tables(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """Component tables given in code are kept aside and validated when built."""
        if not isinstance(data, Mapping):
            return handler(data)
        tops = {path[0] for path in registered_sections()}
        core = {k: v for k, v in data.items() if not (k in tops and k not in cls.model_fields)}
        given = {k: v for k, v in data.items() if k not in core}
        config = handler(core)
        if given and isinstance(config, LineageConfig):
            config._inputs = SectionInputs(given=given)
        return config

    def with_inputs(self, inputs: SectionInputs) -> LineageConfig:
        """This core with the component tables of ``inputs`` (the loader's sources)."""
        config = self.model_copy()
        config._inputs = inputs
        config._built = {}
        return config

    @overload
    def section(self, path: str) -> Section: ...
    @overload
    def section(self, path: str, model: type[S]) -> S: ...
    def section(self, path: str, model: type[Section] | None = None) -> Section:
        """The component table at ``path`` (``"rabbitmq"``, ``"store.sql"``), validated.

        ``model`` defaults to the class registered for ``path``; when given, the registered class
        must be it or a subclass (so the collector can read ``[lineage.rabbitmq]`` as its AMQP
        connection settings). Raises :class:`ConfigError` naming the key at fault.
        """
        parts = tuple(path.removeprefix("lineage.").split("."))
        cached = self._built.get(parts)
        if cached is not None and (model is None or isinstance(cached, model)):
            return cached  # type: ignore[no-any-return]
        chosen = _model_for(parts, model)
        built: Any = (
            self._inputs.build_named(parts, chosen)
            if chosen.named_tables
            else self._inputs.build(parts, chosen)
        )
        self._built[parts] = built
        return built  # type: ignore[no-any-return]

    def named(self, path: str, model: type[S] | None = None) -> dict[str, S]:
        """The ``[lineage.<path>.NAME]`` tables by name (``connections``), each validated."""
        parts = tuple(path.removeprefix("lineage.").split("."))
        cached = self._built.get(parts)
        if cached is None:
            chosen = _model_for(parts, model)
            cached = self._inputs.build_named(parts, chosen)
            self._built[parts] = cached
        return dict(cached)

    def validate_sections(self, *paths: str) -> None:
        """Validate the given component tables, or every registered one that has a class and
        the exporter names (each must be registered; a near miss gets "did you mean").

        What ``lineage-collector check`` does; an application validates only what it builds.
        """
        if not paths:
            check_component_names("lineage.exporters", self.exporters, group=EXPORTER_GROUP)
        for path in paths or [".".join(p) for p in registered_sections()]:
            spec = section_spec(tuple(path.split(".")))
            model = spec.model() if spec is not None else None
            if spec is not None and model is None:
                continue  # a component without settings
            if model is not None and model.named_tables:
                self.named(path, model)
            else:
                self.section(path)

    def get(self, key: str) -> Any:
        """The value of one dotted key (``"rabbitmq.url"``, ``"connections.main.uri"``), from
        whichever table holds it; builds that table. Raises ConfigError for an unknown key."""
        parts = tuple(key.removeprefix("lineage.").split("."))
        for depth in range(len(parts) - 1, 0, -1):
            spec = section_spec(parts[:depth])
            model = spec.model() if spec is not None else None
            if model is None:
                continue
            path = ".".join(parts[:depth])
            if model.named_tables:
                node: Any = self.named(path).get(parts[depth])
                rest = parts[depth + 1 :]
            else:
                node, rest = self.section(path), parts[depth:]
            return _descend(node, rest, key)
        return _descend(self, parts, key)

    def __eq__(self, other: object) -> bool:
        """Equal when every key has the same value, whatever source gave it."""
        if not isinstance(other, LineageConfig):
            return NotImplemented
        if self.model_dump() != other.model_dump():
            return False
        for path, spec in registered_sections().items():
            if not (self._inputs.touches(path) or other._inputs.touches(path)):
                continue
            model = spec.model()
            if model is None:
                continue
            dotted = ".".join(path)
            mine: object
            theirs: object
            try:
                mine = self.named(dotted) if model.named_tables else self.section(dotted)
                theirs = other.named(dotted) if model.named_tables else other.section(dotted)
            except ConfigError:
                return False
            if mine != theirs:
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    @field_validator("exporters")
    @classmethod
    def _exporter_names(cls, value: list[str]) -> list[str]:
        if any(not name.strip() for name in value):
            raise ValueError("must not contain an empty exporter name")
        if len(set(value)) != len(value):
            raise ValueError("must not list an exporter twice")
        return value


def _model_for(parts: tuple[str, ...], model: type[S] | None) -> type[S]:
    spec = section_spec(parts)
    registered = spec.model() if spec is not None else None
    table = ".".join(("lineage", *parts))
    if registered is None:
        if model is None:
            why = "takes no settings" if spec is not None else "is not a known table"
            raise ConfigError(table, None, f"[{table}] {why}")
        return model
    if model is not None and not issubclass(registered, model):
        raise ConfigError(
            table,
            None,
            f"[{table}] belongs to {registered.__qualname__}, not {model.__qualname__}",
        )
    return registered  # type: ignore[return-value]


def _descend(node: Any, parts: tuple[str, ...], key: str) -> Any:
    for part in parts:
        if node is None or part not in type(node).model_fields:
            raise ConfigError(f"lineage.{key}", None, "unknown key; see docs/configuration.md")
        node = getattr(node, part)
    return node
