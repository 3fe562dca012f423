"""Validate a column-lineage answer against Marquez's openapi.yml (``GET /column-lineage``).

The document says the answer is a ``LineageGraph``, but its ``NodeType`` lists only JOB and
DATASET and its node data only Dataset and Job: it predates column lineage, whose nodes Marquez
serves as ``DATASET_FIELD`` with ``ColumnLineageNodeData`` (Marquez's Java model). The check
therefore takes the response schema from the document and makes exactly that one amendment:
``DATASET_FIELD`` joins the enum, and each node's data is checked against the schema below.
"""

from __future__ import annotations

import copy
from typing import Any

from api_helpers import marquez_document
from jsonschema import Draft7Validator

__all__ = ["COLUMN_NODE_DATA", "validate_column_lineage"]

_INPUT_FIELD = {
    "type": "object",
    "required": ["namespace", "dataset", "field"],
    "properties": {
        "namespace": {"type": "string"},
        "dataset": {"type": "string"},
        "field": {"type": "string"},
        "transformationDescription": {"type": "string"},
        "transformationType": {"type": "string"},
        "transformations": {
            "type": "array",
            "items": {"type": "object", "required": ["type"]},
        },
    },
}
#: Marquez's ColumnLineageNodeData (namespace, dataset, field, inputFields; the rest optional).
COLUMN_NODE_DATA = {
    "type": "object",
    "required": ["namespace", "dataset", "field", "inputFields"],
    "properties": {
        "namespace": {"type": "string"},
        "dataset": {"type": "string"},
        "field": {"type": "string"},
        "fieldType": {"type": "string"},
        "inputFields": {"type": "array", "items": _INPUT_FIELD},
    },
}


def validate_column_lineage(body: Any) -> None:
    """Raise jsonschema's ValidationError unless ``body`` is the documented answer."""
    doc = marquez_document()
    op = doc["paths"]["/column-lineage"]["get"]
    schema = op["responses"]["200"]["content"]["application/json"]["schema"]
    components = copy.deepcopy(doc["components"])
    components["schemas"]["NodeType"]["enum"] = [
        *components["schemas"]["NodeType"]["enum"],
        "DATASET_FIELD",
    ]
    root = {**schema, "components": components}
    Draft7Validator(root).validate(body)
    for node in body["graph"]:
        assert node["type"] == "DATASET_FIELD", node["id"]
        assert node["id"] == "datasetField:{namespace}:{dataset}:{field}".format(**node["data"])
        Draft7Validator(COLUMN_NODE_DATA).validate(node["data"])
