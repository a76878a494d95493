"""Issue 12: the admin page in a real headless browser (Debian's chromium driven by Playwright,
no browser download), and the Server-Sent Events behind it.

One API and one worker for the whole module (started once): the API with an in-flight cap of 2
and ``Retry-After: 1``, so the page's upload queue meets a 429 and must wait and go on; the
worker with ``before_download=fail:flaky`` (a transient fault for one chosen document), and small
embedding batches with a 0.3 s pause after each (a slow model: the progress bar has steps to show
however fast the machine is). Screenshots go to
``.artifacts/screenshots/`` (gitignored; the path is printed).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from knowledge_service.search.modes import DEFAULT_MODE, SearchMode
from tests.e2e.conftest import _create_user
from tests.support import CORPUS, ROOT, Api, Proc, child_env, free_port, logged, poll, sql_value, start

pytestmark = pytest.mark.e2e

CHROMIUM = Path("/usr/bin/chromium")
HAVE_CHROMIUM = CHROMIUM.exists()
SHOTS = ROOT / ".artifacts" / "screenshots"
MS = 1000  # Playwright timeouts are in milliseconds
WORDS = ("index chunk vector broker worker fence lease queue token retry stage progress document search "
         "parser sandbox embedding generation attempt outbox relay scanner timeout heartbeat").split()

pw = pytest.importorskip("playwright.async_api")


def _prose(n_words: int, seed: int) -> str:
    rng = random.Random(seed)
    sentences = []
    while n_words > 0:
        k = rng.randint(8, 20)
        sentences.append(" ".join(rng.choice(WORDS) for _ in range(k)).capitalize() + ".")
        n_words -= k
    paragraphs = [" ".join(sentences[i:i + 6]) for i in range(0, len(sentences), 6)]
    return "\n\n".join(paragraphs)


@pytest.fixture(scope="module")
def stack(services_env: dict[str, str], log_dir: Path) -> Iterator[dict[str, Any]]:
    """``{"url", "api": Proc, "worker": Proc, "env"}``: this module's API and worker."""
    port = free_port()
    env = child_env(services_env)
    api = start("api-admin-page", "knowledge_service",
                {**env, "KS_PORT": str(port), "MAX_IN_FLIGHT_TASKS_PER_USER": "2", "IN_FLIGHT_RETRY_AFTER_S": "1"},
                log_dir)
    worker = start("worker-admin-page", "task_service",
                   {**env, "WORKER_NAME": "worker-admin-page", "EMBEDDING_BATCH_SIZE": "4",
                    # queue positions: one task runs while the next waits in line (with the default
                    # PREFETCH=2 the next is claimed at once and waits for the model instead)
                    "PREFETCH": "1",
                    "RAG_FAULT_POINTS": "before_download=fail:flaky,embed_batch=pause:0.3"}, log_dir)
    url = f"http://127.0.0.1:{port}"
    procs: list[Proc] = [api, worker]
    try:
        def ready() -> bool:
            for p in procs:
                assert p.alive(), f"{p.name} exited:\n{p.tail()}"
            try:
                return httpx.get(f"{url}/readyz", timeout=2).status_code == 200 and logged(worker, "consuming")
            except httpx.HTTPError:
                return False

        poll(ready, timeout=120, interval=0.5, what="admin-page API and worker ready")
        yield {"url": url, "api": api, "worker": worker, "env": env}
    finally:
        for p in procs:
            p.stop()


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    """Playwright's async API: its sync API runs an event loop in the test thread, which the
    fixtures' ``asyncio.run`` (tests.support.sql) cannot run beside."""
    if not HAVE_CHROMIUM:
        pytest.fail(f"{CHROMIUM} missing: apt-get install chromium (the Makefile's browser target does it)")
    async with pw.async_playwright() as p:
        b = await p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield b
        await b.close()


@pytest.fixture
def user(stack: dict[str, Any], request: pytest.FixtureRequest) -> Api:
    token = _create_user(stack["env"], f"{request.node.name[:40]}-{free_port()}")
    return Api(stack["url"], token)


@pytest.fixture
async def page(browser: Any, stack: dict[str, Any], user: Api, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """A page signed in as ``user`` with a fresh knowledge base created through the page."""
    context = await browser.new_context(viewport={"width": 1400, "height": 900})
    pg = await context.new_page()
    pg.set_default_timeout(30 * MS)
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("dialog", lambda dialog: dialog.accept())
    await pg.goto(f"{stack['url']}/admin")
    await pg.fill("#token", "not-a-token")
    await pg.click("#signin")
    await pw.expect(pg.locator("#signin-error")).to_contain_text("not valid")
    await pg.fill("#token", str(user.http.headers["Authorization"]).split()[1])
    await pg.click("#signin")
    await pw.expect(pg.locator("#app")).to_be_visible()
    await pg.fill("#kb-name", f"kb {request.node.name[:30]}")
    await pg.click("#kb-create")
    await pw.expect(pg.locator("#kb-select option")).to_have_count(1)
    await pw.expect(pg.locator("#live")).to_have_class("live on")  # the KB's event stream is open
    yield pg
    await shot(pg, request.node.name)
    await context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


async def shot(pg: Any, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    await pg.screenshot(path=str(path), full_page=True)
    print(f"\n[screenshot] {path}")
    return path


def row(pg: Any, filename: str) -> Any:
    return pg.locator("#docs tbody tr", has=pg.locator("td.file", has_text=filename))


async def upload(pg: Any, files: list[Path]) -> None:
    await pg.set_input_files("#file-input", [str(f) for f in files])


RECORDER = """() => {
  window.__seen = [];
  const note = () => document.querySelectorAll('#docs tbody tr').forEach((tr) => window.__seen.push(
      [tr.querySelector('td.file')?.textContent, tr.dataset.status, tr.dataset.progress]));
  new MutationObserver(note).observe(document.querySelector('#docs tbody'), {subtree: true, childList: true});
  window.__queue = [];
  new MutationObserver(() => document.querySelectorAll('#queue li').forEach(
      (li) => window.__queue.push(li.textContent))).observe(document.querySelector('#queue'),
      {subtree: true, childList: true, characterData: true});
}"""


async def test_upload_three_files_watch_progress_and_the_429_queue(page: Any, tmp_path: Path, user: Api) -> None:
    big = tmp_path / "big-handbook.txt"
    big.write_text(_prose(4_000, seed=1))  # ≈ 28 KB: ~25 chunks, ~7 embedding batches of 4, ≥ 2 s
    small = [tmp_path / "alpha.md", tmp_path / "beta.txt"]
    small[0].write_text("# Alpha\n\n" + _prose(200, seed=2))
    small[1].write_text(_prose(200, seed=3))
    await page.evaluate(RECORDER)
    await upload(page, [big, *small])  # cap 2 in flight: the third upload meets a 429 and waits
    await pw.expect(page.locator('#docs tbody tr[data-status="INDEXED"]')).to_have_count(3, timeout=120 * MS)
    seen: list[list[str | None]] = await page.evaluate("window.__seen")
    queue: list[str] = await page.evaluate("window.__queue")
    shown = [float(p) for name, status, p in seen if name == big.name and status == "INDEXING" and p]
    assert any(0 < p < 1 for p in shown), f"the big file's progress bar never moved: {sorted(set(shown))}"
    assert shown == sorted(shown), "progress went backwards"
    assert any("429" in q for q in queue), f"no upload waited for a 429: {queue}"
    assert await page.locator("#queue li.done").count() == 3
    r = row(page, big.name)
    await pw.expect(r.locator("td.stage")).to_have_text("done")
    await pw.expect(r.locator("td.chunks")).not_to_have_text("0")
    kb = await page.locator("#kb-select").input_value()
    docs = user.http.get(f"/api/v1/knowledge-bases/{kb}/documents").json()
    assert {d["filename"]: d["task"]["progress"] for d in docs["items"]} == {f.name: 1.0 for f in [big, *small]}
    await r.locator("button.show-chunks").click()
    await pw.expect(page.locator("#chunks-panel")).to_be_visible()
    await pw.expect(page.locator("#chunks li").first).to_contain_text("tokens")


async def test_encrypted_pdf_fails_with_its_code_and_message(page: Any) -> None:
    await upload(page, [CORPUS / "password.pdf"])
    r = row(page, "password.pdf")
    await pw.expect(r.locator("td.status .badge")).to_have_text("FAILED", timeout=60 * MS)
    await pw.expect(r.locator("td.err code")).to_have_text("pdf_encrypted")
    await pw.expect(r.locator("td.err .msg")).to_contain_text("password")
    await pw.expect(r.locator("button.retry")).to_be_visible()


async def test_transient_fault_then_retry_recovers(page: Any, tmp_path: Path) -> None:
    flaky = tmp_path / "flaky-notes.txt"
    flaky.write_text(_prose(300, seed=4))
    await upload(page, [flaky])
    r = row(page, flaky.name)
    await pw.expect(r.locator("td.status .badge")).to_have_text("FAILED", timeout=60 * MS)
    await pw.expect(r.locator("td.err code")).to_have_text("storage_unavailable")
    await pw.expect(r.locator("td.stage")).to_have_text("failed in downloading")
    await r.locator("button.retry").click()
    await pw.expect(r.locator("td.status .badge")).to_have_text("INDEXED", timeout=60 * MS)
    await pw.expect(r.locator("td.err")).to_have_text("")
    await pw.expect(r.locator("button.retry")).to_have_count(0)


async def test_delete_a_document(page: Any, tmp_path: Path, user: Api) -> None:
    doomed = tmp_path / "doomed.md"
    doomed.write_text("# Doomed\n\n" + _prose(100, seed=5))
    await upload(page, [doomed])
    r = row(page, doomed.name)
    await pw.expect(r.locator("td.status .badge")).to_have_text("INDEXED", timeout=60 * MS)
    document_id = int(await r.get_attribute("data-doc-id"))
    await r.locator("button.delete").click()  # the confirm() dialog is accepted by the fixture
    await pw.expect(r).to_have_count(0)
    assert user.http.get(f"/api/v1/documents/{document_id}").status_code == 404


async def test_search_shows_hits_with_scores(page: Any, tmp_path: Path) -> None:
    notes = tmp_path / "harbour.md"
    notes.write_text("# Harbour\n\n## Tides\n\nThe lighthouse keeper logs the tide tables every dawn.\n\n"
                     "## Boats\n\nFishing boats leave before sunrise.\n")
    await upload(page, [notes])
    await pw.expect(row(page, notes.name).locator("td.status .badge")).to_have_text("INDEXED", timeout=60 * MS)
    # the modes come from the API's schema (knowledge_service/search/modes.py), the default selected
    options = page.locator("#search-mode option")
    await pw.expect(options).to_have_text([m.value for m in SearchMode])
    await pw.expect(page.locator("#search-mode")).to_have_value(DEFAULT_MODE.value)
    await page.fill("#search-q", "who logs the tide tables?")
    await page.click("#search-btn")
    first = page.locator("#results li.hit").first
    await pw.expect(first).to_contain_text("lighthouse keeper")
    await pw.expect(first.locator(".meta")).to_contain_text("harbour.md")
    await pw.expect(first.locator(".meta")).to_contain_text("section Harbour")
    assert float(await first.locator(".score").text_content()) > 0


async def test_a_hit_whose_text_two_documents_share_names_the_other(page: Any, tmp_path: Path) -> None:
    """Issue 29: search shows the shared passage once, and names the other document under the hit."""
    text = "The Tamberlyn depot closes at six; ask for Mr Ostrowick at the gate.\n"
    first, second = tmp_path / "depot-notice.txt", tmp_path / "depot-copy.txt"
    first.write_text(text)
    second.write_text(text + "\n\n")  # other bytes (not a duplicate upload), the same chunk text
    await upload(page, [first, second])
    await pw.expect(page.locator('#docs tbody tr[data-status="INDEXED"]')).to_have_count(2, timeout=60 * MS)
    await page.fill("#search-q", "Tamberlyn depot Ostrowick")
    await page.click("#search-btn")
    await pw.expect(page.locator("#results li.hit")).to_have_count(1)
    hit = page.locator("#results li.hit").first
    shown = await hit.locator(".meta").first.text_content() or ""
    other = second.name if first.name in shown else first.name
    await pw.expect(hit.locator(".also-in")).to_contain_text(f"also in: {other} #0 (document ")


async def test_docs_page_loads_swagger_ui_offline(browser: Any, stack: dict[str, Any]) -> None:
    context = await browser.new_context()
    pg = await context.new_page()
    outside: list[str] = []

    async def only_local(route: Any) -> None:
        if route.request.url.startswith(stack["url"]):
            await route.continue_()
        else:
            outside.append(route.request.url)
            await route.abort()

    await pg.route("**/*", only_local)
    await pg.goto(f"{stack['url']}/docs")
    await pw.expect(pg.locator(".swagger-ui .info .title")).to_contain_text("RAG knowledge service", timeout=30 * MS)
    await pw.expect(pg.locator(".opblock-summary-path", has_text="/api/v1/tasks/{task_id}/events")).to_have_count(1)
    await shot(pg, "swagger-docs")
    await context.close()
    assert outside == [], f"/docs fetched from outside: {outside}"


# ------------------------------------------------------------------ Server-Sent Events (no browser)


def _events(client: httpx.Client, path: str, limit: int = 10_000) -> Iterator[tuple[str, Any]]:
    with client.stream("GET", path, timeout=httpx.Timeout(60, read=60)) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        event = "message"
        for line in r.iter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                yield event, json.loads(line.split(":", 1)[1])
                limit -= 1
                if limit == 0:
                    return


def test_task_event_stream_follows_a_run_to_its_end(stack: dict[str, Any], user: Api, tmp_path: Path) -> None:
    kb = user.create_kb()
    up = user.upload(kb, name="streamed.txt", data=_prose(4_000, seed=6).encode())
    behind = user.upload(kb, name="behind.txt", data=b"Uploaded while the worker is busy: it waits in line.")
    waiting = user.http.get(f"/api/v1/tasks/{behind['task_id']}").json()
    # one worker, prefetch 1: 1 or 2 behind what earlier tests left waiting in the session's database
    left = sql_value(stack["env"]["DATABASE_URL"], "SELECT count(*) FROM index_task"
                     " WHERE status IN ('WAITING', 'RETRYING') AND kb_id <> $1", kb)
    assert waiting["status"] == "WAITING" and waiting["queue_position"] - left in (1, 2), (waiting, left)
    seen = list(_events(user.http, f"/api/v1/tasks/{up['task_id']}/events"))
    names = [e for e, _ in seen]
    assert names[-1] == "end" and seen[-1][1]["status"] == "SUCCESS", seen[-3:]
    tasks = [d for e, d in seen if e == "task"]
    assert tasks[-1]["status"] == "SUCCESS" and tasks[-1]["stage"] == "WRITING" and tasks[-1]["progress"] == 1.0
    progress = [t["progress"] for t in tasks if t["status"] == "RUNNING" and t["stage"] == "EMBEDDING"]
    assert progress == sorted(progress) and any(0 < p < 1 for p in progress), progress
    assert all(a != b for a, b in itertools.pairwise(tasks)), "a repeated snapshot was sent"
    # same auth and 404 rules as the other task routes
    assert httpx.get(f"{stack['url']}/api/v1/tasks/{up['task_id']}/events").status_code == 401
    other = Api(stack["url"], _create_user(stack["env"], f"other-{free_port()}"))
    assert other.http.get(f"/api/v1/tasks/{up['task_id']}/events").status_code == 404
    assert user.http.get("/api/v1/tasks/999999999/events").status_code == 404
    assert user.wait_terminal(behind["document_id"], timeout=60)["task"]["queue_position"] is None


def test_an_abandoned_stream_is_closed_on_the_server(stack: dict[str, Any], user: Api) -> None:
    kb = user.create_kb()
    user.upload(kb, name="quiet.txt", data=b"A quiet knowledge base with one document.")
    first = next(_events(user.http, f"/api/v1/knowledge-bases/{kb}/events", limit=1))
    assert first[0] == "document"  # the stream started; leaving the with-block closed the connection
    log: Path = stack["api"].log

    def closed() -> bool:
        for line in log.read_text(errors="replace").splitlines():
            if '"event stream closed"' in line:
                rec = json.loads(line)
                if rec.get("kb_id") == kb and rec.get("reason") == "disconnected":
                    return True
        return False

    poll(closed, timeout=30, what="the server closing the abandoned stream")


# ------------------------------------------------------------------ issue 18: duplicates, versions, KB lifecycle


async def test_a_duplicate_upload_is_shown_as_a_duplicate_not_a_failure(page: Any, tmp_path: Path) -> None:
    twice = tmp_path / "twice.md"
    twice.write_text("# Twice\n\n" + _prose(80, seed=7))
    await upload(page, [twice])
    r = row(page, twice.name)
    await pw.expect(r.locator("td.status .badge")).to_have_text("INDEXED", timeout=60 * MS)
    document_id = await r.get_attribute("data-doc-id")
    await upload(page, [twice])  # same bytes, same KB: 200 with duplicate_of
    dup = page.locator("#queue li.duplicate")
    await pw.expect(dup).to_have_text(f"{twice.name}: duplicate of document #{document_id}")
    await pw.expect(page.locator("#queue li.failed")).to_have_count(0)
    await pw.expect(page.locator("#docs tbody tr.doc")).to_have_count(1)


async def test_a_failed_pending_version_is_on_its_own_line(page: Any, tmp_path: Path, user: Api) -> None:
    served = tmp_path / "contract.txt"
    served.write_text(_prose(120, seed=8))
    await upload(page, [served])
    r = row(page, served.name)
    await pw.expect(r.locator("td.status .badge")).to_have_text("INDEXED", timeout=60 * MS)
    document_id = int(await r.get_attribute("data-doc-id"))
    # new content that cannot be indexed (no text): the served version stays
    put = user.http.put(f"/api/v1/documents/{document_id}/content",
                        files={"file": ("contract-v2.txt", b" \n\n \t\n", "text/plain")})
    assert put.status_code == 202, put.text
    line = page.locator(f'#docs tbody tr.pending[data-doc-id="{document_id}"]')
    await pw.expect(line.locator("td.status .badge")).to_have_text("FAILED", timeout=60 * MS)
    await pw.expect(line.locator("td.pending-file")).to_contain_text("contract-v2.txt")
    await pw.expect(line.locator("td.err code")).to_have_text("no_text")
    await pw.expect(line.locator("button.retry")).to_be_visible()
    # the served version's row: INDEXED, no error, no Retry
    await pw.expect(r.locator("td.status .badge")).to_have_text("INDEXED")
    await pw.expect(r.locator("td.err")).to_have_text("")
    await pw.expect(r.locator("button.retry")).to_have_count(0)
    # the line sits right below its document, and the status filter hides both together
    assert await page.evaluate(f"""() => document.querySelector('#docs tr.doc[data-doc-id="{document_id}"]')
        .nextElementSibling.classList.contains('pending')""")
    await page.select_option("#status-filter", "FAILED")
    await pw.expect(r).to_be_hidden()
    await pw.expect(line).to_be_hidden()
    await page.select_option("#status-filter", "")
    await pw.expect(line).to_be_visible()


async def test_rename_then_delete_the_knowledge_base(page: Any, tmp_path: Path, user: Api) -> None:
    kb = int(await page.locator("#kb-select").input_value())
    doc = tmp_path / "inside.md"
    doc.write_text("# Inside\n\n" + _prose(80, seed=9))
    await upload(page, [doc])
    await pw.expect(row(page, doc.name).locator("td.status .badge")).to_have_text("INDEXED", timeout=60 * MS)
    await page.fill("#kb-new-name", "renamed in the page")
    await page.click("#kb-rename")
    await pw.expect(page.locator("#kb-select option")).to_have_text([f"renamed in the page (#{kb})"])
    await page.click("#kb-delete")  # the confirm() dialog is accepted by the fixture
    await pw.expect(page.locator("#kb-select option")).to_have_count(0)
    await pw.expect(page.locator("#docs tbody tr")).to_have_count(0)
    await pw.expect(page.locator("#action-error")).to_have_text("")
    assert user.http.get("/api/v1/knowledge-bases").json()["items"] == []
    assert user.http.get(f"/api/v1/knowledge-bases/{kb}/documents").status_code == 404
