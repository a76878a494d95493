"""The admin page (``/admin``) and the Swagger UI (``/docs``), both served from files shipped in
Python packages: the page works offline, with no front-end build step and no CDN.

- ``/static/admin/``: ``knowledge_service/static/admin`` (plain HTML, CSS and JavaScript on the
  public HTTP API).
- ``/static/swagger/``: the Swagger UI 5 distribution of the ``swagger-ui-bundle-v2`` package.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

STATIC_DIR = Path(__file__).resolve().parent / "static"
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

    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} - API docs",
            swagger_js_url="/static/swagger/swagger-ui-bundle.js", swagger_css_url="/static/swagger/swagger-ui.css",
            swagger_favicon_url="/static/swagger/favicon-32x32.png",
        )

    app.add_api_route("/docs", docs, include_in_schema=False)
    app.include_router(web)
