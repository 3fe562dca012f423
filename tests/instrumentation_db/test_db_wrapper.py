"""``lineage-instrument python app.py``: lineage from an app.py with no lineage code in it."""

from __future__ import annotations

import pytest
from conformance import validate_event

from .db_helpers import PG_NAMESPACE, run_instrumented

pytestmark = pytest.mark.postgres


def test_lineage_instrument_records_an_uninstrumented_app(tmp_path, pg_db):
    events = run_instrumented(tmp_path, pg_db)
    for event in events:
        validate_event(event)
    [complete] = [e for e in events if e["eventType"] == "COMPLETE"]
    assert complete["job"] == {
        "namespace": "tests.db.sub",
        "name": "app",
        "facets": complete["job"]["facets"],
    }
    assert sorted(d["name"] for d in complete["inputs"]) == [
        f"{pg_db}.public.customers",
        f"{pg_db}.public.orders",
    ]
    [out] = complete["outputs"]
    assert (out["namespace"], out["name"]) == (PG_NAMESPACE, f"{pg_db}.public.order_report")
    assert set(out["facets"]["columnLineage"]["fields"]) == {"order_id", "customer", "amount"}


def test_disabled_instrumentation_records_nothing(tmp_path, pg_db):
    assert (
        run_instrumented(tmp_path, pg_db, LINEAGE_DISABLED_INSTRUMENTATIONS="sqlite3,psycopg") == []
    )
