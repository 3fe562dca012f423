"""Virtual environments of their own for the real producers the ingest tests run: dbt-ol
(test_dbt_ol.py) and Apache Airflow with its OpenLineage provider (test_airflow_ol.py).

Why not the test environment: dbt-core 1.11 pins ``pathspec<0.13`` while mypy 2.4 (installed
beside the tests by the nox ``tests`` session) needs ``pathspec>=1.0``; Airflow 2.10 pins
``sqlalchemy<2`` while the SQL store needs 2.x. Installing either breaks the tests. Why not
dbt-core 1.12 or 2.x: their install pulls ``dbt-core-experimental-parser``, whose build downloads
a wheel from outside the package registries, which fails here (see shared/services.md).

Each producer's requirements are an extra in pyproject.toml (``dbt-producer``,
``airflow-producer``), the one copy; this module installs them with pip into
``.tools/<name>-venv`` and reuses that venv while the requirements are unchanged (a marker holds
them). The first time: about 25 s for dbt; for Airflow 45 s of CPU and 315 MB, 1.5 to 4 min on
two busy cores (mostly downloads); nothing after. The venvs use the interpreter running this
module, and Airflow 2.10 installs only on Python 3.12 or older.

``python tests/ingest/producer_env.py`` prepares both at once (the nox ``tests`` session does,
beside lint and typecheck, so no install is counted against a test); a test fixture calls
:func:`producer_bin` and creates its venv if absent.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import venv
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

__all__ = ["PRODUCERS", "producer_bin", "requirements"]

_ROOT = Path(__file__).resolve().parents[2]

#: Producer name -> (pyproject extra, the executables its venv must hold).
PRODUCERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "dbt": ("dbt-producer", ("dbt", "dbt-ol")),
    "airflow": ("airflow-producer", ("airflow",)),
}


def requirements(name: str) -> list[str]:
    """The producer's extra of pyproject.toml."""
    with (_ROOT / "pyproject.toml").open("rb") as fh:
        project = tomllib.load(fh)["project"]
    return list(project["optional-dependencies"][PRODUCERS[name][0]])


def producer_bin(name: str) -> Path:
    """The producer's venv ``bin`` folder; installed if missing or stale. The venv lies in
    ``LINEAGE_TEST_<NAME>_VENV`` if set, else ``.tools/<name>-venv``."""
    folder = os.environ.get(f"LINEAGE_TEST_{name.upper()}_VENV")
    root = Path(folder) if folder else _ROOT / ".tools" / f"{name}-venv"
    wanted = "\n".join(requirements(name))
    marker = root / "lineage-requirements.txt"
    bin_dir = root / "bin"
    ready = all((bin_dir / exe).exists() for exe in PRODUCERS[name][1])
    if ready and marker.exists() and marker.read_text(encoding="utf-8") == wanted:
        return bin_dir
    venv.create(root, with_pip=True, clear=True)
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, *requirements(name)], check=True)
    marker.write_text(wanted, encoding="utf-8")
    return bin_dir


if __name__ == "__main__":
    # Together: each install waits mostly on downloads and disk, so the two overlap well.
    with ThreadPoolExecutor(len(PRODUCERS)) as pool:
        for made in pool.map(producer_bin, PRODUCERS):
            sys.stdout.write(f"{made}\n")
