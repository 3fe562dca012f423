"""Fixtures shared by every test folder, and the session's isolation from the machine: a private
temp, cache and config folder for the whole run, and the check that it leaves nothing behind."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from brokers import RabbitNode, one_node
from leftovers import (
    Snapshot,
    disk_usage,
    find_leftovers,
    leftover_files,
    stale_names,
    take_snapshot,
)
from servers import FalkorDBServer, MongoTarget, falkordb_server, mongo_target, postgres_schema
from vhosts import SESSION_TAG, Vhost, end_session_vhost, private_vhost

import lineage_sdk
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.sdk.exporters import InMemoryExporter


@pytest.fixture
def memory_exporter() -> Iterator[InMemoryExporter]:
    """Lineage configured for this test only, sending to memory; shut down afterwards."""
    exporter = InMemoryExporter()
    lineage_sdk.configure(LineageConfig(exporters=["memory"]), exporters=[exporter], strict=True)
    try:
        yield exporter
    finally:
        lineage_sdk.shutdown(10)


@pytest.fixture
def vhost(request: pytest.FixtureRequest) -> Iterator[Vhost]:
    """A private vhost on the shared broker for this test (tests/vhosts.py), deleted afterwards
    with everything the test left in it; its name carries the test module's name."""
    with private_vhost(_vhost_prefix(request)) as made:
        yield made


@pytest.fixture(scope="module")
def module_vhost(request: pytest.FixtureRequest) -> Iterator[Vhost]:
    """One private vhost shared by a module's tests, for modules that publish in most tests."""
    with private_vhost(_vhost_prefix(request)) as made:
        yield made


def _vhost_prefix(request: pytest.FixtureRequest) -> str:
    stem = request.node.path.stem.removeprefix("test_") if request.node.path else "t"
    return re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")[:24] or "t"


@pytest.fixture
def rabbit_node() -> Iterator[RabbitNode]:
    """A private RabbitMQ node for this test, to stop, kill and restart at will (~10 s to start);
    never the machine's shared broker. Killed and removed afterwards, even if the test fails."""
    with one_node() as node:
        yield node


@pytest.fixture(scope="session")
def mongo() -> Iterator[MongoTarget]:
    """A MongoDB-wire server for the whole session (SecantusDB unless LINEAGE_TEST_MONGODB_URI),
    shared by every folder that needs one."""
    with mongo_target() as target:
        yield target


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped afterwards (never the
    shared server's own databases)."""
    with postgres_schema("lineage_test") as url:
        yield url


@pytest.fixture(scope="session")
def falkordb() -> Iterator[FalkorDBServer]:
    """One FalkorDB for the session: its Redis protocol for the full store suites, its Bolt
    endpoint for the driver smoke tests (tests/servers.py says why)."""
    with falkordb_server(persistent=False) as server:
        yield server


# First: pytest-xdist's worker turns the groups into node ids in its own hook of this name,
# registered after this file, so it would run first and find no group.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``-n 2 --dist loadgroup``, as ``./dev -s tests`` runs it), a module's
    tests stay on one worker, so module-scoped servers, browsers and dbt runs start once; the
    heavy tests (private RabbitMQ nodes and clusters, and the other ``slow`` scenarios) share one
    group, so two Erlang clusters never compete for the two cores."""

    def heavy(item: pytest.Item) -> bool:
        return bool(
            item.get_closest_marker("slow") or "rabbit_node" in getattr(item, "fixturenames", ())
        )

    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    heavy_modules = {module(item) for item in items if heavy(item)}
    for item in items:
        group = "heavy" if module(item) in heavy_modules else module(item)
        item.add_marker(pytest.mark.xdist_group(group))


# -- the session's own folders, and the check that nothing is left ----------------------------

_ISOLATED = {
    "TMPDIR": "tmp",
    "XDG_CACHE_HOME": "cache",
    "XDG_CONFIG_HOME": "config",
    "XDG_DATA_HOME": "data",
    "XDG_STATE_HOME": "state",
}
_ROOT_ENV = "LINEAGE_TEST_SESSION_ROOT"
_ROOT_PREFIX = "suite-tmp-"
_OWNER = "owner.pid"
_KEEP_FAILED_ROOTS = 3  # as pytest's tmp_path_retention_count: the last failed runs' tmp_path


class _Session:
    """The controller's state: the private folder, the start snapshot (taken in a thread while
    pytest collects), what the end check found."""

    root: Path | None = None
    saved_env: dict[str, str | None] = {}  # noqa: RUF012 - one session per process
    start: list[Snapshot] = []  # noqa: RUF012
    start_thread: threading.Thread | None = None
    report: list[str] = []  # noqa: RUF012


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def _prune_kept_roots(system_temp: Path) -> None:
    """Folders of earlier sessions stay only when tests failed (their ``tmp_path`` kept for a
    look): keep the newest few, never one whose pytest is still running."""

    def finished(root: Path) -> bool:
        try:
            os.kill(int((root / _OWNER).read_text()), 0)
        except (OSError, ValueError):
            return True  # no such process (or no owner file): that session is over
        return False

    def old(root: Path) -> bool:  # not one being set up right now, before its owner file
        return time.time() - root.stat().st_mtime > 60

    done = [
        p for p in system_temp.glob(f"{_ROOT_PREFIX}*") if p.is_dir() and old(p) and finished(p)
    ]
    done.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in done[_KEEP_FAILED_ROOTS:]:
        shutil.rmtree(stale, ignore_errors=True)


def pytest_configure(config: pytest.Config) -> None:
    """Before anything runs: ``TMPDIR`` and the ``XDG_*`` folders point into one private folder
    ``<system temp>/suite-tmp-<tag>-*``, inherited by xdist workers and every subprocess, so
    tests never touch the user's ~/.cache or ~/.config (the RabbitMQ exporter's default spool
    lives under ``XDG_CACHE_HOME``) and whatever they leave in the temp folder is found and
    removed at the end. Workers inherit it; only the controller makes and checks it."""
    if not _is_controller(config) or os.environ.get(_ROOT_ENV):
        return  # an xdist worker, or pytest run by a test: the outer session owns the folders
    _prune_kept_roots(Path(tempfile.gettempdir()))
    # Not "lineage" in the name: tests assert that word is absent from tracebacks showing paths.
    root = Path(tempfile.mkdtemp(prefix=f"{_ROOT_PREFIX}{SESSION_TAG}-"))
    (root / _OWNER).write_text(str(os.getpid()))
    _Session.root = root
    os.environ[_ROOT_ENV] = str(root)
    for variable, leaf in _ISOLATED.items():
        folder = root / leaf
        folder.mkdir()
        _Session.saved_env[variable] = os.environ.get(variable)
        os.environ[variable] = str(folder)
    tempfile.tempdir = os.environ["TMPDIR"]  # gettempdir() caches its first answer
    # The OpenLineage client's file is looked for in ~/.openlineage: an empty one of the
    # session's own is found first, so no test reads the user's (HOME stays: rabbitmqctl reads
    # its Erlang cookie there).
    client_file = root / "openlineage.yml"
    client_file.write_text("", encoding="utf-8")
    _Session.saved_env["OPENLINEAGE_CONFIG"] = os.environ.get("OPENLINEAGE_CONFIG")
    os.environ["OPENLINEAGE_CONFIG"] = str(client_file)
    if not config.option.collectonly:
        thread = threading.Thread(target=lambda: _Session.start.append(take_snapshot()))
        thread.start()
        _Session.start_thread = thread


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Every process deletes the session vhost it made; the controller then (after every worker
    finished, and after pytest removed passed tests' ``tmp_path``) lists what this run left on
    the shared servers and in its temp folder, and fails the run if anything is there."""
    end_session_vhost()
    thread, root = _Session.start_thread, _Session.root
    if not _is_controller(session.config) or thread is None or root is None:
        return
    thread.join()
    before = _Session.start[0] if _Session.start else Snapshot()
    after = take_snapshot()
    temp = root / "tmp"
    found = find_leftovers(before, after, SESSION_TAG, leftover_files(temp))
    report = [
        f"leftovers check (session tag {SESSION_TAG}; its temp folder {root} holds "
        f"{disk_usage(root) / 2**20:.1f} MiB now, removed at exit):"
    ]
    report += [f"  could not check {error}" for error in before.errors + after.errors]
    stale = stale_names(after, SESSION_TAG)
    if stale:
        report.append(f"  of other runs, maybe still going (not failed on): {', '.join(stale)}")
    if found:
        report.append("  FAILED: this run left behind:")
        report += [f"    {line}" for line in found]
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    else:
        report.append("  nothing left on RabbitMQ, PostgreSQL or in the temp folder")
    _Session.report = report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _Session.report:
        terminalreporter.write_line(line, red=line.startswith("  FAILED"))


def pytest_unconfigure(config: pytest.Config) -> None:
    """Give the environment back and remove the private folder, except the ``tmp_path``
    folders of failed tests, which pytest keeps for a look (its path is printed)."""
    root = _Session.root
    if root is None:
        return
    for variable, value in _Session.saved_env.items():
        if value is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = value
    os.environ.pop(_ROOT_ENV, None)
    tempfile.tempdir = None
    kept = [p for p in (root / "tmp").glob("pytest-of-*") if any(p.iterdir())]
    if not kept:
        shutil.rmtree(root, ignore_errors=True)
        return
    for child in root.iterdir():
        if child.is_dir() and child.name != "tmp":
            shutil.rmtree(child, ignore_errors=True)
        elif not child.is_dir():
            child.unlink()  # owner.pid: this session is over
    for child in (root / "tmp").iterdir():
        if child not in kept:
            shutil.rmtree(child, ignore_errors=True)
    print(f"tmp_path of the failed tests kept in {' '.join(map(str, kept))}")
