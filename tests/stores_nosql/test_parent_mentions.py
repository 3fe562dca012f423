"""A job's events naming a parent make one ``parent`` mention of it per child job, sourced by
the child (derivation version 9; one per run before): the parent view finds a root's members from
it without reading their runs. On every backend, and after deletions, there is one for each job
whose remaining events name the parent, first seen at the least time among them."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from nosql_events import BASE_TIME, STORE_KINDS, StoreFactory, run_event

from lineage_sdk.collector.decode import validate_event
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.engine.derive import child_entry, children_of

pytestmark = [pytest.mark.postgres, pytest.mark.mongodb, pytest.mark.neo4j]

DAG_RUN = "0190aaaa-0000-7000-8000-0000000000d0"
TASK_RUN = "0190aaaa-0000-7000-8000-0000000000d1"  # one run id, two jobs' events (both tasks)
DAG = ("ns", "dag")


def _children(store: EngineStore) -> dict[tuple[str, str], datetime]:
    """The DAG's ``parent`` mentions: each child job, with when its events first named the DAG."""
    found: dict[tuple[str, str], datetime] = {}
    for m in store.backend.mentions("JOB", [DAG], roles=["parent"]):
        (child,) = children_of([m])
        assert (m.source, m.source_id, m.detail) == ("job", child_entry(child), None)
        assert child not in found, child
        found[child] = m.first_seen
    return found


def at(seconds: float) -> datetime:
    return BASE_TIME + timedelta(seconds=seconds)


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_parent_mention_names_each_child_once_and_follows_deletions(
    make_store: StoreFactory, kind: str
) -> None:
    parent = (DAG_RUN, *DAG)
    t1_later = "0190aaaa-0000-7000-8000-0000000000d2"
    events = [
        run_event(job="dag", run_id=DAG_RUN, event_type="START", seconds=1),
        run_event(job="t1", run_id=TASK_RUN, event_type="START", parent=parent, seconds=2),
        run_event(job="t1", run_id=TASK_RUN, parent=parent, seconds=3),
        run_event(job="t2", run_id=TASK_RUN, parent=parent, seconds=4),
        run_event(job="t3", event_type="START", parent=parent, seconds=5),
        run_event(job="t1", run_id=t1_later, event_type="START", parent=parent, seconds=6),
    ]
    records = [validate_event(e) for e in events]
    store = make_store(kind)
    store.write_batch(records)
    # t1's two runs: one mention, first seen at its first event naming the DAG.
    assert _children(store) == {("ns", "t1"): at(2), ("ns", "t2"): at(4), ("ns", "t3"): at(5)}
    # t2's event deleted: its mention goes.
    assert store.delete_events([records[3].event_id]) == 1
    assert _children(store) == {("ns", "t1"): at(2), ("ns", "t3"): at(5)}
    # t1's first event deleted: its mention stays, first seen at the next one.
    assert store.delete_events([records[1].event_id]) == 1
    assert _children(store) == {("ns", "t1"): at(3), ("ns", "t3"): at(5)}
    # Every event of t1 deleted: its mention goes; t3's stays.
    assert store.delete_events([records[2].event_id, records[5].event_id]) == 2
    assert _children(store) == {("ns", "t3"): at(5)}
