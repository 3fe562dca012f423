"""The graph page: ``/`` and its static files (no CDN, no inline script; see ``PAGE_CSP``)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["STATIC_DIR", "router", "static_files"]

STATIC_DIR = Path(__file__).parents[1] / "static"

router = APIRouter(include_in_schema=False)


@router.get("/")
async def page() -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8")


def static_files() -> StaticFiles:
    """The app to mount at ``/static``."""
    return StaticFiles(directory=STATIC_DIR)
