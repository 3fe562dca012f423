"""Merging what several statements of one run say about the same dataset.

A run that writes one table with two statements (``INSERT ... SELECT`` from one source, then an
``UPDATE`` from another) must report the table once, with what both statements showed: the
``columnLineage`` facet holds every field either statement wrote, a field written by both has the
union of their input fields, and the ``schema`` facet has every column either one named. Facets
other than those two are kept from the dataset seen first (the later one only fills in keys the
first lacks). The result keeps the shape of the official facets, so it validates as they do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lineage_sdk.models.dataset import LineageDataset

__all__ = ["merge_column_lineage", "merge_datasets", "merge_schema"]


def _input_field_key(item: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    return (item.get("namespace"), item.get("name"), item.get("field"))


def _union_input_fields(
    first: list[Mapping[str, Any]], second: list[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``first`` then what ``second`` adds; one entry per (namespace, name, field), with the
    union of their ``transformations`` when both carry some."""
    out: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    for item in (*first, *second):
        key = _input_field_key(item)
        known = out.get(key)
        if known is None:
            out[key] = dict(item)
            continue
        more = item.get("transformations")
        if more:
            have = list(known.get("transformations") or [])
            have.extend(t for t in more if t not in have)
            known["transformations"] = have
    return list(out.values())


def merge_column_lineage(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """Two ``columnLineage`` facets of one dataset as one (``first``'s metadata kept)."""
    merged: dict[str, Any] = {**second, **first}
    fields: dict[str, Any] = {k: dict(v) for k, v in (first.get("fields") or {}).items()}
    for name, value in (second.get("fields") or {}).items():
        have = fields.get(name)
        if have is None:
            fields[name] = dict(value)
            continue
        combined = {**value, **have}
        combined["inputFields"] = _union_input_fields(
            have.get("inputFields") or [], value.get("inputFields") or []
        )
        fields[name] = combined
    merged["fields"] = fields
    if "dataset" in first or "dataset" in second:
        merged["dataset"] = _union_input_fields(
            first.get("dataset") or [], second.get("dataset") or []
        )
    return merged


def merge_schema(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """Two ``schema`` facets as one: every column once, in order of first sight; a column both
    name keeps ``first``'s entry, completed with keys (``type``, ...) only ``second`` has."""
    merged: dict[str, Any] = {**second, **first}
    columns: dict[Any, dict[str, Any]] = {}
    for column in (*(first.get("fields") or ()), *(second.get("fields") or ())):
        name = column.get("name")
        have = columns.get(name)
        columns[name] = dict(column) if have is None else {**column, **have}
    merged["fields"] = list(columns.values())
    return merged


_MERGERS = {"columnLineage": merge_column_lineage, "schema": merge_schema}


def merge_datasets(first: LineageDataset, second: LineageDataset) -> LineageDataset | None:
    """``first`` (same namespace and name as ``second``) with ``second``'s facets merged in, or
    None when ``second`` adds nothing (the common case: no allocation)."""
    extra = second.facets
    if not extra or first is second:
        return None
    facets: dict[str, Any] = dict(first.facets)
    changed = False
    for key, facet in extra.items():
        have = facets.get(key)
        if have is None:
            facets[key] = facet
            changed = True
            continue
        if have == facet:
            continue
        merger = _MERGERS.get(key)
        if merger is not None and isinstance(have, Mapping) and isinstance(facet, Mapping):
            merged = merger(have, facet)
            if merged != have:
                facets[key] = merged
                changed = True
    if not changed:
        return None
    return LineageDataset(
        first.namespace,
        first.name,
        facets,
        input_facets=first.input_facets,  # declared by the application: kept
        output_facets=first.output_facets,
    )
