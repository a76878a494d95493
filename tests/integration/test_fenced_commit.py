"""The fenced commit (``shared.adapters.postgres.repo.chunks.commit_chunks``) against real PostgreSQL: attempt and
generation fences, and readers seeing the old chunk set or the new one, never none."""

from __future__ import annotations

import asyncio

import asyncpg
import numpy as np

from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.domain.fencing import RequestKind
from shared.domain.records import Claim
from tests.integration.conftest import Connect
from tests.integration.helpers import (
    apoll,
    chunk_contents,
    chunk_set,
    claim_attempt,
    commit,
    index_document,
    issue,
    new_document,
)


async def _task(conn: asyncpg.Connection, task_id: int) -> asyncpg.Record:
    return await conn.fetchrow("SELECT status, generation, attempt, end_time FROM index_task WHERE id = $1", task_id)


async def _doc(conn: asyncpg.Connection, document_id: int) -> tuple[str, int, int]:
    r = await conn.fetchrow(
        "SELECT status, index_generation, chunk_count FROM document_info WHERE id = $1", document_id
    )
    return r["status"], r["index_generation"], r["chunk_count"]


async def test_each_claim_bumps_the_attempt(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    assert await tasks_repo.claim_task(db, msg.task_id, 1) == Claim(msg.task_id, 1, 1)
    assert await tasks_repo.claim_task(db, msg.task_id, 1) == Claim(msg.task_id, 1, 2)
    assert await tasks_repo.claim_task(db, msg.task_id, 2) is None  # no such generation
    task = await _task(db, msg.task_id)
    assert (task["status"], task["attempt"]) == ("RUNNING", 2)


async def test_commit_with_an_old_attempt_writes_nothing(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    await claim_attempt(db, msg.task_id, 1)
    await claim_attempt(db, msg.task_id, 1)

    assert await commit(db, msg, 1, 1, *chunk_set(2, "paused")) is False
    assert await db.fetchval("SELECT count(*) FROM document_chunk WHERE document_id = $1", msg.document_id) == 0
    assert await db.fetchval("SELECT count(*) FROM document_vector WHERE document_id = $1", msg.document_id) == 0
    assert (await _task(db, msg.task_id))["status"] == "RUNNING"
    assert await _doc(db, msg.document_id) == ("INDEXING", 1, 0)


async def test_commit_with_the_current_attempt_writes_everything_once(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    attempt = await claim_attempt(db, msg.task_id, 1)
    assert attempt == 1
    chunks, vecs = chunk_set(4, "new")

    assert await commit(db, msg, 1, attempt, chunks, vecs) is True
    rows = await db.fetch(
        "SELECT c.chunk_index, c.content, v.embedding, v.kb_id FROM document_chunk c"
        " JOIN document_vector v ON v.chunk_id = c.id WHERE c.document_id = $1 ORDER BY c.chunk_index",
        msg.document_id,
    )
    assert [r["chunk_index"] for r in rows] == [0, 1, 2, 3]
    assert [r["content"] for r in rows] == [c.content for c in chunks]
    assert np.allclose(np.stack([r["embedding"].to_numpy() for r in rows]), vecs)
    assert {r["kb_id"] for r in rows} == {msg.kb_id}
    task = await _task(db, msg.task_id)
    assert task["status"] == "SUCCESS" and task["end_time"] is not None
    assert await _doc(db, msg.document_id) == ("INDEXED", 1, 4)

    assert await commit(db, msg, 1, attempt, *chunk_set(1, "again")) is False  # task is SUCCESS now
    assert await chunk_contents(db, msg.document_id) == [c.content for c in chunks]


async def test_commit_after_a_generation_bump_keeps_the_old_chunks(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    await index_document(db, msg, 2, "old")
    gen2 = await issue(db, msg.task_id, RequestKind.NEW_CONTENT)
    attempt = await claim_attempt(db, msg.task_id, gen2.generation)
    assert attempt is not None
    gen3 = await issue(db, msg.task_id, RequestKind.NEW_CONTENT)  # new content while gen 2 runs
    assert (gen2.generation, gen3.generation) == (2, 3)

    assert await commit(db, msg, gen2.generation, attempt, *chunk_set(3, "stale")) is False
    assert await chunk_contents(db, msg.document_id) == ["old chunk 0", "old chunk 1"]
    assert await _doc(db, msg.document_id) == ("INDEXED", 3, 2)  # the served version stays (issue 11)
    task = await _task(db, msg.task_id)
    assert (task["status"], task["generation"]) == ("WAITING", 3)


GATE_KEY = 0x49544754  # advisory lock the test-only trigger below waits on


async def _blocked_on_gate(conn: asyncpg.Connection, pid: int) -> bool:
    return bool(await conn.fetchval(
        "SELECT wait_event_type = 'Lock' AND wait_event = 'advisory' FROM pg_stat_activity WHERE pid = $1", pid
    ))


async def test_readers_see_old_chunks_while_a_commit_is_open(db: asyncpg.Connection, connect: Connect) -> None:
    """Pauses the real commit transaction half-way (old chunks deleted, new chunks inserted, vectors
    pending) with a trigger on this document's vector inserts that waits on an advisory lock we hold."""
    msg, _ = await new_document(db)
    await index_document(db, msg, 3, "old")
    gen2 = await issue(db, msg.task_id, RequestKind.REINDEX, force=True)
    attempt = await claim_attempt(db, msg.task_id, gen2.generation)
    assert attempt is not None
    writer, reader = await connect(), await connect()
    trigger = f"it_gate_{msg.document_id}"
    await db.execute(
        "CREATE OR REPLACE FUNCTION it_gate() RETURNS trigger LANGUAGE plpgsql AS"
        f" $$BEGIN PERFORM pg_advisory_xact_lock_shared({GATE_KEY}); RETURN NEW; END$$"
    )
    await db.execute(
        f"CREATE TRIGGER {trigger} BEFORE INSERT ON document_vector FOR EACH ROW"
        f" WHEN (NEW.document_id = {msg.document_id}) EXECUTE FUNCTION it_gate()"
    )
    try:
        async with db.transaction():
            await db.execute("SELECT pg_advisory_xact_lock($1)", GATE_KEY)
            committing = asyncio.create_task(commit(writer, msg, gen2.generation, attempt, *chunk_set(2, "new")))
            await apoll(lambda: _blocked_on_gate(reader, writer.get_server_pid()), deadline_s=10,
                        what="commit paused at the vector insert")
            assert await chunk_contents(reader, msg.document_id) == ["old chunk 0", "old chunk 1", "old chunk 2"]
            assert await reader.fetchval(
                "SELECT count(*) FROM document_vector WHERE document_id = $1", msg.document_id) == 3
        assert await asyncio.wait_for(committing, timeout=10) is True
    finally:
        await db.execute(f"DROP TRIGGER IF EXISTS {trigger} ON document_vector")
    assert await chunk_contents(reader, msg.document_id) == ["new chunk 0", "new chunk 1"]


async def test_readers_never_see_zero_chunks_during_reindex_rounds(db: asyncpg.Connection, connect: Connect) -> None:
    msg, _ = await new_document(db)
    await index_document(db, msg, 1, "round-0")
    reader = await connect()
    samples: list[tuple[int, int]] = []
    done = asyncio.Event()

    async def read_loop() -> None:
        while not done.is_set():
            samples.append(tuple(await reader.fetchrow(
                "SELECT (SELECT count(*) FROM document_chunk WHERE document_id = $1),"
                " (SELECT count(*) FROM document_vector WHERE document_id = $1)", msg.document_id,
            )))

    async def write_rounds() -> None:
        try:
            for i in range(1, 21):
                nxt = await issue(db, msg.task_id, RequestKind.REINDEX, force=True)
                await index_document(db, nxt, 1 + i % 4, f"round-{i}")
        finally:
            done.set()

    await asyncio.gather(read_loop(), write_rounds())
    assert len(samples) >= 20, "the reader did not run alongside the writer"
    torn = [(chunks, vectors) for chunks, vectors in samples if chunks == 0 or chunks != vectors]
    assert not torn, f"reader saw {sorted(set(torn))} among {len(samples)} samples"
    assert await _doc(db, msg.document_id) == ("INDEXED", 21, 1 + 20 % 4)
