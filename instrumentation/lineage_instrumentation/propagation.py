"""Carrying a lineage run and its trace across processes in message headers.

A publisher inside a lineage run writes these headers; a consumer's run reads them and gets the
publisher's run as its ``parent`` facet (with ``root``), and its span becomes a child of the
publisher's span, so lineage and traces across services form one connected graph.

=================================== ======================================================
header                              value
=================================== ======================================================
``traceparent``, ``tracestate``     W3C Trace Context of the publishing run's span
``openlineage-parent-run-id``       run id (UUID) of the run that published the message
``openlineage-parent-job-namespace`` that run's job namespace
``openlineage-parent-job-name``     that run's job name
``openlineage-root-run-id``         run id of the root of that run's tree (itself if none)
``openlineage-root-job-namespace``  the root run's job namespace
``openlineage-root-job-name``       the root run's job name
=================================== ======================================================

A process can also be given a parent run from outside (an orchestrator starting it), honoured for
runs that have no parent from a message: ``OPENLINEAGE_PARENT_ID`` and
``OPENLINEAGE_ROOT_PARENT_ID`` as ``{namespace}/{job name}/{run id}`` (the convention of the
OpenLineage Airflow and dbt integrations), or ``OPENLINEAGE_CONTEXT`` as a JSON object with the
header names above as keys (``{"openlineage-parent-run-id": ..., ...}``).
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Mapping, MutableMapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from lineage_sdk.sdk.runs import LineageRun, ParentRef

__all__ = [
    "LINEAGE_HEADERS",
    "PARENT_JOB_NAMESPACE_HEADER",
    "PARENT_JOB_NAME_HEADER",
    "PARENT_RUN_ID_HEADER",
    "ROOT_JOB_NAMESPACE_HEADER",
    "ROOT_JOB_NAME_HEADER",
    "ROOT_RUN_ID_HEADER",
    "TRACEPARENT_HEADER",
    "extract_context",
    "extract_parent",
    "inject",
    "parent_from_environment",
]

_LOG = logging.getLogger("lineage_instrumentation")

TRACEPARENT_HEADER = "traceparent"
PARENT_RUN_ID_HEADER = "openlineage-parent-run-id"
PARENT_JOB_NAMESPACE_HEADER = "openlineage-parent-job-namespace"
PARENT_JOB_NAME_HEADER = "openlineage-parent-job-name"
ROOT_RUN_ID_HEADER = "openlineage-root-run-id"
ROOT_JOB_NAMESPACE_HEADER = "openlineage-root-job-namespace"
ROOT_JOB_NAME_HEADER = "openlineage-root-job-name"
LINEAGE_HEADERS = (
    PARENT_RUN_ID_HEADER,
    PARENT_JOB_NAMESPACE_HEADER,
    PARENT_JOB_NAME_HEADER,
    ROOT_RUN_ID_HEADER,
    ROOT_JOB_NAMESPACE_HEADER,
    ROOT_JOB_NAME_HEADER,
)

_PROPAGATOR = TraceContextTextMapPropagator()


class _HeaderGetter(Getter[Mapping[str, Any]]):
    """AMQP header values may arrive as bytes; the default getter would split them into ints."""

    def get(self, carrier: Mapping[str, Any], key: str) -> list[str] | None:
        value = _text(carrier.get(key))
        return None if value is None else [value]

    def keys(self, carrier: Mapping[str, Any]) -> list[str]:
        return list(carrier)


_GETTER = _HeaderGetter()


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode()
        except UnicodeDecodeError:
            return None
    return None


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def inject(
    headers: MutableMapping[str, Any], run: LineageRun, context: Context | None = None
) -> None:
    """Write the run (as the consumer's future parent) and the trace context into ``headers``.

    ``context`` defaults to the current OpenTelemetry context, which inside a lineage run holds
    the run's span.
    """
    _PROPAGATOR.inject(headers, context=context)
    root = run.parent.root_or_self if run.parent is not None else None
    headers[PARENT_RUN_ID_HEADER] = run.run_id
    headers[PARENT_JOB_NAMESPACE_HEADER] = run.job_namespace
    headers[PARENT_JOB_NAME_HEADER] = run.job_name
    headers[ROOT_RUN_ID_HEADER] = root.run_id if root is not None else run.run_id
    headers[ROOT_JOB_NAMESPACE_HEADER] = (
        root.job_namespace if root is not None else run.job_namespace
    )
    headers[ROOT_JOB_NAME_HEADER] = root.job_name if root is not None else run.job_name


def extract_parent(headers: Mapping[str, Any] | None) -> ParentRef | None:
    """The publishing run from message headers, or None when absent or malformed.

    A malformed value (not a UUID, missing job) is ignored rather than emitted: the ``parent``
    facet requires a UUID run id, and a bad header from another producer must not make this
    service's events invalid.
    """
    if not headers:
        return None
    run_id = _text(headers.get(PARENT_RUN_ID_HEADER))
    if run_id is None:
        return None
    namespace = _text(headers.get(PARENT_JOB_NAMESPACE_HEADER))
    name = _text(headers.get(PARENT_JOB_NAME_HEADER))
    if not namespace or not name or not _is_uuid(run_id):
        return None
    root: ParentRef | None = None
    root_id = _text(headers.get(ROOT_RUN_ID_HEADER))
    root_namespace = _text(headers.get(ROOT_JOB_NAMESPACE_HEADER))
    root_name = _text(headers.get(ROOT_JOB_NAME_HEADER))
    if root_id and root_id != run_id and root_namespace and root_name and _is_uuid(root_id):
        root = ParentRef(root_id, root_namespace, root_name)
    return ParentRef(run_id, namespace, name, root)


def extract_context(headers: Mapping[str, Any] | None) -> Context | None:
    """The publisher's trace context from ``traceparent``/``tracestate``, or None."""
    if not headers or TRACEPARENT_HEADER not in headers:
        return None
    return _PROPAGATOR.extract(headers, getter=_GETTER)


def _parse_id(text: str, variable: str) -> ParentRef | None:
    parts = text.strip().split("/")
    if len(parts) < 3 or not parts[0] or not _is_uuid(parts[-1]):
        _LOG.warning(
            "ignoring %s=%r: expected {namespace}/{job name}/{run id (UUID)}", variable, text
        )
        return None
    return ParentRef(parts[-1], parts[0], "/".join(parts[1:-1]))


def parent_from_environment(environ: Mapping[str, str] | None = None) -> ParentRef | None:
    """A parent run handed to this process by whoever started it, or None (see module doc)."""
    env = os.environ if environ is None else environ
    context_text = env.get("OPENLINEAGE_CONTEXT")
    if context_text:
        try:
            data = json.loads(context_text)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            _LOG.warning(
                "ignoring OPENLINEAGE_CONTEXT: expected a JSON object of %s",
                ", ".join(LINEAGE_HEADERS),
            )
        else:
            parent = extract_parent({str(k): v for k, v in data.items() if isinstance(v, str)})
            if parent is not None:
                return parent
            _LOG.warning("ignoring OPENLINEAGE_CONTEXT: no valid %s", PARENT_RUN_ID_HEADER)
    parent_text = env.get("OPENLINEAGE_PARENT_ID")
    if not parent_text:
        return None
    parent = _parse_id(parent_text, "OPENLINEAGE_PARENT_ID")
    if parent is None:
        return None
    root_text = env.get("OPENLINEAGE_ROOT_PARENT_ID")
    root = _parse_id(root_text, "OPENLINEAGE_ROOT_PARENT_ID") if root_text else None
    if root is not None and root.run_id != parent.run_id:
        return ParentRef(parent.run_id, parent.job_namespace, parent.job_name, root)
    return parent
