"""What the watch passes between its parts: causes, what a batch of events was noticed to say,
and alert rows (one per cause and rule)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

__all__ = [
    "CAUSE_KINDS",
    "Alert",
    "AlertStatus",
    "Beat",
    "Cause",
    "CauseKind",
    "Noticed",
    "SchemaSeen",
    "cause_id",
]

CauseKind = Literal["run_failed", "run_stale", "schema_breaking", "quality_failed"]
CAUSE_KINDS: tuple[CauseKind, ...] = (
    "run_failed",
    "run_stale",
    "schema_breaking",
    "quality_failed",
)
AlertStatus = Literal["pending", "sent", "parked"]
Key = tuple[str, str]

#: The namespace of cause ids (uuid5): a cause's id is a function of what caused it alone.
_CAUSES = uuid.UUID("5b3f8f0e-7c1a-4d2e-9a61-0c9d1e2f3a4b")


def cause_id(kind: CauseKind, *parts: str) -> str:
    """The stable id of a cause: the same cause noticed twice (a redelivered event, a replay,
    two collectors) has the same id, which receivers drop repeats by."""
    return str(uuid.uuid5(_CAUSES, "\x1f".join((kind, *parts))))


@dataclass(frozen=True, slots=True)
class Cause:
    """Something downstream should hear of (see docs/watch.md for each kind's ``data``)."""

    id: str
    kind: CauseKind
    #: The node the cause is about: ``job:<ns>:<name>`` or ``dataset:<ns>:<name>``.
    subject: str
    #: The namespace rules filter on: the job's for a run cause, the dataset's otherwise.
    namespace: str
    #: The causing event's time (aware UTC).
    time: datetime
    #: The CloudEvent's ``data.cause`` (JSON-able).
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SchemaSeen:
    """An output's ``schema`` as one event states it: a candidate schema change, compared with
    the dataset's previous schema by the worker (which needs state a batch does not have)."""

    dataset: Key
    event_id: str
    event_time: datetime
    job: Key | None
    run_id: str | None
    #: Field name -> its type (None: no type stated).
    fields: dict[str, str | None]


@dataclass(frozen=True, slots=True)
class Beat:
    """A live run that sends heartbeats: stale when no event comes for ``interval_s`` x grace."""

    run_id: str
    job: Key
    interval_s: float
    last_event: datetime


@dataclass(frozen=True, slots=True)
class Noticed:
    """What a stored batch says to the watch (:func:`.causes.noticed`)."""

    causes: tuple[Cause, ...] = ()
    schemas: tuple[SchemaSeen, ...] = ()
    beats: tuple[Beat, ...] = ()
    #: Runs that ended (a terminal event): no longer live.
    ended: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.causes or self.schemas or self.beats or self.ended)


@dataclass(frozen=True, slots=True)
class Alert:
    """One cause sent to one rule's receiver: the CloudEvent as sent and its delivery state."""

    id: str
    cause_id: str
    #: The rule's stable key (from its URL; never its secret).
    rule: str
    #: The CloudEvent, structured-mode JSON, exactly as sent.
    body: bytes
    status: AlertStatus
    attempts: int
    first_at: datetime
    next_at: datetime
    last_error: str | None = None
    sent_at: datetime | None = None
