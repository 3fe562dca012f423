"""Schema URLs, facet keys and message constants: the exact strings that go on the wire.

Every facet names the schema it conforms to in ``_schemaURL`` and every event in ``schemaURL``;
consumers (and our conformance tests) resolve these to the published JSON schemas, so they must
point at files that exist: https://openlineage.io/spec/... for the official ones, and
https://lineage-sdk.github.io/spec/... (shipped in ``lineage_sdk/schemas/``) for our own.
"""

from __future__ import annotations

__all__ = [
    "BATCH_CONTENT_TYPE",
    "CATALOG_FACET_KEY",
    "CATALOG_FACET_SCHEMA_URL",
    "CORE_SCHEMA_URL",
    "CUSTOM_SPEC_BASE_URL",
    "DATASET_EVENT_SCHEMA_URL",
    "DATASET_TYPE_FACET_KEY",
    "DATASET_TYPE_FACET_SCHEMA_URL",
    "DATASOURCE_FACET_KEY",
    "DATASOURCE_FACET_SCHEMA_URL",
    "DATA_QUALITY_ASSERTIONS_FACET_KEY",
    "DATA_QUALITY_ASSERTIONS_FACET_SCHEMA_URL",
    "DEFAULT_EXCHANGE",
    "ENVIRONMENT_VARIABLES_FACET_KEY",
    "ENVIRONMENT_VARIABLES_FACET_SCHEMA_URL",
    "ERROR_MESSAGE_FACET_KEY",
    "ERROR_MESSAGE_FACET_SCHEMA_URL",
    "EXECUTION_PARAMETERS_FACET_KEY",
    "EXECUTION_PARAMETERS_FACET_SCHEMA_URL",
    "HEADER_EVENT_COUNT",
    "HEADER_EVENT_IDS",
    "HEADER_EVENT_TYPE",
    "HEADER_PRODUCER",
    "HEADER_SCHEMA_URL",
    "HEARTBEAT_FACET_KEY",
    "HEARTBEAT_FACET_SCHEMA_URL",
    "HIERARCHY_FACET_KEY",
    "HIERARCHY_FACET_SCHEMA_URL",
    "INPUT_STATISTICS_FACET_KEY",
    "INPUT_STATISTICS_FACET_SCHEMA_URL",
    "INPUT_SUBSET_FACET_SCHEMA_URL",
    "JOB_EVENT_SCHEMA_URL",
    "JOB_TYPE_FACET_KEY",
    "JOB_TYPE_FACET_SCHEMA_URL",
    "JSON_CONTENT_TYPE",
    "MESSAGING_FACET_KEY",
    "MESSAGING_FACET_SCHEMA_URL",
    "NOMINAL_TIME_FACET_KEY",
    "NOMINAL_TIME_FACET_SCHEMA_URL",
    "OPENLINEAGE_SPEC_BASE_URL",
    "OPENLINEAGE_SPEC_VERSION",
    "OUTPUT_SUBSET_FACET_SCHEMA_URL",
    "PARENT_FACET_KEY",
    "PARENT_FACET_SCHEMA_URL",
    "PROCESSING_ENGINE_FACET_KEY",
    "PROCESSING_ENGINE_FACET_SCHEMA_URL",
    "RUN_EVENT_SCHEMA_URL",
    "SCHEMA_FACET_KEY",
    "SCHEMA_FACET_SCHEMA_URL",
    "SUBSET_FACET_KEY",
    "TAGS_DATASET_FACET_SCHEMA_URL",
    "TAGS_FACET_KEY",
    "TAGS_JOB_FACET_SCHEMA_URL",
    "TAGS_RUN_FACET_SCHEMA_URL",
    "TRACE_FACET_KEY",
    "TRACE_FACET_SCHEMA_URL",
]

#: The OpenLineage spec version every event we emit conforms to.
OPENLINEAGE_SPEC_VERSION = "2-0-2"
OPENLINEAGE_SPEC_BASE_URL = "https://openlineage.io/spec/"
#: Where our own facet schemas are published; the files ship in ``lineage_sdk/schemas/``.
CUSTOM_SPEC_BASE_URL = "https://lineage-sdk.github.io/spec/"

CORE_SCHEMA_URL = f"{OPENLINEAGE_SPEC_BASE_URL}{OPENLINEAGE_SPEC_VERSION}/OpenLineage.json"
RUN_EVENT_SCHEMA_URL = f"{CORE_SCHEMA_URL}#/$defs/RunEvent"
DATASET_EVENT_SCHEMA_URL = f"{CORE_SCHEMA_URL}#/$defs/DatasetEvent"
JOB_EVENT_SCHEMA_URL = f"{CORE_SCHEMA_URL}#/$defs/JobEvent"


def _facet_url(base: str, version: str, name: str) -> str:
    return f"{base}facets/{version}/{name}.json#/$defs/{name}"


PARENT_FACET_KEY = "parent"
PARENT_FACET_SCHEMA_URL = _facet_url(OPENLINEAGE_SPEC_BASE_URL, "1-2-0", "ParentRunFacet")
ERROR_MESSAGE_FACET_KEY = "errorMessage"
ERROR_MESSAGE_FACET_SCHEMA_URL = _facet_url(
    OPENLINEAGE_SPEC_BASE_URL, "1-0-1", "ErrorMessageRunFacet"
)
PROCESSING_ENGINE_FACET_KEY = "processing_engine"
PROCESSING_ENGINE_FACET_SCHEMA_URL = _facet_url(
    OPENLINEAGE_SPEC_BASE_URL, "1-1-1", "ProcessingEngineRunFacet"
)
NOMINAL_TIME_FACET_KEY = "nominalTime"
NOMINAL_TIME_FACET_SCHEMA_URL = _facet_url(
    OPENLINEAGE_SPEC_BASE_URL, "1-0-1", "NominalTimeRunFacet"
)
JOB_TYPE_FACET_KEY = "jobType"
JOB_TYPE_FACET_SCHEMA_URL = _facet_url(OPENLINEAGE_SPEC_BASE_URL, "2-0-4", "JobTypeJobFacet")
SCHEMA_FACET_KEY = "schema"
SCHEMA_FACET_SCHEMA_URL = _facet_url(OPENLINEAGE_SPEC_BASE_URL, "1-2-0", "SchemaDatasetFacet")
DATASOURCE_FACET_KEY = "dataSource"
DATASOURCE_FACET_SCHEMA_URL = _facet_url(
    OPENLINEAGE_SPEC_BASE_URL, "1-0-1", "DatasourceDatasetFacet"
)

TAGS_FACET_KEY = "tags"
TAGS_RUN_FACET_SCHEMA_URL = _facet_url(OPENLINEAGE_SPEC_BASE_URL, "1-0-0", "TagsRunFacet")
TAGS_JOB_FACET_SCHEMA_URL = _facet_url(OPENLINEAGE_SPEC_BASE_URL, "1-0-0", "TagsJobFacet")
TAGS_DATASET_FACET_SCHEMA_URL = _facet_url(OPENLINEAGE_SPEC_BASE_URL, "1-0-0", "TagsDatasetFacet")
EXECUTION_PARAMETERS_FACET_KEY = "executionParameters"
EXECUTION_PARAMETERS_FACET_SCHEMA_URL = _facet_url(
    OPENLINEAGE_SPEC_BASE_URL, "1-0-0", "ExecutionParametersRunFacet"
)
ENVIRONMENT_VARIABLES_FACET_KEY = "environmentVariables"
ENVIRONMENT_VARIABLES_FACET_SCHEMA_URL = _facet_url(
    OPENLINEAGE_SPEC_BASE_URL, "1-0-0", "EnvironmentVariablesRunFacet"
)
DATASET_TYPE_FACET_KEY = "datasetType"
DATASET_TYPE_FACET_SCHEMA_URL = _facet_url(
    OPENLINEAGE_SPEC_BASE_URL, "1-0-1", "DatasetTypeDatasetFacet"
)
CATALOG_FACET_KEY = "catalog"
CATALOG_FACET_SCHEMA_URL = _facet_url(OPENLINEAGE_SPEC_BASE_URL, "1-1-0", "CatalogDatasetFacet")
HIERARCHY_FACET_KEY = "hierarchy"
HIERARCHY_FACET_SCHEMA_URL = _facet_url(OPENLINEAGE_SPEC_BASE_URL, "1-0-0", "HierarchyDatasetFacet")
#: ``subset`` has one file and two definitions: the input and the output facet.
SUBSET_FACET_KEY = "subset"
_SUBSET_FILE = f"{OPENLINEAGE_SPEC_BASE_URL}facets/1-0-0/BaseSubsetDatasetFacet.json"
INPUT_SUBSET_FACET_SCHEMA_URL = f"{_SUBSET_FILE}#/$defs/InputSubsetInputDatasetFacet"
OUTPUT_SUBSET_FACET_SCHEMA_URL = f"{_SUBSET_FILE}#/$defs/OutputSubsetOutputDatasetFacet"
INPUT_STATISTICS_FACET_KEY = "inputStatistics"
INPUT_STATISTICS_FACET_SCHEMA_URL = _facet_url(
    OPENLINEAGE_SPEC_BASE_URL, "1-0-0", "InputStatisticsInputDatasetFacet"
)
DATA_QUALITY_ASSERTIONS_FACET_KEY = "dataQualityAssertions"
DATA_QUALITY_ASSERTIONS_FACET_SCHEMA_URL = _facet_url(
    OPENLINEAGE_SPEC_BASE_URL, "1-1-0", "DataQualityAssertionsDatasetFacet"
)

#: Our run facet carrying the OpenTelemetry trace and span id of a lineage run.
TRACE_FACET_KEY = "lineagesdk_trace"
TRACE_FACET_SCHEMA_URL = _facet_url(CUSTOM_SPEC_BASE_URL, "1-0-0", "TraceRunFacet")
#: Our dataset facet describing a message-broker dataset (exchange, routing key, queue, consumer).
MESSAGING_FACET_KEY = "lineagesdk_messaging"
MESSAGING_FACET_SCHEMA_URL = _facet_url(CUSTOM_SPEC_BASE_URL, "1-0-0", "MessagingDatasetFacet")
#: Our run facet saying a long run sends a RUNNING heartbeat every ``intervalS`` seconds, so a
#: reader can tell a live run from one that stopped without ending (see ``run_state.is_stale``).
HEARTBEAT_FACET_KEY = "lineagesdk_heartbeat"
HEARTBEAT_FACET_SCHEMA_URL = _facet_url(CUSTOM_SPEC_BASE_URL, "1-0-0", "HeartbeatRunFacet")

# -- messages between the exporters and the collector (docs/rabbitmq-exporter.md) ------------------

#: The topic exchange events are published to and the collector's queue is bound to, by default.
DEFAULT_EXCHANGE = "platform.lineage.events"
#: A message (or HTTP body) holding one OpenLineage event.
JSON_CONTENT_TYPE = "application/json"
#: A message holding a JSON array of OpenLineage events (the exporter's batch mode).
BATCH_CONTENT_TYPE = "application/vnd.lineage-sdk.batch+json"
#: AMQP headers the RabbitMQ exporter sets, so consumers can route without parsing the body.
HEADER_EVENT_TYPE = "lineage-event-type"
HEADER_SCHEMA_URL = "lineage-schema-url"
HEADER_PRODUCER = "lineage-producer"
HEADER_EVENT_COUNT = "lineage-event-count"
HEADER_EVENT_IDS = "lineage-event-ids"
