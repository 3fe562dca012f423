"""What the ``lineage-instrument`` bootstrap does inside the program: configure, then instrument.

``initialize()`` never raises: whatever goes wrong is logged once (one line on stderr when the
application has not configured logging) and the program runs on without lineage.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from importlib.metadata import entry_points

__all__ = ["BOOTSTRAP_DIR", "ENTRY_POINT_GROUP", "initialize", "load_instrumentors"]

_LOG = logging.getLogger("lineage_instrumentation")

ENTRY_POINT_GROUP = "lineage_sdk.instrumentors"
BOOTSTRAP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bootstrap")


def load_instrumentors(disabled: Collection[str] = ()) -> list[str]:
    """Instrument with every registered instrumentor not named in ``disabled``.

    ``disabled`` holds entry-point names (``pika``); ``all`` or ``*`` disables every one.
    An instrumentor whose library is missing or at an unsupported version skips itself; one that
    fails to load or to instrument is logged and skipped. Returns the names instrumented.
    """
    names = {name.strip().lower() for name in disabled if name.strip()}
    if names & {"all", "*"}:
        return []
    from lineage_sdk.config.names import check_component_names
    from lineage_sdk.exceptions import ConfigError

    try:
        check_component_names(
            "instrumentation.disabled_instrumentations", sorted(names), group=ENTRY_POINT_GROUP
        )
    except ConfigError as exc:  # a typo disables nothing: say so, and instrument the rest
        _LOG.warning("%s; it disables nothing", exc)
    done: list[str] = []
    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        if entry_point.name.lower() in names:
            _LOG.debug("lineage instrumentation %r is disabled", entry_point.name)
            continue
        try:
            instrumentor = entry_point.load()()
            if instrumentor.instrument():
                done.append(entry_point.name)
        except Exception as exc:  # noqa: BLE001 - one broken plugin must not stop the program
            _LOG.error(
                "lineage instrumentation %r failed and is skipped: %s: %s",
                entry_point.name,
                type(exc).__name__,
                exc,
            )
    return done


def _strip_bootstrap_from_pythonpath() -> None:
    """Python programs this one starts are not instrumented (as ``opentelemetry-instrument``)."""
    value = os.environ.get("PYTHONPATH")
    if value is None:
        return
    kept = [p for p in value.split(os.pathsep) if p and os.path.abspath(p) != BOOTSTRAP_DIR]
    if kept:
        os.environ["PYTHONPATH"] = os.pathsep.join(kept)
    else:
        del os.environ["PYTHONPATH"]


def initialize() -> list[str]:
    """Configure lineage from the environment and load the instrumentors; never raises.

    With lineage disabled, or a bad configuration (logged once by ``configure``), nothing is
    instrumented. Returns the names of the instrumentors that patched their library.
    """
    try:
        _strip_bootstrap_from_pythonpath()
        from lineage_instrumentation.config import InstrumentationConfig
        from lineage_sdk.exceptions import ConfigError
        from lineage_sdk.sdk.provider import configure, shutdown

        sdk = configure()
        if sdk is None:
            return []
        try:
            settings = sdk.config.section("instrumentation", InstrumentationConfig)
        except ConfigError as exc:  # the instrumentation's own table is validated here
            _LOG.error("lineage disabled: %s", exc)
            shutdown(1.0)
            return []
        return load_instrumentors(settings.disabled_instrumentations)
    except Exception as exc:  # noqa: BLE001 - telemetry never stops the program
        _LOG.error(
            "lineage auto-instrumentation failed, the program runs without lineage: %s: %s",
            type(exc).__name__,
            exc,
        )
        return []
