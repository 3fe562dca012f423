"""The on-disk spool: where events wait once the memory buffer is full and the broker is away.

Layout: ``<spool_dir>/<instance>/`` per live process, locked with ``flock`` on ``.lock`` so two
processes never share one. A process adopts the directories of dead processes (their lock is
free) at start, so a restarted service replays what its predecessor left, but only those whose
``destination.json`` names its own destination (_destination.py): events never reach a broker,
vhost, user or exchange they were not written for. A directory without that record (the layout
of older versions) is never adopted: nothing in its events proves where they were meant to go; it
is named in one warning, with the command that replays it on purpose
(``python -m lineage_exporters.rabbitmq.replay``). An instance directory is made under a hidden
name, locked and labelled, and only then renamed into place, so no other process ever sees it
unlocked or unlabelled. Inside, append-only
segment files named ``<seq>-<sub>.seg`` are replayed in (seq, sub) order; ``sub`` lets a segment
be placed *before* the unread ones (memory contents spilled at shutdown are older than them).

Record: ``b"LSP1"``, meta length, body length, CRC-32 of meta+body (big-endian u32 each), then
meta (a JSON array of the message's routing fields) and body. A torn tail left by a crash fails
the length or CRC check and ends that segment's replay.

fsync policy: data is written with one ``write`` per export call (so a killed process loses
nothing the kernel has), fsynced when a segment is sealed, at flush/shutdown, and within
``fsync_interval_s`` of being written (the exporter's ``spool_fsync_interval_ms``, 250 ms by
default), so a power loss costs at most that much of what reached the spool.

Trust: directories are created 0700 and files 0600 whatever the umask. A process adopts only
instance directories owned by its own uid that nobody else may write to (not a symlink, no
group/other write bit), under a root that is ours (or root's) and not writable by others, and
only regular segment files owned by its uid. Anything else is left where it is, with one warning:
a segment planted by another user is never published.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import stat
import struct
import tempfile
import threading
import time
import uuid
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from lineage_exporters.rabbitmq._destination import (
    RECORD_NAME,
    Destination,
    Unreadable,
    read_destination,
    write_destination,
)
from lineage_exporters.rabbitmq._messages import OutboundMessage

__all__ = [
    "Spool",
    "default_spool_root",
    "private_fallback_dir",
    "unlabelled_instances",
    "warn_unlabelled",
]

_LOG = logging.getLogger("lineage_exporters.rabbitmq")
_HEADER = struct.Struct(">4sIII")
_MAGIC = b"LSP1"
_MIDDLE_SUB = 1 << 30
_SUFFIX = ".seg"
_STAGING = ".new"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
SegmentKey = tuple[int, int]
_WARNED: set[Path] = set()  # folders already named in the old-layout warning by this process
_WARNED_LOCK = threading.Lock()


@dataclass(slots=True)
class _Segment:
    key: SegmentKey
    path: Path
    size: int
    read: bool = False  # handed to the publisher; deleted once ``outstanding`` reaches 0
    outstanding: int = 0


def _make_private_dirs(path: Path) -> None:
    """Create ``path`` and any missing parents 0700 (exactly, whatever the umask); tighten
    ``path`` itself to 0700 if it exists and is ours."""
    missing: list[Path] = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=0o700)
            os.chmod(directory, 0o700)
    info = os.stat(path)
    if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)


def _trusted_dir(info: os.stat_result, *, owners: tuple[int, ...]) -> bool:
    """A directory owned by one of ``owners`` that nobody else may write to."""
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid in owners
        and not stat.S_IMODE(info.st_mode) & (stat.S_IWGRP | stat.S_IWOTH)
    )


def private_fallback_dir() -> Path:
    """A spool root when there is no home or cache directory: ``<tmp>/lineage-sdk-<uid>``,
    created 0700 and verified to be a real directory of ours that only we can use; if another
    user holds that name (or it is a symlink), a fresh ``mkdtemp`` directory instead."""
    uid = os.getuid()
    path = Path(tempfile.gettempdir()) / f"lineage-sdk-{uid}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
        os.chmod(path, 0o700)
    try:
        info = os.lstat(path)
        if (
            stat.S_ISDIR(info.st_mode)
            and info.st_uid == uid
            and not stat.S_IMODE(info.st_mode) & 0o077
        ):
            return path
    except OSError:
        pass
    _LOG.warning(
        "lineage RabbitMQ spool: %s is not a private directory of this user; using a fresh "
        "temporary directory instead (events spooled there are replayed only by this process)",
        path,
    )
    return Path(tempfile.mkdtemp(prefix=f"lineage-sdk-{uid}-"))


def default_spool_root(leaf: str) -> Path:
    """``$XDG_CACHE_HOME`` or ``~/.cache``, then ``lineage-sdk/rabbitmq-spool/<leaf>``; the
    private fallback when there is no usable home directory."""
    base: Path | None = None
    cache = os.environ.get("XDG_CACHE_HOME")
    if cache and Path(cache).is_absolute():
        base = Path(cache)
    else:
        try:
            home = Path.home()
        except (RuntimeError, KeyError):
            home = None
        if home is not None and home.is_dir() and os.access(home, os.W_OK | os.X_OK):
            base = home / ".cache"
    if base is None:
        base = private_fallback_dir()
    return base / "lineage-sdk" / "rabbitmq-spool" / leaf


def _name(key: SegmentKey) -> str:
    return f"{key[0]:016d}-{key[1]:010d}{_SUFFIX}"


def _parse_name(name: str) -> SegmentKey | None:
    if not name.endswith(_SUFFIX):
        return None
    try:
        seq, sub = name[: -len(_SUFFIX)].split("-")
        return int(seq), int(sub)
    except ValueError:
        return None


def _has_segments(path: Path) -> bool:
    return any(_parse_name(p.name) for p in path.iterdir())


def _remove_instance(path: Path) -> None:
    """Delete an instance directory that holds no segment (what is left is ours to remove)."""
    for leftover in path.iterdir():
        leftover.unlink(missing_ok=True)
    path.rmdir()


@contextlib.contextmanager
def _dead_instance(path: Path) -> Iterator[bool]:
    """Hold the lock of instance directory ``path`` for the block; False if its owner is alive
    (or the lock cannot be opened), so the block must leave it alone."""
    try:
        fd = os.open(path / ".lock", os.O_CREAT | os.O_RDWR | _NOFOLLOW, 0o600)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _instance_dirs(root: Path, untrusted: list[str], skip: Path | None = None) -> list[Path]:
    """Trusted instance directories in ``root`` (not ``skip``), those with the oldest segments
    first; what another user could have written is named in ``untrusted`` instead."""
    uid = os.getuid()
    if not _trusted_dir(os.stat(root), owners=(uid, 0)):
        untrusted.append(f"{root} (writable by others, or not ours)")
        return []
    found: list[tuple[float, Path]] = []
    for path in root.iterdir():
        if path == skip or path.name.startswith("."):
            continue  # an instance being made (staging): locked by its maker
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) and not stat.S_ISLNK(info.st_mode):
            continue
        if not _trusted_dir(info, owners=(uid,)):
            untrusted.append(path.name)
            continue
        try:
            segs = sorted(p for p in path.iterdir() if _parse_name(p.name))
            mtime = segs[0].stat().st_mtime if segs else 0.0
        except OSError:
            continue
        found.append((mtime, path))
    return [p for _, p in sorted(found)]


def unlabelled_instances(root: Path, *, claim_for: Destination | None = None) -> list[Path]:
    """Instance directories of dead processes in ``root`` that hold segments but no destination
    record (the old layout). With ``claim_for``, each is labelled with that destination (under
    its lock), so an exporter with that destination adopts it: the replay command's one step."""
    try:
        candidates = _instance_dirs(root, []) if root.is_dir() else []
    except OSError:
        return []
    found: list[Path] = []
    for path in candidates:
        with _dead_instance(path) as dead:
            try:
                if dead and read_destination(path) is None and _has_segments(path):
                    if claim_for is not None:
                        write_destination(path, claim_for)
                    found.append(path)
            except OSError as exc:
                _LOG.warning("lineage RabbitMQ spool cannot read or label %s: %s", path, exc)
    return found


def warn_unlabelled(root: Path, count: int) -> None:
    """The one warning (per folder and process) about spools of the old layout in ``root``."""
    with _WARNED_LOCK:
        if root in _WARNED:
            return
        _WARNED.add(root)
    _LOG.warning(
        "lineage RabbitMQ spool: %d spool folder(s) in %s were written by an older version that "
        "did not record their broker, vhost, user and exchange, so they are not published (they "
        "may belong to another broker or tenant). To deliver them, run `python -m "
        "lineage_exporters.rabbitmq.replay %s` with the configuration of the application that "
        "wrote them; it publishes them to the destination that configuration names",
        count,
        root,
        root,
    )


def encode_record(msg: OutboundMessage) -> bytes:
    """One spool record for ``msg``."""
    meta = orjson.dumps(
        [
            msg.routing_key,
            msg.message_id,
            msg.content_type,
            msg.event_type,
            msg.schema_url,
            msg.producer,
            msg.event_count,
            msg.event_ids,
        ]
    )
    crc = zlib.crc32(msg.body, zlib.crc32(meta))
    return _HEADER.pack(_MAGIC, len(meta), len(msg.body), crc) + meta + msg.body


def decode_records(data: bytes, key: SegmentKey) -> tuple[list[OutboundMessage], bool]:
    """Records of one segment's bytes; the flag is False when a torn or corrupt tail was cut."""
    out: list[OutboundMessage] = []
    pos, end = 0, len(data)
    while pos < end:
        if end - pos < _HEADER.size:
            return out, False
        magic, meta_len, body_len, crc = _HEADER.unpack_from(data, pos)
        start = pos + _HEADER.size
        stop = start + meta_len + body_len
        if magic != _MAGIC or stop > end:
            return out, False
        meta, body = data[start : start + meta_len], data[start + meta_len : stop]
        if zlib.crc32(body, zlib.crc32(meta)) != crc:
            return out, False
        try:
            rk, mid, ct, et, su, pr, count, ids = orjson.loads(meta)
            out.append(
                OutboundMessage(
                    str(rk),
                    str(mid),
                    str(ct),
                    str(et),
                    str(su),
                    str(pr),
                    int(count),
                    ids if ids is None else str(ids),
                    body,
                    key,
                )
            )
        except (orjson.JSONDecodeError, TypeError, ValueError):
            return out, False
        pos = stop
    return out, True


class Spool:
    """A size-capped FIFO of messages on disk, safe to use from the worker and the I/O thread.

    Never raises: if the directory cannot be used, the spool reports itself unavailable (every
    append is refused, so the exporter counts drops) after one clear log line.
    """

    def __init__(
        self,
        root: Path,
        max_bytes: int,
        *,
        destination: Destination,
        segment_bytes: int | None = None,
        fsync_interval_s: float = 0.25,
    ) -> None:
        self.root = root
        self.destination = destination
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes or max(64 << 10, min(8 << 20, max_bytes // 8))
        self._fsync_interval = fsync_interval_s
        self._lock = threading.Lock()
        self._segments: dict[SegmentKey, _Segment] = {}
        self._next_seq = 1 << 40
        self._active: _Segment | None = None
        self._fd: int | None = None
        self._dirty_since: float | None = None  # first write not yet fsynced
        self._lock_fd: int | None = None
        self.dir: Path | None = None
        self.available = False
        self.corrupt_segments = 0
        if max_bytes <= 0:
            return
        try:
            self._open()
            self.available = True
        except OSError as exc:
            _LOG.error(
                "lineage RabbitMQ spool directory %s is not usable (%s); events that do not "
                "fit in memory while the broker is away will be dropped",
                root,
                exc,
            )

    # -- set-up -------------------------------------------------------------------------------

    def _open(self) -> None:
        _make_private_dirs(self.root)
        name = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        staging = self.root / f".{name}{_STAGING}"
        staging.mkdir(mode=0o700)
        os.chmod(staging, 0o700)
        self._lock_fd = self._create_file(staging / ".lock", os.O_RDWR)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        write_destination(staging, self.destination)
        self.dir = self.root / name
        os.rename(staging, self.dir)  # the lock and the record come with it
        self._untrusted: list[str] = []
        self._unlabelled = 0
        self._foreign = 0
        for orphan in self._orphans():
            self._adopt(orphan)
        if self._untrusted:
            _LOG.warning(
                "lineage RabbitMQ spool left %d item(s) in %s untouched because another user "
                "could have written them (owner or permissions): %s",
                len(self._untrusted),
                self.root,
                ", ".join(self._untrusted[:5]) + (" ..." if len(self._untrusted) > 5 else ""),
            )
        if self._unlabelled:
            warn_unlabelled(self.root, self._unlabelled)
        if self._foreign:
            _LOG.info(
                "lineage RabbitMQ spool left %d spool folder(s) in %s alone: they were written "
                "for another destination than %s, and an exporter with theirs replays them",
                self._foreign,
                self.root,
                self.destination.describe(),
            )

    @staticmethod
    def _create_file(path: Path, flags: int) -> int:
        """Open ``path`` for writing, created 0600 whatever the umask; never through a symlink."""
        fd = os.open(path, os.O_CREAT | flags | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.fchmod(fd, 0o600)
        except OSError:
            os.close(fd)
            raise
        return fd

    def _orphans(self) -> list[Path]:
        """Trusted instance directories of other processes, oldest segments first; stale
        staging directories (a process died while making its own) are removed."""
        for path in self.root.glob(f".*{_STAGING}"):
            if path != self.dir and path.is_dir() and not path.is_symlink():
                with _dead_instance(path) as dead, contextlib.suppress(OSError):
                    if dead and not _has_segments(path):
                        _remove_instance(path)
        return _instance_dirs(self.root, self._untrusted, skip=self.dir)

    def _adopt(self, path: Path) -> None:
        """Move a dead process's segments into this spool, in their order, before anything new:
        only if its record names our destination, and only regular files of our own uid
        (anything else stays where it is)."""
        with _dead_instance(path) as dead:
            if dead:
                try:
                    self._adopt_locked(path)
                except OSError as exc:
                    _LOG.warning("lineage RabbitMQ spool could not adopt %s: %s", path, exc)

    def _adopt_locked(self, path: Path) -> None:
        assert self.dir is not None
        if not _has_segments(path):
            _remove_instance(path)  # nothing to publish: an empty leftover of any destination
            return
        record = read_destination(path)
        if record is None:
            self._unlabelled += 1
            return
        if isinstance(record, Unreadable):
            self._untrusted.append(f"{path.name}/{RECORD_NAME}")
            return
        if record != self.destination:
            self._foreign += 1
            return
        uid = os.getuid()
        keyed: list[tuple[SegmentKey, Path]] = []
        kept = 0
        for p in path.iterdir():
            k = _parse_name(p.name)
            if k is None:
                continue
            info = os.lstat(p)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != uid:
                self._untrusted.append(f"{path.name}/{p.name}")
                kept += 1
                continue
            keyed.append((k, p))
        for _, src in sorted(keyed):
            key = (self._next_seq, _MIDDLE_SUB)
            self._next_seq += 1
            dst = self.dir / _name(key)
            os.replace(src, dst)
            self._segments[key] = _Segment(key, dst, dst.stat().st_size)
        if not kept:
            _remove_instance(path)
        if keyed:
            _LOG.info(
                "lineage RabbitMQ spool adopted %d segment(s) left by a previous process "
                "in %s; they are replayed first",
                len(keyed),
                path,
            )

    # -- state --------------------------------------------------------------------------------

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments.values())

    def has_unread(self) -> bool:
        """True while some segment has not been handed to the publisher yet."""
        with self._lock:
            return any(not s.read and s.size > 0 for s in self._segments.values())

    # -- writing (worker thread, or shutdown) -------------------------------------------------

    def append(self, messages: Sequence[OutboundMessage]) -> int:
        """Append ``messages`` at the tail; returns how many fit (a prefix, to keep the order)."""
        if not self.available or not messages:
            return 0
        with self._lock:
            total = sum(s.size for s in self._segments.values())
            chunks: list[bytes] = []
            accepted = 0
            try:
                for msg in messages:
                    rec = encode_record(msg)
                    if total + len(rec) > self.max_bytes:
                        break
                    seg = self._writable(len(rec), chunks)
                    chunks.append(rec)
                    seg.size += len(rec)
                    total += len(rec)
                    accepted += 1
                self._write(chunks)
            except OSError as exc:
                _LOG.error("lineage RabbitMQ spool write failed in %s: %s", self.dir, exc)
                self.available = False
                return 0
            try:
                self._maybe_fsync()
            except OSError as exc:  # written but not synced: still in the kernel's hands
                _LOG.warning("lineage RabbitMQ spool cannot sync %s: %s", self.dir, exc)
            return accepted

    def _writable(self, grow: int, pending: list[bytes]) -> _Segment:
        """The active segment, sealing it and starting a new one when it would grow too big."""
        seg = self._active
        if seg is not None and seg.size > 0 and seg.size + grow > self.segment_bytes:
            self._write(pending)
            pending.clear()
            self._seal()
            seg = None
        if seg is None:
            assert self.dir is not None
            key = (self._next_seq, _MIDDLE_SUB)
            self._next_seq += 1
            seg = _Segment(key, self.dir / _name(key), 0)
            self._fd = self._create_file(seg.path, os.O_WRONLY | os.O_APPEND)
            self._segments[key] = seg
            self._active = seg
        return seg

    def _write(self, chunks: list[bytes]) -> None:
        if not chunks or self._fd is None:
            return
        data = memoryview(b"".join(chunks))
        while data:
            n = os.write(self._fd, data)
            data = data[n:]
        if self._dirty_since is None:
            self._dirty_since = time.monotonic()

    def _seal(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
        self._fd = None
        self._active = None
        self._dirty_since = None

    def _maybe_fsync(self, slack: float = 0.0) -> None:
        """fsync if the oldest unsynced write would pass the interval within ``slack`` seconds."""
        since = self._dirty_since
        due = since is not None and time.monotonic() + slack >= since + self._fsync_interval
        if due and self._fd is not None:
            os.fsync(self._fd)
            self._dirty_since = None

    def sync_if_due(self, slack: float = 0.0) -> None:
        """fsync what would otherwise stay unsynced past the interval before the next call, which
        comes ``slack`` seconds later (the exporter's timer): nothing written waits longer."""
        with self._lock:
            try:
                self._maybe_fsync(slack)
            except OSError as exc:
                _LOG.error("lineage RabbitMQ spool cannot sync %s: %s", self.dir, exc)

    def sync(self) -> None:
        """fsync what was written; called by flush, shutdown and the I/O thread's timer."""
        with self._lock:
            if self._dirty_since is not None and self._fd is not None:
                with contextlib.suppress(OSError):
                    os.fsync(self._fd)
                self._dirty_since = None

    def spill_front(self, messages: Sequence[OutboundMessage]) -> bool:
        """Write ``messages`` as one segment placed before every unread one; all or nothing.

        Used when memory is emptied to disk (flush while the broker is away, shutdown): the
        memory holds everything older than the unread segments, including the unconfirmed rest
        of segments already handed out, so those segments are deleted once this one is synced.
        """
        if not messages:
            return True
        if not self.available:
            return False
        with self._lock:
            handed = [s for s in self._segments.values() if s.read]
            unread = [s.key for s in self._segments.values() if not s.read]
            budget = self.max_bytes - sum(s.size for s in self._segments.values() if not s.read)
            data = b"".join(encode_record(m) for m in messages)
            if len(data) > budget:
                return False
            if unread:
                seq = min(unread)[0]
                subs = [k[1] for k in self._segments if k[0] == seq]
                key = (seq, min(subs) - 1)
            else:
                key = (self._next_seq, _MIDDLE_SUB)
                self._next_seq += 1
            assert self.dir is not None
            path = self.dir / _name(key)
            try:
                fd = self._create_file(path, os.O_WRONLY | os.O_TRUNC)
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                _LOG.error("lineage RabbitMQ spool write failed in %s: %s", self.dir, exc)
                path.unlink(missing_ok=True)
                return False
            self._segments[key] = _Segment(key, path, len(data))
            for seg in handed:
                self._delete(seg)
            return True

    # -- reading (I/O thread) -----------------------------------------------------------------

    def read_next(self) -> list[OutboundMessage] | None:
        """The messages of the oldest unread segment (sealing the active one if need be)."""
        while True:
            with self._lock:
                unread = sorted(k for k, s in self._segments.items() if not s.read)
                if not unread:
                    return None
                seg = self._segments[unread[0]]
                if seg is self._active:
                    try:
                        self._seal()
                    except OSError as exc:
                        _LOG.error("lineage RabbitMQ spool cannot seal %s: %s", seg.path, exc)
                        self.available = False
                seg.read = True
            try:
                data = seg.path.read_bytes()
            except OSError as exc:
                _LOG.error("lineage RabbitMQ spool cannot read %s: %s", seg.path, exc)
                data = b""
            messages, clean = decode_records(data, seg.key)
            if not clean:
                self.corrupt_segments += 1
                _LOG.warning(
                    "lineage RabbitMQ spool segment %s ends with a torn or corrupt record "
                    "(a crash mid-write); %d record(s) before it are replayed",
                    seg.path.name,
                    len(messages),
                )
            with self._lock:
                seg.outstanding = len(messages)
                if not messages:
                    self._delete(seg)
                    continue
            return messages

    def release(self, key: SegmentKey, count: int) -> None:
        """``count`` messages read from segment ``key`` were confirmed; delete it when all were."""
        with self._lock:
            seg = self._segments.get(key)
            if seg is None:
                return
            seg.outstanding -= count
            if seg.outstanding <= 0 and seg.read:
                self._delete(seg)

    def _delete(self, seg: _Segment) -> None:
        self._segments.pop(seg.key, None)
        with contextlib.suppress(OSError):
            seg.path.unlink(missing_ok=True)

    # -- end ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Sync, release the lock, and remove the directory if nothing is left in it."""
        with self._lock:
            try:
                if self._fd is not None:
                    self._seal()
            except OSError as exc:
                _LOG.error("lineage RabbitMQ spool cannot sync %s: %s", self.dir, exc)
            for seg in list(self._segments.values()):
                if seg.size == 0:
                    self._delete(seg)
            if self.dir is not None and not self._segments:
                with contextlib.suppress(OSError):
                    (self.dir / RECORD_NAME).unlink(missing_ok=True)
                    (self.dir / ".lock").unlink(missing_ok=True)
                    self.dir.rmdir()
            if self._lock_fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._lock_fd)
                self._lock_fd = None
            self.available = False

    def abandon_after_fork(self) -> None:
        """In a forked child: forget the parent's spool without touching its files or lock."""
        with contextlib.suppress(OSError):
            if self._fd is not None:
                os.close(self._fd)
            if self._lock_fd is not None:
                os.close(self._lock_fd)
        self._fd = self._lock_fd = None
        self._segments.clear()
        self._active = None
        self.available = False
