"""Shared pieces of the models: the base model, and the strict-to-emit, tolerant-to-parse types.

Field names are snake_case in Python and spelled as the spec spells them on the wire
(``validation_alias`` + ``serialization_alias``, so type checkers see the snake_case names in
``__init__``). Parsing goes through :func:`lineage_sdk.models.parse_event`, which validates by
alias only (an input key ``event_time`` stays an unknown key instead of filling ``eventTime``) and
passes the validation context ``{"tolerant": True}`` that lets offset-less timestamps through as
UTC. Code that builds models in Python gets the strict behaviour: a naive datetime is an error.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
)

__all__ = [
    "INGEST_CONTEXT",
    "TOLERANT_CONTEXT",
    "LineageModel",
    "RunId",
    "Timestamp",
    "UriStr",
    "wire",
]

#: The validation context :func:`parse_event` uses: offset-less timestamps are read as UTC.
TOLERANT_CONTEXT: dict[str, Any] = {"tolerant": True}
#: The context the collector's ingest check validates with (issue 14): tolerant, and the ``uri``
#: format is an annotation (JSON Schema's default), so ``producer``, ``_producer``/``_schemaURL``
#: and ``dataSource.uri`` need only be strings. Run ids and times are still checked.
INGEST_CONTEXT: dict[str, Any] = {"tolerant": True, "uri_is_annotation": True}

# RFC 3339 date-time; the offset is optional here so that tolerant parsing can default it to UTC,
# and any number of fractional digits is accepted (Java producers send nanoseconds).
_DATE_TIME = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:?\d{2})?",
)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# An absolute URI (RFC 3986): a scheme, a colon, then no whitespace, controls or characters that
# RFC 3986 never allows unescaped. Cheap enough for the collector's hot path; the conformance
# tests check URIs fully with rfc3986-validator.
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[^\x00-\x20\x7f<>\"{}|\\^`]*")


def wire(name: str, **kwargs: Any) -> Any:
    """A field spelled ``name`` on the wire, both when validating and when serializing."""
    return Field(validation_alias=name, serialization_alias=name, **kwargs)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _tolerant(info: ValidationInfo) -> bool:
    context = info.context
    return bool(context and context.get("tolerant"))


def _to_datetime(value: Any, info: ValidationInfo) -> datetime:
    """A timezone-aware datetime; offset-less input becomes UTC only when parsing tolerantly."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        match = _DATE_TIME.fullmatch(value)
        if match is None:
            raise ValueError(f"not a date-time: {_short(value)}")
        date, time, fraction, offset = match.groups()
        if fraction and len(fraction) > 7:  # datetime keeps microseconds; drop nanoseconds
            fraction = fraction[:7]
        if offset in ("Z", "z"):
            offset = "+00:00"
        try:
            parsed = datetime.fromisoformat(f"{date}T{time}{fraction or ''}{offset or ''}")
        except ValueError:
            raise ValueError(f"not a date-time: {_short(value)}") from None
    else:
        raise ValueError(f"not a date-time: {_short(value)}")
    if parsed.tzinfo is None or parsed.tzinfo.utcoffset(parsed) is None:
        if not _tolerant(info):
            raise ValueError("naive date-time: a timezone is required when emitting")
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _to_uuid(value: Any) -> uuid.UUID | str:
    """A UUID in the canonical 8-4-4-4-12 form the schema's ``uuid`` format requires."""
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        if _UUID.fullmatch(value) is None:
            raise ValueError(f"not a UUID: {_short(value)}")
        return value  # pydantic-core turns the checked string into a UUID
    text = str(value) if hasattr(value, "hex") else None  # e.g. uuid_utils.UUID
    if text is not None and _UUID.fullmatch(text):
        return uuid.UUID(text)
    raise ValueError(f"not a UUID: {_short(value)}")


def _to_uri(value: Any, info: ValidationInfo) -> str:
    if isinstance(value, str):
        if _URI.fullmatch(value):
            return value
        context = info.context
        if context and context.get("uri_is_annotation"):
            return value
    raise ValueError(f"not a URI: {_short(value)}")


#: A timezone-aware point in time (``format: date-time``).
Timestamp = Annotated[datetime, BeforeValidator(_to_datetime)]
#: A run id (``format: uuid``); serialized in the lowercase canonical form.
RunId = Annotated[uuid.UUID, BeforeValidator(_to_uuid)]
#: An absolute URI (``format: uri``), kept as the exact string given.
UriStr = Annotated[str, BeforeValidator(_to_uri)]


class LineageModel(BaseModel):
    """Base of every model: unknown keys are kept, and only what was given is serialized.

    Serialize with ``exclude_unset=True`` (what :func:`to_dict` does): a key absent from the input
    stays absent, which is what makes a parse → serialize round trip lossless. When a model is
    built in Python, fields listed in ``_ALWAYS_EMIT`` (the schema URLs, which have defaults) count
    as given even when defaulted, and a keyword given as ``None`` counts as not given (the schemas
    never allow ``null``), so ``stack_trace=None`` emits no ``stackTrace``.
    """

    model_config = ConfigDict(
        extra="allow",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ()

    def model_post_init(self, context: Any, /) -> None:
        """On the emitting side only: emit the defaults in ``_ALWAYS_EMIT``, leave out ``None``.

        :func:`parse_event` validates with :data:`TOLERANT_CONTEXT` and keeps exactly the keys of
        its input (nulls included), so that a round trip is lossless.
        """
        if context is TOLERANT_CONTEXT or (isinstance(context, dict) and context.get("tolerant")):
            return
        fields_set = self.__pydantic_fields_set__
        declared = type(self).model_fields
        nulls = [name for name in fields_set if name in declared and getattr(self, name) is None]
        fields_set.difference_update(nulls)
        if self._ALWAYS_EMIT:
            fields_set.update(self._ALWAYS_EMIT)
