"""Where the JSON schemas of our own facets live inside the installed package.

Our facets' ``_schemaURL`` values point under https://lineage-sdk.github.io/spec/; the same files
ship in ``lineage_sdk/schemas/`` (path for path), so validators resolve them offline.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from lineage_sdk.models.constants import CUSTOM_SPEC_BASE_URL

__all__ = ["SCHEMAS_DIR", "custom_schema_path"]

#: The folder holding our schema files, mirroring https://lineage-sdk.github.io/spec/.
SCHEMAS_DIR = Path(__file__).resolve().parent.parent / "schemas"


def custom_schema_path(url: str) -> Path | None:
    """The shipped file for one of our schema URLs (fragment ignored), or None if it isn't ours.

    Only plain relative paths below :data:`SCHEMAS_DIR` are mapped (no ``..``), so a URL can
    never point a validator at another file on disk.
    """
    base = url.partition("#")[0]
    if not base.startswith(CUSTOM_SPEC_BASE_URL):
        return None
    relative = PurePosixPath(base[len(CUSTOM_SPEC_BASE_URL) :])
    if (
        not relative.parts
        or relative.is_absolute()
        or any(p in ("..", ".", "") for p in relative.parts)
    ):
        return None
    path = SCHEMAS_DIR.joinpath(*relative.parts)
    return path if path.is_file() else None
