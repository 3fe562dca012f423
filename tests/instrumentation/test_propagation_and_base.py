"""Pure logic: header propagation, environment parents, dataset naming and the instrumentor base."""

from __future__ import annotations

import logging
from collections.abc import Collection
from importlib.metadata import entry_points
from typing import Any

import pytest
from opentelemetry import trace

from lineage_instrumentation.auto import ENTRY_POINT_GROUP, load_instrumentors
from lineage_instrumentation.instrumentor import BaseInstrumentor, LibraryRequirement, Patcher
from lineage_instrumentation.pika import dataset_name, namespace_of
from lineage_instrumentation.propagation import (
    PARENT_RUN_ID_HEADER,
    extract_context,
    extract_parent,
    inject,
    parent_from_environment,
)
from lineage_sdk.sdk.runs import LineageRun, ParentRef

RUN = "0190a5a1-7c2e-7cc3-8f51-0d9b8c1d2e3f"
ROOT = "0190a5a1-7c2e-7cc3-8f51-0d9b8c1d2e40"


def make_run(parent: ParentRef | None = None) -> LineageRun:
    return LineageRun(RUN, "ns", "job", [], [], {}, {}, parent)


def test_inject_then_extract_round_trips_parent_and_root():
    headers: dict[str, Any] = {}
    inject(headers, make_run(ParentRef(ROOT, "rootns", "rootjob")))
    parent = extract_parent(headers)
    assert parent == ParentRef(RUN, "ns", "job", ParentRef(ROOT, "rootns", "rootjob"))
    # as AMQP may deliver them: bytes
    as_bytes = {k: v.encode() for k, v in headers.items()}
    assert extract_parent(as_bytes) == parent


def test_a_run_without_parent_is_its_own_root():
    headers: dict[str, Any] = {}
    inject(headers, make_run())
    assert extract_parent(headers) == ParentRef(RUN, "ns", "job", None)


def test_traceparent_is_injected_from_the_given_context():
    provider_span = trace.NonRecordingSpan(
        trace.SpanContext(
            trace_id=0x1234, span_id=0x99, is_remote=False, trace_flags=trace.TraceFlags(1)
        )
    )
    ctx = trace.set_span_in_context(provider_span)
    headers: dict[str, Any] = {}
    inject(headers, make_run(), ctx)
    assert headers["traceparent"] == f"00-{0x1234:032x}-{0x99:016x}-01"
    extracted = extract_context({"traceparent": headers["traceparent"].encode()})
    assert extracted is not None
    assert trace.get_current_span(extracted).get_span_context().trace_id == 0x1234


@pytest.mark.parametrize(
    "headers",
    [
        None,
        {},
        {
            PARENT_RUN_ID_HEADER: "not-a-uuid",
            "openlineage-parent-job-namespace": "n",
            "openlineage-parent-job-name": "j",
        },
        {PARENT_RUN_ID_HEADER: RUN},  # no job
        {
            PARENT_RUN_ID_HEADER: 42,
            "openlineage-parent-job-namespace": "n",
            "openlineage-parent-job-name": "j",
        },
    ],
)
def test_malformed_headers_give_no_parent(headers):
    assert extract_parent(headers) is None


def test_parent_from_environment(caplog):
    assert parent_from_environment({}) is None
    env = {
        "OPENLINEAGE_PARENT_ID": f"airflow/dag.task/{RUN}",
        "OPENLINEAGE_ROOT_PARENT_ID": f"airflow/dag/{ROOT}",
    }
    assert parent_from_environment(env) == ParentRef(
        RUN, "airflow", "dag.task", ParentRef(ROOT, "airflow", "dag")
    )
    context = (
        f'{{"openlineage-parent-run-id": "{RUN}", "openlineage-parent-job-namespace": "a", '
        '"openlineage-parent-job-name": "b"}'
    )
    assert parent_from_environment({"OPENLINEAGE_CONTEXT": context}) == ParentRef(RUN, "a", "b")
    with caplog.at_level(logging.WARNING):
        assert parent_from_environment({"OPENLINEAGE_PARENT_ID": "nonsense"}) is None
    assert "OPENLINEAGE_PARENT_ID" in caplog.text


def test_dataset_names():
    assert dataset_name("orders", "orders.created") == "orders:orders.created"
    assert dataset_name("", "billing") == "billing"  # default exchange routes by queue name
    assert dataset_name("", "", "billing") == "billing"
    assert dataset_name("logs", "") == "logs:"

    class Params:
        host, port = "::1", 5671

    class Conn:
        params = Params()

    assert namespace_of(Conn()) == "rabbitmq://[::1]:5671"


class Base:
    def hello(self) -> str:
        return "base"


class Child(Base):
    def own(self) -> str:
        return "own"


def test_patcher_restores_own_and_inherited_attributes():
    own = Child.__dict__["own"]
    patcher = Patcher()
    patcher.patch(Child, "own", lambda original: lambda self: "patched " + original(self))
    patcher.patch(Child, "hello", lambda original: lambda self: "patched " + original(self))
    assert (Child().own(), Child().hello()) == ("patched own", "patched base")
    assert Child.__dict__["hello"].__wrapped__ is Base.__dict__["hello"]
    patcher.restore()
    assert Child.__dict__["own"] is own
    assert "hello" not in Child.__dict__  # inherited again, not pinned
    assert len(patcher) == 0


class Fake(BaseInstrumentor):
    name = "fake"
    requirement = LibraryRequirement("pytest>=1", "pytest")
    calls: list[str] = []  # noqa: RUF012 - test bookkeeping

    def instrumentation_dependencies(self) -> Collection[LibraryRequirement]:
        return (self.requirement,)

    def _instrument(self, **kwargs: Any) -> None:
        self.calls.append("instrument")

    def _uninstrument(self, **kwargs: Any) -> None:
        self.calls.append("uninstrument")


def test_instrumentor_is_a_singleton_and_idempotent():
    Fake.calls.clear()
    assert Fake() is Fake()
    assert Fake().instrument() is True
    assert Fake().instrument() is False
    assert Fake().uninstrument() is True
    assert Fake().uninstrument() is False
    assert Fake.calls == ["instrument", "uninstrument"]


@pytest.mark.parametrize(
    ("requirement", "missing"),
    [
        (LibraryRequirement("no-such-lib>=1", "no_such_lib_xyz"), True),
        (LibraryRequirement("pytest<1", "pytest"), False),
    ],
)
def test_unmet_dependency_skips_instrumenting(requirement, missing, monkeypatch):
    Fake.calls.clear()
    monkeypatch.setattr(Fake, "requirement", requirement)
    conflict = Fake().dependency_conflict()
    assert conflict is not None and conflict.missing is missing
    assert Fake().instrument() is False
    assert Fake.calls == []


def test_load_instrumentors_honours_disabled_names():
    from lineage_instrumentation.aio_pika import AioPikaInstrumentor

    registered = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert {"pika", "aio_pika"} <= registered
    assert load_instrumentors([name.upper() for name in registered]) == []
    assert load_instrumentors(["all"]) == []
    try:  # LINEAGE_DISABLED_INSTRUMENTATIONS=pika leaves aio-pika on, and the other way round
        assert load_instrumentors(sorted(registered - {"aio_pika"})) == ["aio_pika"]
    finally:
        AioPikaInstrumentor().uninstrument()
