"""The engine's derivation joins rows exactly as the row types' merge rules say (issue 31).

``derive`` writes the joins out per row type for speed; the backends merge with the generic
rules of :func:`lineage_sdk.collector.backend.merge`. Deriving a whole corpus at once must give
what deriving each event alone and merging the rows by those rules gives, in any order.
"""

from __future__ import annotations

import random
from typing import Any

from test_backend_answers import RECORDS

from lineage_sdk.collector.backend import Rows, key_of, merge
from lineage_sdk.collector.engine import derive

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
