"""Each cause end to end (issue 34): events posted to a real collector API (HTTP on loopback, the
sql store on SQLite, the watch's store on SQLite), alerts received by a real HTTP receiver on
loopback, each signature checked with the ``standardwebhooks`` package, each impact exact on a
known graph, each id stable: the same events sent again send nothing new, and the same events
sent to a second, fresh collector give the same ids. The graph::

    src -> [load] -> stg -> [clean] -> clean_t -> [report] -> mart (owned by team:bi)
                        \\-> [audit] -> audit_log
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook
from webhook_receiver import Receiver, receiver

from lineage_sdk.collector.api import ApiServer, create_app
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.watch.model import cause_id
from lineage_sdk.config import load_config
from lineage_sdk.models.constants import HEARTBEAT_FACET_KEY

SECRET = "whsec_" + base64.b64encode(bytes(range(40, 72))).decode()
PRODUCER = "https://example.com/watch-e2e"
RUN_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
NS, PG = "shop", "pg"
RUNS = {
    name: str(uuid.UUID(int=0xE2E0 + i, version=4))
    for i, name in enumerate(("load1", "load2", "clean", "audit", "report", "stream"))
}
T0 = datetime(2026, 3, 1, tzinfo=UTC)


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
    """The graph, every run COMPLETE, the first schema of stg, and the owners of report and
    mart."""
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
    beat = {HEARTBEAT_FACET_KEY: _facet(intervalS=1)}
    at = datetime.now(UTC) - timedelta(seconds=30)
    return _event("stream", "stream", "RUNNING", 0, [], [], run_facets=beat, at=at)


@dataclass
class Rig:
    api: httpx.Client
    service: LineageCollectorService


@contextmanager
def collector(folder: Path, url: str) -> Iterator[Rig]:
    """``serve``'s parts over a SQLite store in ``folder``, one rule sending every cause to
    ``url`` (depth 10), the watch started as ``serve`` starts it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "lineage.toml"
    path.write_text(
        '[lineage.store]\nbackend = "sql"\n'
        f'[lineage.store.sql]\nurl = "sqlite:///{folder / "lineage.db"}"\n'
        f'[lineage.alerts]\nstore = "sqlite:///{folder / "watch.db"}"\n'
        f'[[lineage.alerts.webhook]]\nurl = "{url}"\nsecret = "{SECRET}"\ndepth = 10\n',
        encoding="utf-8",
    )
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


def test_every_cause_end_to_end(tmp_path: Path) -> None:
    with receiver() as hook, collector(tmp_path / "one", hook.url) as rig:
        _post(rig, graph_events())
        _post(rig, [failed_clean(), failed_check(), stale_stream()])
        alerts = _alerts(hook, 4)
        assert set(alerts) == {
            "lineage.run_failed",
            "lineage.quality_failed",
            "lineage.schema_breaking",
            "lineage.run_stale",
        }
        for event in alerts.values():
            assert event["specversion"] == "1.0" and event["source"]

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
        assert _impact(schema)[:2] == [(f"job:{NS}:audit", 1), (f"job:{NS}:clean", 1)]

        stale = alerts["lineage.run_stale"]
        assert stale["subject"] == f"job:{NS}:stream"
        assert stale["data"]["cause"]["runId"] == RUNS["stream"]
        assert _impact(stale) == []

        # The same events again: the same causes, nothing new is sent.
        sent = len(hook.ok())
        _post(rig, [failed_clean(), failed_check()])
        assert rig.service.watcher is not None
        time.sleep(2.0)
        assert len(hook.ok()) == sent
        first_ids = {t: e["id"] for t, e in alerts.items() if t != "lineage.run_stale"}

    # The same events to a fresh collector: the same ids.
    with receiver() as hook, collector(tmp_path / "two", hook.url) as rig:
        _post(rig, graph_events())
        _post(rig, [failed_clean(), failed_check()])
        again = _alerts(hook, 3)
        assert {t: e["id"] for t, e in again.items()} == first_ids


def test_rules_filter_by_cause_and_namespace(tmp_path: Path) -> None:
    """A rule for another namespace, or for other causes, hears nothing of this one."""
    with receiver() as hook, collector(tmp_path, hook.url) as rig:
        assert rig.service.watcher is not None
        rule = rig.service.watcher.rules[0]
        other = type(rule)(rule.url, rule.secret, frozenset({"run_failed"}), ("elsewhere",), 10)
        rig.service.watcher.rules = [other]
        _post(rig, [*graph_events(), failed_clean()])
        assert rig.service.watcher.drain(10)
        assert hook.ok() == []


@pytest.mark.parametrize("bad", ["nope", "http://[::1"])
def test_a_collector_with_a_bad_rule_does_not_start(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "lineage.toml"
    path.write_text(
        f'[[lineage.alerts.webhook]]\nurl = "{bad}"\nsecret = "{SECRET}"\n', encoding="utf-8"
    )
    from lineage_sdk.collector.watch.rules import rules_of
    from lineage_sdk.exceptions import ConfigError

    with pytest.raises(ConfigError) as caught:
        rules_of(load_config(path=path, environ={}, openlineage_client=False))
    assert "alerts.webhook" in str(caught.value) and SECRET not in str(caught.value)


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
