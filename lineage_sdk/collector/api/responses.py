"""The API's JSON answers, encoded with orjson."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import JSONResponse

__all__ = ["JSONBody"]


class JSONBody(JSONResponse):
    """orjson-encoded JSON: the lineage answers are big, and FastAPI's encoder is slow for them.
    (A JSONResponse subclass, so FastAPI documents each route's response model in OpenAPI.)"""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
