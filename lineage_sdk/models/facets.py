"""Facet models: the standard facets the SDK emits, our two custom ones, and the facet containers.

A container (``RunFacets``, ``JobFacets``, ...) types the keys we know and keeps every other key
as the raw JSON object it was (``extra="allow"``), so foreign facets pass through untouched.
Known facets keep unknown fields too, so a newer facet version from another producer survives a
round trip. Every facet must carry ``_producer`` and ``_schemaURL`` (the core schema's BaseFacet).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StringConstraints,
    model_validator,
)

from lineage_sdk.models._base import LineageModel, RunId, Timestamp, UriStr, wire
from lineage_sdk.models.constants import (
    CATALOG_FACET_KEY,
    CATALOG_FACET_SCHEMA_URL,
    DATA_QUALITY_ASSERTIONS_FACET_KEY,
    DATA_QUALITY_ASSERTIONS_FACET_SCHEMA_URL,
    DATASET_TYPE_FACET_KEY,
    DATASET_TYPE_FACET_SCHEMA_URL,
    DATASOURCE_FACET_KEY,
    DATASOURCE_FACET_SCHEMA_URL,
    ENVIRONMENT_VARIABLES_FACET_KEY,
    ENVIRONMENT_VARIABLES_FACET_SCHEMA_URL,
    ERROR_MESSAGE_FACET_KEY,
    ERROR_MESSAGE_FACET_SCHEMA_URL,
    EXECUTION_PARAMETERS_FACET_KEY,
    EXECUTION_PARAMETERS_FACET_SCHEMA_URL,
    HEARTBEAT_FACET_KEY,
    HEARTBEAT_FACET_SCHEMA_URL,
    HIERARCHY_FACET_KEY,
    HIERARCHY_FACET_SCHEMA_URL,
    INPUT_STATISTICS_FACET_KEY,
    INPUT_STATISTICS_FACET_SCHEMA_URL,
    INPUT_SUBSET_FACET_SCHEMA_URL,
    JOB_TYPE_FACET_KEY,
    JOB_TYPE_FACET_SCHEMA_URL,
    MESSAGING_FACET_KEY,
    MESSAGING_FACET_SCHEMA_URL,
    NOMINAL_TIME_FACET_KEY,
    NOMINAL_TIME_FACET_SCHEMA_URL,
    OUTPUT_SUBSET_FACET_SCHEMA_URL,
    PARENT_FACET_KEY,
    PARENT_FACET_SCHEMA_URL,
    PROCESSING_ENGINE_FACET_KEY,
    PROCESSING_ENGINE_FACET_SCHEMA_URL,
    SCHEMA_FACET_KEY,
    SCHEMA_FACET_SCHEMA_URL,
    SUBSET_FACET_KEY,
    TAGS_DATASET_FACET_SCHEMA_URL,
    TAGS_FACET_KEY,
    TAGS_JOB_FACET_SCHEMA_URL,
    TAGS_RUN_FACET_SCHEMA_URL,
    TRACE_FACET_KEY,
    TRACE_FACET_SCHEMA_URL,
)

__all__ = [
    "Assertion",
    "BaseFacet",
    "BinarySubsetCondition",
    "CatalogDatasetFacet",
    "CompareSubsetCondition",
    "DataQualityAssertionsDatasetFacet",
    "DatasetFacet",
    "DatasetFacets",
    "DatasetTag",
    "DatasetTypeDatasetFacet",
    "DatasourceDatasetFacet",
    "EmissionPattern",
    "EnvironmentVariable",
    "EnvironmentVariablesRunFacet",
    "ErrorMessageRunFacet",
    "ExecutionParameter",
    "ExecutionParametersRunFacet",
    "FieldCompareExpression",
    "HeartbeatRunFacet",
    "HierarchyDatasetFacet",
    "HierarchyLevel",
    "InputDatasetFacet",
    "InputDatasetFacets",
    "InputStatisticsInputDatasetFacet",
    "InputSubsetInputDatasetFacet",
    "JobFacet",
    "JobFacets",
    "JobTypeJobFacet",
    "LiteralCompareExpression",
    "LocationSubsetCondition",
    "MessagingDatasetFacet",
    "NominalTimeRunFacet",
    "OutputDatasetFacet",
    "OutputDatasetFacets",
    "OutputSubsetOutputDatasetFacet",
    "ParentJob",
    "ParentRoot",
    "ParentRun",
    "ParentRunFacet",
    "Partition",
    "PartitionSubsetCondition",
    "ProcessingEngineRunFacet",
    "RawFacet",
    "RunFacet",
    "RunFacets",
    "SchemaDatasetFacet",
    "SchemaField",
    "SubsetCondition",
    "Tag",
    "TagsDatasetFacet",
    "TagsJobFacet",
    "TagsRunFacet",
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
# Newer standard facets (issue 32): typed helpers for emitting them. The containers below keep
# them as raw objects when parsing, so the collector accepts whatever other producers send.


class Tag(LineageModel):
    """One tag of ``tags`` (run and job, 1-0-0): ``key``, ``value`` and where it came from."""

    key: str
    value: str
    source: str | None = None


class DatasetTag(Tag):
    """One tag of the dataset ``tags`` facet (1-0-0); ``field`` names the column it applies to."""

    field: str | None = None


class TagsRunFacet(RunFacet):
    """``tags`` 1-0-0 on a run."""

    KEY: ClassVar[str] = TAGS_FACET_KEY
    SCHEMA_URL: ClassVar[str] = TAGS_RUN_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=TAGS_RUN_FACET_SCHEMA_URL)
    tags: list[Tag] | None = None


class TagsJobFacet(JobFacet):
    """``tags`` 1-0-0 on a job."""

    KEY: ClassVar[str] = TAGS_FACET_KEY
    SCHEMA_URL: ClassVar[str] = TAGS_JOB_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=TAGS_JOB_FACET_SCHEMA_URL)
    tags: list[Tag] | None = None


class TagsDatasetFacet(DatasetFacet):
    """``tags`` 1-0-0 on a dataset (a tag may name one of its fields)."""

    KEY: ClassVar[str] = TAGS_FACET_KEY
    SCHEMA_URL: ClassVar[str] = TAGS_DATASET_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=TAGS_DATASET_FACET_SCHEMA_URL)
    tags: list[DatasetTag] | None = None


class ExecutionParameter(LineageModel):
    """One parameter of ``executionParameters`` 1-0-0; the schema allows no other keys."""

    model_config = ConfigDict(extra="forbid")

    key: str
    name: str | None = None
    description: str | None = None
    value: str | None = None


class ExecutionParametersRunFacet(RunFacet):
    """``executionParameters`` 1-0-0: the parameters the job was run with."""

    KEY: ClassVar[str] = EXECUTION_PARAMETERS_FACET_KEY
    SCHEMA_URL: ClassVar[str] = EXECUTION_PARAMETERS_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=EXECUTION_PARAMETERS_FACET_SCHEMA_URL)
    parameters: list[ExecutionParameter] | None = None


class EnvironmentVariable(LineageModel):
    """One ``name``/``value`` pair of ``environmentVariables``."""

    name: str
    value: str


class EnvironmentVariablesRunFacet(RunFacet):
    """``environmentVariables`` 1-0-0: the environment variables of the run (choose them: the
    SDK never collects the environment by itself, which may hold secrets)."""

    KEY: ClassVar[str] = ENVIRONMENT_VARIABLES_FACET_KEY
    SCHEMA_URL: ClassVar[str] = ENVIRONMENT_VARIABLES_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=ENVIRONMENT_VARIABLES_FACET_SCHEMA_URL)
    environment_variables: list[EnvironmentVariable] = wire("environmentVariables")


class DatasetTypeDatasetFacet(DatasetFacet):
    """``datasetType`` 1-0-1: TABLE, VIEW, FILE, TOPIC, STREAM, MODEL, ... and a sub-type."""

    KEY: ClassVar[str] = DATASET_TYPE_FACET_KEY
    SCHEMA_URL: ClassVar[str] = DATASET_TYPE_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=DATASET_TYPE_FACET_SCHEMA_URL)
    dataset_type: str = wire("datasetType")
    sub_type: str | None = wire("subType", default=None)


class CatalogDatasetFacet(DatasetFacet):
    """``catalog`` 1-1-0: the catalog (Hive, Glue, Iceberg REST, ...) the dataset is kept in."""

    KEY: ClassVar[str] = CATALOG_FACET_KEY
    SCHEMA_URL: ClassVar[str] = CATALOG_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=CATALOG_FACET_SCHEMA_URL)
    framework: str
    type: str
    name: str
    metadata_uri: str | None = wire("metadataUri", default=None)
    warehouse_uri: str | None = wire("warehouseUri", default=None)
    source: str | None = None
    catalog_properties: dict[str, str] | None = wire("catalogProperties", default=None)


class HierarchyLevel(LineageModel):
    """One level of ``hierarchy``: its ``type`` (DATABASE, SCHEMA, TABLE, ...) and ``name``."""

    type: str
    name: str


class HierarchyDatasetFacet(DatasetFacet):
    """``hierarchy`` 1-0-0: where the dataset sits, from the highest level to the lowest."""

    KEY: ClassVar[str] = HIERARCHY_FACET_KEY
    SCHEMA_URL: ClassVar[str] = HIERARCHY_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=HIERARCHY_FACET_SCHEMA_URL)
    hierarchy: list[HierarchyLevel]


class LocationSubsetCondition(LineageModel):
    """The subset is these locations (files, prefixes)."""

    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("type",)

    type: Literal["location"] = "location"
    locations: list[str]


class Partition(LineageModel):
    """One partition: its ``dimensions`` (e.g. ``{"date": "2025-03-01"}``)."""

    identifier: str | None = None
    dimensions: dict[str, Any]


class PartitionSubsetCondition(LineageModel):
    """The subset is these partitions."""

    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("type",)

    type: Literal["partition"] = "partition"
    partitions: list[Partition]


class FieldCompareExpression(LineageModel):
    """A field of the dataset, one side of a comparison."""

    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("type",)

    type: Literal["field"] = "field"
    field: str


class LiteralCompareExpression(LineageModel):
    """A literal, one side of a comparison (always a string)."""

    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("type",)

    type: Literal["literal"] = "literal"
    value: str


_CompareSide = FieldCompareExpression | LiteralCompareExpression


class CompareSubsetCondition(LineageModel):
    """``left comparison right``; ``comparison`` is EQUAL, GREATER_THAN, GREATER_EQUAL_THAN,
    LESS_THAN or LESS_EQUAL_THAN."""

    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("type",)

    type: Literal["compare"] = "compare"
    left: _CompareSide
    right: _CompareSide
    comparison: str


class BinarySubsetCondition(LineageModel):
    """``left operator right``; ``operator`` is AND or OR."""

    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("type",)

    type: Literal["binary"] = "binary"
    left: SubsetCondition
    right: SubsetCondition
    operator: str


#: What a ``subset`` facet's condition may be.
SubsetCondition = (
    LocationSubsetCondition
    | PartitionSubsetCondition
    | BinarySubsetCondition
    | CompareSubsetCondition
)


class InputSubsetInputDatasetFacet(InputDatasetFacet):
    """``subset`` 1-0-0 on an input (``inputFacets``): the part of the dataset the run read."""

    KEY: ClassVar[str] = SUBSET_FACET_KEY
    SCHEMA_URL: ClassVar[str] = INPUT_SUBSET_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=INPUT_SUBSET_FACET_SCHEMA_URL)
    input_condition: SubsetCondition = wire("inputCondition")


class OutputSubsetOutputDatasetFacet(OutputDatasetFacet):
    """``subset`` 1-0-0 on an output (``outputFacets``): the part of the dataset the run wrote."""

    KEY: ClassVar[str] = SUBSET_FACET_KEY
    SCHEMA_URL: ClassVar[str] = OUTPUT_SUBSET_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=OUTPUT_SUBSET_FACET_SCHEMA_URL)
    output_condition: SubsetCondition = wire("outputCondition")


_Count = Annotated[StrictInt, Field(ge=0)]


class InputStatisticsInputDatasetFacet(InputDatasetFacet):
    """``inputStatistics`` 1-0-0 on an input: rows, bytes and files the run read."""

    KEY: ClassVar[str] = INPUT_STATISTICS_FACET_KEY
    SCHEMA_URL: ClassVar[str] = INPUT_STATISTICS_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=INPUT_STATISTICS_FACET_SCHEMA_URL)
    row_count: _Count | None = wire("rowCount", default=None)
    size: _Count | None = None
    file_count: _Count | None = wire("fileCount", default=None)


class Assertion(LineageModel):
    """One test of ``dataQualityAssertions`` 1-1-0 and its outcome (``success``: no issue)."""

    assertion: str
    success: StrictBool
    column: str | None = None
    severity: str | None = None
    name: str | None = None
    description: str | None = None
    expected: str | None = None
    actual: str | None = None
    content: str | None = None
    content_type: str | None = wire("contentType", default=None)
    params: dict[str, Any] | None = None


class DataQualityAssertionsDatasetFacet(InputDatasetFacet):
    """``dataQualityAssertions`` 1-1-0 on an input (``inputFacets``, as the spec defines it): the
    tests run on the dataset or its columns, and their results."""

    KEY: ClassVar[str] = DATA_QUALITY_ASSERTIONS_FACET_KEY
    SCHEMA_URL: ClassVar[str] = DATA_QUALITY_ASSERTIONS_FACET_SCHEMA_URL
    _ALWAYS_EMIT: ClassVar[tuple[str, ...]] = ("schema_url",)

    schema_url: UriStr = wire("_schemaURL", default=DATA_QUALITY_ASSERTIONS_FACET_SCHEMA_URL)
    assertions: list[Assertion]


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
BinarySubsetCondition.model_rebuild()
