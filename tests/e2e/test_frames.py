"""Issue 18, item 1, in a real browser (Debian's chromium driven by Playwright, as in
``test_admin_page``): a page served from another port of the same host frames ``/admin``, and the
frame does not render (``X-Frame-Options: DENY``, CSP ``frame-ancestors 'none'``). The same page
frames a page of its own, which does render (the check can fail). ``/admin`` itself loads under
its strict CSP with no violation, and ``/docs`` still starts Swagger UI."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import Proc, child_env, free_port, poll, start

pytestmark = pytest.mark.e2e

CHROMIUM = Path("/usr/bin/chromium")
HAVE_CHROMIUM = CHROMIUM.exists()
MS = 1000
pw = pytest.importorskip("playwright.async_api")


@pytest.fixture(scope="module")
def api_url(services_env: dict[str, str], log_dir: Path) -> Iterator[str]:
    port = free_port()
    api: Proc = start("api-frames", "knowledge_service", {**child_env(services_env), "KS_PORT": str(port)}, log_dir)
    url = f"http://127.0.0.1:{port}"
    try:
        def ready() -> bool:
            assert api.alive(), f"api exited:\n{api.tail()}"
            try:
                return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        poll(ready, timeout=120, interval=0.5, what="frames API ready")
        yield url
    finally:
        api.stop()


@pytest.fixture(scope="module")
def framing_site(api_url: str) -> Iterator[str]:
    """Another origin (same host, another port): ``/`` frames the API's /admin and ``/own``."""
    page = (f'<!doctype html><iframe id="admin" name="admin" src="{api_url}/admin" width="900" height="600"></iframe>'
            '<iframe id="own" src="/own" width="300" height="100"></iframe>').encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'<!doctype html><p id="rendered">own page</p>' if self.path == "/own" else page
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    if not HAVE_CHROMIUM:
        pytest.fail(f"{CHROMIUM} missing: apt-get install chromium (the Makefile's browser target does it)")
    async with pw.async_playwright() as p:
        b = await p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield b
        await b.close()


async def test_admin_framed_from_another_port_does_not_render(browser: Any, framing_site: str, api_url: str) -> None:
    context = await browser.new_context()
    pg = await context.new_page()
    await pg.goto(framing_site)
    own = pg.frame_locator("#own")
    await pw.expect(own.locator("#rendered")).to_have_text("own page", timeout=15 * MS)  # framing works here
    admin = pg.frame(name="admin")
    assert admin is not None
    await admin.wait_for_load_state()
    # nothing of the page in the frame: no sign-in form, no button to click (Chromium shows its error page)
    assert await admin.locator("#signin-panel").count() == 0
    assert await admin.locator("button").count() == 0
    assert not admin.url.startswith(api_url), admin.url
    await context.close()


async def test_admin_loads_under_its_csp_without_violations(browser: Any, api_url: str) -> None:
    context = await browser.new_context()
    pg = await context.new_page()
    messages: list[str] = []
    errors: list[str] = []
    pg.on("console", lambda msg: messages.append(msg.text))
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    response = await pg.goto(f"{api_url}/admin")
    assert response is not None and "frame-ancestors 'none'" in response.headers["content-security-policy"]
    await pg.fill("#token", "not-a-token")
    await pg.click("#signin")
    await pw.expect(pg.locator("#signin-error")).to_contain_text("not valid")  # admin.js runs
    await context.close()
    assert errors == [] and [m for m in messages if "Content Security Policy" in m] == []


async def test_docs_starts_swagger_ui_under_its_csp(browser: Any, api_url: str) -> None:
    context = await browser.new_context()
    pg = await context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    await pg.goto(f"{api_url}/docs")
    await pw.expect(pg.locator(".swagger-ui .info .title")).to_contain_text("RAG knowledge service", timeout=30 * MS)
    await pw.expect(pg.locator(".opblock-summary-path", has_text="/api/v1/tasks/{task_id}/events")).to_have_count(1)
    await context.close()
    assert errors == []
