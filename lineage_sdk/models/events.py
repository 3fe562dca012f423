"""OpenLineage 2-0-2 events (RunEvent, DatasetEvent, JobEvent) and their runs, jobs, datasets.

:class:`LineageEvent` is the base the three share (the Data Lineage API's name for "an
OpenLineage event"): ``isinstance(event, LineageEvent)`` holds for each of them, and it is what the
collector accepts. ``BaseEvent`` is the same class under its earlier name.
"""

from __future__ import annotations

import enum
from typing import ClassVar

from lineage_sdk.models._base import LineageModel, RunId, Timestamp, UriStr, wire
from lineage_sdk.models.constants import (
    DATASET_EVENT_SCHEMA_URL,
    JOB_EVENT_SCHEMA_URL,
    RUN_EVENT_SCHEMA_URL,
)
from lineage_sdk.models.facets import (
    DatasetFacets,
    InputDatasetFacets,
    JobFacets,
    OutputDatasetFacets,
    RunFacets,
)

__all__ = [
    "BaseEvent",
    "Dataset",
    "DatasetEvent",
    "EventType",
    "InputDataset",
    "Job",
    "JobEvent",
    "LineageEvent",
    "OutputDataset",
    "Run",
    "RunEvent",
    "StaticDataset",
]


class EventType(enum.StrEnum):
    """The run state transition a RunEvent reports."""

    START = "START"
    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    ABORT = "ABORT"
    FAIL = "FAIL"
    OTHER = "OTHER"


class Run(LineageModel):
    """One execution of a job; ``runId`` should be a UUIDv7 (the spec's recommendation)."""

    run_id: RunId = wire("runId")
    facets: RunFacets | None = None


class Job(LineageModel):
    """A job, identified by ``namespace`` and ``name``."""

    namespace: str
    name: str
    facets: JobFacets | None = None


class Dataset(LineageModel):
    """A dataset, identified by ``namespace`` and ``name`` (see the OpenLineage naming doc)."""

    namespace: str
    name: str
    facets: DatasetFacets | None = None


class InputDataset(Dataset):
    """A dataset a run read."""

    input_facets: InputDatasetFacets | None = wire("inputFacets", default=None)


class OutputDataset(Dataset):
    """A dataset a run wrote."""

    output_facets: OutputDatasetFacets | None = wire("outputFacets", default=None)


class StaticDataset(Dataset):
    """The dataset of a DatasetEvent (metadata about a dataset, outside any run)."""


class LineageEvent(LineageModel):
    """An OpenLineage event: the base of :class:`RunEvent`, :class:`DatasetEvent` and
    :class:`JobEvent`, with what every event has (when, who produced it, which schema it follows).

    Build one of the three subclasses, or parse any event with
    :func:`lineage_sdk.models.parse_event`, which picks the subclass. Validating a whole event
    with ``LineageEvent.model_validate`` keeps its other keys too (models keep unknown keys), so
    it round-trips, but only the three subclasses check what their kind requires.
    """

    SCHEMA_URL: ClassVar[str] = ""
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    event_time: Timestamp = wire("eventTime")
    producer: UriStr
    schema_url: UriStr = wire("schemaURL")


class RunEvent(LineageEvent):
    """A run's state transition, with the datasets it read and wrote."""

    SCHEMA_URL: ClassVar[str] = RUN_EVENT_SCHEMA_URL

    schema_url: UriStr = wire("schemaURL", default=RUN_EVENT_SCHEMA_URL)
    event_type: EventType | None = wire("eventType", default=None)
    run: Run
    job: Job
    inputs: list[InputDataset] | None = None
    outputs: list[OutputDataset] | None = None


class DatasetEvent(LineageEvent):
    """Static metadata about a dataset."""

    SCHEMA_URL: ClassVar[str] = DATASET_EVENT_SCHEMA_URL

    schema_url: UriStr = wire("schemaURL", default=DATASET_EVENT_SCHEMA_URL)
    dataset: StaticDataset


class JobEvent(LineageEvent):
    """Static metadata about a job (and the datasets it reads and writes), outside any run."""

    SCHEMA_URL: ClassVar[str] = JOB_EVENT_SCHEMA_URL

    schema_url: UriStr = wire("schemaURL", default=JOB_EVENT_SCHEMA_URL)
    job: Job
    inputs: list[InputDataset] | None = None
    outputs: list[OutputDataset] | None = None


BaseEvent = LineageEvent
"""The earlier name of :class:`LineageEvent`, kept for code written against it."""
