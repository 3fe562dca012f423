"""A spool belongs to one destination (issue 30, item 1): events spooled for one broker, vhost,
user or exchange are never published to another, on the real broker.

The scenario of the issue: application A, with a wrong password for vhost ``A``, spools 2
events; application B, correctly configured for vhost ``B``, starts on the same default spool
folder base and must publish nothing of A's; A, its password fixed, then delivers its 2 events
to ``A`` exactly once. Every test points ``XDG_CACHE_HOME`` into ``tmp_path``, so the user's real
cache folder is never read or written.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import secrets
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from rabbitmq_support import DEST, Topology, blocking_connection, make_events
from vhosts import Vhost, private_vhost, rabbitmqctl

from lineage_exporters.rabbitmq import RabbitMQExporter
from lineage_exporters.rabbitmq._destination import RECORD_NAME, Destination, read_destination
from lineage_exporters.rabbitmq._messages import build_messages, sanitize_word
from lineage_exporters.rabbitmq._spool import Spool, encode_record
from lineage_exporters.rabbitmq.config import RabbitMQConfig
from lineage_exporters.rabbitmq.exporter import destination_for
from lineage_sdk.transport.unrouted import declare_event_exchange

pytestmark = pytest.mark.rabbitmq

CHILD = str(Path(__file__).resolve().parent / "spool_child.py")
_LOGGER = "lineage_exporters.rabbitmq"


@dataclass(frozen=True)
class Tenants:
    """Vhosts ``A`` and ``B``, one user allowed on both, the same exchange and queue in each."""

    a: Vhost
    b: Vhost
    user: str
    password: str
    wrong: str
    exchange: str

    def url(self, vhost: Vhost, *, wrong: bool = False) -> str:
        return vhost.url_for(self.user, self.wrong if wrong else self.password)

    def queue(self, vhost: Vhost) -> Topology:
        return Topology(self.exchange, f"{self.exchange}.all", url=vhost.url)


@pytest.fixture(scope="module")
def tenants() -> Iterator[Tenants]:
    user = f"lineage-test-user-{secrets.token_hex(4)}"
    password, wrong = f"right-{secrets.token_hex(8)}", f"wrong-{secrets.token_hex(8)}"
    with private_vhost("spool-a") as a, private_vhost("spool-b") as b:
        rabbitmqctl("add_user", user, password)
        try:
            for vhost in (a, b):
                rabbitmqctl("set_permissions", "-p", vhost.name, user, ".*", ".*", ".*")
            yield Tenants(
                a, b, user, password, wrong, f"platform.lineage.events.{uuid.uuid4().hex[:6]}"
            )
        finally:
            rabbitmqctl("delete_user", user)


@pytest.fixture
def queues(tenants: Tenants) -> Iterator[tuple[Topology, Topology]]:
    """The exchange and a queue bound with ``#`` in each vhost, emptied and removed afterwards."""
    topologies = (tenants.queue(tenants.a), tenants.queue(tenants.b))
    for topo in topologies:
        conn = blocking_connection(topo.url)
        try:
            ch = conn.channel()
            declare_event_exchange(ch, topo.exchange)
            ch.queue_declare(topo.queue, durable=True)
            ch.queue_purge(topo.queue)
            ch.queue_bind(topo.queue, topo.exchange, "#")
        finally:
            conn.close()
    yield topologies
    for topo in topologies:
        conn = blocking_connection(topo.url)
        try:
            conn.channel().queue_delete(topo.queue)
        finally:
            conn.close()


def _child(cache: Path, url: str, exchange: str, spool: str, out: Path, n: int) -> dict[str, Any]:
    """An application in its own process (spool_child.py ``run``) with its cache in ``cache``."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run(
        [sys.executable, CHILD, "run", url, exchange, spool, str(out), str(n)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env,
    )
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def _runs(messages: list[tuple[Any, Any, bytes]]) -> list[tuple[str, str]]:
    """(runId, eventTime) of every event in ``messages`` (as drained: method, props, body)."""
    out = []
    for _, _, body in messages:
        event = orjson.loads(body)
        out.append((event["run"]["runId"], event["eventTime"]))
    return out


def _segments(folder: Path) -> list[Path]:
    return list(folder.glob("*/*.seg"))


def _files_holding(folder: Path, secret: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_a_spool_for_vhost_a_never_reaches_vhost_b_and_is_delivered_to_a_once(
    tenants: Tenants, queues: tuple[Topology, Topology], tmp_path: Path
) -> None:
    queue_a, queue_b = queues
    cache = tmp_path / "cache"
    ex = tenants.exchange

    # A: wrong password for vhost A. The broker refuses it, so its 2 events go to the spool.
    a_ids = tmp_path / "a.json"
    a = _child(cache, tenants.url(tenants.a, wrong=True), ex, "default", a_ids, 2)
    assert (a["exported"], a["spooled"], a["flushed"]) == (0, 2, True)
    a_folder = Path(a["spool_dir"])
    assert a_folder.is_relative_to(cache)  # the default folder, under our XDG_CACHE_HOME
    assert len(_segments(a_folder)) >= 1
    (record,) = a_folder.glob(f"*/{RECORD_NAME}")
    assert read_destination(record.parent) == destination_for(
        RabbitMQConfig(url=tenants.url(tenants.a)), ex
    )
    for secret in (tenants.wrong, tenants.password):
        assert _files_holding(cache, secret) == []  # never the password, right or wrong

    # B: correctly configured for vhost B, same cache folder. It publishes its own event only.
    b_ids = tmp_path / "b.json"
    b = _child(cache, tenants.url(tenants.b), ex, "default", b_ids, 1)
    assert (b["exported"], b["replayed"], b["spool_bytes"]) == (1, 0, 0)
    assert Path(b["spool_dir"]) != a_folder
    got_b = _runs(queue_b.drain(expected=1, idle=1.0))
    assert got_b == [tuple(r) for r in json.loads(b_ids.read_text())]
    assert len(_segments(a_folder)) >= 1  # A's spool is still there, untouched

    # A again, password fixed: its 2 events reach vhost A, once each.
    fixed = _child(cache, tenants.url(tenants.a), ex, "default", tmp_path / "a2.json", 0)
    assert (fixed["replayed"], fixed["exported"], fixed["spool_bytes"]) == (2, 2, 0)
    assert Path(fixed["spool_dir"]) == a_folder
    got_a = _runs(queue_a.drain(expected=2, idle=1.0))
    assert sorted(got_a) == sorted(tuple(r) for r in json.loads(a_ids.read_text()))
    assert collections.Counter(got_a).most_common(1)[0][1] == 1
    assert _segments(a_folder) == []
    again = _child(cache, tenants.url(tenants.a), ex, "default", tmp_path / "a3.json", 0)
    assert (again["replayed"], again["exported"]) == (0, 0)
    assert queue_a.drain(idle=0.5) == [] and queue_b.drain(idle=0.5) == []


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def _exporter(url: str | list[str], exchange: str, spool: Path) -> RabbitMQExporter:
    urls = url if isinstance(url, list) else [url]
    return RabbitMQExporter(
        RabbitMQConfig(urls=urls, spool_dir=str(spool), reconnect_initial_ms=50), exchange=exchange
    )


def _run(exporter: RabbitMQExporter, n: int) -> tuple[list[tuple[str, str]], Any]:
    """Export ``n`` events, flush and shut down; their (runId, eventTime) and the counters."""
    events = make_events(n)
    exporter.export(events)
    exporter.force_flush(30)
    exporter.shutdown(10)
    return _runs([(None, None, e.payload) for e in events]), exporter.stats()


def test_an_explicit_spool_dir_shared_by_two_destinations_keeps_them_apart(
    tenants: Tenants, queues: tuple[Topology, Topology], tmp_path: Path
) -> None:
    queue_a, queue_b = queues
    shared = tmp_path / "shared-spool"
    ex = tenants.exchange
    a_runs, a = _run(_exporter(tenants.url(tenants.a, wrong=True), ex, shared), 2)
    assert (a.spooled, a.exported) == (2, 0)

    b_runs, b = _run(_exporter(tenants.url(tenants.b), ex, shared), 1)
    assert (b.replayed, b.exported) == (0, 1)
    assert _runs(queue_b.drain(expected=1, idle=1.0)) == b_runs

    # Same vhost, user and exchange, but one more broker address: another destination (the
    # rule is equality of the address sets), so A's spool stays where it is.
    gone = Vhost(tenants.a.name, port=_closed_port())
    more = [tenants.url(tenants.a), gone.url_for(tenants.user, tenants.password)]
    _, c = _run(_exporter(more, ex, shared), 0)
    assert c.replayed == 0
    assert len(_segments(shared)) >= 1

    _, fixed = _run(_exporter(tenants.url(tenants.a), ex, shared), 0)
    assert (fixed.replayed, fixed.exported, fixed.spool_bytes) == (2, 2, 0)
    got = _runs(queue_a.drain(expected=2, idle=1.0))
    assert sorted(got) == sorted(a_runs)
    assert queue_b.drain(idle=0.5) == []
    for secret in (tenants.wrong, tenants.password):
        assert _files_holding(tmp_path, secret) == []


def _old_layout_spool(folder: Path, n: int) -> list[tuple[str, str]]:
    """What an older version left in ``folder``: an instance directory with one valid segment
    and no destination record."""
    instance = folder / "oldhost-4242-deadbeef"
    instance.mkdir(mode=0o700, parents=True)
    for directory in (instance, *instance.parents):
        if directory == folder.parent.parent.parent:
            break
        os.chmod(directory, 0o700)
    events = make_events(n, namespace="legacy")
    data = b"".join(encode_record(m) for m in build_messages(events, 1))
    (instance / f"{1:016d}-{1 << 30:010d}.seg").write_bytes(data)
    (instance / ".lock").touch(mode=0o600)
    return _runs([(None, None, e.payload) for e in events])


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_an_old_layout_spool_is_left_alone_with_one_warning_and_replayed_on_purpose(
    tenants: Tenants,
    queues: tuple[Topology, Topology],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue_a, _ = queues
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    ex = tenants.exchange
    legacy = cache / "lineage-sdk" / "rabbitmq-spool" / sanitize_word(ex)
    legacy_runs = _old_layout_spool(legacy, 2)

    with caplog.at_level(logging.WARNING, logger=_LOGGER):
        first = RabbitMQExporter(RabbitMQConfig(url=tenants.url(tenants.a)), exchange=ex)
        own, stats = _run(first, 1)
        second = RabbitMQExporter(RabbitMQConfig(url=tenants.url(tenants.a)), exchange=ex)
        second.shutdown(10)
    (warning,) = _warnings(caplog)  # one, though two exporters started
    assert str(legacy) in warning and "lineage_exporters.rabbitmq.replay" in warning
    assert (stats.replayed, stats.exported) == (0, 1)
    assert _runs(queue_a.drain(expected=1, idle=1.0)) == own  # none of the old events
    assert len(_segments(legacy)) == 1

    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(cache),
        "LINEAGE_RABBITMQ_URL": tenants.url(tenants.a, wrong=True),
        "LINEAGE_COLLECTOR_TOPIC": ex,
    }
    replay = [sys.executable, "-m", "lineage_exporters.rabbitmq.replay", str(legacy)]
    refused = subprocess.run(
        [*replay, "--timeout", "20"], capture_output=True, text=True, env=env, timeout=120
    )
    assert refused.returncode == 1, refused.stderr
    assert "still waiting in" in refused.stderr and tenants.wrong not in refused.stderr
    assert len(_segments(legacy)) == 1  # kept, now labelled for vhost A
    assert queue_a.drain(idle=0.5) == []

    env["LINEAGE_RABBITMQ_URL"] = tenants.url(tenants.a)
    done = subprocess.run(replay, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "2 event(s) delivered" in done.stdout
    got = _runs(queue_a.drain(expected=2, idle=1.0))
    assert sorted(got) == sorted(legacy_runs)
    assert _segments(legacy) == []
    for secret in (tenants.wrong, tenants.password):
        assert _files_holding(cache, secret) == []


def test_replay_refuses_a_missing_folder_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lineage_exporters.rabbitmq.replay", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"replay: {tmp_path / 'nope'} is not a directory"]


# -- the rule, without a broker ------------------------------------------------------------------


def _dest(*urls: str, exchange: str = "platform.lineage.events") -> Destination:
    return destination_for(RabbitMQConfig(urls=list(urls)), exchange)


def test_same_destination_is_equality_of_normalised_endpoints_and_exchange() -> None:
    base = _dest("amqp://u:p@Rabbit.Local:5672/%2F", "amqp://u:p@b:5672/%2F")
    # Host case, the default port, "/" spelt as an empty path, order, and the password: the same.
    assert _dest("amqp://u:other@b/", "amqp://u:p@rabbit.local") == base
    assert base.key == _dest("amqp://u:other@b/", "amqp://u:p@rabbit.local").key
    different = [
        _dest("amqp://u:p@rabbit.local/%2F"),  # a subset of the addresses
        _dest("amqp://u:p@rabbit.local/%2F", "amqp://u:p@b/%2F", "amqp://u:p@c/%2F"),  # a superset
        _dest("amqp://u:p@rabbit.local/A", "amqp://u:p@b/A"),  # the vhost
        _dest("amqp://v:p@rabbit.local/%2F", "amqp://v:p@b/%2F"),  # the user
        _dest("amqps://u:p@rabbit.local:5672/%2F", "amqps://u:p@b:5672/%2F"),  # TLS
        _dest("amqp://u:p@rabbit.local:5673/%2F", "amqp://u:p@b/%2F"),  # a port
        _dest("amqp://u:p@rabbit.local/%2F", "amqp://u:p@b/%2F", exchange="other"),  # exchange
    ]
    for other in different:
        assert other != base
        assert other.folder_name() != base.folder_name()
    assert Destination.from_json(base.to_json()) == base
    assert b"p@" not in base.to_json() and b'"p"' not in base.to_json()


def test_the_default_folder_is_readable_and_keyed_by_the_destination(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    dest = _dest("amqp://u:p@h/tenant%2Fa")
    exporter = RabbitMQExporter(
        RabbitMQConfig(url=f"amqp://u:p@127.0.0.1:{_closed_port()}/tenant%2Fa", spool_max_bytes=0),
        exchange="platform.lineage.events",
    )
    exporter.shutdown(1)
    name = exporter.spool_dir.name
    assert exporter.spool_dir.parent == tmp_path / "lineage-sdk" / "rabbitmq-spool"
    assert name.startswith("platform.lineage.events@tenant%2Fa-") and "/" not in name
    assert name != dest.folder_name()  # another host: another folder
    assert name == exporter.destination.folder_name()


def _forge(root: Path, record: Destination | None) -> Path:
    instance = root / f"host-1-{uuid.uuid4().hex[:6]}"
    instance.mkdir(mode=0o700, parents=True)
    os.chmod(root, 0o700)
    (message,) = build_messages(make_events(1), 1)
    (instance / f"{1:016d}-{1 << 30:010d}.seg").write_bytes(encode_record(message))
    if record is not None:
        (instance / RECORD_NAME).write_bytes(record.to_json())
    return instance


def _read_all(spool: Spool) -> int:
    n = 0
    while (batch := spool.read_next()) is not None:
        n += len(batch)
    return n


def test_a_spool_adopts_only_instances_recorded_for_its_destination(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "spool"
    other = Destination.of("tests.exchange", [*DEST.endpoints, *_dest("amqp://u:p@h").endpoints])
    ours = _forge(root, Destination.from_json(DEST.to_json()))
    theirs = _forge(root, other)
    old = _forge(root, None)
    garbled = _forge(root, None)
    (garbled / RECORD_NAME).write_bytes(b"{not json")
    with caplog.at_level(logging.WARNING, logger=_LOGGER):
        spool = Spool(root, 1 << 20, destination=DEST)
        assert _read_all(spool) == 1  # ours only
        spool.close()
        Spool(root, 1 << 20, destination=DEST).close()  # a second start warns no more
    assert not ours.exists()
    assert all(list(p.glob("*.seg")) for p in (theirs, old, garbled))  # left where they are
    warnings = _warnings(caplog)
    old_layout = [w for w in warnings if "older version" in w]
    assert len(old_layout) == 1 and str(root) in old_layout[0]  # once, naming the folder
    untrusted = [w for w in warnings if "another user" in w]
    assert untrusted and all(garbled.name in w for w in untrusted)  # its record is unreadable
    assert len(warnings) == len(old_layout) + len(untrusted)


def test_an_instance_is_labelled_before_it_is_visible_and_stale_staging_is_removed(
    tmp_path: Path,
) -> None:
    root = tmp_path / "spool"
    stale = root / ".host-1-dead.new"  # a process died while making its directory
    stale.mkdir(mode=0o700, parents=True)
    (stale / ".lock").touch(mode=0o600)
    spool = Spool(root, 1 << 20, destination=DEST)
    assert spool.dir is not None
    assert read_destination(spool.dir) == DEST  # labelled before any segment is written
    assert sorted(p.name for p in root.iterdir()) == [spool.dir.name]
    spool.close()
    assert list(root.iterdir()) == []  # an empty spool leaves nothing, its record included
