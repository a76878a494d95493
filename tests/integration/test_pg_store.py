"""The PostgreSQL adapters whose methods are repository functions bound to the pool
(``shared.adapters.postgres.pool.Pooled``): ``PgWorkerStore``, ``PgTaskStore`` and the API's
read side ``PgReads``, against real PostgreSQL — one pooled connection per call."""

from __future__ import annotations

import asyncpg

from shared.adapters.postgres.pg_store import PgTaskStore, PgWorkerStore
from shared.adapters.postgres.reads import PgReads
from shared.domain.records import ChunkCommit, Claim
from shared.domain.states import TaskStatus
from tests.integration.helpers import chunk_set, new_document


async def test_the_worker_store_runs_a_claim_to_its_commit(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        msg, _ = await new_document(conn)
    store = PgWorkerStore(pool)
    claim = await store.claim_task(msg.task_id, 1)
    assert claim == Claim(msg.task_id, 1, 1)
    assert await store.heartbeat(claim) and await store.claim_is_current(claim)
    assert await store.report_progress(claim, "EMBEDDING", 0.5)
    stale = Claim(msg.task_id, 1, 0)
    assert not await store.heartbeat(stale)
    chunks, vecs = chunk_set(2, "pooled")
    assert not await store.commit_chunks(ChunkCommit(stale, msg.document_id, msg.kb_id, chunks, vecs))
    assert await store.commit_chunks(ChunkCommit(claim, msg.document_id, msg.kb_id, chunks, vecs))
    snap = await store.load_task_snapshot(msg.task_id)
    assert snap is not None and snap.status is TaskStatus.SUCCESS
    assert not await store.finish_unsuccessfully(claim, document_id=msg.document_id, status=TaskStatus.FAILED,
                                                 error_code="x", error_message="too late")


async def test_the_task_store_and_the_read_side(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        msg, _ = await new_document(conn)
    store, reads = PgTaskStore(pool), PgReads(pool)
    assert await store.count_in_flight(msg.user_id) == 1
    kb = await store.create_knowledge_base(msg.user_id, "second", "all-MiniLM-L6-v2", 384)
    assert kb["name"] == "second" and await reads.kb_owned(msg.user_id, kb["kb_id"])
    assert [r["kb_id"] for r in await reads.list_kbs(msg.user_id)] == [msg.kb_id, kb["kb_id"]]
    doc = await reads.get_document(msg.user_id, msg.document_id)
    assert doc is not None and doc["document_id"] == msg.document_id
    assert [r["document_id"] for r in await reads.list_documents(msg.user_id, msg.kb_id)] == [msg.document_id]
    task = await reads.get_task(msg.user_id, msg.task_id)
    assert task is not None and task["status"] == "WAITING"
    assert await reads.get_task(msg.user_id + 1, msg.task_id) is None  # not the owner
    assert await store.delete_document(msg.document_id)
    assert not await store.delete_document(msg.document_id)
    assert await reads.document_owned(msg.user_id, msg.document_id) is None
