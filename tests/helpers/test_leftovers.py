"""The session-end check (tests/leftovers.py) and the isolation it relies on: its diff on made-up
snapshots, then the real thing: a vhost or database this session leaves is found."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pika
import pytest
from leftovers import (
    PG_ADMIN_DSN,
    Snapshot,
    find_leftovers,
    leftover_files,
    stale_names,
    suite_name,
    take_snapshot,
)
from vhosts import (
    SESSION_TAG,
    create_vhost,
    delete_vhost,
    list_vhosts,
    private_vhost,
)

TAG = "abc123"
OURS = f"lineage-test-{TAG}-spool-0a1b2c3d"


def test_what_this_session_left_is_listed_and_nothing_else() -> None:
    before = Snapshot(
        root_queues={"platform.lineage.events.collector": 4, "orders": 1, "test.gone": 0},
        root_exchanges=frozenset({"amq.topic", "platform.lineage.events"}),
    )
    after = Snapshot(
        vhosts=frozenset({"/", OURS, "lineage-test-ffffff-t-00000000", "someone-else"}),
        root_queues={
            "platform.lineage.events.collector": 8,  # grew: ours
            "orders": 9,  # grew, but not a watched name: someone else's application
            "test.documented-api.x": 0,  # new: ours
            "billing": 3,  # new, not watched
        },
        root_exchanges=frozenset({"amq.topic", "platform.lineage.events", "test.live.ex.1"}),
        databases=frozenset({"test", f"lineage_port_{TAG}_12345678", "lineage_port_ffffff_1"}),
        schemas=frozenset({"public", f"lineage_test_{TAG}_87654321"}),
    )
    assert find_leftovers(before, after, TAG, ["/tmp/x/tmp/lineage-rmq-1 (4 KiB)"]) == [
        f"RabbitMQ vhost '{OURS}'",
        "4 messages in RabbitMQ queue 'platform.lineage.events.collector' in vhost '/' "
        "(4 at the start, 8 at the end)",
        "RabbitMQ queue 'test.documented-api.x' in vhost '/' (0 messages)",
        "RabbitMQ exchange 'test.live.ex.1' in vhost '/'",
        f"PostgreSQL database 'lineage_port_{TAG}_12345678'",
        f"PostgreSQL schema 'lineage_test_{TAG}_87654321' in 'test'",
        "left in the temp folder: /tmp/x/tmp/lineage-rmq-1 (4 KiB)",
    ]
    assert stale_names(after, TAG) == ["lineage-test-ffffff-t-00000000", "lineage_port_ffffff_1"]


def test_a_clean_session_and_drained_queues_are_not_leftovers() -> None:
    before = Snapshot(root_queues={"platform.lineage.events.collector": 4})
    after = Snapshot(vhosts=frozenset({"/"}), root_queues={"platform.lineage.events.collector": 0})
    assert find_leftovers(before, after, TAG) == []


def test_files_left_in_the_temp_folder_are_listed_except_pytests_own(tmp_path: Path) -> None:
    (tmp_path / "pytest-of-root" / "pytest-0").mkdir(parents=True)
    (tmp_path / "lineage-rmq-x").mkdir()
    (tmp_path / "lineage-rmq-x" / "data").write_bytes(b"x" * 4096)
    (tmp_path / "a.log").write_text("log")
    assert leftover_files(tmp_path) == [
        f"{tmp_path / 'a.log'} (0 KiB)",
        f"{tmp_path / 'lineage-rmq-x'} (4 KiB)",
    ]
    assert leftover_files(tmp_path / "missing") == []


def test_names_carry_the_session_tag() -> None:
    name = suite_name("lineage_port")
    assert name.startswith(f"lineage_port_{SESSION_TAG}_") and len(name) <= 63
    with pytest.raises(ValueError, match="vhost prefix"):
        private_vhost("No/Slash").__enter__()


def test_the_session_has_its_own_temp_cache_and_config_folders() -> None:
    """Set before any test ran and inherited by subprocesses: no test reaches the user's
    ~/.cache (the RabbitMQ spool's default root) or ~/.config, and temp files are the session's."""
    root = Path(os.environ["LINEAGE_TEST_SESSION_ROOT"])
    assert root.name.startswith(f"suite-tmp-{SESSION_TAG}-")
    names = ("TMPDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")
    for name in names:
        assert Path(os.environ[name]).parent == root, name
    assert Path(tempfile.gettempdir()) == root / "tmp"
    code = "import os, tempfile; print(tempfile.gettempdir(), os.environ['XDG_CACHE_HOME'])"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert child.stdout.split() == [str(root / "tmp"), str(root / "cache")]


@pytest.mark.rabbitmq
def test_a_vhost_left_behind_is_found() -> None:
    before = take_snapshot()
    left = f"lineage-test-{SESSION_TAG}-left-{os.getpid()}"
    create_vhost(left)
    try:
        found = find_leftovers(before, take_snapshot(), SESSION_TAG)
        assert f"RabbitMQ vhost '{left}'" in found
    finally:
        delete_vhost(left)
    assert f"RabbitMQ vhost '{left}'" not in find_leftovers(before, take_snapshot(), SESSION_TAG)


@pytest.mark.rabbitmq
def test_a_private_vhost_works_for_guest_and_is_gone_afterwards() -> None:
    with private_vhost("probe") as vhost:
        assert vhost.url == f"amqp://guest:guest@127.0.0.1:5672/{vhost.name}"
        assert vhost.url_for("a b", "p@ss").startswith("amqp://a%20b:p%40ss@127.0.0.1:5672/")
        connection = pika.BlockingConnection(pika.URLParameters(vhost.url))
        channel = connection.channel()
        channel.queue_declare("probe")
        channel.basic_publish("", "probe", b"x")
        connection.close()
        assert vhost.queues() == {"probe": 1}
    assert vhost.name not in list_vhosts()


@pytest.mark.postgres
def test_a_database_left_behind_is_found() -> None:
    import psycopg

    before = take_snapshot()
    name = suite_name("lineage_left")
    with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            found = find_leftovers(before, take_snapshot(), SESSION_TAG)
            assert f"PostgreSQL database '{name}'" in found
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
