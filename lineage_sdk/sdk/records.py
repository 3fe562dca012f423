"""What the application thread queues for the worker, one small type per kind of record.

The processor (and the few APIs that emit events without a span) create these on the
application thread and submit them; :class:`RecordEncoder`, owned by the pipeline, turns them into
``EncodedEvent``\\ s on the worker thread.

The records are slotted dataclasses, one allocation each like the tuple they replace. They are not
``frozen``: a frozen dataclass's ``__init__`` goes through ``object.__setattr__`` and costs about
four times as much on the application thread. Nothing changes a record after it is submitted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, final

from lineage_sdk.models.dataset import LineageDataset
from lineage_sdk.sdk.events import EventBuilder
from lineage_sdk.sdk.export import EncodedEvent
from lineage_sdk.sdk.runs import LineageRun

__all__ = [
    "ExcInfo",
    "ExplicitEvent",
    "LineageRecord",
    "RecordEncoder",
    "RunEnded",
    "RunRunning",
    "RunStarted",
]

ExcInfo = tuple[type[BaseException], BaseException, Any]


@final
@dataclass(slots=True, eq=False)
class RunStarted:
    """A run's span started: START. Datasets are only ever appended to a run, so the counts of
    its inputs and outputs at start mark what START reports without copying the lists."""

    run: LineageRun
    time_ns: int
    input_count: int
    output_count: int


@final
@dataclass(slots=True, eq=False)
class RunEnded:
    """A run's span ended: COMPLETE, or FAIL when ``error`` (an exc_info triple) is set."""

    run: LineageRun
    time_ns: int
    inputs: Sequence[LineageDataset]
    outputs: Sequence[LineageDataset]
    error: ExcInfo | None


@final
@dataclass(slots=True, eq=False)
class RunRunning:
    """A long run reports progress: RUNNING with the datasets of the current window."""

    run: LineageRun
    time_ns: int
    inputs: Sequence[LineageDataset]
    outputs: Sequence[LineageDataset]
    processing_type: str


@final
@dataclass(slots=True, eq=False)
class ExplicitEvent:
    """One event of any type without a span (``LineageProducer``); ``builder`` overrides the
    producer (None: the pipeline's own builder)."""

    event_type: str
    run: LineageRun
    time_ns: int
    inputs: Sequence[LineageDataset]
    outputs: Sequence[LineageDataset]
    builder: EventBuilder | None


LineageRecord = RunStarted | RunEnded | RunRunning | ExplicitEvent


class RecordEncoder:
    """Turns each kind of record into its event; the pipeline calls it on the worker thread."""

    __slots__ = ("_builder", "_by_type")

    def __init__(self, builder: EventBuilder) -> None:
        self._builder = builder
        self._by_type: dict[type[Any], Callable[[Any], EncodedEvent]] = {
            RunStarted: self._started,
            RunEnded: self._ended,
            RunRunning: self._running,
            ExplicitEvent: self._explicit,
        }

    @property
    def builder(self) -> EventBuilder:
        return self._builder

    def __call__(self, record: LineageRecord) -> Sequence[EncodedEvent]:
        return (self._by_type[type(record)](record),)

    def _started(self, record: RunStarted) -> EncodedEvent:
        run = record.run
        inputs: Sequence[LineageDataset] = run.inputs
        outputs: Sequence[LineageDataset] = run.outputs
        # Usually nothing was added since START was queued: no need to copy a prefix.
        if len(inputs) != record.input_count:
            inputs = inputs[: record.input_count]
        if len(outputs) != record.output_count:
            outputs = outputs[: record.output_count]
        return self._builder.encode_run_event("START", run, record.time_ns, inputs, outputs)

    def _ended(self, record: RunEnded) -> EncodedEvent:
        if record.error is None:
            return self._builder.encode_run_event(
                "COMPLETE", record.run, record.time_ns, record.inputs, record.outputs
            )
        _, exc, tb = record.error
        return self._builder.encode_run_event(
            "FAIL",
            record.run,
            record.time_ns,
            record.inputs,
            record.outputs,
            error=exc,
            error_traceback=tb,
        )

    def _running(self, record: RunRunning) -> EncodedEvent:
        return self._builder.encode_run_event(
            "RUNNING",
            record.run,
            record.time_ns,
            record.inputs,
            record.outputs,
            processing_type=record.processing_type,
        )

    def _explicit(self, record: ExplicitEvent) -> EncodedEvent:
        builder = record.builder or self._builder
        return builder.encode_run_event(
            record.event_type, record.run, record.time_ns, record.inputs, record.outputs
        )
