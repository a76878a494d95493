"""Issue 18, item 3, over HTTP against a real API process: an open KB stream ends once its token
is revoked (``rag revoke-token -``) or its KB deleted, and the open-stream caps answer 429 with
Retry-After. The API runs with small caps (2 per user, 3 in all) and a 1 s token check."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import _create_user
from tests.support import ROOT, Api, Proc, child_env, free_port, poll, sql_value, start

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(services_env: dict[str, str], log_dir: Path) -> Iterator[dict[str, Any]]:
    port = free_port()
    env = child_env(services_env)
    api: Proc = start("api-streams", "knowledge_service",
                      {**env, "KS_PORT": str(port), "EVENTS_MAX_STREAMS_PER_USER": "2", "EVENTS_MAX_STREAMS": "3",
                       "EVENTS_RETRY_AFTER_S": "4", "EVENTS_TOKEN_CHECK_S": "1", "EVENTS_POLL_INTERVAL_S": "0.2"},
                      log_dir)
    url = f"http://127.0.0.1:{port}"
    try:
        def ready() -> bool:
            assert api.alive(), f"api exited:\n{api.tail()}"
            try:
                return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        poll(ready, timeout=120, interval=0.5, what="streams API ready")
        yield {"url": url, "env": env}
    finally:
        api.stop()


def _user(stack: dict[str, Any], name: str) -> tuple[Api, str]:
    token = _create_user(stack["env"], f"{name}-{free_port()}")
    return Api(stack["url"], token), token


def _until_end(lines: Iterator[str]) -> tuple[list[tuple[str, Any]], float]:
    """Events read until ``end`` (or the stream closes), and the seconds it took."""
    started = time.monotonic()
    seen: list[tuple[str, Any]] = []
    event = "message"
    for line in lines:
        if line.startswith("event:"):
            event = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            seen.append((event, json.loads(line.split(":", 1)[1])))
            if event == "end":
                break
    return seen, time.monotonic() - started


def test_an_open_kb_stream_ends_once_its_token_is_revoked(stack: dict[str, Any]) -> None:
    user, token = _user(stack, "revoked-stream")
    kb = user.create_kb()
    user.upload(kb, name="listed.txt", data=b"A document the stream lists before the token is revoked.")
    with user.http.stream("GET", f"/api/v1/knowledge-bases/{kb}/events", timeout=httpx.Timeout(30, read=30)) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        assert next(line for line in lines if line.startswith("event:")) == "event: document"
        revoked = subprocess.run([sys.executable, "-m", "rag_cli", "revoke-token", "-"], input=token, cwd=ROOT,
                                 env=stack["env"], capture_output=True, text=True, timeout=60)
        assert revoked.returncode == 0, revoked.stderr
        seen, waited = _until_end(lines)
    assert seen[-1] == ("end", {"kb_id": kb, "reason": "revoked"}), seen
    assert waited < 5  # checked every second here (EVENTS_TOKEN_CHECK_S; at most 5 s by default)
    assert user.http.get(f"/api/v1/knowledge-bases/{kb}/events").status_code == 401


def test_an_open_kb_stream_ends_once_its_kb_is_deleted(stack: dict[str, Any]) -> None:
    user, _ = _user(stack, "deleted-kb-stream")
    kb = user.create_kb()
    with user.http.stream("GET", f"/api/v1/knowledge-bases/{kb}/events", timeout=httpx.Timeout(30, read=30)) as r:
        assert r.status_code == 200
        gone = "WITH gone AS (DELETE FROM knowledge_base WHERE id = $1 RETURNING id) SELECT count(*) FROM gone"
        assert sql_value(stack["env"]["DATABASE_URL"], gone, kb) == 1
        seen, _ = _until_end(r.iter_lines())
    assert seen[-1] == ("end", {"kb_id": kb, "reason": "kb_deleted"}), seen


def test_open_streams_are_capped_per_user_and_in_all(stack: dict[str, Any]) -> None:
    (a, _), (b, _), (c, _) = (_user(stack, f"capped-{x}") for x in "abc")
    kbs = {u: u.create_kb() for u in (a, b, c)}

    def open_stream(stack_: contextlib.ExitStack, u: Api) -> httpx.Response:
        return stack_.enter_context(u.http.stream("GET", f"/api/v1/knowledge-bases/{kbs[u]}/events",
                                                  timeout=httpx.Timeout(30, read=30)))

    with contextlib.ExitStack() as streams:
        assert [open_stream(streams, a).status_code for _ in range(2)] == [200, 200]
        third = a.http.get(f"/api/v1/knowledge-bases/{kbs[a]}/events")
        assert third.status_code == 429 and third.headers["retry-after"] == "4", third.text
        assert open_stream(streams, b).status_code == 200  # another user still gets one: 3 open in all
        total = c.http.get(f"/api/v1/knowledge-bases/{kbs[c]}/events")
        assert total.status_code == 429 and "on this server" in total.text
    # closed streams give their slots back (the server notices the disconnect at its next ping or poll)
    poll(lambda: _opens(c, kbs[c]), timeout=30, interval=0.5, what="a slot freed")


def _opens(u: Api, kb: int) -> bool:
    with u.http.stream("GET", f"/api/v1/knowledge-bases/{kb}/events", timeout=httpx.Timeout(30, read=30)) as r:
        return r.status_code == 200
