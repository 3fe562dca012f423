"""Validate an answer against the Marquez operation that defines it (``shared/marquez/openapi.yml``).

``validate_operation("getDataset", body)`` finds the operation by its ``operationId``, takes the
schema its ``responses`` declare for the status, and validates ``body`` with jsonschema (formats
``date-time`` and ``uuid`` checked), through :func:`api_helpers.validate_marquez`, so the document's
known defects are corrected in one place:

- ``GraphNode.data`` is checked as ``Dataset`` or ``Job`` by the node's type (the discriminator);
- a ``Run`` is also checked as an ``IncompleteRun`` (its ``anyOf`` alone accepts anything);
- ``FacetsResult.facets`` is declared as one ``CustomFacet`` but Marquez answers a map of facets
  (``{"spark.logicalPlan": {...}}``), so it is checked as ``RunFacets``;
- versions' runs (``createdByRun``, ``latestRun``) are checked as runs too.

``OPERATION_VALIDATORS`` replaces the schema check of an operation the document gets wrong, and
``OPERATION_CHECKS`` adds checks after it. ``getColumnLineage`` is registered in the first: Marquez
answers it with a ``LineageGraph`` whose nodes are ``DATASET_FIELD`` nodes, a type the document's
``NodeType`` lacks, so it is checked as a ``LineageGraph`` that allows that type, each field
node's ``data`` as Marquez's column-lineage node data (``namespace``, ``dataset``, ``field``,
``inputFields``), and its id must be ``datasetField:<namespace>:<dataset>:<field>``.
``getRunLineageUpstream`` is registered there too: the document's ``UpstreamRunLineage`` misspells
``properties`` (``propoerties``) for the runs and their jobs, so it checks almost nothing. It is
checked as the document means it, stricter: the typos corrected, every key of a run, its job,
run and inputs required as Marquez sends them (``start``, ``end``, ``version`` and
``producedByRunId`` may be left out when unknown), no other keys, ``status`` one of Marquez's run
states; each run listed once, the selected run first, and every run after the listed runs that
read what it produced (topological order upstream). Its top level also allows the
lineage-sdk extension of bounded queries, ``truncated`` and ``nodeLimit`` (Marquez sends neither).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import conformance
from api_helpers import marquez_document, validate_marquez
from jsonschema import Draft7Validator, ValidationError

__all__ = [
    "OPERATION_CHECKS",
    "OPERATION_VALIDATORS",
    "operation",
    "response_component",
    "upstream_run_lineage_schema",
    "validate_operation",
]

#: Marquez's column-lineage node data (``ColumnLineageNodeData``); loose where Marquez is.
_FIELD_ID = {
    "type": "object",
    "required": ["namespace", "dataset", "field"],
    "properties": {
        "namespace": {"type": "string"},
        "dataset": {"type": "string"},
        "field": {"type": "string"},
        "datasetVersion": {"type": ["string", "null"]},
        "transformationDescription": {"type": ["string", "null"]},
        "transformationType": {"type": ["string", "null"]},
        "transformations": {"type": "array", "items": {"type": "object", "required": ["type"]}},
    },
}
FIELD_NODE_DATA: dict[str, Any] = {
    **_FIELD_ID,
    "properties": {
        **_FIELD_ID["properties"],
        "fieldType": {"type": ["string", "null"]},
        "inputFields": {"type": "array", "items": _FIELD_ID},
    },
}


def _column_lineage(body: Any) -> None:
    components = copy.deepcopy(marquez_document()["components"])
    components["schemas"]["NodeType"]["enum"] = ["JOB", "DATASET", "DATASET_FIELD"]
    root = {"$ref": "#/components/schemas/LineageGraph", "components": components}
    Draft7Validator(root, format_checker=conformance.FORMAT_CHECKER).validate(body)
    for node in body["graph"]:
        if node["type"] == "DATASET_FIELD":
            Draft7Validator(FIELD_NODE_DATA).validate(node["data"])
            expected = "datasetField:{namespace}:{dataset}:{field}".format(**node["data"])
            if node["id"] != expected:
                raise ValidationError(f"node id {node['id']!r} is not {expected!r}")
        else:
            validate_marquez("Dataset" if node["type"] == "DATASET" else "Job", node["data"])


def _spelled(node: Any) -> Any:
    """The schema with ``propoerties`` read as ``properties`` (openapi.yml's typo)."""
    if isinstance(node, dict):
        return {("properties" if k == "propoerties" else k): _spelled(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_spelled(v) for v in node]
    return node


def _strict(schema: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {**schema, "required": required, "additionalProperties": False}


def upstream_run_lineage_schema() -> dict[str, Any]:
    """``UpstreamRunLineage`` as the document means it (see the module docstring)."""
    doc = _spelled(copy.deepcopy(marquez_document()["components"]["schemas"]["UpstreamRunLineage"]))
    item = doc["properties"]["runs"]["items"]
    props = item["properties"]
    props["job"] = _strict(props["job"], ["namespace", "name", "version"])
    props["run"] = _strict(props["run"], ["id", "status"])
    props["run"]["properties"]["status"]["enum"] = [
        "NEW",
        "RUNNING",
        "COMPLETED",
        "FAILED",
        "ABORTED",
    ]
    props["inputs"]["items"] = _strict(props["inputs"]["items"], ["namespace", "name"])
    doc["properties"]["runs"]["items"] = _strict(item, ["job", "run", "inputs"])
    # lineage-sdk extension (issue #16, bounded queries): every graph read says whether it was
    # cut at its node limit, and at which. Marquez sends neither key, so neither is required.
    doc["properties"]["truncated"] = {"type": "boolean"}
    doc["properties"]["nodeLimit"] = {"type": "integer", "minimum": 1}
    return _strict(doc, ["runs"])


def _run_lineage(body: Any) -> None:
    Draft7Validator(
        upstream_run_lineage_schema(), format_checker=conformance.FORMAT_CHECKER
    ).validate(body)
    ids = [r["run"]["id"] for r in body["runs"]]
    if len(set(ids)) != len(ids):
        raise ValidationError(f"a run is listed twice: {ids}")
    position = {run_id: i for i, run_id in enumerate(ids)}
    for i, upstream in enumerate(body["runs"]):
        for item in upstream["inputs"]:
            producer = item.get("producedByRunId")
            if producer in position and position[producer] <= i:
                raise ValidationError(f"run {producer} is listed before its consumer {ids[i]}")


#: operationId -> a validator used instead of the document's schema (raises on a bad answer).
OPERATION_VALIDATORS: dict[str, Callable[[Any], None]] = {
    "getColumnLineage": _column_lineage,
    "getRunLineageUpstream": _run_lineage,
}
#: operationId -> extra checks run after the schema's (append; each raises on a bad answer).
OPERATION_CHECKS: dict[str, list[Callable[[Any], None]]] = {}


def operation(operation_id: str) -> tuple[str, str, dict[str, Any]]:
    """(path, method, operation) of ``operation_id``; KeyError naming the known ids if absent."""
    known: list[str] = []
    for path, item in marquez_document()["paths"].items():
        for method, op in item.items():
            if isinstance(op, dict) and "operationId" in op:
                known.append(op["operationId"])
                if op["operationId"] == operation_id:
                    return path, method, op
    raise KeyError(f"no operation {operation_id!r} in openapi.yml; known: {sorted(known)}")


def response_component(operation_id: str, status: int = 200) -> dict[str, Any]:
    """The JSON schema the operation declares for ``status`` (often just a ``$ref``)."""
    _, _, op = operation(operation_id)
    responses = op["responses"]
    response = responses.get(str(status), responses.get(status))
    if response is None:
        raise KeyError(f"{operation_id} declares no {status} answer")
    schema: dict[str, Any] = response["content"]["application/json"]["schema"]
    return schema


def _runs(items: Any, key: str) -> None:
    for item in items or []:
        if item.get(key) is not None:
            validate_marquez("Run", item[key])


def _nested(component: str, body: Any) -> None:
    """Checks the document's own schemas leave out (see the module docstring)."""
    if component == "DatasetVersion":
        _runs([body], "createdByRun")
    elif component == "DatasetVersionList":
        _runs(body.get("versions"), "createdByRun")
    elif component == "JobVersion":
        _runs([body], "latestRun")
    elif component == "JobVersionList":
        _runs(body.get("versions"), "latestRun")
    elif component == "DatasetList":
        for dataset in body.get("datasets", []):
            validate_marquez("Dataset", dataset)
    elif component in ("SourceList", "TagList"):
        item = "Source" if component == "SourceList" else "Tag"
        for entry in body.get("sources" if item == "Source" else "tags", []):
            validate_marquez(item, entry)


def validate_operation(operation_id: str, body: Any, status: int = 200) -> None:
    """Validate ``body`` as the answer ``operation_id`` declares for ``status``; raises
    jsonschema's ValidationError."""
    schema = response_component(operation_id, status)
    ref = schema.get("$ref", "")
    if operation_id in OPERATION_VALIDATORS:
        OPERATION_VALIDATORS[operation_id](body)
    elif ref == "#/components/schemas/FacetsResult":
        corrected = copy.deepcopy(marquez_document()["components"]["schemas"]["FacetsResult"])
        corrected["properties"]["facets"] = {"$ref": "#/components/schemas/RunFacets"}
        root = {**corrected, "components": marquez_document()["components"]}
        Draft7Validator(root, format_checker=conformance.FORMAT_CHECKER).validate(body)
    elif ref.startswith("#/components/schemas/"):
        component = ref.rsplit("/", 1)[1]
        validate_marquez(component, body)
        _nested(component, body)
    else:
        root = {**schema, "components": marquez_document()["components"]}
        Draft7Validator(root, format_checker=conformance.FORMAT_CHECKER).validate(body)
    for check in OPERATION_CHECKS.get(operation_id, []):
        check(body)
