"""Private RabbitMQ nodes for tests that need a broker to die: one node, or a cluster of N.

The broker on 127.0.0.1:5672 is shared by everything on the machine, so no test stops it. A test
that needs an outage starts its own node here instead: its own node name, AMQP and distribution
ports, data and log directories under a temporary directory, and its own Erlang cookie (mode
0400) in a private ``HOME``. Every ``rabbitmqctl`` call names one of our nodes with ``-n`` under
that ``HOME``, so nothing here can reach the shared node, whose cookie we never read.

    with RabbitCluster(3) as cluster:          # or RabbitCluster(1) / one_node() for one
        url = cluster.nodes[0].url
        cluster.nodes[0].kill()                # SIGKILL its beam.smp: a crash
        cluster.nodes[0].start()               # back, same data

Clean-up kills every node we started (stop, then SIGKILL of its process group) and removes the
directory; it also runs at interpreter exit, so a failing test leaves no process behind.

Command line: ``scripts/rabbitmq-cluster N`` (or ``python tests/brokers.py N``) starts N nodes,
prints their URLs, and stops them on Ctrl-C.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

from serve_process import free_port

__all__ = ["RabbitCluster", "RabbitNode", "free_port", "one_node"]

RABBIT_BIN = Path("/usr/lib/rabbitmq/bin")
_STARTUP_TIMEOUT_S = 90.0
_LIVE: weakref.WeakSet[RabbitNode] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class RabbitNode:
    """One RabbitMQ node on loopback, started and controlled only through its own name."""

    def __init__(self, base: Path, name: str, home: Path) -> None:
        self.name = name
        self.node = f"{name}@localhost"
        self.home = home
        self.dir = base / name
        self.amqp_port = free_port()
        self.dist_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        for sub in ("mnesia", "log"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        (self.dir / "enabled_plugins").write_text("[].\n")
        (self.dir / "rabbitmq.conf").write_text(
            f"listeners.tcp.local = 127.0.0.1:{self.amqp_port}\n"
            "loopback_users = none\n"
            # A test machine's disk may be fuller than RabbitMQ's default 50 MB margin allows.
            "disk_free_limit.absolute = 1MB\n"
        )
        # Our own env file, so /etc/rabbitmq/rabbitmq-env.conf (the shared node's) is not read.
        (self.dir / "rabbitmq-env.conf").write_text("")
        with _LIVE_LOCK:
            _LIVE.add(self)

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/%2F"

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        env.pop("NOTIFY_SOCKET", None)
        env.update(
            HOME=str(self.home),
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_NODE_PORT=str(self.amqp_port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            RABBITMQ_MNESIA_BASE=str(self.dir / "mnesia"),
            RABBITMQ_LOG_BASE=str(self.dir / "log"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(self.dir / "enabled_plugins"),
            RABBITMQ_CONFIG_FILE=str(self.dir / "rabbitmq.conf"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(self.dir / "advanced.config"),
            RABBITMQ_CONF_ENV_FILE=str(self.dir / "rabbitmq-env.conf"),
            RABBITMQ_PID_FILE=str(self.dir / "pid"),
            ERL_EPMD_ADDRESS="127.0.0.1",
            ERL_FLAGS="-kernel inet_dist_use_interface {127,0,0,1}",
            # The script then execs the VM itself, so our child is beam.smp (no shell wrapper).
            RUNNING_UNDER_SYSTEMD="true",
        )
        return env

    # -- control ----------------------------------------------------------------------------

    def ctl(self, *args: str, timeout: float = 60.0, check: bool = True) -> str:
        """``rabbitmqctl -n <this node> ARGS`` under our HOME (our cookie); returns stdout."""
        done = subprocess.run(
            [str(RABBIT_BIN / "rabbitmqctl"), "-q", "-n", self.node, *args],
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"rabbitmqctl -n {self.node} {' '.join(args)} failed: {done.stderr or done.stdout}"
            )
        return done.stdout

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def spawn(self) -> None:
        """Start the VM without waiting for it (see :meth:`await_startup`)."""
        if self.running:
            return
        log = (self.dir / "log" / "console.log").open("ab")
        try:
            self.process = subprocess.Popen(
                [str(RABBIT_BIN / "rabbitmq-server")],
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, killed whole at clean-up
            )
        finally:
            log.close()

    def await_startup(self, timeout: float = _STARTUP_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if not self.running:
                raise RuntimeError(f"{self.node} exited at start-up; see {self.dir / 'log'}")
            left = deadline - time.monotonic()
            try:
                self.ctl("await_startup", "--timeout", str(max(int(left), 1)), timeout=left + 5)
                break
            except (RuntimeError, subprocess.TimeoutExpired):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)  # the VM is not registered with epmd yet
        while not _port_open(self.amqp_port):  # the listener follows the app's start
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.node} does not listen on {self.amqp_port}")
            time.sleep(0.05)

    def start(self, timeout: float = _STARTUP_TIMEOUT_S) -> RabbitNode:
        """Start (or start again, with the same data) and wait until it takes connections."""
        self.spawn()
        self.await_startup(timeout)
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """A clean stop (``rabbitmqctl stop``); falls back to SIGKILL."""
        if not self.running:
            return
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self.ctl("stop", timeout=timeout)
        self._reap(timeout)

    def kill(self) -> None:
        """SIGKILL the node's beam.smp (and its helpers): a crash, nothing flushed."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self._reap(10.0)

    def restart(self, timeout: float = _STARTUP_TIMEOUT_S) -> None:
        self.stop()
        self.start(timeout)

    def _reap(self, timeout: float) -> None:
        process = self.process
        if process is None:
            return
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        # Helpers of the VM (erl_child_setup, inet_gethost) share its process group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        self.process = None

    def cleanup(self) -> None:
        """Never leave the node running: SIGKILL whatever is left of it."""
        self.kill()


class RabbitCluster:
    """N nodes sharing one cookie; nodes 2..N join node 1. Use as a context manager."""

    def __init__(self, size: int = 1, *, base: Path | None = None) -> None:
        if size < 1:
            raise ValueError("a cluster has at least one node")
        self._own_base = base is None
        self.base = Path(tempfile.mkdtemp(prefix="lineage-rmq-")) if base is None else base
        self.home = self.base / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        cookie = self.home / ".erlang.cookie"
        cookie.write_text(secrets.token_hex(20).upper())
        cookie.chmod(0o400)
        prefix = f"lt{uuid.uuid4().hex[:6]}"
        self.nodes = [RabbitNode(self.base, f"{prefix}n{i + 1}", self.home) for i in range(size)]

    def start(self) -> RabbitCluster:
        """Start every node (in parallel), then join nodes 2..N to node 1.

        Only the joins run one at a time (concurrent joins to one node can race); the
        ``stop_app`` before and the ``start_app`` after them run on all the joiners at once, as
        each ``rabbitmqctl`` call starts a VM of its own and takes seconds on a loaded machine.
        """
        try:
            for node in self.nodes:
                node.spawn()
            for node in self.nodes:
                node.await_startup()
            first, joiners = self.nodes[0], self.nodes[1:]
            _each(joiners, lambda node: node.ctl("stop_app"))
            for node in joiners:
                node.ctl("join_cluster", first.node)
            _each(joiners, lambda node: (node.ctl("start_app"), node.await_startup()))
        except BaseException:
            self.cleanup()
            raise
        return self

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    def cleanup(self) -> None:
        for node in self.nodes:
            node.cleanup()
        if self._own_base:
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> RabbitCluster:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.cleanup()


def _each(nodes: list[RabbitNode], action: Callable[[RabbitNode], object]) -> None:
    """``action`` on every node at once (threads); the first failure is raised."""
    errors: list[BaseException] = []

    def run(node: RabbitNode) -> None:
        try:
            action(node)
        except BaseException as exc:  # handed to the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(node,)) for node in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


@contextlib.contextmanager
def one_node() -> Iterator[RabbitNode]:
    """A single private node, started; killed and removed afterwards."""
    with RabbitCluster(1) as cluster:
        yield cluster.nodes[0]


@atexit.register
def _kill_leftovers() -> None:
    with _LIVE_LOCK:
        nodes = list(_LIVE)
    for node in nodes:
        with contextlib.suppress(Exception):
            node.cleanup()


def main(argv: list[str]) -> int:
    size = int(argv[0]) if argv else 1
    with RabbitCluster(size) as cluster:
        for node in cluster.nodes:
            print(f"{node.node} {node.url}", flush=True)
        print(f"cookie HOME={cluster.home}; Ctrl-C stops the nodes", flush=True)
        stop = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, stop)
        signal.sigwait(stop)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
