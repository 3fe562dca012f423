"""The distribution is ``otel-lineage``: "lineage-sdk" on PyPI is another project's, so no
install line, extra or metadata lookup may name it (the import package stays ``lineage_sdk``)."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import lineage_sdk
from lineage_sdk.version import DISTRIBUTION

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
#: Installing the other project: ``pip install lineage-sdk`` or one of "its" extras.
OLD_NAME = re.compile(r"pip install\s+['\"]?lineage[-_.]sdk\b|\blineage[-_.]sdk\[", re.IGNORECASE)
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])


def _texts() -> dict[str, str]:
    """The README, the docs and every source file that could tell a user what to install."""
    paths = [REPO / "README.md", *(REPO / "docs").glob("*.md")]
    for folder in ("lineage_sdk", "exporters", "instrumentation", "examples"):
        paths += (REPO / folder).rglob("*.py")
    return {str(path.relative_to(REPO)): path.read_text() for path in paths}


def test_pyproject_and_code_name_the_same_distribution():
    assert PYPROJECT["project"]["name"] == DISTRIBUTION == "otel-lineage"
    assert importlib.metadata.version(DISTRIBUTION) == lineage_sdk.__version__


def test_extras_that_pull_other_extras_name_this_distribution():
    ours = canonicalize_name(DISTRIBUTION)
    for extra, requirements in PYPROJECT["project"]["optional-dependencies"].items():
        for text in requirements:
            requirement = Requirement(text)
            if requirement.extras & EXTRAS and requirement.extras <= EXTRAS:
                assert canonicalize_name(requirement.name) == ours, (extra, text)


def test_no_install_line_names_the_other_project():
    wrong = [
        f"{name}: {match.group(0)}"
        for name, text in _texts().items()
        for match in OLD_NAME.finditer(text)
    ]
    assert wrong == []


def test_readme_installs_from_the_clone_and_from_the_index():
    readme = (REPO / "README.md").read_text()
    assert "pip install -e '.[all]'" in readme
    assert "pip install -e '.[rabbitmq]'" in readme
    assert f"pip install '{DISTRIBUTION}[rabbitmq]'" in readme
