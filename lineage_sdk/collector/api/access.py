"""Access by namespace: API keys, their hashes, and what each key may write and read.

A key is a random token (:func:`new_key`: 32 random bytes, URL-safe, behind an ``lsk_`` prefix
that secret scanners can match). The configuration holds only its SHA-256
(:func:`hash_key`: ``sha256:<hex>``): a fast hash is the right tool for a high-entropy random
token (as GitHub and Stripe store theirs), since nobody can guess 256 random bits however fast
they hash, while a slow password hash would cost every request. A presented key is hashed and
compared with every configured hash by :func:`hmac.compare_digest`, all of them each time, so
the time taken tells neither how much of a hash matched nor which key did. Keys are never
logged: nothing here formats a presented key, and a key's *name* is what errors mention.

Each key holds a :class:`Grant`: the namespaces it may write (ingest checks the job's namespace;
a DatasetEvent's dataset namespace) and read. Reads filter in the API layer, for every store
alike: lists drop what is unreadable, single things in an unreadable namespace are a 404 worded
like "not recorded" (it must not tell a hidden namespace from an empty one), and a lineage graph
is pruned by :func:`prune_graph`, which walks again from the root through readable nodes only.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lineage_sdk.collector.settings import ApiKeyConfig
from lineage_sdk.collector.store import ColumnGraph, Direction, FieldRef, LineageGraph, LineageNode
from lineage_sdk.exceptions import ConfigError

__all__ = [
    "KEY_PREFIX",
    "LEGACY_KEY_NAME",
    "OPEN",
    "AccessPolicy",
    "Grant",
    "NamespaceScope",
    "event_job_namespace",
    "hash_key",
    "new_key",
    "prune_answer",
    "prune_columns",
    "prune_graph",
    "scrub",
]

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


@dataclass(frozen=True, slots=True)
class Grant:
    """What one request may do. ``name`` is the key's name (None: no key was needed)."""

    name: str | None
    write: NamespaceScope
    read: NamespaceScope

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
        for name, config in sorted(keys.items()):
            digest = bytes.fromhex(config.key_hash.removeprefix("sha256:"))
            if digest in owners:
                raise ConfigError(
                    f"lineage.api.keys.{name}.key_hash",
                    "***",
                    f"must differ from the hash of {owners[digest]}: one key, one grant",
                )
            owners[digest] = name
            grant = Grant(name, NamespaceScope(config.write), NamespaceScope(config.read))
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


# ------------------------------------------------------------------------------------ reads


def event_job_namespace(event: Mapping[str, Any]) -> str | None:
    """The namespace an event is filed under: its job's; a DatasetEvent's dataset's."""
    for key in ("job", "dataset"):
        value = event.get(key)
        if isinstance(value, Mapping) and isinstance(value.get("namespace"), str):
            namespace: str = value["namespace"]
            return namespace
    return None


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
