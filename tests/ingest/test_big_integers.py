"""Issue 32 item 7: an integer beyond 64 bits inside an event is kept exactly as sent.

orjson, the collector's JSON library, reads an integer outside ``[-2**63, 2**64 - 1]`` as a float
and refuses to write one. Marquez keeps events in jsonb, whose numbers are exact; so do we: events
carrying such integers (positive and negative, in run, job and dataset facets, in input and
output facets, nested in lists and objects, next to the 64-bit limits and to digit runs inside
strings) are sent over HTTP and over the queue to five stores (memory, sql on SQLite, sql on
PostgreSQL, document on SecantusDB, graph on FalkorDB) and read back from each through
``events_of_run``, the raw export (``lineage-collector export``'s NDJSON) and the Marquez read API
(run facets, job facets, dataset answers, a run's events, the event log), each equal to what was
sent, types included (``2**64`` is not ``1.8446744073709552e19``). A bad event of a batch is
parked with its integers intact, and bad input keeps its error.

Everything sent and compared is written and read with the standard library's ``json`` (exact
integers), never with the code under test.
"""

from __future__ import annotations

import io
import json
import logging
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from collector_helpers import (
    drain,
    json_props,
    publish,
    wait_until,
)
from collector_helpers import running as running_collector
from every_store import (
    api_client,
    deleting_queues,
    differences,
    every_store,
    managing,
    queue_config,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from servers import FalkorDBServer, MongoTarget

from lineage_sdk.collector.api import ApiServer, create_app
from lineage_sdk.collector.consumer import LineageCollector
from lineage_sdk.collector.decode import PoisonMessage, decode_message
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.portability import export_events
from lineage_sdk.collector.stores.http import OpenLineageStore
from lineage_sdk.collector.stores.logging import LoggingLineageStore
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.collector.topology import Topology
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.models import event_id, parse_event
from lineage_sdk.models.codec import to_dict
from lineage_sdk.models.constants import BATCH_CONTENT_TYPE, JSON_CONTENT_TYPE
from lineage_sdk.models.json_exact import (
    dumps_exact,
    loads_exact,
    may_have_rounded,
    may_hold_big_int,
)

PRODUCER = "https://github.com/lineage-sdk/lineage-sdk/tests/big-integers"
CUSTOM = "https://github.com/lineage-sdk/lineage-sdk/tests/BigIntegerFacet.json"
SPEC = "https://openlineage.io/spec/facets"
#: Each side of orjson's range, and far past it.
LIMITS = [2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, -(10**19), 10**19]
BATCH = "/api/v1/lineage/batch"
SRC, DST = ("postgres://db:5432", "big.public.src"), ("postgres://db:5432", "big.public.dst")


def _facet(**fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": CUSTOM, **fields}


def big_event(namespace: str, run_id: str, event_type: str, seconds: int) -> dict[str, Any]:
    """A RunEvent with integers beyond 64 bits in every part an event has facets."""
    sign = 1 if event_type == "START" else -1  # the two events of a run say different numbers
    return {
        "eventType": event_type,
        "eventTime": f"2025-03-01T12:00:{seconds:02d}.123456Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {
            "runId": run_id,
            "facets": {
                "bigNumbers": _facet(
                    count=sign * 2**64,
                    debt=-(2**70),
                    nested=[[10**40, {"x": -(10**30), "y": [2**100]}], 1.5, -0.25],
                    limits=LIMITS,
                    # digit runs inside strings and a long float: read exactly as orjson reads
                    text="12345678901234567890123 and 98765432109876543210",
                    small=0.00012345678901234567,
                ),
                event_type.lower(): _facet(only=sign * 10**22),
            },
        },
        "job": {
            "namespace": namespace,
            "name": "big.load",
            "facets": {"bigJob": _facet(id=10**25, ids=[2**64 + 1, -(2**64) - 1])},
        },
        "inputs": [
            {
                "namespace": SRC[0],
                "name": SRC[1],
                "facets": {
                    "schema": {
                        "_producer": PRODUCER,
                        "_schemaURL": f"{SPEC}/1-2-0/SchemaDatasetFacet.json"
                        "#/$defs/SchemaDatasetFacet",
                        "fields": [{"name": "n", "type": "numeric", "ordinal_position": 2**64}],
                    },
                    "bigStats": _facet(rows=[2**65, -(2**65)], max=10**38),
                },
                "inputFacets": {
                    "inputStatistics": {
                        "_producer": PRODUCER,
                        "_schemaURL": f"{SPEC}/1-0-0/InputStatisticsInputDatasetFacet.json",
                        "rowCount": 2**64,
                        "size": 10**30,
                    }
                },
            }
        ],
        "outputs": [
            {
                "namespace": DST[0],
                "name": DST[1],
                "facets": {"bigFacet": _facet(values=[10**40, -(2**70)], seen=sign * 2**80)},
                "outputFacets": {
                    "outputStatistics": {
                        "_producer": PRODUCER,
                        "_schemaURL": f"{SPEC}/1-0-2/OutputStatisticsOutputDatasetFacet.json",
                        "rowCount": 2**64,
                        "size": 10**30,
                    }
                },
            }
        ],
    }


def sent_events(namespace: str, runs: int = 3) -> list[dict[str, Any]]:
    """START and COMPLETE of ``runs`` runs, each its own run id."""
    events = []
    for index in range(runs):
        run_id = str(uuid.uuid4())
        events.append(big_event(namespace, run_id, "START", 2 * index))
        events.append(big_event(namespace, run_id, "COMPLETE", 2 * index + 1))
    return events


def body(event: Any) -> bytes:
    """The bytes sent: the standard library's JSON (exact integers), compact."""
    return json.dumps(event, separators=(",", ":")).encode()


def _by_time(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(events, key=lambda e: (e["eventTime"], e["eventType"]))


# ------------------------------------------------------------------------------ the JSON helpers

_ints = st.integers(min_value=-(10**60), max_value=10**60) | st.sampled_from(LIMITS)
_scalars = (
    st.none()
    | st.booleans()
    | _ints
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
    | st.from_regex(r"[0-9]{15,30}", fullmatch=True)  # digit runs inside strings
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_json_exact_round_trips_every_value(value: Any) -> None:
    text = dumps_exact(value)
    assert json.loads(text) == value  # the standard library reads back what was written
    assert differences(value, loads_exact(text)) == []
    assert differences(value, loads_exact(text.decode())) == []
    if may_hold_big_int(text) is False:
        assert text == orjson.dumps(value)  # orjson's bytes whenever it can write them alone
    sorted_text = dumps_exact(value, option=orjson.OPT_SORT_KEYS)
    assert json.loads(sorted_text) == value
    # ingest's premise: when orjson's reading lost an integer, its text of what it read says so
    rough = orjson.loads(text)
    if differences(value, rough):
        assert may_have_rounded(orjson.dumps(rough, option=orjson.OPT_SORT_KEYS))
        assert may_hold_big_int(text)


def test_json_exact_limits() -> None:
    for number in LIMITS:
        text = str(number).encode()
        assert may_hold_big_int(text) == (len(str(abs(number))) >= 19)
        assert type(loads_exact(text)) is int and loads_exact(text) == number
        assert dumps_exact([number]) == f"[{number}]".encode()
    assert not may_hold_big_int(b'{"a":123456789012345678,"b":-123456789012345678}')
    # orjson's own bytes where it can: sorted keys, its float text, its escapes
    value = {"b": [1e16, 0.1, "é\n"], "a": 2**64}
    expected = b'{"a":18446744073709551616,"b":' + orjson.dumps(value["b"]) + b"}"
    assert dumps_exact(value, option=orjson.OPT_SORT_KEYS) == expected
    with pytest.raises(TypeError):  # what orjson cannot write for another reason still fails
        dumps_exact({"a": 2**64, "b": object()})


def test_the_content_id_counts_each_integer_exactly() -> None:
    event = big_event("big.ids", str(uuid.uuid4()), "START", 0)
    other = json.loads(body(event))
    other["run"]["facets"]["bigNumbers"]["count"] += 1  # the same float, another integer
    assert float(other["run"]["facets"]["bigNumbers"]["count"]) == float(2**64)
    assert event_id(event) != event_id(other)
    decoded = decode_message(body(event), JSON_CONTENT_TYPE).records[0]
    assert decoded.event_id == event_id(event)
    pretty = json.dumps(event, indent=2).encode()  # any spacing or key order: the same id
    assert decode_message(pretty, JSON_CONTENT_TYPE).records[0].event_id == event_id(event)
    # the SDK's parse of the text keeps them too, so its model dumps what was sent
    assert differences(event, to_dict(parse_event(body(event)))) == []


def test_floats_stay_floats_and_integers_integers() -> None:
    """Ingest reads a body again only when orjson wrote a float of 1e16 or more (``e+``) for an
    event and the body holds a run of 19 digits: every mix keeps each number's type."""
    assert all(b"e+" in orjson.dumps(orjson.loads(str(n))) for n in LIMITS if n > 2**64 - 1)
    assert all(b"e+" in orjson.dumps(float(n)) for n in (2**63, -(2**63), 10**308))
    run = str(uuid.uuid4())
    only_floats = big_event("big.mix", run, "START", 0)
    only_floats["run"]["facets"] = {"f": _facet(big=1e20, tiny=-1e-20, text="1" * 25)}
    only_floats["inputs"] = only_floats["outputs"] = []
    only_ints = big_event("big.mix", run, "COMPLETE", 1)
    mixed = big_event("big.mix", run, "COMPLETE", 2)
    mixed["run"]["facets"]["f"] = _facet(big=1e20, int=10**20, pair=[1e19, 10**19])
    events = [only_floats, only_ints, mixed]
    for message, content_type in [
        *((body(e), JSON_CONTENT_TYPE) for e in events),
        (b"[" + b",".join(map(body, events)) + b"]", BATCH_CONTENT_TYPE),
    ]:
        for record in decode_message(message, content_type).records:
            sent = next(e for e in events if e["eventTime"] == record.event["eventTime"])
            assert differences(sent, record.event) == []
            assert record.event_id == event_id(sent)


# ---------------------------------------------------------------------------------- bad input


def test_a_bad_event_of_a_batch_keeps_its_integers() -> None:
    good = big_event("big.bad", str(uuid.uuid4()), "START", 0)
    bad = big_event("big.bad", str(uuid.uuid4()), "START", 1)
    bad["eventTime"] = "not a time"
    decoded = decode_message(b"[" + body(good) + b"," + body(bad) + b"]", BATCH_CONTENT_TYPE)
    assert differences(good, decoded.records[0].event) == []
    (rejected,) = decoded.rejected
    assert rejected.index == 1 and rejected.reason == "invalid_event"
    assert "eventTime" in rejected.detail
    assert differences(bad, json.loads(rejected.body)) == []


@pytest.mark.parametrize(
    ("raw", "reason", "says"),
    [
        # malformed JSON with a big integer in it: orjson's error, as for any malformed body
        (b'{"a": 123456789012345678901234567890,', "undecodable", "body is not UTF-8 JSON"),
        (b'{"a": 123456789012345678901234567890 "b"}', "undecodable", "body is not UTF-8 JSON"),
        # past a double: refused as before (orjson reads no such number)
        (b'{"a": 1' + b"0" * 400 + b"}", "undecodable", "infinity"),
        (b'{"a": NaN, "b": 12345678901234567890}', "undecodable", "body is not UTF-8 JSON"),
        # nesting: refused by depth before any second reading
        (b"[" * 900 + b"12345678901234567890" + b"]" * 900, "too_deep", "deeper than"),
        (b"[" * 2000 + b"12345678901234567890" + b"]" * 2000, "too_deep", "deeper than"),
        (b"12345678901234567890123", "not_an_event", "is not an event object"),
    ],
)
def test_bad_input_keeps_its_error(raw: bytes, reason: str, says: str) -> None:
    with pytest.raises(PoisonMessage) as refused:
        decode_message(raw, JSON_CONTENT_TYPE)
    assert refused.value.reason == reason
    assert says in refused.value.detail


def test_a_batch_item_that_is_no_event_is_parked_as_sent() -> None:
    decoded = decode_message(b"[12345678901234567890123]", "")
    (rejected,) = decoded.rejected
    assert (rejected.reason, rejected.body) == ("not_an_event", b"12345678901234567890123")


# ------------------------------------------------- the stores that pass events on (log, HTTP)


def test_the_logging_store_logs_the_integers(caplog: pytest.LogCaptureFixture) -> None:
    event = big_event("big.log", str(uuid.uuid4()), "START", 0)
    store = LoggingLineageStore("test.lineage.big_integers")
    caplog.set_level(logging.INFO, logger="test.lineage.big_integers")
    store.write_batch(decode_message(body(event), JSON_CONTENT_TYPE).records)
    (logged,) = [r for r in caplog.records if r.name == "test.lineage.big_integers"]
    assert differences(event, json.loads(logged.getMessage())["event"]) == []


def test_the_http_store_forwards_the_integers() -> None:
    """The openlineage_http store relays events to another collector (real HTTP on loopback)."""
    events = sent_events("big.relay", runs=1)
    target = EngineStore(MemoryBackend())
    manager = LineageManager(LineageConfig(), stores=[target])
    manager.connect_sync()
    server = ApiServer(create_app(manager)).start()
    relay = OpenLineageStore(server.url)
    relay.open()
    try:
        relay.write_batch(decode_message(b"[" + b",".join(map(body, events)) + b"]", "").records)
        got = target.events_of_run(events[0]["run"]["runId"])
    finally:
        relay.close()
        server.stop()
        manager.close_sync()
    assert differences(_by_time(events), _by_time(got)) == []


# ------------------------------------------------------------------------------- five stores


def _runs(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        runs.setdefault(event["run"]["runId"], []).append(event)
    return runs


def _facets_of(events: list[dict[str, Any]], part: str) -> dict[str, Any]:
    """Marquez's FacetsResult: the latest value of each facet, in event-time order."""
    facets: dict[str, Any] = {}
    for event in _by_time(events):
        facets.update(event[part]["facets"])
    return facets


def _read_api(client: httpx.Client, namespace: str, sent: list[dict[str, Any]]) -> list[str]:
    """The Marquez read answers that carry facets or events, each against what was sent."""
    found: list[str] = []

    def get(path: str, **params: Any) -> Any:
        answer = client.get(path, params=params)
        assert answer.status_code == 200, (path, answer.text)
        return json.loads(answer.content)  # the standard library: exact integers

    for run_id, events in _runs(sent).items():
        for kind, part in (("run", "run"), ("job", "job")):
            got = get(f"/api/v1/jobs/runs/{run_id}/facets", type=kind)["facets"]
            found += [f"{kind} facets {d}" for d in differences(_facets_of(events, part), got)]
        got_events = get(f"/api/v1/jobs/runs/{run_id}/events")["events"]
        found += [f"run events {d}" for d in differences(_by_time(events), _by_time(got_events))]
    latest = _by_time(sent)[-1]
    for (ns, name), role in ((SRC, "inputs"), (DST, "outputs")):
        answer = get(f"/api/v1/namespaces/{ns}/datasets/{name}")
        (dataset,) = latest[role]
        for key, facet in dataset["facets"].items():
            found += [f"dataset {name} {d}" for d in differences(facet, answer["facets"].get(key))]
    log = get(f"/api/v1/events/{namespace}", limit=100)["events"]
    found += [f"event log {d}" for d in differences(_by_time(sent), _by_time(log))]
    return found


def check_every_store(
    stores: dict[str, EngineStore], namespace: str, sent: list[dict[str, Any]]
) -> None:
    """Each event read back from each store by run, in the raw export and through the Marquez
    read API (an API over each store) is the one sent."""
    found: list[str] = []
    for name, store in stores.items():
        for run_id, events in _runs(sent).items():
            got = _by_time(store.events_of_run(run_id))
            found += [f"{name} events_of_run {d}" for d in differences(_by_time(events), got)]
        out = io.BytesIO()
        export_events(store, out, namespace=namespace)
        exported = [json.loads(line) for line in out.getvalue().splitlines()]
        found += [f"{name} export {d}" for d in differences(_by_time(sent), _by_time(exported))]
        with api_client(store) as client:
            found += [f"{name} API {d}" for d in _read_api(client, namespace, sent)]
    assert found == [], "\n".join(found)


def _stored_everywhere(stores: dict[str, EngineStore], run_ids: list[str], each: int) -> bool:
    try:
        return all(
            len(store.events_of_run(r)) == each for store in stores.values() for r in run_ids
        )
    except Exception:
        return False


@pytest.mark.postgres
@pytest.mark.mongodb
@pytest.mark.neo4j
def test_big_integers_round_trip_through_http_and_every_store(
    tmp_path: Path, pg_url: str, mongo: MongoTarget, falkordb: FalkorDBServer
) -> None:
    namespace = f"big.http.{uuid.uuid4().hex[:6]}"
    sent = sent_events(namespace)
    with (
        every_store(tmp_path, pg_url, mongo, falkordb, "bi") as stores,
        managing(stores) as manager,
    ):
        with api_client(manager) as client:
            headers = {"Content-Type": "application/json"}
            for event in sent[:2]:  # one by one, the first twice: stored once
                for _attempt in range(2):
                    answer = client.post("/api/v1/lineage", content=body(event), headers=headers)
                    assert answer.status_code == 201, answer.text
                    assert answer.json() == {"eventId": event_id(event)}
            batch = b"[" + b",".join(body(e) for e in sent[2:]) + b"]"
            answer = client.post(BATCH, content=batch, headers=headers)
            assert answer.status_code == 200, answer.text
            assert answer.json()["summary"]["successful"] == len(sent) - 2
            bad = json.loads(body(sent[0]))
            bad["run"]["runId"] = "not a uuid"
            answer = client.post("/api/v1/lineage", content=body(bad), headers=headers)
            assert answer.status_code == 400, answer.text
            assert "runId" in answer.text
            broken = body(sent[0])[:-1]  # malformed, with its big integers
            answer = client.post("/api/v1/lineage", content=broken, headers=headers)
            assert answer.status_code == 400, answer.text
            assert answer.json()["reason"] == "malformed_json"
        check_every_store(stores, namespace, sent)  # a 2xx comes after every store wrote


@pytest.mark.rabbitmq
@pytest.mark.postgres
@pytest.mark.mongodb
@pytest.mark.neo4j
def test_big_integers_round_trip_through_the_queue_and_every_store(
    tmp_path: Path, pg_url: str, mongo: MongoTarget, falkordb: FalkorDBServer
) -> None:
    namespace = f"big.queue.{uuid.uuid4().hex[:6]}"
    sent = sent_events(namespace)
    topic = f"test.lineage.bigint.{uuid.uuid4().hex[:10]}"
    config = queue_config(topic)
    bad = big_event(namespace, str(uuid.uuid4()), "START", 59)
    bad["eventTime"] = "not a time"
    with (
        every_store(tmp_path, pg_url, mongo, falkordb, "bi") as stores,
        managing(stores, config) as manager,
        deleting_queues(config),
    ):
        collector: LineageCollector
        with running_collector(config, manager) as collector:
            messages = [(body(event), json_props()) for event in sent[:2]]
            batch = b"[" + b",".join([*map(body, sent[2:]), body(bad)]) + b"]"
            messages.append((batch, json_props(content_type=BATCH_CONTENT_TYPE)))
            publish(topic, messages)
            run_ids = list(_runs(sent))
            wait_until(
                lambda: _stored_everywhere(stores, run_ids, 2),
                60,
                message="every event in every store",
            )
            wait_until(
                lambda: collector.metrics.dead_lettered.labels("invalid_event")._value.get() >= 1,
                30,
                message="the bad event parked",
            )
            check_every_store(stores, namespace, sent)
        # The collector stopped; its dead-letter queue is drained before the queues go.
        parked = drain(Topology.from_config(config).dead_letter_queue)
        assert len(parked) == 1
        assert differences(bad, json.loads(parked[0][1])) == []
