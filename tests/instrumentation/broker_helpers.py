"""Helpers of the messaging instrumentation tests: the real broker, unique names, captured events.

Kept out of ``conftest.py`` so tests import them from a module of their own (conftest holds fixtures).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pika
import pika.exceptions

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conformance import validate_event
from memory_capture import CapturedEvents
from vhosts import session_vhost

BROKER_URL = session_vhost().url  # this process's private vhost, never the shared "/"

__all__ = ["BROKER_URL", "Captured", "Names", "connect", "validate_event"]


def connect(attempts: int = 20) -> Any:
    """A BlockingConnection, retried: another test may be bouncing the shared broker."""
    last: Exception | None = None
    for _ in range(attempts):
        try:
            return pika.BlockingConnection(pika.URLParameters(BROKER_URL))
        except pika.exceptions.AMQPConnectionError as exc:
            last = exc
            time.sleep(0.5)
    raise RuntimeError(f"broker unavailable: {last}")


@dataclass
class Names:
    exchange: str
    queue: str
    routing_key: str = "orders.created"


class Captured(CapturedEvents):
    def runs(self, job_name: str) -> dict[str, list[dict[str, Any]]]:
        """Events of ``job_name`` grouped by run id, in order."""
        out: dict[str, list[dict[str, Any]]] = {}
        for event in self.events():
            if event["job"]["name"] == job_name:
                out.setdefault(event["run"]["runId"], []).append(event)
        return out
