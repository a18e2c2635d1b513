"""The management UI: `/` answers the page, `/ui/...` its scripts and styles, from the package.

The UI is plain HTML, CSS and JavaScript modules (`api/http/ui/`), with no build step
and nothing loaded from another host, so it works offline. It is a client of the
public HTTP API only: these routes serve files and need no login; the page logs in
against `/api/whoami` and sends the user's basic credentials with every API call.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI, Query
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

UI_DIR = Path(__file__).resolve().parent.parent / "ui"
UI_PATH = "/ui"
# The page must be fetched again after an upgrade; its modules are revalidated by ETag.
_NO_STORE = {"Cache-Control": "no-cache"}

router = APIRouter(tags=["ui"])


@router.get("/", include_in_schema=False)
async def index(
    refresh_ms: int | None = Query(None, ge=500, le=60_000,  # read by the page itself
                                   description="the page's refresh period (default 5 s)"),
) -> FileResponse:
    return FileResponse(UI_DIR / "index.html", media_type="text/html", headers=_NO_STORE)


def install_ui(app: FastAPI) -> None:
    """The page's route and its files, mounted under `/ui`."""
    app.include_router(router)
    app.mount(UI_PATH, StaticFiles(directory=UI_DIR), name="ui")
