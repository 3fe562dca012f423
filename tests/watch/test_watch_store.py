"""The WatchStore on SQLite and on PostgreSQL (a scratch database of its own): insert-if-absent,
leases (two owners never claim one row; a lease that runs out is claimed again), schema
candidates, live runs, and the alert rows' retry, park and replay."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from servers import postgres_database

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.stores.memory import MemoryBackend
from lineage_sdk.collector.watch.deliver import Deliverer
from lineage_sdk.collector.watch.model import (
    CAUSE_KINDS,
    Alert,
    Beat,
    Cause,
    Noticed,
    SchemaSeen,
    cause_id,
)
from lineage_sdk.collector.watch.rules import Rule
from lineage_sdk.collector.watch.store import Outcome, WatchStore
from lineage_sdk.collector.watch.worker import IngestLoad, Watcher
from lineage_sdk.exceptions import StoreError

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    with postgres_database("lineage_watch_store") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'watch.db'}"
        return
    url = request.getfixturevalue("pg_database")
    yield url
    from servers import drop_tables

    drop_tables(url, "lineage_watch_")


@pytest.fixture
def store(url: str) -> Iterator[WatchStore]:
    with WatchStore(url) as s:
        yield s


def cause(n: int, kind: str = "run_failed", at: datetime = T0) -> Cause:
    return Cause(
        id=cause_id(kind, str(n)),  # type: ignore[arg-type]
        kind=kind,  # type: ignore[arg-type]
        subject=f"job:shop:job{n}",
        namespace="shop",
        time=at,
        data={"what": f"run {n} failed", "n": n, "text": "é ✓"},
    )


def alert(n: int, rule: str = "r1", at: datetime = T0) -> Alert:
    c = cause_id("run_failed", str(n))
    return Alert(f"{c}/{rule}", c, rule, b'{"id": "%d"}' % n, "pending", 0, at, at)


def test_open_is_idempotent_and_check_answers(url: str) -> None:
    for _ in range(2):
        with WatchStore(url) as s:
            s.check()
    s = WatchStore(url)
    with pytest.raises(Exception, match="not open"):
        s.check()


def test_address_hides_the_password() -> None:
    s = WatchStore("postgresql+psycopg://u:hunter2@127.0.0.1:1/db")
    assert "hunter2" not in s.address


def test_causes_are_inserted_if_absent_and_claimed_once(store: WatchStore) -> None:
    store.record(Noticed(causes=(cause(1), cause(2), cause(1))))
    store.record(Noticed(causes=(cause(2), cause(3))))
    store.record(Noticed())  # nothing: no transaction
    first = store.claim_causes("a", 2, 60)
    second = store.claim_causes("b", 10, 60)
    assert len(first) == 2 and len(second) == 1
    got = {c.id: c for c in first + second}
    assert set(got) == {cause(n).id for n in (1, 2, 3)}
    assert got[cause(1).id] == cause(1)  # round trip: time, data, unicode
    assert store.claim_causes("c", 10, 60) == []
    # Resolved causes are never claimed again, and noticing them again adds nothing.
    for c in got.values():
        store.resolve(c.id, [])
    store.record(Noticed(causes=(cause(1),)))
    time.sleep(0.01)
    assert store.claim_causes("c", 10, 0.001) == []


def test_an_expired_lease_is_claimed_again(store: WatchStore) -> None:
    store.record(Noticed(causes=(cause(1),)))
    # A cause's lease runs on the wall clock: 2 s, so that the claim right after it falls
    # inside it on a loaded machine too (0.2 s ran out between the two claims in a CI run).
    assert [c.id for c in store.claim_causes("a", 10, 2.0)] == [cause(1).id]
    assert store.claim_causes("b", 10, 60) == []
    time.sleep(2.1)
    assert [c.id for c in store.claim_causes("b", 10, 60)] == [cause(1).id]
    # alerts: the lease is compared with the caller's `now`
    store.resolve(cause(1).id, [alert(1)])
    assert [a.id for a in store.claim_alerts("a", T0, 10, 30)] == [alert(1).id]
    assert store.claim_alerts("b", T0 + timedelta(seconds=29), 10, 30) == []
    assert [a.id for a in store.claim_alerts("b", T0 + timedelta(seconds=31), 10, 30)] == [
        alert(1).id
    ]


def test_resolve_inserts_alerts_if_absent(store: WatchStore) -> None:
    store.record(Noticed(causes=(cause(1),)))
    store.resolve(cause(1).id, [alert(1, "r1"), alert(1, "r2")])
    store.resolve(cause(1).id, [alert(1, "r1")])  # a second resolution (an expired lease)
    rows = store.alerts()
    assert sorted(a.rule for a in rows) == ["r1", "r2"]
    assert {a.body for a in rows} == {b'{"id": "1"}'}
    assert all(a.first_at == T0 and a.status == "pending" for a in rows)


def test_two_owners_never_claim_the_same_alert(store: WatchStore) -> None:
    store.record(Noticed(causes=tuple(cause(n) for n in range(60))))
    for n in range(60):
        store.resolve(cause(n).id, [alert(n)])
    claims: dict[str, list[str]] = {}
    start = threading.Barrier(4)

    def claimer(owner: str) -> None:
        start.wait()
        got: list[str] = []
        while batch := store.claim_alerts(owner, T0, 3, 60):
            got += [a.id for a in batch]
        claims[owner] = got

    threads = [threading.Thread(target=claimer, args=(f"o{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    every = [i for got in claims.values() for i in got]
    assert len(every) == 60 and len(set(every)) == 60


def test_claim_alerts_only_due_and_only_given_rules(store: WatchStore) -> None:
    later = T0 + timedelta(minutes=5)
    store.record(Noticed(causes=(cause(1), cause(2))))
    store.resolve(cause(1).id, [alert(1, "r1"), alert(1, "r2", at=later)])
    assert store.claim_alerts("a", T0, 10, 60, rules=[]) == []
    assert [a.rule for a in store.claim_alerts("a", T0, 10, 60, rules=["r2"])] == []
    assert [a.rule for a in store.claim_alerts("a", T0, 10, 3600, rules=["r1", "r2"])] == ["r1"]
    assert [a.rule for a in store.claim_alerts("a", later, 10, 60, rules=["r2"])] == ["r2"]
    store.release([alert(1, "r2").id], "someone else")
    assert store.claim_alerts("b", later, 10, 60) == []
    store.release([alert(1, "r2").id], "a")
    assert [a.rule for a in store.claim_alerts("b", later, 10, 60)] == ["r2"]


def test_retry_park_replay_and_delivered(store: WatchStore) -> None:
    store.record(Noticed(causes=(cause(1),)))
    store.resolve(cause(1).id, [alert(1)])
    a = alert(1)
    [claimed] = store.claim_alerts("a", T0, 10, 60)
    assert claimed.attempts == 0
    store.settle([Outcome(a.id, "pending", T0, T0 + timedelta(seconds=10), "HTTP 500")])
    assert store.claim_alerts("a", T0 + timedelta(seconds=9), 10, 60) == []
    [again] = store.claim_alerts("a", T0 + timedelta(seconds=10), 10, 60)
    assert (again.attempts, again.last_error, again.status) == (1, "HTTP 500", "pending")
    store.settle([Outcome(a.id, "parked", T0, None, "gone")])
    assert store.claim_alerts("a", T0 + timedelta(days=1), 10, 60) == []
    [parked] = store.alerts(status="parked")
    assert (parked.attempts, parked.last_error) == (2, "gone")
    assert store.counts() == {"pending": 0, "sent": 0, "parked": 1}
    store.settle(
        [Outcome(a.id, "pending", T0, T0, "late")]
    )  # a parked alert is not made pending by a late attempt
    assert store.alert(a.id).status == "parked"  # type: ignore[union-attr]

    assert store.replay(None) == 1
    assert store.replay(None) == 0
    [pending] = store.alerts(status="pending")
    assert pending.first_at > T0 and pending.next_at == pending.first_at
    [claimed] = store.claim_alerts("b", datetime.now(UTC), 10, 60)
    store.settle([Outcome(a.id, "sent", T0 + timedelta(days=2))])
    [sent] = store.alerts(status="sent")
    assert (sent.attempts, sent.sent_at, sent.last_error) == (3, T0 + timedelta(days=2), None)
    assert store.claim_alerts("c", datetime.now(UTC) + timedelta(days=9), 10, 60) == []
    store.settle([Outcome(a.id, "pending", T0, T0, "late")])  # a sent alert stays sent
    assert store.alert(a.id).status == "sent"  # type: ignore[union-attr]
    # replay by id: whatever the status
    assert store.replay([a.id, a.id, "nope"]) == 1
    assert store.alert(a.id).status == "pending"  # type: ignore[union-attr]
    assert store.replay([]) == 0


def test_schema_candidates_settle_to_the_latest(store: WatchStore) -> None:
    ds = ("shop", "orders")

    def seen(event: str, at: datetime, fields: dict[str, str | None]) -> SchemaSeen:
        return SchemaSeen(ds, event, at, ("shop", "load"), "run-1", fields)

    s1 = seen("e1", T0, {"id": "int", "name": None})
    s2 = seen("e2", T0 + timedelta(seconds=1), {"id": "bigint"})
    store.record(Noticed(schemas=(s2, s1, s1)))
    assert store.previous_schemas([ds]).get(ds) is None
    claimed = store.claim_schemas("a", 10, 60)
    assert claimed == [s1, s2]  # oldest first
    assert store.claim_schemas("b", 10, 60) == []
    store.settle_schemas([(s2, [cause(7, "schema_breaking")])])
    assert store.previous_schemas([ds]).get(ds) == s2
    store.settle_schemas([(s1, [])])  # older: settled, but not the latest
    assert store.previous_schemas([ds]).get(ds) == s2
    assert store.claim_schemas("c", 10, 0.001) == []
    assert [c.id for c in store.claim_causes("a", 10, 60)] == [cause(7, "schema_breaking").id]
    s3 = seen("e3", T0 + timedelta(seconds=2), {})
    store.record(Noticed(schemas=(s3,)))
    [got] = store.claim_schemas("a", 10, 60)
    store.settle_schemas([(got, [])])
    assert store.previous_schemas([ds]).get(ds) == s3


def test_live_runs_keep_the_latest_beat_and_drop_ended_runs(store: WatchStore) -> None:
    b1 = Beat("run-1", ("shop", "load"), 30.0, T0)
    b1_later = Beat("run-1", ("shop", "load"), 30.0, T0 + timedelta(seconds=30))
    b2 = Beat("run-2", ("shop", "copy"), 10.0, T0)
    store.record(Noticed(beats=(b1, b2, b1_later)))
    assert store.live_runs() == [b2, b1_later]
    store.record(Noticed(beats=(b1,)))  # an older beat (redelivered) changes nothing
    assert store.live_runs() == [b2, b1_later]
    store.record(Noticed(ended=("run-2", "run-9")))
    assert store.live_runs() == [b1_later]


def test_one_record_is_one_transaction(store: WatchStore) -> None:
    """A batch whose recording fails leaves nothing: the redelivered batch records it all."""
    bad = Beat("run-x", (None, "load"), 30.0, T0)  # type: ignore[arg-type] - NOT NULL fails
    with pytest.raises(StoreError):
        store.record(Noticed(causes=(cause(1),), schemas=(), beats=(bad,)))
    assert store.claim_causes("a", 10, 60) == []
    assert store.live_runs() == []


def test_one_pass_settles_a_datasets_candidates_each_against_the_one_before(
    store: WatchStore,
) -> None:
    """Candidates of one dataset claimed together are settled in one transaction, oldest first,
    each compared with the one settled just before it in the same pass."""
    ds = ("shop", "orders")

    def seen(event: str, seconds: int, fields: dict[str, str | None]) -> SchemaSeen:
        return SchemaSeen(ds, event, T0 + timedelta(seconds=seconds), None, None, fields)

    s1 = seen("e1", 1, {"id": "INT", "name": "TEXT", "amount": "DECIMAL"})
    s2 = seen("e2", 2, {"id": "INT", "name": "TEXT"})  # removes amount
    s3 = seen("e3", 3, {"id": "BIGINT", "name": "TEXT"})  # retypes id
    s4 = seen("e4", 4, {"id": "bigint", "name": "TEXT", "note": "TEXT"})  # adds: no break
    store.record(Noticed(schemas=(s3, s1, s4, s2)))
    engine = EngineStore(MemoryBackend())  # no stored events: s1 has nothing before it
    deliverer = Deliverer(store, [])
    watcher = Watcher(store, engine, [], deliverer, source="urn:test")
    try:
        assert watcher._settle_schemas() == 4
    finally:
        deliverer.close()
    found = sorted(
        (c.time, [(f["name"], f["change"]) for f in c.data["fields"]])
        for c in store.claim_causes("t", 10, 60)
    )
    assert found == [(s2.event_time, [("amount", "removed")]), (s3.event_time, [("id", "type")])]
    assert store.previous_schemas([ds]).get(ds) == s4
    assert store.claim_schemas("t", 10, 60) == []  # every candidate settled


def test_open_replaces_the_first_releases_indexes(tmp_path: Path) -> None:
    """A database an earlier release made keeps its rows and gets the indexes that hold each
    claim's order; the indexes they replace are dropped."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    with WatchStore(url) as made:
        made.record(Noticed(causes=(cause(1, "run_failed"),)))
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # as the first release left it
        for name in ("alerts_next", "causes_next", "pending_schemas_next"):
            conn.execute(sa.text(f"DROP INDEX lineage_watch_{name}"))
        conn.execute(
            sa.text(
                "CREATE INDEX lineage_watch_alerts_due ON lineage_watch_alerts (status, next_at)"
            )
        )
        conn.execute(
            sa.text(
                "CREATE INDEX lineage_watch_causes_todo ON lineage_watch_causes (done, noticed_at)"
            )
        )
    with WatchStore(url) as reopened:
        assert [c.id for c in reopened.claim_causes("a", 10, 60)] == [cause(1, "run_failed").id]
    with engine.connect() as conn:
        names = {
            i["name"]
            for table in (
                "lineage_watch_alerts",
                "lineage_watch_causes",
                "lineage_watch_pending_schemas",
            )
            for i in sa.inspect(conn).get_indexes(table)
        }
    engine.dispose()
    assert names == {
        "lineage_watch_alerts_next",
        "lineage_watch_causes_next",
        "lineage_watch_pending_schemas_next",
    }


def test_the_worker_yields_while_ingest_is_busy(store: WatchStore) -> None:
    """Ingest busy (IngestLoad; its own tests: test_ingest_load.py): a pass resolves one cause
    and starts at most two sends; once ingest is quiet, passes are whole again, and a whole
    pass that finds ingest busy between causes ends, giving the rest back at once. (Was: the
    rate line, 500 events in half a second, on the real clock; the signal is now a share of the
    time, on a fake clock.)"""
    rules = [
        Rule(f"http://127.0.0.1:9/{i}", "whsec_AAAA", frozenset(CAUSE_KINDS), None, 1)
        for i in range(3)
    ]
    now = [1000.0]
    load = IngestLoad(clock=lambda: now[0])
    deliverer = Deliverer(store, rules, workers=8, per_rule=2, timeout=0.2)
    watcher = Watcher(
        store,
        EngineStore(MemoryBackend()),
        rules,
        deliverer,
        source="urn:test",
        group_wait_s=0,
        load=load,
    )
    try:
        store.record(Noticed(causes=tuple(cause(n) for n in range(6))))
        assert not load.busy()
        load.begin()  # a batch being stored, writes just began
        assert load.busy()
        assert watcher._resolve(1, 2) == 1
        assert len(store.claim_causes("other", 10, 60)) == 5  # the rest left for later
        store.release([cause(n).id for n in range(6)], "other", kind="causes")
        # Ingest turns busy during a whole pass: the first cause is resolved, the rest given
        # back (claimable at once, not at the end of their lease).
        assert watcher._resolve(10, None) == 1
        assert len(store.claim_causes("other", 10, 60)) == 4
        store.release([cause(n).id for n in range(6)], "other", kind="causes")
        now[0] += 0.1
        load.end()
        now[0] += 0.9  # 0.1 s busy of the 1 s since writes began
        assert not load.busy()
        assert watcher._resolve(10, None) == 4
    finally:
        deliverer.close()


def test_a_pause_ends_when_ingest_is_no_longer_busy(store: WatchStore) -> None:
    """The pause after a pass under busy ingest is cut short once ingest is quiet (checked a
    tenth of a second at a time), so alerts are not held the whole pause."""
    now = [1000.0]
    load = IngestLoad(clock=lambda: now[0])
    deliverer = Deliverer(store, [], workers=1)
    watcher = Watcher(
        store, EngineStore(MemoryBackend()), [], deliverer, source="urn:test", load=load
    )
    try:
        watcher._pause(3600)  # quiet: returns after its first check, not in an hour
        load.begin()
        done = threading.Thread(target=watcher._pause, args=(3600,))
        done.start()
        now[0] += 0.3
        load.end()
        now[0] += 2.0  # two quiet seconds: not busy
        done.join(30)
        assert not done.is_alive()
    finally:
        deliverer.close()


def test_a_cause_is_claimed_once_its_group_wait_has_passed(store: WatchStore) -> None:
    store.record(Noticed(causes=(cause(1),)))
    assert store.claim_causes("a", 10, 60, wait_s=30) == []  # noticed just now
    assert [c.id for c in store.claim_causes("a", 10, 60, wait_s=0)] == [cause(1).id]
