"""SecantusDB's tactics for the document backend: what exists only because of that server.

SecantusDB (PyPI ``SecantusDB``) speaks MongoDB's wire protocol and reports version 8.2, so the
backend tells it apart by the ``secantusVersion`` field its ``buildInfo`` adds (mongod has none).
Each tactic below was measured on it; a real mongod needs none of them and runs with
:class:`~lineage_sdk.collector.stores.document_tactics.DocumentTactics`' defaults. Find the
measurements again with ``git log -S'_IN_BATCH = 25'``, ``-S'def _raw_windows'``,
``-S'12 s hinted'`` (docs/design/engine.md, section 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lineage_sdk.collector.stores.document_tactics import DocumentTactics

__all__ = ["SECANTUS", "is_secantus", "tactics_for"]

SECANTUS = DocumentTactics(
    in_batch=25,
    window_rows=1000,
    hint_ranges=False,
    split_match=True,
)
"""SecantusDB's tactics, each with the measurement that justifies it:

* ``in_batch=25``: SecantusDB's cost per ``$in`` value grows with the list (1,000 documents by
  ``_id``: 51/85/172 ms at 20/100/250 values a query; mongod's hardly depends on the length).
  bench_million's lineage d10 over HTTP at 200,000 events, p95 294.9 → 199.3 ms and asOf
  262.2 → 179.5 ms going from 100 to 25 (``91fcfca``; 100 in ``cbf3027``).
* ``window_rows=1000``: a range read bounded above goes in time windows of about a batch, sorted
  here. SecantusDB materialised the whole range for each batch: 200,000 events did not finish in
  20 min; at 20,000 events those reads took 15.3 of 48 s, 0.7 s windowed; 10% retention
  23.1 → 11.7 s (``1c44547``; the last window ends at the bound, ``20bb092``).
* ``hint_ranges=False``: hinted, SecantusDB walks the whole index whatever the filter: a job's
  events by time 12 s hinted, 7 ms not, at 20,000 events; its planner finds the index by itself
  (``3d91729``).
* ``split_match=True``: a predicate beside an ``$in`` (even a range on the index's next field)
  makes SecantusDB scan the collection: 500 jobs' newest events 76 s with it in the first
  ``$match``, 1 s with it in a second (``cbf3027``).
"""


def is_secantus(build_info: Mapping[str, Any]) -> bool:
    """Whether ``buildInfo`` is SecantusDB's: it adds ``secantusVersion``."""
    return "secantusVersion" in build_info


def tactics_for(build_info: Mapping[str, Any]) -> DocumentTactics:
    """The tactics for the server that answered ``buildInfo``."""
    return SECANTUS if is_secantus(build_info) else DocumentTactics()
