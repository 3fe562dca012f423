"""Column lineage: what the ``columnLineage`` facet says, kept by every querying store alike.

Each store writes one edge per (output field, input field) of the facet, whatever its form:

* the current one (facet 1-1-0 and later): ``fields.<f>.inputFields[]`` each with its own
  ``transformations`` (``type``, ``subtype``, ``description``, ``masking``);
* the older one (1-0-x): ``fields.<f>.inputFields[]`` of bare ``{namespace, name, field}``, with
  ``transformationDescription`` / ``transformationType`` once per output field.

How an output derives from an input is kept as canonical JSON text (:func:`edge_info`). Events
arrive in any order and more than once, so an edge stated by several events keeps the statement of
the greatest :func:`edge_rank` (event time, then event id): a pure function of the set of events,
the same in every store. The dataset-wide ``dataset`` list of the facet (filters, sorts, joins
that touch every column) is not kept.

Reads walk the edges breadth-first from the root fields (:func:`walk_columns`): each store only
supplies "the roots of this node" and "the edges one hop from these fields", so depth, direction
and the shape of the answer are defined once. :func:`marquez_column_graph` gives Marquez's answer
of ``GET /api/v1/column-lineage``, for the HTTP API and the CLI alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NamedTuple, Protocol

import orjson

from lineage_sdk.collector.store import (
    ColumnGraph,
    DatasetRef,
    FieldRef,
    check_node_limit,
    nearest_first,
    parse_node_id,
    walk_full,
)
from lineage_sdk.collector.symlinks import event_aliases
from lineage_sdk.models.json_exact import dumps_exact, loads_exact

__all__ = [
    "ColumnEdge",
    "ColumnRoot",
    "column_edges",
    "cut_columns",
    "dataset_key",
    "edge_info",
    "edge_rank",
    "marquez_column_graph",
    "parse_column_node",
    "walk_columns",
]

_EPOCH = datetime(1, 1, 1, tzinfo=UTC)
_FIELD_PREFIX = "datasetField:"
# The older facet's per-field keys, copied to each of the field's edges.
_OLD_KEYS = ("transformationDescription", "transformationType")
#: An entry that says nothing of how (shared: never changed).
_NOTHING: dict[str, str] = {}


class _Record(Protocol):
    """What column extraction reads of a :class:`~lineage_sdk.collector.store.LineageRecord`."""

    @property
    def kind(self) -> str: ...
    @property
    def event(self) -> dict[str, Any]: ...
    @property
    def event_id(self) -> str: ...
    @property
    def event_time(self) -> datetime: ...
    @property
    def inputs(self) -> tuple[DatasetRef, ...]: ...
    @property
    def outputs(self) -> tuple[DatasetRef, ...]: ...


class ColumnEdge(tuple[FieldRef, FieldRef, str]):
    """(output field, input field, info): one derivation the facet states."""

    __slots__ = ()

    def __new__(cls, output: FieldRef, input: FieldRef, info: str) -> ColumnEdge:
        return super().__new__(cls, (output, input, info))

    @property
    def output(self) -> FieldRef:
        return self[0]

    @property
    def input(self) -> FieldRef:
        return self[1]

    @property
    def info(self) -> str:
        return self[2]


def dataset_key(namespace: str, name: str) -> str:
    """A fixed-size key of a dataset (the sql store's ``name_key``)."""
    return hashlib.blake2b(f"{namespace}\x00{name}".encode(), digest_size=16).hexdigest()


def edge_rank(event_time: datetime, event_id: str) -> str:
    """Text that sorts like (event time, event id): digits then hex, so any collation agrees."""
    aware = event_time if event_time.tzinfo else event_time.replace(tzinfo=UTC)
    delta = aware.astimezone(UTC) - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return f"{micros:020d}{event_id}"


def edge_rank_time(rank: str) -> datetime:
    """The event time inside an :func:`edge_rank` text: the latest statement's time."""
    return _EPOCH + timedelta(microseconds=int(rank[:20]))


def edge_info(input_field: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    """Canonical JSON of how an output field derives from one input (``{}`` when not said)."""
    return _edge_info(input_field, _spec_info(spec))


def _spec_info(spec: Mapping[str, Any]) -> dict[str, str]:
    """What an output field's entry says of all its inputs (the facet's older keys)."""
    if _OLD_KEYS[0] not in spec and _OLD_KEYS[1] not in spec:
        return _NOTHING
    info: dict[str, str] = {}
    for key in _OLD_KEYS:
        value = spec.get(key)
        if value and type(value) is str:
            info[key] = value
    return info


def _edge_info(input_field: Mapping[str, Any], base: dict[str, str]) -> str:
    transformations = input_field.get("transformations")
    kept = None
    if type(transformations) is list:  # decoded JSON: plain lists and dicts (cheap checks)
        kept = [t for t in transformations if type(t) is dict or isinstance(t, Mapping)]
    if not kept:
        if not base:
            return "{}"  # most edges: nothing said of how (no dict, no encoding)
        info: dict[str, Any] = base
    else:
        info = {**base, "transformations": kept}
    return dumps_exact(info, option=orjson.OPT_SORT_KEYS).decode()  # beyond 64 bits too


def column_edges(rec: _Record) -> dict[tuple[FieldRef, FieldRef], str]:
    """Every edge one event states, (output, input) -> info; the greatest info when an event
    states an edge twice, so the answer does not depend on the order of its datasets.

    One loop, no generator of edge tuples: this runs for every event the collector stores, ten
    edges an event and more, and such a generator cost a fifth of the derivation."""
    refs: Sequence[DatasetRef] = (*rec.inputs, *rec.outputs)
    if rec.kind == "dataset" and not refs:
        ds = rec.event.get("dataset")
        if isinstance(ds, Mapping) and isinstance(ds.get("namespace"), str):
            name = ds.get("name")
            if isinstance(name, str):
                refs = (DatasetRef(ds["namespace"], name, ds.get("facets") or {}, "output"),)
    out: dict[tuple[FieldRef, FieldRef], str] = {}
    aliases: dict[tuple[str, str], tuple[str, str]] | None = None
    for ref in refs:
        facets = ref.facets
        if not isinstance(facets, Mapping) or "columnLineage" not in facets:
            continue
        facet = facets["columnLineage"]
        fields = facet.get("fields") if isinstance(facet, Mapping) else None
        if not isinstance(fields, Mapping):
            continue
        if aliases is None:  # input fields may name a dataset by any of its symlinked names
            aliases = event_aliases(rec.event)
        for out_field, spec in fields.items():
            if type(out_field) is not str or not (type(spec) is dict or isinstance(spec, Mapping)):
                continue
            inputs = spec.get("inputFields")
            if type(inputs) is not list or not inputs:
                continue
            output = FieldRef(ref.namespace, ref.name, out_field)
            base = _spec_info(spec)
            for src in inputs:
                if not (type(src) is dict or isinstance(src, Mapping)):
                    continue
                ns, ds_name, col = src.get("namespace"), src.get("name"), src.get("field")
                if type(ns) is not str or type(ds_name) is not str or type(col) is not str:
                    continue
                if aliases:
                    resolved = aliases.get((ns, ds_name))
                    if resolved is not None:
                        ns, ds_name = resolved
                key = (output, FieldRef(ns, ds_name, col))
                info = _edge_info(src, base)
                known = out.get(key)
                if known is None or info > known:
                    out[key] = info
    return out


class ColumnRoot(NamedTuple):
    """Where a column-lineage question starts: one field, every field of a dataset, or every
    field of the datasets a job writes (``field`` is None but for ``FIELD``)."""

    kind: Literal["FIELD", "DATASET", "JOB"]
    namespace: str
    name: str
    field: str | None = None


def parse_column_node(node: str) -> ColumnRoot:
    """``datasetField:<ns>:<name>:<field>``, ``dataset:<ns>:<name>`` or ``job:<ns>:<name>``.

    The field is what follows the last ``:`` (a field name holding ``:`` cannot be asked for);
    the rest splits as :func:`~lineage_sdk.collector.store.parse_node_id` splits a dataset id.
    ValueError, with the reason, for anything else.
    """
    if node.startswith(_FIELD_PREFIX):
        rest, sep, col = node[len(_FIELD_PREFIX) :].rpartition(":")
        if not sep or not col:
            raise ValueError(f"node id {node!r} must be datasetField:<namespace>:<dataset>:<field>")
        _, namespace, name = parse_node_id(f"dataset:{rest}")
        return ColumnRoot("FIELD", namespace, name, col)
    if not node.startswith(("dataset:", "job:")):
        raise ValueError(
            "column lineage starts at datasetField:<namespace>:<dataset>:<field>, "
            f"dataset:<namespace>:<dataset> or job:<namespace>:<job>, got {node!r}"
        )
    kind, namespace, name = parse_node_id(node)
    return ColumnRoot("JOB" if kind == "JOB" else "DATASET", namespace, name)


Roots = Callable[[ColumnRoot], Iterable[FieldRef]]
Step = Callable[[Sequence[FieldRef], bool], Iterable[ColumnEdge]]


def walk_columns(
    node: str,
    roots: Roots,
    step: Step,
    *,
    depth: int,
    with_downstream: bool,
    node_limit: int | None = None,
) -> ColumnGraph:
    """The answer of ``column_lineage``: breadth-first from the node's fields.

    ``roots(root)`` gives the fields the node names that column lineage knows (the field, every
    field of a dataset, or every field of a job's output datasets, as Marquez answers a job);
    ``step(fields, upstream)`` the edges whose
    output (upstream) or input (downstream) is one of ``fields``. Depth counts column hops.
    With ``node_limit``, a walk that has found more fields makes one last step recording only
    the edges back to fields it has, and the answer is cut by :func:`cut_columns`.
    """
    root = parse_column_node(node)
    if not isinstance(depth, int) or depth < 0:
        raise ValueError(f"depth must be a non-negative integer, got {depth!r}")
    check_node_limit(node_limit)
    start = sorted(set(roots(root)))
    graph = ColumnGraph(root=node, roots=tuple(start), fields=set(start))
    for upstream in (True, False) if with_downstream else (True,):
        seen = set(start)
        frontier = start
        for _ in range(depth):
            if not frontier:
                break
            closing = walk_full(len(seen), node_limit)
            reached: set[FieldRef] = set()
            for edge in step(frontier, upstream):
                far = edge.input if upstream else edge.output
                if closing and far not in graph.fields:
                    continue
                key = (edge.output, edge.input)
                if key not in graph.edges or edge.info > graph.edges[key]:
                    graph.edges[key] = edge.info
                graph.fields.update(key)
                if far not in seen:
                    seen.add(far)
                    reached.add(far)
            if closing:
                break
            frontier = sorted(reached)
    return cut_columns(graph, with_downstream, node_limit)


def cut_columns(graph: ColumnGraph, with_downstream: bool, node_limit: int | None) -> ColumnGraph:
    """``graph`` cut to its ``node_limit`` fields nearest its roots, as lineage is cut
    (:func:`~lineage_sdk.collector.store.nearest_first`: upstream from an output field to its
    inputs, downstream the other way), only the edges among kept fields, ``truncated`` set."""
    check_node_limit(node_limit)
    if node_limit is None or len(graph.fields) <= node_limit:
        return graph
    ups: dict[str, list[str]] = {}
    downs: dict[str, list[str]] = {}
    for out, src in graph.edges:
        ups.setdefault(out.id, []).append(src.id)
        downs.setdefault(src.id, []).append(out.id)
    adjacencies = [ups, downs] if with_downstream else [ups]
    kept = set(nearest_first((r.id for r in graph.roots), adjacencies, node_limit))
    return ColumnGraph(
        root=graph.root,
        roots=tuple(r for r in graph.roots if r.id in kept),
        fields={f for f in graph.fields if f.id in kept},
        edges={k: v for k, v in graph.edges.items() if k[0].id in kept and k[1].id in kept},
        truncated=True,
        omitted=len(graph.fields) - len(kept),
    )


def marquez_column_graph(graph: ColumnGraph) -> dict[str, Any]:
    """Marquez's column-lineage ``Lineage``: ``DATASET_FIELD`` nodes, roots first, then by id.

    ``data.inputFields`` lists the field's inputs within the answer, each with what is known of
    the transformation; as in Marquez, every edge starts at its node: ``inEdges`` point from the
    field to its inputs, ``outEdges`` from the field to the fields derived from it.
    """
    inputs: dict[FieldRef, list[tuple[FieldRef, str]]] = {}
    outputs: dict[FieldRef, list[FieldRef]] = {}
    for (out, src), info in graph.edges.items():
        inputs.setdefault(out, []).append((src, info))
        outputs.setdefault(src, []).append(out)
    roots = set(graph.roots)
    nodes: list[dict[str, Any]] = []
    for ref in sorted(graph.fields, key=lambda f: (f not in roots, f.id)):
        feeds = sorted(inputs.get(ref, ()))
        input_fields = []
        for src, info in feeds:
            item: dict[str, Any] = {
                "namespace": src.namespace,
                "dataset": src.dataset,
                "field": src.field,
            }
            item.update(loads_exact(info))
            input_fields.append(item)
        nodes.append(
            {
                "id": ref.id,
                "type": "DATASET_FIELD",
                "data": {
                    "namespace": ref.namespace,
                    "dataset": ref.dataset,
                    "field": ref.field,
                    "inputFields": input_fields,
                },
                # As Marquez writes them: each edge of a node starts at the node.
                "inEdges": [{"origin": ref.id, "destination": src.id} for src, _ in feeds],
                "outEdges": [
                    {"origin": ref.id, "destination": out.id}
                    for out in sorted(outputs.get(ref, ()))
                ],
            }
        )
    return {"graph": nodes}
