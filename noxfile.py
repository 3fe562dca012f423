"""Developer tasks. `./dev -s NAME` runs one with nox bootstrapped; `nox -s NAME` if you have nox.

Sessions: tests, lint, typecheck, bench, docs, demo. Every session installs what it needs, and
`tests` also starts the servers the suite needs (RabbitMQ and PostgreSQL are expected on this
kind of machine; MongoDB-wire and Bolt servers are started by the test fixtures themselves).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

PYTHON = None  # the interpreter nox runs on (requires-python >= 3.11)


def _port_open(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _ensure_rabbitmq(session: nox.Session) -> None:
    if _port_open(5672):
        return
    session.log("RabbitMQ is down on 127.0.0.1:5672; starting it")
    session.run("rabbitmq-server", "-detached", external=True)
    session.run("rabbitmqctl", "await_startup", "--timeout", "60", external=True)


def _ensure_postgres(session: nox.Session) -> None:
    if _port_open(5432):
        return
    session.log("PostgreSQL is down on 127.0.0.1:5432; starting it")
    versions = sorted(os.listdir("/etc/postgresql")) if os.path.isdir("/etc/postgresql") else []
    if not versions:
        session.error("PostgreSQL is not installed; the SQL store tests need it on 127.0.0.1:5432")
    session.run(
        "pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", "start", external=True
    )
    for _ in range(30):
        if _port_open(5432):
            return
        time.sleep(1)
    session.error("PostgreSQL did not come up on 127.0.0.1:5432")


def _ensure_chromium(session: nox.Session) -> None:
    """The graph page is tested in Debian's chromium; install it where we may (CI runs as root)."""
    if shutil.which("chromium") and shutil.which("chromedriver"):
        return
    if os.geteuid() != 0:
        session.warn("chromium is missing and we are not root: the browser tests will be skipped")
        return
    session.log("installing Debian's chromium for the graph-page tests")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    session.run("apt-get", "update", "-qq", external=True, env=env)
    session.run(
        "apt-get",
        "install",
        "-y",
        "-qq",
        "--no-install-recommends",
        "chromium",
        "chromium-driver",
        external=True,
        env=env,
    )


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Lint and typecheck, the package smoke (scripts/package_smoke.py), then the whole suite
    against real RabbitMQ, PostgreSQL, MongoDB-wire and Bolt servers (CI runs this session, so a
    lint or type error or a broken wheel fails CI)."""
    session.install("-e", ".[all,test]", *LINT_TOOLS, *TYPECHECK_TOOLS, *PACKAGE_TOOLS)
    # The real producers' venvs (dbt-ol's and Airflow's, each its own: their pins clash with the
    # tests'), built while lint, typecheck and the package smoke run, so before the clock of any
    # test starts: 1.5-4 min the first time (mostly Airflow's), nothing while pyproject's
    # *-producer extras are unchanged (tests/ingest/producer_env.py).
    producers = subprocess.Popen(
        [os.path.join(session.bin, "python"), "tests/ingest/producer_env.py"],
        start_new_session=True,  # its pip children are stopped with it on a failure below
    )
    try:
        _lint(session)
        _typecheck(session)
        _ensure_rabbitmq(session)
        _ensure_postgres(session)
        _ensure_chromium(session)
        if session.posargs:
            session.log("posargs given: skipping the package smoke (a run without them has it)")
        else:
            # The built sdist and wheel, installed alone in a fresh venv outside the repo, run
            # the decorator example and `lineage-collector check` (~35 s): a file the package
            # misses fails here, where every test from the source tree would pass.
            session.run("python", "scripts/package_smoke.py")
    except BaseException:
        os.killpg(producers.pid, signal.SIGTERM)
        producers.wait()
        raise
    if producers.wait() != 0:
        session.error("tests/ingest/producer_env.py failed: a producer's venv was not built")
    # Two workers: most tests wait on servers, so two share the two cores well; the heavy ones
    # (private broker nodes, slow scenarios) stay together on one worker (tests/conftest.py).
    args = session.posargs or [
        "-q",
        "-p",
        "no:cacheprovider",
        "--durations=15",
        "-n",
        "2",
        "--dist",
        "loadgroup",
    ]
    session.run("pytest", *args)


# Pinned: a newer ruff may format differently, or a newer mypy check differently, and CI on a
# fresh machine must not drift from what passed here.
LINT_TOOLS = ("ruff==0.17.6", "import-linter==2.17")
TYPECHECK_TOOLS = ("mypy==2.4.1",)
PACKAGE_TOOLS = ("build==1.6.1",)  # `python -m build` for scripts/package_smoke.py


def _lint(session: nox.Session) -> None:
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("lint-imports")


def _typecheck(session: nox.Session) -> None:
    session.run("mypy")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check and the import-linter layer contracts (pyproject.toml)."""
    session.install("-e", ".", *LINT_TOOLS)  # lint-imports reads the installed packages
    _lint(session)


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict over the three import packages."""
    session.install("-e", ".[all,test]", *TYPECHECK_TOOLS)
    _typecheck(session)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Every benchmark, each reporting ratios against a baseline measured in the same run."""
    session.install("-e", ".[all,test]")
    _ensure_rabbitmq(session)
    _ensure_postgres(session)  # bench_db.py, bench_fleet.py
    os.makedirs(".bench-results", exist_ok=True)
    runs = _bench_runs(session.posargs) or [
        (f"bench/{name}", [])
        for name in sorted(os.listdir("bench"))
        if name.startswith("bench_") and name.endswith(".py") and name not in BENCH_ON_REQUEST
    ]
    for script, args in runs:
        session.log(f"== {script} {' '.join(args)}")
        name = os.path.splitext(os.path.basename(script))[0]
        # Each script prints its own table of figures and ratios; keep a copy of what it printed.
        session.run(
            "bash",
            "-o",
            "pipefail",
            "-c",
            f'python {shlex.join([script, *args])} 2>&1 | tee ".bench-results/{name}.txt"',
            external=True,
        )


#: Benchmarks that take hours (bench_million loads a million events into every store): run only
#: when named, as in ``./dev -s bench -- bench_million --stores sqlite``.
BENCH_ON_REQUEST = {"bench_million.py"}


def _bench_runs(posargs: list[str]) -> list[tuple[str, list[str]]]:
    """``posargs`` as scripts, each followed by its own arguments (``bench_million --stores
    sqlite bench/bench_api.py --events 5000``): a script is a word that starts with ``bench``
    (a bare name means ``bench/NAME.py``); every other word goes to the script before it."""
    runs: list[tuple[str, list[str]]] = []
    for arg in posargs:
        if arg.startswith("bench") or not runs:
            runs.append((arg if arg.endswith(".py") else f"bench/{arg}.py", []))
        else:
            runs[-1][1].append(arg)
    return runs


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Regenerate-check the configuration reference and build the Sphinx site into docs/_build."""
    session.install("-e", ".[all]", "sphinx>=7", "furo", "myst-parser>=3")
    session.run("python", "-m", "lineage_sdk.config.reference", "--check", "docs/configuration.md")
    session.run(
        "sphinx-build", "-q", "-W", "--keep-going", "-b", "html", "docs", "docs/_build/html"
    )


@nox.session(python=False)
def web(session: nox.Session) -> None:
    """Rebuild the graph page's bundled cytoscape + dagre (committed, so installs need no npm)."""
    session.chdir("web")
    session.run("npm", "ci", "--no-audit", "--no-fund", external=True)
    session.run("npm", "run", "build", external=True)


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """The example pipeline on the embedded defaults (no server needed)."""
    session.install("-e", ".[collector]")
    session.run("python", "examples/demo.py", *session.posargs)
