"""Fixtures for the ingest tests (the document and graph servers are the session fixtures
``mongo`` and ``falkordb`` of tests/conftest.py), and stores of every kind (sql on SQLite, logging, document on SecantusDB, graph on FalkorDB through its Redis
protocol) behind a :class:`LineageManager`, as ``lineage-collector serve`` and the consumer use
them. Everything is real; nothing is mocked."""

from __future__ import annotations

import sys
from pathlib import Path

# collector_helpers (broker helpers, collector thread), test_models_fast (its event generators)
# and this folder's modules.
_TESTS = Path(__file__).resolve().parents[1]
for _folder in (_TESTS / "collector", _TESTS / "models", Path(__file__).resolve().parent):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))
