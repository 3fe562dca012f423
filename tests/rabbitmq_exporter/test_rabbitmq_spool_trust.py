"""The spool trusts only itself: private modes, no adoption of what another user could have
written, and no predictable shared fallback path (issue 13, item 3). Tests run as root in CI, so
"another user" is uid 65534 (nobody) through ``os.chown``."""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from rabbitmq_support import DEST, make_events

from lineage_exporters.rabbitmq._destination import write_destination
from lineage_exporters.rabbitmq._messages import build_messages
from lineage_exporters.rabbitmq._spool import (
    Spool,
    default_spool_root,
    encode_record,
    private_fallback_dir,
)

OTHER_UID = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _forge(directory: Path, *, mode: int = 0o700) -> tuple[Path, str]:
    """A dead process's instance directory holding one valid segment (CRC and all)."""
    directory.mkdir(parents=True)
    os.chmod(directory, mode)
    write_destination(directory, DEST)
    (message,) = build_messages(make_events(1, name="forged"), 1)
    segment = directory / f"{1:016d}-{1 << 30:010d}.seg"
    segment.write_bytes(encode_record(message))
    return segment, message.message_id


def _adopted(spool: Spool) -> list[str]:
    out: list[str] = []
    while (batch := spool.read_next()) is not None:
        out.extend(m.message_id for m in batch)
    return out


def test_directories_are_0700_and_files_0600_whatever_the_umask(
    tmp_path: Path, loose_umask: None
) -> None:
    root = tmp_path / "a" / "b" / "spool"
    spool = Spool(root, 10 << 20, destination=DEST, segment_bytes=4096)
    assert spool.available and spool.dir is not None
    spool.append(build_messages(make_events(50), 1))
    assert spool.spill_front(build_messages(make_events(3), 1))
    for directory in (tmp_path / "a", tmp_path / "a" / "b", root, spool.dir):
        assert _mode(directory) == 0o700, directory
    files = list(spool.dir.iterdir())
    assert len(files) > 3  # .lock, several segments, the spilled one
    assert {_mode(f) for f in files} == {0o600}
    spool.close()


def test_an_existing_spool_root_of_ours_is_tightened(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    root.mkdir()
    os.chmod(root, 0o755)  # as older versions created it
    Spool(root, 1 << 20, destination=DEST).close()
    assert _mode(root) == 0o700


def test_a_valid_segment_of_our_own_is_adopted(tmp_path: Path, caplog) -> None:
    _, forged_id = _forge(tmp_path / "spool" / "host-1-dead")
    with caplog.at_level(logging.WARNING, logger="lineage_exporters.rabbitmq"):
        spool = Spool(tmp_path / "spool", 1 << 20, destination=DEST)
    assert _adopted(spool) == [forged_id]  # the control case: the forgery itself is valid
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    spool.close()


@needs_root
def test_a_directory_owned_by_another_user_is_left_alone(tmp_path: Path, caplog) -> None:
    root = tmp_path / "spool"
    segment, _ = _forge(root / "host-1-dead")
    os.chown(segment, OTHER_UID, OTHER_UID)
    os.chown(segment.parent, OTHER_UID, OTHER_UID)
    with caplog.at_level(logging.WARNING, logger="lineage_exporters.rabbitmq"):
        spool = Spool(root, 1 << 20, destination=DEST)
    assert _adopted(spool) == []
    assert segment.exists()  # left in place
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "host-1-dead" in warnings[0].getMessage()
    spool.close()


@needs_root
def test_a_segment_owned_by_another_user_in_our_directory_is_left_alone(
    tmp_path: Path, caplog
) -> None:
    root = tmp_path / "spool"
    segment, _ = _forge(root / "host-1-dead")
    os.chown(segment, OTHER_UID, OTHER_UID)
    with caplog.at_level(logging.WARNING, logger="lineage_exporters.rabbitmq"):
        spool = Spool(root, 1 << 20, destination=DEST)
    assert _adopted(spool) == []
    assert segment.exists()
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
    spool.close()


@pytest.mark.parametrize("mode", [0o770, 0o777, 0o702])
def test_a_directory_others_may_write_to_is_left_alone(tmp_path: Path, caplog, mode: int) -> None:
    root = tmp_path / "spool"
    segment, _ = _forge(root / "host-1-dead", mode=mode)
    with caplog.at_level(logging.WARNING, logger="lineage_exporters.rabbitmq"):
        spool = Spool(root, 1 << 20, destination=DEST)
    assert _adopted(spool) == []
    assert segment.exists()
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
    spool.close()


def test_a_symlinked_instance_directory_is_left_alone(tmp_path: Path, caplog) -> None:
    elsewhere = tmp_path / "elsewhere"
    segment, _ = _forge(elsewhere / "dead")
    root = tmp_path / "spool"
    root.mkdir(mode=0o700)
    (root / "host-1-dead").symlink_to(elsewhere / "dead")
    with caplog.at_level(logging.WARNING, logger="lineage_exporters.rabbitmq"):
        spool = Spool(root, 1 << 20, destination=DEST)
    assert _adopted(spool) == []
    assert segment.exists()
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
    spool.close()


@needs_root
def test_a_root_writable_by_others_adopts_nothing(tmp_path: Path, caplog) -> None:
    root = tmp_path / "spool"
    segment, _ = _forge(root / "host-1-dead")
    os.chown(root, OTHER_UID, OTHER_UID)
    os.chmod(root, 0o777)
    with caplog.at_level(logging.WARNING, logger="lineage_exporters.rabbitmq"):
        spool = Spool(root, 1 << 20, destination=DEST)
    assert _adopted(spool) == []
    assert segment.exists()
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
    spool.close()


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_the_fallback_is_private_and_per_user(private_tmp: Path, loose_umask: None) -> None:
    path = private_fallback_dir()
    assert path == private_tmp / f"lineage-sdk-{os.getuid()}"
    info = os.lstat(path)
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
    assert _mode(path) == 0o700
    assert private_fallback_dir() == path  # stable across restarts, so the spool is replayed


@needs_root
def test_a_fallback_name_taken_by_another_user_is_not_used(private_tmp: Path, caplog) -> None:
    taken = private_tmp / f"lineage-sdk-{os.getuid()}"
    taken.mkdir(mode=0o777)
    os.chown(taken, OTHER_UID, OTHER_UID)
    with caplog.at_level(logging.WARNING, logger="lineage_exporters.rabbitmq"):
        path = private_fallback_dir()
    assert path != taken
    assert os.lstat(path).st_uid == os.getuid() and _mode(path) == 0o700
    assert len(caplog.records) == 1


def test_a_symlink_at_the_fallback_name_is_not_followed(private_tmp: Path) -> None:
    target = private_tmp / "attacker"
    target.mkdir(mode=0o700)
    (private_tmp / f"lineage-sdk-{os.getuid()}").symlink_to(target)
    path = private_fallback_dir()
    assert not path.is_symlink() and path.parent == private_tmp and path != target
    assert _mode(path) == 0o700


def test_no_home_directory_means_the_private_fallback(
    private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home() -> Path:
        raise RuntimeError("no home")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    root = default_spool_root("lineage.events")
    assert root == private_tmp / f"lineage-sdk-{os.getuid()}" / "lineage-sdk" / (
        "rabbitmq-spool/lineage.events"
    )
    spool = Spool(root, 1 << 20, destination=DEST)
    assert spool.available
    for directory in (root, root.parent, root.parent.parent):
        assert _mode(directory) == 0o700
    spool.close()
