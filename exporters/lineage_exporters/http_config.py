"""The ``[lineage.http]`` table of the ``http`` exporter (apart from the exporter, which imports
httpx, so that listing the configuration does not)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from lineage_sdk.config.schema import check_url
from lineage_sdk.config.sections import Section, UriSetting

__all__ = ["HttpExporterConfig"]


class HttpExporterConfig(Section):
    """The `http` exporter: POSTs events to an OpenLineage HTTP endpoint such as Marquez."""

    url: Annotated[str | None, UriSetting()] = Field(
        default=None,
        description="OpenLineage HTTP endpoint base URL (OPENLINEAGE_URL also sets it).",
    )
    endpoint: str = Field(default="api/v1/lineage", description="Path appended to `url`.")
    api_key: str | None = Field(
        default=None,
        description=(
            "Bearer token sent as `Authorization: Bearer ...` (OPENLINEAGE_API_KEY also sets it)."
        ),
    )
    timeout_ms: int = Field(default=5000, ge=1, description="Timeout of one HTTP request.")
    compression: Literal["none", "gzip"] = Field(
        default="none",
        description=(
            "gzip sends each body gzip-compressed (`Content-Encoding: gzip`), as the OpenLineage "
            "client's `compression: gzip` does (`lineage-collector serve` accepts it; check that "
            "another endpoint does)."
        ),
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return check_url(value, ("http", "https"))
