"""@track_lineage on every kind of function: events, nesting, failure, signatures."""

from __future__ import annotations

import asyncio
import inspect
import uuid

import pytest
from conformance import validate_event
from sdk_helpers import flushed_events

from lineage_sdk import LineageDataset, current_run, track_lineage
from lineage_sdk.sdk.runs import NoopRun

ORDERS = LineageDataset("postgres://db:5432", "shop.public.orders")
DAILY = LineageDataset("s3://warehouse", "orders/daily")


def by_job(events: list[dict], name: str) -> list[dict]:
    return [e for e in events if e["job"]["name"] == name]


def test_plain_function_emits_start_and_complete(memory_exporter):
    @track_lineage(job_name="load", inputs=[ORDERS], outputs=[DAILY], job_namespace="etl")
    def load(x: int, *, y: int = 2) -> int:
        """Load the orders."""
        return x + y

    assert load(1, y=3) == 4
    events = flushed_events(memory_exporter)
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    start, complete = events
    assert start["run"]["runId"] == complete["run"]["runId"]
    assert uuid.UUID(start["run"]["runId"]).version == 7
    assert start["job"] == complete["job"]
    assert start["job"]["namespace"] == "etl" and start["job"]["name"] == "load"
    assert start["inputs"][0]["name"] == "shop.public.orders"
    assert complete["outputs"][0]["namespace"] == "s3://warehouse"
    assert "processing_engine" in start["run"]["facets"]
    assert "lineagesdk_trace" in complete["run"]["facets"]
    assert start["eventTime"] <= complete["eventTime"]
    for event in events:
        validate_event(event)


def test_decorator_keeps_name_docstring_and_signature():
    def original(a: int, b: str = "x") -> str:
        """Docs."""
        return b * a

    wrapped = track_lineage(job_name="j")(original)
    assert wrapped.__name__ == "original"
    assert wrapped.__doc__ == "Docs."
    assert inspect.signature(wrapped) == inspect.signature(original)


def test_failure_records_fail_and_reraises_unchanged(memory_exporter):
    class Boom(RuntimeError):
        pass

    error = Boom("disk full")

    @track_lineage(job_name="explode")
    def explode() -> None:
        raise error

    with pytest.raises(Boom) as info:
        explode()
    assert info.value is error
    events = flushed_events(memory_exporter)
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    facet = events[1]["run"]["facets"]["errorMessage"]
    assert (
        facet["message"]
        == "test_failure_records_fail_and_reraises_unchanged.<locals>.Boom: disk full"
    )
    assert facet["programmingLanguage"] == "python"
    assert "raise error" in facet["stackTrace"] and "Boom: disk full" in facet["stackTrace"]
    validate_event(events[1])


def test_nested_runs_get_parent_and_root(memory_exporter):
    @track_lineage(job_name="leaf")
    def leaf() -> str:
        return current_run().run_id

    @track_lineage(job_name="middle")
    def middle() -> tuple[str, str]:
        return current_run().run_id, leaf()

    @track_lineage(job_name="top")
    def top() -> tuple[str, str, str]:
        return (current_run().run_id, *middle())

    top_id, middle_id, leaf_id = top()
    events = flushed_events(memory_exporter)
    assert len(events) == 6
    (leaf_start,) = [e for e in by_job(events, "leaf") if e["eventType"] == "START"]
    parent = leaf_start["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == middle_id
    assert parent["job"]["name"] == "middle"
    assert parent["root"]["run"]["runId"] == top_id
    assert parent["root"]["job"]["name"] == "top"
    assert leaf_start["run"]["runId"] == leaf_id
    for event in by_job(events, "top"):
        assert "parent" not in event["run"]["facets"]
    middle_parent = by_job(events, "middle")[0]["run"]["facets"]["parent"]
    assert middle_parent["run"]["runId"] == top_id
    assert middle_parent["root"]["run"]["runId"] == top_id
    # All three runs share the trace; each has its own span.
    traces = {e["run"]["facets"]["lineagesdk_trace"]["traceId"] for e in events}
    spans = {e["run"]["facets"]["lineagesdk_trace"]["spanId"] for e in events}
    assert len(traces) == 1 and len(spans) == 3
    for event in events:
        validate_event(event)


def test_runtime_datasets_via_current_run(memory_exporter):
    @track_lineage(job_name="discover", inputs=[ORDERS])
    def discover() -> None:
        current_run().add_output(DAILY)
        current_run().add_input(LineageDataset("kafka://k:9092", "clicks"))

    discover()
    start, complete = flushed_events(memory_exporter)
    assert [d["name"] for d in start["inputs"]] == ["shop.public.orders"]
    assert start["outputs"] == []
    assert [d["name"] for d in complete["inputs"]] == ["shop.public.orders", "clicks"]
    assert [d["name"] for d in complete["outputs"]] == ["orders/daily"]


def test_current_run_outside_a_run_is_a_noop():
    run = current_run()
    assert isinstance(run, NoopRun)
    run.add_output(DAILY)  # must not raise
    assert run.run_id is None


async def test_async_function_and_concurrent_tasks_keep_their_own_runs(memory_exporter):
    @track_lineage(job_name="async_step")
    async def step(n: int) -> str:
        await asyncio.sleep(0.01 * (3 - n))
        current_run().add_output(LineageDataset("mem://", f"out-{n}"))
        return current_run().run_id

    @track_lineage(job_name="async_parent")
    async def parent() -> tuple[str, list[str]]:
        ids = await asyncio.gather(*(step(n) for n in range(3)))
        return current_run().run_id, list(ids)

    parent_id, child_ids = await parent()
    assert inspect.iscoroutinefunction(step)
    events = flushed_events(memory_exporter)
    completes = [e for e in by_job(events, "async_step") if e["eventType"] == "COMPLETE"]
    assert len(completes) == 3
    for event in completes:
        run_id = event["run"]["runId"]
        n = child_ids.index(run_id)
        assert [d["name"] for d in event["outputs"]] == [f"out-{n}"]
        assert event["run"]["facets"]["parent"]["run"]["runId"] == parent_id


async def test_async_failure(memory_exporter):
    @track_lineage(job_name="async_fail")
    async def fail() -> None:
        await asyncio.sleep(0)
        raise ValueError("bad row")

    with pytest.raises(ValueError, match="bad row"):
        await fail()
    events = flushed_events(memory_exporter)
    assert [e["eventType"] for e in events] == ["START", "FAIL"]


def test_generator_run_spans_iteration_and_is_current_only_inside(memory_exporter):
    seen_inside: list[str | None] = []

    @track_lineage(job_name="gen")
    def numbers(n: int):
        for i in range(n):
            seen_inside.append(current_run().run_id)
            received = yield i
            if received is not None:
                current_run().add_output(LineageDataset("mem://", str(received)))

    assert inspect.isgeneratorfunction(numbers)
    gen = numbers(3)
    assert flushed_events(memory_exporter) == []  # nothing runs before the first next()
    assert next(gen) == 0
    assert isinstance(current_run(), NoopRun)  # not current between steps
    assert gen.send("sent") == 1
    assert list(gen) == [2]
    events = flushed_events(memory_exporter)
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    assert len(set(seen_inside)) == 1 and seen_inside[0] == events[0]["run"]["runId"]
    assert [d["name"] for d in events[1]["outputs"]] == ["sent"]


def test_generator_closed_early_completes_and_exception_fails(memory_exporter):
    @track_lineage(job_name="gen_close")
    def forever():
        while True:
            yield 1

    gen = forever()
    next(gen)
    gen.close()

    @track_lineage(job_name="gen_fail")
    def broken():
        yield 1
        raise KeyError("missing")

    with pytest.raises(KeyError):
        list(broken())
    events = flushed_events(memory_exporter)
    assert [e["eventType"] for e in by_job(events, "gen_close")] == ["START", "COMPLETE"]
    assert [e["eventType"] for e in by_job(events, "gen_fail")] == ["START", "FAIL"]


def test_generator_throw_reaches_the_generator(memory_exporter):
    @track_lineage(job_name="gen_throw")
    def catcher():
        try:
            yield 1
        except ValueError:
            yield "caught"

    gen = catcher()
    next(gen)
    assert gen.throw(ValueError("x")) == "caught"
    gen.close()
    assert [e["eventType"] for e in flushed_events(memory_exporter)] == ["START", "COMPLETE"]


async def test_async_generator(memory_exporter):
    @track_lineage(job_name="agen", outputs=[DAILY])
    async def stream(n: int):
        for i in range(n):
            await asyncio.sleep(0)
            yield i

    assert inspect.isasyncgenfunction(stream)
    assert [i async for i in stream(3)] == [0, 1, 2]

    @track_lineage(job_name="agen_fail")
    async def bad():
        yield 1
        raise RuntimeError("stream broke")

    with pytest.raises(RuntimeError, match="stream broke"):
        async for _ in bad():
            pass
    events = flushed_events(memory_exporter)
    assert [e["eventType"] for e in by_job(events, "agen")] == ["START", "COMPLETE"]
    assert [e["eventType"] for e in by_job(events, "agen_fail")] == ["START", "FAIL"]
    for event in events:
        validate_event(event)


def test_user_facets_are_split_between_run_and_job(memory_exporter):
    producer = "https://example.com/me"
    facets = {
        "documentation": {
            "_producer": producer,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DocumentationJobFacet.json#/$defs/DocumentationJobFacet",
            "description": "Loads orders",
        },
        "nominalTime": {
            "_producer": producer,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet",
            "nominalStartTime": "2026-11-29T00:00:00Z",
        },
    }

    @track_lineage(job_name="with_facets", facets=facets)
    def job() -> None:
        return None

    job()
    for event in flushed_events(memory_exporter):
        assert event["job"]["facets"]["documentation"]["description"] == "Loads orders"
        assert event["run"]["facets"]["nominalTime"]["nominalStartTime"] == "2026-11-29T00:00:00Z"
        validate_event(event)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"job_name": ""}, "job_name must be a non-empty string"),
        ({"job_name": "j", "inputs": ["orders"]}, "inputs must be LineageDataset objects, got str"),
        ({"job_name": "j", "outputs": [42]}, "outputs must be LineageDataset objects, got int"),
        ({"job_name": "j", "facets": {"x": {"no": "schema"}}}, "has no '_schemaURL'"),
        ({"job_name": "j", "job_namespace": ""}, "job_namespace must be a non-empty string"),
    ],
)
def test_bad_decorator_arguments_fail_at_decoration_time(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        track_lineage(**kwargs)


def test_bad_dataset_names():
    with pytest.raises(ValueError, match="namespace must be a non-empty string"):
        LineageDataset("", "x")
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        LineageDataset("ns", "")
    from lineage_sdk.sdk.runs import LineageRun

    run = LineageRun("r", "n", "j", [], [], {}, {}, None)
    with pytest.raises(TypeError, match="add_output takes a LineageDataset"):
        run.add_output("x")  # type: ignore[arg-type]


def test_runs_of_one_function_share_nothing_they_add_at_run_time(memory_exporter):
    """Declared datasets are shared by every run (and their JSON is reused by the worker); a
    dataset added at run time belongs to that run only."""
    extra = LineageDataset("kafka://k:9092", "clicks")

    @track_lineage(job_name="sometimes_more", inputs=[ORDERS], outputs=[DAILY])
    def work(add: bool) -> None:
        if add:
            current_run().add_input(extra)

    for add in (False, True, False, True):
        work(add)
    events = flushed_events(memory_exporter)
    inputs = [(e["eventType"], [d["name"] for d in e["inputs"]]) for e in events]
    plain, added = ["shop.public.orders"], ["shop.public.orders", "clicks"]
    assert inputs == [
        ("START", plain),
        ("COMPLETE", plain),
        ("START", plain),
        ("COMPLETE", added),
        ("START", plain),
        ("COMPLETE", plain),
        ("START", plain),
        ("COMPLETE", added),
    ]
    assert all([d["name"] for d in e["outputs"]] == ["orders/daily"] for e in events)
