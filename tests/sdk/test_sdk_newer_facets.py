"""Issue 32 item 4: the SDK emits every newer facet at its newest spec version, through its
public API, and what it emits conforms to the official schemas.

The facets (tags on run, job and dataset, jobType 2-0-4 with emissionPattern, parent 1-2-0 with
root, schema 1-2-0 with ordinal_position, datasetType, catalog, hierarchy, executionParameters,
environmentVariables, subset, inputStatistics, dataQualityAssertions 1-1-0) are built with the
typed models of ``lineage_sdk.models`` (tests/newer_facets.py) and attached with
``@track_lineage``, ``current_run().add_run_facets``, ``LineageDataset(input_facets=...,
output_facets=...)`` and ``LineageProducer``; every event the in-memory exporter receives is
validated with tests/conformance.py against ../shared/openlineage-spec.
"""

from __future__ import annotations

import json
import re
from typing import Any

import conformance
import orjson
import pytest
from conformance import validate_event
from newer_facets import (
    NEWER_FACETS,
    PRODUCER,
    dataset_facets,
    dump,
    every_facet_event,
    input_facets,
    job_facets,
    output_facets,
    run_facets,
)
from pydantic import ValidationError
from sdk_helpers import flushed_events

from lineage_sdk import LineageDataset, LineageProducer, current_run, track_lineage
from lineage_sdk.models import (
    EnvironmentVariablesRunFacet,
    ExecutionParameter,
    InputStatisticsInputDatasetFacet,
    InputSubsetInputDatasetFacet,
    JobFacets,
    LocationSubsetCondition,
    OutputSubsetOutputDatasetFacet,
    RunEvent,
    Tag,
    TagsJobFacet,
    TagsRunFacet,
    parse_event,
    to_dict,
)
from lineage_sdk.sdk.events import EventBuilder
from lineage_sdk.sdk.runs import LineageRun, ParentRef

FACETS_DIR = conformance.spec_dir() / "facets"
EXAMPLES = conformance.shared_dir() / "openlineage-spec" / "examples"
_VERSION = re.compile(r"\d+-\d+-\d+")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("-"))


def _newest(file_name: str) -> str:
    versions = [d.name for d in FACETS_DIR.iterdir() if (d / file_name).is_file()]
    assert versions, file_name
    return max(versions, key=_key)


# ------------------------------------------------------------------------------ typed models


@pytest.mark.parametrize(
    ("where", "key", "model", "schema_file"),
    NEWER_FACETS,
    ids=[f"{where}.{key}" for where, key, _, _ in NEWER_FACETS],
)
def test_each_model_names_the_newest_published_schema(
    where: str, key: str, model: type[Any], schema_file: str
) -> None:
    version, file_name = schema_file.split("/")
    assert _newest(file_name) == version, f"{file_name}: a newer version is published"
    url: str = model.SCHEMA_URL
    assert url.startswith(f"https://openlineage.io/spec/facets/{version}/{file_name}#/$defs/")
    assert key == model.KEY
    assert conformance.schema_path(url) == FACETS_DIR / version / file_name


def _built() -> dict[tuple[str, str], Any]:
    facets: dict[tuple[str, str], Any] = {}
    for where, made in (
        ("run", run_facets()),
        ("job", job_facets()),
        ("dataset", dataset_facets()),
        ("input", input_facets()),
        ("output", output_facets()),
    ):
        for key, facet in made.items():
            facets[(where, key)] = facet
    return facets


@pytest.mark.parametrize(
    ("where", "key"),
    [(where, key) for where, key, _, _ in NEWER_FACETS if key != "parent"],
    ids=[f"{where}.{key}" for where, key, _, _ in NEWER_FACETS if key != "parent"],
)
def test_each_typed_facet_conforms(where: str, key: str) -> None:
    facet = _built()[(where, key)]
    emitted = dump(facet)
    assert emitted["_producer"] == PRODUCER
    assert emitted["_schemaURL"] == type(facet).SCHEMA_URL
    assert conformance.facet_violations(key, emitted) == []


def test_an_event_with_every_facet_conforms_and_round_trips() -> None:
    event = every_facet_event()
    validate_event(event)
    parsed = parse_event(orjson.dumps(event))
    assert isinstance(parsed, RunEvent)
    assert to_dict(parsed) == event  # the models keep every new facet as sent


@pytest.mark.parametrize(
    ("example", "model", "fixed_url"),
    [
        ("TagsRunFacet/1.json", TagsRunFacet, None),
        ("TagsJobFacet/1.json", TagsJobFacet, None),
        ("TagsDatasetFacet/1.json", None, None),
        ("DatasetTypeDatasetFacet/1.json", None, "1-0-1"),
        ("HierarchyDatasetFacet/1.json", None, None),
        ("EnvironmentVariablesRunFacet/1.json", EnvironmentVariablesRunFacet, None),
        ("DataQualityAssertionsDatasetFacet/1.json", None, "1-1-0"),
        *[
            (f"BaseSubsetDatasetFacet/{n}.json", InputSubsetInputDatasetFacet, "1-0-0")
            for n in (1, 2, 3, 4)
        ],
    ],
)
def test_the_spec_examples_build_the_typed_models(
    example: str, model: type[Any] | None, fixed_url: str | None
) -> None:
    """Each spec example is read by its model and written back unchanged; with the schema its
    model names, it conforms (some examples name an unpublished or wrong schema)."""
    folder = example.split("/")[0]
    if model is None:
        model = next(m for _, _, m, f in NEWER_FACETS if f.endswith(f"/{folder}.json"))
    document = json.loads((EXAMPLES / example).read_text())
    ((key, facet),) = document.items()
    typed = model.model_validate(facet)
    assert typed.model_dump(by_alias=True, mode="json", exclude_unset=True) == facet
    if fixed_url is not None:
        facet = {**facet, "_schemaURL": model.SCHEMA_URL}
    assert conformance.facet_violations(key, facet) == []


def test_the_models_refuse_what_the_schemas_refuse() -> None:
    with pytest.raises(ValidationError, match="extra"):
        ExecutionParameter(key="k", unit="s")  # type: ignore[call-arg]  # additionalProperties
    with pytest.raises(ValidationError, match="environmentVariables"):
        EnvironmentVariablesRunFacet(producer=PRODUCER)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        InputStatisticsInputDatasetFacet(producer=PRODUCER, row_count=-1)
    with pytest.raises(ValidationError):
        InputStatisticsInputDatasetFacet(producer=PRODUCER, size="10")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Tag(key="k")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        LocationSubsetCondition(type="partition", locations=[])  # type: ignore[arg-type]
    # ...and the conformance check catches the same mistakes in a hand-written dict.
    bad = {**dump(run_facets()["environmentVariables"])}
    del bad["environmentVariables"]
    assert conformance.facet_violations("environmentVariables", bad)
    extra = dump(run_facets()["executionParameters"])
    extra["parameters"][0]["unit"] = "s"
    assert conformance.facet_violations("executionParameters", extra)


def test_parsing_stays_tolerant_of_other_producers_versions_of_the_new_facets() -> None:
    """The collector parses with these models: a malformed newer facet from another producer is
    kept as sent, not refused (they stay raw in the containers)."""
    event = every_facet_event()
    event["run"]["facets"]["tags"] = {"_producer": PRODUCER, "_schemaURL": "x:y", "tags": "oops"}
    event["job"]["facets"]["tags"] = {"_producer": PRODUCER, "_schemaURL": "x:y", "tags": 1}
    event["inputs"][0]["inputFacets"]["inputStatistics"]["rowCount"] = "many"
    assert to_dict(parse_event(orjson.dumps(event))) == event
    assert "tags" not in JobFacets.model_fields


# ------------------------------------------------------------------------ through the public API

ORDERS = LineageDataset(
    "postgres://db:5432",
    "shop.public.orders",
    facets=dataset_facets(),
    input_facets=input_facets(),
    output_facets=output_facets(),
)
LAKE = LineageDataset(
    "s3://bucket",
    "orders",
    facets={"tags": dataset_facets()["tags"]},
    output_facets=output_facets(),
)


def _dumped(facets: dict[str, Any]) -> dict[str, Any]:
    return {key: dump(facet) for key, facet in facets.items()}


def test_track_lineage_emits_every_new_facet_and_they_conform(memory_exporter) -> None:
    @track_lineage(
        job_name="load_orders",
        inputs=[ORDERS],
        outputs=[LAKE, ORDERS],
        job_namespace="newer",
        run_facets=run_facets(),
        job_facets=job_facets(),
    )
    def load() -> str:
        @track_lineage(job_name="load_orders.step", inputs=[ORDERS])
        def step() -> None:
            current_run().add_run_facets({"tags": TagsRunFacet(producer=PRODUCER, tags=[])})

        step()
        run_id = current_run().run_id
        assert run_id is not None
        return run_id

    outer_run = load()
    events = flushed_events(memory_exporter)
    assert len(events) == 4
    for event in events:
        validate_event(event)
    outer = [e for e in events if e["job"]["name"] == "load_orders"]
    inner = [e for e in events if e["job"]["name"] == "load_orders.step"]
    for event in outer:
        facets = event["run"]["facets"]
        for key, facet in _dumped(run_facets()).items():
            assert facets[key] == facet
        assert event["job"]["facets"] == _dumped(job_facets())  # the user's jobType wins
        (read,) = event["inputs"]
        assert read["facets"] == _dumped(dataset_facets())
        assert read["inputFacets"] == _dumped(input_facets())
        assert "outputFacets" not in read
        lake, orders = event["outputs"]
        assert lake["outputFacets"] == orders["outputFacets"] == _dumped(output_facets())
        assert "inputFacets" not in lake and "inputFacets" not in orders
    complete = inner[-1]
    parent = complete["run"]["facets"]["parent"]
    assert parent["_schemaURL"].startswith("https://openlineage.io/spec/facets/1-2-0/")
    assert parent["run"]["runId"] == outer_run
    assert parent["root"] == {
        "run": {"runId": outer_run},
        "job": {"namespace": "newer", "name": "load_orders"},
    }
    assert complete["run"]["facets"]["tags"]["tags"] == []
    assert complete["job"]["facets"]["jobType"]["processingType"] == "BATCH"  # the SDK's own
    assert complete["job"]["facets"]["jobType"]["_schemaURL"].startswith(
        "https://openlineage.io/spec/facets/2-0-4/"
    )


def test_tags_on_run_and_job_together_through_facets_and_explicit_arguments(
    memory_exporter,
) -> None:
    """``facets=`` tells run from job by schema URL; one key on both needs the explicit ones."""
    run_tags = TagsRunFacet(producer=PRODUCER, tags=[Tag(key="run", value="1")])
    job_tags = TagsJobFacet(producer=PRODUCER, tags=[Tag(key="job", value="2")])

    @track_lineage(job_name="split", facets={"tags": job_tags}, run_facets={"tags": run_tags})
    def split() -> None:
        return None

    split()
    events = flushed_events(memory_exporter)
    assert len(events) == 2
    for event in events:
        validate_event(event)
        assert event["run"]["facets"]["tags"] == dump(run_tags)
        assert event["job"]["facets"]["tags"] == dump(job_tags)


def test_the_producer_api_takes_run_and_job_facets(memory_exporter) -> None:
    producer = LineageProducer(job_namespace="newer")
    run_id = producer.record_consumption_sync(
        "COMPLETE",
        "ingest",
        inputs=[ORDERS],
        outputs=[LAKE],
        run_facets=run_facets(),
        job_facets=job_facets(),
    )
    (event,) = flushed_events(memory_exporter)
    validate_event(event)
    assert event["run"]["runId"] == run_id
    assert {k: event["run"]["facets"][k] for k in run_facets()} == _dumped(run_facets())
    assert event["job"]["facets"] == _dumped(job_facets())
    assert event["inputs"][0]["inputFacets"] == _dumped(input_facets())
    assert event["outputs"][0]["outputFacets"] == _dumped(output_facets())
    with pytest.raises(ValueError, match="_schemaURL"):
        producer.record_consumption_sync("START", "ingest", run_facets={"tags": {"tags": []}})


def test_the_spliced_and_the_dict_event_are_the_same_bytes() -> None:
    """``encode_run_event`` (what the worker sends) equals ``encode_event(run_event(...))``
    with side facets on the datasets, so the conformance of one is the conformance of both."""
    builder = EventBuilder(PRODUCER)
    parent = ParentRef("01890a5d-ac96-774b-bcce-b302099a8057", "newer", "dag")
    run = LineageRun(
        "01890a5d-ac96-774b-bcce-b302099a8058",
        "newer",
        "job",
        (ORDERS,),
        (LAKE, ORDERS),
        _dumped(run_facets()),
        _dumped(job_facets()),
        parent,
    )
    for event_type in ("START", "RUNNING", "COMPLETE"):
        spliced = builder.encode_run_event(
            event_type, run, 1_740_830_400_000_000_000, (ORDERS,), (LAKE, ORDERS)
        )
        as_dict = builder.run_event(
            event_type, run, 1_740_830_400_000_000_000, (ORDERS,), (LAKE, ORDERS)
        )
        assert orjson.loads(spliced.payload) == as_dict
        assert spliced.payload == orjson.dumps(as_dict, option=orjson.OPT_SORT_KEYS)
        validate_event(as_dict)


def test_side_facets_are_checked_when_the_dataset_is_made() -> None:
    with pytest.raises(ValueError, match="_schemaURL"):
        LineageDataset("ns", "t", input_facets={"subset": {"inputCondition": {}}})
    with pytest.raises(TypeError, match="mapping"):
        LineageDataset("ns", "t", output_facets=[1])  # type: ignore[arg-type]
    plain = LineageDataset("ns", "t")
    assert plain.to_json("inputs") == plain.to_json() == plain.to_json("outputs")
    with pytest.raises(ValueError, match="side"):
        plain.to_dict("sideways")
    sided = LineageDataset(
        "ns",
        "t",
        output_facets={
            "subset": OutputSubsetOutputDatasetFacet(
                producer=PRODUCER, output_condition=LocationSubsetCondition(locations=["a"])
            )
        },
    )
    assert sided != plain and hash(sided) == hash(plain)
    assert "outputFacets" not in sided.to_dict("inputs")
    assert orjson.loads(sided.to_json("outputs")) == sided.to_dict("outputs")


def test_a_dataset_merged_with_what_a_database_instrumentor_found_keeps_its_side_facets() -> None:
    """The database instrumentors merge the ``schema`` they find into a declared dataset."""
    from lineage_instrumentation.db._merge import merge_datasets

    found = LineageDataset(
        ORDERS.namespace,
        ORDERS.name,
        facets={"lineagesdk_found": {"_producer": PRODUCER, "_schemaURL": "https://x.y/z.json"}},
    )
    merged = merge_datasets(ORDERS, found)
    assert merged is not None
    assert merged.input_facets == ORDERS.input_facets
    assert merged.output_facets == ORDERS.output_facets
    assert set(merged.facets) == {*ORDERS.facets, "lineagesdk_found"}


def test_integers_beyond_64_bits_are_sent_exactly(memory_exporter: Any) -> None:
    """A facet value beyond 64 bits (a row count, an id) reaches the exporter exact, from the
    run's facets, the job's and a dataset's: orjson alone refuses to write it (issue 32, item
    7; the collector keeps it exact from there)."""
    from lineage_sdk.models.json_exact import loads_exact

    big, negative = 2**70, -(10**30)
    schema = {"_producer": PRODUCER, "_schemaURL": "https://example.com/BigFacet.json"}  # custom
    table = LineageDataset("db", "t", facets={"rows": {**schema, "n": big}})

    @track_lineage(
        job_name="big.counts",
        outputs=[table],
        run_facets={"counter": {**schema, "value": negative}},
        job_facets={"ids": {**schema, "first": [big, 1]}},
    )
    def work() -> None:
        pass

    work()
    flushed_events(memory_exporter)  # waits for the pipeline
    events = [loads_exact(e.payload) for e in memory_exporter.encoded]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    for event in events:
        assert event["run"]["facets"]["counter"]["value"] == negative
        assert event["job"]["facets"]["ids"]["first"] == [big, 1]
        assert event["outputs"][0]["facets"]["rows"]["n"] == big
