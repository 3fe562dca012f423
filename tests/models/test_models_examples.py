"""The spec's own example documents: lossless round trips through the models, and conformance.

Each ``examples/<Facet>/*.json`` holds ``{facetKey: facet}``. We put the facet where it belongs
in a 2-0-2 RunEvent, parse it with the models, serialize it back, and compare. Then we validate
it. Some examples name a schema that is not what they are (a typo'd or unpublished version, the
wrong file, a pre-release URL): those are listed in KNOWN_DEFECTS with the violation the validator
must report, and the schema they should have named, against which they must validate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import conformance
import orjson
import pytest
from _model_helpers import normalise, run_event

from lineage_sdk.models import (
    ErrorMessageRunFacet,
    JobTypeJobFacet,
    NominalTimeRunFacet,
    ParentRunFacet,
    ProcessingEngineRunFacet,
    RunEvent,
    SchemaDatasetFacet,
    parse_event,
    to_dict,
)

EXAMPLES = Path(conformance.shared_dir()) / "openlineage-spec" / "examples"
FACET_EXAMPLES = sorted(p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.glob("*/*.json"))
_B = "https://openlineage.io/spec/facets/"

# example -> (what the validator must say about it, the schema URL it should have named)
KNOWN_DEFECTS: dict[str, tuple[str, str]] = {
    **{
        f"BaseSubsetDatasetFacet/{n}.json": (
            "resolves to no known schema",  # 1-1-0 was never published
            f"{_B}1-0-0/BaseSubsetDatasetFacet.json",
        )
        for n in (1, 2, 3, 4)
    },
    "DatasetTypeDatasetFacet/1.json": (
        "does not define the facet key 'datasetType'",  # names DatasetVersionDatasetFacet.json
        f"{_B}1-0-1/DatasetTypeDatasetFacet.json",
    ),
    "ExtractionErrorRunFacet/1.json": (
        "resolves to no known schema",  # 1-0-1 was never published
        f"{_B}1-1-2/ExtractionErrorRunFacet.json",
    ),
    "LifecycleStateChangeDatasetFacet/1.json": (
        "does not define the facet key 'lifecycleStateChange'",  # names DatasetVersion too
        f"{_B}1-0-1/LifecycleStateChangeDatasetFacet.json",
    ),
    "NominalTimeRunFacet/1.json": (
        "resolves to no known schema",  # a raw.githubusercontent.com URL
        f"{_B}1-0-1/NominalTimeRunFacet.json",
    ),
    "ProcessingEngineRunFacet/1.json": (
        "'engine_version' is a required property",  # a bug of the 1-0-0 schema, fixed in 1-1-0
        f"{_B}1-1-1/ProcessingEngineRunFacet.json",
    ),
}


def _load(relative: str) -> tuple[str, dict[str, Any]]:
    document = json.loads((EXAMPLES / relative).read_text())
    assert isinstance(document, dict)
    assert len(document) == 1, relative
    ((key, facet),) = document.items()
    assert isinstance(key, str)
    assert isinstance(facet, dict)
    return key, facet


def _placed(relative: str, key: str, facet: dict[str, Any]) -> dict[str, Any]:
    """A RunEvent carrying the facet where its kind (from the folder name) belongs."""
    folder = relative.split("/")[0]
    kind = folder
    if folder == "LineageFacet":  # one file, several definitions: the fragment says which
        kind = facet["_schemaURL"].rsplit("/", 1)[-1]
    event = run_event()
    dataset: dict[str, Any] = {"namespace": "postgres://db:5432", "name": "shop.public.orders"}
    if kind.endswith("InputDatasetFacet"):
        dataset["inputFacets"] = {key: facet}
        event["inputs"] = [dataset]
    elif kind.endswith("OutputDatasetFacet"):
        dataset["outputFacets"] = {key: facet}
        event["outputs"] = [dataset]
    elif kind.endswith("DatasetFacet"):
        dataset["facets"] = {key: facet}
        event["inputs"] = [dataset]
    elif kind.endswith("JobFacet"):
        event["job"]["facets"] = {key: facet}
    elif kind.endswith("RunFacet"):
        event["run"]["facets"] = {key: facet}
    else:
        raise AssertionError(f"cannot tell where {relative} ({kind}) belongs")
    return event


def test_examples_are_there() -> None:
    assert len(FACET_EXAMPLES) >= 40
    assert (EXAMPLES / "example_full_event.json").is_file()


@pytest.mark.parametrize("relative", FACET_EXAMPLES)
def test_facet_example_round_trips_losslessly(relative: str) -> None:
    key, facet = _load(relative)
    event = _placed(relative, key, facet)
    for source in (orjson.dumps(event), event):
        parsed = parse_event(source)
        assert normalise(to_dict(parsed)) == normalise(event)


@pytest.mark.parametrize("relative", FACET_EXAMPLES)
def test_facet_example_conforms(relative: str) -> None:
    key, facet = _load(relative)
    problems = conformance.facet_violations(key, facet)
    defect = KNOWN_DEFECTS.get(relative)
    if defect is None:
        assert problems == []
        conformance.validate_event(_placed(relative, key, facet))
    else:
        expected, right_schema = defect
        assert problems, "expected the validator to find the documented defect"
        assert any(expected in problem for problem in problems), problems
        assert conformance.facet_violations(key, facet, schema_url=right_schema) == []
        fixed = {**facet, "_schemaURL": right_schema}
        conformance.validate_event(_placed(relative, key, fixed))


def test_known_defects_are_real_examples() -> None:
    assert set(KNOWN_DEFECTS) <= set(FACET_EXAMPLES)


def test_full_event_round_trips_losslessly(examples_dir: Path) -> None:
    raw = (examples_dir / "example_full_event.json").read_bytes()
    original = orjson.loads(raw)
    parsed = parse_event(raw)
    assert isinstance(parsed, RunEvent)  # it has run, job and (oddly) dataset: run decides
    out = to_dict(parsed)
    assert out == original  # nothing to normalise: its one time is already in canonical form
    assert out["dataset"] == {"namespace": "123", "name": "1"}  # unknown key kept
    assert out["job"]["facets"]["sql"] == original["job"]["facets"]["sql"]


def test_full_event_conformance(examples_dir: Path) -> None:
    original = orjson.loads((examples_dir / "example_full_event.json").read_bytes())
    # As published it is a 1-0-5 event whose sql facet names "http://123" as its schema.
    problems = conformance.event_violations(original, spec_version=None)
    assert problems == ["job.facets.sql: _schemaURL 'http://123' resolves to no known schema"]
    strict = conformance.event_violations(original)
    assert any("schemaURL: expected" in p for p in strict)
    # With the facet's schema named correctly it conforms to its own version and to 2-0-2.
    fixed = json.loads(json.dumps(original))
    fixed["job"]["facets"]["sql"]["_schemaURL"] = f"{_B}1-1-0/SQLJobFacet.json#/$defs/SQLJobFacet"
    conformance.validate_event(fixed, spec_version=None)
    fixed["schemaURL"] = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
    conformance.validate_event(fixed)


@pytest.mark.parametrize(
    ("relative", "model"),
    [
        ("ParentRunFacet/1.json", ParentRunFacet),
        ("ParentRunFacet/2.json", ParentRunFacet),
        ("ErrorMessageRunFacet/1.json", ErrorMessageRunFacet),
        ("ProcessingEngineRunFacet/1.json", ProcessingEngineRunFacet),
        ("NominalTimeRunFacet/1.json", NominalTimeRunFacet),
        ("JobTypeJobFacet/1.json", JobTypeJobFacet),
        ("JobTypeJobFacet/2.json", JobTypeJobFacet),
        ("JobTypeJobFacet/3.json", JobTypeJobFacet),
        ("SchemaDatasetFacet/1.json", SchemaDatasetFacet),
    ],
)
def test_known_facets_are_typed(relative: str, model: type[Any]) -> None:
    key, facet = _load(relative)
    event = _placed(relative, key, facet)
    parsed = parse_event(event)
    assert isinstance(parsed, RunEvent)
    containers: list[Any] = [parsed.run.facets, parsed.job.facets]
    containers += [d.facets for d in parsed.inputs or []]
    typed = [
        getattr(container, name)
        for container in containers
        if container is not None
        for name, info in type(container).model_fields.items()
        if (info.serialization_alias or name) == key
    ]
    assert any(isinstance(value, model) for value in typed), typed
