"""Bootstrap run by Python at start-up under ``lineage-instrument`` (``site`` imports it).

1. The application's own ``sitecustomize`` (the next one on ``sys.path``), if any, runs first, so
   whatever it sets up (environment, paths, logging) is in place; if it raises, the error is
   re-raised after lineage is set up, and Python reports it exactly as it would without us.
2. Lineage is configured from the environment and every instrumentor is loaded.

Nothing here may stop the program: a failure is logged once and the program runs without lineage.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from importlib.machinery import PathFinder

__all__: list[str] = []

_HERE = os.path.dirname(os.path.abspath(__file__))


def _run_application_sitecustomize() -> None:
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module  # `import sitecustomize` gives the application's
    spec.loader.exec_module(module)


def _bootstrap() -> None:
    app_error: BaseException | None = None
    try:
        _run_application_sitecustomize()
    except Exception as exc:  # noqa: BLE001 - re-raised below, after lineage is set up
        app_error = exc
    try:
        from lineage_instrumentation.auto import initialize
    except Exception as exc:  # noqa: BLE001 - e.g. another interpreter without lineage-sdk
        sys.stderr.write(
            f"lineage-instrument: lineage is not installed for {sys.executable} "
            f"({type(exc).__name__}: {exc}); running without lineage\n"
        )
    else:
        initialize()
    if app_error is not None:
        raise app_error


_bootstrap()
