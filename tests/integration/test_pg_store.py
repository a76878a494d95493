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


async def test_the_worker_store_runs_a_split_document_to_its_swap(pool: asyncpg.Pool) -> None:
    from shared.domain.messages import IndexMessage
    from shared.domain.parts import plan_parts
    from shared.domain.records import PartCommit, PartCommitted, SplitCommit

    async with pool.acquire() as conn:
        msg, _ = await new_document(conn)
    store = PgWorkerStore(pool, dispatch_limit=2)
    claim = await store.claim_task(msg.task_id, 1)
    assert claim is not None
    chunks, vecs = chunk_set(5, "pooled parts")
    rows = await store.split_task(SplitCommit(claim, msg.document_id, msg.kb_id, msg.user_id, chunks,
                                              plan_parts(5, 2)))
    assert rows is not None and [r.released for r in rows] == [True, True, False]
    await store.mark_published(rows[0].id)
    outcomes = []
    for p in range(3):
        snap = await store.load_part_snapshot(msg.task_id, p)
        assert snap is not None and snap.state is not None and snap.task.split
        part = await store.claim_part(msg.task_id, p, 1)
        assert part is not None and await store.part_claim_is_current(part)
        staged = await store.read_part_chunks(part)
        assert staged is not None and [c.content for c in staged] == [c.content for c in chunks[part.first_chunk:
                                                                                               part.end_chunk]]
        assert await store.part_heartbeat(part) and await store.report_part_progress(part, 1)
        await store.record_embedding_run(part, msg.document_id, part.chunk_count, "w")
        outcomes.append(await store.commit_part(PartCommit(part, msg.document_id, msg.kb_id,
                                                           vecs[part.first_chunk:part.end_chunk])))
    assert outcomes == [PartCommitted.STAGED, PartCommitted.STAGED, PartCommitted.SWAPPED]
    assert IndexMessage.from_json(rows[2].body).part == 2
    snap_after = await store.load_task_snapshot(msg.task_id)
    assert snap_after is not None and snap_after.status is TaskStatus.SUCCESS and not snap_after.split
