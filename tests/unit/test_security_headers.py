"""Issue 18, item 1: security headers on every response, a strict CSP for the admin page (which
therefore holds no inline script, style or event handler), and /docs started from a file."""

from __future__ import annotations

import re

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from knowledge_service import web
from knowledge_service.security_headers import ADMIN_CSP, API_CSP, DOCS_CSP, SecurityHeadersMiddleware, policy_for
from knowledge_service.web import STATIC_DIR


@pytest.fixture(scope="module")
def client() -> TestClient:
    app = FastAPI(docs_url=None, redoc_url=None)

    @app.get("/api/v1/thing")
    async def thing() -> dict[str, str]:
        return {"x": "y"}

    web.mount(app)
    app.add_middleware(SecurityHeadersMiddleware)
    return TestClient(app)


@pytest.mark.parametrize(("path", "csp"), [
    ("/admin", ADMIN_CSP), ("/static/admin/admin.js", ADMIN_CSP), ("/static/admin/admin.css", ADMIN_CSP),
    ("/docs", DOCS_CSP), ("/static/swagger/swagger-ui-bundle.js", DOCS_CSP), ("/static/docs/init.js", DOCS_CSP),
    ("/api/v1/thing", API_CSP), ("/no/such/path", API_CSP), ("/openapi.json", API_CSP),
])
def test_every_response_carries_the_headers(client: TestClient, path: str, csp: str) -> None:
    r = client.get(path)
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["content-security-policy"] == csp
    assert "frame-ancestors 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"


def test_admin_csp_allows_no_inline_code() -> None:
    directives = dict(d.strip().split(" ", 1) for d in ADMIN_CSP.split(";"))
    assert directives["default-src"] == "'self'"
    assert "unsafe" not in ADMIN_CSP  # no 'unsafe-inline', no 'unsafe-eval'
    assert policy_for("/admin/") == ADMIN_CSP


INLINE = {
    "inline script": re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE),
    "style element": re.compile(r"<style\b", re.IGNORECASE),
    "style attribute": re.compile(r"\sstyle\s*=", re.IGNORECASE),
    "event handler attribute": re.compile(r"\son[a-z]+\s*=", re.IGNORECASE),
    "javascript: URL": re.compile(r"javascript:", re.IGNORECASE),
}


@pytest.mark.parametrize("page", ["admin/index.html"])
def test_pages_hold_no_inline_code(page: str) -> None:
    html = (STATIC_DIR / page).read_text()
    assert [name for name, pattern in INLINE.items() if pattern.search(html)] == []


def test_admin_script_sets_no_inline_styles_or_markup() -> None:
    # Under style-src 'self', style attributes written as markup are blocked; CSSOM (el.style.x) is not.
    js = (STATIC_DIR / "admin" / "admin.js").read_text()
    assert ".innerHTML" not in js and ".outerHTML" not in js and "insertAdjacentHTML" not in js
    assert 'setAttribute("style"' not in js and "eval(" not in js and "new Function" not in js


def test_docs_page_has_no_inline_script(client: TestClient) -> None:
    html = client.get("/docs").text
    assert not INLINE["inline script"].search(html)
    assert '<script src="/static/docs/init.js"></script>' in html
    assert 'data-openapi-url="/openapi.json"' in html
