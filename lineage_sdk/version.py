"""The package version, in one place for the ``processing_engine`` facet and the pyproject."""

__all__ = ["__version__"]

__version__ = "0.1.0"
