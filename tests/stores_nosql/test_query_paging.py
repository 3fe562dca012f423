"""The stores page their lists themselves and report the whole answer's size (``Page.total``)."""

from __future__ import annotations

import pytest
from nosql_events import records, run_event, uid

pytestmark = [pytest.mark.mongodb, pytest.mark.neo4j]


def _runs(ns: str, job: str, count: int) -> list[dict]:
    """``count`` runs of ``job``, each START then COMPLETE, the n-th starting at 10*n s."""
    events = []
    for n in range(count):
        run_id = f"00000000-0000-4000-8000-{n + 1:012d}"
        events.append(
            run_event(job=job, namespace=ns, event_type="START", run_id=run_id, seconds=10 * n)
        )
        events.append(
            run_event(
                job=job, namespace=ns, event_type="COMPLETE", run_id=run_id, seconds=10 * n + 5
            )
        )
    return events


def test_runs_of_job_pages_newest_first_with_the_total(query_store):
    ns = f"ns-{uid()}"
    query_store.write_batch(records(*_runs(ns, "job", 5)))
    newest_first = [f"00000000-0000-4000-8000-{n:012d}" for n in (5, 4, 3, 2, 1)]
    page = query_store.runs_of_job(ns, "job", limit=2, offset=1)
    assert [r.run_id for r in page] == newest_first[1:3]
    assert page.total == 5
    last = query_store.runs_of_job(ns, "job", limit=2, offset=4)
    assert ([r.run_id for r in last], last.total) == (newest_first[4:], 5)
    past = query_store.runs_of_job(ns, "job", limit=2, offset=7)
    assert (list(past), past.total) == ([], 5)
    assert query_store.runs_of_job(ns, "job").total == 5
    with pytest.raises(ValueError, match="offset"):
        query_store.runs_of_job(ns, "job", offset=-1)


def test_graph_catalog_pages_jobs_datasets_and_namespaces(graph_store):
    ns = f"ns-{uid()}"
    events = [
        run_event(job=f"job{i}", namespace=ns, outputs=[(ns, f"table{i}")], seconds=i)
        for i in range(5)
    ]
    events.append(run_event(job="lonely", namespace=f"{ns}-z"))
    graph_store.write_batch(records(*events))

    jobs = graph_store.jobs(ns, limit=2, offset=1)
    assert [j.name for j in jobs] == ["job1", "job2"] and jobs.total == 5
    assert [j.outputs for j in jobs] == [((ns, "table1"),), ((ns, "table2"),)]
    past = graph_store.jobs(ns, limit=2, offset=5)
    assert (list(past), past.total) == ([], 5)
    datasets = graph_store.datasets(ns, limit=3, offset=3)
    assert (list(datasets), datasets.total) == ([(ns, "table3"), (ns, "table4")], 5)
    namespaces = graph_store.namespaces(limit=1, offset=1)
    assert (list(namespaces), namespaces.total) == ([f"{ns}-z"], 2)
