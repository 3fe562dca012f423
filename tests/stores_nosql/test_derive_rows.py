"""The engine's derivation joins rows exactly as the row types' merge rules say (issue 31).

``derive`` writes the joins out per row type for speed; the backends merge with the generic
rules of :func:`lineage_sdk.collector.backend.merge`. Deriving a whole corpus at once must give
what deriving each event alone and merging the rows by those rules gives, in any order.
"""

from __future__ import annotations

import random
from dataclasses import fields, replace
from typing import Any

from test_backend_answers import RECORDS
from test_forget_rows import corpus

from lineage_sdk.collector.backend import EventRow, Rows, key_of, merge
from lineage_sdk.collector.engine import derive
from lineage_sdk.collector.engine.derive import derive_keyed, record_of
from lineage_sdk.collector.engine.forget import ReadAhead

_TYPES = ("edges", "runs", "columns", "nodes", "mentions")


def _by_key(rows: Rows) -> dict[str, dict[tuple[Any, ...], Any]]:
    return {t: {key_of(r): r for r in getattr(rows, t)} for t in (*_TYPES, "events")}


def _merged_one_by_one(records: list[Any]) -> dict[str, dict[tuple[Any, ...], Any]]:
    """Each event derived alone, the rows joined by the generic rules; events first-wins."""
    out: dict[str, dict[tuple[Any, ...], Any]] = {t: {} for t in (*_TYPES, "events")}
    for record in records:
        for kind, rows in _by_key(derive([record])).items():
            for key, row in rows.items():
                old = out[kind].get(key)
                if kind == "events":
                    out[kind].setdefault(key, row)
                else:
                    out[kind][key] = row if old is None else merge(old, row)
    return out


def test_derive_joins_as_the_merge_rules_in_any_order() -> None:
    whole = _by_key(derive(RECORDS))
    assert all(whole[t] for t in _TYPES), "the corpus must exercise every row type"
    for seed in range(3):
        records = list(RECORDS) + RECORDS[::2]  # redeliveries too
        random.Random(seed).shuffle(records)
        assert _merged_one_by_one(records) == whole
        assert _by_key(derive(records)) == whole


def test_derive_joins_each_key_once_and_counts_an_event_once() -> None:
    # Rows come in no particular order (a backend whose writers lock rows sorts them itself),
    # but each key of each type once: the joins are done.
    rows = derive([*RECORDS, *RECORDS])
    assert len(rows.events) == len({r.event_id for r in RECORDS})
    for name in _TYPES:
        keys = [key_of(r) for r in getattr(rows, name)]
        assert keys and len(keys) == len(set(keys)), name
    # one mention per run and dataset role, not per event: START and COMPLETE name them twice
    runs = {r.run_id for r in RECORDS if r.run_id}
    assert {m.source_id for m in rows.mentions if m.source == "run"} <= runs


def test_derive_keyed_gives_the_rows_of_keys_derive_gives() -> None:
    # ``forget`` derives what remains by key only (the deleted events' share, the events ahead,
    # keys derived again, events written meanwhile), and a run's rows whole from its events:
    # every row type but the events, runs and mentions must be derive's, and of the mentions
    # a parent's ``job`` ones (rows of its key, derivation version 9).
    whole_only = ("events", "runs")
    for records in (list(RECORDS), *(corpus(seed) for seed in range(4))):
        whole = derive(records)
        keyed = derive_keyed([*records, *records[::3]])  # redeliveries too
        for name in (f.name for f in fields(Rows)):
            expected = set() if name in whole_only else set(getattr(whole, name))
            if name == "mentions":
                expected = {m for m in expected if m.source == "job"}
            assert set(getattr(keyed, name)) == expected, name
        assert whole.columns and whole.nodes and any(e.declared for e in whole.edges)
        assert any(m.source == "job" for m in keyed.mentions) or records is not RECORDS


def test_read_ahead_gives_each_events_rows_of_keys() -> None:
    # Retention reads the same events ahead batch after batch; ``forget`` derives each once
    # while it is remembered, and an event known by its id but stored with another text is
    # derived from that text. It keeps of each row its id and its least times (the fields a
    # ``min`` rule joins), which must be those of ``derive_keyed``'s rows of the event alone.
    def each(events: list[EventRow]) -> list[tuple[Any, Any]]:
        out = []
        for event in events:
            rows = derive_keyed([record_of(event)])
            for row in (r for t in _TYPES for r in getattr(rows, t)):
                least = {f.name: getattr(row, f.name) for f in fields(row) if _least(f)}
                out.append(((type(row).__name__, key_of(row)), least))
        return out

    memo = ReadAhead()
    events = list(derive(RECORDS).events)
    for _ in range(2):  # derived, then remembered
        assert sorted(map(repr, memo.least(events))) == sorted(map(repr, each(events)))
        memo.turn()
    forged = [replace(row, json=events[-1 - i].json) for i, row in enumerate(events)]
    assert forged[0].json != events[0].json
    assert sorted(map(repr, memo.least(forged))) == sorted(map(repr, each(forged)))


def _least(f: Any) -> bool:
    return bool(f.metadata.get("merge") == "min")
