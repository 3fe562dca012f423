"""The dataset-identity rules as pure logic: the symlinks canonical name and content-keyed
dataset versions (``marquez_events``). The stores' side is in ``test_api_static``."""

from __future__ import annotations

import uuid
from typing import Any

from lineage_sdk.collector.api.marquez_events import dataset_from_events, dataset_versions
from lineage_sdk.collector.symlinks import canonical, event_aliases

NS, PG = "etl", "postgres://db:5432"


def _links(*identifiers: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "symlinks": {
            "identifiers": [{"namespace": n, "name": m, "type": t} for n, m, t in identifiers]
        }
    }


def test_the_least_table_symlink_is_the_canonical_name():
    both = _links(
        ("hive://b", "t", "TABLE"), ("glue://a", "t", "table"), ("s3a://x", "p", "LOCATION")
    )
    assert canonical("s3://x", "p", both) == ("glue://a", "t")
    assert canonical("s3://x", "p", _links(("s3a://x", "p", "LOCATION"))) == ("s3://x", "p")
    assert canonical("s3://x", "p", {}) == ("s3://x", "p")
    assert canonical("s3://x", "p", {"symlinks": {"identifiers": [{"type": "TABLE"}, 7]}}) == (
        "s3://x",
        "p",
    )


def test_an_event_maps_every_other_name_to_the_canonical_one():
    facets = _links(("hive://m", "db.t", "TABLE"), ("s3a://x", "p", "LOCATION"))
    event = {"outputs": [{"namespace": "s3://x", "name": "p", "facets": facets}], "inputs": []}
    assert event_aliases(event) == {
        ("s3://x", "p"): ("hive://m", "db.t"),
        ("s3a://x", "p"): ("hive://m", "db.t"),
    }


def _write(run: int, at: str, facets: dict[str, Any], *, read: bool = False) -> dict[str, Any]:
    entry = {"namespace": PG, "name": "t", "facets": facets}
    return {
        "eventType": "COMPLETE",
        "eventTime": f"2025-01-01T{at}Z",
        "run": {"runId": str(uuid.UUID(int=run, version=4))},
        "job": {"namespace": NS, "name": "j"},
        "inputs": [entry] if read else [],
        "outputs": [] if read else [entry],
    }


def _schema(*names: str, producer: str = "p") -> dict[str, Any]:
    return {
        "schema": {"_producer": producer, "fields": [{"name": n, "type": "INT"} for n in names]}
    }


def test_versions_are_keyed_on_the_version_facet_else_the_schema_else_nothing():
    nothing = [_write(i, f"0{i}:00:00", {}) for i in range(1, 4)]
    assert len(dataset_versions(PG, "t", nothing)) == 1  # three writing runs, one version
    schemas = [
        _write(1, "01:00:00", _schema("a")),
        _write(2, "02:00:00", _schema("a", producer="other")),  # same fields: same version
        _write(3, "03:00:00", _schema("a", "b")),
        _write(4, "04:00:00", {}),  # no key: the current version
    ]
    versions = dataset_versions(PG, "t", schemas)
    assert [len(v["fields"]) for v in versions] == [2, 1]
    assert versions[0]["createdByRun"]["id"] == str(uuid.UUID(int=3, version=4))
    facet = {"version": {"datasetVersion": "v7"}, **_schema("a")}
    keyed = [_write(1, "01:00:00", facet), _write(2, "02:00:00", _schema("a", "b"))]
    assert len(dataset_versions(PG, "t", keyed)) == 2


def test_reading_an_old_version_does_not_make_it_current():
    v1 = {"version": {"datasetVersion": "v1"}}
    events = [
        _write(1, "01:00:00", v1),
        _write(2, "02:00:00", {"version": {"datasetVersion": "v2"}}),
        _write(3, "03:00:00", v1, read=True),
    ]
    newest = dataset_versions(PG, "t", events)[0]
    assert dataset_from_events(PG, "t", events)["currentVersion"] == newest["version"]
    assert newest["createdByRun"]["id"] == str(uuid.UUID(int=2, version=4))
