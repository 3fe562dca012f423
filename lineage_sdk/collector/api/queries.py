"""The read questions, answered from a querying store in Marquez's shapes.

Shared by the HTTP routes and by the ``lineage`` CLI when it reads a store directly, so both give
the same answer (including what counts as "not found") for the same data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lineage_sdk.collector.api import marquez, marquez_events
from lineage_sdk.collector.api.access import prune_columns, prune_graph, visible_cut
from lineage_sdk.collector.api.history import (
    columns_of_events,
    declared_ids,
    events_up_to,
    history_columns,
    history_lineage,
    run_scope_events,
    unknown_in_history,
)
from lineage_sdk.collector.api.marquez import iso
from lineage_sdk.collector.columns import (
    ColumnRoot,
    cut_columns,
    marquez_column_graph,
    parse_column_node,
)
from lineage_sdk.collector.engine import Engine
from lineage_sdk.collector.engine.reads import NodeFacts, as_of_before, shared_edges
from lineage_sdk.collector.engine.statements import StatedVersion, Statement, carriers
from lineage_sdk.collector.engine.views import ALWAYS, Window, parse_run_node
from lineage_sdk.collector.store import (
    DEFAULT_NODE_LIMIT,
    ColumnGraph,
    Direction,
    FieldRef,
    Granularity,
    LineageGraph,
    NodeType,
    Page,
    cut_lineage,
    node_id,
    parse_node_id,
)

__all__ = [
    "NotFound",
    "StatedDataset",
    "StatedVersions",
    "bounded",
    "column_lineage",
    "dataset_events",
    "dataset_object",
    "dataset_versions",
    "job_details",
    "job_events",
    "lineage",
    "parse_node",
    "run_events",
    "run_scope",
    "runs",
    "stated_dataset",
    "stated_versions",
    "with_node_facts",
]


class NotFound(LookupError):
    """Nothing is recorded under the asked name; the message says what was asked."""


def parse_node(node: str) -> tuple[NodeType, str, str]:
    """A node id split into (type, namespace, name); ValueError with a readable reason."""
    if node.startswith("datasetField:"):
        raise ValueError("column-level node ids (datasetField:...) are not supported")
    return parse_node_id(node)


def lineage(
    store: Engine,
    node: str,
    *,
    direction: Direction = "both",
    depth: int = 20,
    readable: Callable[[str], bool] | None = None,
    as_of: datetime | None = None,
    run_id: str | None = None,
    node_limit: int = DEFAULT_NODE_LIMIT,
    since: datetime | None = None,
    until: datetime | None = None,
    granularity: Granularity = "job",
    schema_marks: bool = False,
) -> dict[str, Any]:
    """Marquez's ``LineageGraph`` around ``node``; NotFound if nothing is recorded for it.

    ``schema_marks`` (the route's ``marks=schema``, what the page asks) marks each dataset whose
    last schema change broke (``schemaBreaking``): an opt-in read, as it costs about 40% more
    of an answer's CPU (two runs of each writer are read, not one).

    ``since``/``until`` (``until`` exclusive) and ``granularity`` ask for a view
    (:mod:`lineage_sdk.collector.engine.views`): ``until`` with no ``since`` is ``asOf`` a
    microsecond before it. What may not be asked together (``asOf`` or ``runId`` with a view)
    is refused before, by :func:`lineage_sdk.collector.api.views.read_view`.

    At most ``node_limit`` nodes, nearest the root first (the store stops walking early); the
    answer's ``truncated`` says whether nodes were left out, ``nodeLimit`` echoes the limit.

    ``readable`` (a namespace test, with ``store`` the key's ``access.visible`` view) limits the
    walk to readable nodes: an unreadable root answers as an unknown one, nothing is reached
    through an unreadable node (``access.prune_graph``), and the limit counts readable nodes
    only (``access.visible_cut``). ``as_of`` (the events up to that time) and ``run_id`` (that
    run, its parents and children) answer from the raw events instead
    (:mod:`lineage_sdk.collector.api.history`).
    """
    window = Window(since, until)
    if granularity == "job" and since is None and until is not None:
        as_of = as_of_before(until)
    asked = node
    if parse_run_node(node) is not None:
        return _view(
            store, node, asked, granularity, direction, depth, readable, window, node_limit
        )
    node_type, namespace, name = parse_node(node)
    if node_type == "DATASET":
        namespace, name = store.dataset_name(namespace, name)
        node = node_id("DATASET", namespace, name)
    if granularity != "job" or since is not None:
        return _view(
            store, node, asked, granularity, direction, depth, readable, window, node_limit
        )
    if as_of is not None or run_id is not None:
        found = _history_lineage(store, node, direction, depth, readable, as_of, run_id, node_limit)
        if run_id is None and as_of is not None and _at_present(store, as_of):
            with_node_facts(store, found, schemas=schema_marks)  # as of now: the present
        return _as_asked(found, asked, node)
    with shared_edges():  # the node facts take the walked nodes' edges from the walk
        if readable is None:
            graph = store.lineage(node, direction=direction, depth=depth, node_limit=node_limit)
        else:
            graph = visible_cut(
                lambda limit: store.lineage(
                    node, direction=direction, depth=depth, node_limit=limit
                ),
                _pruner(readable, direction, depth),
                lambda pruned: cut_lineage(pruned, direction, node_limit),
                node_limit,
                truncated=lambda found: found.truncated,
            )
        root = graph.nodes.get(graph.root)
        lone = len(graph.nodes) <= 1 and (root is None or not (root.in_edges or root.out_edges))
        if lone and not store.has_node(node_type, namespace, name):
            raise NotFound(f"nothing is recorded for {asked!r}")
        answer = _answer(graph, set(), node_limit)
        # The node facts read the graph's jobs' edges, declared ones marked: one read, not two.
        facts = _fold_nodes(store, answer, schemas=schema_marks)
        _declare(answer, declared_ids(facts.declared))
    return _as_asked(answer, asked, node)


def _view(
    store: Engine,
    node: str,
    asked: str,
    granularity: Granularity,
    direction: Direction,
    depth: int,
    readable: Callable[[str], bool] | None,
    window: Window,
    node_limit: int,
) -> dict[str, Any]:
    """``lineage`` at a granularity or in a window (:meth:`Engine.lineage_view`)."""
    try:
        view = store.lineage_view(
            node,
            granularity=granularity,
            direction=direction,
            depth=depth,
            node_limit=node_limit,
            window=window,
            readable=readable,
        )
    except LookupError as exc:
        raise NotFound(str(exc).replace(repr(node), repr(asked))) from None
    graph = view.graph
    answer = marquez.lineage_view(graph, view.edge_data)
    if granularity == "job":
        jobs = [(n.namespace, n.name) for n in graph.nodes.values() if n.type == "JOB"]
        as_of = None if window.until is None else as_of_before(window.until)
        _declare(answer, declared_ids(store.declared(jobs, as_of=as_of)))
    bounded(answer, graph.truncated, node_limit, graph.omitted)
    answer["granularity"] = granularity
    for name, at in (("since", window.since), ("until", window.until)):
        if at is not None:
            answer[name] = iso(at)
    if view.start is not None:
        answer["nodeId"] = view.start
    return _as_asked(answer, asked, node)


def with_node_facts(
    store: Engine, answer: dict[str, Any], *, schemas: bool = False
) -> dict[str, Any]:
    """A graph answer whose job and dataset nodes carry Marquez's ``JobData`` and
    ``DatasetData`` fields beside their names and latest runs, as the store holds them now
    (``NodeFold``, the jobs' latest runs the answer's own). The answers as of a past time or of
    a run's scope keep their names and latest runs alone."""
    _fold_nodes(store, answer, schemas=schemas)
    return answer


def _fold_nodes(store: Engine, answer: dict[str, Any], *, schemas: bool = False) -> NodeFacts:
    """``with_node_facts``'s work on ``answer``; the facts it was folded from."""
    keys: dict[str, list[tuple[str, str]]] = {"JOB": [], "DATASET": []}
    latest: dict[tuple[str, str], str] = {}
    for item in answer["graph"]:
        data = item["data"]
        key = (data["namespace"], data["name"])
        keys[item["type"]].append(key)
        run = data.get("latestRun")
        if isinstance(run, dict) and isinstance(run.get("id"), str):
            latest[key] = run["id"]
    facts = store.node_facts(keys["JOB"], keys["DATASET"], latest, schemas=schemas)
    fold = marquez_events.NodeFold(facts)
    for item in answer["graph"]:
        data = item["data"]
        if item["type"] == "JOB":
            data.update(fold.job(data["namespace"], data["name"]))
        else:
            data.update(fold.dataset(data["namespace"], data["name"]))
    return facts


def _at_present(store: Engine, as_of: datetime) -> bool:
    """Whether no event the store holds is later than ``as_of``: the past is then the present."""
    return not store.has_events_after(as_of)


def _as_asked(answer: dict[str, Any], asked: str, node: str) -> dict[str, Any]:
    """The answer, with the node it starts at as ``nodeId`` (a lineage-sdk extension) when the
    node asked for is a dataset asked by another of its names."""
    if node != asked:
        answer["nodeId"] = node
    return answer


def _answer(graph: LineageGraph, declared: set[tuple[str, str]], node_limit: int) -> dict[str, Any]:
    """Marquez's answer for ``graph``, each edge some JobEvent declares marked ``declared``."""
    answer = _declare(marquez.lineage_graph(graph), declared)
    return bounded(answer, graph.truncated, node_limit, graph.omitted)


def _declare(answer: dict[str, Any], declared: set[tuple[str, str]]) -> dict[str, Any]:
    """``answer`` with each edge in ``declared`` (origin, destination) marked ``declared``."""
    if declared:
        for item in answer["graph"]:
            for edge in (*item["inEdges"], *item["outEdges"]):
                if (edge["origin"], edge["destination"]) in declared:
                    edge["declared"] = True
    return answer


def bounded(
    answer: dict[str, Any], truncated: bool, node_limit: int, omitted: int
) -> dict[str, Any]:
    """A graph answer with the lineage-sdk extension of bounded reads: ``truncated`` (nodes
    were left out because of the limit), ``nodeLimit``, and ``omittedNodes``, how many nodes
    the walk found and left out (it stops one level past the limit, so at least that many)."""
    answer["truncated"] = truncated
    answer["nodeLimit"] = node_limit
    answer["omittedNodes"] = omitted
    return answer


def _history_lineage(
    store: Engine,
    node: str,
    direction: Direction,
    depth: int,
    readable: Callable[[str], bool] | None,
    as_of: datetime | None,
    run_id: str | None,
    node_limit: int,
) -> dict[str, Any]:
    """``lineage`` for ``asOf``/``runId``: folded from the raw events, pruned and cut alike."""

    def read(limit: int | None) -> tuple[LineageGraph, set[tuple[str, str]]]:
        return history_lineage(
            store,
            node,
            direction=direction,
            depth=depth,
            as_of=as_of,
            run_id=run_id,
            node_limit=limit,
        )

    try:
        if readable is None:
            graph, declared = read(node_limit)
        else:
            prune = _pruner(readable, direction, depth)
            graph, declared = visible_cut(
                read,
                lambda found: (prune(found[0]), found[1]),
                lambda found: (cut_lineage(found[0], direction, node_limit), found[1]),
                node_limit,
                truncated=lambda found: found[0].truncated,
            )
            if graph.root not in graph.nodes:  # named by the events, but hidden
                raise unknown_in_history(node, as_of, run_id)
    except LookupError as exc:
        raise NotFound(str(exc)) from None
    return _answer(graph, declared, node_limit)


def _pruner(
    readable: Callable[[str], bool], direction: Direction, depth: int
) -> Callable[[LineageGraph], LineageGraph]:
    return lambda graph: prune_graph(graph, readable, direction=direction, depth=depth)


def dataset_events(store: Engine, namespace: str, name: str) -> list[Any]:
    """The events behind a dataset's Marquez reads: its runs' events and its DatasetEvents."""
    events = store.events_of_dataset(namespace, name)
    static = store.static_events(datasets=[(namespace, name)])
    return marquez_events.merge_events(events, static) if static else events


@dataclass(frozen=True)
class StatedDataset:
    """A dataset's statements up to ``as_of`` (in event order, never empty) and the events
    read so far, by id."""

    namespace: str
    name: str
    as_of: datetime | None
    statements: list[Statement]
    #: The version key of each schema fingerprint among the statements.
    keys: dict[str, str]
    events: dict[str, dict[str, Any]]


def stated_dataset(
    store: Engine, namespace: str, name: str, as_of: datetime | None
) -> StatedDataset | None:
    """The dataset's statements up to ``as_of``; None when there are none (its reads then fold
    its events, which answer the same: nothing, or a 404)."""
    statements, keys, events = store.dataset_statements(namespace, name, as_of=as_of)
    return StatedDataset(namespace, name, as_of, statements, keys, events) if statements else None


def _carried(
    store: Engine, stated: StatedDataset, groups: list[list[Statement]]
) -> list[list[dict[str, Any]]]:
    """Each group's facets' latest carriers (events, in order), reading in one go those of
    every group not read yet."""
    found = [carriers(group) for group in groups]
    wanted = {i for ids in found for i in ids} - stated.events.keys()
    stated.events.update(store.events_by_id(wanted))
    return [[stated.events[i] for i in ids] for ids in found]


def dataset_object(store: Engine, stated: StatedDataset) -> dict[str, Any]:
    """The Marquez ``Dataset`` from its statements (what folding its events answers)."""
    [carried] = _carried(store, stated, [stated.statements])
    data = marquez_events.dataset_from_statements(
        stated.namespace, stated.name, stated.statements, stated.keys, carried
    )
    aliases = sorted({(ns, nm) for s in stated.statements for ns, nm in s.aliases})
    if aliases:
        data["otherNames"] = [{"namespace": ns, "name": nm} for ns, nm in aliases]
    return data


def dataset_versions(
    store: Engine, stated: StatedDataset, versions: list[StatedVersion]
) -> list[dict[str, Any]]:
    """These of the dataset's versions as Marquez ``DatasetVersion`` objects (what folding its
    events answers for them), reading only their facets' carriers and their creators' events."""
    groups = [stated.statements, *(v.statements for v in versions)]
    every, *each = _carried(store, stated, groups)
    creators = {c for v in versions if (c := marquez_events.stated_creator(v)) is not None}
    runs = store.events_of_runs(creators, as_of=stated.as_of)
    ns, name = stated.namespace, stated.name
    source = marquez_events.stated_source(every, ns, name)
    return [
        marquez_events.version_from_statements(ns, name, v, source, carried, runs)
        for v, carried in zip(versions, each, strict=True)
    ]


def job_details(store: Engine, namespace: str, name: str) -> dict[str, Any]:
    """``marquez_events.job_details`` of the job from its statements (what folding its events
    answers), reading only its job facets' latest carriers."""
    statements = store.job_statements(namespace, name)
    if not statements:
        return {}
    ids = carriers(statements)
    events = store.events_by_id(ids)
    carried = [events[i] for i in ids]
    return marquez_events.job_from_statements(namespace, name, statements, carried)


@dataclass(frozen=True)
class StatedVersions:
    """A job's or dataset's versions from its statements: their ids, newest first, and how to
    make the objects of some of them (by position) without making the others."""

    ids: list[str]
    render: Callable[[list[int]], list[dict[str, Any]]]


def stated_versions(
    store: Engine, node_type: NodeType, namespace: str, name: str, as_of: datetime | None
) -> StatedVersions | None:
    """The versions of a job or dataset (up to ``as_of``) from its statements; None when it
    has none (its versions then fold its events, which answer the same)."""
    if node_type == "DATASET":
        stated = stated_dataset(store, namespace, name, as_of)
        if stated is None:
            return None
        every = marquez_events.stated_versions(stated.statements, stated.keys)
        ids = [marquez_events.stated_version_id(namespace, name, v) for v in every]
        return StatedVersions(
            ids, lambda at: dataset_versions(store, stated, [every[i] for i in at])
        )
    runs = [s for s in store.job_statements(namespace, name, as_of=as_of) if not s.static]
    if not runs:
        return None
    found = marquez_events.stated_job_versions(namespace, name, runs)
    return StatedVersions(
        [v.id for v in found],
        lambda at: _job_versions(store, namespace, name, [found[i] for i in at], as_of),
    )


def _job_versions(
    store: Engine,
    namespace: str,
    name: str,
    versions: list[marquez_events.StatedJobVersion],
    as_of: datetime | None,
) -> list[dict[str, Any]]:
    """These versions' objects, reading their job facets' carriers and their latest runs'
    events of this job (a run id another job used too has events that are not its)."""
    ids = [carriers(marquez_events.version_order(v)) for v in versions]
    events = store.events_by_id({i for found in ids for i in found})
    latest = {v.latest for v in versions}
    runs = store.events_of_runs(latest, jobs=[(namespace, name)], as_of=as_of)
    return [
        marquez_events.job_version_from_statements(
            namespace, name, v, [events[i] for i in found], runs.get(v.latest, [])
        )
        for v, found in zip(versions, ids, strict=True)
    ]


def job_events(store: Engine, namespace: str, name: str) -> list[Any]:
    """The events behind a job's Marquez reads: its run events and its JobEvents."""
    events = store.events_of_job(namespace, name)
    static = store.static_events(jobs=[(namespace, name)])
    return marquez_events.merge_events(events, static) if static else events


def job_events_up_to(
    store: Engine,
    namespace: str,
    name: str,
    as_of: datetime,
    *,
    static: bool = True,
) -> list[Any]:
    """:func:`job_events` with ``eventTime <= as_of``, the run events bounded on the backend's
    (job, time) index. ``static=False``: the run events only (what ``events_of_job`` reads)."""
    events = [event for _, event in store.job_events_up_to([(namespace, name)], as_of)]
    if not static:
        return events
    declared = events_up_to(store.static_events(jobs=[(namespace, name)]), as_of)
    return marquez_events.merge_events(events, declared) if declared else events


def run_scope(store: Engine, run_id: str, *, as_of: datetime | None = None) -> list[Any]:
    """The raw events of run ``run_id``'s scope: its own, its parents' and its children's, up
    to ``as_of`` (:func:`~lineage_sdk.collector.api.history.run_scope_events`); NotFound naming
    the run when it has none."""
    try:
        return run_scope_events(store, run_id, as_of=as_of)
    except LookupError as exc:
        raise NotFound(str(exc)) from None


def runs(
    store: Engine, namespace: str, name: str, *, limit: int = 100, offset: int = 0
) -> Page[dict[str, Any]]:
    """Marquez ``Run`` objects of a job, most recent first; ``total`` counts all its runs."""
    found = store.runs_of_job(namespace, name, limit=limit, offset=offset)
    return Page((marquez.run_from_summary(r) for r in found), found.total)


def run_events(store: Engine, run_id: str) -> list[dict[str, Any]]:
    """The raw events of a run in event-time order; NotFound when there are none.

    Run ids are matched as given, then in lower case (how OpenLineage clients write UUIDs).
    """
    events = store.events_of_run(run_id)
    if not events and run_id != run_id.lower():
        events = store.events_of_run(run_id.lower())
    if not events:
        raise NotFound(f"no events are recorded for run {run_id!r}")
    return events


def column_lineage(
    store: Engine,
    node: str,
    *,
    depth: int = 20,
    with_downstream: bool = False,
    readable: Callable[[str], bool] | None = None,
    as_of: datetime | None = None,
    run_id: str | None = None,
    node_limit: int = DEFAULT_NODE_LIMIT,
    since: datetime | None = None,
    until: datetime | None = None,
) -> dict[str, Any]:
    """Marquez's column-lineage graph around ``node`` (``datasetField:...`` or ``dataset:...``);
    ValueError for a malformed id, NotFound when column lineage names no such field or dataset.
    ``as_of``: as the events up to then state it, ``run_id``: as the run's scope states it
    (:func:`run_scope`); no schema-only fields in either (those come from the current dataset);
    NotFound naming the run when it has no events.

    ``readable`` as for :func:`lineage` (``store`` the key's view): only what the readable
    events state (an edge or field a hidden job stated is not there, and a field only a hidden
    job names answers as an unknown one), nothing reached through an unreadable field, and the
    limit counting readable fields only.

    ``since``/``until``: the column edges whose job wrote the output's dataset in the window
    (:meth:`Engine.column_lineage`); ``until`` alone is ``asOf`` a microsecond before it."""
    window = Window(since, until)
    if since is None and until is not None:
        as_of, window = as_of_before(until), ALWAYS
    root = parse_column_node(node)
    asked, asked_node = root, node
    node = _dataset_root(store, node, root)
    root = parse_column_node(node)
    if as_of is not None or run_id is not None:
        try:
            graph = history_columns(
                store,
                node,
                as_of=as_of,
                run_id=run_id,
                depth=depth,
                with_downstream=with_downstream,
                node_limit=node_limit if readable is None else None,
            )
        except LookupError as exc:
            raise NotFound(str(exc)) from None
        if readable is not None:
            graph = cut_columns(
                prune_columns(graph, readable, depth=depth, with_downstream=with_downstream),
                with_downstream,
                node_limit,
            )
    elif readable is None:
        graph = _store_columns(store, node, root, depth, with_downstream, node_limit, window)
    else:
        graph = visible_cut(
            lambda limit: _store_columns(store, node, root, depth, with_downstream, limit, window),
            lambda found: prune_columns(
                _as_readable_events_state(store, found, node, root, depth, with_downstream),
                readable,
                depth=depth,
                with_downstream=with_downstream,
            ),
            lambda pruned: cut_columns(pruned, with_downstream, node_limit),
            node_limit,
            truncated=lambda found: found.truncated,
        )
    if not graph.roots:
        what = {
            "FIELD": f"field {root.field!r} of dataset",
            "DATASET": "dataset",
            "JOB": "the outputs of job",
        }[root.kind]
        raise NotFound(f"no column lineage is recorded for {what} {asked.namespace}:{asked.name}")
    answer = bounded(marquez_column_graph(graph), graph.truncated, node_limit, graph.omitted)
    return _as_asked(answer, asked_node, node)


def _dataset_root(store: Engine, node: str, root: ColumnRoot) -> str:
    """A column-lineage root with its dataset's name resolved (:meth:`Engine.dataset_name`)."""
    if root.kind == "JOB":
        return node
    namespace, name = store.dataset_name(root.namespace, root.name)
    if (namespace, name) == (root.namespace, root.name):
        return node
    if root.field is None:
        return node_id("DATASET", namespace, name)
    return FieldRef(namespace, name, root.field).id


def _store_columns(
    store: Engine,
    node: str,
    root: ColumnRoot,
    depth: int,
    with_downstream: bool,
    node_limit: int | None,
    window: Window,
) -> ColumnGraph:
    """The engine's column-lineage walk, cut at ``node_limit``; a node column lineage does not
    name answers the fields its schema lists (in a window: nothing)."""
    graph = store.column_lineage(
        node, depth=depth, with_downstream=with_downstream, node_limit=node_limit, window=window
    )
    if not graph.roots and window == ALWAYS:
        graph = cut_columns(_schema_fields(store, node, root), with_downstream, node_limit)
    return graph


def _as_readable_events_state(
    view: Engine,
    graph: ColumnGraph,
    node: str,
    root: ColumnRoot,
    depth: int,
    with_downstream: bool,
) -> ColumnGraph:
    """The column lineage the events ``view`` shows state, around ``node``.

    The stores keep a field edge without the job that stated it, so the store's walk (``graph``,
    uncut) only says where to look: every edge a readable event states and the walk may reach is
    among its edges, so the readable events of the datasets it holds (and of a job root) state
    them all, each with the transformation the latest readable event gave it."""
    datasets = {(f.namespace, f.dataset) for f in graph.fields}
    events: list[Any] = []
    if root.kind == "JOB":
        events += job_events(view, root.namespace, root.name)
    else:
        datasets.add((root.namespace, root.name))
    for namespace, name in sorted(datasets):
        events += dataset_events(view, namespace, name)
    stated = columns_of_events(events, node, depth=depth, with_downstream=with_downstream)
    return stated if stated.roots else _schema_fields(view, node, root)


def _schema_fields(store: Engine, node: str, root: ColumnRoot) -> ColumnGraph:
    """Fields no column lineage names but a schema facet lists (of the dataset, or of the datasets
    the job writes): Marquez answers them as nodes without inputs (its fields come from the
    schema), and so do we."""
    datasets = [(root.namespace, root.name)]
    if root.kind == "JOB":
        datasets = sorted(
            {
                (str(d["namespace"]), str(d["name"]))
                for event in store.events_of_job(root.namespace, root.name)
                for d in event.get("outputs") or ()
                if isinstance(d, dict) and "namespace" in d and "name" in d
            }
        )
    refs: list[FieldRef] = []
    for namespace, name in datasets:
        events = dataset_events(store, namespace, name)
        dataset = marquez_events.dataset_from_events(namespace, name, events)
        refs += [
            FieldRef(namespace, name, f["name"])
            for f in dataset["fields"]
            if root.field is None or f["name"] == root.field
        ]
    return ColumnGraph(node, roots=tuple(refs), fields=set(refs))
