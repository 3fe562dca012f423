"""Access by namespace: API keys, their hashes, and what each key may write and read, decided
here and nowhere else.

A key is a random token (:func:`new_key`: 32 random bytes, URL-safe, behind an ``lsk_`` prefix
that secret scanners can match). The configuration holds only its SHA-256
(:func:`hash_key`: ``sha256:<hex>``): a fast hash is the right tool for a high-entropy random
token (as GitHub and Stripe store theirs), since nobody can guess 256 random bits however fast
they hash, while a slow password hash would cost every request. A presented key is hashed and
compared with every configured hash by :func:`hmac.compare_digest`, all of them each time, so
the time taken tells neither how much of a hash matched nor which key did. Keys are never
logged: nothing here formats a presented key, and a key's *name* is what errors mention.

Each key holds a :class:`Grant`: the namespaces it may write and read.

* **Writes** (:func:`write_refusal`): every namespace an event names as a target needs the
  key's write grant: the job's (a RunEvent's, a JobEvent's, and any job a DatasetEvent names), a
  DatasetEvent's dataset's, and each output's that some configured key *owns* (has in its write
  grant; a key writing every namespace owns none). Outputs in a namespace nobody owns (a shared
  database) are open to any key that may write the job. Inputs are read, not written.
* **Reads** (:func:`visible`): a key sees the events filed under a readable namespace (a job's,
  a DatasetEvent's dataset's) and nothing else, as if the others had never been recorded; every
  read asks the engine through the key's :class:`Sight`, so a hidden thing answers as an
  unknown one. Lists hold readable namespaces only; a lineage graph is pruned by
  :func:`prune_graph` (nothing reached *through* a hidden node) before it is cut at its node
  limit (:func:`visible_cut`), and :func:`scrub` drops what an answer still names of a hidden
  namespace. A key sees a symlinked dataset under the names its namespaces hold: the events a
  sight hands out leave out symlink identifiers of hidden namespaces (:func:`as_seen`), and a
  readable alias of a hidden dataset answers as that alias (docs/api.md, "Every name of a
  dataset").
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from lineage_sdk.collector.api.history import of_dataset
from lineage_sdk.collector.backend import Io, Key, Position
from lineage_sdk.collector.columns import parse_column_node
from lineage_sdk.collector.engine import Engine
from lineage_sdk.collector.engine.lineage_facet import facet_lineage
from lineage_sdk.collector.engine.reads import NodeFacts, SourceUse, as_of_before, until_of
from lineage_sdk.collector.engine.views import ALWAYS, Readable, ViewGraph, Window
from lineage_sdk.collector.namespaces import NamespaceScope
from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.settings import ApiKeyConfig
from lineage_sdk.collector.store import (
    ColumnGraph,
    Direction,
    FieldRef,
    Granularity,
    JobSummary,
    LineageEdge,
    LineageGraph,
    LineageNode,
    LineageRecord,
    NodeType,
    Page,
    RawEvent,
    RunSummary,
    check_page,
    node_id,
    parse_node_id,
    unknown_as_of,
    walk_directions,
)
from lineage_sdk.exceptions import ConfigError, InvalidEventError
from lineage_sdk.models.json_exact import dumps_exact, loads_exact
from lineage_sdk.models.run_state import (
    fold_states,
    heartbeat_interval,
    pick_interval,
    pick_link,
)

__all__ = [
    "FILTERED",
    "KEY_PREFIX",
    "LEGACY_KEY_NAME",
    "OPEN",
    "PASS_THROUGH",
    "AccessPolicy",
    "ClosedAttribute",
    "Grant",
    "NamespaceScope",
    "Sight",
    "as_seen",
    "filing_namespace",
    "hash_key",
    "new_key",
    "prune_answer",
    "prune_columns",
    "prune_graph",
    "scrub",
    "visible",
    "visible_cut",
    "write_refusal",
]

_T = TypeVar("_T")

#: Events read a batch while looking for the first later one a key reads (most often the first).
_FIRST_LATER_BATCH = 100

KEY_PREFIX = "lsk_"
#: The name the single ``api.api_key`` answers to in messages.
LEGACY_KEY_NAME = "api_key"


def new_key() -> str:
    """A fresh API key: ``lsk_`` and 32 random bytes, URL-safe base64 (43 characters)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """How a key is written in the configuration: ``sha256:`` and its SHA-256 in hex (the same
    digest a presented key is compared by)."""
    return "sha256:" + _digest(key).hex()


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


ALL = NamespaceScope(["*"])
NONE = NamespaceScope([])


@dataclass(frozen=True, slots=True)
class Grant:
    """What one request may do. ``name`` is the key's name (None: no key was needed).
    ``owned``: the namespaces some configured key has in its write grant (an output there needs
    this key's write grant too)."""

    name: str | None
    write: NamespaceScope
    read: NamespaceScope
    owned: NamespaceScope = field(default=NONE)

    @property
    def reads_all(self) -> bool:
        return self.read.everything

    def may_read(self, namespace: str) -> bool:
        return self.read.allows(namespace)

    def may_write(self, namespace: str) -> bool:
        return self.write.allows(namespace)


#: No key configured (or reads left open): everything.
OPEN = Grant(None, ALL, ALL)


@dataclass(frozen=True, slots=True)
class _Key:
    digest: bytes
    grant: Grant


class AccessPolicy:
    """The configured keys. ``api_key`` (the single key of old) may write and read everything;
    ``keys`` are the named keys of ``[lineage.api.keys.NAME]``.

    ``protect_reads``: None means "yes when named keys are configured"; False with named keys is
    a :class:`ConfigError` (anonymous reads would bypass the keys' read scopes).
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        keys: Mapping[str, ApiKeyConfig] | None = None,
        protect_reads: bool | None = None,
    ) -> None:
        keys = dict(keys or {})
        if protect_reads is False and keys:
            raise ConfigError(
                "lineage.api.protect_reads",
                False,
                "must be true or unset when [lineage.api.keys.*] are configured: their read "
                "scopes would not apply to anonymous reads",
            )
        self.protect_reads = bool(keys) if protect_reads is None else protect_reads
        self._keys: list[_Key] = []
        owners: dict[bytes, str] = {}
        if api_key:
            digest = _digest(api_key)
            owners[digest] = LEGACY_KEY_NAME
            self._keys.append(_Key(digest, Grant(LEGACY_KEY_NAME, ALL, ALL)))
        # A namespace is owned when a named key's write grant lists it; a key writing every
        # namespace (``*``) owns none, or no namespace would be left shared.
        owned = NamespaceScope(
            p for config in keys.values() if "*" not in config.write for p in config.write
        )
        for name, config in sorted(keys.items()):
            digest = bytes.fromhex(config.key_hash.removeprefix("sha256:"))
            if digest in owners:
                raise ConfigError(
                    f"lineage.api.keys.{name}.key_hash",
                    "***",
                    f"must differ from the hash of {owners[digest]}: one key, one grant",
                )
            owners[digest] = name
            grant = Grant(name, NamespaceScope(config.write), NamespaceScope(config.read), owned)
            self._keys.append(_Key(digest, grant))

    @property
    def configured(self) -> bool:
        """Whether any key is configured (ingest then needs one)."""
        return bool(self._keys)

    @property
    def named(self) -> bool:
        return any(k.grant.name != LEGACY_KEY_NAME for k in self._keys)

    def authenticate(self, presented: str) -> Grant | None:
        """The grant of the key presented, or None. Compares with every key in constant time."""
        digest = _digest(presented)
        found: Grant | None = None
        for key in self._keys:
            if hmac.compare_digest(digest, key.digest):
                found = key.grant
        return found


# ----------------------------------------------------------------------------------- writes


def write_refusal(record: LineageRecord, grant: Grant) -> str | None:
    """Why ``grant`` may not write ``record`` (None: it may), naming the first namespace it lacks.

    The targets: the job's namespace (a RunEvent's, a JobEvent's, and any job a DatasetEvent
    carries, which must not open another namespace to it), a DatasetEvent's dataset's (as sent
    and as its symlinks resolve it), and each output's, as sent and as resolved, where some
    key owns it (``grant.owned``), a ``lineage`` facet's written datasets among them. Inputs are
    not targets: reading a dataset changes nothing of it."""
    if grant.write.everything:
        return None
    for namespace in _write_targets(record, grant.owned):
        if not grant.may_write(namespace):
            return f"the API key {grant.name!r} may not write to namespace {namespace!r}"
    return None


def _write_targets(record: LineageRecord, owned: NamespaceScope) -> Iterator[str]:
    event = record.event
    job = _named_ref(event.get("job"))
    if isinstance(event.get("job"), Mapping):
        yield job if job is not None else str(event["job"].get("namespace") or "")
    sent = [event.get("dataset")] if record.kind == "dataset" else list(event.get("outputs") or ())
    outputs = [ns for ns in map(_named_ref, sent) if ns is not None]
    outputs += [ref.namespace for ref in record.outputs]
    facet = facet_lineage(record)  # a ``lineage`` facet's written datasets are outputs too
    outputs += [ds[0] for _, ds, io in facet.edges if io == "out"] if facet is not None else []
    for namespace in outputs:
        if record.kind == "dataset" or owned.allows(namespace):
            yield namespace


# ------------------------------------------------------------------------------------ reads


def filing_namespace(event: Mapping[str, Any]) -> str | None:
    """The namespace an event is filed under, by the spec's kinds: a RunEvent's and a JobEvent's
    job's, a DatasetEvent's dataset's (a job it also carries does not count)."""
    if isinstance(event.get("run"), Mapping):
        return _named_ref(event.get("job"))
    if isinstance(event.get("dataset"), Mapping):
        return _named_ref(event.get("dataset"))
    return _named_ref(event.get("job"))


def _named_ref(item: object) -> str | None:
    """The namespace of a ``{"namespace": ..., "name": ...}`` object (a job or dataset)."""
    if isinstance(item, Mapping):
        namespace, name = item.get("namespace"), item.get("name")
        if isinstance(namespace, str) and isinstance(name, str):
            return namespace
    return None


def _parent_namespaces(parent: Mapping[str, Any]) -> list[object]:
    found: list[object] = []
    for key in ("job", "root"):
        part = parent.get(key)
        if key == "root" and isinstance(part, Mapping):
            part = part.get("job")
        if isinstance(part, Mapping):
            found.append(part.get("namespace"))
    return found


def scrub(data: Any, grant: Grant) -> Any:
    """An answer as ``grant`` may see it, the safety net of every read.

    Every list item naming a job or dataset (``{"namespace": ..., "name": ...}``: an event's
    inputs and outputs, a job's, a column-lineage facet's ``inputFields``, a symlink's
    identifiers, a list of jobs or datasets) is dropped when its namespace is unreadable, and so
    is a ``parent`` facet whose parent or root job is. What the routes check themselves (a
    hidden root, a hidden run, a hidden namespace) they answer as "not recorded" before this.
    """
    if grant.reads_all:
        return data
    return _scrub(data, grant)


def _scrub(data: Any, grant: Grant) -> Any:
    if isinstance(data, list):
        kept = []
        for item in data:
            namespace = _named_ref(item)
            if namespace is not None and not grant.may_read(namespace):
                continue
            kept.append(_scrub(item, grant))
        return kept
    if isinstance(data, Mapping):
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key == "parent" and isinstance(value, Mapping):
                spaces = _parent_namespaces(value)
                if any(not (isinstance(ns, str) and grant.may_read(ns)) for ns in spaces):
                    continue
            out[key] = _scrub(value, grant)
        return out
    return data


def prune_graph(
    graph: LineageGraph,
    readable: Callable[[str], bool],
    *,
    direction: Direction,
    depth: int,
) -> LineageGraph:
    """The part of a store's lineage answer reachable from the root through readable nodes only,
    within ``depth`` job hops, walking each asked direction as the stores do.

    Filtering the answer's nodes would not be enough: a readable node reached only *through*
    a hidden one would stay, and show that something links them. So the walk is done again on
    the answer, from the root, never entering an unreadable node. Every node the store returned
    lies within ``depth`` of the root, so every readable path of that length is in the answer;
    a node met again by a longer, readable path is kept only if that path is within ``depth``.
    A graph cut at a node limit (``truncated``) is pruned alike: every kept node is connected to
    the root within the cut graph, so a readable node stays only if a readable path reaches it.
    """
    root = graph.nodes.get(graph.root)
    if root is None or not readable(root.namespace):
        return LineageGraph(root=graph.root)
    kept: set[str] = {graph.root}
    for upstream in walk_directions(direction):
        # 0-1 BFS: entering a job costs a hop, entering a dataset does not.
        hops: dict[str, int] = {graph.root: 0}
        queue: deque[str] = deque([graph.root])
        while queue:
            current = queue.popleft()
            node = graph.nodes[current]
            ends = [] if upstream is False else [e.origin for e in node.in_edges]
            if upstream is not True:
                ends += [e.destination for e in node.out_edges]
            for nxt_id in ends:
                nxt = graph.nodes.get(nxt_id)
                if nxt is None or not readable(nxt.namespace):
                    continue
                cost = hops[current] + (1 if nxt.type == "JOB" else 0)
                if cost > depth or hops.get(nxt_id, cost + 1) <= cost:
                    continue
                hops[nxt_id] = cost
                if nxt.type == "JOB":
                    queue.append(nxt_id)
                else:
                    queue.appendleft(nxt_id)
        kept.update(hops)
    # A cut answer stays marked cut: what the limit left out is not known to be hidden.
    pruned = LineageGraph(root=graph.root, truncated=graph.truncated)
    for nid in kept:
        node = graph.nodes[nid]
        pruned.nodes[nid] = LineageNode(
            id=node.id,
            type=node.type,
            namespace=node.namespace,
            name=node.name,
            data=node.data,
            in_edges=[e for e in node.in_edges if e.origin in kept],
            out_edges=[e for e in node.out_edges if e.destination in kept],
        )
    return pruned


def prune_answer(answer: Mapping[str, Any], root: str, grant: Grant) -> dict[str, Any]:
    """A Marquez ``{"graph": [node, ...]}`` answer (lineage, or column lineage with its
    ``DATASET_FIELD`` nodes) keeping what is reachable from ``root`` through readable nodes only:
    upstream along ``inEdges``, downstream along ``outEdges``, each from the root. A node's
    namespace is its ``data.namespace``. For routes that build such answers without a
    :class:`LineageGraph`; it keeps the answer's depth bound but does not recount hops."""
    nodes = {n["id"]: n for n in answer.get("graph", []) if isinstance(n, Mapping)}
    if grant.reads_all:
        return dict(answer)

    def readable(nid: str) -> bool:
        data = nodes[nid].get("data")
        namespace = data.get("namespace") if isinstance(data, Mapping) else None
        return isinstance(namespace, str) and grant.may_read(namespace)

    def far_end(edge: Mapping[str, Any], here: str) -> Any:
        # Lineage edges point with the data flow; column lineage's start at their node.
        return edge.get("destination") if edge.get("origin") == here else edge.get("origin")

    kept: set[str] = set()
    if root in nodes and readable(root):
        kept.add(root)
        for edges in ("inEdges", "outEdges"):
            stack, seen = [root], {root}
            while stack:
                here = stack.pop()
                for edge in nodes[here].get(edges, []):
                    nxt = far_end(edge, here)
                    if nxt in nodes and nxt not in seen and readable(nxt):
                        seen.add(nxt)
                        stack.append(nxt)
            kept |= seen
    graph = [
        {
            **node,
            "inEdges": [e for e in node.get("inEdges", []) if far_end(e, nid) in kept],
            "outEdges": [e for e in node.get("outEdges", []) if far_end(e, nid) in kept],
        }
        for nid, node in nodes.items()
        if nid in kept
    ]
    return {**answer, "graph": graph}


def prune_columns(
    graph: ColumnGraph, readable: Callable[[str], bool], *, depth: int, with_downstream: bool
) -> ColumnGraph:
    """The part of a store's column-lineage answer reachable from its readable root fields
    through readable fields only, within ``depth`` column hops (as :func:`prune_graph` does for
    table lineage: a readable field reached only through a hidden one is dropped too)."""
    roots = tuple(f for f in graph.roots if readable(f.namespace))
    pruned = ColumnGraph(root=graph.root, roots=roots, fields=set(roots), truncated=graph.truncated)
    for upstream in (True, False) if with_downstream else (True,):
        seen = set(roots)
        frontier = set(roots)
        for _ in range(depth):
            reached: set[FieldRef] = set()
            for (out, src), info in graph.edges.items():
                near, far = (out, src) if upstream else (src, out)
                if near in frontier and readable(far.namespace):
                    pruned.edges[(out, src)] = info
                    pruned.fields.update((out, src))
                    if far not in seen:
                        seen.add(far)
                        reached.add(far)
            if not reached:
                break
            frontier = reached
    return pruned


# ------------------------------------------------------------------------ the visible view


def as_seen(event: dict[str, Any], readable: Callable[[str], bool]) -> dict[str, Any]:
    """``event`` (itself when nothing changes) with the ``symlinks`` identifiers of unreadable
    namespaces left out of its datasets, as :func:`scrub` leaves them out of answers, so what is
    folded from it resolves no name to a hidden one: a location whose table is hidden stays the
    location. A ``parent`` run facet naming a hidden job goes too (as :func:`scrub` drops it),
    so no ``parentJobName`` is folded from it."""
    changed: dict[str, Any] = {}
    for key in ("inputs", "outputs", "dataset"):
        value = event.get(key)
        items = value if isinstance(value, list) else [value]
        kept = [_entry_as_seen(item, readable) for item in items]
        if any(a is not b for a, b in zip(kept, items, strict=True)):
            changed[key] = kept if isinstance(value, list) else kept[0]
    run = event.get("run")
    facets = run.get("facets") if isinstance(run, Mapping) else None
    parent = facets.get("parent") if isinstance(facets, Mapping) else None
    hidden = isinstance(parent, Mapping) and not all(
        readable(ns) for ns in _parent_namespaces(parent) if isinstance(ns, str)
    )
    if hidden and isinstance(run, Mapping) and isinstance(facets, Mapping):
        changed["run"] = {**run, "facets": {k: v for k, v in facets.items() if k != "parent"}}
    return {**event, **changed} if changed else event


def _entry_as_seen(item: Any, readable: Callable[[str], bool]) -> Any:
    facets = item.get("facets") if isinstance(item, Mapping) else None
    symlinks = facets.get("symlinks") if isinstance(facets, Mapping) else None
    found = symlinks.get("identifiers") if isinstance(symlinks, Mapping) else None
    if not isinstance(found, list) or facets is None or symlinks is None:
        return item
    kept = [i for i in found if readable(_named_ref(i) or "") or _named_ref(i) is None]
    if len(kept) == len(found):
        return item
    return {**item, "facets": {**facets, "symlinks": {**symlinks, "identifiers": kept}}}


def _renamed(graph: LineageGraph, start: str | None, node: str) -> LineageGraph:
    """``graph``, walked from ``start``, with that dataset named as ``node`` (the alias a key
    sees it under); ``graph`` itself when ``start`` is None."""
    if start is None:
        return graph
    _, namespace, name = parse_node_id(node)

    def nid(found: str) -> str:
        return node if found == start else found

    renamed = LineageGraph(root=nid(graph.root), truncated=graph.truncated)
    for item in graph.nodes.values():
        named = (namespace, name) if item.id == start else (item.namespace, item.name)
        renamed.nodes[nid(item.id)] = LineageNode(
            id=nid(item.id),
            type=item.type,
            namespace=named[0],
            name=named[1],
            data=item.data,
            in_edges=[LineageEdge(nid(e.origin), nid(e.destination)) for e in item.in_edges],
            out_edges=[LineageEdge(nid(e.origin), nid(e.destination)) for e in item.out_edges],
        )
    return renamed


def _renamed_columns(
    graph: ColumnGraph, dataset: tuple[str, str], shown: tuple[str, str], node: str
) -> ColumnGraph:
    """``graph`` with the fields of ``dataset`` named as fields of ``shown`` (the alias a key
    sees it under), rooted at ``node``."""

    def ref(found: FieldRef) -> FieldRef:
        same = (found.namespace, found.dataset) == dataset
        return FieldRef(*shown, found.field) if same else found

    return ColumnGraph(
        root=node,
        roots=tuple(map(ref, graph.roots)),
        fields=set(map(ref, graph.fields)),
        edges={(ref(out), ref(src)): info for (out, src), info in graph.edges.items()},
        truncated=graph.truncated,
    )


class Sight(Engine):
    """The engine's reads as one grant sees them: what the store would hold had only the
    readable events been sent.

    Every read of events (a run's, a job's, a dataset's, the static ones, the raw log, the event
    log) keeps the events filed under a readable namespace (:func:`filing_namespace`); the lists
    of namespaces, jobs, datasets and search hits keep readable namespaces; a job or dataset of
    a hidden namespace is not there (``has_node``, ``runs_of_job``, a graph walk from it).
    Everything else (the lineage walks) is the engine's own, pruned by the callers
    (:func:`visible_cut`).

    It is closed by default: each :class:`Engine` read is either overridden here with its
    filter, or named in :data:`PASS_THROUGH`, or replaced by a method raising
    :class:`ClosedAttribute` (the API answers it as a 500 with no detail), so a read added to
    the engine later reaches no key unfiltered by being forgotten. It holds no backend: what
    the engine reads is reached through ``seen``, the unfiltered engine, by these methods only.

    A run's state and times are the engine's fold of every event of its id, whatever job sent
    it; a run id a hidden job used too (a key may file its own run under a hidden run's id) would
    show the hidden events' state and times. So every run summary a sight hands out
    (``runs_of_job``, ``jobs``, ``latest_runs``, a graph walk's ``latestRun``) is folded again
    from the readable events of the run wherever the run has others.
    """

    def __init__(self, engine: Engine, grant: Grant) -> None:  # no backend of its own
        self._all = engine
        self.grant = grant
        self.name = engine.name

    def sees(self, event: Mapping[str, Any]) -> bool:
        """Whether the event is filed under a namespace the grant may read."""
        return self.grant.may_read(filing_namespace(event) or "")

    def readable(self, namespace: str) -> bool:
        return self.grant.may_read(namespace)

    def _rooted(self, node: str) -> bool:
        """Whether a walk may start at ``node``: one in a hidden namespace finds nothing, as
        one never recorded (a malformed id: the engine's own error, as for anyone)."""
        try:
            return self.readable(parse_column_node(node).namespace)
        except ValueError:
            return True

    # -- walks -----------------------------------------------------------------------------------

    def lineage(
        self,
        node: str,
        *,
        direction: Direction = "both",
        depth: int = 5,
        node_limit: int | None = None,
    ) -> LineageGraph:
        if not self._rooted(node):
            return LineageGraph(root=node)
        start = self._aliased_root(node)
        graph = self._all.lineage(
            start or node, direction=direction, depth=depth, node_limit=node_limit
        )
        return self._seen_latest_runs(_renamed(graph, start, node), None)

    def lineage_as_of(
        self,
        node: str,
        *,
        direction: Direction = "both",
        depth: int = 5,
        node_limit: int | None = None,
        as_of: datetime,
    ) -> LineageGraph:
        if not self._rooted(node):
            raise unknown_as_of(node, as_of)
        start = self._aliased_root(node)
        graph = self._all.lineage_as_of(
            start or node, direction=direction, depth=depth, node_limit=node_limit, as_of=as_of
        )
        return self._seen_latest_runs(_renamed(graph, start, node), as_of)

    def lineage_view(
        self,
        node: str,
        *,
        granularity: Granularity = "job",
        direction: Direction = "both",
        depth: int = 5,
        node_limit: int | None = None,
        window: Window = ALWAYS,
        readable: Readable | None = None,
    ) -> ViewGraph:
        """The engine's view, its walk kept to the readable namespaces (the grant's test, with
        ``readable`` too when given), the job nodes' latest runs folded as the key sees them."""
        grant = self.readable if readable is None else lambda ns: self.readable(ns) and readable(ns)
        view = self._all.lineage_view(
            node,
            granularity=granularity,
            direction=direction,
            depth=depth,
            node_limit=node_limit,
            window=window,
            readable=grant,
        )
        until = None if window.until is None else as_of_before(window.until)
        self._seen_latest_runs(view.graph, until)
        return view

    def column_lineage(
        self,
        node: str,
        *,
        depth: int = 20,
        with_downstream: bool = False,
        node_limit: int | None = None,
        window: Window = ALWAYS,
    ) -> ColumnGraph:
        if not self._rooted(node):
            return ColumnGraph(root=node)
        root = parse_column_node(node)
        found = None if root.kind == "JOB" else self._through_alias(root.namespace, root.name)
        field = root.field
        start = node_id("DATASET", *found) if found and field is None else node
        if found is not None and field is not None:
            start = FieldRef(*found, field).id
        graph = self._all.column_lineage(
            start,
            depth=depth,
            with_downstream=with_downstream,
            node_limit=node_limit,
            window=window,
        )
        if found is None:
            return graph
        return _renamed_columns(graph, found, (root.namespace, root.name), node)

    def _through_alias(self, namespace: str, name: str) -> tuple[str, str] | None:
        """The dataset a readable name is an alias of when the dataset's namespace is hidden:
        the key sees that dataset under this name (docs/api.md, "Every name of a dataset");
        else None."""
        if not self.readable(namespace):
            return None
        found = self._all.dataset_name(namespace, name)
        return None if self.readable(found[0]) else found

    def _aliased_root(self, node: str) -> str | None:
        """The id of the dataset a walk's root names by an alias the key sees it under, or None
        (a malformed id: None, the engine answers it)."""
        try:
            kind, namespace, name = parse_node_id(node)
        except ValueError:
            return None
        found = None if kind != "DATASET" else self._through_alias(namespace, name)
        return None if found is None else node_id("DATASET", *found)

    def _seen(self, events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """The readable events, each as the key sees it (:func:`as_seen`)."""
        return [as_seen(e, self.readable) for e in events if self.sees(e)]

    def _seen_latest_runs(self, graph: LineageGraph, as_of: datetime | None) -> LineageGraph:
        """Each readable job node's ``latestRun`` folded again from the readable events of its
        run (up to ``as_of``) where the run has others (a read of the run's events per job
        node); hidden nodes are pruned by the callers."""
        for item in graph.nodes.values():
            run = item.data.get("latestRun") if item.type == "JOB" else None
            if not isinstance(run, Mapping) or not isinstance(run.get("runId"), str):
                continue
            if not self.readable(item.namespace):
                continue
            found = self._visible_run(
                run["runId"], namespace=item.namespace, name=item.name, as_of=as_of
            )
            if found is not None:  # in RunFold.latest_run's shape, as the engine puts it
                item.data["latestRun"] = {
                    "runId": found.run_id,
                    "state": found.state,
                    "stateTime": found.state_time,
                    "heartbeatS": found.heartbeat_s,
                }
        return graph

    # -- runs ------------------------------------------------------------------------------------

    def runs_of_job(
        self, namespace: str, name: str, *, limit: int = 100, offset: int = 0
    ) -> Page[RunSummary]:
        if not self.readable(namespace):
            return Page([], 0)
        page = self._all.runs_of_job(namespace, name, limit=limit, offset=offset)
        return Page([self._seen_summary(r) for r in page], page.total)

    def latest_runs(self, jobs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], RunSummary]:
        readable = [j for j in jobs if self.readable(j[0])]
        if not readable:
            return {}
        found = self._all.latest_runs(readable)
        return {key: self._seen_summary(run) for key, run in found.items()}

    def events_of_run(self, run_id: str) -> list[dict[str, Any]]:
        return self._seen(self._all.events_of_run(run_id))

    def child_runs(self, run_id: str) -> list[str]:
        """The children with a readable event (a child filed under a hidden namespace is not
        there; the callers read each child's events through the sight anyway)."""
        return [c for c in self._all.child_runs(run_id) if self.events_of_run(c)]

    def _visible_run(
        self, run_id: str, *, namespace: str, name: str, as_of: datetime | None = None
    ) -> RunSummary | None:
        """The run as the readable events of its id state it (up to ``as_of``), or None when
        it has no other events (the engine's own fold then says nothing more): its state, the
        time that decided it, its start and end, its parent and its heartbeat interval, by the
        engine's rule (:mod:`lineage_sdk.models.run_state`)."""
        events = self._all.events_of_run(run_id)
        if all(self.sees(e) for e in events):
            return None
        parents: list[str | None] = []
        beats: list[float | None] = []
        stated: list[tuple[str | None, datetime, str]] = []
        for event in events:
            if not self.sees(event):
                continue
            try:
                rec = build_record(event)
            except (InvalidEventError, KeyError, TypeError, ValueError):
                continue  # stored events were validated; an odd one is left out, as in history
            if as_of is not None and rec.event_time > as_of:
                continue
            parents.append(rec.parent_run_id)
            beats.append(heartbeat_interval(event))
            stated.append((rec.event_type, rec.event_time, rec.event_id))
        fold = fold_states(stated)
        return RunSummary(
            run_id=run_id,
            job_namespace=namespace,
            job_name=name,
            state=fold.state,
            started_at=fold.started_at,
            ended_at=fold.ended_at,
            parent_run_id=pick_link(parents),
            state_time=fold.state_time,
            heartbeat_s=pick_interval(beats),
        )

    def _seen_summary(self, summary: RunSummary) -> RunSummary:
        found = self._visible_run(
            summary.run_id, namespace=summary.job_namespace, name=summary.job_name
        )
        return summary if found is None else found

    # -- the catalogue ---------------------------------------------------------------------------

    def namespaces(self, *, limit: int | None = None, offset: int = 0) -> Page[str]:
        check_page(limit, offset)
        kept = [ns for ns in self._all.namespaces() if self.readable(ns)]
        end = None if limit is None else offset + limit
        return Page(kept[offset:end], len(kept))

    def dataset_namespaces(self) -> list[str]:
        return [ns for ns in self._all.dataset_namespaces() if self.readable(ns)]

    def has_events_after(self, at: datetime) -> bool:
        """Whether an event this key reads is later than ``at``: the events from just after it,
        in order, up to the first readable one. Events it cannot read do not count either way
        (the newest event's alone, when hidden, made a past answer the present one: Marquez's
        node facts of now in an ``asOf`` answer, tests/api/test_access_as_of.py)."""
        later = self.iter_raw_events(since=until_of(at), batch_size=_FIRST_LATER_BATCH)
        return next(later, None) is not None

    def sources(self, name: str | None = None) -> list[SourceUse]:
        """The sources as the readable datasets name them."""
        return [s for s in self._all.sources(name) if self.readable(s.dataset[0])]

    def node_facts(
        self,
        jobs: Collection[Key],
        datasets: Collection[Key],
        latest: Mapping[Key, str] | None = None,
        *,
        schemas: bool = False,
    ) -> NodeFacts:
        """The readable nodes' facts, from their readable events (a hidden job is no writer)."""
        seen = self.readable
        facts = self._all.node_facts(
            [k for k in jobs if seen(k[0])],
            [k for k in datasets if seen(k[0])],
            latest,
            schemas=schemas,
        )
        earlier = facts.earlier
        return NodeFacts(
            facts.times,
            {k: [d for d in found if seen(d[0])] for k, found in facts.sides.items()},
            {k: [j for j in found if seen(j[0])] for k, found in facts.writers.items()},
            {k: run for k, run in facts.latest.items() if seen(k[0])},
            {run_id: self._seen(found) for run_id, found in facts.events.items()},
            {k: self._seen(found) for k, found in facts.static.items()},
            facts.declared,  # of the readable jobs alone, as ``declared`` answers
            None if earlier is None else {r: self._seen(found) for r, found in earlier.items()},
            {k: self._seen(found) for k, found in facts.stated.items()},
        )

    def jobs(
        self, namespace: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> Page[JobSummary]:
        """Nothing of a hidden namespace; each latest run as its readable events state it."""
        page = self._listing(self._all.jobs, namespace, limit, offset, lambda j: j.namespace)
        jobs = [
            j
            if j.latest_run is None
            else dataclasses.replace(j, latest_run=self._seen_summary(j.latest_run))
            for j in page
        ]
        return Page(jobs, page.total)

    def datasets(
        self, namespace: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> Page[tuple[str, str]]:
        return self._listing(self._all.datasets, namespace, limit, offset, lambda d: d[0])

    def _listing(
        self,
        read: Callable[..., Page[_T]],
        namespace: str | None,
        limit: int,
        offset: int,
        namespace_of: Callable[[_T], str],
    ) -> Page[_T]:
        """A page of ``namespace`` (nothing when hidden), or of the whole store with each item
        of a hidden namespace left out."""
        if namespace is not None:
            if not self.readable(namespace):
                return Page([], 0)
            return read(namespace, limit=limit, offset=offset)
        page = read(None, limit=limit, offset=offset)
        kept = [i for i in page if self.readable(namespace_of(i))]
        return Page(kept, page.total - (len(page) - len(kept)))

    def has_node(self, node_type: NodeType, namespace: str, name: str) -> bool:
        if not self.readable(namespace):
            return False
        if self._all.has_node(node_type, namespace, name):
            return True
        return node_type == "DATASET" and self._through_alias(namespace, name) is not None

    def dataset_name(self, namespace: str, name: str) -> tuple[str, str]:
        """A name resolves for a key that may read both its namespace and the node's; else it
        stays itself, which the key does not see, so neither name tells of the other (docs/api.md,
        "Every name of a dataset")."""
        if not self.readable(namespace):
            return (namespace, name)
        found = self._all.dataset_name(namespace, name)
        return found if self.readable(found[0]) else (namespace, name)

    def dataset_aliases(self, text: str) -> list[tuple[tuple[str, str], tuple[str, str]]]:
        """The aliases of readable namespaces, each of a hidden dataset as the dataset itself."""
        found = self._all.dataset_aliases(text)
        return [(a, n if self.readable(n[0]) else a) for a, n in found if self.readable(a[0])]

    def search(self, text: str, *, limit: int = 50) -> list[tuple[NodeType, str, str]]:
        return [hit for hit in self._all.search(text, limit=limit) if self.readable(hit[1])]

    # -- history ---------------------------------------------------------------------------------

    def events_of_job(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """None of a job in a hidden namespace (a readable job's events may name it), else the
        readable events."""
        if not self.readable(namespace):
            return []
        return self._seen(self._all.events_of_job(namespace, name))

    def events_of_dataset(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The readable events of the runs that named the dataset; of a hidden dataset the key
        sees under an alias, those of the runs that gave that name."""
        if not self.readable(namespace):
            return []
        found = self._through_alias(namespace, name)
        seen = self._seen(self._all.events_of_dataset(*(found or (namespace, name))))
        if found is None:
            return seen
        return of_dataset(seen, namespace, name)

    def declared(
        self, jobs: Sequence[tuple[str, str]], *, as_of: datetime | None = None
    ) -> set[tuple[tuple[str, str], tuple[str, str], Io]]:
        """The readable jobs' declared edges: only events filed under a job's namespace
        declare its edges (a ``lineage`` facet states no other namespace's job)."""
        readable = [j for j in jobs if self.readable(j[0])]
        return self._all.declared(readable, as_of=as_of) if readable else set()

    def static_events(
        self,
        *,
        jobs: Sequence[tuple[str, str]] = (),
        datasets: Sequence[tuple[str, str]] = (),
    ) -> list[dict[str, Any]]:
        jobs = [j for j in jobs if self.readable(j[0])]
        datasets = [self._through_alias(*d) or d for d in datasets if self.readable(d[0])]
        if not jobs and not datasets:
            return []
        return self._seen(self._all.static_events(jobs=jobs, datasets=datasets))

    def job_events_up_to(
        self, jobs: Sequence[tuple[str, str]], as_of: datetime
    ) -> list[tuple[str, dict[str, Any]]]:
        readable = [k for k in jobs if self.readable(k[0])]
        if not readable:
            return []
        found = self._all.job_events_up_to(readable, as_of)
        return [(i, as_seen(e, self.readable)) for i, e in found if self.sees(e)]

    def lineage_events(
        self,
        *,
        before: datetime | None = None,
        after: datetime | None = None,
        namespace: str | None = None,
        ascending: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> Page[dict[str, Any]]:
        if namespace is not None and not self.readable(namespace):
            return Page([], 0)
        page = self._all.lineage_events(
            before=before,
            after=after,
            namespace=namespace,
            ascending=ascending,
            limit=limit,
            offset=offset,
        )
        kept = self._seen(page)
        return Page(kept, page.total - (len(page) - len(kept)))

    def iter_raw_events(
        self,
        *,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: Position | None = None,
        batch_size: int = 1000,
    ) -> Iterator[RawEvent]:
        found = self._all.iter_raw_events(
            namespace=namespace, since=since, until=until, after=after, batch_size=batch_size
        )
        for raw in found:
            event = loads_exact(raw.json)
            if self.sees(event):
                seen = as_seen(event, self.readable)
                json = raw.json if seen is event else dumps_exact(seen).decode()
                yield RawEvent(raw.event_id, raw.event_time, json)


class ClosedAttribute(RuntimeError):
    """An engine read a restricted key's sight neither filters nor knows to be safe (the API
    answers it as a 500 with no detail: a bug to fix, never an answer)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"the engine read {name!r} is neither filtered nor known to be safe for a key that "
            "reads some namespaces only: filter it in access.Sight or name it in "
            "access.PASS_THROUGH"
        )


def _closed(name: str) -> Callable[..., Any]:
    def closed(*_args: Any, **_kwargs: Any) -> Any:
        raise ClosedAttribute(name)

    closed.__name__ = name
    return closed


#: The engine reads a sight hands out as they are: they say nothing of what is recorded.
PASS_THROUGH: frozenset[str] = frozenset()

#: The engine's public reads a sight filters; every other one is closed (see :class:`Sight`).
FILTERED: frozenset[str] = frozenset(
    n for n, v in vars(Sight).items() if not n.startswith("_") and callable(v)
) - {"sees", "readable"}

for _name, _read in vars(Engine).items():
    if callable(_read) and not _name.startswith("_") and _name not in FILTERED | PASS_THROUGH:
        setattr(Sight, _name, _closed(_name))


def visible(engine: Engine, grant: Grant) -> Engine:
    """``engine`` as ``grant`` sees it: itself for a key that reads everything, else a
    :class:`Sight`."""
    return engine if grant.reads_all else Sight(engine, grant)


#: The most nodes a restricted key's graph read asks of the store (the API's own cap on
#: ``nodeLimit``): its answer is pruned before it is cut, so it must hold more than the limit.
VISIBLE_WALK_CAP = 100_000


def visible_cut(
    read: Callable[[int | None], _T],
    prune: Callable[[_T], _T],
    cut: Callable[[_T], _T],
    node_limit: int | None,
    *,
    truncated: Callable[[_T], bool],
) -> _T:
    """A graph read (``read(limit)``) pruned to what a key sees, *then* cut at ``node_limit``,
    so ``truncated`` and every count say nothing of hidden nodes.

    The store's walk stops at its limit counting every node, hidden ones too, so it is asked
    again with four times the limit while its answer is cut (up to :data:`VISIBLE_WALK_CAP`;
    an answer still cut there stays marked ``truncated``)."""
    limit = node_limit
    while True:
        graph = read(limit)
        if not truncated(graph) or limit is None or limit >= VISIBLE_WALK_CAP:
            break
        limit = min(limit * 4, VISIBLE_WALK_CAP)
    return cut(prune(graph))
