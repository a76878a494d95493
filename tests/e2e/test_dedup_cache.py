"""Issue 13: do no work twice, over real processes. Model calls are read from ``embedding_run``
(``cache_misses`` = chunks the model embedded, ``cache_hits`` = chunks the cache served).

One worker, small documents of one-paragraph chunks (tests.support.bigtext.paragraphs)."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from minio import Minio

from shared.adapters.rabbitmq import Publisher, connect
from shared.domain.messages import IndexMessage
from shared.settings import KnowledgeSettings
from tests.e2e.conftest import WorkerFactory
from tests.support import Api, model_calls, poll, skips, sql, sql_value
from tests.support.bigtext import paragraphs

pytestmark = pytest.mark.e2e
N = 12  # paragraphs = chunks


def _objects(bucket: str, prefix: str) -> list[str]:
    s = KnowledgeSettings()
    client = Minio(s.s3_endpoint, access_key=s.s3_access_key.get_secret_value(),
                   secret_key=s.s3_secret_key.get_secret_value(), secure=s.s3_secure)
    return [str(o.object_name) for o in client.list_objects(bucket, prefix=prefix, recursive=True)]


def _text(paras: list[str]) -> bytes:
    return "\n\n".join(paras).encode()


def _last_run(dsn: str, document_id: int) -> dict[str, Any]:
    return sql(dsn, "SELECT generation, chunk_count, cache_hits, cache_misses FROM embedding_run"
                    " WHERE document_id = $1 ORDER BY id DESC LIMIT 1", document_id)[0]


def _indexed_generation(api: Api, document_id: int, generation: int) -> dict[str, Any]:
    """Until the task of ``generation`` has ended (a served document stays INDEXED meanwhile)."""
    def done() -> dict[str, Any] | None:
        d = api.document(document_id)
        t = d["task"]
        return d if t["generation"] == generation and t["status"] in ("SUCCESS", "FAILED", "TIMEOUT") else None

    d = poll(done, timeout=120, interval=0.3, what=f"generation {generation} indexed")
    assert d["status"] == "INDEXED" and d["task"]["status"] == "SUCCESS", d
    return d


async def _republish(amqp_url: str, msg: IndexMessage) -> None:
    conn = await connect(amqp_url, name="test-duplicate", heartbeat_s=30, robust=False)
    try:
        await (await Publisher.open(conn, 10)).publish(msg.to_json())
    finally:
        await conn.close()


def test_reindex_edit_duplicate_message_and_reupload_cost_no_model_call(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn, bucket = services_env["DATABASE_URL"], services_env["S3_BUCKET"]
    workers()
    kb = api.create_kb("dedup-cache")
    paras = paragraphs(N, seed=uuid.uuid4().int % 10**9)  # texts no earlier test cached
    first = api.upload(kb, name="handbook.txt", data=_text(paras))
    doc_id = first["document_id"]
    doc = api.wait_terminal(doc_id)
    assert doc["status"] == "INDEXED" and doc["chunk_count"] == N, doc
    assert model_calls(dsn, doc_id) == (1, N, 0)

    # Identical re-upload: 200, the existing document, no new row, task or object.
    r = api.http.post(f"/api/v1/knowledge-bases/{kb}/documents", files={"file": ("copy.txt", _text(paras))})
    assert r.status_code == 200, r.text
    assert r.json()["duplicate_of"] == doc_id and r.json()["document_id"] == doc_id
    assert r.json()["task_id"] == first["task_id"] and r.json()["status"] == "INDEXED"
    assert sql_value(dsn, "SELECT count(*) FROM document_info WHERE kb_id = $1", kb) == 1
    assert sql_value(dsn, "SELECT count(*) FROM index_task WHERE kb_id = $1", kb) == 1
    assert len(_objects(bucket, f"kb/{kb}/")) == 1

    # A duplicate message of the finished generation: skipped, no model call.
    msg = IndexMessage(task_id=first["task_id"], document_id=doc_id, kb_id=kb,
                       user_id=int(sql_value(dsn, "SELECT user_id FROM index_task WHERE id = $1", first["task_id"])),
                       generation=1)
    asyncio.run(_republish(services_env["AMQP_URL"], msg))
    poll(lambda: "not_runnable" in skips(dsn, doc_id), timeout=60, what="duplicate message skipped")
    assert model_calls(dsn, doc_id) == (1, N, 0)

    # Forced reindex of unchanged content: every vector from the cache, no model call.
    r = api.http.post(f"/api/v1/documents/{doc_id}/reindex", json={"force": True})
    assert r.status_code == 202, r.text
    _indexed_generation(api, doc_id, 2)
    assert _last_run(dsn, doc_id) == {"generation": 2, "chunk_count": N, "cache_hits": N, "cache_misses": 0}
    assert model_calls(dsn, doc_id) == (1, N, N)

    # New content with one paragraph edited: only that chunk goes to the model.
    edited = list(paras)
    edited[N // 2] = edited[N // 2].replace("Paragraph", "Edited paragraph", 1)
    r = api.http.put(f"/api/v1/documents/{doc_id}/content", files={"file": ("handbook-v2.txt", _text(edited))})
    assert r.status_code == 202, r.text
    _indexed_generation(api, doc_id, 3)
    assert _last_run(dsn, doc_id) == {"generation": 3, "chunk_count": N, "cache_hits": N - 1, "cache_misses": 1}
    assert any(c["content"].startswith("Edited paragraph") for c in api.chunks(doc_id))

    # The old bytes are now nobody's content: a new document, its chunks all from the cache.
    again = api.upload(kb, name="handbook-v1.txt", data=_text(paras))
    assert again.get("duplicate_of") is None and again["document_id"] != doc_id
    assert api.wait_terminal(again["document_id"])["status"] == "INDEXED"
    assert model_calls(dsn, again["document_id"]) == (0, 0, N)


def test_copies_allowed_on_request_and_searched_once(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn, bucket = services_env["DATABASE_URL"], services_env["S3_BUCKET"]
    kb = api.create_kb("copies")
    data = _text(paragraphs(3, seed=uuid.uuid4().int % 10**9))
    # Concurrent identical uploads: the database lets exactly one create a document.
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(
            lambda i: api.http.post(f"/api/v1/knowledge-bases/{kb}/documents", files={"file": (f"c{i}.txt", data)}),
            range(6)))
    codes = sorted(a.status_code for a in answers)
    assert codes == [200] * 5 + [202], [a.text for a in answers]
    winner = next(a.json()["document_id"] for a in answers if a.status_code == 202)
    assert {a.json()["duplicate_of"] for a in answers if a.status_code == 200} == {winner}
    assert len(_objects(bucket, f"kb/{kb}/")) == 1  # the losers' objects were removed

    # allow_duplicate=true keeps the old behaviour: a second document...
    r = api.http.post(f"/api/v1/knowledge-bases/{kb}/documents?allow_duplicate=true", files={"file": ("c.txt", data)})
    assert r.status_code == 202 and r.json()["duplicate_of"] is None, r.text
    copy = r.json()["document_id"]
    workers()
    for d in (winner, copy):
        assert api.wait_terminal(d)["status"] == "INDEXED"
    assert sum(model_calls(dsn, d)[1] for d in (winner, copy)) == 3  # ...whose chunks come from the cache
    # ...and search still shows each chunk once.
    for mode in ("vector", "keyword", "hybrid"):
        r = api.http.post(f"/api/v1/knowledge-bases/{kb}/search", json={"query": "Paragraph the of", "top_k": 6,
                                                                          "mode": mode})
        assert r.status_code == 200, r.text
        hits = [(h["document_id"], h["chunk_index"]) for h in r.json()["results"]]
        assert len({i for _, i in hits}) == len(hits) == 3, (mode, hits)
