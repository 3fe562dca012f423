"""pydantic models of the API's responses, for the OpenAPI document.

The read endpoints build their answers as plain dicts (:mod:`.marquez`) and these models only
describe them; ``tests/api/test_openapi.py`` validates real answers against the generated
``/openapi.json`` so the document cannot drift from what is served. Field names are Marquez's
(camelCase) on purpose: tools written for Marquez read them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lineage_sdk.collector.store import Granularity

__all__ = [
    "BatchFailedEvent",
    "BatchResult",
    "BatchSummary",
    "Bounded",
    "DatasetField",
    "DatasetId",
    "DatasetList",
    "DatasetModel",
    "DatasetVersionId",
    "DatasetVersionList",
    "DatasetVersionModel",
    "ErrorBody",
    "FacetsResultModel",
    "GraphDatasetRef",
    "GraphEdge",
    "GraphEdgeData",
    "GraphJobData",
    "GraphNode",
    "GraphRunData",
    "HealthBody",
    "ImpactLatestRun",
    "ImpactModel",
    "ImpactNode",
    "ImpactOwner",
    "IngestAccepted",
    "JobId",
    "JobList",
    "JobModel",
    "JobVersionId",
    "JobVersionList",
    "JobVersionModel",
    "LineageEventList",
    "LineageGraphModel",
    "NamespaceList",
    "NamespaceModel",
    "RunList",
    "RunModel",
    "SearchResult",
    "SearchResultList",
    "SourceList",
    "SourceModel",
    "TagList",
    "TagModel",
    "UpstreamRun",
    "UpstreamRunInput",
    "UpstreamRunLineageModel",
    "UpstreamRunSummary",
    "Windowed",
]

RunState = Literal["NEW", "RUNNING", "COMPLETED", "FAILED", "ABORTED"]


class _Doc(BaseModel):
    # Answers may carry keys a later version adds; describing them must not forbid them.
    model_config = ConfigDict(extra="allow")


class ErrorBody(_Doc):
    """Every error this API raises on purpose: a readable ``detail`` and a short ``reason``."""

    detail: str = Field(description="What was wrong, in words a caller can act on.")
    reason: str = Field(description="A stable code, e.g. invalid_event, too_large, unauthorized.")


class IngestAccepted(_Doc):
    eventId: str = Field(description="Content id of the stored event (idempotency key).")


class BatchSummary(_Doc):
    received: int
    successful: int
    failed: int
    retriable: int
    non_retriable: int


class BatchFailedEvent(_Doc):
    index: int = Field(description="Position of the event in the posted array.")
    reason: str
    retriable: bool


class BatchResult(_Doc):
    """The OpenLineage spec's batch answer (``OpenLineage.yml``, ``/lineage/batch``).

    ``failure`` is used only with a non-2xx status, when no event of the batch was stored.
    """

    status: Literal["success", "partial_success", "failure"]
    summary: BatchSummary
    failed_events: list[BatchFailedEvent] = Field(default_factory=list)


class DatasetId(_Doc):
    namespace: str
    name: str


class JobId(_Doc):
    namespace: str
    name: str


class RunModel(_Doc):
    """Marquez ``Run``; times are RFC 3339 in UTC, left out when unknown."""

    id: str
    state: RunState
    startedAt: str | None = None
    endedAt: str | None = None
    durationMs: int | None = None
    facets: dict[str, Any] = Field(default_factory=dict)
    liveness: Literal["LIVE", "STALE"] | None = Field(
        default=None,
        description="Ours, beside Marquez's `state`: for a START/RUNNING run that carries the "
        "`lineagesdk_heartbeat` facet, STALE once its latest heartbeat is older than 3 heartbeat "
        "intervals (computed when read, never stored), else LIVE; absent for other runs.",
    )
    lastHeartbeatAt: str | None = Field(
        default=None, description="Ours: the time of the run's latest START/RUNNING event."
    )
    heartbeatIntervalS: float | None = Field(
        default=None, description="Ours: the heartbeat interval the run's facet names (seconds)."
    )


class DatasetField(_Doc):
    name: str
    type: str | None = None
    tags: list[str] = Field(default_factory=list)
    description: str | None = None


class DatasetModel(_Doc):
    """Marquez ``Dataset``; the single-dataset answer adds fields, facets, times and version."""

    id: DatasetId
    namespace: str
    name: str
    type: str | None = None
    physicalName: str | None = None
    sourceName: str | None = None
    fields: list[DatasetField] | None = None
    tags: list[str] | None = None
    facets: dict[str, Any] | None = None
    createdAt: str | None = None
    updatedAt: str | None = None
    lastModifiedAt: str | None = None
    currentVersion: str | None = None
    qualityFailed: bool | None = Field(
        default=None,
        description="lineage-sdk extension (lineage nodes, lists): true when the dataset's latest "
        "`dataQualityAssertions` facet holds an assertion with `success: false` (else left out).",
    )
    schemaBreaking: bool | None = Field(
        default=None,
        description="lineage-sdk extension (lineage nodes, the job view at the present time): "
        "true when the dataset's last schema change removed a field or changed a field's type "
        "against the schema before it, as the `schema` facets of its writers' two latest runs "
        "and its DatasetEvents state them (else left out).",
    )
    otherNames: list[DatasetId] | None = Field(
        default=None,
        description="lineage-sdk extension: the dataset's other names (its symlinks, and the "
        "names producers sent it under), each of which finds it too.",
    )


class JobModel(_Doc):
    id: JobId
    namespace: str
    name: str
    inputs: list[DatasetId] | None = None
    outputs: list[DatasetId] | None = None
    latestRun: RunModel | None = None
    latestRuns: list[RunModel] | None = None
    type: str | None = None
    facets: dict[str, Any] | None = None
    createdAt: str | None = None
    updatedAt: str | None = None
    location: str | None = None
    currentVersion: str | None = None


class GraphEdgeData(_Doc):
    """lineage-sdk extension: what an edge of the dataset and run views stands for."""

    jobs: list[JobId] | None = Field(
        default=None,
        description="dataset view: the jobs that read the origin and wrote the destination, "
        "sorted by namespace and name.",
    )
    link: Literal["parent"] | None = Field(
        default=None, description="run view: parent, on the edge from a parent run to its child."
    )


class GraphEdge(_Doc):
    origin: str
    destination: str
    declared: bool | None = Field(
        default=None,
        description="true when a JobEvent (static lineage) declares the edge; left out otherwise",
    )
    data: GraphEdgeData | None = Field(
        default=None,
        description="lineage-sdk extension, in the dataset and run views only (see "
        "GraphEdgeData); left out in the job view.",
    )


class GraphJobData(JobModel):
    """A job node's data: Marquez's ``Job``; in the parent view a root job also lists the jobs
    folded into it."""

    children: list[JobId] | None = Field(
        default=None,
        description="lineage-sdk extension, parent view: the child jobs (those whose parent "
        "facet names this root job) folded into this node, sorted.",
    )


class GraphDatasetRef(_Doc):
    """A dataset node's data in the dataset and run views: its name alone."""

    namespace: str
    name: str


class GraphRunData(_Doc):
    """lineage-sdk extension: a RUN node's data (run view); times RFC 3339 or null."""

    runId: str
    job: JobId | None = Field(default=None, description="The run's job; null when unknown.")
    state: str | None = Field(default=None, description="The run's latest state, if stated.")
    startedAt: str | None = None
    endedAt: str | None = None
    parentRunId: str | None = None


class GraphNode(_Doc):
    id: str = Field(
        description="dataset:<namespace>:<name> or job:<namespace>:<name>; run:<runId> for a RUN "
        "node (run view)."
    )
    type: Literal["DATASET", "JOB", "RUN"] = Field(
        description="DATASET or JOB (Marquez's); RUN in the run view (a lineage-sdk extension)."
    )
    data: GraphJobData | DatasetModel | GraphRunData | GraphDatasetRef
    inEdges: list[GraphEdge]
    outEdges: list[GraphEdge]


class Bounded(_Doc):
    """The lineage-sdk extension of every graph read (issue #16's bounded queries)."""

    truncated: bool = Field(
        default=False,
        description="lineage-sdk extension: true when nodes were left out because of nodeLimit.",
    )
    nodeLimit: int = Field(
        default=1000, description="lineage-sdk extension: the node limit the answer was cut at."
    )
    nodeId: str | None = Field(
        default=None,
        description="lineage-sdk extension: the node the answer starts at, when the nodeId asked "
        "named a dataset by another of its names (a symlink, or a name a producer sent).",
    )


class Windowed(Bounded):
    """The lineage-sdk extension of the graph reads that take a window (issue 33's views)."""

    omittedNodes: int | None = Field(
        default=None,
        description="lineage-sdk extension: how many nodes found within depth were left out "
        "by nodeLimit (0 when none; counted in the view's own nodes).",
    )
    since: str | None = Field(
        default=None,
        description="lineage-sdk extension: the window's start (inclusive), echoed when asked.",
    )
    until: str | None = Field(
        default=None,
        description="lineage-sdk extension: the window's end (exclusive), echoed when asked.",
    )


class LineageGraphModel(Windowed):
    graph: list[GraphNode]
    granularity: Granularity | None = Field(
        default=None, description="lineage-sdk extension: the view answered (job by default)."
    )


class NamespaceModel(_Doc):
    name: str
    ownerName: str | None = None


class NamespaceList(_Doc):
    namespaces: list[NamespaceModel]


class JobList(_Doc):
    jobs: list[JobModel]
    totalCount: int = Field(description="Number of jobs in this answer.")


class DatasetList(_Doc):
    datasets: list[DatasetModel]
    totalCount: int = Field(description="Number of datasets in this answer.")


class RunList(_Doc):
    runs: list[RunModel]


class LineageEventList(_Doc):
    events: list[dict[str, Any]] = Field(description="OpenLineage events as they were received.")
    totalCount: int


class SearchResult(_Doc):
    type: Literal["DATASET", "JOB"]
    name: str
    namespace: str
    nodeId: str


class SearchResultList(_Doc):
    totalCount: int
    results: list[SearchResult]


class HealthBody(_Doc):
    status: Literal["ok"]
    ingest: bool = Field(description="True when events can be posted (a store is configured).")
    query_store: str | None = Field(description="Store answering the read API, if any.")


# ---------------------------------------------------------------- versions, sources, tags, facets


class DatasetVersionId(_Doc):
    namespace: str
    name: str
    version: str


class DatasetVersionModel(_Doc):
    """Marquez ``DatasetVersion``: the dataset at one content version (version facet or schema)."""

    id: DatasetVersionId
    type: str
    name: str
    physicalName: str
    createdAt: str
    version: str
    namespace: str
    sourceName: str
    fields: list[DatasetField]
    description: str
    createdByRun: RunModel | None = Field(
        default=None,
        description="The version's first writer; left out when only DatasetEvents describe it.",
    )
    facets: dict[str, Any]


class DatasetVersionList(_Doc):
    versions: list[DatasetVersionModel]
    totalCount: int = Field(description="Number of versions of the dataset.")


class JobVersionId(_Doc):
    namespace: str
    name: str
    version: str


class JobVersionModel(_Doc):
    """Marquez ``JobVersion``: the runs of a job that agree on inputs, outputs and location."""

    id: JobVersionId
    name: str
    version: str
    createdAt: str | None = None
    namespace: str
    inputs: list[DatasetId]
    outputs: list[DatasetId]
    location: str | None = None
    latestRun: RunModel | None = None
    facets: dict[str, Any]


class JobVersionList(_Doc):
    versions: list[JobVersionModel]
    totalCount: int = Field(description="Number of versions of the job.")


class SourceModel(_Doc):
    """Marquez ``Source``: what the datasets' ``dataSource`` facets name (``default``: the
    datasets sent without one, with no URL)."""

    type: str
    name: str
    createdAt: str
    updatedAt: str
    connectionUrl: str


class SourceList(_Doc):
    sources: list[SourceModel]


class TagModel(_Doc):
    name: str
    description: str | None = None


class TagList(_Doc):
    tags: list[TagModel]


class FacetsResultModel(_Doc):
    runId: str
    facets: dict[str, Any]


# ------------------------------------------------------------------------------------ run lineage


class UpstreamRunSummary(_Doc):
    """A run in Marquez's ``UpstreamRunLineage``; times left out when unknown."""

    id: str
    start: str | None = None
    end: str | None = None
    status: RunState


class UpstreamRunInput(_Doc):
    """A dataset version a run read; ``producedByRunId`` is left out when no run is known to have
    written it (an external source), ``version`` when no version of it is known."""

    namespace: str
    name: str
    version: str | None = None
    producedByRunId: str | None = None


class UpstreamRun(_Doc):
    job: JobVersionId | None = None
    run: UpstreamRunSummary
    inputs: list[UpstreamRunInput]


class UpstreamRunLineageModel(Bounded):
    runs: list[UpstreamRun] = Field(
        description="The run first, then the runs upstream of it in topological order."
    )


# ----------------------------------------------------------------------------------------- impact


class ImpactOwner(_Doc):
    """An owner an ``ownership`` facet names (OpenLineage's Ownership job and dataset facets)."""

    name: str
    type: str | None = Field(default=None, description="The type of ownership, when stated.")


class ImpactLatestRun(_Doc):
    """A node's latest run: a job's own; a dataset's, the latest of its writers' latest runs."""

    id: str
    state: RunState
    startedAt: str | None = None
    endedAt: str | None = None
    liveness: Literal["LIVE", "STALE"] | None = Field(
        default=None,
        description="For a START/RUNNING run that names a heartbeat interval: STALE once its "
        "heartbeats stopped, else LIVE (as the runs' `liveness`).",
    )
    job: JobId | None = Field(
        default=None, description="A dataset's latest run: the writer job that ran it."
    )


class ImpactNode(_Doc):
    """A job or dataset downstream of the asked node."""

    nodeId: str
    type: Literal["JOB", "DATASET"]
    namespace: str
    name: str
    distance: int = Field(
        description="Edges from the asked node along the data flow (dataset -> job -> "
        "dataset): from a dataset, the jobs reading it are 1 and their outputs 2; from a job, "
        "its outputs are 1."
    )
    latestRun: ImpactLatestRun | None
    owners: list[ImpactOwner] = Field(
        description="The owners of the node's latest `ownership` facet (empty: none stated)."
    )


class ImpactModel(_Doc):
    """lineage-sdk extension (issue 34): what lies downstream of a node, nearest first."""

    nodeId: str = Field(
        description="The node the walk started at (a dataset asked by another of its names "
        "starts at the dataset it names)."
    )
    depth: int
    impact: list[ImpactNode] = Field(description="By distance, then node id; not the node itself.")
    truncated: bool = Field(description="True when nodes were left out because of nodeLimit.")
    nodeLimit: int | None = Field(description="The node limit (the asked node counts as one).")
    omittedNodes: int = Field(
        description="How many nodes the walk found and left out (it stops one level past the "
        "limit, so at least that many)."
    )
