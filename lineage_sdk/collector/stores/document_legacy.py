"""The layout of the ``document`` store of a release before the engine, read only (issue 31).

That store kept, in one database, for a collection name ``{name}`` (default
``audit_lineage_events``):

* ``{name}``: one document per event, ``{_id: <event id>, raw: "<the event as JSON text>",
  eventTime: <BSON date, the event time cut to the millisecond>, eventTimeRaw: "<the event's
  eventTime text, to the microsecond>", event: {...}, kind, runId, job, datasets, ...}``, with
  the index ``lineage_time`` on ``(eventTime, _id)``;
* derived from it: ``{name}_edges``, ``{name}_nodes``, ``{name}_runs``, ``{name}_adjacency``
  and ``{name}_latest``, each document's ``_id`` a 32-hex-digit digest, or a marker
  (``backfill``, ``deletions``).

Three of those names are also the document backend's (:mod:`.document_backend`:
``{name}_events``, ``_mentions``, ``_edges``, ``_runs``, ``_columns``, ``_nodes``) when both
use one name: ``{name}_edges``, ``{name}_nodes`` and ``{name}_runs``. The backend's ``_id`` is
always a key as JSON text, an array, so it starts with ``[``, which no old ``_id`` does: that is
how :meth:`DocumentPreEngineLayout.drop` tells the old documents of a shared collection from the
new rows (it deletes the string ``_id`` values outside the ``[`` prefix, and the old indexes by
name), while the collections that are the old layout's alone are dropped whole.

:class:`DocumentPreEngineLayout` is what :class:`~lineage_sdk.collector.engine.EngineStore`
copies into the backend's rows at open (its ``earlier``); where it is in that copy it keeps in
``{name}_engine_upgrade``, a collection of its own (neither layout's), dropped last.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from lineage_sdk.collector.records import from_micros, micros, parse_event_time, utc
from lineage_sdk.collector.store import RawEvent
from lineage_sdk.collector.stores.document_connector import DocumentConnector
from lineage_sdk.exceptions import InvalidEventError

__all__ = [
    "OLD_DERIVED",
    "OLD_INDEXES",
    "OLD_SHARED",
    "DocumentPreEngineLayout",
    "old_collections",
]

_log = logging.getLogger(__name__)

#: The old store's collections beside its events, ``{name}_<kind>``.
OLD_DERIVED = ("edges", "adjacency", "nodes", "runs", "latest")
#: Those whose name the document backend also uses for one name (see the module docstring).
OLD_SHARED = ("edges", "nodes", "runs")
#: The old store's indexes on the shared collections, by name.
OLD_INDEXES: Mapping[str, tuple[str, ...]] = {
    "edges": ("lineage_edge_j", "lineage_edge_d"),
    "nodes": ("lineage_node", "lineage_node_ns"),
    "runs": ("lineage_run_job",),
}
#: The ``_id`` of the copy's marker in ``{name}_engine_upgrade``.
_COPIED = "copied"
#: What the copy reads of an old event document.
_RAW_FIELDS = {"raw": 1, "eventTime": 1, "eventTimeRaw": 1}
#: Every old ``_id`` in a shared collection (a string outside the backend's ``[`` prefix).
_OLD_IDS = ({"_id": {"$lt": "["}}, {"_id": {"$gte": "\\"}})


def old_collections(name: str) -> list[str]:
    """Every collection of the old layout for collection name ``name``, the events first."""
    return [name, *(f"{name}_{kind}" for kind in OLD_DERIVED)]


class DocumentPreEngineLayout:
    """The old ``document`` store's events for collection name ``collection_name``, read only,
    in the database of ``connector`` (see the module docstring); implements
    :class:`~lineage_sdk.collector.engine.PreEngineLayout`."""

    def __init__(self, connector: DocumentConnector, collection_name: str) -> None:
        self._connector = connector
        self._name = collection_name

    def _coll(self, name: str) -> Any:
        return self._connector.database[name]

    @property
    def _marker(self) -> Any:
        return self._coll(f"{self._name}_engine_upgrade")

    def count_raw_events(self) -> int:
        """The documents of the old events collection; 0 when it is absent."""
        with self._connector.errors("count old events"):
            return int(self._coll(self._name).count_documents({}))

    def iter_raw_events(
        self, *, after: tuple[datetime, str] | None = None, batch_size: int = 1000
    ) -> Iterator[RawEvent]:
        """The old events after ``after``, ordered by ``(event_time, event_id)`` to the
        microsecond, as the old store read them: one cursor on ``lineage_time`` (to the end, so
        no time windows are needed on any server), each millisecond's events (a BSON date holds
        milliseconds) put in microsecond order from ``eventTimeRaw``. A document without the old
        shape (``raw``, ``eventTime``, ``eventTimeRaw``, a string ``_id``) is skipped with a
        warning."""
        coll = self._coll(self._name)
        match: dict[str, Any] = {}
        if after is not None:
            at = utc(after[0])
            match["eventTime"] = {"$gte": at.replace(microsecond=at.microsecond // 1000 * 1000)}
        with self._connector.errors("read old events"):
            hinted = "lineage_time" in coll.index_information()
            cursor = coll.find(match, _RAW_FIELDS).sort([("eventTime", 1), ("_id", 1)])
            if hinted:
                cursor = cursor.hint("lineage_time")
            try:
                group: list[RawEvent] = []
                group_ms: Any = None
                for doc in cursor.batch_size(batch_size):
                    event = self._event(doc)
                    if event is None:
                        continue
                    if doc["eventTime"] != group_ms:
                        yield from _after(group, after)
                        group, group_ms = [], doc["eventTime"]
                    group.append(event)
                yield from _after(group, after)
            finally:
                cursor.close()

    def _event(self, doc: Mapping[str, Any]) -> RawEvent | None:
        raw, when, text, event_id = (
            doc.get("raw"),
            doc.get("eventTime"),
            doc.get("eventTimeRaw"),
            doc.get("_id"),
        )
        if not (isinstance(raw, str) and isinstance(when, datetime) and isinstance(event_id, str)):
            _log.warning(
                "upgrade of document store %s skips document %r: not an event of the old layout",
                self._name,
                event_id,
            )
            return None
        try:
            at = parse_event_time(text).astimezone(UTC)
        except InvalidEventError:  # not the old store's writing: its millisecond then
            at = utc(when)
        return RawEvent(event_id, at, raw)

    def copied(self) -> tuple[datetime, str] | None:
        with self._connector.errors("read upgrade marker"):
            doc = self._marker.find_one({"_id": _COPIED})
        if doc is None:
            return None
        return from_micros(int(doc["us"])), str(doc["id"])

    def mark_copied(self, position: tuple[datetime, str]) -> None:
        state = {"us": micros(position[0]), "id": position[1], "at": utc(position[0])}
        with self._connector.errors("write upgrade marker"):
            self._marker.update_one({"_id": _COPIED}, {"$set": state}, upsert=True)

    def drop(self) -> None:
        """Remove the whole old layout and nothing else: the collections that are its alone,
        its documents and indexes in the shared ones (dropped too when that leaves them empty
        with no other index), the events collection, then the marker."""
        db = self._connector.database
        with self._connector.errors("drop old layout"):
            for kind in OLD_DERIVED:
                coll = db[f"{self._name}_{kind}"]
                if kind not in OLD_SHARED:
                    coll.drop()
                    continue
                for old in _OLD_IDS:
                    coll.delete_many(old)
                indexes = coll.index_information()
                for index in OLD_INDEXES[kind]:
                    if index in indexes:
                        coll.drop_index(index)
                if set(coll.index_information()) <= {"_id_"} and coll.find_one({}) is None:
                    coll.drop()
            db[self._name].drop()
            self._marker.drop()


def _after(group: list[RawEvent], after: tuple[datetime, str] | None) -> Iterator[RawEvent]:
    """One millisecond's events in order, those after ``after``."""
    group.sort(key=lambda e: e.position)
    return itertools.dropwhile(lambda e: after is not None and e.position <= after, group)
