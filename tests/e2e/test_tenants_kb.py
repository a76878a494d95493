"""Issue 18 over real processes: the embedding cache is per tenant (a second user's upload of the
same bytes makes as many model calls as the first, read from ``embedding_run``), and the
knowledge-base lifecycle (rename, paged list, delete while documents are indexing: nothing of it
is left in the database or the bucket, nothing is resurrected by a late message)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest
from minio import Minio

from shared.adapters.rabbitmq import Publisher, connect
from shared.domain.messages import IndexMessage
from shared.settings import KnowledgeSettings
from tests.e2e.conftest import WorkerFactory
from tests.support import Api, model_calls, poll, queue_depth, sql, sql_value
from tests.support.bigtext import paragraphs

pytestmark = pytest.mark.e2e
N = 8  # paragraphs = chunks
INDEXING = 20  # documents of the knowledge base deleted while they index


def _text(paras: list[str]) -> bytes:
    return "\n\n".join(paras).encode()


def _objects(bucket: str, prefix: str) -> list[str]:
    s = KnowledgeSettings()
    client = Minio(s.s3_endpoint, access_key=s.s3_access_key.get_secret_value(),
                   secret_key=s.s3_secret_key.get_secret_value(), secure=s.s3_secure)
    return [str(o.object_name) for o in client.list_objects(bucket, prefix=prefix, recursive=True)]


async def _republish(amqp_url: str, msg: IndexMessage) -> None:
    conn = await connect(amqp_url, name="test-late-message", heartbeat_s=30, robust=False)
    try:
        await (await Publisher.open(conn, 10)).publish(msg.to_json())
    finally:
        await conn.close()


def test_another_tenants_upload_of_the_same_bytes_costs_as_many_model_calls(
    make_user: Callable[[str], Api], workers: WorkerFactory, services_env: dict[str, str],
) -> None:
    dsn = services_env["DATABASE_URL"]
    workers()
    alice, bob = make_user("alice"), make_user("bob")
    data = _text(paragraphs(N, seed=uuid.uuid4().int % 10**9))  # texts no earlier test cached
    first = alice.upload(alice.create_kb("alice"), name="secret.txt", data=data)["document_id"]
    assert alice.wait_terminal(first)["status"] == "INDEXED"
    second = bob.upload(bob.create_kb("bob"), name="guess.txt", data=data)["document_id"]
    assert bob.wait_terminal(second)["status"] == "INDEXED"
    assert model_calls(dsn, first) == model_calls(dsn, second) == (1, N, 0)  # no hit on Alice's entries
    # P3 within one tenant, across its knowledge bases: Bob's second copy costs no model call
    third = bob.upload(bob.create_kb("bob-2"), name="again.txt", data=data)["document_id"]
    assert bob.wait_terminal(third)["status"] == "INDEXED"
    assert model_calls(dsn, third) == (0, 0, N)
    owners = sql(dsn, "SELECT d.user_id, count(DISTINCT c.text_sha256) AS n FROM embedding_cache c"
                      " JOIN document_info d ON d.user_id = c.user_id WHERE d.id = ANY($1::bigint[])"
                      " GROUP BY d.user_id", [first, second])
    assert sorted(int(r["n"]) for r in owners) == [N, N]  # each tenant holds its own entries


def _state(dsn: str, kb: int, user: int, docs: list[int], tasks: list[int]) -> dict[str, int]:
    """Rows of the knowledge base left anywhere (all 0 once deleted), and the owner's cache entries
    whose text no chunk of theirs has."""
    one = "SELECT count(*) FROM {} WHERE {}"
    checks = {
        "knowledge_base": ("knowledge_base", "id = $1", kb),
        "document_info": ("document_info", "id = ANY($1::bigint[]) OR kb_id = $2", docs, kb),
        "index_task": ("index_task", "document_id = ANY($1::bigint[]) OR kb_id = $2", docs, kb),
        "document_chunk": ("document_chunk", "document_id = ANY($1::bigint[])", docs),
        "document_vector": ("document_vector", "document_id = ANY($1::bigint[]) OR kb_id = $2", docs, kb),
        "outbox_unpublished": ("outbox", "task_id = ANY($1::bigint[]) AND published_at IS NULL", tasks),
        "object_removal": ("object_removal", "object_key LIKE $1", f"kb/{kb}/%"),
        "orphan_cache": ("embedding_cache c", "c.user_id = $1 AND NOT EXISTS (SELECT 1 FROM document_chunk ch"
                         " JOIN document_info d ON d.id = ch.document_id WHERE ch.text_sha256 = c.text_sha256"
                         " AND d.user_id = $1)", user),
    }
    return {name: int(sql_value(dsn, one.format(table, where), *args))
            for name, (table, where, *args) in checks.items()}


def test_a_knowledge_base_deleted_while_20_documents_index_leaves_nothing(
    make_user: Callable[[str], Api], workers: WorkerFactory, services_env: dict[str, str],
) -> None:
    dsn, bucket = services_env["DATABASE_URL"], services_env["S3_BUCKET"]
    # a slow model: 3 embedding batches of 2 chunks per document, 0.25 s each
    workers(embedding_batch_size="2", rag_fault_points="embed_batch=pause:0.25")
    api, other = make_user("owner"), make_user("other")
    kept = api.create_kb("kept")  # the owner's other knowledge base: its document and entries stay
    # indexed first: one worker takes one user's tasks in id order
    kept_doc = api.upload(kept, name="kept.txt", data=_text(paragraphs(4, seed=uuid.uuid4().int % 10**9)))
    kb = api.create_kb("doomed")
    ups = [api.upload(kb, name=f"d{i}.txt", data=_text(paragraphs(6, seed=uuid.uuid4().int % 10**9)))
           for i in range(INDEXING)]
    docs, tasks = [u["document_id"] for u in ups], [u["task_id"] for u in ups]
    user = int(sql_value(dsn, "SELECT user_id FROM knowledge_base WHERE id = $1", kb))

    # the list is paged and filtered by status
    page = api.http.get(f"/api/v1/knowledge-bases/{kb}/documents", params={"offset": 5, "limit": 10}).json()
    assert page["total"] == INDEXING and [d["document_id"] for d in page["items"]] == docs[5:15]

    def mid_run() -> bool:  # some documents committed (chunks, cache entries), one run in flight
        r = sql(dsn, "SELECT count(*) FILTER (WHERE status = 'SUCCESS') AS done,"
                     " count(*) FILTER (WHERE status = 'RUNNING') AS running FROM index_task WHERE kb_id = $1", kb)[0]
        return bool(r["done"] >= 2 and r["running"] == 1)

    poll(mid_run, timeout=120, interval=0.05, what="2 documents indexed and one running")
    indexed = api.http.get(f"/api/v1/knowledge-bases/{kb}/documents", params={"status": "INDEXED"}).json()
    assert indexed["total"] >= 2 and {d["status"] for d in indexed["items"]} == {"INDEXED"}
    assert other.http.delete(f"/api/v1/knowledge-bases/{kb}").status_code == 404  # not the other user's
    assert other.http.patch(f"/api/v1/knowledge-bases/{kb}", json={"name": "mine"}).status_code == 404

    r = api.http.delete(f"/api/v1/knowledge-bases/{kb}")
    assert r.status_code == 204, r.text
    again = api.http.delete(f"/api/v1/knowledge-bases/{kb}")
    assert (again.status_code, again.json()["error_code"]) == (404, "knowledge_base_not_found")
    assert api.http.get(f"/api/v1/knowledge-bases/{kb}/documents").status_code == 404

    # every delivery handled (the run in flight fenced out, the rest skipped), and a late message
    # for a deleted document (its first generation, published again) resurrects nothing
    asyncio.run(_republish(services_env["AMQP_URL"], IndexMessage(
        task_id=tasks[-1], document_id=docs[-1], kb_id=kb, user_id=user, generation=1)))
    poll(lambda: queue_depth("rag.index.queue") == 0, timeout=120, interval=0.5, what="the queue drained")
    assert _state(dsn, kb, user, docs, tasks) == dict.fromkeys(
        ("knowledge_base", "document_info", "index_task", "document_chunk", "document_vector", "outbox_unpublished",
         "object_removal", "orphan_cache"), 0)
    assert _objects(bucket, f"kb/{kb}/") == []
    # the owner's other knowledge base is untouched, and can be renamed
    assert api.document(kept_doc["document_id"])["status"] == "INDEXED"
    assert sql_value(dsn, "SELECT count(*) FROM embedding_cache WHERE user_id = $1", user) == 4
    renamed = api.http.patch(f"/api/v1/knowledge-bases/{kept}", json={"name": "kept, renamed"})
    assert renamed.status_code == 200 and renamed.json()["name"] == "kept, renamed"
    assert [k["name"] for k in api.http.get("/api/v1/knowledge-bases").json()["items"]] == ["kept, renamed"]
