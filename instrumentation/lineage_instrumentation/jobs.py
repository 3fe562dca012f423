"""What every instrumentor says about the jobs it names: the ``jobType`` facet, and the job of
work done outside any run (named after the program). One copy for the messaging and database
instrumentors alike."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from typing import Any

from lineage_sdk.sdk.events import JOB_TYPE_FACET_URL

__all__ = ["job_type_facet", "periodic_accumulative", "program_job_name"]


def job_type_facet(
    producer: str,
    processing_type: str,
    job_type: str,
    emission_pattern: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``jobType`` facet (2-0-4) of instrumented jobs: STREAMING for the long runs of streaming
    mode, which say how they emit in ``emission_pattern`` (see :func:`periodic_accumulative`)."""
    facet: dict[str, Any] = {
        "_producer": producer,
        "_schemaURL": JOB_TYPE_FACET_URL,
        "processingType": processing_type,
        "integration": "LINEAGE_SDK",
        "jobType": job_type,
    }
    if emission_pattern is not None:
        facet["emissionPattern"] = dict(emission_pattern)
    return facet


def periodic_accumulative(interval_s: float) -> dict[str, Any]:
    """``jobType.emissionPattern`` of a streaming run: events come every ``interval_s`` seconds
    (``windowDuration``, whole seconds, at least 1) while the run lives, and each adds to what
    the run read or wrote: the whole is the union of the run's events (``ACCUMULATIVE``)."""
    return {
        "eventTrigger": "PERIODIC",
        "eventContentMode": "ACCUMULATIVE",
        "windowDuration": max(1, math.ceil(interval_s)),
    }


def program_job_name() -> str:
    """The job of work done outside any run: the program's name."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ""
    name = os.path.splitext(os.path.basename(argv0))[0]
    if name == "__main__":  # python -m package: the package folder names the program
        name = os.path.basename(os.path.dirname(argv0))
    return name or "python"
