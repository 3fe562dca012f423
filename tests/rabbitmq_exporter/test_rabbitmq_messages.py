"""Pure rules consumers rely on: the routing-key scheme and the batch message format."""

from __future__ import annotations

from urllib.parse import unquote

import orjson
from hypothesis import given
from hypothesis import strategies as st
from rabbitmq_support import make_event, make_events

from lineage_exporters.rabbitmq import (
    BATCH_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    batch_message_id,
    routing_key,
    sanitize_word,
)
from lineage_exporters.rabbitmq._messages import MAX_BATCH_BODY_BYTES, MIXED, build_messages


def test_plain_names_pass_through() -> None:
    assert (
        routing_key("my-service-ns", "load_orders", "COMPLETE")
        == "my-service-ns.load_orders.COMPLETE"
    )


def test_dots_and_wildcards_stay_inside_one_word() -> None:
    key = routing_key("ns.with.dots", "job#1*x", "START")
    assert key == "ns%2Ewith%2Edots.job%231%2Ax.START"
    assert len(key.split(".")) == 3
    assert "#" not in key and "*" not in key


def test_percent_is_escaped_so_the_mapping_reverses() -> None:
    assert sanitize_word("100%.done") == "100%25%2Edone"
    assert unquote(sanitize_word("100%.done")) == "100%.done"


@given(
    st.text(),
    st.text(),
    st.sampled_from(["START", "RUNNING", "COMPLETE", "FAIL", "ABORT", "OTHER"]),
)
def test_any_name_gives_three_words_within_255_bytes(ns: str, name: str, kind: str) -> None:
    key = routing_key(ns, name, kind)
    words = key.split(".")
    assert len(words) == 3
    assert words[2] == kind
    assert len(key.encode()) <= 255
    if len(routing_key(ns, name, kind).encode()) < 200 and "~" not in key:
        assert unquote(words[0]) == ns and unquote(words[1]) == name


def test_long_names_are_cut_but_stay_distinct() -> None:
    a = routing_key("n" * 300, "job-a" + "x" * 300, "START")
    b = routing_key("n" * 300, "job-b" + "x" * 300, "START")
    assert a != b
    assert len(a.encode()) <= 255 and len(b.encode()) <= 255
    assert a.endswith(".START")


def test_single_mode_is_one_message_per_event() -> None:
    events = make_events(5)
    messages = build_messages(events, 1)
    assert [m.body for m in messages] == [e.payload for e in events]
    assert [m.message_id for m in messages] == [e.event_id for e in events]
    assert all(m.content_type == JSON_CONTENT_TYPE and m.event_count == 1 for m in messages)
    assert messages[0].routing_key == routing_key(
        events[0].job_namespace, events[0].job_name, "START"
    )


def test_batch_mode_groups_by_job_and_keeps_order() -> None:
    events = [
        make_event(i, name=f"job{i % 2}", event_type="START" if i < 6 else "COMPLETE")
        for i in range(10)
    ]
    messages = build_messages(events, 3)
    by_job: dict[str, list[str]] = {}
    for m in messages:
        assert m.content_type == BATCH_CONTENT_TYPE or m.event_count == 1
        decoded = orjson.loads(m.body)
        decoded = decoded if isinstance(decoded, list) else [decoded]
        assert len(decoded) == m.event_count <= 3
        jobs = {d["job"]["name"] for d in decoded}
        assert len(jobs) == 1
        by_job.setdefault(jobs.pop(), []).extend(
            orjson.dumps(d, option=orjson.OPT_SORT_KEYS).decode() for d in decoded
        )
    for job in ("job0", "job1"):
        expected = [e.payload.decode() for e in events if e.job_name == job]
        assert by_job[job] == expected


def test_batch_message_fields() -> None:
    events = [make_event(i, name="same", event_type=t) for i, t in enumerate(["START", "COMPLETE"])]
    (msg,) = build_messages(events, 20)
    assert msg.content_type == BATCH_CONTENT_TYPE
    assert msg.body == b"[" + b",".join(e.payload for e in events) + b"]"
    assert msg.message_id == batch_message_id([e.event_id for e in events])
    assert msg.event_ids == ",".join(e.event_id for e in events)
    assert msg.event_type == MIXED
    assert msg.routing_key.endswith(".MIXED")
    assert msg.schema_url == events[0].schema_url
    # Same events, same id: a replayed batch can be dropped as a duplicate.
    assert build_messages(events, 20)[0].message_id == msg.message_id
    assert batch_message_id(["a", "b"]) != batch_message_id(["b", "a"])


def test_batch_body_size_is_capped() -> None:
    big = [make_event(i, name="big") for i in range(3)]
    size = len(big[0].payload)
    n = MAX_BATCH_BODY_BYTES // size + 5
    events = [make_event(i, name="big") for i in range(n)]
    messages = build_messages(events, 10_000)
    assert len(messages) >= 2
    assert all(len(m.body) <= MAX_BATCH_BODY_BYTES for m in messages)
    assert sum(m.event_count for m in messages) == n
