"""How hard property tests search: the suite must stay within its time budget on CI, and a
release check can search deeper with ``LINEAGE_TEST_EXAMPLES=10 pytest tests/models``."""

from __future__ import annotations

import os

__all__ = ["examples"]

_SCALE = float(os.environ.get("LINEAGE_TEST_EXAMPLES", "1"))


def examples(base: int) -> int:
    """``base`` generated examples, scaled by ``LINEAGE_TEST_EXAMPLES`` (at least one)."""
    return max(1, round(base * _SCALE))
