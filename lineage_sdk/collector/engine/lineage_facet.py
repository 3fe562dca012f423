"""The explicit ``lineage`` facet (LineageFacet 1-0-0) as the engine's rows.

The facet states what feeds what, at entity and at field level, in two forms: a job facet
``lineage`` whose ``entries`` each name a target (a dataset, fed by ``inputs`` and per-field
``fields``; or a job, fed by ``inputs``), and a dataset facet ``lineage`` (``inputs`` and
``fields``) whose target is the dataset carrying it. An input is a dataset (with an optional
``field``) or a job (the event's own job when it names none).

Our rows hold job <-> dataset edges and field -> field column edges only, so the facet maps
onto them as follows (docs/api.md, "The lineage facet"), every edge *declared* at the event's
time whatever the event's kind:

* **Target dataset T** (a job facet's dataset entry; a dataset facet on an event's output): a
  dataset input S means the event's job reads S and writes T; a job input means that job writes
  T. A field input ``S.g`` of ``fields.f`` is also the column edge ``S.g -> T.f`` of the event's
  job, its ``transformations`` kept as a ``columnLineage`` facet's are. An input without a field
  (or a field of an entity-level input: a dataset-wide dependency) is the table edge only.
* **A dataset facet on an input, or on a DatasetEvent's dataset**: the event's job did not make
  that dataset, so its dataset inputs make no table edge; field inputs are column edges without
  a job (as a DatasetEvent's ``columnLineage``), job inputs as above.
* **Target job K** (a job entry; none named: the event's own job): each dataset input is read
  by K. A job feeding a job has no row of ours (jobs meet through datasets) and is not kept.
* **Another job** than the event's own is taken only from an event filed under that job's
  namespace: ingest checks a key against the event's namespaces, so an event may not state the
  lineage of another namespace's job. ``runId`` is not kept.

What is malformed (an entry or input not an object, a ``type`` other than the schema's, a
dataset without ``namespace`` and ``name`` strings, a job with only one of them, ``inputs`` not
a list, ``fields`` not an object, a field's entry without ``inputs``, a ``field`` or a
transformation that is not what the schema says) or names a field the event's own ``schema``
facet of that dataset does not list, is skipped, the rest of the facet kept; ``problems`` says
what, and :func:`warn_skipped` logs it once per event where events are written. The event is
stored as sent. Keys the schema does not name are ignored (JSON Schema allows them).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from lineage_sdk.collector.backend import Io, Key, NodeKind, Role
from lineage_sdk.collector.columns import edge_info
from lineage_sdk.collector.store import FieldRef, LineageRecord
from lineage_sdk.collector.symlinks import event_aliases

__all__ = ["FacetLineage", "facet_lineage", "has_lineage", "warn_skipped"]

_log = logging.getLogger(__name__)

_KEY = "lineage"
#: Problems a warning lists before "and N more".
_SHOWN = 5


@dataclass(slots=True)
class FacetLineage:
    """What the ``lineage`` facets of one event state, as rows of our model."""

    #: (job, dataset, io): declared edges.
    edges: set[tuple[Key, Key, Io]] = field(default_factory=set)
    #: (output field, input field, job or None) -> info: column edges.
    columns: dict[tuple[FieldRef, FieldRef, Key | None], str] = field(default_factory=dict)
    #: What was skipped, each with where it is in the event.
    problems: list[str] = field(default_factory=list)

    def named(self, own: Key | None) -> Iterable[tuple[NodeKind, Key, Role]]:
        """The nodes the edges name: each dataset as read or written, each job but the event's
        own job ``own`` (named by the event itself) by what it does."""
        for job, dataset, io in self.edges:
            role: Role = "input" if io == "in" else "output"
            yield "DATASET", dataset, role
            if job != own:
                yield "JOB", job, role


def _is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return type(value) is dict or isinstance(value, Mapping)


def has_lineage(rec: LineageRecord) -> bool:
    """Whether the event carries a ``lineage`` facet (the cheap test on the write path)."""
    job = rec.event.get("job")
    facets = job.get("facets") if _is_map(job) else None
    if _is_map(facets) and _KEY in facets:
        return True
    return any(_KEY in ref.facets for ref in (*rec.inputs, *rec.outputs))


def facet_lineage(rec: LineageRecord) -> FacetLineage | None:
    """The rows the event's ``lineage`` facets state (see the module); None without any."""
    if not has_lineage(rec):
        return None
    return _Reader(rec).read()


def warn_skipped(records: Iterable[LineageRecord]) -> None:
    """One warning per event whose ``lineage`` facet had parts skipped, naming the event."""
    for rec in records:
        found = facet_lineage(rec)
        if found is None or not found.problems:
            continue
        shown = "; ".join(found.problems[:_SHOWN])
        more = len(found.problems) - _SHOWN
        _log.warning(
            "event %s: %d part(s) of its lineage facet skipped (the event is stored as sent): %s%s",
            rec.event_id,
            len(found.problems),
            shown,
            f"; and {more} more" if more > 0 else "",
        )


class _Reader:
    """One event's facets read once: names resolved as its column lineage resolves them."""

    def __init__(self, rec: LineageRecord) -> None:
        self.rec = rec
        self.out = FacetLineage()
        job = rec.event.get("job")
        ns, name = (job.get("namespace"), job.get("name")) if _is_map(job) else (None, None)
        own = (ns, name) if type(ns) is str and type(name) is str and ns and name else None
        self.job: Key | None = own if rec.kind != "dataset" else None
        #: The namespace the event is filed under: another job must be in it.
        dataset = rec.event.get("dataset") if rec.kind == "dataset" else None
        sent = dataset.get("namespace") if _is_map(dataset) else None
        self.filed = sent if rec.kind == "dataset" else (own[0] if own else None)
        self.aliases = event_aliases(rec.event)
        self.schemas: dict[Key, set[str]] = {}
        for ref in (*rec.inputs, *rec.outputs):
            names = _schema_names(ref.facets.get("schema"))
            if names is not None:
                self.schemas.setdefault((ref.namespace, ref.name), set()).update(names)

    def read(self) -> FacetLineage:
        job = self.rec.event.get("job")
        facets = job.get("facets") if _is_map(job) else None
        if self.job is not None and _is_map(facets) and _KEY in facets:
            self._job_facet(facets[_KEY])
        for ref in (*self.rec.inputs, *self.rec.outputs):
            if _KEY in ref.facets:
                where = f"{ref.role} {ref.namespace}:{ref.name} facets.lineage"
                writer = self.job if ref.role == "output" and self.rec.kind != "dataset" else None
                self._dataset(where, ref.facets[_KEY], (ref.namespace, ref.name), writer)
        return self.out

    # -- the two forms ------------------------------------------------------------------------

    def _job_facet(self, facet: Any) -> None:
        where = "job facets.lineage"
        entries = facet.get("entries") if _is_map(facet) else None
        if type(entries) is not list:
            self._bad(where, "entries must be a list")
            return
        for i, entry in enumerate(entries):
            at = f"{where}.entries[{i}]"
            if not _is_map(entry):
                self._bad(at, "not an object")
            elif entry.get("type") == "DATASET":
                target = self._dataset_name(at, entry)
                if target is not None:
                    self._dataset(at, entry, target, self.job)
            elif entry.get("type") == "JOB":
                self._job_entry(at, entry)
            else:
                self._bad(at, f"type must be DATASET or JOB, not {entry.get('type')!r:.40}")

    def _job_entry(self, at: str, entry: Mapping[str, Any]) -> None:
        target = self._job_name(at, entry)
        if target is None:
            return
        for i, item in self._inputs(at, entry.get("inputs"), required=False):
            if item.get("type") != "DATASET":
                self._input_type(f"{at}.inputs[{i}]", item)  # a job feeding a job: no row
                continue
            source = self._dataset_name(f"{at}.inputs[{i}]", item)
            if source is not None and self._field_ok(f"{at}.inputs[{i}]", item, source):
                self._edge(target, source, "in")

    def _dataset(self, at: str, spec: Any, target: Key, writer: Key | None) -> None:
        """A target dataset's ``inputs`` and ``fields``; ``writer`` the job that made it."""
        if not _is_map(spec):
            self._bad(at, "not an object")
            return
        for i, item in self._inputs(at, spec.get("inputs"), required=False):
            self._source(f"{at}.inputs[{i}]", item, target, writer, None)
        fields = spec.get("fields")
        if fields is None:
            return
        if not _is_map(fields):
            self._bad(f"{at}.fields", "must be an object")
            return
        known = self.schemas.get(target)
        for name, entry in fields.items():
            where = f"{at}.fields.{name}"
            if known is not None and name not in known:
                self._bad(where, f"{target[0]}:{target[1]} has no field {name!r}")
                continue
            if not _is_map(entry):
                self._bad(where, "not an object")
                continue
            out = FieldRef(*target, name)
            for i, item in self._inputs(where, entry.get("inputs"), required=True):
                self._source(f"{where}.inputs[{i}]", item, target, writer, out)

    def _source(
        self,
        at: str,
        item: Mapping[str, Any],
        target: Key,
        writer: Key | None,
        out: FieldRef | None,
    ) -> None:
        """One input of a target dataset (of its field ``out`` when given)."""
        if item.get("type") == "JOB":
            job = self._job_name(at, item)
            if job is not None:
                self._edge(job, target, "out")
            return
        if item.get("type") != "DATASET":
            self._input_type(at, item)
            return
        source = self._dataset_name(at, item)
        if source is None or not self._field_ok(at, item, source):
            return
        transformations = item.get("transformations")
        if transformations is not None and not _transformations_ok(transformations):
            self._bad(at, "transformations must be a list of objects each with a string type")
            return
        if writer is not None:
            self._edge(writer, source, "in")
            self._edge(writer, target, "out")
        col = item.get("field")
        if out is not None and type(col) is str:
            key = (out, FieldRef(*source, col), writer)
            info = edge_info(item, {})
            known = self.out.columns.get(key)
            if known is None or info > known:
                self.out.columns[key] = info

    # -- names and checks -------------------------------------------------------------------------

    def _inputs(
        self, at: str, value: Any, *, required: bool
    ) -> Iterable[tuple[int, Mapping[str, Any]]]:
        if value is None and not required:
            return
        if type(value) is not list:
            self._bad(f"{at}.inputs", "must be a list")
            return
        for i, item in enumerate(value):
            if _is_map(item):
                yield i, item
            else:
                self._bad(f"{at}.inputs[{i}]", "not an object")

    def _dataset_name(self, at: str, item: Mapping[str, Any]) -> Key | None:
        ns, name = item.get("namespace"), item.get("name")
        if type(ns) is not str or type(name) is not str or not ns or not name:
            self._bad(at, "a dataset needs namespace and name strings")
            return None
        return self.aliases.get((ns, name), (ns, name))

    def _job_name(self, at: str, item: Mapping[str, Any], *, kept: bool = True) -> Key | None:
        """The job ``item`` names (the event's own when it names none); None when malformed,
        or, when ``kept`` (it will make a row), another namespace's."""
        ns, name = item.get("namespace"), item.get("name")
        if ns is None and name is None:
            if self.job is None:
                self._bad(at, "names no job, and the event has none")
            return self.job
        if type(ns) is not str or type(name) is not str or not ns or not name:
            self._bad(at, "a job needs both namespace and name strings, or neither")
            return None
        if kept and ns != self.filed:
            self._bad(at, f"job {ns}:{name} is not in the event's namespace {self.filed!r}")
            return None
        return (ns, name)

    def _field_ok(self, at: str, item: Mapping[str, Any], dataset: Key) -> bool:
        col = item.get("field")
        if col is None:
            return True
        if type(col) is not str or not col:
            self._bad(at, "field must be a non-empty string")
            return False
        known = self.schemas.get(dataset)
        if known is not None and col not in known:
            self._bad(at, f"{dataset[0]}:{dataset[1]} has no field {col!r}")
            return False
        return True

    def _input_type(self, at: str, item: Mapping[str, Any]) -> None:
        if item.get("type") == "JOB":
            self._job_name(at, item, kept=False)  # a job feeding a job: checked, not kept
        else:
            self._bad(at, f"type must be DATASET or JOB, not {item.get('type')!r:.40}")

    def _edge(self, job: Key, dataset: Key, io: Io) -> None:
        self.out.edges.add((job, dataset, io))

    def _bad(self, at: str, why: str) -> None:
        self.out.problems.append(f"{at}: {why}")


def _transformations_ok(value: Any) -> bool:
    return type(value) is list and all(_is_map(t) and type(t.get("type")) is str for t in value)


def _schema_names(facet: Any) -> set[str] | None:
    """The field names a ``schema`` facet lists (nested ones also as ``parent.child``); None
    when it lists none, so nothing is judged unknown by it."""
    fields = facet.get("fields") if _is_map(facet) else None
    if type(fields) is not list or not fields:
        return None
    names: set[str] = set()
    stack: list[tuple[str, Any]] = [("", fields)]
    while stack:
        prefix, level = stack.pop()
        for item in level if type(level) is list else ():
            name = item.get("name") if _is_map(item) else None
            if type(name) is str:
                names.add(name)
                names.add(prefix + name)
                stack.append((f"{prefix}{name}.", item.get("fields")))
    return names
