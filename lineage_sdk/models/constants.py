"""Schema URLs, facet keys and message constants: the exact strings that go on the wire.

Every facet names the schema it conforms to in ``_schemaURL`` and every event in ``schemaURL``;
consumers (and our conformance tests) resolve these to the published JSON schemas, so they must
point at files that exist: https://openlineage.io/spec/... for the official ones, and
https://lineage-sdk.github.io/spec/... (shipped in ``lineage_sdk/schemas/``) for our own.
"""

from __future__ import annotations

__all__ = [
    "BATCH_CONTENT_TYPE",
    "CORE_SCHEMA_URL",
    "CUSTOM_SPEC_BASE_URL",
    "DATASET_EVENT_SCHEMA_URL",
    "DATASOURCE_FACET_KEY",
    "DATASOURCE_FACET_SCHEMA_URL",
    "DEFAULT_EXCHANGE",
    "ERROR_MESSAGE_FACET_KEY",
    "ERROR_MESSAGE_FACET_SCHEMA_URL",
    "HEADER_EVENT_COUNT",
    "HEADER_EVENT_IDS",
    "HEADER_EVENT_TYPE",
    "HEADER_PRODUCER",
    "HEADER_SCHEMA_URL",
    "HEARTBEAT_FACET_KEY",
    "HEARTBEAT_FACET_SCHEMA_URL",
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
    "PARENT_FACET_KEY",
    "PARENT_FACET_SCHEMA_URL",
    "PROCESSING_ENGINE_FACET_KEY",
    "PROCESSING_ENGINE_FACET_SCHEMA_URL",
    "RUN_EVENT_SCHEMA_URL",
    "SCHEMA_FACET_KEY",
    "SCHEMA_FACET_SCHEMA_URL",
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
