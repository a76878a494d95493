"""Issue 8: a 50 MB plain-text log either indexes or ends FAILED ``parse_limit`` within the
sandbox's limits — never stuck — and the same worker goes on with the next document.

With the defaults it ends ``parse_limit``: its 107,338 chunks pass ``CHUNK_MAX_PER_DOCUMENT``
(20,000; chunking stops there), or its text passes ``PARSE_MAX_TEXT_CHARS`` first (measured
without that limit: extraction and embedding succeeded, then the one commit of 107,338 vectors
passed the 60 s statement timeout, FAILED ``database_unavailable`` after 365 s). Embeddings, if
any, come from a fake OpenAI-compatible server (``test_shutdown``).
"""

from __future__ import annotations

import time

import pytest

from tests.e2e.conftest import WorkerFactory
from tests.e2e.test_shutdown import fake_embeddings  # noqa: F401  (fixture)
from tests.support import Api
from tests.support.bigtext import log_text

pytestmark = pytest.mark.e2e

PARSE_TIMEOUT_S = 180  # the default PARSE_TIMEOUT_S: parsing + chunking must end within it


def test_a_50_mb_log_indexes_or_fails_parse_limit_never_stuck(
    api: Api, workers: WorkerFactory, fake_embeddings: str  # noqa: F811
) -> None:
    data = log_text(50_000_000).encode()
    # Production lock / heartbeat timings (not the fault tests' FAST ones): a 4 s lock and 2 s AMQP
    # heartbeats leave no room for committing 90,000 chunks on a busy 2-core machine.
    w = workers(embedding_provider="openai", embedding_base_url=fake_embeddings,
                parse_timeout_s=str(PARSE_TIMEOUT_S))
    kb = api.create_kb("big-log")
    started = time.monotonic()
    doc = api.upload(kb, name="app.log.txt", data=data)
    # Extraction is bounded by PARSE_TIMEOUT_S; embedding + commit of ≈90,000 chunks follow.
    d = api.wait_terminal(doc["document_id"], timeout=PARSE_TIMEOUT_S + 600)
    elapsed = time.monotonic() - started
    print(f"\nBIG-LOG 50 MB: {d['status']} ({d['task']['error_code']}) after {elapsed:.0f} s, "
          f"{d['chunk_count']} chunks", flush=True)
    if d["status"] == "FAILED":
        assert d["task"]["error_code"] == "parse_limit", d["task"]
        assert elapsed < PARSE_TIMEOUT_S + 60, elapsed  # decided inside the sandbox's limits
    else:
        assert d["status"] == "INDEXED" and d["chunk_count"] > 10_000, d
        chunks = api.http.get(f"/api/v1/documents/{doc['document_id']}/chunks", params={"limit": 50}).json()
        assert all(c["token_count"] <= 250 and len(c["content"]) <= 2000 for c in chunks["items"])
    after = api.upload(kb, name="after.txt", data=b"The worker goes on after the big log. " * 20)
    assert api.wait_terminal(after["document_id"], timeout=300)["status"] == "INDEXED"
    assert w.alive(), w.tail()
