"""How the document backend asks a server its questions: the seam for per-server tactics.

Its own module so that a server's module (:mod:`.secantus`) and the backend both import it and
neither imports the other (the sibling modules of ``stores`` form no import cycle).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DocumentTactics"]


@dataclass(frozen=True, slots=True)
class DocumentTactics:
    """How the document backend asks a server its questions. The defaults suit a real mongod;
    a server that needs other ways (SecantusDB: :data:`.secantus.SECANTUS`) says why in its
    module."""

    #: The most values one ``$in`` lists (more go in further queries).
    in_batch: int = 1000
    #: Read an event range in time windows aiming at this many events each, sorted in Python;
    #: None reads it with one sorted cursor.
    window_rows: int | None = None
    #: Hint the time index on a range read of every namespace.
    hint_ranges: bool = True
    #: Put the predicates beside an ``$in`` or a range in a second ``$match`` stage.
    split_match: bool = False
