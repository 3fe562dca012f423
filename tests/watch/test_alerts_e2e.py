"""Each cause end to end (issue 34): events posted to a real collector API (HTTP on loopback, the
sql store on SQLite, the watch's store on SQLite), alerts received by a real HTTP receiver on
loopback, each signature checked with the ``standardwebhooks`` package, each impact exact on a
known graph, each id stable: the same events sent again send nothing new, and the same events
sent to a second, fresh collector give the same ids. The graph::

    src -> [load] -> stg -> [clean] -> clean_t -> [report] -> mart (owned by team:bi)
                        \\-> [audit] -> audit_log
    [stream] (running, heartbeats, then silent) -> events_t -> [rollup] -> rollup_t

Then what the rules choose: by cause (``on``), by namespace and by ``depth``; a hung receiver
that holds up no ingest; a bad rule that stops a collector from starting.
"""

from __future__ import annotations

import base64
import json
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_process import clean_env, free_port
from standardwebhooks import Webhook
from webhook_receiver import Receiver, assert_refuses_the_rule, hung_receiver, receiver

from lineage_sdk.collector.api import ApiServer, create_app
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.records import format_time
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.watch.impact import impact, impacts
from lineage_sdk.collector.watch.model import cause_id
from lineage_sdk.config import load_config
from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY

SECRET = "whsec_" + base64.b64encode(bytes(range(40, 72))).decode()
PRODUCER = "https://example.com/watch-e2e"
#: The collectors' producer URI, the alerts' ``source`` (not the events' ``producer``).
SOURCE = "https://example.com/watch-e2e-collector"
RUN_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
NS, PG = "shop", "pg"
CHAIN_JOBS = ("c1", "c2", "c3", "c4", "c5")
RUNS = {
    name: str(uuid.UUID(int=0xE2E0 + i, version=4))
    for i, name in enumerate(
        ("load1", "load2", "clean", "audit", "report", "stream", "rollup", *CHAIN_JOBS)
    )
}
T0 = datetime(2026, 3, 1, tzinfo=UTC)
#: The stream's last event: fixed (long past, so stale at once), so that the same events make
#: the same ``run_stale`` cause, whose id derives from the run and its last event.
STALE_AT = T0 + timedelta(minutes=5)


def _facet(**fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": "https://example.com/facet.json", **fields}


def _ds(name: str, **facets: Any) -> dict[str, Any]:
    return {"namespace": PG, "name": name, "facets": facets}


def _event(
    job: str,
    run: str,
    event_type: str,
    minutes: float,
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    run_facets: dict[str, Any] | None = None,
    job_facets: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> dict[str, Any]:
    when = at or T0 + timedelta(minutes=minutes)
    return {
        "eventType": event_type,
        "eventTime": when.isoformat().replace("+00:00", "Z"),
        "run": {"runId": RUNS[run], "facets": run_facets or {}},
        "job": {"namespace": NS, "name": job, "facets": job_facets or {}},
        "inputs": inputs,
        "outputs": outputs,
        "producer": PRODUCER,
        "schemaURL": RUN_SCHEMA,
    }


def _schema(*fields: tuple[str, str]) -> dict[str, Any]:
    return _facet(fields=[{"name": n, "type": t} for n, t in fields])


def graph_events() -> list[dict[str, Any]]:
    """The graph, every run COMPLETE but clean's (started; stream's heartbeat is
    :func:`stale_stream`), the first schema of stg, and the owners of report and mart."""
    owners = _facet(owners=[{"name": "team:bi", "type": "TEAM"}])
    return [
        _event(
            "load",
            "load1",
            "COMPLETE",
            0,
            [_ds("src")],
            [_ds("stg", schema=_schema(("id", "BIGINT"), ("name", "TEXT")))],
        ),
        _event("clean", "clean", "START", 1, [_ds("stg")], [_ds("clean_t")]),
        _event("audit", "audit", "COMPLETE", 1, [_ds("stg")], [_ds("audit_log")]),
        _event(
            "report",
            "report",
            "COMPLETE",
            2,
            [_ds("clean_t")],
            [_ds("mart", ownership=owners)],
            job_facets={"ownership": owners},
        ),
        _event("rollup", "rollup", "COMPLETE", 2, [_ds("events_t")], [_ds("rollup_t")]),
    ]


def failed_clean() -> dict[str, Any]:
    error = {"errorMessage": _facet(message="division by zero", programmingLanguage="sql")}
    return _event("clean", "clean", "FAIL", 3, [_ds("stg")], [_ds("clean_t")], run_facets=error)


def failed_check() -> dict[str, Any]:
    """load's second run: its input src fails a not_null check, and stg loses ``name`` and
    changes ``id`` to TEXT."""
    checks = _facet(assertions=[{"assertion": "not_null", "column": "id", "success": False}])
    src = {**_ds("src"), "inputFacets": {"dataQualityAssertions": checks}}
    stg = _ds("stg", schema=_schema(("id", "TEXT")))
    return _event("load", "load2", "COMPLETE", 4, [src], [stg])


def stale_stream() -> dict[str, Any]:
    """stream's heartbeat (every second), writing events_t, at :data:`STALE_AT`: silent since."""
    beat = {HEARTBEAT_FACET_KEY: _facet(intervalS=1)}
    return _event("stream", "stream", "RUNNING", 0, [], [_ds("events_t")], beat, at=STALE_AT)


def chain_events() -> list[dict[str, Any]]:
    """A chain a0 -> [c1] -> a1 -> [c2] -> a2 -> ... -> [c5] -> a5, c1's run failing."""
    return [
        _event(
            job,
            job,
            "FAIL" if job == "c1" else "COMPLETE",
            10 + i,
            [_ds(f"a{i}")],
            [_ds(f"a{i + 1}")],
        )
        for i, job in enumerate(CHAIN_JOBS)
    ]


@dataclass
class Rig:
    api: httpx.Client
    service: LineageCollectorService


def rule(url: str, **settings: Any) -> str:
    """A ``[[lineage.alerts.webhook]]`` table sending to ``url`` (signed with SECRET)."""
    lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    return "\n".join(
        ["[[lineage.alerts.webhook]]", f'url = "{url}"', f'secret = "{SECRET}"', *lines]
    )


def config_text(folder: Path, rules: Sequence[str], alerts: str = "") -> str:
    """A collector's TOML: the sql store on SQLite in ``folder``, the producer URI SOURCE, the
    watch's store in ``folder``, ``alerts`` more ``[lineage.alerts]`` lines, and ``rules``."""
    return (
        '[lineage.producer]\nproducer_uri = "' + SOURCE + '"\n'
        '[lineage.store]\nbackend = "sql"\n'
        f'[lineage.store.sql]\nurl = "sqlite:///{folder / "lineage.db"}"\n'
        f'[lineage.alerts]\nstore = "sqlite:///{folder / "watch.db"}"\n{alerts}\n'
        + "\n".join(rules)
        + "\n"
    )


@contextmanager
def collector(
    folder: Path, url: str | None, *, rules: Sequence[str] = (), alerts: str = ""
) -> Iterator[Rig]:
    """``serve``'s parts over a SQLite store in ``folder``, one rule sending every cause to
    ``url`` (depth 10) and ``rules`` more, the watch started as ``serve`` starts it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "lineage.toml"
    every = [rule(url, depth=10)] if url is not None else []
    path.write_text(config_text(folder, [*every, *rules], alerts), encoding="utf-8")
    config = load_config(path=path, environ={}, openlineage_client=False)
    with ExitStack() as stack:
        manager = LineageManager(config)
        manager.connect_sync()
        stack.callback(manager.close_sync)
        app = create_app(manager)
        service = app.state.lineage.service
        service.start_watch()
        stack.callback(service.stop_watch)
        server = stack.enter_context(ApiServer(app))
        api = stack.enter_context(httpx.Client(base_url=server.url, timeout=30))
        yield Rig(api, service)


def _post(rig: Rig, events: list[dict[str, Any]]) -> None:
    answer = rig.api.post("/api/v1/lineage/batch", json=events)
    assert answer.status_code == 200, answer.text


def _alerts(hook: Receiver, count: int, timeout: float = 30.0) -> dict[str, dict[str, Any]]:
    """The first ``count`` distinct alerts received, by type, each signature checked."""

    def enough() -> bool:  # called with the receiver's lock held: read its list directly
        return len({r.webhook_id for r in hook.received if 200 <= r.status < 300}) >= count

    assert hook.wait_for(enough, timeout), [r.body for r in hook.received]
    found: dict[str, dict[str, Any]] = {}
    for item in hook.ok():
        Webhook(SECRET).verify(item.body, item.headers)  # raises on a bad signature
        assert item.headers["content-type"] == "application/cloudevents+json"
        event = json.loads(item.body)
        assert event["id"] == item.webhook_id
        found.setdefault(event["type"], event)
    return found


def _impact(event: dict[str, Any]) -> list[tuple[str, int]]:
    return [(i["nodeId"], i["distance"]) for i in event["data"]["impact"]]


def _states(event: dict[str, Any]) -> dict[str, str | None]:
    """Each impact node's latest run state."""
    return {i["nodeId"]: (i["latestRun"] or {}).get("state") for i in event["data"]["impact"]}


def _settled(rig: Rig) -> None:
    """Every cause resolved and every alert's attempt ended."""
    watcher = rig.service.watcher
    assert watcher is not None
    assert watcher.drain(10) and watcher.deliverer.wait_idle(10)


def test_every_cause_end_to_end(tmp_path: Path) -> None:
    everything = [failed_clean(), failed_check(), stale_stream()]
    with receiver() as hook, collector(tmp_path / "one", hook.url) as rig:
        _post(rig, graph_events())
        _post(rig, everything)
        alerts = _alerts(hook, 4)
        assert set(alerts) == {
            "lineage.run_failed",
            "lineage.quality_failed",
            "lineage.schema_breaking",
            "lineage.run_stale",
        }
        for event in alerts.values():
            assert event["specversion"] == "1.0" and event["source"] == SOURCE
            assert event["data"]["depth"] == 10

        failed = alerts["lineage.run_failed"]
        assert failed["id"] == cause_id("run_failed", RUNS["clean"], NS, "clean")
        assert failed["subject"] == f"job:{NS}:clean"
        assert failed["data"]["cause"]["error"]["message"] == "division by zero"
        assert _impact(failed) == [
            (f"dataset:{PG}:clean_t", 1),
            (f"job:{NS}:report", 2),
            (f"dataset:{PG}:mart", 3),
        ]
        report = failed["data"]["impact"][1]
        assert report["latestRun"]["state"] == "COMPLETED"
        assert report["owners"] == [{"name": "team:bi", "type": "TEAM"}]
        assert failed["data"]["impact"][2]["owners"] == [{"name": "team:bi", "type": "TEAM"}]

        quality = alerts["lineage.quality_failed"]
        assert quality["subject"] == f"dataset:{PG}:src"
        assert quality["data"]["cause"]["assertions"] == [
            {"assertion": "not_null", "column": "id", "success": False}
        ]
        assert _impact(quality) == [
            (f"job:{NS}:load", 1),
            (f"dataset:{PG}:stg", 2),
            (f"job:{NS}:audit", 3),
            (f"job:{NS}:clean", 3),
            (f"dataset:{PG}:audit_log", 4),
            (f"dataset:{PG}:clean_t", 4),
            (f"job:{NS}:report", 5),
            (f"dataset:{PG}:mart", 6),
        ]

        schema = alerts["lineage.schema_breaking"]
        assert schema["subject"] == f"dataset:{PG}:stg"
        assert schema["data"]["cause"]["fields"] == [
            {"name": "id", "change": "type", "oldType": "BIGINT", "newType": "TEXT"},
            {"name": "name", "change": "removed", "oldType": "TEXT", "newType": None},
        ]
        assert _impact(schema) == [
            (f"job:{NS}:audit", 1),
            (f"job:{NS}:clean", 1),
            (f"dataset:{PG}:audit_log", 2),
            (f"dataset:{PG}:clean_t", 2),
            (f"job:{NS}:report", 3),
            (f"dataset:{PG}:mart", 4),
        ]
        # clean's FAIL came in the batch that broke the schema: the impact shows it.
        assert _states(schema) == {
            f"job:{NS}:audit": "COMPLETED",
            f"job:{NS}:clean": "FAILED",
            f"dataset:{PG}:audit_log": "COMPLETED",
            f"dataset:{PG}:clean_t": "FAILED",
            f"job:{NS}:report": "COMPLETED",
            f"dataset:{PG}:mart": "COMPLETED",
        }

        stale = alerts["lineage.run_stale"]
        assert stale["id"] == cause_id(
            "run_stale", RUNS["stream"], NS, "stream", format_time(STALE_AT)
        )
        assert stale["subject"] == f"job:{NS}:stream"
        assert stale["data"]["cause"]["runId"] == RUNS["stream"]
        assert stale["data"]["cause"]["lastEventTime"] == format_time(STALE_AT)
        assert _impact(stale) == [
            (f"dataset:{PG}:events_t", 1),
            (f"job:{NS}:rollup", 2),
            (f"dataset:{PG}:rollup_t", 3),
        ]
        events_t = stale["data"]["impact"][0]["latestRun"]
        assert (events_t["id"], events_t["state"]) == (RUNS["stream"], "RUNNING")
        assert events_t["liveness"] == "STALE"

        # The same events again: the same causes, nothing new is sent.
        sent = len(hook.ok())
        _post(rig, everything)
        _settled(rig)
        time.sleep(2.0)  # a sweep or two more: the stream is still stale, the same cause
        assert len(hook.ok()) == sent
        first_ids = {t: e["id"] for t, e in alerts.items()}

    # The same events to a fresh collector: the same ids, the stale run's too.
    with receiver() as hook, collector(tmp_path / "two", hook.url) as rig:
        _post(rig, graph_events())
        _post(rig, everything)
        again = _alerts(hook, 4)
        assert {t: e["id"] for t, e in again.items()} == first_ids


def _types(hook: Receiver) -> list[str]:
    """The types of the alerts ``hook`` accepted, sorted, each signature checked."""
    found = []
    for item in hook.ok():
        Webhook(SECRET).verify(item.body, item.headers)
        found.append(json.loads(item.body)["type"])
    return sorted(found)


def test_rules_filter_by_cause_and_namespace(tmp_path: Path) -> None:
    """A rule for another namespace, or for other causes, hears nothing of this one; the rules
    that want it hear it, and only it."""
    with ExitStack() as stack:
        elsewhere, failures, quality = (stack.enter_context(receiver()) for _ in range(3))
        rules = [
            rule(elsewhere.url, namespaces=["elsewhere"]),  # every cause, another namespace
            rule(failures.url, on=["run_failed"], namespaces=["sh*"]),
            rule(quality.url, on=["quality_failed"]),  # every namespace
        ]
        rig = stack.enter_context(collector(tmp_path, None, rules=rules))
        # run_failed in shop; quality_failed and schema_breaking in pg.
        _post(rig, [*graph_events(), failed_clean(), failed_check()])
        _settled(rig)
        assert failures.wait_for(lambda: len(failures.received) >= 1, 10)
        assert quality.wait_for(lambda: len(quality.received) >= 1, 10)
        assert _types(failures) == ["lineage.run_failed"]
        assert json.loads(failures.ok()[0].body)["subject"] == f"job:{NS}:clean"
        assert _types(quality) == ["lineage.quality_failed"]
        assert json.loads(quality.ok()[0].body)["subject"] == f"dataset:{PG}:src"
        assert elsewhere.received == []
        assert len(failures.received) == len(quality.received) == 1


def test_a_rules_depth_cuts_the_impact(tmp_path: Path) -> None:
    """Two rules, depths 1 and 3, on a chain of five jobs whose first fails: one cause, one id,
    each rule's impact cut at its depth (job hops; from a job, depth 0 is its outputs)."""
    with receiver() as near, receiver() as far:
        rules = [rule(near.url, depth=1), rule(far.url, depth=3)]
        with collector(tmp_path, None, rules=rules) as rig:
            _post(rig, chain_events())
            got = {name: _alerts(hook, 1) for name, hook in (("near", near), ("far", far))}
    one, three = got["near"]["lineage.run_failed"], got["far"]["lineage.run_failed"]
    assert one["id"] == three["id"] == cause_id("run_failed", RUNS["c1"], NS, "c1")
    assert (one["data"]["depth"], three["data"]["depth"]) == (1, 3)
    assert _impact(one) == [(f"dataset:{PG}:a1", 1), (f"job:{NS}:c2", 2), (f"dataset:{PG}:a2", 3)]
    assert _impact(three) == [
        (f"dataset:{PG}:a1", 1),
        (f"job:{NS}:c2", 2),
        (f"dataset:{PG}:a2", 3),
        (f"job:{NS}:c3", 4),
        (f"dataset:{PG}:a3", 5),
        (f"job:{NS}:c4", 6),
        (f"dataset:{PG}:a4", 7),
    ]


def owner_trap_events() -> list[dict[str, Any]]:
    """d0 -> [t1] (FAIL) -> d1, e1; d1 -> [t2] -> d2 -> [t3] -> d3; e1, d3 -> [t4] -> d4 ->
    [t5] -> d5. From t1, t4 is 2 edges away by the shortcut e1 (and d3, 5 away, is its input
    too); t3, 4 away, states owners of its input d2, 3 away: a job beyond depth 1 says who
    owns a dataset within it."""
    late = _facet(owners=[{"name": "team:late", "type": "TEAM"}])
    steps = [
        ("t1", ["d0"], ["d1", "e1"]),
        ("t2", ["d1"], ["d2"]),
        ("t3", ["d2"], ["d3"]),
        ("t4", ["e1", "d3"], ["d4"]),
        ("t5", ["d4"], ["d5"]),
    ]
    found = []
    for i, (job, ins, outs) in enumerate(steps):
        event = _event(
            job, "c1", "FAIL" if job == "t1" else "COMPLETE", 30 + i, [], [_ds(n) for n in outs]
        )
        event["run"]["runId"] = str(uuid.UUID(int=0x7A90 + i, version=4))
        event["inputs"] = [
            _ds(n, ownership=late) if (job, n) == ("t3", "d2") else _ds(n) for n in ins
        ]
        found.append(event)
    return found


def test_rules_of_two_depths_on_one_cause_get_the_impact_read_at_their_depth(
    tmp_path: Path,
) -> None:
    """One walk serves every rule of a cause (at the largest depth), each rule's impact cut to
    its own: exactly what ``impact`` reads at that depth, nodes, distances, latest runs and
    owners, though a job beyond the smaller depth states owners of a dataset within it."""
    with receiver() as near, receiver() as far:
        rules = [rule(near.url, depth=1), rule(far.url, depth=3)]
        with collector(tmp_path, None, rules=rules) as rig:
            _post(rig, owner_trap_events())
            got = {name: _alerts(hook, 1) for name, hook in (("near", near), ("far", far))}
            engine = rig.service.lineage_manager.query_store()
            read = {d: impact(engine, f"job:{NS}:t1", depth=d) for d in range(6)}
            for root in (f"job:{NS}:t1", f"dataset:{PG}:d0", f"dataset:{PG}:e1"):
                one_walk = impacts(engine, root, range(6))
                assert one_walk == {d: impact(engine, root, depth=d) for d in range(6)}, root
    one, three = got["near"]["lineage.run_failed"], got["far"]["lineage.run_failed"]
    assert one["id"] == three["id"]
    assert one["data"]["impact"] == read[1]
    assert three["data"]["impact"] == read[3]
    assert _impact(one) == [
        (f"dataset:{PG}:d1", 1),
        (f"dataset:{PG}:e1", 1),
        (f"job:{NS}:t2", 2),
        (f"job:{NS}:t4", 2),
        (f"dataset:{PG}:d2", 3),
        (f"dataset:{PG}:d4", 3),
    ]
    owners = {
        n: {i["nodeId"]: [o["name"] for o in i["owners"]] for i in event["data"]["impact"]}
        for n, event in (("near", one), ("far", three))
    }
    # Cut from the depth-3 read as it is, d2 would say team:late (t3's statement).
    assert owners["near"][f"dataset:{PG}:d2"] == []
    assert owners["far"][f"dataset:{PG}:d2"] == ["team:late"]
    assert _states(three)[f"job:{NS}:t5"] == "COMPLETED"


def test_a_hung_receiver_holds_up_no_ingest(tmp_path: Path) -> None:
    """A receiver that accepts the connection and never answers: the events that each make an
    alert for it are all stored, over HTTP, one request each, in far less time than waiting out
    the receiver's timeout once per event would take; their alerts are still pending after."""
    count, timeout_s = 40, 5.0
    failures = []
    for i in range(count):
        event = _event("load", "load1", "FAIL", 20 + i, [_ds("src")], [_ds("stg")])
        event["run"]["runId"] = str(uuid.UUID(int=0x4E60000 + i, version=4))
        failures.append(event)
    alerts = f"timeout_ms = {int(timeout_s * 1000)}"
    with hung_receiver() as hung, collector(tmp_path, hung.url, alerts=alerts) as rig:
        try:
            _post(rig, graph_events())
            _post(rig, failures[:1])
            assert hung.wait_accepted(1, 30), "the first alert was never sent"
            longest, started = 0.0, time.monotonic()
            for event in failures[1:]:
                one = time.monotonic()
                _post(rig, [event])
                longest = max(longest, time.monotonic() - one)
            took = time.monotonic() - started
            total = rig.api.get("/api/v1/events/lineage", params={"limit": 1})
            assert total.json()["totalCount"] == len(graph_events()) + count
            # Serially, the alerts would have waited (count - 1) x timeout_s: 195 s.
            assert took < (count - 1) * timeout_s / 4, took
            assert longest < timeout_s, longest
            watcher = rig.service.watcher
            assert watcher is not None
            deadline = time.monotonic() + 30
            while watcher.store.counts()["pending"] < count and time.monotonic() < deadline:
                time.sleep(0.1)
            assert watcher.store.counts() == {"pending": count, "sent": 0, "parked": 0}
            assert hung.accepted >= 1
        finally:
            hung.release()  # the sends held fail at once: the collector closes without waiting


@pytest.mark.parametrize("bad", ["nope", "http://[::1"])
def test_a_collector_with_a_bad_rule_does_not_start(tmp_path: Path, bad: str) -> None:
    """``serve`` with a rule whose URL is not HTTP(S) exits 2 at start-up, with one line naming
    the key, no traceback and never the secret."""
    path = tmp_path / "lineage.toml"
    path.write_text(config_text(tmp_path, [rule(bad)]), encoding="utf-8")
    from lineage_sdk.collector.watch.rules import rules_of
    from lineage_sdk.exceptions import ConfigError

    with pytest.raises(ConfigError) as caught:
        rules_of(load_config(path=path, environ={}, openlineage_client=False))
    assert "alerts.webhook" in str(caught.value) and SECRET not in str(caught.value)

    command = [sys.executable, "-m", "lineage_sdk.collector.cli", "serve", "--config", str(path)]
    command += ["--host", "127.0.0.1", "--port", str(free_port())]
    assert_refuses_the_rule(command, clean_env(), tmp_path, SECRET)


def test_a_heartbeat_redelivered_after_the_end_is_no_stale_run(tmp_path: Path) -> None:
    beat = stale_stream()
    end = {**beat, "eventType": "COMPLETE", "eventTime": datetime.now(UTC).isoformat()}
    with receiver() as hook, collector(tmp_path, hook.url) as rig:
        _post(rig, [beat])
        _post(rig, [end])
        _post(rig, [beat])  # the heartbeat again, after the end: the run is live in the watch
        watcher = rig.service.watcher
        assert watcher is not None
        assert watcher.drain(10) and watcher.deliverer.wait_idle(10)
        assert watcher.store.live_runs() == []
        assert hook.received == []
