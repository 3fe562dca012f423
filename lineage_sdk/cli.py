"""``lineage``: ask the recorded lineage questions from a terminal.

It reads either over HTTP from the collector's API (``--url`` or ``$LINEAGE_API_URL``) or directly
from the configured querying store (``sql`` by default, else ``graph``; the same ``[lineage]``
configuration the collector uses). Output is coloured on a terminal and plain when piped
(rich decides; ``NO_COLOR`` is honoured), and every name is printed as text, never as markup.
"""

from __future__ import annotations

import abc
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

import orjson
import typer
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from lineage_sdk.collector.store import DEFAULT_NODE_LIMIT, Granularity
from lineage_sdk.exceptions import LineageError
from lineage_sdk.models.json_exact import dumps_exact

__all__ = [
    "HttpSource",
    "LineageSource",
    "NothingRecorded",
    "SourceError",
    "StoreSource",
    "app",
    "main",
    "to_dot",
    "to_mermaid",
]

Direction = Literal["both", "upstream", "downstream"]
#: The query parameters as the commands' options spell them, in the messages of refused input.
CLI_NAMES = {
    "since": "--since",
    "until": "--until",
    "granularity": "--granularity",
    "asOf": "--as-of",
    "runId": "--run",
    "nodeId": "the node",
}

app = typer.Typer(
    name="lineage",
    help="Ask recorded lineage questions: graph, impact, runs and events.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False)
# An error is one line, however narrow the terminal: the terminal wraps it, never rich.
err = Console(stderr=True, highlight=False, soft_wrap=True)


class SourceError(LineageError):
    """A question could not be answered; ``exit_code`` 1 for not found/unavailable, 2 for usage."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class NothingRecorded(SourceError):
    """Nothing is recorded under the asked name (HTTP 404, or the store found nothing)."""


# -------------------------------------------------------------------------------------------
# Where answers come from


class LineageSource(abc.ABC):
    """The three questions the CLI asks, answered in Marquez's JSON shapes."""

    @abc.abstractmethod
    def lineage(
        self,
        node: str,
        direction: Direction,
        depth: int,
        *,
        as_of: str | None = None,
        run_id: str | None = None,
        node_limit: int = DEFAULT_NODE_LIMIT,
        since: str | None = None,
        until: str | None = None,
        granularity: str | None = None,
    ) -> dict[str, Any]:
        """``{"graph": [GraphNode, ...], "truncated": ..., "nodeLimit": ...}`` around ``node``,
        at most ``node_limit`` nodes; ``as_of`` (a time) and ``run_id`` ask for the graph of the
        events up to that time, or of that run and its relatives; ``since`` and ``until`` (times,
        until exclusive) for the edges a run made within that window; ``granularity`` for the
        view (job, dataset, run or parent; None: job)."""

    @abc.abstractmethod
    def runs(self, namespace: str, name: str, limit: int) -> list[dict[str, Any]]:
        """Marquez ``Run`` objects, most recent first."""

    @abc.abstractmethod
    def events(self, run_id: str) -> list[dict[str, Any]]:
        """The run's raw OpenLineage events in event-time order."""

    def close(self) -> None:
        return None

    def column_lineage(
        self,
        node: str,
        depth: int,
        with_downstream: bool,
        *,
        as_of: str | None = None,
        run_id: str | None = None,
        node_limit: int = DEFAULT_NODE_LIMIT,
        since: str | None = None,
        until: str | None = None,
    ) -> dict[str, Any]:
        """Marquez's column-lineage graph (``DATASET_FIELD`` nodes) around ``node``; ``as_of``:
        as the events up to that time (inclusive) state it; ``run_id``: as that run's events,
        its parents' and its children's state it; ``since``/``until``: as the events within
        that window (until exclusive) state it."""
        raise SourceError(f"{type(self).__name__} cannot answer column lineage", 2)

    def impact(self, node: str, depth: int, *, node_limit: int) -> dict[str, Any]:
        """``GET /api/v1/impact``'s answer: ``{"nodeId", "depth", "impact": [...], "truncated",
        "nodeLimit", "omittedNodes"}``, the nodes downstream of ``node`` nearest first."""
        raise SourceError(f"{type(self).__name__} cannot answer impact", 2)


class HttpSource(LineageSource):
    """The collector's HTTP API (``lineage-collector serve``)."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 30.0) -> None:
        import httpx

        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._httpx = httpx
        self.url = url.rstrip("/")
        self.client = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def _get(self, path: str, params: Mapping[str, str | int] | None = None) -> Any:
        try:
            response = self.client.get(path, params=params)
        except self._httpx.HTTPError as exc:
            raise SourceError(f"cannot reach {self.url}: {exc}") from None
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            if not isinstance(detail, str):
                detail = orjson.dumps(detail).decode()
            code = 2 if response.status_code in (400, 422) else 1
            error = NothingRecorded if response.status_code == 404 else SourceError
            raise error(f"{response.status_code}: {detail[:500]}", code)
        return response.json()

    def lineage(
        self,
        node: str,
        direction: Direction,
        depth: int,
        *,
        as_of: str | None = None,
        run_id: str | None = None,
        node_limit: int = DEFAULT_NODE_LIMIT,
        since: str | None = None,
        until: str | None = None,
        granularity: str | None = None,
    ) -> dict[str, Any]:
        params: dict[str, str | int] = {
            "nodeId": node,
            "depth": depth,
            "direction": direction,
            "nodeLimit": node_limit,
        }
        for name, value in (
            ("asOf", as_of),
            ("runId", run_id),
            ("since", since),
            ("until", until),
            ("granularity", granularity),
        ):
            if value is not None:
                params[name] = value
        answer: dict[str, Any] = self._get("/api/v1/lineage", params)
        return answer

    def runs(self, namespace: str, name: str, limit: int) -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/jobs/{quote(name, safe='')}/runs"
        runs: list[dict[str, Any]] = self._get(path, {"limit": limit})["runs"]
        return runs

    def events(self, run_id: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = self._get(
            f"/api/v1/jobs/runs/{quote(run_id, safe='')}/events"
        )["events"]
        return events

    def close(self) -> None:
        self.client.close()

    def column_lineage(
        self,
        node: str,
        depth: int,
        with_downstream: bool,
        *,
        as_of: str | None = None,
        run_id: str | None = None,
        node_limit: int = DEFAULT_NODE_LIMIT,
        since: str | None = None,
        until: str | None = None,
    ) -> dict[str, Any]:
        params: dict[str, str | int] = {
            "nodeId": node,
            "depth": depth,
            "withDownstream": "true" if with_downstream else "false",
            "nodeLimit": node_limit,
        }
        for name, value in (("asOf", as_of), ("runId", run_id), ("since", since), ("until", until)):
            if value is not None:
                params[name] = value
        answer: dict[str, Any] = self._get("/api/v1/column-lineage", params)
        return answer

    def impact(self, node: str, depth: int, *, node_limit: int) -> dict[str, Any]:
        params: dict[str, str | int] = {"nodeId": node, "depth": depth, "nodeLimit": node_limit}
        answer: dict[str, Any] = self._get("/api/v1/impact", params)
        return answer


class StoreSource(LineageSource):
    """The configured querying store, opened read-side only (no other store is touched)."""

    def __init__(self, config_path: Path | None = None) -> None:
        from lineage_sdk.collector.manager import LineageManager
        from lineage_sdk.config import load_config
        from lineage_sdk.exceptions import ConfigError

        manager = LineageManager(load_config(path=config_path, openlineage_client=False))
        stores = manager.build()  # a wrong store setting is reported as it is
        try:
            store = manager.query_store()
        except ConfigError:
            names = ", ".join(getattr(s, "name", "?") for s in stores)
            raise SourceError(
                f"no configured store answers queries ({names}); configure the sql or graph "
                "store, or pass --url of a collector API",
                2,
            ) from None
        _require_sqlite_file(getattr(store, "url", None))
        opener = getattr(store, "open", None)
        if callable(opener):
            opener()
        self.store = store

    @contextmanager
    def _guard(self) -> Iterator[None]:
        from lineage_sdk.collector.api.queries import NotFound

        try:
            yield
        except NotFound as exc:
            raise NothingRecorded(str(exc)) from None
        except ValueError as exc:
            raise SourceError(str(exc), 2) from None

    def lineage(
        self,
        node: str,
        direction: Direction,
        depth: int,
        *,
        as_of: str | None = None,
        run_id: str | None = None,
        node_limit: int = DEFAULT_NODE_LIMIT,
        since: str | None = None,
        until: str | None = None,
        granularity: str | None = None,
    ) -> dict[str, Any]:
        from lineage_sdk.collector.api import queries
        from lineage_sdk.collector.api.history import parse_instant
        from lineage_sdk.collector.api.views import check_node, read_view

        with self._guard():
            view = read_view(since, until, granularity, as_of=as_of, run_id=run_id, names=CLI_NAMES)
            check_node(node, view.granularity, names=CLI_NAMES)
            when = None if as_of is None else parse_instant(as_of, "--as-of")
            return queries.lineage(
                self.store,
                node,
                direction=direction,
                depth=depth,
                as_of=when,
                run_id=run_id,
                node_limit=node_limit,
                since=view.since,
                until=view.until,
                granularity=view.granularity,
            )

    def runs(self, namespace: str, name: str, limit: int) -> list[dict[str, Any]]:
        from lineage_sdk.collector.api import queries

        with self._guard():
            return queries.runs(self.store, namespace, name, limit=limit)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        from lineage_sdk.collector.api import queries

        with self._guard():
            return queries.run_events(self.store, run_id)

    def close(self) -> None:
        closer = getattr(self.store, "close", None)
        if callable(closer):
            closer()

    def column_lineage(
        self,
        node: str,
        depth: int,
        with_downstream: bool,
        *,
        as_of: str | None = None,
        run_id: str | None = None,
        node_limit: int = DEFAULT_NODE_LIMIT,
        since: str | None = None,
        until: str | None = None,
    ) -> dict[str, Any]:
        from lineage_sdk.collector.api import queries
        from lineage_sdk.collector.api.history import parse_instant
        from lineage_sdk.collector.api.views import read_view

        with self._guard():
            view = read_view(since, until, None, as_of=as_of, run_id=run_id, names=CLI_NAMES)
            when = None if as_of is None else parse_instant(as_of, "--as-of")
            return queries.column_lineage(
                self.store,
                node,
                depth=depth,
                with_downstream=with_downstream,
                as_of=when,
                run_id=run_id,
                node_limit=node_limit,
                since=view.since,
                until=view.until,
            )

    def impact(self, node: str, depth: int, *, node_limit: int) -> dict[str, Any]:
        from lineage_sdk.collector.api.queries import NotFound, parse_node
        from lineage_sdk.collector.watch.impact import impact_answer

        with self._guard():
            parse_node(node)
            try:
                return impact_answer(self.store, node, depth=depth, node_limit=node_limit)
            except LookupError as exc:
                raise NotFound(str(exc)) from None


def _require_sqlite_file(url: Any) -> None:
    """Reading must not create an empty SQLite database where none was (a typo'd path, or a
    directory without the collector's lineage.db)."""
    if not isinstance(url, str) or not url.startswith("sqlite:///"):
        return
    path = url[len("sqlite:///") :].split("?", 1)[0]
    if path and path != ":memory:" and not Path(path).exists():
        raise SourceError(
            f"no lineage database at {path}; point --config at the collector's configuration "
            "or pass --url of a collector API",
            2,
        )


class _Options:
    url: str | None = None
    config: Path | None = None
    api_key: str | None = None


_options = _Options()


def _source() -> LineageSource:
    if _options.url:
        return HttpSource(_options.url, api_key=_options.api_key)
    return StoreSource(_options.config)


@contextmanager
def _open_source() -> Iterator[LineageSource]:
    source = _source()
    try:
        yield source
    finally:
        source.close()


# -------------------------------------------------------------------------------------------
# Rendering


def _nodes(graph: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in graph.get("graph", [])}


def _state(node: Mapping[str, Any]) -> str | None:
    """The latest run's state (a RUN node's own); STALE for a running run whose heartbeats
    stopped (the API keeps Marquez's RUNNING in ``state`` and says STALE in its ``liveness``)."""
    data = node.get("data", {})
    if node.get("type") == "RUN":
        run: Any = data
    else:
        run = data.get("latestRun")
    if isinstance(run, Mapping) and run.get("liveness") == "STALE":
        return "STALE"
    state = run.get("state") if isinstance(run, Mapping) else None
    return state if isinstance(state, str) else None


def _run_parts(node: Mapping[str, Any]) -> tuple[str, str, str]:
    """A RUN node's job namespace, job name and run id."""
    data = node.get("data", {})
    job = data.get("job") if isinstance(data.get("job"), Mapping) else {}
    run_id = data.get("runId") or str(node.get("id", "")).removeprefix("run:")
    return str(job.get("namespace", "")), str(job.get("name", "")), str(run_id)


def _name(node: Mapping[str, Any]) -> str:
    """A node's short name for a drawing: a job's or dataset's name, a run's job and run id."""
    if node.get("type") == "RUN":
        _, job, run_id = _run_parts(node)
        return f"{job} {run_id}"
    return str(node.get("data", {}).get("name", node.get("id", "")))


def _label(node: Mapping[str, Any]) -> Text:
    data = node.get("data", {})
    kind = node.get("type")
    is_job = kind == "JOB"
    text = Text()
    if kind == "RUN":
        namespace, job, run_id = _run_parts(node)
        text.append("run     ", style="bold magenta")
        text.append(namespace, style="dim")
        text.append(":", style="dim")
        text.append(job, style="bold")
        text.append(f" {run_id}", style="dim")
        started = data.get("startedAt")
        if isinstance(started, str):
            text.append(f"  {started}", style="dim")
    else:
        text.append("job     " if is_job else "dataset ", style="bold blue" if is_job else "green")
        text.append(str(data.get("namespace", "")), style="dim")
        text.append(":", style="dim")
        text.append(str(data.get("name", node.get("id", ""))), style="bold" if is_job else "")
        children = data.get("children")
        if is_job and isinstance(children, list) and children:
            text.append(f"  (+{len(children)} child job(s))", style="dim")
    state = _state(node)
    if state:
        failed = state in ("FAILED", "ABORTED", "STALE")
        style = "bold red" if failed else ("green" if state == "COMPLETED" else "yellow")
        text.append(f"  {'✗ ' if failed else ''}{state}", style=style)
    return text


def _children(node: Mapping[str, Any], upstream: bool) -> list[str]:
    """The node's neighbours upstream or downstream. An edge may name the node as its origin
    either way (Marquez's column lineage writes every edge of a node from the node)."""
    me = node.get("id")
    edges = node.get("inEdges" if upstream else "outEdges", [])
    return sorted(e["destination"] if e["origin"] == me else e["origin"] for e in edges)


def _edge_jobs(edge: Mapping[str, Any]) -> list[str]:
    """The job ids a dataset-view edge names (``data.jobs``); none on other edges."""
    data = edge.get("data")
    jobs = data.get("jobs") if isinstance(data, Mapping) else None
    if not isinstance(jobs, list):
        return []
    return [
        f"job:{job.get('namespace')}:{job.get('name')}" for job in jobs if isinstance(job, Mapping)
    ]


def _root_children(
    graph: Mapping[str, Any], nodes: Mapping[str, Any], root: str, upstream: bool
) -> list[str]:
    """The root's neighbours. A job asked in the dataset view is no node of the answer: its
    neighbours are then the inputs (upstream) or outputs of the edges it made, and, when it made
    none, every node of the answer (downstream)."""
    if root in nodes:
        return _children(nodes[root], upstream)
    made = {
        edge["origin"] if upstream else edge["destination"]
        for node in nodes.values()
        for edge in node.get("outEdges", [])
        if root in _edge_jobs(edge)
    }
    if not made and not upstream and root.startswith("job:"):
        return sorted(nodes)
    return sorted(made)


def _tree(
    graph: Mapping[str, Any],
    root: str,
    upstream: bool,
    label: Callable[[Mapping[str, Any]], Text] = _label,
) -> Tree:
    nodes = _nodes(graph)
    title = Text("upstream of " if upstream else "downstream of ", style="italic")
    tree = Tree(title.append_text(label(nodes[root])) if root in nodes else title.append(root))
    shown: set[str] = {root}
    # Iterative depth-first preorder, children sorted: each node is expanded once, and a later
    # meeting (a diamond or a cycle) prints "(shown above)", which is then true on screen.
    stack: list[tuple[Tree, str]] = [
        (tree, child) for child in reversed(_root_children(graph, nodes, root, upstream))
    ]
    while stack:
        parent, current = stack.pop()
        if current not in nodes:
            continue
        text = label(nodes[current])
        if current in shown:
            parent.add(text.append("  (shown above)", style="dim"))
            continue
        shown.add(current)
        branch = parent.add(text)
        stack.extend((branch, c) for c in reversed(_children(nodes[current], upstream)))
    return tree


def _dot_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(graph: Mapping[str, Any], root: str) -> str:
    """Graphviz DOT; every id and label is a quoted, escaped string."""
    lines = [
        "digraph lineage {",
        "  rankdir=LR;",
        '  node [fontname="Helvetica", fontsize=10];',
    ]
    nodes = _nodes(graph)
    for nid in sorted(nodes):
        node = nodes[nid]
        attrs = [f"label={_dot_string(_name(node))}", f"tooltip={_dot_string(nid)}"]
        if node.get("type") == "JOB":
            attrs += ["shape=box", "style=filled", 'fillcolor="#2f6fbf"', "fontcolor=white"]
        elif node.get("type") == "RUN":
            attrs += ["shape=box", 'style="rounded,filled"', 'fillcolor="#7b4fa0"']
            attrs += ["fontcolor=white"]
        else:
            attrs += ["shape=ellipse", "style=filled", 'fillcolor="#2e8b57"', "fontcolor=white"]
        if _state(node) in ("FAILED", "ABORTED"):
            attrs += ['color="#d62828"', "penwidth=3"]
        if nid == root:
            attrs += ["peripheries=2"]
        lines.append(f"  {_dot_string(nid)} [{', '.join(attrs)}];")
    for nid, dest, edge in _out_edges(nodes):
        jobs = ", ".join(_edge_jobs(edge))
        attrs = [f"label={_dot_string(jobs)}"] if jobs else []
        if _is_parent_link(edge):
            attrs.append("style=dashed")
        tail = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f"  {_dot_string(nid)} -> {_dot_string(dest)}{tail};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _out_edges(
    nodes: Mapping[str, Mapping[str, Any]],
) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """Each edge among ``nodes`` once, downstream, as (origin, destination, edge), sorted."""
    for nid in sorted(nodes):
        me = nodes[nid]
        found: dict[str, Mapping[str, Any]] = {}
        for edge in me.get("outEdges", []):
            dest = edge["destination"] if edge["origin"] == nid else edge["origin"]
            if dest in nodes:
                found.setdefault(dest, edge)
        for dest in sorted(found):
            yield nid, dest, found[dest]


def _is_parent_link(edge: Mapping[str, Any]) -> bool:
    data = edge.get("data")
    return isinstance(data, Mapping) and data.get("link") == "parent"


_MERMAID_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _.,/-+@")


def _mermaid_text(value: str) -> str:
    """Mermaid entity codes (``#35;``) for everything outside a small safe set, so quotes,
    brackets, HTML and Markdown in names stay literal text."""
    return "".join(ch if ch in _MERMAID_SAFE else f"#{ord(ch)};" for ch in value)


def to_mermaid(graph: Mapping[str, Any], root: str) -> str:
    """A Mermaid flowchart; node ids are generated (n0, n1, ...), names only appear as labels."""
    nodes = _nodes(graph)
    ids = {nid: f"n{i}" for i, nid in enumerate(sorted(nodes))}
    lines = ["flowchart LR"]
    for nid in sorted(nodes):
        node = nodes[nid]
        label = _mermaid_text(_name(node))
        if node.get("type") == "JOB":
            lines.append(f'  {ids[nid]}["{label}"]')
        elif node.get("type") == "RUN":
            lines.append(f'  {ids[nid]}(["{label}"])')
        else:
            lines.append(f'  {ids[nid]}[("{label}")]')
    for nid, dest, edge in _out_edges(nodes):
        jobs = _mermaid_text(", ".join(_edge_jobs(edge)))
        arrow = "-.->" if _is_parent_link(edge) else "-->"
        lines.append(f"  {ids[nid]} {arrow}{f'|{jobs}|' if jobs else ''} {ids[dest]}")
    lines += [
        "  classDef job fill:#2f6fbf,color:#fff",
        "  classDef dataset fill:#2e8b57,color:#fff",
        "  classDef run fill:#7b4fa0,color:#fff",
        "  classDef failed stroke:#d62828,stroke-width:4px",
        "  classDef root stroke:#f4a259,stroke-width:4px",
    ]
    kinds = {n: nodes[n].get("type") for n in sorted(nodes)}
    for cls, members in (
        ("job", [n for n, kind in kinds.items() if kind == "JOB"]),
        ("run", [n for n, kind in kinds.items() if kind == "RUN"]),
        ("dataset", [n for n, kind in kinds.items() if kind not in ("JOB", "RUN")]),
        ("failed", [n for n in sorted(nodes) if _state(nodes[n]) in ("FAILED", "ABORTED")]),
        ("root", [root] if root in ids else []),
    ):
        if members:
            lines.append(f"  class {','.join(ids[m] for m in members)} {cls}")
    return "\n".join(lines) + "\n"


def _print_json(value: Any) -> None:
    text = dumps_exact(value, option=orjson.OPT_INDENT_2).decode()
    if out.is_terminal:
        out.print(Syntax(text, "json", theme="ansi_dark", background_color="default"))
    else:
        sys.stdout.write(text + "\n")


def _fmt_duration(ms: Any) -> str:
    if not isinstance(ms, int):
        return ""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    if ms < 3_600_000:
        return f"{ms / 60_000:.1f} min"
    return f"{ms / 3_600_000:.1f} h"


def _state_text(state: str) -> Text:
    style = {"FAILED": "bold red", "ABORTED": "red", "COMPLETED": "green", "RUNNING": "yellow"}
    return Text(state, style=style.get(state, ""))


# -------------------------------------------------------------------------------------------
# Commands


def _split_node(node: str, *, want: Literal["JOB"] | None = None) -> tuple[str, str, str]:
    from lineage_sdk.collector.store import parse_node_id

    try:
        node_type, namespace, name = parse_node_id(node)
    except ValueError as exc:
        raise SourceError(str(exc), 2) from None
    if want is not None and node_type != want:
        raise SourceError(f"expected a job node id (job:<namespace>:<name>), got {node!r}", 2)
    return node_type, namespace, name


@app.callback()
def _main(
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            envvar="LINEAGE_API_URL",
            help="Collector API base URL, e.g. http://127.0.0.1:5000. "
            "Without it the configured store is read directly.",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            dir_okay=False,
            help="TOML file with a \\[lineage] table (default: $LINEAGE_CONFIG or ./lineage.toml).",
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(envvar="LINEAGE_API_KEY", help="API key for --url.", show_default=False),
    ] = None,
) -> None:
    """Read lineage from the collector API (--url) or straight from the configured store."""
    _options.url, _options.config, _options.api_key = url, config, api_key


Depth = Annotated[int, typer.Option("--depth", "-d", min=0, max=100, help="Job hops to follow.")]
NodeLimitOption = Annotated[
    int,
    typer.Option(
        "--node-limit",
        min=1,
        max=100_000,
        help="The most nodes to show, nearest the node first; a note says when the graph was cut.",
    ),
]


def _cut_note(answer: Mapping[str, Any], what: str = "nodes") -> None:
    """One line on stderr when the answer was cut at its node limit (stdout stays the answer)."""
    if answer.get("truncated"):
        shown = len(answer.get("graph", ()))
        limit = answer.get("nodeLimit")
        note = f"showing {shown} {what}; the graph was cut at --node-limit {limit}"
        omitted = answer.get("omittedNodes")
        if isinstance(omitted, int) and omitted > 0:
            note += f" ({omitted} more {what} found were left out)"
        err.print(Text(note), style="yellow")


@app.command()
def graph(
    node: Annotated[str, typer.Argument(help="dataset:<namespace>:<name> or job:<ns>:<name>")],
    upstream: Annotated[bool, typer.Option("--upstream", help="Only what feeds the node.")] = False,
    downstream: Annotated[
        bool, typer.Option("--downstream", help="Only what the node feeds.")
    ] = False,
    depth: Depth = 5,
    fmt: Annotated[
        Literal["tree", "json", "dot", "mermaid"],
        typer.Option("--format", "-f", help="tree (default), json (Marquez), dot or mermaid."),
    ] = "tree",
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="The graph as the events up to this time describe it (RFC 3339, or "
            "YYYY-MM-DD for that day's start).",
        ),
    ] = None,
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            help="Only the graph this run's events state, with its parent and child runs' "
            "(with --as-of: those up to that time).",
        ),
    ] = None,
    node_limit: NodeLimitOption = DEFAULT_NODE_LIMIT,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Only the edges a run made at or after this time (RFC 3339, or YYYY-MM-DD for "
            "that day's start); not with --as-of or --run.",
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            help="Only the edges a run made before this time (exclusive; RFC 3339 or "
            "YYYY-MM-DD); not with --as-of or --run.",
        ),
    ] = None,
    granularity: Annotated[
        Granularity | None,
        typer.Option(
            "--granularity",
            "-g",
            help="job (default): jobs and datasets; dataset: datasets alone, each edge naming "
            "its jobs; run: runs and the datasets they read and wrote (the node may be "
            "run:<runId>); parent: child jobs folded into their root job.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Print the lineage graph around a job, dataset or run (run:<runId>, with --granularity
    run)."""
    from lineage_sdk.collector.api.views import check_node, read_view
    from lineage_sdk.collector.engine.views import RUN_PREFIX

    try:
        view = read_view(since, until, granularity, as_of=as_of, run_id=run, names=CLI_NAMES)
        check_node(node, view.granularity, names=CLI_NAMES)
    except ValueError as exc:
        raise SourceError(str(exc), 2) from None
    if not node.startswith(RUN_PREFIX):
        _split_node(node)
    direction: Direction = (
        "upstream"
        if upstream and not downstream
        else "downstream"
        if downstream and not upstream
        else "both"
    )
    with _open_source() as source:
        answer = source.lineage(
            node,
            direction,
            depth,
            as_of=as_of,
            run_id=run,
            node_limit=node_limit,
            since=since,
            until=until,
            granularity=granularity,
        )
    node = _asked_node(answer, node, folded=view.granularity == "parent")
    _cut_note(answer)
    if fmt == "json":
        _print_json(answer)
    elif fmt == "dot":
        sys.stdout.write(to_dot(answer, node))
    elif fmt == "mermaid":
        sys.stdout.write(to_mermaid(answer, node))
    else:
        for is_up in (True, False):
            if direction == "both" or (direction == "upstream") == is_up:
                out.print(_tree(answer, node, upstream=is_up))


@app.command()
def impact(
    node: Annotated[str, typer.Argument(help="job:<namespace>:<name> or dataset:<ns>:<name>")],
    depth: Depth = 20,
    fmt: Annotated[
        Literal["table", "json", "csv"],
        typer.Option("--format", "-f", help="table, json (the API's items) or csv."),
    ] = "table",
    node_limit: NodeLimitOption = DEFAULT_NODE_LIMIT,
) -> None:
    """List everything downstream of a job or dataset (what breaks if it fails), nearest
    first, with each node's distance (edges along the data flow), latest run state and
    owners."""
    _split_node(node)
    with _open_source() as source:
        answer = source.impact(node, depth, node_limit=node_limit)
    node = _asked_node(answer, node)
    items: list[dict[str, Any]] = list(answer.get("impact") or [])
    if answer.get("truncated"):
        _cut_note({**answer, "graph": [None] * (len(items) + 1)})  # the node counts as one
    if fmt == "json":
        _print_json(items)
        return
    if fmt == "csv":
        _print_impact_csv(items)
        return
    jobs = sum(1 for i in items if i.get("type") == "JOB")
    title = Text(f"{jobs} job(s) and {len(items) - jobs} dataset(s) downstream of ")
    title.append(node, style="bold")
    table = Table(title=title, title_justify="left")
    table.add_column("distance", justify="right")
    table.add_column("type", no_wrap=True)
    table.add_column("namespace", overflow="fold")
    table.add_column("name", overflow="fold")
    table.add_column("latest run", no_wrap=True)
    table.add_column("owners", overflow="fold")
    for item in items:
        is_job = item.get("type") == "JOB"
        state = _impact_state(item)
        table.add_row(
            str(item.get("distance", "")),
            Text("job" if is_job else "dataset", style="blue" if is_job else "green"),
            Text(str(item.get("namespace", ""))),
            Text(str(item.get("name", ""))),
            _state_text(state) if state else Text(""),
            Text(_owners_text(item.get("owners"))),
        )
    out.print(table)


def _impact_state(item: Mapping[str, Any]) -> str | None:
    """An impact item's latest run state; STALE for a running run whose heartbeats stopped."""
    run = item.get("latestRun")
    if not isinstance(run, Mapping):
        return None
    if run.get("liveness") == "STALE":
        return "STALE"
    state = run.get("state")
    return state if isinstance(state, str) else None


def _owners_text(owners: Any) -> str:
    """Owners as one line: ``name (type)``, comma separated."""
    found = [o for o in owners if isinstance(o, Mapping)] if isinstance(owners, list) else []
    return ", ".join(
        f"{o.get('name')} ({o['type']})" if o.get("type") else str(o.get("name")) for o in found
    )


def _print_impact_csv(items: Sequence[Mapping[str, Any]]) -> None:
    """One row per node (RFC 4180, a header first); owners in one cell."""
    import csv

    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(
        ["nodeId", "type", "namespace", "name", "distance", "latestRunId", "latestState", "owners"]
    )
    for item in items:
        run = item.get("latestRun")
        writer.writerow(
            [
                item.get("nodeId", ""),
                item.get("type", ""),
                item.get("namespace", ""),
                item.get("name", ""),
                item.get("distance", ""),
                run.get("id", "") if isinstance(run, Mapping) else "",
                _impact_state(item) or "",
                _owners_text(item.get("owners")),
            ]
        )


@app.command()
def runs(
    node: Annotated[str, typer.Argument(help="job:<namespace>:<name>")],
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000)] = 20,
    fmt: Annotated[
        Literal["table", "json"], typer.Option("--format", "-f", help="table or json.")
    ] = "table",
) -> None:
    """Show a job's recent runs with their state and duration."""
    _, namespace, name = _split_node(node, want="JOB")
    with _open_source() as source:
        found = source.runs(namespace, name, limit)
    if fmt == "json":
        _print_json(found)
        return
    if not found:
        raise SourceError(f"no runs are recorded for {node!r}")
    table = Table(title=Text(f"runs of {node}"), title_justify="left")
    for column in ("run id", "state", "started", "ended", "duration"):
        table.add_column(column, no_wrap=column == "run id", overflow="fold")
    for run in found:
        table.add_row(
            Text(str(run.get("id", ""))),
            _state_text(str(run.get("state", ""))),
            Text(str(run.get("startedAt", ""))),
            Text(str(run.get("endedAt", ""))),
            Text(_fmt_duration(run.get("durationMs"))),
        )
    out.print(table)


@app.command()
def events(
    run_id: Annotated[str, typer.Argument(help="The run's UUID.")],
    fmt: Annotated[
        Literal["pretty", "jsonl"],
        typer.Option("--format", "-f", help="pretty (indented) or jsonl (one event a line)."),
    ] = "pretty",
) -> None:
    """Print a run's OpenLineage events in event-time order."""
    with _open_source() as source:
        found = source.events(run_id)
    if fmt == "jsonl":
        for event in found:
            sys.stdout.write(dumps_exact(event).decode() + "\n")  # beyond 64 bits too
        return
    for event in found:
        raw_job = event.get("job")
        job: Mapping[str, Any] = raw_job if isinstance(raw_job, Mapping) else {}
        header = Text()
        header.append(str(event.get("eventTime", "")), style="dim")
        header.append("  ")
        header.append(str(event.get("eventType", event.get("schemaURL", "event"))), style="bold")
        header.append(f"  {job.get('namespace', '')}:{job.get('name', '')}")
        out.print(header)
        _print_json(event)


def _field_label(node: Mapping[str, Any]) -> Text:
    data = node.get("data", {})
    text = Text()
    text.append("field ", style="magenta")
    text.append(f"{data.get('namespace', '')}:", style="dim")
    text.append(str(data.get("dataset", "")))
    text.append(".", style="dim")
    text.append(str(data.get("field", node.get("id", ""))), style="bold")
    return text


def _how(graph: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """(input id, output id) -> a short word on the transformation, where the facet gives one."""
    how: dict[tuple[str, str], str] = {}
    for node in graph.get("graph", []):
        for item in node.get("data", {}).get("inputFields", []):
            src = f"datasetField:{item['namespace']}:{item['dataset']}:{item['field']}"
            words = [
                "/".join(str(t[k]) for k in ("type", "subtype") if t.get(k))
                for t in item.get("transformations", [])
                if isinstance(t, Mapping)
            ]
            words += [str(item[k]) for k in ("transformationType",) if item.get(k)]
            if words:
                how[(src, node["id"])] = ", ".join(w for w in words if w)
    return how


def _column_answer(
    source: LineageSource,
    target: str,
    depth: int,
    with_downstream: bool,
    as_of: str | None = None,
    run_id: str | None = None,
    node_limit: int = DEFAULT_NODE_LIMIT,
    since: str | None = None,
    until: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """The asked node id and its answer. ``<ns>:<name>`` may omit ``dataset:``; a last ``:part``
    is read as a field when no dataset has the whole name."""
    from lineage_sdk.collector.columns import parse_column_node

    if target.startswith("job:"):
        raise SourceError(
            f"lineage columns takes a dataset or a field, got the job {target!r}: ask for each "
            "dataset it writes (lineage graph lists them)",
            2,
        )
    if not target.startswith(("dataset:", "datasetField:")):
        target = f"dataset:{target}"
    candidates = [target]
    if target.startswith("dataset:"):
        head, sep, col = target[len("dataset:") :].rpartition(":")
        if sep and head and col:
            candidates.append(f"datasetField:{head}:{col}")
    usable: list[str] = []
    problem = ""
    for node in candidates:
        try:
            parse_column_node(node)
        except ValueError as exc:
            problem = problem or str(exc)
            continue
        usable.append(node)
    if not usable:
        raise SourceError(problem, 2)
    missing: list[str] = []
    for node in usable:
        try:
            return node, source.column_lineage(
                node,
                depth,
                with_downstream,
                as_of=as_of,
                run_id=run_id,
                node_limit=node_limit,
                since=since,
                until=until,
            )
        except NothingRecorded as exc:
            missing.append(str(exc))
    raise NothingRecorded(
        missing[0] if len(missing) == 1 else f"{missing[0]}; as a field: {missing[1]}"
    )


@app.command()
def columns(
    target: Annotated[
        str,
        typer.Argument(
            help="dataset:<namespace>:<name>[:<field>] (or <namespace>:<name>[:<field>], or "
            "datasetField:<namespace>:<name>:<field>)"
        ),
    ],
    upstream: Annotated[
        bool, typer.Option("--upstream", help="Only the fields it derives from.")
    ] = False,
    downstream: Annotated[
        bool, typer.Option("--downstream", help="Only the fields derived from it.")
    ] = False,
    depth: Annotated[
        int, typer.Option("--depth", "-d", min=0, max=100, help="Column hops to follow.")
    ] = 5,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print Marquez's column-lineage JSON instead.")
    ] = False,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="The column lineage as the events up to this time state it (RFC 3339, or "
            "YYYY-MM-DD for that day's start).",
        ),
    ] = None,
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            help="Only the column lineage this run's events state, with its parent and child "
            "runs' (with --as-of: those up to that time).",
        ),
    ] = None,
    node_limit: NodeLimitOption = DEFAULT_NODE_LIMIT,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="As the events at or after this time state it (RFC 3339 or YYYY-MM-DD); "
            "not with --as-of or --run.",
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            help="As the events before this time state it (exclusive; RFC 3339 or YYYY-MM-DD); "
            "not with --as-of or --run.",
        ),
    ] = None,
) -> None:
    """Show column lineage: the fields a field (or each field of a dataset) derives from, and
    with --downstream the fields derived from it, from the columnLineage facet."""
    from lineage_sdk.collector.api.views import read_view

    try:
        read_view(since, until, None, as_of=as_of, run_id=run, names=CLI_NAMES)
    except ValueError as exc:
        raise SourceError(str(exc), 2) from None
    want_up = upstream or not downstream
    want_down = downstream or not upstream
    with _open_source() as source:
        node, answer = _column_answer(
            source,
            target,
            depth,
            want_down,
            as_of,
            run_id=run,
            node_limit=node_limit,
            since=since,
            until=until,
        )
    node = _asked_node(answer, node)
    _cut_note(answer, "fields")
    if as_json:
        _print_json(answer)
        return
    nodes = _nodes(answer)
    roots = [n["id"] for n in answer.get("graph", []) if _is_root(n, node)]
    for root in roots:
        for is_up in (True, False):
            if (want_up if is_up else want_down) and root in nodes:
                out.print(_tree(answer, root, upstream=is_up, label=_field_label))
    how = _how(answer)
    if how:
        table = Table(title=Text("transformations"), title_justify="left")
        for column in ("input field", "output field", "how"):
            table.add_column(column, overflow="fold")
        for (src, dst), words in sorted(how.items()):
            table.add_row(
                _field_label(nodes.get(src, {"id": src})),
                _field_label(nodes.get(dst, {"id": dst})),
                Text(words),
            )
        out.print(table)


def _asked_node(answer: Mapping[str, Any], node: str, *, folded: bool = False) -> str:
    """The node an answer starts at: ``node``, or the dataset it is another name of (the
    answer's ``nodeId``), or with ``folded`` (the parent view) the root job it is folded into,
    said on stderr."""
    found = answer.get("nodeId")
    if not isinstance(found, str) or found == node:
        return node
    said = f"{node} is folded into {found}" if folded else f"{node} is a name of {found}"
    err.print(Text(said), style="dim")
    return found


def _is_root(node: Mapping[str, Any], asked: str) -> bool:
    """Whether ``node`` is one of the asked fields (the field, or a field of the dataset)."""
    data = node.get("data", {})
    if asked.startswith("datasetField:"):
        return bool(node.get("id") == asked)
    return asked == f"dataset:{data.get('namespace')}:{data.get('dataset')}"


def main(argv: Sequence[str] | None = None) -> None:
    """Console script. Exit 0 on success, 1 when nothing is found or a source is unavailable,
    2 on usage errors (a bad node id, a bad option, a configuration error)."""
    from lineage_sdk.config import redact
    from lineage_sdk.exceptions import ConfigError

    args = list(sys.argv[1:] if argv is None else argv)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out.width = 200  # piped: no terminal to fit, so don't cut run ids and names short
    if not err.is_terminal and "COLUMNS" not in os.environ:
        err.width = 1000  # an error stays one line, however long the names in it
    try:
        app(args=args, prog_name="lineage", standalone_mode=False)
    except SourceError as exc:
        err.print(Text(f"lineage: {redact(str(exc))}", style="red"))
        raise SystemExit(exc.exit_code) from None
    except ConfigError as exc:
        err.print(Text(f"lineage: {redact(str(exc))}", style="red"))
        raise SystemExit(2) from None
    except LineageError as exc:
        err.print(Text(f"lineage: {redact(str(exc))}", style="red"))
        raise SystemExit(1) from None
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:
        raise SystemExit(1) from None
    except typer.TyperException as exc:  # usage errors (typer vendors click; not `click.*`)
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            err.print(Text(f"lineage: {exc.format_message()}", style="red"))
        raise SystemExit(exc.exit_code) from None
    except BrokenPipeError:  # `lineage ... | head`
        raise SystemExit(0) from None
    raise SystemExit(0)


if __name__ == "__main__":
    main()
