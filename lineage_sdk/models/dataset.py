"""``LineageDataset``: the public way to name a dataset a run reads or writes.

A leaf module (it imports only orjson): the recording API, the SDK core and the models all use it,
so it sits below all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["LineageDataset", "facets_to_dicts"]


class LineageDataset:
    """A dataset named by OpenLineage's naming rules: ``namespace`` (where) and ``name`` (what).

    ``facets`` are dataset facets (``{key: facet dict or pydantic facet model}``); they are
    converted once here, at decoration time, so that recording a run never does it again.
    """

    __slots__ = ("_hash", "_json", "facets", "name", "namespace")

    namespace: str
    name: str
    facets: Mapping[str, Any]
    _hash: int
    _json: bytes | None

    def __init__(self, namespace: str, name: str, facets: Mapping[str, Any] | None = None) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise ValueError(
                f"LineageDataset namespace must be a non-empty string, got {namespace!r}"
            )
        if not isinstance(name, str) or not name:
            raise ValueError(f"LineageDataset name must be a non-empty string, got {name!r}")
        object.__setattr__(self, "namespace", namespace)
        object.__setattr__(self, "name", name)
        object.__setattr__(
            self, "facets", facets_to_dicts(facets, owner=f"dataset {namespace}/{name}")
        )
        object.__setattr__(self, "_hash", hash((namespace, name)))
        object.__setattr__(self, "_json", None)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("LineageDataset is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LineageDataset):
            return NotImplemented
        return (self.namespace, self.name, dict(self.facets)) == (
            other.namespace,
            other.name,
            dict(other.facets),
        )

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"LineageDataset(namespace={self.namespace!r}, name={self.name!r})"

    def to_json(self) -> bytes:
        """The dataset as sorted-key JSON, serialized once and reused for every event."""
        cached: bytes | None = self._json
        if cached is None:
            cached = orjson.dumps(self.to_dict(), option=orjson.OPT_SORT_KEYS)
            object.__setattr__(self, "_json", cached)
        return cached

    def to_dict(self) -> dict[str, Any]:
        """The OpenLineage ``Dataset`` JSON shape (facets may be filled with defaults later)."""
        return {"namespace": self.namespace, "name": self.name, "facets": dict(self.facets)}


def facets_to_dicts(facets: Mapping[str, Any] | None, *, owner: str) -> Mapping[str, Any]:
    """Accept facet dicts or pydantic models; reject anything that could not be emitted."""
    if not facets:
        return {}
    if not isinstance(facets, Mapping):
        raise TypeError(
            f"facets of {owner} must be a mapping of facet name to facet, "
            f"got {type(facets).__name__}"
        )
    out: dict[str, Any] = {}
    for key, facet in facets.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"facet names of {owner} must be non-empty strings, got {key!r}")
        dump = getattr(facet, "model_dump", None)
        if callable(dump):
            facet = dump(by_alias=True, mode="json", exclude_none=True)
        if not isinstance(facet, Mapping):
            raise TypeError(f"facet {key!r} of {owner} must be a mapping or a pydantic model")
        if "_schemaURL" not in facet:
            raise ValueError(
                f"facet {key!r} of {owner} has no '_schemaURL': "
                "every OpenLineage facet names its schema"
            )
        out[key] = dict(facet)
    return out
