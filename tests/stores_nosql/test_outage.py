"""A server that goes away: writes raise a retryable StoreError quickly, and work again after it
returns, with nothing duplicated. (Dedicated servers: stopping the shared ones would disturb others.)"""

from __future__ import annotations

import pytest
from nosql_events import records, run_event, uid
from servers import FalkorDBServer, SecantusServer, bolt_warmup

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.stores.document_backend import DocumentBackend
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.exceptions import StoreError


@pytest.mark.mongodb
def test_document_store_survives_a_server_restart() -> None:
    server = SecantusServer()
    server.start()
    store = EngineStore(
        DocumentBackend(ConnectionConfig(uri=server.uri, timeout_ms=1000), collection_name="outage")
    )
    try:
        store.open()
        ns = f"o{uid()}"
        first = records(*(run_event(job="j", namespace=ns, seconds=i) for i in range(5)))
        store.write_batch(first)
        server.stop()
        with pytest.raises(StoreError) as info:
            store.write_batch(records(run_event(job="k", namespace=ns)))
        assert not info.value.permanent and info.value.store == "document"
        with pytest.raises(StoreError):
            store.check()
        server.start()
        later = records(
            run_event(job="k", namespace=ns),
            *(run_event(job="l", namespace=ns, seconds=i) for i in range(3)),
        )
        store.write_batch(first + later)  # the collector retries the whole batch: no duplicates
        assert store.count_events() == 9
    finally:
        store.close()
        server.close()


@pytest.mark.neo4j
def test_graph_store_over_bolt_survives_a_server_restart() -> None:
    server = FalkorDBServer(persistent=True)
    server.start()
    store = EngineStore(GraphBackend(ConnectionConfig(uri=server.bolt_uri, timeout_ms=1000)))
    try:
        store.open()
        ns = f"o{uid()}"
        run = "0c0c0c0c-0000-4000-8000-000000000001"
        start = run_event(job="j", namespace=ns, run_id=run, event_type="START", seconds=0)
        done = run_event(job="j", namespace=ns, run_id=run, event_type="COMPLETE", seconds=5)
        store.write_batch(records(start))
        server.stop()
        with pytest.raises(StoreError) as info:
            store.write_batch(records(done))
        assert not info.value.permanent and info.value.store == "graph"
        server.start()  # same ports, data kept in its append-only file
        bolt_warmup("127.0.0.1", server.bolt_port)  # FalkorDB quirk, see tests/servers.py
        for rec in records(start, done):
            store.write_batch([rec])
        assert store.events_of_run(run) == [start, done]
        (summary,) = store.runs_of_job(ns, "j")
        assert summary.state == "COMPLETE"
    finally:
        store.close()
        server.close()
