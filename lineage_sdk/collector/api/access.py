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
  read asks the store through that view, so a hidden thing answers as an unknown one. Lists hold
  readable namespaces only; a lineage graph is pruned by :func:`prune_graph` (nothing reached
  *through* a hidden node) before it is cut at its node limit (:func:`visible_cut`), and
  :func:`scrub` drops what an answer still names of a hidden namespace.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import re
import secrets
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import orjson

from lineage_sdk.collector.columns import parse_column_node
from lineage_sdk.collector.records import build_record
from lineage_sdk.collector.settings import ApiKeyConfig
from lineage_sdk.collector.store import (
    ColumnGraph,
    Direction,
    FieldRef,
    LineageGraph,
    LineageNode,
    LineageRecord,
    Page,
    RawEvent,
    RunSummary,
)
from lineage_sdk.exceptions import ConfigError, InvalidEventError
from lineage_sdk.models.run_state import (
    fold_states,
    heartbeat_interval,
    pick_interval,
    pick_link,
)

__all__ = [
    "KEY_PREFIX",
    "LEGACY_KEY_NAME",
    "OPEN",
    "PASS_THROUGH",
    "AccessPolicy",
    "ClosedAttribute",
    "Grant",
    "NamespaceScope",
    "VisibleView",
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


class NamespaceScope:
    """Namespace patterns: a namespace as written, or with ``*`` matching any run of characters
    (dots and slashes included). ``*`` alone is every namespace."""

    __slots__ = ("_exact", "_regex", "everything", "patterns")

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        self.everything = "*" in self.patterns
        self._exact = frozenset(p for p in self.patterns if "*" not in p)
        globs = [p for p in self.patterns if "*" in p and p != "*"]
        self._regex = (
            re.compile(
                "|".join("(?:" + ".*".join(map(re.escape, g.split("*"))) + ")" for g in globs),
                re.DOTALL,
            )
            if globs
            else None
        )

    def allows(self, namespace: str) -> bool:
        if self.everything or namespace in self._exact:
            return True
        return self._regex is not None and self._regex.fullmatch(namespace) is not None

    def __repr__(self) -> str:
        return f"NamespaceScope({list(self.patterns)!r})"


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
    key owns it (``grant.owned``). Inputs are not targets: reading a dataset changes nothing of
    it."""
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
    walks = (True, False) if direction == "both" else (direction == "upstream",)
    for upstream in walks:
        # 0-1 BFS: entering a job costs a hop, entering a dataset does not.
        hops: dict[str, int] = {graph.root: 0}
        queue: deque[str] = deque([graph.root])
        while queue:
            current = queue.popleft()
            node = graph.nodes[current]
            edges = node.in_edges if upstream else node.out_edges
            for edge in edges:
                nxt_id = edge.origin if upstream else edge.destination
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


class VisibleView:
    """A store as one grant sees it: what it would hold had only the readable events been sent.

    Every read of events (a run's, a job's, a dataset's, the static ones, the raw log, the event
    log) keeps the events filed under a readable namespace (:func:`filing_namespace`); the lists
    of namespaces, jobs, datasets and search hits keep readable namespaces; a job or dataset of
    a hidden namespace is not there (``has_node``, ``runs_of_job``, a graph walk from it).
    Everything else (the store's lineage walks) is the store's own, pruned by the callers
    (:func:`visible_cut`).

    A view offers exactly the store's public attributes (as descriptors of a class made once per
    store class, so building a view per request costs nothing), so the capability checks the
    reads make (``isinstance(store, LineageHistoryProtocol)``, ``getattr(store, "child_runs")``)
    find what the store has, no more.

    It is closed by default: an attribute is read through its filter (``_FILTERS``), or as the
    store's own when :data:`PASS_THROUGH` names it as safe; any other one (a method added to a
    store later, the stores' writes, counts and connections) raises :class:`ClosedAttribute`
    when called (a method: capability checks still find it) or read (anything else), which the
    API answers as a 500 with no detail. Nothing reaches a key unfiltered by being forgotten.

    A run's state and times are the store's fold of every event of its id, whatever job sent
    it; a run id a hidden job used too (a key may file its own run under a hidden run's id) would
    show the hidden events' state and times. So every run summary a view hands out
    (``runs_of_job``, ``jobs``, ``latest_runs``, a graph walk's ``latestRun``) is folded again
    from the readable events of the run wherever the run has others.
    """

    def __init__(self, store: object, grant: Grant) -> None:
        self._store = store
        self.grant = grant

    def __getattr__(self, name: str) -> Any:  # what the class does not name (instance data)
        if name.startswith("_"):
            raise AttributeError(name)
        return _unfiltered(name, getattr(self._store, name))

    def sees(self, event: Mapping[str, Any]) -> bool:
        """Whether the event is filed under a namespace the grant may read."""
        return self.grant.may_read(filing_namespace(event) or "")

    def readable(self, namespace: str) -> bool:
        return self.grant.may_read(namespace)


class _Delegated:
    """One public attribute of the store, read through a view (filtered where it must be)."""

    __slots__ = ("name", "wrap")

    def __init__(self, name: str) -> None:
        self.name = name
        self.wrap = _FILTERS.get(name)

    def __get__(self, view: VisibleView | None, owner: type[Any] | None = None) -> Any:
        if view is None:
            return self
        value = getattr(view._store, self.name)
        if self.wrap is not None and callable(value):
            return self.wrap(view, value)
        return _unfiltered(self.name, value)


def _unfiltered(name: str, value: Any) -> Any:
    """A store attribute no filter reads: itself when known to be safe, else closed (a method
    raising when called, so capability checks still find it; anything else, when read)."""
    if name in PASS_THROUGH:
        return value
    if callable(value):
        return _closed(name)
    raise ClosedAttribute(name)


class ClosedAttribute(RuntimeError):
    """A store attribute a restricted key's view neither filters nor knows to be safe (the API
    answers it as a 500 with no detail: a bug to fix, never an answer)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"the store attribute {name!r} is neither filtered nor known to be safe for a key "
            "that reads some namespaces only: add it to access._FILTERS or access.PASS_THROUGH"
        )


def _closed(name: str) -> Callable[..., Any]:
    def closed(*_args: Any, **_kwargs: Any) -> Any:
        raise ClosedAttribute(name)

    closed.__name__ = name
    return closed


#: The store attributes a view hands out as they are: they say nothing of what is recorded.
PASS_THROUGH: frozenset[str] = frozenset({"name"})


_VIEW_CLASSES: dict[type[Any], type[VisibleView]] = {}


def visible(store: _T, grant: Grant) -> _T:
    """``store`` as ``grant`` sees it: itself for a key that reads everything, else a
    :class:`VisibleView` (typed as the store: it answers the same questions)."""
    if grant.reads_all:
        return store
    kind = type(store)
    cls = _VIEW_CLASSES.get(kind)
    if cls is None:
        names = [n for n in dir(kind) if not n.startswith("_") and n not in VisibleView.__dict__]
        cls = type(f"Visible{kind.__name__}", (VisibleView,), {n: _Delegated(n) for n in names})
        _VIEW_CLASSES[kind] = cls
    return cls(store, grant)  # type: ignore[return-value]


def _events_filter(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
    def read(*args: Any, **kwargs: Any) -> list[Any]:
        return [e for e in method(*args, **kwargs) if view.sees(e)]

    return read


def _named_filter(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
    """``events_of_job``/``events_of_dataset``: none of a job or dataset in a hidden
    namespace (a readable job's events may name it), else the readable events."""

    def read(namespace: str, name: str) -> list[Any]:
        if not view.readable(namespace):
            return []
        return [e for e in method(namespace, name) if view.sees(e)]

    return read


def _static_filter(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
    def read(
        *, jobs: Iterable[tuple[str, str]] = (), datasets: Iterable[tuple[str, str]] = ()
    ) -> list[Any]:
        jobs = [j for j in jobs if view.readable(j[0])]
        datasets = [d for d in datasets if view.readable(d[0])]
        if not jobs and not datasets:
            return []
        return [e for e in method(jobs=jobs, datasets=datasets) if view.sees(e)]

    return read


def _pairs_filter(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
    """``job_events_up_to(keys, as_of)``: (key, event) pairs of readable jobs."""

    def read(keys: Iterable[tuple[str, str]], *args: Any, **kwargs: Any) -> list[Any]:
        keys = [k for k in keys if view.readable(k[0])]
        if not keys:
            return []
        return [pair for pair in method(keys, *args, **kwargs) if view.sees(pair[1])]

    return read


def _rooted_filter(empty: Callable[[str], Any]) -> Callable[..., Any]:
    """A graph walk (``lineage``, ``lineage_as_of``, ``column_lineage``) from a root in a hidden
    namespace finds nothing, as from a root never recorded (the callers prune the rest)."""

    def make(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)  # its signature: ``takes_node_limit`` reads it
        def read(node: str, *args: Any, **kwargs: Any) -> Any:
            try:
                namespace = parse_column_node(node).namespace
            except ValueError:  # malformed: the store's own error, as for anyone
                return method(node, *args, **kwargs)
            return method(node, *args, **kwargs) if view.readable(namespace) else empty(node)

        return read

    return make


def _raw_filter(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
    def read(*args: Any, **kwargs: Any) -> Iterator[RawEvent]:
        for raw in method(*args, **kwargs):
            if view.sees(orjson.loads(raw.json)):
                yield raw

    return read


def _log_filter(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
    def read(*args: Any, **kwargs: Any) -> Page[Any]:
        namespace = kwargs.get("namespace")
        if namespace is not None and not view.readable(namespace):
            return Page([], 0)
        page = method(*args, **kwargs)
        kept = [e for e in page if view.sees(e)]
        return Page(kept, page.total - (len(page) - len(kept)))

    return read


def _namespaces_filter(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
    def read(*, limit: int | None = None, offset: int = 0) -> Page[str]:
        kept = [ns for ns in method() if view.readable(ns)]
        end = None if limit is None else offset + limit
        return Page(kept[offset:end], len(kept))

    return read


def _listing_filter(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
    """``jobs``/``datasets``/``runs_of_job``: nothing in a hidden namespace."""

    def read(namespace: str | None = None, *args: Any, **kwargs: Any) -> Any:
        if namespace is not None:
            return method(namespace, *args, **kwargs) if view.readable(namespace) else Page([], 0)
        page = method(None, *args, **kwargs)  # the whole store: each item by its namespace
        kept = [i for i in page if view.readable(getattr(i, "namespace", None) or i[0])]
        return Page(kept, page.total - (len(page) - len(kept)))

    return read


def _hits_filter(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
    def read(*args: Any, **kwargs: Any) -> list[Any]:
        return [hit for hit in method(*args, **kwargs) if view.readable(hit[1])]

    return read


def _node_filter(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
    def read(node_type: Any, namespace: str, name: str) -> bool:
        return view.readable(namespace) and bool(method(node_type, namespace, name))

    return read


def _names_filter(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
    def read(*args: Any, **kwargs: Any) -> list[str]:
        return [ns for ns in method(*args, **kwargs) if view.readable(ns)]

    return read


def _visible_run(
    view: VisibleView,
    run_id: str,
    *,
    namespace: str,
    name: str,
    as_of: datetime | None = None,
) -> RunSummary | None:
    """The run as the readable events of its id state it (up to ``as_of``), or None when it
    has no other events (the store's own fold then says nothing more): its state, the time
    that decided it, its start and end, its parent and its heartbeat interval, by the stores'
    rule (:mod:`lineage_sdk.models.run_state`)."""
    events = view._store.events_of_run(run_id)  # type: ignore[attr-defined]
    if all(view.sees(e) for e in events):
        return None
    parents: list[str | None] = []
    beats: list[float | None] = []
    stated: list[tuple[str | None, datetime, str]] = []
    for event in events:
        if not view.sees(event):
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


def _seen_summary(view: VisibleView, summary: RunSummary) -> RunSummary:
    found = _visible_run(
        view, summary.run_id, namespace=summary.job_namespace, name=summary.job_name
    )
    return summary if found is None else found


def _runs_filter(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
    """``runs_of_job``: nothing of a hidden namespace; each run as its readable events state it."""
    listing = _listing_filter(view, method)

    def read(namespace: str, *args: Any, **kwargs: Any) -> Page[RunSummary]:
        page = listing(namespace, *args, **kwargs)
        return Page([_seen_summary(view, r) for r in page], page.total)

    return read


def _jobs_filter(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
    """``jobs``: nothing of a hidden namespace; each latest run as its readable events state it."""
    listing = _listing_filter(view, method)

    def read(*args: Any, **kwargs: Any) -> Page[Any]:
        page = listing(*args, **kwargs)
        jobs = [
            dataclasses.replace(j, latest_run=_seen_summary(view, j.latest_run))
            if getattr(j, "latest_run", None) is not None
            else j
            for j in page
        ]
        return Page(jobs, page.total)

    return read


def _latest_runs_filter(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
    """``latest_runs(jobs)``: of the readable jobs, each run as its readable events state it."""

    def read(jobs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], RunSummary]:
        jobs = [j for j in jobs if view.readable(j[0])]
        if not jobs:
            return {}
        return {key: _seen_summary(view, run) for key, run in method(jobs).items()}

    return read


def _children_filter(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
    """``child_runs(run_id)``: the children with a readable event (a child filed under a hidden
    namespace is not there; the callers read each child's events through the view anyway)."""

    def read(run_id: str) -> list[str]:
        return [c for c in method(run_id) if any(map(view.sees, view._store.events_of_run(c)))]  # type: ignore[attr-defined]

    return read


def _graph_runs_filter(rooted: Callable[..., Any]) -> Callable[..., Any]:
    """A graph walk's job nodes may carry their latest run (``latestRun``, the store's fold of
    every event of its id): each of a readable job is folded again from the readable events of
    its run (up to ``as_of``) where the run has others (a read of the run's events per job node;
    a node without it is asked of the view's ``latest_runs`` by ``queries.lineage``)."""

    def make(view: VisibleView, method: Callable[..., Any]) -> Callable[..., Any]:
        walk = rooted(view, method)

        @functools.wraps(method)  # its signature: ``takes_node_limit`` reads it
        def read(node: str, *args: Any, **kwargs: Any) -> Any:
            graph = walk(node, *args, **kwargs)
            for item in getattr(graph, "nodes", {}).values():
                run = item.data.get("latestRun") if item.type == "JOB" else None
                if not isinstance(run, Mapping) or not isinstance(run.get("runId"), str):
                    continue
                if not view.readable(item.namespace):
                    continue  # pruned by the callers
                found = _visible_run(
                    view,
                    run["runId"],
                    namespace=item.namespace,
                    name=item.name,
                    as_of=kwargs.get("as_of"),
                )
                if found is not None:  # in RunFold.latest_run's shape, as the stores put it
                    item.data["latestRun"] = {
                        "runId": found.run_id,
                        "state": found.state,
                        "stateTime": found.state_time,
                        "heartbeatS": found.heartbeat_s,
                    }
            return graph

        return read

    return make


_FILTERS: dict[str, Callable[[VisibleView, Callable[..., Any]], Callable[..., Any]]] = {
    "events_of_run": _events_filter,
    "events_of_job": _named_filter,
    "events_of_dataset": _named_filter,
    "static_events": _static_filter,
    "lineage": _graph_runs_filter(_rooted_filter(lambda node: LineageGraph(root=node))),
    "lineage_as_of": _graph_runs_filter(_rooted_filter(lambda _node: None)),
    "column_lineage": _rooted_filter(lambda node: ColumnGraph(root=node)),
    "job_events_up_to": _pairs_filter,
    "iter_raw_events": _raw_filter,
    "lineage_events": _log_filter,
    "namespaces": _namespaces_filter,
    "jobs": _jobs_filter,
    "datasets": _listing_filter,
    "runs_of_job": _runs_filter,
    "latest_runs": _latest_runs_filter,
    "child_runs": _children_filter,
    "search": _hits_filter,
    "has_node": _node_filter,
    "dataset_namespaces": _names_filter,
}


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
