"""Portability (issue 16, item 6): export, import and rebuild against the real servers.

The engine over every backend: memory, SQLite, PostgreSQL (a database made for this module and
dropped after), SecantusDB (MongoDB wire) and FalkorDB (through its own protocol; see
tests/servers.py). One small corpus with the awkward
cases: two namespaces, a DatasetEvent and a JobEvent, events within one millisecond, a time with an
offset, hostile strings, parent and column-lineage facets.
"""

from __future__ import annotations

import asyncio
import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from nosql_events import (
    BASE_TIME,
    HOSTILE_STRINGS,
    PRODUCER,
    SPEC,
    STORE_KINDS,
    StoreFactory,
    chain,
    column_lineage,
    facet,
    run_event,
    uid,
)
from servers import MongoTarget
from typer.testing import CliRunner

from lineage_sdk.collector.cli import app
from lineage_sdk.collector.decode import validate_event
from lineage_sdk.collector.engine import Engine, EngineStore
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.portability import (
    ImportReport,
    export_events,
    import_events,
    ndjson_lines,
    raw_source,
    rebuild_store,
)
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.store import LineageStoreProtocol
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError, StoreError

pytestmark = [pytest.mark.postgres, pytest.mark.mongodb, pytest.mark.neo4j]


# ------------------------------------------------------------------------------------------ corpus


def _corpus() -> list[dict[str, Any]]:
    events = chain("ns1", 6) + chain("ns2", 3, seconds=100)
    parent = events[0]["run"]["runId"]
    # Three events in one millisecond, written out of order: BSON keeps milliseconds only.
    for micro in (900, 100, 500):
        events.append(
            run_event(
                job="tight", namespace="ns1", seconds=200 + micro / 1e6, outputs=[("ns1", "t")]
            )
        )
    events.append(
        run_event(
            job="child",
            namespace="ns1",
            parent=(parent, "ns1", "j1"),
            inputs=[("ns1", "d6")],
            outputs=[("ns1", "wide")],
            seconds=300,
            dataset_facets={"columnLineage": column_lineage({"c": [("ns1", "d6", "a")]})},
            run_facets={"odd": facet(values=HOSTILE_STRINGS[:10])},
        )
    )
    # Three events at one instant: ordered by id alone.
    events += [run_event(job=f"same{i}", namespace="ns2", seconds=400) for i in range(3)]
    offset = run_event(job="offset", namespace="ns2", outputs=[("ns2", "o")])
    offset["eventTime"] = "2025-03-01T14:00:30.250+02:00"  # 12:00:30.25 UTC: between the chains
    events.append(offset)
    events.append(
        {
            "eventTime": "2025-03-01T12:02:00Z",
            "producer": PRODUCER,
            "schemaURL": SPEC + "DatasetEvent",
            "dataset": {"namespace": "ns2", "name": "declared", "facets": {}},
        }
    )
    events.append(
        {
            "eventTime": "2025-03-01T12:02:01Z",
            "producer": PRODUCER,
            "schemaURL": SPEC + "JobEvent",
            "job": {"namespace": "ns1", "name": "static", "facets": {}},
            "inputs": [{"namespace": "ns1", "name": "d1", "facets": {}}],
            "outputs": [{"namespace": "ns1", "name": "s", "facets": {}}],
        }
    )
    return events


CORPUS = _corpus()
RECORDS = [validate_event(e) for e in CORPUS]
ORDERED = [
    r.event for r in sorted(RECORDS, key=lambda r: (r.event_time.astimezone(UTC), r.event_id))
]
NODES = ["dataset:ns1:d3", "job:ns1:j4", "dataset:ns2:d2", "dataset:ns1:wide"]


def stored(store: Engine) -> dict[str, Any]:
    """The store's raw events: event id -> the event, parsed."""
    return {e.event_id: orjson.loads(e.json) for e in store.iter_raw_events(batch_size=7)}


def answers(store: Any) -> list[Any]:
    """The lineage answers of a few nodes, as comparable data."""
    out = []
    for node in NODES:
        graph = store.lineage(node, depth=10)
        out.append(
            sorted(
                (
                    n.id,
                    n.data.get("latestRun", {}).get("state"),
                    sorted((e.origin, e.destination) for e in n.out_edges),
                )
                for n in graph.nodes.values()
            )
        )
    return out


def export_bytes(store: Engine, **filters: Any) -> bytes:
    buffer = io.BytesIO()
    export_events(store, buffer, batch_size=5, **filters)
    return buffer.getvalue()


def run_import(store: LineageStoreProtocol, data: bytes, **kwargs: Any) -> ImportReport:
    service = LineageCollectorService(LineageManager(LineageConfig(), stores=[store]))
    return asyncio.run(
        import_events(service, ndjson_lines(io.BytesIO(data)), batch_size=4, **kwargs)
    )


# ------------------------------------------------------------------------------------------- tests

KINDS = STORE_KINDS


def test_round_trip_gives_identical_stores_and_answers(make_store: StoreFactory) -> None:
    """Export from each store, import into an empty store of its kind: the same raw events (ids
    and contents) and the same lineage answers; every store exports the same lines in one order;
    importing again finds everything already present."""
    exports: dict[str, list[Any]] = {}
    for kind in KINDS:
        source = make_store(kind)
        source.write_batch(RECORDS[::2])  # two batches, so nothing depends on arrival order
        source.write_batch(RECORDS[1::2])
        data = export_bytes(source)
        lines = data.splitlines()
        exports[kind] = [orjson.loads(line) for line in lines]
        assert exports[kind] == ORDERED, kind  # as received, ordered by (eventTime, id)

        target = make_store(kind)
        report = run_import(target, data)
        assert (report.imported, report.already_present, report.refused) == (len(CORPUS), 0, 0)
        assert stored(target) == stored(source) == {r.event_id: r.event for r in RECORDS}
        assert answers(target) == answers(source), kind

        again = run_import(target, data)
        assert (again.imported, again.already_present, again.refused) == (0, len(CORPUS), 0)
        assert stored(target) == stored(source)
    # (each export equals ORDERED: every store gives the same events in the same order)
    assert len(exports) == len(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_filters_and_positions(make_store: StoreFactory, kind: str) -> None:
    """--namespace (a DatasetEvent by its dataset's), --since (inclusive) / --until (exclusive) to
    the microsecond, and reading on after a position, in every store."""
    store = make_store(kind)
    store.write_batch(RECORDS)

    def ids(**filters: Any) -> list[str]:
        return [e.event_id for e in store.iter_raw_events(batch_size=3, **filters)]

    everything = ids()
    by_id = {r.event_id: r for r in RECORDS}
    assert len(everything) == len(CORPUS)
    assert [e.event_id for e in store.iter_raw_events(batch_size=1)] == everything
    assert [e.event_id for e in store.iter_raw_events(batch_size=2)] == everything

    in_ns2 = ids(namespace="ns2")
    assert in_ns2 == [i for i in everything if _namespace(by_id[i].event) == "ns2"]
    assert "declared" in {by_id[i].event.get("dataset", {}).get("name") for i in in_ns2}
    assert len(in_ns2) == 8
    assert [orjson.loads(line) for line in export_bytes(store, namespace="ns2").splitlines()] == [
        by_id[i].event for i in in_ns2
    ]

    # The middle one of three events in one millisecond: since it, until it.
    middle = BASE_TIME.replace(second=0, minute=3, microsecond=500)
    since = ids(since=middle)
    until = ids(until=middle)
    assert since == [i for i in everything if by_id[i].event_time >= middle]
    assert until == [i for i in everything if by_id[i].event_time < middle]
    assert len(since) + len(until) == len(everything)
    assert ids(since=middle, until=middle.replace(microsecond=501)) == [
        i for i in everything if by_id[i].event_time == middle
    ]
    assert store.count_raw_events(namespace="ns2") == len(in_ns2)
    assert store.count_raw_events(since=middle) == len(since)

    events = list(store.iter_raw_events())
    for cut in (0, 9, len(events) - 1):
        assert ids(after=events[cut].position) == everything[cut + 1 :]

    # Bounded above, as retention and history read (the document store goes window by window,
    # a window's width following the batch size and remembered): every batch size, namespace
    # and start gives the same events as the unbounded read, cut; so does the latest bound
    # there is, after windows that widened over empty years.
    latest = datetime.max.replace(tzinfo=UTC)
    assert ids(until=latest) == ids(until=latest) == everything
    end = events[-3].event_time
    for batch in (1, 2, 50):
        for namespace in (None, "ns2"):
            for cut in (None, 0, 9):
                start = None if cut is None else events[cut].position
                got = store.iter_raw_events(
                    batch_size=batch, namespace=namespace, until=end, after=start
                )
                assert [e.event_id for e in got] == [
                    i
                    for i in everything[0 if cut is None else cut + 1 :]
                    if by_id[i].event_time < end
                    and (namespace is None or _namespace(by_id[i].event) == namespace)
                ], (batch, namespace, cut)
    assert store.stored_event_ids([everything[0], "0" * 32]) == {everything[0]}


def _namespace(event: dict[str, Any]) -> str:
    return (event.get("job") or event["dataset"])["namespace"]


def _config_file(tmp_path: Path, mongo: MongoTarget, backends: list[str], db: Path) -> Path:
    path = tmp_path / f"lineage-{uid()}.toml"
    path.write_text(
        f"""
[lineage.store]
backend = "composite"
backends = {orjson.dumps(backends).decode()}

[lineage.store.sql]
url = "sqlite:///{db}"

[lineage.store.document]
collection_name = "port_{uid()}"

[lineage.connections.default_mongo]
uri = "{mongo.uri}"
database = "lineage_tests"
"""
    )
    return path


def test_import_reports_bad_lines_and_stores_the_good(tmp_path: Path, mongo: MongoTarget) -> None:
    """Each bad line named with its number and reason; the good lines stored (in both stores of
    the composite); a summary; exit code 1. Again: all present, nothing new."""
    good = [orjson.dumps(e) for e in CORPUS[:5]]
    bad_run = dict(CORPUS[5], run={"runId": "not-a-uuid"})
    lines = [
        good[0],
        b"",
        b"{not json",
        good[1],
        orjson.dumps([CORPUS[6]]),
        orjson.dumps(bad_run),
        b"42",
        good[2],
        good[2],  # the same event twice in one file: already present the second time
        good[3],
        good[4],
    ]
    source = tmp_path / "events.ndjson"
    source.write_bytes(b"\n".join(lines) + b"\n")
    config = _config_file(tmp_path, mongo, ["sql", "document"], tmp_path / "import.db")
    runner = CliRunner()
    result = runner.invoke(
        app, ["import", str(source), "--config", str(config), "--batch-size", "2"]
    )
    assert result.exit_code == 1, result.output
    assert "imported 5, already present 1, refused 4" in result.stdout
    assert f"{source}:3: refused: undecodable: body is not UTF-8 JSON" in result.stderr
    assert f"{source}:5: refused: not_an_event: a line must hold one event object" in result.stderr
    assert f"{source}:6: refused: invalid_event: run.runId" in result.stderr
    assert f"{source}:7: refused: not_an_event" in result.stderr
    assert "Traceback" not in result.output

    with LineageManager(_load(config)) as manager:
        for name in ("sql", "document"):
            store = raw_source(manager.stores, name)
            assert sorted(stored(store).values(), key=orjson.dumps) == sorted(
                CORPUS[:5], key=orjson.dumps
            )

    again = runner.invoke(app, ["import", str(source), "--config", str(config)])
    assert again.exit_code == 1
    assert "imported 0, already present 6, refused 4" in again.stdout
    assert "━" not in result.stderr  # no progress bar when stderr is no terminal

    # One store of the composite lost an event: it is imported again (into both), not "present".
    lost = validate_event(CORPUS[0]).event_id
    with LineageManager(_load(config)) as manager:
        sql: Any = raw_source(manager.stores, "sql")
        assert sql.delete_events([lost]) == 1
        assert lost not in stored(sql)
    piped = runner.invoke(app, ["import", "-", "--config", str(config)], input=good[0] + b"\n")
    assert piped.exit_code == 0, piped.output
    assert "imported 1, already present 0, refused 0" in piped.stdout
    with LineageManager(_load(config)) as manager:
        assert lost in stored(raw_source(manager.stores, "sql"))


def _load(path: Path) -> LineageConfig:
    from lineage_sdk.config import load_config

    return load_config(path=path)


def test_export_command_filters_to_a_file(tmp_path: Path) -> None:
    """``export --namespace --since -o FILE`` reads the sql store of a composite, opening only
    it (the document server configured beside it is down); a bad time is a usage error naming
    the option, with no traceback."""
    db = tmp_path / "export.db"
    down = MongoTarget(uri="mongodb://127.0.0.1:9/", kind="down")
    config = _config_file(tmp_path, down, ["sql", "document"], db)
    # the sql store the command opens: what the configuration builds (entry point ``sql``)
    store: Any = raw_source(LineageManager(_load(config)).build(), "sql")
    store.open()
    store.write_batch(RECORDS)
    store.close()
    out = tmp_path / "out.ndjson"
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "export",
            "--config",
            str(config),
            "--namespace",
            "ns1",
            "--since",
            "2025-03-01T12:00:03",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    expected = [
        e
        for e in ORDERED
        if _namespace(e) == "ns1" and validate_event(e).event_time >= BASE_TIME.replace(second=3)
    ]
    assert [orjson.loads(line) for line in out.read_bytes().splitlines()] == expected
    assert f"exported {len(expected)} event(s) from the sql store" in result.stderr

    bad = runner.invoke(app, ["export", "--config", str(config), "--since", "yesterday"])
    assert bad.exit_code == 2
    assert "--since" in bad.output and "ISO-8601" in bad.output
    assert "Traceback" not in bad.output


@pytest.mark.parametrize(
    ("source_kind", "target_kind"),
    [("sqlite", "graph"), ("document", "postgres"), ("memory", "sqlite")],
)
def test_rebuild_interrupted_and_resumed_equals_uninterrupted(
    make_store: StoreFactory, tmp_path: Path, source_kind: str, target_kind: str
) -> None:
    """Rebuild stopped after 7 events, then after 6 more, then run to the end: the checkpoint
    carries it on, and the target ends identical to one rebuilt in one go (and to the source)."""
    source = make_store(source_kind)
    source.write_batch(RECORDS)
    resumed, straight = make_store(target_kind), make_store(target_kind)
    checkpoint = tmp_path / "rebuild.json"

    first = rebuild_store(source, resumed, checkpoint=checkpoint, batch_size=3, limit=7)
    assert (first.copied, first.complete) == (7, False)
    assert checkpoint.exists()
    assert len(stored(resumed)) == 7
    second = rebuild_store(source, resumed, checkpoint=checkpoint, batch_size=4, limit=6)
    assert (second.copied, second.complete, second.total_copied) == (6, False, 13)
    assert second.resumed_from is not None
    done: list[int] = []
    last = rebuild_store(source, resumed, checkpoint=checkpoint, batch_size=5, progress=done.append)
    assert (last.copied, last.complete, last.total_copied) == (len(CORPUS) - 13, True, len(CORPUS))
    assert done[-1] == len(CORPUS)
    assert not checkpoint.exists()

    whole = rebuild_store(source, straight, checkpoint=tmp_path / "straight.json")
    assert (whole.copied, whole.complete) == (len(CORPUS), True)
    assert stored(resumed) == stored(straight) == stored(source)
    assert answers(resumed) == answers(straight)
    if source_kind == "document":  # sql from document: the same answers as sql written directly
        direct = make_store(target_kind)
        direct.write_batch(RECORDS)
        assert answers(resumed) == answers(direct)


def test_rebuild_refuses_a_checkpoint_of_another_pair(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    source, target = make_store("sqlite"), make_store("document")
    source.write_batch(RECORDS)
    checkpoint = tmp_path / "rebuild.json"
    rebuild_store(source, target, checkpoint=checkpoint, limit=3)
    other = make_store("graph")
    with pytest.raises(ConfigError, match="from sql to document"):
        rebuild_store(source, other, checkpoint=checkpoint)
    with pytest.raises(ConfigError, match="other than the source"):
        rebuild_store(source, make_store("sqlite"), checkpoint=tmp_path / "x.json")


def test_rebuild_command_resumes(tmp_path: Path, mongo: MongoTarget) -> None:
    """``rebuild --from document --to sql --stop-after N``, then again: complete, the sql store
    holds every event of the document store."""
    db = tmp_path / "rebuild.db"
    config = _config_file(tmp_path, mongo, ["document", "sql"], db)
    with LineageManager(_load(config)) as manager:
        raw_source(manager.stores, "document").write_batch(RECORDS)  # type: ignore[attr-defined]
    checkpoint = tmp_path / "cp.json"
    runner = CliRunner()
    args = [
        "rebuild",
        "--from",
        "document",
        "--to",
        "sql",
        "--config",
        str(config),
        "--checkpoint",
        str(checkpoint),
    ]
    first = runner.invoke(app, [*args, "--stop-after", "10"])
    assert first.exit_code == 0, first.output
    assert "copied 10 event(s)" in first.stdout and "stopped; resume" in first.stdout
    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    assert f"copied {len(CORPUS) - 10} event(s) (resumed after" in second.stdout
    assert "complete" in second.stdout
    with LineageManager(_load(config)) as manager:
        assert stored(raw_source(manager.stores, "sql")) == {r.event_id: r.event for r in RECORDS}
    wrong = runner.invoke(
        app, ["rebuild", "--from", "graph", "--to", "sql", "--config", str(config)]
    )
    assert wrong.exit_code == 2
    assert "--from" in wrong.output


class PickySqlStore(EngineStore):
    """A real store (the engine over the sql backend on SQLite) that refuses, for good, any
    batch holding a job called ``refused`` (as a store refuses an event it can never hold), and
    is down while ``down`` is set."""

    down = False

    def write_batch(self, records: Any) -> None:
        if self.down:
            raise StoreError(self.name, "database is locked")
        if any(r.job_name == "refused" for r in records):
            raise StoreError(self.name, "value too long for the column", permanent=True)
        super().write_batch(records)


def test_import_isolates_an_event_a_store_refuses_and_stops_on_an_outage(tmp_path: Path) -> None:
    """A permanent refusal costs only that event (its batch is written again one by one, the
    event reported with its line); an unreachable store stops the import naming the line to
    resume from, and running it again finishes it."""
    store = PickySqlStore(SqlBackend(f"sqlite:///{tmp_path}/picky.db"))
    store.open()
    refused_event = run_event(job="refused", namespace="ns1", seconds=5000)
    lines = [orjson.dumps(e) for e in [*CORPUS[:3], refused_event, *CORPUS[3:6]]]
    data = b"\n".join(lines) + b"\n"
    reasons: list[tuple[int, str]] = []
    report = run_import(store, data, on_refused=lambda n, why: reasons.append((n, why)))
    assert (report.imported, report.already_present, report.refused) == (6, 0, 1)
    assert reasons == [(4, "store sql refused the event: value too long for the column")]
    assert set(stored(store)) == {validate_event(e).event_id for e in CORPUS[:6]}

    more = b"\n".join(orjson.dumps(e) for e in CORPUS[6:12]) + b"\n"
    store.down = True
    with pytest.raises(StoreError, match="stopped at line 1: the lines before it are stored"):
        run_import(store, more)
    store.down = False
    assert run_import(store, more).imported == 6
    store.close()


def test_graph_raw_events_over_bolt(bolt_store: EngineStore) -> None:
    """The graph's keyset pages through the official driver over Bolt (small, plain events, one
    per batch: FalkorDB's Bolt limits), in a time window no other test writes to."""
    ns = f"bolt{uid()}"
    window = datetime(2031, 1, 1, tzinfo=UTC)
    offsets = [7.5, 1.25, 3.0, 3.0, 9.0]  # two in one instant: ordered by id
    events = [
        run_event(job=f"j{i}", namespace=ns, seconds=(window - BASE_TIME).total_seconds() + s)
        for i, s in enumerate(offsets)
    ]
    for event in events:
        bolt_store.write_batch([validate_event(event)])
    expected = sorted((validate_event(e) for e in events), key=lambda r: (r.event_time, r.event_id))
    bounds = {"since": window, "until": window.replace(second=10)}
    found = list(bolt_store.iter_raw_events(batch_size=2, **bounds))
    assert [e.event_id for e in found] == [r.event_id for r in expected]
    assert [orjson.loads(e.json) for e in found] == [r.event for r in expected]
    assert bolt_store.count_raw_events(**bounds) == len(events)
    after = list(bolt_store.iter_raw_events(after=found[1].position, batch_size=2, **bounds))
    assert [e.event_id for e in after] == [r.event_id for r in expected[2:]]
    assert bolt_store.stored_event_ids([found[0].event_id, "f" * 32]) == {found[0].event_id}
