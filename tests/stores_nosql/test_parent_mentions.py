"""A run's ``parent`` mention names the jobs of the events that name that parent (derivation
version 8): the parent view finds a root's members from it without reading their runs. On
every backend, and after deletions, it names the jobs whose remaining events name the parent."""

from __future__ import annotations

import pytest
from nosql_events import STORE_KINDS, StoreFactory, run_event

from lineage_sdk.collector.decode import validate_event
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.engine.derive import child_entry, children_of

pytestmark = [pytest.mark.postgres, pytest.mark.mongodb, pytest.mark.neo4j]

DAG_RUN = "0190aaaa-0000-7000-8000-0000000000d0"
TASK_RUN = "0190aaaa-0000-7000-8000-0000000000d1"  # one run id, two jobs' events (both tasks)
DAG = ("ns", "dag")


def _children(store: EngineStore) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """Per mentioning run and source, the jobs each ``parent`` mention of the DAG names."""
    found: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for m in store.backend.mentions("JOB", [DAG], roles=["parent"]):
        found.setdefault((m.source, m.source_id), set()).update(children_of([m]))
    return found


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_parent_mention_names_its_children_and_forgets_a_deleted_one(
    make_store: StoreFactory, kind: str
) -> None:
    parent = (DAG_RUN, *DAG)
    events = [
        run_event(job="dag", run_id=DAG_RUN, event_type="START", seconds=1),
        run_event(job="t1", run_id=TASK_RUN, event_type="START", parent=parent, seconds=2),
        run_event(job="t1", run_id=TASK_RUN, parent=parent, seconds=3),
        run_event(job="t2", run_id=TASK_RUN, parent=parent, seconds=4),
        run_event(job="t3", event_type="START", parent=parent, seconds=5),
    ]
    records = [validate_event(e) for e in events]
    store = make_store(kind)
    store.write_batch(records)
    t3_run = records[4].run_id or ""
    assert _children(store) == {
        ("run", TASK_RUN): {("ns", "t1"), ("ns", "t2")},
        ("run", t3_run): {("ns", "t3")},
    }
    assert child_entry(("ns", "t1")) in next(
        m.detail or frozenset()
        for m in store.backend.mentions("JOB", [DAG], roles=["parent"])
        if m.source_id == TASK_RUN
    )
    # t2's event deleted: the run's mention is derived again from what remains (t1's events).
    assert store.delete_events([records[3].event_id]) == 1
    assert _children(store) == {("run", TASK_RUN): {("ns", "t1")}, ("run", t3_run): {("ns", "t3")}}
    # Every event of the shared run deleted: its mention goes; t3's stays.
    assert store.delete_events([records[1].event_id, records[2].event_id]) == 2
    assert _children(store) == {("run", t3_run): {("ns", "t3")}}
