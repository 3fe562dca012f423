"""The API's JSON answers, encoded with orjson (integers beyond 64 bits exactly too)."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from lineage_sdk.models.json_exact import dumps_exact

__all__ = ["JSONBody"]


class JSONBody(JSONResponse):
    """orjson-encoded JSON: the lineage answers are big, and FastAPI's encoder is slow for them.
    (A JSONResponse subclass, so FastAPI documents each route's response model in OpenAPI.)"""

    def render(self, content: Any) -> bytes:
        return dumps_exact(content)
