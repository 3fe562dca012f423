"""docs/configuration.md is generated from the schema and must be current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lineage_sdk.config import config_keys
from lineage_sdk.config.loader import OPENLINEAGE_VARIABLES
from lineage_sdk.config.reference import main, render

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "configuration.md"


def test_docs_are_current():
    assert main(["--check", str(DOCS)]) == 0, (
        "docs/configuration.md is stale: run "
        "`python -m lineage_sdk.config.reference -o docs/configuration.md`"
    )


def test_check_detects_stale_and_missing_files(tmp_path, capsys):
    stale = tmp_path / "configuration.md"
    stale.write_text(render().replace("LINEAGE_PIPELINE_OVERFLOW", "LINEAGE_OLD_NAME"), "utf-8")
    assert main(["--check", str(stale)]) == 1
    assert "stale" in capsys.readouterr().err
    assert main(["--check", str(tmp_path / "missing.md")]) == 1


def test_output_option_writes_what_check_accepts(tmp_path):
    target = tmp_path / "out.md"
    assert main(["--output", str(target)]) == 0
    assert main(["--check", str(target)]) == 0
    assert target.read_text("utf-8") == render()


def test_module_runs_as_a_script(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "lineage_sdk.config.reference"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert result.stdout == render()
    check = subprocess.run(
        [sys.executable, "-m", "lineage_sdk.config.reference", "--check", str(DOCS)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert check.returncode == 0, check.stderr


def test_page_documents_every_variable():
    page = render()
    for key in config_keys():
        assert f"`{key.env_var}`" in page, key.env_var
        row = next(line for line in page.splitlines() if line.startswith(f"| `{key.env_var}`"))
        assert key.description.split("|")[0].strip() in row.replace("\\|", "|")
        for alias in key.aliases:
            assert f"`{alias}`" in page
    for name in OPENLINEAGE_VARIABLES:
        assert f"`{name}`" in page
    assert "`LINEAGE_CONFIG`" in page
    assert "## `[lineage.connections.<name>]`" in page
    assert "precedence" in page
    assert "hunter2" not in page
