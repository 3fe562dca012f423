"""The on-disk spool, on real files: order, caps, deletion on confirm, torn tails, adoption."""

from __future__ import annotations

import os
from pathlib import Path

from rabbitmq_support import DEST, make_events

from lineage_exporters.rabbitmq._messages import OutboundMessage, build_messages
from lineage_exporters.rabbitmq._spool import Spool, encode_record


def _messages(n: int, offset: int = 0) -> list[OutboundMessage]:
    return build_messages(make_events(n + offset)[offset:], 1)


def _read_all(spool: Spool) -> list[OutboundMessage]:
    out: list[OutboundMessage] = []
    while (batch := spool.read_next()) is not None:
        out.extend(batch)
    return out


def _ids(messages: list[OutboundMessage]) -> list[str]:
    return [m.message_id for m in messages]


def test_append_then_read_back_in_order_across_segments(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 10 << 20, destination=DEST, segment_bytes=4096)
    msgs = _messages(60)
    assert spool.append(msgs[:30]) == 30
    assert spool.append(msgs[30:]) == 30
    assert spool.has_unread()
    assert spool.dir is not None and len(list(spool.dir.glob("*.seg"))) > 2
    back = _read_all(spool)
    assert _ids(back) == _ids(msgs)
    assert [m.body for m in back] == [m.body for m in msgs]
    assert back[0].routing_key == msgs[0].routing_key and back[0].event_count == 1
    assert not spool.has_unread()
    spool.close()


def test_segments_are_deleted_once_every_message_is_confirmed(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 10 << 20, destination=DEST)
    spool.append(_messages(10))
    batch = spool.read_next()
    assert batch is not None and batch[0].segment is not None
    assert spool.total_bytes > 0
    spool.release(batch[0].segment, 9)
    assert spool.total_bytes > 0
    spool.release(batch[0].segment, 1)
    assert spool.total_bytes == 0
    assert spool.dir is not None and not list(spool.dir.glob("*.seg"))
    spool.close()
    assert not spool.dir.exists()  # an empty spool leaves nothing behind


def test_size_cap_accepts_a_prefix(tmp_path: Path) -> None:
    msgs = _messages(20)
    cap = sum(len(encode_record(m)) for m in msgs[:7]) + 10
    spool = Spool(tmp_path, cap, destination=DEST)
    assert spool.append(msgs) == 7
    assert spool.append(msgs[7:]) == 0
    assert _ids(_read_all(spool)) == _ids(msgs[:7])
    spool.close()


def test_torn_tail_is_cut_and_the_rest_replays(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 10 << 20, destination=DEST)
    msgs = _messages(5)
    spool.append(msgs)
    assert spool.dir is not None
    (seg,) = spool.dir.glob("*.seg")
    spool.close()
    with seg.open("r+b") as f:  # a crash in the middle of the last write
        f.truncate(seg.stat().st_size - 7)
    again = Spool(tmp_path, 10 << 20, destination=DEST)
    assert _ids(_read_all(again)) == _ids(msgs[:4])
    assert again.corrupt_segments == 1
    again.close()


def test_a_new_process_adopts_a_dead_ones_spool_first(tmp_path: Path) -> None:
    old = Spool(tmp_path, 10 << 20, destination=DEST, segment_bytes=4096)
    first = _messages(40)
    old.append(first)
    old.close()  # lock released, files kept: what a killed process leaves
    new = Spool(tmp_path, 10 << 20, destination=DEST)
    later = _messages(3, offset=40)
    new.append(later)
    assert _ids(_read_all(new)) == _ids(first) + _ids(later)
    assert new.dir is not None
    assert [p for p in tmp_path.iterdir() if p != new.dir] == []
    new.close()


def test_a_live_spool_is_not_adopted(tmp_path: Path) -> None:
    alive = Spool(tmp_path, 10 << 20, destination=DEST)
    alive.append(_messages(3))
    other = Spool(tmp_path, 10 << 20, destination=DEST)
    assert other.read_next() is None
    assert alive.read_next() is not None
    other.close()
    alive.close()


def test_spill_front_goes_before_unread_segments(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 10 << 20, destination=DEST)
    newer = _messages(5, offset=5)
    older = _messages(5)
    spool.append(newer)
    assert spool.spill_front(older)
    assert _ids(_read_all(spool)) == _ids(older) + _ids(newer)
    spool.close()


def test_spill_front_replaces_handed_out_segments(tmp_path: Path) -> None:
    """Unconfirmed messages read from a segment are spilled with memory; the segment goes."""
    spool = Spool(tmp_path, 10 << 20, destination=DEST)
    spool.append(_messages(4))
    handed = spool.read_next()
    assert handed is not None
    newer = _messages(2, offset=4)
    assert spool.append(newer) == 2
    assert spool.spill_front(handed[2:])  # two were confirmed, two were not
    rest = _read_all(spool)
    assert _ids(rest) == _ids(handed[2:]) + _ids(newer)
    spool.close()


def test_unusable_directory_refuses_without_raising(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    spool = Spool(blocker / "spool", 10 << 20, destination=DEST)
    assert not spool.available
    assert spool.append(_messages(2)) == 0
    assert not spool.spill_front(_messages(1))
    spool.close()


def test_disabled_by_zero_cap(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s", 0, destination=DEST)
    assert spool.append(_messages(1)) == 0
    assert not (tmp_path / "s").exists()
    assert os.listdir(tmp_path) == []


def test_a_write_is_fsynced_within_the_interval(tmp_path: Path, monkeypatch) -> None:
    """The I/O thread's timer passes the time to its next tick as slack: a write is fsynced at
    the last tick before its deadline, never after it (a fake clock; the files are real)."""
    import time

    now = [1000.0]
    synced: list[float] = []
    real_fsync = os.fsync
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(now[0]), real_fsync(fd)))
    spool = Spool(tmp_path, 1 << 20, destination=DEST, fsync_interval_s=0.2)
    synced.clear()  # the destination record is made durable when the spool opens
    assert spool.append(_messages(3)) == 3
    assert synced == []  # the write path does not wait on the disk
    now[0] += 0.1
    spool.sync_if_due(slack=0.05)
    assert synced == []  # the next tick (at +0.15) is still before the deadline (+0.2)
    now[0] += 0.06
    spool.sync_if_due(slack=0.05)  # the next tick (+0.21) would be late: sync now
    assert synced == [1000.16]
    spool.close()
