"""What an event means, as rows: the one derivation of edges, runs, column edges, nodes and
mentions from OpenLineage events (every backend stores these rows; none derives its own).

The rules (each row type's merge rules are in :mod:`lineage_sdk.collector.backend`):

* **Nodes.** An event names its job, its parent job (the ``parent`` run facet), the datasets it
  reads and writes, and a DatasetEvent's dataset: those are the known nodes (``has_node``,
  search, lists). Datasets named only inside a ``columnLineage`` facet are not.
* **Sources.** Each dataset entry names its data source as Marquez reads it (``OpenLineageDao``):
  the ``dataSource`` facet's ``name`` and ``uri``, or ``default`` with no URI when the entry has
  no such facet. One SOURCE node per (dataset, source name, URI), keyed by the dataset's
  namespace (:func:`source_key`), so a deletion derives a source again from the touched
  datasets' events alone and a key's namespaces say which sources it sees. No mention.
* **Edges.** A job reads (``in``) its events' inputs and writes (``out``) their outputs, first
  seen at the least event time that states the edge; a JobEvent's edges are also *declared*.
  DatasetEvents state no edge. A ``lineage`` facet's edges are declared too, whatever the
  event's kind (:mod:`~lineage_sdk.collector.engine.lineage_facet` says how it maps).
* **Runs.** One row per (run id, job its events name): first and last event time, the winning
  state (:func:`~lineage_sdk.models.run_state.state_key`, rank 0 when no event states one,
  which still dates the row), start, end, parent and root run, heartbeat interval.
* **Column edges.** One row per (output field, input field, job) of the ``columnLineage``
  facets (:func:`~lineage_sdk.collector.columns.column_edges`), the latest statement's info.
* **Mentions.** One row per (run, node, role), or per (event, node, role) for an event
  without a run, but none for an event's own job (``events(jobs=...)`` finds those): what a
  node's runs, its static events and a deletion read. Their ``detail`` holds what the events
  state of a dataset, which a dataset's and a job's reads fold
  (:mod:`~lineage_sdk.collector.engine.statements`): a run's START and end events and a
  DatasetEvent in the dataset's mentions of its role (input, output, dataset), any other run
  event in a ``stated`` mention of (event, dataset); what an event states of its own job in a
  ``stated`` mention of (run, job) for a START or end, else of (event, job). A job's events
  naming a parent make one ``parent`` mention of it per child job, not per run: source ``job``,
  the child (:func:`child_entry`), first seen at the least time of those events. It is a row of
  keys, owned by the parent (``replace`` renews it with the parent's key; :func:`derive_keyed`
  gives it), what the parent view's members are found by.
* **Aliases.** Each name an event gives a symlinked dataset besides its canonical one (the
  name as sent, its other symlink identifiers: :func:`~lineage_sdk.collector.symlinks.
  event_aliases`) is a DATASET mention in role ``alias``, keyed by that name: the engine
  resolves an alias to its node from the event that gave it
  (:meth:`~lineage_sdk.collector.engine.Engine.dataset_name`). Each (alias, node) pair is also
  an ALIAS node keyed by the alias's namespace (:func:`alias_key`), what search finds a dataset
  by a part of any of its names with; like a SOURCE node it holds its dataset in its key, so a
  deletion derives it again from the touched datasets' events alone. No mention.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from lineage_sdk.collector.backend import (
    ColumnEdgeRow,
    EdgeRow,
    EventRow,
    Io,
    Key,
    MentionRow,
    NodeKind,
    NodeRow,
    Ranked,
    Role,
    Rows,
    RunRow,
    key_of,
)
from lineage_sdk.collector.columns import column_edges, edge_rank
from lineage_sdk.collector.engine.lineage_facet import facet_lineage
from lineage_sdk.collector.engine.statements import PACKED_TYPES, statements_of
from lineage_sdk.collector.records import build_record, format_time, state_rank
from lineage_sdk.collector.store import DatasetRef, FieldRef, LineageRecord, event_namespace
from lineage_sdk.collector.symlinks import event_aliases
from lineage_sdk.models.json_exact import dumps_exact, loads_exact
from lineage_sdk.models.run_state import (
    TERMINAL_STATES,
    heartbeat_interval,
    run_state,
    state_key,
)

__all__ = [
    "DEFAULT_SOURCE",
    "DERIVATION_VERSION",
    "STATING_ROLES",
    "alias_key",
    "alias_of_key",
    "child_entry",
    "child_of",
    "children_of",
    "derive",
    "derive_keyed",
    "event_alias_keys",
    "event_json",
    "event_sources",
    "keyed_least",
    "record_of",
    "run_rank",
    "source_key",
    "source_of_key",
]

#: The version of the rules above. A backend keeps the version its derived rows were made by;
#: when it is older, the engine derives every stored event's rows again at ``open``. Add one,
#: with a line here saying what changed, whenever :func:`derive` would make other rows of a
#: stored event.
#:
#: 1. Edges, runs, column edges, nodes and mentions (the engine's first layout).
#: 2. SOURCE nodes, one per (dataset, ``dataSource`` name and URI) (issue 32).
#: 3. The ``lineage`` facet's declared edges, column edges and the nodes they name (issue 32).
#: 4. Alias mentions: every name of a symlinked dataset besides its canonical one (issue 32).
#: 5. ALIAS nodes, one per (alias, dataset), for search; no alias mention by the name alone.
#: 6. ``stated`` mentions: what each run event or DatasetEvent states of each dataset it names,
#:    and each event of its job (:mod:`~lineage_sdk.collector.engine.statements`), which a
#:    dataset's and a job's reads fold (issue 31).
#: 7. Statements are sets of entries (one an event) in ``detail``: a run's START and end events'
#:    in the run's mentions of a dataset (input, output) and one ``stated`` mention of (run,
#:    job), a DatasetEvent's in its ``dataset`` mention; other events' apart, as in 6.
#: 8. A ``parent`` mention's ``detail`` names the jobs of the events that name that parent
#:    (:func:`child_entry`): the parent view finds a job's children without reading their runs.
#: 9. One ``parent`` mention per (child job, parent job), sourced by the child (``job``), not one
#:    per run: the parent view reads a fifth of the rows at the million (five runs a child).
DERIVATION_VERSION = 9

#: Marquez's source of a dataset entry without a ``dataSource`` facet (``DEFAULT_SOURCE_NAME``).
DEFAULT_SOURCE = "default"
#: The roles of a dataset's mentions that hold the statements of its run's START and end
#: events, or of its DatasetEvent (:mod:`~lineage_sdk.collector.engine.statements`).
STATING_ROLES: tuple[Role, ...] = ("input", "output", "dataset")
_STATING = frozenset(STATING_ROLES)


def source_key(dataset: Key, facets: Mapping[str, Any] | None) -> Key:
    """The SOURCE node of one dataset entry: ``(dataset namespace, JSON [dataset name, source
    name, URI])``; the source is the ``dataSource`` facet's (its URI "" when it has none), or
    :data:`DEFAULT_SOURCE` with URI "" when the entry has no facet with a name."""
    found = facets.get("dataSource") if facets else None
    name = found.get("name") if isinstance(found, Mapping) else None
    if not isinstance(name, str) or not name:
        return (dataset[0], dumps_exact([dataset[1], DEFAULT_SOURCE, ""]).decode())
    uri = found.get("uri") if isinstance(found, Mapping) else None
    return (
        dataset[0],
        dumps_exact([dataset[1], name, uri if isinstance(uri, str) else ""]).decode(),
    )


def source_of_key(key: Key) -> tuple[Key, str, str]:
    """A SOURCE node's key read back: (the dataset, the source name, its URI)."""
    name, source, uri = loads_exact(key[1])
    return (key[0], str(name)), str(source), str(uri)


def event_sources(record: LineageRecord) -> set[Key]:
    """The SOURCE nodes an event names (what its deletion touches)."""
    return {source_key((r.namespace, r.name), r.facets) for r in (*record.inputs, *record.outputs)}


def alias_key(alias: Key, node: Key) -> Key:
    """The ALIAS node of ``alias``, a name of the dataset ``node``: ``(alias namespace, JSON
    [alias name, node namespace, node name])``."""
    return (alias[0], dumps_exact([alias[1], *node]).decode())


def alias_of_key(key: Key) -> tuple[Key, Key]:
    """An ALIAS node's key read back: (the alias, the dataset)."""
    name, namespace, node = loads_exact(key[1])
    return (key[0], str(name)), (str(namespace), str(node))


def event_alias_keys(record: LineageRecord) -> set[Key]:
    """The ALIAS nodes an event names (what its deletion touches)."""
    return {alias_key(alias, node) for alias, node in _aliases(record).items()}


def child_entry(job: Key) -> str:
    """A ``parent`` mention's source id: the child job whose events name that parent."""
    return dumps_exact(list(job)).decode()


def child_of(mention: MentionRow) -> Key:
    """The child job of a ``parent`` mention sourced ``job`` (:func:`child_entry`)."""
    namespace, name = loads_exact(mention.source_id)
    return (str(namespace), str(name))


def children_of(mentions: Iterable[MentionRow]) -> set[Key]:
    """The child jobs ``parent`` mentions name (a run's or an event's, without a job: none)."""
    return {child_of(m) for m in mentions if m.source == "job"}


def _pair_mention(child: Key, parent: Key, first_seen: datetime) -> MentionRow:
    """The ``parent`` mention of ``parent`` by ``child``, the one place its key is written."""
    return MentionRow("job", child_entry(child), "JOB", parent, "parent", first_seen)


def event_json(event: Mapping[str, Any]) -> str:
    """The event as one line of JSON text, exactly as received (integers beyond 64 bits too)."""
    return dumps_exact(event).decode()


def record_of(row: EventRow) -> LineageRecord:
    """A stored event read back as the record the collector made of it."""
    return build_record(loads_exact(row.json), event_id=row.event_id)


def run_rank(event_type: str | None, event_time: datetime, event_id: str) -> Ranked:
    """The :class:`Ranked` state of one run event: the greatest rank is the run's state (rank 0,
    no state, for events that change none: they still date the run)."""
    key = state_key(event_type, event_time, event_id)
    if key is None:
        return Ranked(f"0|{format_time(event_time)}||{event_id}", None)
    return Ranked(state_rank(key), key[2])


#: What an event names: a node's kind and key, and the role of the event's mention of it (None:
#: a node no mention of the run or event holds, as the event's own job, its parent job (the
#: child's ``job`` mention holds it), a SOURCE or an ALIAS node).
_Named = tuple[NodeKind, Key, Role | None]
#: What :meth:`_Keyed.add` tells :func:`derive` of one event: its job, what it names, its aliases.
_Naming = tuple[Key | None, list[_Named], Mapping[Key, Key]]


class _Keyed:
    """The rows of keys (nodes, job <-> dataset edges, column edges) of events, joined: the one
    place an event's keys are named, for :func:`derive` and :func:`derive_keyed` alike (written
    out, no generator per edge: this is the collector's hot path, see :func:`derive`)."""

    __slots__ = ("columns", "edges", "nodes", "parents")

    def __init__(self) -> None:
        self.nodes: dict[tuple[NodeKind, Key], list[datetime]] = {}
        self.edges: dict[tuple[Key, Key, Io], list[datetime | None]] = {}
        self.columns: dict[tuple[FieldRef, FieldRef, Key | None], list[Any]] = {}
        #: (child job, parent job): the least time of the child's events naming the parent.
        self.parents: dict[tuple[Key, Key], datetime] = {}

    def add(self, rec: LineageRecord) -> _Naming:
        """Join one event's rows of keys; what it names, for its mentions (see the module)."""
        at, eid, edges, columns = rec.event_time, rec.event_id, self.edges, self.columns
        job: Key | None = None
        if rec.job_namespace is not None and rec.job_name is not None:
            job = (rec.job_namespace, rec.job_name)
        named: list[_Named] = []
        if job is not None:
            named.append(("JOB", job, None))  # a node, found by events(jobs=...): no mention
        if rec.parent_job_namespace and rec.parent_job_name:
            parent = (rec.parent_job_namespace, rec.parent_job_name)
            if job is None:  # no child: the run's or event's mention dates the parent
                named.append(("JOB", parent, "parent"))
            else:
                named.append(("JOB", parent, None))
                pair = (job, parent)
                least = self.parents.get(pair)
                if least is None or at < least:
                    self.parents[pair] = at
        declared = at if rec.kind == "job" else None
        ios: tuple[tuple[tuple[DatasetRef, ...], Io], ...] = (
            (rec.inputs, "in"),
            (rec.outputs, "out"),
        )
        for refs, io in ios:
            for ref in refs:
                dataset = (ref.namespace, ref.name)
                named.append(("SOURCE", source_key(dataset, ref.facets), None))
                if rec.kind == "dataset":
                    named.append(("DATASET", dataset, "dataset"))
                    continue
                named.append(("DATASET", dataset, "input" if io == "in" else "output"))
                if job is not None:
                    _join_edge(edges, (job, dataset, io), at, declared)
        facet = facet_lineage(rec)
        if facet is not None:  # declared edges, the nodes they name, column edges
            for edge in facet.edges:
                _join_edge(edges, edge, at, at)
            named.extend(facet.named(job))
            rank = edge_rank(at, eid)
            for stated, info in facet.columns.items():
                _join_column(columns, stated, at, rank, info)
        aliases = _aliases(rec)
        named.extend(("ALIAS", alias_key(alias, node), None) for alias, node in aliases.items())
        nodes = self.nodes
        for kind, key, _ in named:
            seen = nodes.get((kind, key))
            if seen is None:
                nodes[(kind, key)] = [at, at]
            elif at < seen[0]:
                seen[0] = at
            elif at > seen[1]:
                seen[1] = at
        stated_columns = column_edges(rec)
        if stated_columns:
            rank = edge_rank(at, eid)
            for (out, src), info in stated_columns.items():
                _join_column(columns, (out, src, job), at, rank, info)
        return job, named, aliases

    def rows(
        self,
        events: tuple[EventRow, ...] = (),
        runs: tuple[RunRow, ...] = (),
        mentions: tuple[MentionRow, ...] = (),
    ) -> Rows:
        return Rows(
            events=events,
            edges=tuple(
                EdgeRow(job, dataset, io, first, declared)  # type: ignore[arg-type]
                for (job, dataset, io), (first, declared) in self.edges.items()
            ),
            runs=runs,
            columns=tuple(
                ColumnEdgeRow(out, src, job, first, info)
                for (out, src, job), (first, info) in self.columns.items()
            ),
            nodes=tuple(
                NodeRow(kind, key, first, last, frozenset())
                for (kind, key), (first, last) in self.nodes.items()
            ),
            mentions=(
                *mentions,
                *(_pair_mention(*pair, at) for pair, at in self.parents.items()),
            ),
        )


def derive_keyed(records: Iterable[LineageRecord]) -> Rows:
    """The rows of keys that ``records`` derive (nodes, edges, column edges, a parent's ``job``
    mentions), each what :func:`derive` gives it, by the same joins of the same keys, without
    the events, runs and other mentions and what those cost (the events' text, statements, run
    states): what a deletion needs of the events that remain, whose rows it derives again by
    key (a run's rows it derives whole, from the run's own events)."""
    keyed, seen = _Keyed(), set()
    for rec in records:
        if rec.event_id not in seen:
            seen.add(rec.event_id)
            keyed.add(rec)
    return keyed.rows()


#: A row of keys by its id (its type's name and :func:`~lineage_sdk.collector.backend.key_of`),
#: with its least times by field name (``first_seen``; an edge's ``declared`` too).
LeastTimes = tuple[tuple[str, tuple[Any, ...]], dict[str, datetime | None]]


def keyed_least(record: LineageRecord) -> list[LeastTimes]:
    """The least times of the rows of keys ``derive_keyed([record])`` gives, by row id, without
    making the rows: what a deletion's read ahead looks for (see
    :class:`~lineage_sdk.collector.engine.forget.ReadAhead`)."""
    keyed = _Keyed()
    keyed.add(record)
    out: list[LeastTimes] = [(("NodeRow", k), {"first_seen": t[0]}) for k, t in keyed.nodes.items()]
    for k, (first, declared) in keyed.edges.items():
        out.append((("EdgeRow", k), {"first_seen": first, "declared": declared}))
    out += [(("ColumnEdgeRow", k), {"first_seen": t[0]}) for k, t in keyed.columns.items()]
    for pair, at in keyed.parents.items():
        out.append((("MentionRow", key_of(_pair_mention(*pair, at))), {"first_seen": at}))
    return out


def derive(records: Iterable[LineageRecord]) -> Rows:
    """The rows of ``records`` (a redelivered event id counts once), each type joined by key, in
    no particular order (a backend whose writers take row locks sorts them itself: sorting
    200,000 column edges here cost a fifth of the derivation, and SQLite and the document
    backend need no order).

    The joins are written out per row type (the collector's hot path: a generic
    :func:`~lineage_sdk.collector.backend.merge` per row costs more than the old stores' whole
    write); ``tests/stores_nosql/test_derive_rows.py`` holds them equal to the generic rules."""
    events: dict[str, EventRow] = {}
    keyed = _Keyed()
    runs: dict[tuple[str, Key | None], list[Any]] = {}
    mentions: dict[tuple[str, str, NodeKind, Key, Role], datetime] = {}
    details: dict[tuple[str, str, NodeKind, Key, Role], set[str]] = {}
    for rec in records:
        eid = rec.event_id
        if eid in events:
            continue
        at, run_id = rec.event_time, rec.run_id
        job, named, aliases = keyed.add(rec)
        events[eid] = EventRow(
            eid,
            at,
            rec.kind,
            rec.event_type,
            run_id,
            job,
            rec.parent_run_id,
            event_namespace(rec.event),
            event_json(rec.event),
        )
        source, source_id = ("run", run_id) if run_id else ("event", eid)
        stating, of_job = statements_of(rec, aliases)
        # A run's START and end state in its mentions of the node; other run events apart.
        packed = not run_id or rec.event_type in PACKED_TYPES
        for kind, key, role in named:
            if role is not None:
                mention = (source, source_id, kind, key, role)
                first = mentions.get(mention)
                if first is None or at < first:
                    mentions[mention] = at
                if packed and role in _STATING and key in stating:
                    details.setdefault(mention, set()).add(stating[key])
        for key in aliases:
            mention = (source, source_id, "DATASET", key, "alias")
            first = mentions.get(mention)
            if first is None or at < first:
                mentions[mention] = at
        apart: list[tuple[NodeKind, Key, str]] = []
        if not packed:
            apart += [("DATASET", key, entry) for key, entry in stating.items()]
        if job is not None and of_job is not None:
            apart.append(("JOB", job, of_job))
        by = (source, source_id) if packed else ("event", eid)
        for kind, key, entry in apart:
            mention = (*by, kind, key, "stated")
            first = mentions.get(mention)
            if first is None or at < first:
                mentions[mention] = at
            details.setdefault(mention, set()).add(entry)
        if run_id:
            _join_run(runs, rec, job)
    return keyed.rows(
        events=tuple(events.values()),
        runs=tuple(RunRow(run_id, job, *values) for (run_id, job), values in runs.items()),
        mentions=tuple(
            MentionRow(*mention, first, _entries(details.get(mention)))  # type: ignore[arg-type]
            for mention, first in mentions.items()
        ),
    )


def _entries(entries: set[str] | None) -> frozenset[str] | None:
    return None if entries is None else frozenset(entries)


def _join_edge(
    edges: dict[tuple[Key, Key, Io], list[datetime | None]],
    key: tuple[Key, Key, Io],
    at: datetime,
    declared: datetime | None,
) -> None:
    """Join one statement of an edge: its first time and its first declaration."""
    edge = edges.get(key)
    if edge is None:
        edges[key] = [at, declared]
    else:
        edge[0] = _least(edge[0], at)
        edge[1] = _least(edge[1], declared)


def _join_column(
    columns: dict[tuple[FieldRef, FieldRef, Key | None], list[Any]],
    key: tuple[FieldRef, FieldRef, Key | None],
    at: datetime,
    rank: str,
    info: str,
) -> None:
    """Join one statement of a column edge: its first time and the latest statement's info."""
    column = columns.get(key)
    if column is None:
        columns[key] = [at, Ranked(rank, info)]
    else:
        column[0] = min(column[0], at)
        if rank > column[1].rank:
            column[1] = Ranked(rank, info)


_NO_ALIASES: Mapping[Key, Key] = {}


def _aliases(rec: LineageRecord) -> Mapping[Key, Key]:
    """The event's aliases, each with its dataset (see Aliases above); none without a symlink."""
    if not any("symlinks" in ref.facets for ref in (*rec.inputs, *rec.outputs)):
        return _NO_ALIASES
    return event_aliases(rec.event)


def _least(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None:
        return b
    return a if b is None or a <= b else b


def _join_run(
    runs: dict[tuple[str, Key | None], list[Any]], rec: LineageRecord, job: Key | None
) -> None:
    """Join one event into its run row (the fields of :class:`RunRow` after its key)."""
    at = rec.event_time
    state = run_state(rec.event_type)
    started = at if state == "START" else None
    ended = at if state in TERMINAL_STATES else None
    rank = run_rank(rec.event_type, at, rec.event_id)
    parent, root = rec.parent_run_id or None, rec.root_run_id or None
    beat = heartbeat_interval(rec.event)
    key = (rec.run_id or "", job)
    row = runs.get(key)
    if row is None:
        runs[key] = [at, at, rank, started, ended, parent, root, beat]
        return
    row[0] = min(row[0], at)
    row[1] = max(row[1], at)
    if rank.rank > row[2].rank:
        row[2] = rank
    row[3] = _least(row[3], started)
    if ended is not None and (row[4] is None or ended > row[4]):
        row[4] = ended
    for i, link in ((5, parent), (6, root)):
        if link is not None and (row[i] is None or link < row[i]):
            row[i] = link
    if beat is not None and (row[7] is None or beat > row[7]):
        row[7] = beat
