"""A virtual environment of its own holding dbt-core 1.x, dbt-postgres and openlineage-dbt.

Why not the test environment: dbt-core 1.11 pins ``pathspec<0.13`` while mypy 2.4 (installed
beside the tests by the nox ``tests`` session) needs ``pathspec>=1.0``; installing one breaks the
other. Why not dbt-core 1.12 or 2.x: their install pulls ``dbt-core-experimental-parser``, whose
build downloads a wheel from outside the package registries, which fails here (see
shared/services.md). The requirements are the ``dbt-producer`` extra in pyproject.toml, the one
copy; this module installs them with pip into ``.tools/dbt-venv`` and reuses that venv while the
requirements are unchanged (a marker holds them). About 25 s the first time, nothing after.

``python tests/ingest/dbt_env.py`` prepares it (the nox ``tests`` session does, so the install
is not counted against a test); the test fixture calls :func:`dbt_bin` and creates it if absent.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

__all__ = ["dbt_bin", "requirements"]

_ROOT = Path(__file__).resolve().parents[2]
_VENV = Path(os.environ.get("LINEAGE_TEST_DBT_VENV", _ROOT / ".tools" / "dbt-venv"))


def requirements() -> list[str]:
    """The ``dbt-producer`` extra of pyproject.toml."""
    with (_ROOT / "pyproject.toml").open("rb") as fh:
        project = tomllib.load(fh)["project"]
    return list(project["optional-dependencies"]["dbt-producer"])


def dbt_bin() -> Path:
    """The venv's ``bin`` folder, holding ``dbt`` and ``dbt-ol``; installed if missing or stale."""
    wanted = "\n".join(requirements())
    marker = _VENV / "lineage-requirements.txt"
    bin_dir = _VENV / "bin"
    ready = (bin_dir / "dbt-ol").exists() and (bin_dir / "dbt").exists()
    if ready and marker.exists() and marker.read_text(encoding="utf-8") == wanted:
        return bin_dir
    venv.create(_VENV, with_pip=True, clear=True)
    subprocess.run(
        [
            str(bin_dir / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            *requirements(),
        ],
        check=True,
    )
    marker.write_text(wanted, encoding="utf-8")
    return bin_dir


if __name__ == "__main__":
    sys.stdout.write(f"{dbt_bin()}\n")
