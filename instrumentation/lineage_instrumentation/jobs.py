"""What every instrumentor says about the jobs it names: the ``jobType`` facet, and the job of
work done outside any run (named after the program). One copy for the messaging and database
instrumentors alike."""

from __future__ import annotations

import os
import sys
from typing import Any

from lineage_sdk.sdk.events import JOB_TYPE_FACET_URL

__all__ = ["job_type_facet", "program_job_name"]


def job_type_facet(producer: str, processing_type: str, job_type: str) -> dict[str, Any]:
    """``jobType`` facet of instrumented jobs: STREAMING for the long runs of streaming mode."""
    return {
        "_producer": producer,
        "_schemaURL": JOB_TYPE_FACET_URL,
        "processingType": processing_type,
        "integration": "LINEAGE_SDK",
        "jobType": job_type,
    }


def program_job_name() -> str:
    """The job of work done outside any run: the program's name."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ""
    name = os.path.splitext(os.path.basename(argv0))[0]
    if name == "__main__":  # python -m package: the package folder names the program
        name = os.path.basename(os.path.dirname(argv0))
    return name or "python"
