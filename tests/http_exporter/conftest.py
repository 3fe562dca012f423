"""The http exporter tests' receiver: :func:`http_recorder.server`."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from http_recorder import server

__all__ = ["server"]
