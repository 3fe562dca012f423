"""Sphinx configuration: Markdown pages (MyST) with the furo theme."""

project = "lineage-sdk"
author = "lineage-sdk developers"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
html_theme = "furo"
exclude_patterns = ["_build"]
myst_heading_anchors = 3
suppress_warnings = ["myst.xref_missing"]
