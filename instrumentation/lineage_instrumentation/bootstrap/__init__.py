"""The folder ``lineage-instrument`` puts first on ``PYTHONPATH``: only ``sitecustomize``."""
