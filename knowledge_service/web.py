"""The admin page (``/admin``) and the Swagger UI (``/docs``), both served from files shipped in
Python packages: the page works offline, with no front-end build step and no CDN.

- ``/static/admin/``: ``knowledge_service/static/admin`` (plain HTML, CSS and JavaScript on the
  public HTTP API).
- ``/static/swagger/``: the Swagger UI 5 distribution of the ``swagger-ui-bundle-v2`` package,
  started by ``/static/docs/init.js`` (no inline script: see ``security_headers``).
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

STATIC_DIR = Path(__file__).resolve().parent / "static"
DOCS_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<link rel="stylesheet" href="/static/swagger/swagger-ui.css">
<link rel="icon" href="/static/swagger/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui" data-openapi-url="{openapi_url}"></div>
<script src="/static/swagger/swagger-ui-bundle.js"></script>
<script src="/static/docs/init.js"></script>
</body>
</html>
"""
web = APIRouter(include_in_schema=False)


@web.get("/admin")
async def admin_page() -> FileResponse:
    return FileResponse(STATIC_DIR / "admin" / "index.html", headers={"Cache-Control": "no-cache"})


@web.get("/admin/", response_class=RedirectResponse)
async def admin_slash() -> RedirectResponse:
    return RedirectResponse("/admin")


def mount(app: FastAPI) -> None:
    """Add the page, the static files and an offline ``/docs`` to ``app`` (created with
    ``docs_url=None, redoc_url=None``)."""
    app.mount("/static/swagger", StaticFiles(directory=swagger_ui_path), name="swagger")
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    page = DOCS_PAGE.format(title=escape(f"{app.title} - API docs"),
                            openapi_url=escape(app.openapi_url or "/openapi.json"))

    async def docs() -> HTMLResponse:
        return HTMLResponse(page)

    app.add_api_route("/docs", docs, include_in_schema=False)
    app.include_router(web)
