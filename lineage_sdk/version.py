"""The package version and distribution name, one copy for the facets, messages and pyproject."""

__all__ = ["DISTRIBUTION", "__version__"]

__version__ = "0.1.0"

#: The name to ``pip install`` (pyproject's ``[project] name``); the import package is
#: ``lineage_sdk``. "lineage-sdk" on PyPI is another project's.
DISTRIBUTION = "otel-lineage"
