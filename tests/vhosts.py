"""Private virtual hosts on the machine's shared RabbitMQ (127.0.0.1:5672, guest/guest).

A test that publishes or declares on the shared broker does it in a vhost of its own, so it
never leaves queues, exchanges or messages in ``/`` where other people work, and two tests
never see each other's traffic. The broker has no management plugin, so vhosts are made with
``rabbitmqctl``: one ``eval`` call adds the vhost and grants ``guest`` (~0.5 s; the
``add_vhost`` + ``set_permissions`` commands would cost two calls), and ``delete_vhost`` removes
it with everything in it (~0.6 s). Every name starts with :data:`SUITE_PREFIX`, so the
session-end check (tests/leftovers.py) and a person reading ``rabbitmqctl list_vhosts`` can tell
a leftover of this suite from anything else.

Use the ``vhost`` fixture (function scoped) or ``module_vhost`` (one per module, for modules
that publish in every test), or ``with private_vhost("spool") as vhost:`` directly. Helper
modules that hold a broker URL as a module constant use :func:`session_vhost`: one vhost per
test process (each xdist worker), made on first use and deleted when the process's session ends
(tests/conftest.py); tests sharing it already keep apart by unique queue and exchange names.
"""

from __future__ import annotations

import atexit
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import quote

__all__ = [
    "SESSION_TAG",
    "SESSION_TAG_ENV",
    "SESSION_VHOST_ENV",
    "SHARED_HOST",
    "SHARED_PORT",
    "SUITE_PREFIX",
    "Vhost",
    "create_vhost",
    "delete_vhost",
    "end_session_vhost",
    "list_queues",
    "list_vhosts",
    "private_vhost",
    "rabbitmqctl",
    "session_vhost",
]

SHARED_HOST = "127.0.0.1"
SHARED_PORT = 5672
SUITE_PREFIX = "lineage-test-"
"""Every vhost this suite creates is named ``lineage-test-<session tag>-<prefix>-<hex>``."""

SESSION_TAG_ENV = "LINEAGE_TEST_SESSION_TAG"
SESSION_TAG: str = os.environ.setdefault(SESSION_TAG_ENV, secrets.token_hex(3))
"""This test session's tag, in the name of everything the suite makes on shared servers (vhosts
here, PostgreSQL databases and schemas through ``leftovers.suite_name``), so the session-end
check finds what *this* run left even while other runs use the same servers. Set by the first
process (the pytest controller) and inherited by xdist workers and subprocesses."""

_PREFIX = re.compile(r"[a-z0-9][a-z0-9-]{0,30}")
_TIMEOUT_S = 60.0


def rabbitmqctl(*args: str, timeout: float = _TIMEOUT_S) -> str:
    """Run the shared broker's ``rabbitmqctl`` and return its stdout; raise with its stderr."""
    ctl = shutil.which("rabbitmqctl") or "/usr/sbin/rabbitmqctl"
    done = subprocess.run(
        [ctl, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"rabbitmqctl {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


@dataclass(frozen=True)
class Vhost:
    """A vhost on the shared broker that exists for as long as its ``private_vhost`` block."""

    name: str
    host: str = SHARED_HOST
    port: int = SHARED_PORT

    @property
    def url(self) -> str:
        """``amqp://guest:guest@127.0.0.1:5672/<quoted name>``."""
        return self.url_for("guest", "guest")

    def url_for(self, user: str, password: str) -> str:
        """The URL of this vhost for another user (tests of refused logins, redaction)."""
        return (
            f"amqp://{quote(user, safe='')}:{quote(password, safe='')}"
            f"@{self.host}:{self.port}/{quote(self.name, safe='')}"
        )

    def queues(self) -> dict[str, int]:
        """Queue name -> ready messages in this vhost (``rabbitmqctl list_queues``)."""
        return list_queues(self.name)


def list_queues(vhost: str) -> dict[str, int]:
    """Queue name -> messages of every queue in ``vhost`` (0 for a queue that reports none)."""
    out = rabbitmqctl("list_queues", "-q", "--no-table-headers", "-p", vhost, "name", "messages")
    pairs = (line.rsplit("\t", 1) for line in out.splitlines() if "\t" in line)
    return {name: int(count) if count.isdigit() else 0 for name, count in pairs}


def _erlang_binary(text: str) -> str:
    return '<<"' + text + '">>'


def create_vhost(name: str) -> None:
    """Add ``name`` and give ``guest`` full rights on it, in one ``rabbitmqctl eval``."""
    vhost, guest, anything, actor = (
        _erlang_binary(part) for part in (name, "guest", ".*", "lineage-tests")
    )
    rabbitmqctl(
        "eval",
        f"ok = rabbit_vhost:add({vhost}, {actor}), "
        f"ok = rabbit_auth_backend_internal:set_permissions("
        f"{guest}, {vhost}, {anything}, {anything}, {anything}, {actor}).",
    )


def delete_vhost(name: str) -> None:
    """Delete ``name`` with all its queues, exchanges and messages; a missing vhost is fine."""
    try:
        rabbitmqctl("delete_vhost", name)
    except RuntimeError as error:
        if "does not exist" not in str(error) and "no_such_vhost" not in str(error):
            raise


def list_vhosts() -> list[str]:
    """Every vhost on the shared broker."""
    out = rabbitmqctl("list_vhosts", "-q", "--no-table-headers", "name")
    return [line for line in out.splitlines() if line]


@contextmanager
def private_vhost(prefix: str = "t") -> Iterator[Vhost]:
    """A fresh vhost ``lineage-test-<session tag>-<prefix>-<hex>`` that ``guest`` may use fully; deleted with
    everything in it when the block ends, even if the test failed."""
    if not _PREFIX.fullmatch(prefix):
        raise ValueError(f"vhost prefix {prefix!r} must be 1-31 of a-z, 0-9 and '-'")
    name = f"{SUITE_PREFIX}{SESSION_TAG}-{prefix}-{secrets.token_hex(4)}"
    create_vhost(name)
    try:
        yield Vhost(name)
    finally:
        delete_vhost(name)


SESSION_VHOST_ENV = "LINEAGE_TEST_SESSION_VHOST"
"""Names the process's session vhost to the helper scripts a test runs as subprocesses, so a
child reuses its parent's vhost instead of making one it might be killed before deleting."""

_session: list[Vhost] = []  # the vhost this process made and must delete


def session_vhost() -> Vhost:
    """This test process's shared vhost ``lineage-test-<tag>-session-<hex>``: the parent's when a test
    started this process, else made now and deleted by :func:`end_session_vhost` (or at exit)."""
    inherited = os.environ.get(SESSION_VHOST_ENV)
    if _session:
        return _session[0]
    if inherited:
        return Vhost(inherited)
    name = f"{SUITE_PREFIX}{SESSION_TAG}-session-{secrets.token_hex(4)}"
    create_vhost(name)
    _session.append(Vhost(name))
    os.environ[SESSION_VHOST_ENV] = name
    atexit.register(end_session_vhost)
    return _session[0]


def end_session_vhost() -> None:
    """Delete the session vhost if this process made one; nothing otherwise. Idempotent."""
    while _session:
        made = _session.pop()
        if os.environ.get(SESSION_VHOST_ENV) == made.name:
            del os.environ[SESSION_VHOST_ENV]
        delete_vhost(made.name)
