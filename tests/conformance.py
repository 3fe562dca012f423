"""Conformance checks: events and facets against the official OpenLineage JSON schemas.

``validate_event(event)`` raises ``AssertionError`` listing every violation:

- the event against the core schema (2-0-2 unless told otherwise): the definition of its kind
  (``RunEvent``/``DatasetEvent``/``JobEvent``, chosen by structure and cross-checked with its
  ``schemaURL``), then the whole document, whose ``oneOf`` rejects ambiguous events;
- every facet (run, job, dataset, ``inputFacets``, ``outputFacets``, and the facets forwarded in
  ``parent``) as ``{key: facet}`` against the schema file its ``_schemaURL`` names, without the
  fragment. The file must define that key. A facet whose ``_schemaURL`` resolves to no known file
  is a violation. (Facets of old specs were defined inside the core ``OpenLineage.json``; for
  those the fragment names the definition and the facet itself is checked against it.)

``https://openlineage.io/spec/<path>`` resolves to ``<shared>/openlineage-spec/published/<path>``
and ``https://lineage-sdk.github.io/spec/<path>`` to ``lineage_sdk/schemas/<path>``; nothing is
fetched from the network. Formats are checked (``uuid``, ``uri`` with rfc3986-validator,
``date-time`` with rfc3339-validator): the module refuses to load without those checkers, since
jsonschema silently skips formats it cannot check. Validators are compiled once and cached.

``shared/`` is ``<repo root>/../shared`` (the repo root is the folder holding pyproject.toml),
or ``$LINEAGE_SHARED_DIR``.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urldefrag

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource
from referencing.jsonschema import DRAFT202012

from lineage_sdk.models import (
    CUSTOM_SPEC_BASE_URL,
    OPENLINEAGE_SPEC_BASE_URL,
    OPENLINEAGE_SPEC_VERSION,
    custom_schema_path,
)

__all__ = [
    "FORMAT_CHECKER",
    "event_violations",
    "facet_violations",
    "schema_path",
    "shared_dir",
    "spec_dir",
    "validate_event",
    "validate_facet",
]

FORMAT_CHECKER: FormatChecker = Draft202012Validator.FORMAT_CHECKER
_REQUIRED_FORMATS = {
    "uuid": "(built in)",
    "uri": "rfc3986-validator",
    "date-time": "rfc3339-validator",
}
_missing = sorted(
    f"{fmt} (pip install {pkg})"
    for fmt, pkg in _REQUIRED_FORMATS.items()
    if fmt not in FORMAT_CHECKER.checkers
)
if _missing:
    raise ImportError(
        f"jsonschema cannot check these formats, so conformance would be vacuous: {_missing}"
    )

_KINDS = ("RunEvent", "DatasetEvent", "JobEvent")
_CORE_URL = re.compile(
    re.escape(OPENLINEAGE_SPEC_BASE_URL)
    + r"(\d+-\d+-\d+)/OpenLineage\.json#/(\$defs|definitions)/(\w+)"
)
_CORE_FILE = re.compile(r"\d+-\d+-\d+/OpenLineage\.json")
_MAX_MESSAGE = 240


# ---------------------------------------------------------------------------------------------
# Locating the schema files


@functools.cache
def shared_dir() -> Path:
    """``$LINEAGE_SHARED_DIR``, else ``<repo root>/../shared``."""
    override = os.environ.get("LINEAGE_SHARED_DIR")
    if override:
        return Path(override).resolve()
    for folder in Path(__file__).resolve().parents:
        if (folder / "pyproject.toml").is_file():
            return (folder.parent / "shared").resolve()
    raise RuntimeError("no pyproject.toml above tests/conformance.py; set LINEAGE_SHARED_DIR")


@functools.cache
def spec_dir() -> Path:
    """``<shared>/openlineage-spec/published``: the mirror of https://openlineage.io/spec/."""
    published = shared_dir() / "openlineage-spec" / "published"
    if not (published / OPENLINEAGE_SPEC_VERSION / "OpenLineage.json").is_file():
        raise RuntimeError(
            f"OpenLineage schemas not found under {published}; set LINEAGE_SHARED_DIR"
        )
    return published


def schema_path(url: str) -> Path | None:
    """The local file for a schema URL (fragment ignored), or None if it is not one we mirror."""
    base = urldefrag(url).url
    if base.startswith(CUSTOM_SPEC_BASE_URL):
        return custom_schema_path(base)
    if not base.startswith(OPENLINEAGE_SPEC_BASE_URL):
        return None
    relative = PurePosixPath(base[len(OPENLINEAGE_SPEC_BASE_URL) :])
    if not relative.parts or any(part in ("", ".", "..") for part in relative.parts):
        return None
    path = spec_dir().joinpath(*relative.parts)
    return path if path.is_file() else None


@functools.cache
def _load(path: Path) -> Any:
    return json.loads(path.read_bytes())


@functools.cache
def _retrieve(uri: str) -> Resource[Any]:
    path = schema_path(uri)
    if path is None:
        raise NoSuchResource(ref=uri)  # type: ignore[call-arg]
    return Resource.from_contents(_load(path), default_specification=DRAFT202012)


_REGISTRY: Registry[Any] = Registry(retrieve=_retrieve)  # type: ignore[call-arg]


@functools.cache
def _validator(ref: str) -> Draft202012Validator:
    """A compiled validator for the schema at ``ref`` (an absolute URL, fragment allowed)."""
    return Draft202012Validator({"$ref": ref}, registry=_REGISTRY, format_checker=FORMAT_CHECKER)


def _pointer_exists(document: Any, fragment: str) -> bool:
    node = document
    for token in fragment.lstrip("/").split("/") if fragment.strip("/") else []:
        token = token.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or token not in node:
            return False
        node = node[token]
    return True


# ---------------------------------------------------------------------------------------------
# Reporting


def _where(prefix: str, path: Iterator[Any] | Any) -> str:
    text = prefix
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "(event)"


def _leaves(error: ValidationError) -> Iterator[ValidationError]:
    """The errors that say what is wrong: the branches of anyOf/oneOf/allOf, not the wrapper."""
    if error.context:
        for sub in error.context:
            yield from _leaves(sub)
    else:
        yield error


def _errors(ref: str, instance: Any, prefix: str) -> list[str]:
    found: list[str] = []
    for error in _validator(ref).iter_errors(instance):
        for leaf in _leaves(error):
            message = leaf.message
            if len(message) > _MAX_MESSAGE:
                message = message[: _MAX_MESSAGE - 3] + "..."
            line = f"{_where(prefix, leaf.absolute_path)}: {message}"
            if line not in found:
                found.append(line)
    return found


# ---------------------------------------------------------------------------------------------
# Facets


def facet_violations(
    key: str, facet: Any, *, container: str = "", schema_url: str | None = None
) -> list[str]:
    """What is wrong with one facet, checked as ``{key: facet}`` against its ``_schemaURL``.

    ``container`` is where the facets object sits (e.g. ``run.facets``), for the messages;
    ``schema_url`` overrides the facet's own ``_schemaURL`` (to check a facet against the schema
    it should have named).
    """
    where = f"{container}.{key}" if container else key
    if not isinstance(facet, Mapping):
        return [f"{where}: a facet must be an object, got {type(facet).__name__}"]
    url = schema_url if schema_url is not None else facet.get("_schemaURL")
    if not isinstance(url, str):
        return [f"{where}: missing _schemaURL"]
    base, fragment = urldefrag(url)
    path = schema_path(base)
    if path is None:
        return [f"{where}: _schemaURL {url!r} resolves to no known schema"]
    document = _load(path)
    if _CORE_FILE.fullmatch(PurePosixPath(*path.parts[-2:]).as_posix()):
        # Facets of old specs lived inside the core schema; the fragment names the definition.
        if not fragment or not _pointer_exists(document, fragment):
            return [f"{where}: _schemaURL {url!r} names no facet definition in the core schema"]
        return _errors(url, facet, where)
    found: list[str] = []
    if fragment and not _pointer_exists(document, fragment):
        found.append(f"{where}: _schemaURL fragment #{fragment} does not exist in {base}")
    defined = document.get("properties", {}) if isinstance(document, Mapping) else {}
    if key not in defined:
        found.append(
            f"{where}: {base} does not define the facet key {key!r} (it defines {sorted(defined)})"
        )
        return found
    found.extend(_errors(base, {key: facet}, container))
    return found


def validate_facet(key: str, facet: Any, *, schema_url: str | None = None) -> None:
    """Raise AssertionError listing what is wrong with ``{key: facet}``."""
    problems = facet_violations(key, facet, schema_url=schema_url)
    if problems:
        raise AssertionError("facet does not conform:\n  " + "\n  ".join(problems))


def _facet_containers(event: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    run = event.get("run")
    if isinstance(run, Mapping):
        yield "run.facets", run.get("facets")
    job = event.get("job")
    if isinstance(job, Mapping):
        yield "job.facets", job.get("facets")
    dataset = event.get("dataset")
    if isinstance(dataset, Mapping):
        yield "dataset.facets", dataset.get("facets")
    for side, extra in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
        datasets = event.get(side)
        if isinstance(datasets, list):
            for index, item in enumerate(datasets):
                if isinstance(item, Mapping):
                    yield f"{side}[{index}].facets", item.get("facets")
                    yield f"{side}[{index}].{extra}", item.get(extra)


def _facets(event: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(container, key, facet) for every facet, including those forwarded in ``parent``."""
    for where, container in _facet_containers(event):
        if not isinstance(container, Mapping):
            continue  # absent, or a type error the core schema reports
        for key, facet in container.items():
            yield where, key, facet
            if key == "parent" and isinstance(facet, Mapping):
                yield from _forwarded(f"{where}.parent", facet)


def _forwarded(where: str, parent: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    holders = [("run", parent.get("run")), ("job", parent.get("job"))]
    root = parent.get("root")
    if isinstance(root, Mapping):
        holders += [("root.run", root.get("run")), ("root.job", root.get("job"))]
    for name, holder in holders:
        facets = holder.get("facets") if isinstance(holder, Mapping) else None
        if isinstance(facets, Mapping):
            for key, facet in facets.items():
                yield f"{where}.{name}.facets", key, facet


# ---------------------------------------------------------------------------------------------
# Events


def _kind(event: Mapping[str, Any]) -> str | None:
    if "run" in event:
        return "RunEvent"
    if "dataset" in event:
        return "DatasetEvent"
    if "job" in event:
        return "JobEvent"
    return None


def event_violations(
    event: Any, *, spec_version: str | None = OPENLINEAGE_SPEC_VERSION
) -> list[str]:
    """Every way ``event`` fails the core schema or a facet schema (empty when it conforms).

    With ``spec_version`` (default 2-0-2, what this project emits) the event must say so in its
    ``schemaURL`` and is checked against that version. With ``None`` the version its
    ``schemaURL`` names is used (for events of other producers); the legacy ``#/definitions/``
    spelling of the fragment is then accepted.
    """
    if not isinstance(event, Mapping):
        return [f"(event): must be a JSON object, got {type(event).__name__}"]
    kind = _kind(event)
    if kind is None:
        return ["(event): not an OpenLineage event (it has none of run, dataset, job)"]
    problems: list[str] = []
    version = spec_version or OPENLINEAGE_SPEC_VERSION
    schema_url = event.get("schemaURL")
    match = _CORE_URL.fullmatch(schema_url) if isinstance(schema_url, str) else None
    expected = f"{OPENLINEAGE_SPEC_BASE_URL}{version}/OpenLineage.json#/$defs/{kind}"
    if match is None:
        problems.append(
            f"schemaURL: {schema_url!r} is not an OpenLineage core schema URL"
            f" (expected {expected!r})"
        )
    else:
        url_version, defs, url_kind = match.groups()
        if url_kind != kind:
            problems.append(
                f"schemaURL: names {url_kind} but the event is a {kind}"
                " (by its run/dataset/job keys)"
            )
        if spec_version is not None:
            if (url_version, defs) != (spec_version, "$defs"):
                problems.append(f"schemaURL: expected {expected!r}, got {schema_url!r}")
        elif schema_path(f"{OPENLINEAGE_SPEC_BASE_URL}{url_version}/OpenLineage.json") is not None:
            version = url_version
        else:
            problems.append(f"schemaURL: unknown OpenLineage version {url_version!r}")
    core = f"{OPENLINEAGE_SPEC_BASE_URL}{version}/OpenLineage.json"
    core_path = schema_path(core)
    if core_path is None:
        return [*problems, f"(event): no core schema for version {version!r}"]
    document = _load(core_path)
    definition = next(
        (
            f"/{defs}/{kind}"
            for defs in ("$defs", "definitions")
            if _pointer_exists(document, f"/{defs}/{kind}")
        ),
        None,
    )
    detailed = _errors(f"{core}#{definition}", event, "") if definition else []
    problems.extend(detailed)
    if not detailed:
        whole = _errors(core, event, "")
        if whole:
            kinds = "/".join(_KINDS)
            problems.append(
                f"(event): valid as a {kind} but not against the whole core schema"
                f" ({kinds} are exclusive)"
            )
            problems.extend(whole)
    for where, key, facet in _facets(event):
        problems.extend(facet_violations(key, facet, container=where))
    return problems


def validate_event(
    event: Mapping[str, Any], *, spec_version: str | None = OPENLINEAGE_SPEC_VERSION
) -> None:
    """Raise AssertionError listing every violation of the core schema and of each facet schema."""
    problems = event_violations(event, spec_version=spec_version)
    if problems:
        raise AssertionError(
            f"event does not conform ({len(problems)} problems):\n  " + "\n  ".join(problems)
        )
