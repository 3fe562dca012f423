"""The suite leaves nothing behind: what it made on the shared servers and in the temp folder,
found at the end of the session (tests/conftest.py fails the run when anything is listed).

What counts as the suite's own is told by names, never by "new since the start": other runs and
people use the same RabbitMQ and PostgreSQL at the same time. Vhosts, databases and schemas of
this session carry its tag (``vhosts.SESSION_TAG``; :func:`suite_name` for PostgreSQL). The
broker's ``/`` vhost has no names of ours, so for it the check compares the product's and the
tests' names (:func:`watched_in_root`) at the start and the end: a queue or exchange that
appeared, or a queue that holds more messages. The temp folder is a private one for the session
(``TMPDIR``, tests/conftest.py), so whatever is left in it is the suite's.

The diff is pure (:func:`find_leftovers`); :func:`take_snapshot` reads the live servers.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from vhosts import SESSION_TAG, SUITE_PREFIX, list_queues, list_vhosts, rabbitmqctl

__all__ = [
    "PG_ADMIN_DSN",
    "Snapshot",
    "disk_usage",
    "find_leftovers",
    "leftover_files",
    "stale_names",
    "suite_name",
    "take_snapshot",
    "watched_in_root",
]

T = TypeVar("T")
PG_ADMIN_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test connect_timeout=5"
_PG_SUITE_PREFIXES = ("lineage_", "test_aio_")  # names the suite gave before it had a tag
_PYTEST_TMP = "pytest-of-"


def suite_name(prefix: str) -> str:
    """A PostgreSQL database or schema name ``<prefix>_<session tag>_<random>``, so the
    session-end check can tell this run's leftovers from other runs' work in progress."""
    return f"{prefix}_{SESSION_TAG}_{secrets.token_hex(4)}"


def watched_in_root(name: str) -> bool:
    """The names in ``/`` the check watches: the product's ``platform.lineage.*`` and the tests'
    own (``test.*``, anything with ``lineage`` in it); other people's queues are theirs."""
    return name.startswith(("platform.lineage", "test.", "test-")) or "lineage" in name


@dataclass(frozen=True)
class Snapshot:
    """What the shared servers hold at one moment (only the parts the check compares)."""

    vhosts: frozenset[str] = frozenset()
    root_queues: Mapping[str, int] = field(default_factory=dict)  # name -> messages, in "/"
    root_exchanges: frozenset[str] = frozenset()
    databases: frozenset[str] = frozenset()
    schemas: frozenset[str] = frozenset()  # in the database "test"
    errors: tuple[str, ...] = ()  # parts that could not be read


def find_leftovers(
    before: Snapshot, after: Snapshot, tag: str, files: Iterable[str] = ()
) -> list[str]:
    """One line per thing this session (``tag``) left: its vhosts and PostgreSQL objects still
    there, what appeared or grew in ``/`` under a watched name, and ``files`` in its temp folder."""
    ours = f"{SUITE_PREFIX}{tag}-"
    found = [f"RabbitMQ vhost {v!r}" for v in sorted(after.vhosts) if v.startswith(ours)]
    for queue, count in sorted(after.root_queues.items()):
        if not watched_in_root(queue):
            continue
        if queue not in before.root_queues:
            found.append(f"RabbitMQ queue {queue!r} in vhost '/' ({count} messages)")
        elif count > before.root_queues[queue]:
            grew = count - before.root_queues[queue]
            found.append(
                f"{grew} messages in RabbitMQ queue {queue!r} in vhost '/' "
                f"({before.root_queues[queue]} at the start, {count} at the end)"
            )
    found += [
        f"RabbitMQ exchange {e!r} in vhost '/'"
        for e in sorted(after.root_exchanges - before.root_exchanges)
        if watched_in_root(e)
    ]
    marker = f"_{tag}_"
    found += [f"PostgreSQL database {d!r}" for d in sorted(after.databases) if marker in d]
    found += [f"PostgreSQL schema {s!r} in 'test'" for s in sorted(after.schemas) if marker in s]
    found += [f"left in the temp folder: {path}" for path in files]
    return found


def stale_names(after: Snapshot, tag: str) -> list[str]:
    """Leftovers of earlier sessions (other tags): told, not failed on, since another run may
    be using them right now."""
    ours = f"{SUITE_PREFIX}{tag}-"
    stale = [v for v in after.vhosts if v.startswith(SUITE_PREFIX) and not v.startswith(ours)]
    stale += [
        d
        for d in after.databases | after.schemas
        if d.startswith(_PG_SUITE_PREFIXES) and f"_{tag}_" not in d
    ]
    return sorted(stale)


def leftover_files(temp_root: Path, limit: int = 50) -> list[str]:
    """Files and folders left in the session's temp folder, deepest-first summarised: each
    top-level entry with its size; pytest's own ``tmp_path`` tree is pytest's business
    (``tmp_path_retention_policy``) and is left out."""
    if not temp_root.is_dir():
        return []
    entries = sorted(p for p in temp_root.iterdir() if not p.name.startswith(_PYTEST_TMP))
    shown = [f"{p} ({disk_usage(p) // 1024} KiB)" for p in entries[:limit]]
    if len(entries) > limit:
        shown.append(f"... and {len(entries) - limit} more in {temp_root}")
    return shown


def disk_usage(path: Path) -> int:
    """Bytes under ``path`` (apparent sizes; what vanishes while it is read is skipped)."""
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    total = 0
    for child in path.rglob("*"):
        with contextlib.suppress(OSError):  # removed while we looked
            total += child.lstat().st_size
    return total


def _root_exchanges() -> frozenset[str]:
    out = rabbitmqctl("list_exchanges", "-q", "--no-table-headers", "-p", "/", "name")
    return frozenset(line for line in out.splitlines() if line)


def _postgres() -> tuple[frozenset[str], frozenset[str]]:
    import psycopg

    with psycopg.connect(PG_ADMIN_DSN) as conn:
        databases = conn.execute("SELECT datname FROM pg_database").fetchall()
        schemas = conn.execute("SELECT nspname FROM pg_namespace").fetchall()
    return frozenset(r[0] for r in databases), frozenset(r[0] for r in schemas)


def take_snapshot() -> Snapshot:
    """Read the shared broker and PostgreSQL, in parallel (each ``rabbitmqctl`` call costs about
    half a second); a server that cannot be read is named in ``errors``, not raised."""
    errors: list[str] = []

    def result(future: Future[T], default: T, what: str) -> T:
        try:
            return future.result()
        except Exception as error:  # the check reports a server it cannot read, never crashes
            errors.append(f"{what}: {type(error).__name__}: {error}")
            return default

    with ThreadPoolExecutor(4) as pool:
        vhosts = pool.submit(list_vhosts)
        queues = pool.submit(list_queues, "/")
        exchanges = pool.submit(_root_exchanges)
        postgres = pool.submit(_postgres)
        empty: frozenset[str] = frozenset()
        no_vhosts: list[str] = []
        no_queues: dict[str, int] = {}
        databases, schemas = result(postgres, (empty, empty), "PostgreSQL")
        found_vhosts = result(vhosts, no_vhosts, "RabbitMQ vhosts")
        found_queues = result(queues, no_queues, "RabbitMQ queues in '/'")
        return Snapshot(
            vhosts=frozenset(found_vhosts),
            root_queues=found_queues,
            root_exchanges=result(exchanges, empty, "RabbitMQ exchanges in '/'"),
            databases=databases,
            schemas=schemas,
            errors=tuple(errors),
        )
