"""Issue 32 item 4: the newer OpenLineage facets, built with the SDK's typed models, and events
carrying every one of them (a helper module, shared by tests/sdk and tests/ingest).

:data:`NEWER_FACETS` names each facet the issue lists with the schema file it must name: the
newest version published under ``../shared/openlineage-spec/published/facets/``.
"""

from __future__ import annotations

import uuid
from typing import Any

from lineage_sdk.models import (
    Assertion,
    BinarySubsetCondition,
    CatalogDatasetFacet,
    CompareSubsetCondition,
    DataQualityAssertionsDatasetFacet,
    DatasetTag,
    DatasetTypeDatasetFacet,
    EmissionPattern,
    EnvironmentVariable,
    EnvironmentVariablesRunFacet,
    ExecutionParameter,
    ExecutionParametersRunFacet,
    FieldCompareExpression,
    HierarchyDatasetFacet,
    HierarchyLevel,
    InputStatisticsInputDatasetFacet,
    InputSubsetInputDatasetFacet,
    JobTypeJobFacet,
    LiteralCompareExpression,
    LocationSubsetCondition,
    OutputSubsetOutputDatasetFacet,
    ParentJob,
    ParentRoot,
    ParentRun,
    ParentRunFacet,
    Partition,
    PartitionSubsetCondition,
    SchemaDatasetFacet,
    SchemaField,
    Tag,
    TagsDatasetFacet,
    TagsJobFacet,
    TagsRunFacet,
)

__all__ = [
    "NEWER_FACETS",
    "PRODUCER",
    "dataset_facets",
    "dump",
    "every_facet_event",
    "input_facets",
    "job_facets",
    "output_facets",
    "run_facets",
]

PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/tests/newer-facets"

#: (where, key, model class, schema file it must name: the newest published version)
NEWER_FACETS: list[tuple[str, str, type[Any], str]] = [
    ("run", "tags", TagsRunFacet, "1-0-0/TagsRunFacet.json"),
    ("job", "tags", TagsJobFacet, "1-0-0/TagsJobFacet.json"),
    ("dataset", "tags", TagsDatasetFacet, "1-0-0/TagsDatasetFacet.json"),
    ("job", "jobType", JobTypeJobFacet, "2-0-4/JobTypeJobFacet.json"),
    ("run", "parent", ParentRunFacet, "1-2-0/ParentRunFacet.json"),
    ("dataset", "schema", SchemaDatasetFacet, "1-2-0/SchemaDatasetFacet.json"),
    ("dataset", "datasetType", DatasetTypeDatasetFacet, "1-0-1/DatasetTypeDatasetFacet.json"),
    ("dataset", "catalog", CatalogDatasetFacet, "1-1-0/CatalogDatasetFacet.json"),
    ("dataset", "hierarchy", HierarchyDatasetFacet, "1-0-0/HierarchyDatasetFacet.json"),
    (
        "run",
        "executionParameters",
        ExecutionParametersRunFacet,
        "1-0-0/ExecutionParametersRunFacet.json",
    ),
    (
        "run",
        "environmentVariables",
        EnvironmentVariablesRunFacet,
        "1-0-0/EnvironmentVariablesRunFacet.json",
    ),
    ("input", "subset", InputSubsetInputDatasetFacet, "1-0-0/BaseSubsetDatasetFacet.json"),
    ("output", "subset", OutputSubsetOutputDatasetFacet, "1-0-0/BaseSubsetDatasetFacet.json"),
    (
        "input",
        "inputStatistics",
        InputStatisticsInputDatasetFacet,
        "1-0-0/InputStatisticsInputDatasetFacet.json",
    ),
    (
        "input",
        "dataQualityAssertions",
        DataQualityAssertionsDatasetFacet,
        "1-1-0/DataQualityAssertionsDatasetFacet.json",
    ),
]


def dump(facet: Any) -> dict[str, Any]:
    """A typed facet as the SDK emits it (what ``LineageDataset``/``track_lineage`` store)."""
    out: dict[str, Any] = facet.model_dump(by_alias=True, mode="json", exclude_none=True)
    return out


def run_facets(producer: str = PRODUCER) -> dict[str, Any]:
    """The new run facets (``parent`` is added by the SDK itself for nested runs)."""
    return {
        "tags": TagsRunFacet(
            producer=producer,
            tags=[Tag(key="team", value="billing", source="USER"), Tag(key="tier", value="1")],
        ),
        "executionParameters": ExecutionParametersRunFacet(
            producer=producer,
            parameters=[
                ExecutionParameter(
                    key="task.timeout",
                    name="Task timeout",
                    description="Seconds a task may run",
                    value="3600",
                ),
                ExecutionParameter(key="dry_run"),
            ],
        ),
        "environmentVariables": EnvironmentVariablesRunFacet(
            producer=producer,
            environment_variables=[
                EnvironmentVariable(name="STAGE", value="prod"),
                EnvironmentVariable(name="EMPTY", value=""),
            ],
        ),
    }


def job_facets(producer: str = PRODUCER) -> dict[str, Any]:
    return {
        "tags": TagsJobFacet(producer=producer, tags=[Tag(key="owner", value="@ana")]),
        "jobType": JobTypeJobFacet(
            producer=producer,
            processing_type="STREAMING",
            integration="LINEAGE_SDK",
            job_type="CONSUMER",
            emission_pattern=EmissionPattern(
                event_trigger="PERIODIC", event_content_mode="ACCUMULATIVE", window_duration=60
            ),
        ),
    }


def dataset_facets(producer: str = PRODUCER) -> dict[str, Any]:
    return {
        "tags": TagsDatasetFacet(
            producer=producer,
            tags=[
                DatasetTag(key="pii", value="true", source="USER", field="email"),
                DatasetTag(key="domain", value="sales"),
            ],
        ),
        "schema": SchemaDatasetFacet(
            producer=producer,
            fields=[
                SchemaField(name="id", type="BIGINT", ordinal_position=1),
                SchemaField(name="email", type="TEXT", description="contact", ordinal_position=2),
                SchemaField(
                    name="address",
                    type="STRUCT",
                    ordinal_position=3,
                    fields=[SchemaField(name="city", type="TEXT", ordinal_position=1)],
                ),
            ],
        ),
        "datasetType": DatasetTypeDatasetFacet(
            producer=producer, dataset_type="TABLE", sub_type="MATERIALIZED"
        ),
        "catalog": CatalogDatasetFacet(
            producer=producer,
            framework="iceberg",
            type="rest",
            name="lake",
            metadata_uri="https://catalog.example.com/api",
            warehouse_uri="s3://bucket/warehouse",
            source="spark",
            catalog_properties={"io-impl": "org.apache.iceberg.aws.s3.S3FileIO"},
        ),
        "hierarchy": HierarchyDatasetFacet(
            producer=producer,
            hierarchy=[
                HierarchyLevel(type="DATABASE", name="shop"),
                HierarchyLevel(type="SCHEMA", name="public"),
                HierarchyLevel(type="TABLE", name="orders"),
            ],
        ),
    }


def input_facets(producer: str = PRODUCER) -> dict[str, Any]:
    condition = BinarySubsetCondition(
        left=PartitionSubsetCondition(
            partitions=[
                Partition(identifier="p1", dimensions={"date": "2025-03-01", "region": "eu"}),
                Partition(dimensions={"date": "2025-03-02"}),
            ]
        ),
        right=CompareSubsetCondition(
            left=FieldCompareExpression(field="amount"),
            right=LiteralCompareExpression(value="100"),
            comparison="GREATER_THAN",
        ),
        operator="AND",
    )
    return {
        "subset": InputSubsetInputDatasetFacet(producer=producer, input_condition=condition),
        "inputStatistics": InputStatisticsInputDatasetFacet(
            producer=producer, row_count=1_000_000, size=2**40, file_count=12
        ),
        "dataQualityAssertions": DataQualityAssertionsDatasetFacet(
            producer=producer,
            assertions=[
                Assertion(assertion="not_null", success=True, column="id", severity="error"),
                Assertion(
                    assertion="row_count",
                    success=False,
                    severity="warn",
                    name="enough_rows",
                    description="At least 1000 rows",
                    expected="1000",
                    actual="999",
                    content="SELECT COUNT(*) FROM orders",
                    content_type="sql",
                    params={"min": 1000, "strict": False, "tags": ["a", "b"], "ratio": 0.5},
                ),
            ],
        ),
    }


def output_facets(producer: str = PRODUCER) -> dict[str, Any]:
    return {
        "subset": OutputSubsetOutputDatasetFacet(
            producer=producer,
            output_condition=LocationSubsetCondition(
                locations=["s3://bucket/orders/date=2025-03-01/", "s3://bucket/orders/x.parquet"]
            ),
        )
    }


def every_facet_event(
    *, run_id: str | None = None, namespace: str = "newer", seconds: int = 0
) -> dict[str, Any]:
    """A COMPLETE RunEvent carrying every facet of :data:`NEWER_FACETS`, as a dict."""
    parent_run, root_run = str(uuid.uuid4()), str(uuid.uuid4())
    parent = ParentRunFacet(
        producer=PRODUCER,
        run=ParentRun(run_id=uuid.UUID(parent_run)),
        job=ParentJob(namespace=namespace, name="dag.task_group"),
        root=ParentRoot(
            run=ParentRun(run_id=uuid.UUID(root_run)),
            job=ParentJob(namespace=namespace, name="dag"),
        ),
    )
    datasets = {key: dump(f) for key, f in dataset_facets().items()}
    return {
        "eventType": "COMPLETE",
        "eventTime": f"2025-03-01T12:00:{seconds:02d}.123456Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {
            "runId": run_id or str(uuid.uuid4()),
            "facets": {
                "parent": dump(parent),
                **{key: dump(f) for key, f in run_facets().items()},
            },
        },
        "job": {
            "namespace": namespace,
            "name": "dag.task_group.load_orders",
            "facets": {key: dump(f) for key, f in job_facets().items()},
        },
        "inputs": [
            {
                "namespace": "postgres://db:5432",
                "name": "shop.public.orders",
                "facets": datasets,
                "inputFacets": {key: dump(f) for key, f in input_facets().items()},
            }
        ],
        "outputs": [
            {
                "namespace": "s3://bucket",
                "name": "orders",
                "facets": {"tags": datasets["tags"], "datasetType": datasets["datasetType"]},
                "outputFacets": {key: dump(f) for key, f in output_facets().items()},
            }
        ],
    }
