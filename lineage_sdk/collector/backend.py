"""The backend contract: rows the engine derives, and the narrow questions a backend answers.

A backend stores and indexes rows; it knows nothing of OpenLineage. The engine
(:mod:`lineage_sdk.collector.engine`) derives the rows of each event once and answers every read
from these twelve methods, so a new store costs one small class, and every store gives the
same answers by construction (``tests/backends`` holds them to it).

Each derived row type names how two rows with one key merge, in its fields' metadata: ``key``
fields identify the row, ``min``/``max`` keep the least/greatest value (None is no value),
``union`` joins sets, and ``ranked`` keeps the :class:`Ranked` of the greater rank. All of them
are lattice joins, so appends in any order, redeliveries, and a fleet of collectors writing at
once converge on one answer. :func:`merge` applies the rules; a database backend writes the
same rules as one upsert (``ON CONFLICT`` with ``LEAST``/``GREATEST``, ``$min``/``$max``).

The promises every backend keeps (the conformance suite checks them):

* **Time.** Aware UTC datetimes, exact to the microsecond. ``since`` is inclusive and ``until``
  exclusive, always. On derived rows, ``until`` bounds ``first_seen`` (runs: ``first_event``).
* **Filters.** A filter left at None does not filter; an empty collection matches nothing.
  Filters given together must all hold.
* **Order.** ``events`` come by :data:`Position`; ``descending`` sorts by time descending, ties
  still by event id ascending, and ``after`` (exclusive) keeps what follows the position in the
  order asked, so paging loses nothing at equal times. ``nodes`` come by (namespace, name);
  ``runs`` by ``(coalesce(started_at, first_event) desc, run_id, job)``, a None job last.
  ``edges``, ``column_edges`` and ``mentions`` answer sets: their order is free.
* **Pages.** ``limit=None`` is everything and ``limit=0`` nothing; ``count=True`` fills
  :attr:`Page.total` with the size of the whole answer (otherwise ``total`` is the page's
  length), so ``limit=0, count=True`` counts.
* **Writes.** ``append`` is idempotent per event id and merges derived rows by their rules; it
  writes an event's row no later than its derived rows. ``delete`` removes events and the
  mentions they are the source of (:class:`MentionRow`) and returns the removed events.
  ``replace`` removes the derived rows of the touched keys and writes the given ones in their
  place. It need not be atomic against ``append``: the engine reads the touched keys' events
  again afterwards and appends the rows of any it did not derive
  (:mod:`lineage_sdk.collector.engine.forget`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from itertools import islice
from typing import (
    Any,
    Literal,
    Protocol,
    TypeVar,
    dataclass_transform,
    overload,
    runtime_checkable,
)

from lineage_sdk.collector.store import EventKind, FieldRef, Page

__all__ = [
    "ColumnEdgeRow",
    "EdgeRow",
    "EventRow",
    "Io",
    "Key",
    "LineageBackend",
    "MentionRow",
    "NodeKind",
    "NodeRow",
    "Position",
    "Provisioned",
    "Ranked",
    "Role",
    "Rows",
    "RunRow",
    "Touched",
    "check_window",
    "event_filter",
    "follows",
    "job_order",
    "key_of",
    "latest_of",
    "merge",
    "page_of",
    "sort_runs",
]

#: A job's or dataset's (namespace, name), canonical (symlinked names resolved).
Key = tuple[str, str]
#: ``in``: the job reads the dataset; ``out``: it writes it.
Io = Literal["in", "out"]
#: (event time, event id): the one order of events, and a resumable position in it.
Position = tuple[datetime, str]
#: ``SOURCE``: a data source (the ``dataSource`` dataset facet) as one dataset names it, keyed
#: ``(the dataset's namespace, source_name(...))`` (:mod:`lineage_sdk.collector.engine.derive`).
#: ``ALIAS``: a name an event gives a symlinked dataset besides its canonical one, keyed ``(the
#: name's namespace, alias_key(...))``, what search finds a dataset by any of its names with.
NodeKind = Literal["JOB", "DATASET", "NAMESPACE", "SOURCE", "ALIAS"]
#: How an event names a node besides as its own job (which ``events(jobs=...)`` finds): its
#: parent job (``parent``), a dataset it reads (``input``) or writes (``output``), or the dataset
#: a DatasetEvent is about (``dataset``); a job its ``lineage`` facet says reads (``input``) or
#: writes (``output``) a dataset; or a name it gives a symlinked dataset besides its canonical
#: one (``alias``, keyed by that name, which no node has); or what an event states of a dataset
#: it names (``stated``, one per event: :mod:`lineage_sdk.collector.engine.statements`).
Role = Literal["input", "output", "dataset", "parent", "alias", "stated"]

MergeRule = Literal["key", "min", "max", "union", "ranked", "first"]


_KEY: dict[str, MergeRule] = {"merge": "key"}
_FIRST: dict[str, MergeRule] = {"merge": "first"}
_MIN: dict[str, MergeRule] = {"merge": "min"}
_MAX: dict[str, MergeRule] = {"merge": "max"}
_UNION: dict[str, MergeRule] = {"merge": "union"}
_RANKED: dict[str, MergeRule] = {"merge": "ranked"}

_C = TypeVar("_C", bound=type)


@overload
def _row(cls: _C, /) -> _C: ...
@overload
def _row(*, order: bool = False) -> Callable[[_C], _C]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def _row(cls: _C | None = None, /, *, order: bool = False) -> _C | Callable[[_C], _C]:
    """A row type: a value, frozen to the type checker, but not at run time. A frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``, about 3.5x the
    cost of a plain one (2.3 against 0.63 µs for five fields, measured on this machine), and
    rows are made by the hundred thousand: 20 an event on the write path, thousands a walk."""

    def make(c: _C) -> _C:
        return dataclass(slots=True, unsafe_hash=True, order=order)(c)  # type: ignore[return-value]

    return make if cls is None else make(cls)


@_row(order=True)
class Ranked:
    """A value that the greater ``rank`` wins (text ranks sort like what they encode:
    :func:`~lineage_sdk.collector.records.state_rank`,
    :func:`~lineage_sdk.collector.columns.edge_rank`)."""

    rank: str
    value: str | None


@_row
class EventRow:
    """One stored event as received (``json``), with what reads select it by. ``namespace`` is
    the filing namespace (its job's, or a DatasetEvent's dataset's)."""

    event_id: str = field(metadata=_KEY)
    event_time: datetime = field(metadata=_FIRST)
    kind: EventKind = field(metadata=_FIRST)
    event_type: str | None = field(metadata=_FIRST)
    run_id: str | None = field(metadata=_FIRST)
    job: Key | None = field(metadata=_FIRST)
    parent_run_id: str | None = field(metadata=_FIRST)
    namespace: str | None = field(metadata=_FIRST)
    json: str = field(metadata=_FIRST)

    @property
    def position(self) -> Position:
        return (self.event_time, self.event_id)


@_row
class EdgeRow:
    """A job reads (``in``) or writes (``out``) a dataset: first stated at ``first_seen``, and
    declared by a JobEvent first at ``declared`` (None: only observed)."""

    job: Key = field(metadata=_KEY)
    dataset: Key = field(metadata=_KEY)
    io: Io = field(metadata=_KEY)
    first_seen: datetime = field(metadata=_MIN)
    declared: datetime | None = field(metadata=_MIN)


@_row
class RunRow:
    """A run as the events of one job name it (a run id reused by two jobs has two rows).

    ``state`` is the winning state's rank (:func:`~lineage_sdk.collector.records.state_rank`,
    rank 0 when no event states one) with the state's name as its value."""

    run_id: str = field(metadata=_KEY)
    job: Key | None = field(metadata=_KEY)
    first_event: datetime = field(metadata=_MIN)
    last_event: datetime = field(metadata=_MAX)
    state: Ranked = field(metadata=_RANKED)
    started_at: datetime | None = field(metadata=_MIN)
    ended_at: datetime | None = field(metadata=_MAX)
    parent_run_id: str | None = field(metadata=_MIN)
    root_run_id: str | None = field(metadata=_MIN)
    heartbeat_s: float | None = field(metadata=_MAX)


@_row
class ColumnEdgeRow:
    """An output field derives from an input field, as stated by ``job``'s events (None: by a
    DatasetEvent); ``info`` the canonical JSON of the latest statement."""

    output: FieldRef = field(metadata=_KEY)
    input: FieldRef = field(metadata=_KEY)
    job: Key | None = field(metadata=_KEY)
    first_seen: datetime = field(metadata=_MIN)
    info: Ranked = field(metadata=_RANKED)


@_row
class NodeRow:
    """A job, a dataset or a dataset's source some event names (a namespace in answers of
    ``nodes("NAMESPACE")``, keyed ``(namespace, "")``, with the kinds of nodes it ``holds``:
    JOB and DATASET only)."""

    kind: NodeKind = field(metadata=_KEY)
    key: Key = field(metadata=_KEY)
    first_seen: datetime = field(metadata=_MIN)
    last_seen: datetime = field(metadata=_MAX)
    holds: frozenset[NodeKind] = field(metadata=_UNION)


@_row
class MentionRow:
    """A run naming a node in a role, first at ``first_seen`` (``source`` ``run``: the run id);
    or an event without a run (a JobEvent or DatasetEvent) naming it (``source`` ``event``: the
    event id); or, in role ``parent``, a job whose events name that parent (``source`` ``job``:
    the child job, :func:`~lineage_sdk.collector.engine.derive.child_entry`), one row per
    (child, parent), not per run. What a node's runs, its static events and a deletion read:
    one row per run, not per event, as a run's events name the same datasets again and again.
    ``detail`` holds what events state of the node (:mod:`lineage_sdk.collector.engine.
    statements`): a run's START and end in its mentions of a dataset, other events in role
    ``stated``. To a backend it is a set of texts, whatever it holds.

    A run's mentions are derived rows (``replace`` renews them with the run's), and so are a
    parent's ``job`` mentions (renewed with the parent's key); an event's are the event's own
    and go with it (``delete``)."""

    source: Literal["run", "event", "job"] = field(metadata=_KEY)
    source_id: str = field(metadata=_KEY)
    kind: NodeKind = field(metadata=_KEY)
    key: Key = field(metadata=_KEY)
    role: Role = field(metadata=_KEY)
    first_seen: datetime = field(metadata=_MIN)
    #: The statements this mention holds, each encoded by the engine as one line of text
    #: (None when it holds none).
    detail: frozenset[str] | None = field(default=None, metadata=_UNION)

    @property
    def run_id(self) -> str | None:
        return self.source_id if self.source == "run" else None

    @property
    def event_id(self) -> str | None:
        return self.source_id if self.source == "event" else None


@dataclass(frozen=True, slots=True)
class Rows:
    """What the engine derives from a batch of events, or again for touched keys."""

    events: tuple[EventRow, ...] = ()
    edges: tuple[EdgeRow, ...] = ()
    runs: tuple[RunRow, ...] = ()
    columns: tuple[ColumnEdgeRow, ...] = ()
    nodes: tuple[NodeRow, ...] = ()
    mentions: tuple[MentionRow, ...] = ()


@dataclass(frozen=True, slots=True)
class Touched:
    """The keys whose derived rows a deletion changes: ``replace`` removes the edges and column
    edges of ``jobs``, the ``job`` mentions of ``jobs`` as parents (:class:`MentionRow`), the
    runs and run mentions of ``runs``, the nodes of ``jobs`` and ``datasets``, the SOURCE nodes
    of ``sources``, the ALIAS nodes of ``aliases``, and the column edges without a job whose
    output lies in ``datasets``. With ``every``, it removes every derived row and every mention
    (the engine derives the whole store again:
    :attr:`~lineage_sdk.collector.engine.derive.DERIVATION_VERSION`)."""

    jobs: frozenset[Key] = frozenset()
    datasets: frozenset[Key] = frozenset()
    runs: frozenset[str] = frozenset()
    every: bool = False
    sources: frozenset[Key] = frozenset()
    aliases: frozenset[Key] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.every or self.runs or any(keys for _, keys in self.nodes))

    @property
    def nodes(self) -> tuple[tuple[NodeKind, frozenset[Key]], ...]:
        """The nodes ``replace`` removes, by kind (one list for every backend)."""
        return (
            ("JOB", self.jobs),
            ("DATASET", self.datasets),
            ("SOURCE", self.sources),
            ("ALIAS", self.aliases),
        )


_R = TypeVar("_R")


_RULES: dict[type, tuple[tuple[str, MergeRule], ...]] = {}


def _rules(cls: type) -> tuple[tuple[str, MergeRule], ...]:
    """Each field's merge rule, read once per row type."""
    found = _RULES.get(cls)
    if found is None:
        found = _RULES[cls] = tuple((f.name, f.metadata.get("merge", "first")) for f in fields(cls))
    return found


def key_of(row: Any) -> tuple[Any, ...]:
    """The identity of a row: its ``key`` fields, in order."""
    return tuple(getattr(row, name) for name, rule in _rules(type(row)) if rule == "key")


def _join(rule: MergeRule, a: Any, b: Any) -> Any:
    if rule == "first":  # as first written, None included: a redelivery changes nothing
        return a
    if a is None:
        return b
    if b is None:
        return a
    if rule == "min":
        return min(a, b)
    if rule == "max":
        return max(a, b)
    if rule == "union":
        return a | b
    if rule == "ranked":
        return b if b.rank > a.rank else a
    return a


def merge(old: _R, new: _R) -> _R:
    """``old`` and ``new`` (one key) joined by their fields' merge rules; ``old`` itself when
    nothing changes, so a backend can tell a redelivery from news."""
    changes: dict[str, Any] = {}
    for name, rule in _rules(type(old)):
        if rule == "key":
            continue
        a, b = getattr(old, name), getattr(new, name)
        joined = _join(rule, a, b)
        if joined is not a:
            changes[name] = joined
    return replace(old, **changes) if changes else old  # type: ignore[type-var]


# -- the contract's orders, once: every backend that sorts or pages in Python uses these ---------


def check_window(limit: int | None, offset: int) -> None:
    """ValueError unless ``limit`` (None: all) and ``offset`` are not negative."""
    if offset < 0 or (limit is not None and limit < 0):
        raise ValueError(f"limit {limit!r} and offset {offset!r} must not be negative")


def page_of(items: Iterable[_R], limit: int | None, offset: int, count: bool) -> Page[_R]:
    """One page of ``items`` (already in the answer's order), counted when asked."""
    check_window(limit, offset)
    stop = None if limit is None else offset + limit
    if count:
        every = list(items)
        return Page(every[offset:stop], len(every))
    return Page(islice(items, offset, stop))


def job_order(job: Key | None) -> tuple[bool, Key]:
    """A row's job as it sorts: None after every job."""
    return (job is None, job or ("", ""))


def sort_runs(rows: list[RunRow]) -> None:
    """Sort by ``(coalesce(started_at, first_event) desc, run_id, job)``, in place (two stable
    sorts, as a datetime has no negation)."""
    rows.sort(key=lambda r: (r.run_id, job_order(r.job)))
    rows.sort(key=lambda r: r.first_event if r.started_at is None else r.started_at, reverse=True)


def follows(row: EventRow, after: Position, descending: bool) -> bool:
    """Whether ``row`` follows the position ``after`` in the order asked (see Order above)."""
    if not descending:
        return row.position > after
    return row.event_time < after[0] or (row.event_time == after[0] and row.event_id > after[1])


def event_filter(
    *,
    ids: Collection[str] | None = None,
    run_ids: Collection[str] | None = None,
    jobs: Collection[Key] | None = None,
    kinds: Collection[EventKind] | None = None,
    namespace: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    after: Position | None = None,
    descending: bool = False,
) -> Callable[[EventRow], bool]:
    """``events``' filters as one test of a row, for a backend that checks rows in Python (a
    filter it answered from an index may be left out)."""
    id_set = None if ids is None else set(ids)
    run_set = None if run_ids is None else set(run_ids)
    job_set = None if jobs is None else set(jobs)
    kind_set = None if kinds is None else frozenset(kinds)

    def wanted(row: EventRow) -> bool:
        return (
            (kind_set is None or row.kind in kind_set)
            and (namespace is None or row.namespace == namespace)
            and (since is None or row.event_time >= since)
            and (until is None or row.event_time < until)
            and (after is None or follows(row, after, descending))
            and (id_set is None or row.event_id in id_set)
            and (run_set is None or row.run_id in run_set)
            and (job_set is None or row.job in job_set)
        )

    return wanted


def latest_of(rows: Iterable[RunRow], until: datetime | None, latest: int) -> list[RunRow]:
    """``runs(latest=...)`` over candidate rows: per job the ``latest`` runs of the greatest last
    event (ties: least run id), before ``until`` when given, plus the runs spanning ``until``."""
    per_job: dict[Key | None, list[RunRow]] = {}
    answer: list[RunRow] = []
    for row in rows:
        if until is None or row.last_event < until:
            per_job.setdefault(row.job, []).append(row)
        elif row.first_event < until:
            answer.append(row)
    for group in per_job.values():
        group.sort(key=lambda r: r.run_id)
        group.sort(key=lambda r: r.last_event, reverse=True)
        answer.extend(group[:latest])
    return answer


@runtime_checkable
class LineageBackend(Protocol):
    """Where the engine keeps rows: twelve methods, and no other read.

    Write-only stores (logging, OpenLineage HTTP) are no backend: they keep the four-method
    :class:`~lineage_sdk.collector.store.LineageStoreProtocol`.
    """

    name: str
    #: Where the backend keeps its rows, password hidden (``lineage-collector check`` shows it).
    address: str

    def open(self) -> None:
        """Connect and create what the rows need; safe on every start."""

    def check(self) -> None:
        """Raise StoreError when the backend cannot be reached."""

    def close(self) -> None:
        """Release connections; called once."""

    def append(self, rows: Rows) -> None:
        """Write new events with their rows; derived rows merge by their rules."""

    def edges(
        self,
        end: Literal["JOB", "DATASET"],
        keys: Collection[Key],
        io: Io,
        *,
        until: datetime | None = None,
    ) -> Iterable[EdgeRow]:
        """The edges of direction ``io`` whose ``end`` (the job or the dataset) is in ``keys``."""

    def nodes(
        self,
        kind: NodeKind,
        *,
        keys: Collection[Key] | None = None,
        namespace: str | None = None,
        text: str | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        offset: int = 0,
        count: bool = False,
    ) -> Page[NodeRow]:
        """Nodes by key, by namespace, or whose name holds ``text`` (any case); ``NAMESPACE``
        answers one row per namespace that holds a job or a dataset."""

    def runs(
        self,
        *,
        jobs: Collection[Key] | None = None,
        run_ids: Collection[str] | None = None,
        parent: str | None = None,
        until: datetime | None = None,
        latest: int | None = None,
        limit: int | None = None,
        offset: int = 0,
        count: bool = False,
    ) -> Page[RunRow]:
        """Run rows by job, by id, or by parent run. With ``latest=k``: per job, the ``k`` runs
        of the greatest ``last_event`` (ties: least run id); with ``until`` as well, those among
        the runs that ended their events before it, plus every run spanning it
        (``first_event < until <= last_event``), whose events the engine folds."""

    def events(
        self,
        *,
        ids: Collection[str] | None = None,
        run_ids: Collection[str] | None = None,
        jobs: Collection[Key] | None = None,
        kinds: Collection[EventKind] | None = None,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: Position | None = None,
        descending: bool = False,
        limit: int | None = None,
        offset: int = 0,
        count: bool = False,
    ) -> Page[EventRow]:
        """Stored events by id, run, job (its own job), kind, filing namespace or time."""

    def mentions(
        self,
        kind: NodeKind,
        keys: Collection[Key],
        *,
        roles: Collection[Role] | None = None,
        until: datetime | None = None,
        stated: bool = False,
    ) -> Iterable[MentionRow]:
        """The mentions of these nodes (``until`` bounds ``first_seen``); with ``stated``, only
        those holding statements (a ``detail``), which a node's reads fold."""

    def column_edges(
        self,
        *,
        outputs: Collection[FieldRef] | None = None,
        inputs: Collection[FieldRef] | None = None,
        datasets: Collection[Key] | None = None,
        until: datetime | None = None,
    ) -> Iterable[ColumnEdgeRow]:
        """Column edges by output field, input field, or a dataset on either side."""

    def delete(self, event_ids: Sequence[str]) -> list[EventRow]:
        """Remove these events (absent ones are ignored) and the mentions whose source they are;
        the removed events, by position."""

    def replace(self, touched: Touched, rows: Rows) -> None:
        """Remove the derived rows of ``touched`` and write ``rows`` in their place (not atomic
        against ``append``: see Writes above)."""


@runtime_checkable
class Provisioned(Protocol):
    """A backend whose ``open`` creates a schema (tables, collections, indexes, constraints) can
    say what it would create without creating it, for ``lineage-collector check``, and keeps
    the version of the rules its derived rows were made by, so that rows a release derived by
    older rules are derived again; a backend without one (memory) keeps nothing across opens.
    """

    def missing(self) -> list[str]:
        """What ``open`` would create or copy, found without changing anything; raises
        StoreError when the server cannot be reached."""

    def derivation(self) -> int | None:
        """The version of the rules the stored derived rows were made by, as last marked (None:
        never marked); the backend must be open."""

    def mark_derivation(self, version: int) -> None:
        """Record ``version`` as the rules the derived rows are made by (0: being made again)."""
