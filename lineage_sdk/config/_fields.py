"""Walks the schema once so loader, key list and reference page agree on every key.

Nothing here knows a field by name: adding a field to ``schema.py`` gives it an environment
variable, a command-line flag, text parsing, an error message and a row in the reference page.
"""

from __future__ import annotations

import re
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from lineage_sdk.config.redaction import redact

__all__ = [
    "BOOL_WORDS",
    "NAME_PLACEHOLDER",
    "SECRET_FIELD_NAMES",
    "Kind",
    "Leaf",
    "TextError",
    "describe_allowed",
    "display_value",
    "parse_text",
    "section_fields",
    "walk_leaves",
]

NAME_PLACEHOLDER = "<name>"
# Field names whose values are secrets: never shown, never given a default in the docs.
# ``key_hash`` is not secret itself, but a key pasted there by mistake must not be echoed;
# ``secret`` is an alert rule's webhook signing secret.
SECRET_FIELD_NAMES = frozenset({"password", "api_key", "key_hash", "secret"})
BOOL_WORDS: dict[str, bool] = {
    "true": True,
    "false": False,
    "1": True,
    "0": False,
    "yes": True,
    "no": False,
    "on": True,
    "off": False,
}
_INT_RE = re.compile(r"[+-]?[0-9]+")

Kind = Literal["bool", "int", "str", "choice", "list_str", "list_int"]


class TextError(ValueError):
    """A text value (environment variable or flag) that does not parse; ``allowed`` says why."""

    def __init__(self, allowed: str) -> None:
        super().__init__(allowed)
        self.allowed = allowed


@dataclass(frozen=True)
class Leaf:
    """One scalar or list key of the schema, e.g. ``("pipeline", "overflow")``.

    Keys of a named-table map (``connections``) carry :data:`NAME_PLACEHOLDER` in ``path``.
    """

    path: tuple[str, ...]
    field: FieldInfo
    kind: Kind
    optional: bool
    choices: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def secret(self) -> bool:
        return self.name in SECRET_FIELD_NAMES

    @property
    def required(self) -> bool:
        return self.field.is_required()

    def default(self) -> Any:
        """The default value (``None`` for required keys)."""
        if self.required:
            return None
        return self.field.get_default(call_default_factory=True)

    def type_text(self) -> str:
        base = {
            "bool": "bool",
            "int": "int",
            "str": "str",
            "list_str": "list[str]",
            "list_int": "list[int]",
            "choice": " | ".join(self.choices),
        }[self.kind]
        return f"{base} | None" if self.optional else base


def _is_model(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _classify(annotation: object) -> tuple[Kind, bool, tuple[str, ...]]:
    optional = False
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported config annotation {annotation!r}")
        optional = True
        annotation = args[0]
        origin = typing.get_origin(annotation)
    if annotation is bool:
        return "bool", optional, ()
    if annotation is int:
        return "int", optional, ()
    if annotation is str:
        return "str", optional, ()
    if origin is Literal:
        return "choice", optional, tuple(str(a) for a in typing.get_args(annotation))
    if origin is list:
        (item,) = typing.get_args(annotation)
        if item is str:
            return "list_str", optional, ()
        if item is int:
            return "list_int", optional, ()
    raise TypeError(f"unsupported config annotation {annotation!r}")


def section_fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """The fields of a section model, in declaration order."""
    return dict(model.model_fields)


def _walk(model: type[BaseModel], prefix: tuple[str, ...]) -> list[Leaf]:
    out: list[Leaf] = []
    for name, field in section_fields(model).items():
        path = (*prefix, name)
        annotation = field.annotation
        if _is_model(annotation):
            out.extend(_walk(typing.cast(type[BaseModel], annotation), path))
            continue
        kind, optional, choices = _classify(annotation)
        out.append(Leaf(path, field, kind, optional, choices))
    return out


@cache
def walk_leaves(model: type[BaseModel], prefix: tuple[str, ...]) -> tuple[Leaf, ...]:
    """Every key of one section model under ``prefix``, in declaration order (depth first)."""
    return tuple(_walk(model, prefix))


def _bounds(field: FieldInfo) -> tuple[int | None, int | None, int | None]:
    ge = le = min_len = None
    for meta in field.metadata:
        if isinstance(meta, annotated_types.Ge):
            ge = typing.cast(int, meta.ge)
        elif isinstance(meta, annotated_types.Le):
            le = typing.cast(int, meta.le)
        elif isinstance(meta, annotated_types.MinLen):
            min_len = meta.min_length
    return ge, le, min_len


def describe_allowed(leaf: Leaf) -> str:
    """What a key accepts, phrased to follow "must": used in every error message."""
    ge, le, min_len = _bounds(leaf.field)
    if leaf.kind == "bool":
        text = "must be a boolean: true/false, 1/0, yes/no or on/off"
    elif leaf.kind == "int":
        if ge is not None and le is not None:
            text = f"must be an integer between {ge} and {le}"
        elif ge is not None:
            text = f"must be an integer >= {ge}"
        elif le is not None:
            text = f"must be an integer <= {le}"
        else:
            text = "must be an integer"
    elif leaf.kind == "choice":
        text = "must be one of " + ", ".join(leaf.choices)
    elif leaf.kind == "str":
        text = "must be a non-empty string" if min_len else "must be a string"
    elif leaf.kind == "list_str":
        text = "must be a list of strings (comma-separated in environment variables and flags)"
    else:
        text = "must be a list of integers (comma-separated in environment variables and flags)"
    if leaf.optional:
        text += ", or empty for none"
    return text


def parse_text(leaf: Leaf, text: str) -> Any:
    """Turn the text of an environment variable or flag into the key's type.

    Raises :class:`TextError` with the ``allowed`` phrase when it does not parse; range checks
    are left to the schema so both text and TOML values get the same rules.
    """
    stripped = text.strip()
    if leaf.kind in ("list_str", "list_int"):
        items = [item.strip() for item in text.split(",")]
        items = [item for item in items if item]
        if leaf.kind == "list_str":
            return items
        if not all(_INT_RE.fullmatch(item) for item in items):
            raise TextError(describe_allowed(leaf))
        return [int(item) for item in items]
    if leaf.optional and not stripped:
        return None
    if leaf.kind == "bool":
        try:
            return BOOL_WORDS[stripped.lower()]
        except KeyError:
            raise TextError(describe_allowed(leaf)) from None
    if leaf.kind == "int":
        if not _INT_RE.fullmatch(stripped):
            raise TextError(describe_allowed(leaf))
        return int(stripped)
    if leaf.kind == "choice":
        return stripped.lower()
    return text


def display_value(name: str | None, value: object) -> object:
    """A value safe to put in a message: secrets become ``***``, URL passwords are removed."""
    if value is None:
        return None
    if name is not None and name in SECRET_FIELD_NAMES:
        return "***"
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list | tuple):
        return [display_value(None, item) for item in value]
    if isinstance(value, dict):
        return "<table>"
    return value
