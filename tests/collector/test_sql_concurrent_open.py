"""Collectors opening one new SQLite file (or PostgreSQL database) at the same moment all open
it: ``lineage-collector run`` and ``serve`` started together, or a fleet started at once.

Several processes, started once and each waiting on its stdin, are handed the same new database
at the same moment, round after round, and open the store on it as the CLI does
(:class:`~lineage_sdk.collector.stores.sql.SqlStore`: the tables made, then the layout of a
release before the engine checked, copied and dropped). Every open must succeed, and the
database must hold the new tables once, with an earlier layout's events copied and its tables
gone.

Without the schema lock SQLite refused most rounds at once, busy timeout or not, "database is
locked": the tables' ``CREATE`` in a deferred transaction that had read the schema (a lock
upgrade), and the switch of a new file to WAL. PostgreSQL refused some: "relation ... already
exists", a unique violation of ``pg_type_typname_nsp_index``, or an earlier layout's table
dropped by one collector while another read it.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from backends.sql_pre_engine import write_pre_engine
from collector_helpers import run_event
from servers import postgres_schema

from lineage_sdk.collector.stores.sql_backend import PRE_ENGINE_TABLES, UPGRADE_MARK_TABLE

OPENERS = 4
#: The tests share one set of openers (starting one costs about a second of CPU).
pytestmark = pytest.mark.xdist_group("sql_concurrent_open")

#: How many events an upgrade copies a batch: fewer than :data:`OLD_EVENTS`, so an opener
#: marks its copy while it still reads the earlier layout (another may be dropping it).
UPGRADE_BATCH = 5
#: The seconds an opener may take to answer (a deadlock is a failure, not a hung test).
ANSWER_S = 60.0

#: An opener: for each line of stdin (``{"url": ..., "prefix": ...}``), open the store as
#: ``SqlStore`` does and close it, then print ``opened`` or ``failed <error>``.
_OPENER = f"""
import json, sys
from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.stores.sql_backend import SqlBackend
from lineage_sdk.collector.stores.sql_legacy import SqlPreEngineLayout
print("ready", flush=True)
for line in sys.stdin:
    task = json.loads(line)
    url, prefix = task["url"], task["prefix"]
    store = EngineStore(
        SqlBackend(url, table_prefix=prefix),
        earlier=SqlPreEngineLayout(url, prefix),
        upgrade_batch={UPGRADE_BATCH},
    )
    try:
        store.open()
        store.close()
    except Exception as exc:
        print("failed", type(exc).__name__, " ".join(str(exc).split()), flush=True)
    else:
        print("opened", flush=True)
"""

OLD_EVENTS = 12


class Openers:
    """``OPENERS`` processes running :data:`_OPENER`; :meth:`open_at_once` hands each the same
    task, one write to each stdin in turn (they all block on it), and collects their answers."""

    def __init__(self, log: Path) -> None:
        self._log = log.open("w")
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-c", _OPENER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,  # the upgrade's progress lines
                text=True,
            )
            for _ in range(OPENERS)
        ]
        for proc in self.procs:
            assert self._answer(proc) == "ready"

    def _answer(self, proc: subprocess.Popen[str]) -> str:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], ANSWER_S)
        if not ready:
            for each in self.procs:  # their sessions end: the database can be dropped
                each.kill()
            pytest.fail(f"an opener did not answer in {ANSWER_S:.0f} s (a deadlock?)")
        line = proc.stdout.readline()
        assert line, f"an opener died: {self._log.name}"
        return line.strip()

    def open_at_once(self, url: str, prefix: str) -> list[str]:
        task = json.dumps({"url": url, "prefix": prefix}) + "\n"
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(task)
            proc.stdin.flush()
        return [self._answer(proc) for proc in self.procs]

    def close(self) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._log.close()


@pytest.fixture(scope="module")
def openers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Openers]:
    started = Openers(tmp_path_factory.mktemp("openers") / "openers.log")
    try:
        yield started
    finally:
        started.close()


def write_old_layout(url: str, prefix: str) -> None:
    """The tables a release before the engine left, with ``OLD_EVENTS`` events."""
    events = [
        run_event(job=f"j{i % 4}", outputs=[("db", f"t{i}")], seconds=i) for i in range(OLD_EVENTS)
    ]
    write_pre_engine(url, events, prefix=prefix)


def check_opened(url: str, prefix: str, answers: list[str], *, old: bool) -> None:
    """Every opener opened; the new tables are there, holding the earlier layout's events
    (each once) when there was one, and none of the earlier layout's tables is left."""
    assert answers == ["opened"] * OPENERS, answers
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            tables = {t for t in sa.inspect(conn).get_table_names() if t.startswith(prefix)}
            events = conn.execute(sa.text(f"SELECT count(*) FROM {prefix}ev")).scalar_one()
    finally:
        engine.dispose()
    assert {f"{prefix}{t}" for t in ("ev", "edge", "run", "coledge", "node")} <= tables
    earlier = {f"{prefix}{t}" for t in (*PRE_ENGINE_TABLES, UPGRADE_MARK_TABLE)}
    assert not tables & earlier
    assert events == (OLD_EVENTS if old else 0)


@pytest.mark.parametrize("old", [False, True], ids=["new-file", "earlier-layout"])
def test_processes_opening_one_new_sqlite_file_at_once_all_open_it(tmp_path, openers, old):
    for i in range(6 if old else 10):
        url = f"sqlite:///{tmp_path}/round{i}.db"
        if old:
            write_old_layout(url, "lineage_")
        answers = openers.open_at_once(url, "lineage_")
        check_opened(url, "lineage_", answers, old=old)


@pytest.mark.postgres
def test_processes_upgrading_one_postgres_database_at_once_all_open_it(openers):
    """New tables made (each round's own prefix) and an earlier layout copied and dropped by
    several collectors at once."""
    with postgres_schema("lineage_open") as url:
        for i in range(5):
            prefix = f"r{i}_"
            write_old_layout(url, prefix)
            answers = openers.open_at_once(url, prefix)
            check_opened(url, prefix, answers, old=True)
