"""Poison messages go to the dead-letter queue at once with a clear reason; the good messages
around them are stored and the collector keeps running. Unusual but valid names are stored."""

from __future__ import annotations

import gzip
import uuid

import orjson
import pytest
from collector_helpers import (
    BATCH_CONTENT_TYPE,
    drain,
    dumps,
    event_id,
    json_props,
    publish,
    run_event,
    running,
    wait_until,
)

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.collector.topology import Topology

pytestmark = pytest.mark.rabbitmq


def _bomb(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def _bad_messages(max_bytes: int) -> dict[str, tuple[bytes, object, str]]:
    """name -> (body, properties, expected reason code)."""
    good = run_event()
    no_run_id = run_event()
    del no_run_id["run"]["runId"]
    bad_uuid = run_event(run_id="not-a-uuid")
    bad_type = run_event(event_type="EXPLODE")
    bad_time = run_event()
    bad_time["eventTime"] = "yesterday at noon"
    nul = dumps(run_event(job="nul\u0000job"))
    shallow_bomb = b'{"eventType":"START","x":' + b"[" * 70 + b"]" * 70 + b"}"
    big = run_event()
    big["run"]["facets"]["padding"] = {
        "_producer": "https://x",
        "_schemaURL": "https://x",
        "data": "x" * max_bytes,
    }
    j = json_props
    return {
        "not json": (b"this is not json {", j(), "undecodable"),
        "invalid utf-8": (b'{"eventType": "\xff\xfe"}', j(), "undecodable"),
        "empty body": (b"", j(), "undecodable"),
        "json scalar": (b"42", j(), "not_an_event"),
        "json not an event": (b'{"hello": "world"}', j(), "invalid_event"),
        "missing runId": (dumps(no_run_id), j(), "invalid_event"),
        "non-uuid runId": (dumps(bad_uuid), j(), "invalid_event"),
        "wrong eventType": (dumps(bad_type), j(), "invalid_event"),
        "eventTime not a date": (dumps(bad_time), j(), "invalid_event"),
        "over the size cap": (dumps(big), j(), "too_large"),
        "NUL bytes": (nul, j(), "nul_byte"),
        "raw NUL byte": (b'{"eventType":"START\x00"}', j(), "nul_byte"),
        "deep nesting bomb": (_bomb(5000), j(), "too_deep"),
        "moderate nesting bomb": (shallow_bomb, j(), "too_deep"),
        "wrong content type": (dumps(good), j(content_type="text/plain"), "wrong_content_type"),
        "batch type, not an array": (
            dumps(good),
            j(content_type=BATCH_CONTENT_TYPE),
            "not_a_batch",
        ),
        "empty batch": (b"[]", j(content_type=BATCH_CONTENT_TYPE), "not_a_batch"),
        "unknown content encoding": (dumps(good), j(content_encoding="br"), "unsupported_encoding"),
        "gzip bomb": (
            gzip.compress(b" " * (max_bytes * 4)),
            j(content_encoding="gzip"),
            "too_large",
        ),
    }


def test_each_kind_of_bad_message_is_parked_with_its_reason(make_config):
    max_bytes = 64 * 1024
    config = make_config(collector={"max_message_bytes": max_bytes})
    topo = Topology.from_config(config)
    bad = _bad_messages(max_bytes)
    assert len(bad) >= 12
    non_uri_producer = run_event(job="non-uri-producer")  # issue 14: accepted, stored as sent
    non_uri_producer["producer"] = "not a uri"
    odd_names = [
        run_event(
            namespace="mongo://h:27017",
            job="$where.{$gt}.job",
            inputs=[("s3://bucket", "a.b.$c")],
            outputs=[("weird", "名前 🚀 'quote\" `tick`")],
        ),
        run_event(job="x" * 5000, outputs=[("db", "MATCH (n) DETACH DELETE n; DROP TABLE x;--")]),
        non_uri_producer,
    ]
    goods = [run_event(job=f"good{i}") for i in range(len(bad) + 1)] + odd_names
    # interleave: good, bad, good, bad, ..., plus a batch with good and bad events together
    messages: list = []
    names = list(bad)
    for i, name in enumerate(names):
        body, props, _ = bad[name]
        messages.append((dumps(goods[i]), json_props(message_id=str(i))))
        messages.append((body, props))
        messages[-1][1].headers = {"case": name}
    mixed_good = run_event(job="in-batch-good")
    mixed_bad = run_event(run_id="zzz")
    messages.append(
        (
            dumps([mixed_good, mixed_bad, {"no": "event"}]),
            json_props(content_type=BATCH_CONTENT_TYPE, headers={"case": "mixed batch"}),
        )
    )
    gz_good = run_event(job="gzipped")
    messages.append((gzip.compress(dumps(gz_good)), json_props(content_encoding="gzip")))
    messages += [(dumps(e), json_props()) for e in goods[len(names) :]]
    expected_good = [*goods, mixed_good, gz_good]
    with running(config) as collector:
        publish(config.collector_topic, messages)
        total = len(names) + 2  # one per bad message + two bad events of the mixed batch
        wait_until(
            lambda: (
                sum(
                    s.value
                    for m in collector.metrics.dead_lettered.collect()
                    for s in m.samples
                    if s.name.endswith("_total")
                )
                >= total
            ),
            30,
            message="parked messages",
        )
        assert collector.alive
    parked = drain(topo.dead_letter_queue)
    by_case: dict[str, list] = {}
    for props, body in parked:
        by_case.setdefault(str(props.headers.get("case")), []).append((props, body))
    for name in names:
        assert name in by_case, f"{name} was not parked"
        props, body = by_case[name][0]
        assert props.headers["x-lineage-reason"] == bad[name][2], (name, props.headers)
        assert props.headers["x-lineage-error"], name
        assert props.headers["x-lineage-source-queue"] == topo.queue
        assert body == bad[name][0]
    reasons = sorted(p.headers["x-lineage-reason"] for p, _ in by_case["mixed batch"])
    assert reasons == ["invalid_event", "invalid_event"]
    assert sorted(p.headers["x-lineage-batch-index"] for p, _ in by_case["mixed batch"]) == [1, 2]
    runid_error = next(p.headers["x-lineage-error"] for p, _ in by_case["non-uuid runId"])
    assert "runId" in runid_error
    store = EngineStore(SqlBackend(config.section("store.sql").url))
    store.open()
    try:
        assert store.count_events() == len(expected_good)
        for event in expected_good:
            stored = store.events_of_run(event["run"]["runId"])
            assert stored == [event], event["job"]["name"][:40]
        found = {name for _, ns, name in store.search("$where")}
        assert "$where.{$gt}.job" in found
        assert ("weird", "名前 🚀 'quote\" `tick`") in store.datasets("weird")
    finally:
        store.close()
    assert {event_id(e) for e in expected_good}  # ids computable for every stored event


def test_poison_message_properties_survive_parking(make_config):
    config = make_config()
    topo = Topology.from_config(config)
    msg_id = uuid.uuid4().hex
    with running(config) as collector:
        publish(
            config.collector_topic,
            [(b"nope", json_props(message_id=msg_id, headers={"x-app": "a"}))],
            routing_key="ns.job.START",
        )
        wait_until(lambda: collector.metrics.dead_lettered.labels("undecodable")._value.get() >= 1)
    [(props, body)] = drain(topo.dead_letter_queue)
    assert body == b"nope"
    assert props.message_id == msg_id
    assert props.headers["x-app"] == "a"
    assert props.headers["x-lineage-original-routing-key"] == "ns.job.START"
    assert props.headers["x-lineage-original-exchange"] == config.collector_topic
    assert orjson.loads(orjson.dumps(props.headers["x-lineage-attempts"])) == 0
