"""``LineageDataset``: the public way to name a dataset a run reads or writes.

A leaf module (it imports only orjson and json_exact, a leaf too): the recording API, the SDK core
and the models all use it, so it sits below all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from lineage_sdk.models.json_exact import dumps_exact

__all__ = ["LineageDataset", "facets_to_dicts"]


class LineageDataset:
    """A dataset named by OpenLineage's naming rules: ``namespace`` (where) and ``name`` (what).

    ``facets`` are dataset facets (``{key: facet dict or pydantic facet model}``); they are
    converted once here, at decoration time, so that recording a run never does it again.
    ``input_facets`` go on the dataset only where a run reads it (``inputs[].inputFacets``:
    ``subset``, ``inputStatistics``, ``dataQualityAssertions``), ``output_facets`` only where a
    run writes it (``outputs[].outputFacets``: ``subset``, ``outputStatistics``).
    """

    __slots__ = (
        "_hash",
        "_json",
        "_sided_json",
        "facets",
        "input_facets",
        "name",
        "namespace",
        "output_facets",
    )

    namespace: str
    name: str
    facets: Mapping[str, Any]
    input_facets: Mapping[str, Any]
    output_facets: Mapping[str, Any]
    _hash: int
    _json: bytes | None
    _sided_json: dict[str, bytes] | None

    def __init__(
        self,
        namespace: str,
        name: str,
        facets: Mapping[str, Any] | None = None,
        *,
        input_facets: Mapping[str, Any] | None = None,
        output_facets: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise ValueError(
                f"LineageDataset namespace must be a non-empty string, got {namespace!r}"
            )
        if not isinstance(name, str) or not name:
            raise ValueError(f"LineageDataset name must be a non-empty string, got {name!r}")
        owner = f"dataset {namespace}/{name}"
        object.__setattr__(self, "namespace", namespace)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "facets", facets_to_dicts(facets, owner=owner))
        object.__setattr__(
            self, "input_facets", facets_to_dicts(input_facets, owner=f"input {owner}")
        )
        object.__setattr__(
            self, "output_facets", facets_to_dicts(output_facets, owner=f"output {owner}")
        )
        object.__setattr__(self, "_hash", hash((namespace, name)))
        object.__setattr__(self, "_json", None)
        # None when there are no side facets: to_json's fast path, whatever the side.
        sided: dict[str, bytes] | None = {} if self.input_facets or self.output_facets else None
        object.__setattr__(self, "_sided_json", sided)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("LineageDataset is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LineageDataset):
            return NotImplemented
        return (
            self.namespace,
            self.name,
            dict(self.facets),
            dict(self.input_facets),
            dict(self.output_facets),
        ) == (
            other.namespace,
            other.name,
            dict(other.facets),
            dict(other.input_facets),
            dict(other.output_facets),
        )

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"LineageDataset(namespace={self.namespace!r}, name={self.name!r})"

    def to_json(self, side: str | None = None) -> bytes:
        """The dataset as sorted-key JSON, serialized once and reused for every event.

        ``side`` is ``"inputs"`` or ``"outputs"``: the list the dataset is emitted in, which adds
        its ``inputFacets`` or ``outputFacets`` (when it has any).
        """
        sided = self._sided_json
        if sided is None or side is None or self._side_facets(side) is None:
            cached: bytes | None = self._json
            if cached is None:
                cached = dumps_exact(self.to_dict(), option=orjson.OPT_SORT_KEYS)
                object.__setattr__(self, "_json", cached)
            return cached
        found = sided.get(side)
        if found is None:
            found = sided[side] = dumps_exact(self.to_dict(side), option=orjson.OPT_SORT_KEYS)
        return found

    def to_dict(self, side: str | None = None) -> dict[str, Any]:
        """The OpenLineage ``Dataset`` JSON shape (facets may be filled with defaults later);
        with ``side`` (``"inputs"``/``"outputs"``), the ``InputDataset``/``OutputDataset`` one."""
        out: dict[str, Any] = {
            "namespace": self.namespace,
            "name": self.name,
            "facets": dict(self.facets),
        }
        extra = self._side_facets(side)
        if extra is not None:
            out[_SIDE_KEYS[side or ""]] = dict(extra)
        return out

    def _side_facets(self, side: str | None) -> Mapping[str, Any] | None:
        if side == "inputs":
            return self.input_facets or None
        if side == "outputs":
            return self.output_facets or None
        if side is not None:
            raise ValueError(f"side must be 'inputs', 'outputs' or None, got {side!r}")
        return None


_SIDE_KEYS = {"inputs": "inputFacets", "outputs": "outputFacets"}


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
