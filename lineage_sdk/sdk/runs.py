"""The live state of a lineage run, kept on the application thread while its span is open.

It holds only what the application knows cheaply (ids, names, datasets, the exception); the
worker thread turns it into OpenLineage events later.
"""

from __future__ import annotations

import contextvars
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lineage_sdk.models.dataset import LineageDataset, facets_to_dicts

__all__ = ["LineageRun", "NoopRun", "ParentRef", "current_run"]


@dataclass(frozen=True, slots=True)
class ParentRef:
    """A run another run is nested in: enough for the ``parent`` facet (and its ``root``)."""

    run_id: str
    job_namespace: str
    job_name: str
    root: ParentRef | None = None

    @property
    def root_or_self(self) -> ParentRef:
        return self.root if self.root is not None else self


class LineageRun:
    """One run of a job. Returned by ``current_run()`` inside a lineage run.

    Datasets discovered while the run executes are added with ``add_input``/``add_output``;
    they appear on the run's COMPLETE or FAIL event.

    ``inputs`` and ``outputs`` only ever grow. They start as the tuples the run was declared with
    (shared by every run of a decorated function, so nothing is copied per call and the worker can
    reuse their JSON), and become lists on the first dataset added at run time.
    """

    __slots__ = (
        "common_facets",
        "common_facets_json",
        "error",
        "inputs",
        "job_facets",
        "job_json",
        "job_name",
        "job_namespace",
        "outputs",
        "parent",
        "run_facets",
        "run_id",
        "span_id",
        "trace_id",
    )

    def __init__(
        self,
        run_id: str,
        job_namespace: str,
        job_name: str,
        inputs: Sequence[LineageDataset],
        outputs: Sequence[LineageDataset],
        run_facets: Mapping[str, Any],
        job_facets: Mapping[str, Any],
        parent: ParentRef | None,
    ) -> None:
        self.run_id = run_id
        self.job_namespace = job_namespace
        self.job_name = job_name
        self.inputs: Sequence[LineageDataset] = inputs
        self.outputs: Sequence[LineageDataset] = outputs
        self.run_facets = run_facets
        self.job_facets = job_facets
        self.parent = parent
        self.error: tuple[type[BaseException], BaseException, types.TracebackType | None] | None = (
            None
        )
        self.trace_id = 0
        self.span_id = 0
        # The facets every event of this run repeats (parent, trace), built once by the worker.
        self.common_facets: dict[str, Any] | None = None
        self.common_facets_json: bytes | None = None
        self.job_json: bytes | None = None

    def add_input(self, dataset: LineageDataset) -> None:
        """Record a dataset this run read, discovered at run time."""
        if not isinstance(dataset, LineageDataset):
            raise TypeError(f"add_input takes a LineageDataset, got {type(dataset).__name__}")
        inputs = self.inputs
        if isinstance(inputs, list):
            inputs.append(dataset)
        else:  # copy on first append; a reader holding the old tuple still sees a valid prefix
            self.inputs = [*inputs, dataset]

    def add_output(self, dataset: LineageDataset) -> None:
        """Record a dataset this run wrote, discovered at run time."""
        if not isinstance(dataset, LineageDataset):
            raise TypeError(f"add_output takes a LineageDataset, got {type(dataset).__name__}")
        outputs = self.outputs
        if isinstance(outputs, list):
            outputs.append(dataset)
        else:
            self.outputs = [*outputs, dataset]

    def add_run_facets(self, facets: Mapping[str, Any]) -> None:
        """Attach run facets (dicts with ``_schemaURL`` or pydantic facet models) to the run."""
        converted = facets_to_dicts(facets, owner=f"run {self.run_id}")
        self.run_facets = {**self.run_facets, **converted}

    def as_parent(self) -> ParentRef:
        """This run as the parent of a run nested in it."""
        root = self.parent.root_or_self if self.parent is not None else None
        return ParentRef(self.run_id, self.job_namespace, self.job_name, root)

    @property
    def is_recording(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"LineageRun(job={self.job_namespace}/{self.job_name}, run_id={self.run_id})"


class NoopRun:
    """What ``current_run()`` returns outside a run or with lineage disabled: every call is free."""

    __slots__ = ()
    run_id: str | None = None
    job_namespace: str | None = None
    job_name: str | None = None

    def add_input(self, dataset: LineageDataset) -> None:
        return None

    def add_output(self, dataset: LineageDataset) -> None:
        return None

    def add_run_facets(self, facets: Mapping[str, Any]) -> None:
        return None

    @property
    def is_recording(self) -> bool:
        return False


NOOP_RUN = NoopRun()

CURRENT_RUN: contextvars.ContextVar[LineageRun | None] = contextvars.ContextVar(
    "lineage_sdk_current_run", default=None
)


def current_run() -> LineageRun | NoopRun:
    """The innermost lineage run active in this context, or a no-op stand-in."""
    run = CURRENT_RUN.get()
    return NOOP_RUN if run is None else run
