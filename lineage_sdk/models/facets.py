"""Facet models: the standard facets the SDK emits, our two custom ones, and the facet containers.

A container (``RunFacets``, ``JobFacets``, ...) types the keys we know and keeps every other key
as the raw JSON object it was (``extra="allow"``), so foreign facets pass through untouched.
Known facets keep unknown fields too, so a newer facet version from another producer survives a
round trip. Every facet must carry ``_producer`` and ``_schemaURL`` (the core schema's BaseFacet).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StringConstraints,
    model_validator,
)

from lineage_sdk.models._base import LineageModel, RunId, Timestamp, UriStr, wire
from lineage_sdk.models.constants import (
    DATASOURCE_FACET_KEY,
    DATASOURCE_FACET_SCHEMA_URL,
    ERROR_MESSAGE_FACET_KEY,
    ERROR_MESSAGE_FACET_SCHEMA_URL,
    HEARTBEAT_FACET_KEY,
    HEARTBEAT_FACET_SCHEMA_URL,
    JOB_TYPE_FACET_KEY,
    JOB_TYPE_FACET_SCHEMA_URL,
    MESSAGING_FACET_KEY,
    MESSAGING_FACET_SCHEMA_URL,
    NOMINAL_TIME_FACET_KEY,
    NOMINAL_TIME_FACET_SCHEMA_URL,
    PARENT_FACET_KEY,
    PARENT_FACET_SCHEMA_URL,
    PROCESSING_ENGINE_FACET_KEY,
    PROCESSING_ENGINE_FACET_SCHEMA_URL,
    SCHEMA_FACET_KEY,
    SCHEMA_FACET_SCHEMA_URL,
    TRACE_FACET_KEY,
    TRACE_FACET_SCHEMA_URL,
)

__all__ = [
    "BaseFacet",
    "DatasetFacet",
    "DatasetFacets",
    "DatasourceDatasetFacet",
    "EmissionPattern",
    "ErrorMessageRunFacet",
    "HeartbeatRunFacet",
    "InputDatasetFacet",
    "InputDatasetFacets",
    "JobFacet",
    "JobFacets",
    "JobTypeJobFacet",
    "MessagingDatasetFacet",
    "NominalTimeRunFacet",
    "OutputDatasetFacet",
    "OutputDatasetFacets",
    "ParentJob",
    "ParentRoot",
    "ParentRun",
    "ParentRunFacet",
    "ProcessingEngineRunFacet",
    "RawFacet",
    "RunFacet",
    "RunFacets",
    "SchemaDatasetFacet",
    "SchemaField",
    "TraceRunFacet",
]

#: A facet we have no model for: the JSON object exactly as received.
RawFacet = dict[str, Any]


class BaseFacet(LineageModel):
    """Every facet: who produced it and which schema it conforms to."""

    KEY: ClassVar[str] = ""
    SCHEMA_URL: ClassVar[str] = ""

    producer: UriStr = wire("_producer")
    schema_url: UriStr = wire("_schemaURL")


class RunFacet(BaseFacet):
    """A facet of a run."""


class JobFacet(BaseFacet):
    """A facet of a job; ``_deleted`` asks consumers to drop a previously sent facet."""

    deleted: StrictBool | None = wire("_deleted", default=None)


class DatasetFacet(BaseFacet):
    """A facet of a dataset; ``_deleted`` asks consumers to drop a previously sent facet."""

    deleted: StrictBool | None = wire("_deleted", default=None)


class InputDatasetFacet(BaseFacet):
    """A facet of a dataset in its role as a run's input."""


class OutputDatasetFacet(BaseFacet):
    """A facet of a dataset in its role as a run's output."""


# ---------------------------------------------------------------------------------------------
# Standard run facets


class ParentRun(LineageModel):
    """``parent.run`` / ``parent.root.run``: the run id, and optionally a subset of its facets."""

    run_id: RunId = wire("runId")
    facets: RunFacets | None = None


class ParentJob(LineageModel):
    """``parent.job`` / ``parent.root.job``."""

    namespace: str
    name: str
    facets: JobFacets | None = None


class ParentRoot(LineageModel):
    """``parent.root``: the outermost run of the tree this run belongs to."""

    run: ParentRun
    job: ParentJob


class ParentRunFacet(RunFacet):
    """``parent`` 1-2-0: the run that spawned this one, and the root of the run tree."""

    KEY: ClassVar[str] = PARENT_FACET_KEY
    SCHEMA_URL: ClassVar[str] = PARENT_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=PARENT_FACET_SCHEMA_URL)
    run: ParentRun
    job: ParentJob
    root: ParentRoot | None = None


class ErrorMessageRunFacet(RunFacet):
    """``errorMessage`` 1-0-1: why a run failed."""

    KEY: ClassVar[str] = ERROR_MESSAGE_FACET_KEY
    SCHEMA_URL: ClassVar[str] = ERROR_MESSAGE_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=ERROR_MESSAGE_FACET_SCHEMA_URL)
    message: str
    programming_language: str = wire("programmingLanguage")
    stack_trace: str | None = wire("stackTrace", default=None)


class ProcessingEngineRunFacet(RunFacet):
    """``processing_engine`` 1-1-1: what produced the run (here: lineage-sdk and its version)."""

    KEY: ClassVar[str] = PROCESSING_ENGINE_FACET_KEY
    SCHEMA_URL: ClassVar[str] = PROCESSING_ENGINE_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=PROCESSING_ENGINE_FACET_SCHEMA_URL)
    version: str
    name: str | None = None
    openlineage_adapter_version: str | None = wire("openlineageAdapterVersion", default=None)


class NominalTimeRunFacet(RunFacet):
    """``nominalTime`` 1-0-1: the scheduled time window of the run."""

    KEY: ClassVar[str] = NOMINAL_TIME_FACET_KEY
    SCHEMA_URL: ClassVar[str] = NOMINAL_TIME_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=NOMINAL_TIME_FACET_SCHEMA_URL)
    nominal_start_time: Timestamp = wire("nominalStartTime")
    nominal_end_time: Timestamp | None = wire("nominalEndTime", default=None)


_HEX32 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]
_HEX16 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{16}$")]


class TraceRunFacet(RunFacet):
    """``lineagesdk_trace`` 1-0-0 (ours): the OpenTelemetry trace and span of the lineage run.

    Lets an operator jump from a lineage run to its trace; ids are W3C trace-context hex.
    """

    KEY: ClassVar[str] = TRACE_FACET_KEY
    SCHEMA_URL: ClassVar[str] = TRACE_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=TRACE_FACET_SCHEMA_URL)
    trace_id: _HEX32 = wire("traceId")
    span_id: _HEX16 = wire("spanId")


class HeartbeatRunFacet(RunFacet):
    """``lineagesdk_heartbeat`` 1-0-0 (ours): the run sends a RUNNING heartbeat every
    ``intervalS`` seconds while it lives; a reader calls it STALE after 3 silent intervals."""

    KEY: ClassVar[str] = HEARTBEAT_FACET_KEY
    SCHEMA_URL: ClassVar[str] = HEARTBEAT_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=HEARTBEAT_FACET_SCHEMA_URL)
    interval_s: Annotated[StrictFloat | StrictInt, Field(gt=0)] = wire("intervalS")


# ---------------------------------------------------------------------------------------------
# Standard job facets


class EmissionPattern(LineageModel):
    """``jobType.emissionPattern`` (2-0-4): when and how completely a job emits events."""

    event_trigger: str = wire("eventTrigger")
    event_content_mode: str = wire("eventContentMode")
    window_duration: Annotated[StrictInt, Field(ge=1)] | None = wire("windowDuration", default=None)


class JobTypeJobFacet(JobFacet):
    """``jobType`` 2-0-4: BATCH/STREAMING/SERVICE, the integration, and the job's kind."""

    KEY: ClassVar[str] = JOB_TYPE_FACET_KEY
    SCHEMA_URL: ClassVar[str] = JOB_TYPE_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=JOB_TYPE_FACET_SCHEMA_URL)
    processing_type: str = wire("processingType")
    integration: str
    job_type: str | None = wire("jobType", default=None)
    emission_pattern: EmissionPattern | None = wire("emissionPattern", default=None)


# ---------------------------------------------------------------------------------------------
# Standard and custom dataset facets


class SchemaField(LineageModel):
    """One field of ``schema`` 1-2-0; struct fields nest."""

    name: str
    type: str | None = None
    description: str | None = None
    ordinal_position: StrictInt | None = None
    fields: list[SchemaField] | None = None


class SchemaDatasetFacet(DatasetFacet):
    """``schema`` 1-2-0: the dataset's fields."""

    KEY: ClassVar[str] = SCHEMA_FACET_KEY
    SCHEMA_URL: ClassVar[str] = SCHEMA_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=SCHEMA_FACET_SCHEMA_URL)
    fields: list[SchemaField] | None = None


class DatasourceDatasetFacet(DatasetFacet):
    """``dataSource`` 1-0-1: the system the dataset lives in (name and connection URI)."""

    KEY: ClassVar[str] = DATASOURCE_FACET_KEY
    SCHEMA_URL: ClassVar[str] = DATASOURCE_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=DATASOURCE_FACET_SCHEMA_URL)
    name: str | None = None
    uri: UriStr | None = None


class MessagingDatasetFacet(DatasetFacet):
    """``lineagesdk_messaging`` 1-0-0 (ours): a message-broker dataset's routing details.

    OpenLineage has no facet for queues; the pika instrumentation records here which exchange
    and routing key a message went through, and which queue and consumer took it.
    """

    KEY: ClassVar[str] = MESSAGING_FACET_KEY
    SCHEMA_URL: ClassVar[str] = MESSAGING_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=MESSAGING_FACET_SCHEMA_URL)
    system: str
    destination: str | None = None
    routing_key: str | None = wire("routingKey", default=None)
    queue: str | None = None
    consumer_tag: str | None = wire("consumerTag", default=None)


# ---------------------------------------------------------------------------------------------
# Containers


def _check_facets(data: Any) -> Any:
    """Each facet is a JSON object with string ``_producer`` and ``_schemaURL`` (BaseFacet)."""
    if not isinstance(data, dict):
        return data  # pydantic reports the type error with the right location
    for key, facet in data.items():
        if type(facet) is dict:
            if type(facet.get("_producer")) is not str:
                raise ValueError(f"facet {key!r}: _producer is required (a URI string)")
            if type(facet.get("_schemaURL")) is not str:
                raise ValueError(f"facet {key!r}: _schemaURL is required (a URI string)")
        elif facet is not None and not isinstance(facet, BaseModel | Mapping):
            raise ValueError(f"facet {key!r}: must be an object, got {type(facet).__name__}")
    return data


class _FacetContainer(LineageModel):
    """Facets by key; unknown keys are kept verbatim as :data:`RawFacet` objects."""

    __pydantic_extra__: dict[str, RawFacet] = Field(init=False)

    @model_validator(mode="before")
    @classmethod
    def _facets_are_facets(cls, data: Any) -> Any:
        return _check_facets(data)


class RunFacets(_FacetContainer):
    """``run.facets``."""

    parent: ParentRunFacet | None = None
    error_message: ErrorMessageRunFacet | None = wire(ERROR_MESSAGE_FACET_KEY, default=None)
    processing_engine: ProcessingEngineRunFacet | None = None
    nominal_time: NominalTimeRunFacet | None = wire(NOMINAL_TIME_FACET_KEY, default=None)
    lineagesdk_trace: TraceRunFacet | None = None
    lineagesdk_heartbeat: HeartbeatRunFacet | None = None


class JobFacets(_FacetContainer):
    """``job.facets``."""

    job_type: JobTypeJobFacet | None = wire(JOB_TYPE_FACET_KEY, default=None)


class DatasetFacets(_FacetContainer):
    """``dataset.facets``."""

    schema_: SchemaDatasetFacet | None = wire(SCHEMA_FACET_KEY, default=None)
    data_source: DatasourceDatasetFacet | None = wire(DATASOURCE_FACET_KEY, default=None)
    lineagesdk_messaging: MessagingDatasetFacet | None = None


class InputDatasetFacets(_FacetContainer):
    """``inputs[].inputFacets``: all pass through as raw objects."""


class OutputDatasetFacets(_FacetContainer):
    """``outputs[].outputFacets``: all pass through as raw objects."""


ParentRun.model_rebuild()
ParentJob.model_rebuild()
ParentRoot.model_rebuild()
ParentRunFacet.model_rebuild()
