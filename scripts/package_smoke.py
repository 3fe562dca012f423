"""Build the sdist and wheel, install only the wheel into a fresh virtualenv, and use it.

A file the package misses (a static file of the graph page, a facet schema, ``py.typed``) passes
every test run from the source tree, so this smoke works from the built wheel only, outside the
repository:

1. ``python -m build``: the sdist, then the wheel built FROM the sdist (so the sdist's include
   list is tested too). Every file git knows under the three import packages must be in the
   wheel, and the wheel's metadata must name the distribution ``otel-lineage``.
2. A fresh virtualenv gets ``<wheel>[all]``, its dependencies resolved from the index (pip's
   cache and the machine's configured wheels make this take seconds), and ``lineage_sdk`` must
   import from that virtualenv, not from the source tree.
3. In a vhost of its own on the shared RabbitMQ (deleted afterwards, also on failure):
   ``lineage-collector topology declare`` and ``store init``, then ``lineage-collector check``
   must exit 0; then the decorator example (``examples/decorator.py``,
   copied out of the repository) publishes, and its START and COMPLETE must be in the collector's
   queue and conform to the OpenLineage schemas.
4. ``lineage-collector serve`` from the wheel serves the graph page and every file it loads.

Run by the nox ``tests`` session (so CI fails when it fails): ``python scripts/package_smoke.py``
with the test virtualenv's interpreter, which has ``build``, pika and the test helpers. Exits 1
with one line naming what failed, after printing the failing command's output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["SmokeFailed", "main"]

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the suite's vhost and conformance helpers

from conformance import validate_event  # noqa: E402
from servers import free_port  # noqa: E402
from vhosts import Vhost, private_vhost  # noqa: E402

DIST_NAME = "otel-lineage"
#: Source folder of each import package -> its path in the wheel.
PACKAGES = {
    "lineage_sdk": "lineage_sdk",
    "exporters/lineage_exporters": "lineage_exporters",
    "instrumentation/lineage_instrumentation": "lineage_instrumentation",
}
#: Files that only a packaging mistake loses and no test from the source tree would miss.
MUST_SHIP = (
    "lineage_sdk/py.typed",
    "lineage_exporters/py.typed",
    "lineage_instrumentation/py.typed",
    "lineage_sdk/collector/api/static/index.html",
    "lineage_sdk/schemas/facets/1-0-0/TraceRunFacet.json",
)
JOB = "load_orders"
NAMESPACE = "package-smoke"
TIMEOUT_S = 300.0


class SmokeFailed(Exception):
    """One step of the smoke failed; the message says which and why."""


def run(cmd: Sequence[str | Path], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``cmd``; return its stdout, or raise SmokeFailed after printing what it printed."""
    shown = " ".join(str(part) for part in cmd)
    done = subprocess.run(
        [str(part) for part in cmd],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SmokeFailed(f"`{shown}` exited {done.returncode}")
    return done.stdout


def build(outdir: Path) -> tuple[Path, Path]:
    """The sdist and the wheel built from it, as ``python -m build`` makes them by default."""
    run([sys.executable, "-m", "build", "--outdir", outdir, REPO], cwd=REPO)
    wheels, sdists = list(outdir.glob("*.whl")), list(outdir.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise SmokeFailed(f"build made {sorted(p.name for p in outdir.iterdir())}")
    return sdists[0], wheels[0]


def source_files() -> set[str]:
    """Every file git tracks or would track under the import packages, as wheel paths."""
    out = run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *PACKAGES],
        cwd=REPO,
    )
    found = set()
    for line in out.splitlines():
        path = Path(line)
        if not (REPO / path).is_file():  # deleted in the work tree, not yet in the index
            continue
        for folder, target in PACKAGES.items():
            if path.is_relative_to(folder):
                found.add(str(Path(target) / path.relative_to(folder)))
    return found


def check_wheel(wheel: Path) -> int:
    """The wheel holds every package file and names the distribution; return its file count."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata_file = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(metadata_file).decode()
    expected = source_files()
    missing = sorted((expected | set(MUST_SHIP)) - names)
    if missing:
        raise SmokeFailed(f"the wheel lacks {len(missing)} package file(s): {', '.join(missing)}")
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
        raise SmokeFailed("the wheel lacks the LICENSE file (pyproject's license-files)")
    name = re.search(r"^Name: (.+)$", metadata, re.MULTILINE)
    if name is None or name.group(1).strip() != DIST_NAME:
        raise SmokeFailed(f"the wheel's metadata names {name and name.group(1)!r}, not {DIST_NAME}")
    return len(names)


def clean_env(venv: Path, home: Path | None = None, **extra: str) -> dict[str, str]:
    """The environment of a user of the fresh virtualenv: no trace of the source tree or of the
    test virtualenv. With ``home``, a HOME and cache folder of its own, so the spool never
    touches ~/.cache (pip keeps the real HOME: its configuration and cache live there)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "LINEAGE_", "OPENLINEAGE_", "VIRTUAL_ENV", "NOX"))
    }
    paths = os.environ.get("PATH", "").split(os.pathsep)
    keep = [p for p in paths if p and not Path(p).resolve().is_relative_to(REPO)]
    env.update(PATH=os.pathsep.join([str(venv / "bin"), *keep]), **extra)
    if home is not None:
        env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    return env


def install(wheel: Path, venv: Path, env: dict[str, str], cwd: Path) -> None:
    """A fresh virtualenv with ``<wheel>[all]`` and nothing of the source tree."""
    run([sys.executable, "-m", "venv", venv], cwd=cwd)
    pip: list[str | Path] = [venv / "bin" / "python", "-m", "pip", "--disable-pip-version-check"]
    run([*pip, "install", "--quiet", f"{wheel}[all]"], cwd=cwd, env=env)
    where = run(
        [
            venv / "bin" / "python",
            "-I",
            "-c",
            "import importlib.metadata as m, lineage_sdk, lineage_exporters,"
            " lineage_instrumentation as i;"
            f" print(lineage_sdk.__file__, i.__file__, m.version({DIST_NAME!r}))",
        ],
        cwd=cwd,
        env=env,
    ).split()
    if any(not Path(path).resolve().is_relative_to(venv.resolve()) for path in where[:2]):
        raise SmokeFailed(f"the packages import from {where[:2]}, not from {venv}")


def write_config(path: Path, vhost: Vhost, workdir: Path) -> None:
    """One file for the example and the collector: RabbitMQ in the private vhost, SQLite."""
    path.write_text(
        "[lineage]\n"
        'exporters = ["rabbitmq"]\n'
        "[lineage.producer]\n"
        f'job_namespace = "{NAMESPACE}"\n'
        "[lineage.rabbitmq]\n"
        f'url = "{vhost.url}"\n'
        "[lineage.store]\n"
        'backend = "sql"\n'
        "[lineage.store.sql]\n"
        f'url = "sqlite:///{workdir / "lineage.db"}"\n'
    )


def prepare_collector(venv: Path, config: Path, env: dict[str, str], cwd: Path) -> None:
    """Declare the queues and create the tables, as a new user does once, then ``check``, which
    changes nothing and must find everything in place."""
    collector = venv / "bin" / "lineage-collector"
    for command in (("topology", "declare"), ("store", "init"), ("check",)):
        run([collector, *command, "--config", config], cwd=cwd, env=env)


def collected_events(config: Path, vhost: Vhost) -> list[dict[str, Any]]:
    """Take every message from the collector's queue in the vhost (the vhost goes afterwards)."""
    import pika

    from lineage_sdk.collector.topology import Topology
    from lineage_sdk.config import load_config

    queue = Topology.from_config(load_config(path=config, environ={})).queue
    connection = pika.BlockingConnection(pika.URLParameters(vhost.url))
    try:
        channel = connection.channel()
        events: list[dict[str, Any]] = []
        while True:
            method, properties, body = channel.basic_get(queue, auto_ack=True)
            if method is None:
                return events
            if properties.content_type != "application/json":
                raise SmokeFailed(f"a message in {queue} has type {properties.content_type!r}")
            events.append(json.loads(body))
    finally:
        connection.close()


def check_events(events: list[dict[str, Any]]) -> None:
    """START and COMPLETE of one run of the example's job, both outputs, schema-valid."""
    kinds = sorted(str(event.get("eventType")) for event in events)
    if kinds != ["COMPLETE", "START"]:
        raise SmokeFailed(f"expected START and COMPLETE from the example, got {kinds}")
    for event in events:
        try:
            validate_event(event)
        except AssertionError as exc:
            raise SmokeFailed(f"an event of the example does not conform: {exc}") from None
    named = {(event["job"]["namespace"], event["job"]["name"]) for event in events}
    if named != {(NAMESPACE, JOB)}:
        raise SmokeFailed(f"the events name jobs {sorted(named)}, not {NAMESPACE}.{JOB}")
    run_ids = {event["run"]["runId"] for event in events}
    if len(run_ids) != 1:
        raise SmokeFailed(f"START and COMPLETE name different runs: {sorted(run_ids)}")
    complete = next(event for event in events if event["eventType"] == "COMPLETE")
    outputs = {f"{d['namespace']}/{d['name']}" for d in complete["outputs"]}
    if outputs != {"s3://lake/orders/daily", "s3://lake/orders/extra"}:
        raise SmokeFailed(f"COMPLETE names outputs {sorted(outputs)}")


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - loopback http only
        return bytes(answer.read())


@contextmanager
def serving(venv: Path, config: Path, env: dict[str, str], cwd: Path, log: Path) -> Iterator[str]:
    """``lineage-collector serve`` on a free loopback port; its base URL once it answers."""
    port = free_port()
    cmd = [venv / "bin" / "lineage-collector", "serve", "--config", config]
    with log.open("wb") as out:
        server = subprocess.Popen(
            [*map(str, cmd), "--host", "127.0.0.1", "--port", str(port)],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None:
                sys.stderr.write(log.read_text(errors="replace"))
                raise SmokeFailed(f"`lineage-collector serve` exited {server.returncode}")
            try:
                get(f"{base}/api/v1/namespaces")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SmokeFailed("`lineage-collector serve` did not answer in 60 s") from None
                time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def check_page(base: str) -> int:
    """The graph page and every file it loads are served; return how many were fetched."""
    page = get(f"{base}/").decode()
    assets = re.findall(r'(?:src|href)="(static/[^"]+)"', page)
    if "<html" not in page.lower() or not assets:
        raise SmokeFailed("GET / did not answer the graph page")
    for asset in assets:
        try:
            if not get(f"{base}/{asset}"):
                raise SmokeFailed(f"GET /{asset} answered an empty body")
        except OSError as exc:
            raise SmokeFailed(f"GET /{asset} failed: {exc}") from None
    return 1 + len(assets)


def smoke(workdir: Path) -> None:
    timings: dict[str, float] = {}
    started = time.monotonic()

    def lap(step: str) -> None:
        nonlocal started
        now = time.monotonic()
        timings[step] = now - started
        started = now

    sdist, wheel = build(workdir / "dist")
    files = check_wheel(wheel)
    lap("build")
    venv, home, user = workdir / "venv", workdir / "home", workdir / "user"
    home.mkdir()
    user.mkdir()
    install(wheel, venv, clean_env(venv), user)
    lap("venv")
    with private_vhost("package") as vhost:
        config = user / "lineage.toml"
        write_config(config, vhost, user)
        env = clean_env(venv, home, LINEAGE_CONFIG=str(config))
        prepare_collector(venv, config, env, user)
        example = user / "decorator.py"
        shutil.copyfile(REPO / "examples" / "decorator.py", example)
        run([venv / "bin" / "python", "-I", example], cwd=user, env=env)
        events = collected_events(config, vhost)
        check_events(events)
        lap("broker")
    with serving(venv, config, env, user, workdir / "serve.log") as base:
        fetched = check_page(base)
    lap("serve")
    print(
        f"package smoke: {sdist.name} and {wheel.name} ({files} files, wheel built from the"
        f" sdist); fresh venv with [all]; lineage-collector topology declare, store init, check"
        " exit 0;"
        f" examples/decorator.py published {len(events)} conforming events to its own vhost;"
        f" serve answered / and its {fetched - 1} static files. Seconds: "
        + ", ".join(f"{step} {seconds:.1f}" for step, seconds in timings.items())
    )


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="lineage-package-smoke-"))
    try:
        smoke(workdir)
    except SmokeFailed as exc:
        print(f"package smoke failed: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
