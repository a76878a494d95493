"""Repository of ``index_task``: generation issue, claim, heartbeat, progress, finish, re-queue, in-flight cap.

Every function takes an open ``asyncpg`` connection; functions that form one commit point open
their own transaction. Lock order is always ``document_info`` row, then ``index_task`` row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import asyncpg

from shared.adapters.postgres.repo.cache import cache_release
from shared.adapters.postgres.repo.objects import queue_object_removal
from shared.adapters.postgres.repo.outbox import delete_part_outbox, insert_outbox
from shared.adapters.postgres.repo.sql import (
    ACTIVE_SQL,
    CLAIMABLE_SQL,
    DEAD_LETTER_FAILABLE_SQL,
    TASK_COLUMNS,
    Rollback,
)
from shared.domain.fencing import EnqueueDecision, TaskSnapshot
from shared.domain.messages import IndexMessage
from shared.domain.records import Claim, NewContent, OutboxRow
from shared.domain.states import DocumentStatus, TaskStatus


async def count_in_flight(conn: asyncpg.Connection, user_id: int) -> int:
    return int(
        await conn.fetchval(
            "SELECT count(*) FROM index_task WHERE user_id = $1"
            f" AND status IN {ACTIVE_SQL}",
            user_id,
        )
    )


async def get_task(conn: asyncpg.Connection, user_id: int, task_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"SELECT {TASK_COLUMNS} FROM index_task t WHERE t.id = $1 AND t.user_id = $2", task_id, user_id
    )


async def load_task_snapshot(conn: asyncpg.Connection, task_id: int) -> TaskSnapshot | None:
    """The task with its document's generation and status; None if the task is gone."""
    r = await conn.fetchrow(
        "SELECT t.id, t.document_id, t.kb_id, t.user_id, t.status, t.generation, t.attempt,"
        " d.index_generation, d.status AS document_status, t.retry_count, t.max_retry_count,"
        " t.update_time, EXISTS (SELECT 1 FROM index_split s WHERE s.task_id = t.id"
        "   AND s.generation = t.generation) AS split"
        " FROM index_task t JOIN document_info d ON d.id = t.document_id WHERE t.id = $1",
        task_id,
    )
    if r is None:
        return None
    return TaskSnapshot(
        task_id=r["id"], document_id=r["document_id"], kb_id=r["kb_id"], user_id=r["user_id"],
        status=TaskStatus(r["status"]), generation=r["generation"], attempt=r["attempt"],
        document_generation=r["index_generation"],
        document_status=DocumentStatus(r["document_status"]),
        retry_count=r["retry_count"], max_retry_count=r["max_retry_count"],
        update_time=r["update_time"], split=r["split"],
    )


async def issue_generation(
    conn: asyncpg.Connection, snap: TaskSnapshot, decision: EnqueueDecision,
    content: NewContent | None = None, dispatch_limit: int | None = None,
) -> tuple[IndexMessage, OutboxRow] | None:
    """Apply an ISSUE decision in ONE transaction: bump the document's generation (the only
    place generations are issued after creation), re-arm the task with it — conditional on the
    status and generation the decision was made on — and write the outbox row.

    A task re-armed from a terminal status gives up its dispatch slot (its new row waits for
    one, see :func:`insert_outbox` and ``dispatch_limit``); an active task keeps its slot.

    Returns None (and changes nothing) if the task moved since ``snap`` was read: the caller
    re-reads and decides again, so concurrent requests produce exactly one transition.
    """
    assert decision.new_status is not None
    async with conn.transaction():
        # The row as this transaction locks it: the object new content replaces is named here,
        # so concurrent replacements each release exactly the one they superseded.
        doc = await conn.fetchrow(
            "SELECT status, object_key, pending_object_key FROM document_info WHERE id = $1 FOR UPDATE",
            snap.document_id,
        )
        if doc is None:
            return None
        served = doc["status"] == DocumentStatus.INDEXED.value  # it has a served version: keep it
        gen = await conn.fetchval(
            "UPDATE document_info SET index_generation = index_generation + 1,"
            " status = CASE WHEN $2 THEN status ELSE 'INDEXING' END,"
            " error_message = CASE WHEN $2 THEN error_message END, update_time = now()"
            " WHERE id = $1 RETURNING index_generation",
            snap.document_id, served,
        )
        if content is not None:
            await _store_content(conn, snap.document_id, content, pending=served)
            released = doc["pending_object_key"] if served else doc["object_key"]
            if released is not None:
                await queue_object_removal(conn, released)
        retry_expr = "0" if decision.reset_retry_count else (
            "retry_count + 1" if decision.bump_retry_count else "retry_count"
        )
        task_id = await conn.fetchval(
            f"UPDATE index_task SET generation = $2, status = $3, retry_count = {retry_expr},"
            " error_code = NULL, error_message = NULL, start_time = NULL, end_time = NULL,"
            f" dispatched_at = CASE WHEN status IN {ACTIVE_SQL} THEN dispatched_at END,"
            " stage = NULL, progress = NULL,"
            " update_time = now() WHERE id = $1 AND status = $4 AND generation = $5 RETURNING id",
            snap.task_id, gen, decision.new_status.value, snap.status.value, snap.generation,
        )
        if task_id is None:
            raise Rollback
        await drop_split(conn, snap.task_id)  # every part fenced out: nothing staged stays
        msg = IndexMessage(
            task_id=snap.task_id, document_id=snap.document_id, kb_id=snap.kb_id,
            user_id=snap.user_id, generation=int(gen),
        )
        row = await insert_outbox(conn, msg, dispatch_limit)
    return msg, row


async def _store_content(conn: asyncpg.Connection, document_id: int, content: NewContent, *, pending: bool) -> None:
    """Write ``content`` as the pending version (``pending``) or over the document's own columns
    (a document never indexed: nothing is served, nothing to keep)."""
    if pending:
        sql = ("UPDATE document_info SET pending_filename = $2, pending_content_type = $3,"
               " pending_size_bytes = $4, pending_sha256 = $5, pending_object_key = $6,"
               " pending_create_time = now() WHERE id = $1")
    else:
        # new bytes never collide with another document's content slot (0011): the slot is dropped
        sql = ("UPDATE document_info SET filename = $2, content_type = $3, size_bytes = $4,"
               " sha256 = $5, object_key = $6, dedup_slot = false WHERE id = $1")
    await conn.execute(sql, document_id, content.filename, content.content_type, content.size_bytes,
                       content.sha256, content.object_key)


async def try_issue_generation(
    conn: asyncpg.Connection, snap: TaskSnapshot, decision: EnqueueDecision,
    content: NewContent | None = None, dispatch_limit: int | None = None,
) -> tuple[IndexMessage, OutboxRow] | None:
    """:func:`issue_generation`, with a lost race reported as None (transaction rolled back)."""
    try:
        return await issue_generation(conn, snap, decision, content, dispatch_limit)
    except Rollback:
        return None


# ------------------------------------------------------------------ worker
async def claim_task(conn: asyncpg.Connection, task_id: int, generation: int) -> Claim | None:
    """Claim: RUNNING, attempt + 1 (the claim's fencing token). None if not claimable any more,
    or if the task is split (its parts run; a document delivery redelivered after the split)."""
    v = await conn.fetchval(
        "UPDATE index_task SET status = 'RUNNING', attempt = attempt + 1, start_time = now(),"
        " end_time = NULL, stage = 'DOWNLOADING', progress = 0, update_time = now()"
        f" WHERE id = $1 AND generation = $2 AND status IN {CLAIMABLE_SQL}"
        " AND NOT EXISTS (SELECT 1 FROM index_split WHERE task_id = $1) RETURNING attempt",
        task_id, generation,
    )
    return None if v is None else Claim(task_id, generation, int(v))


async def heartbeat(conn: asyncpg.Connection, claim: Claim) -> bool:
    """Bump ``update_time`` of our RUNNING claim; False means we were fenced out."""
    v = await conn.fetchval(
        "UPDATE index_task SET update_time = now() WHERE id = $1 AND status = 'RUNNING'"
        " AND generation = $2 AND attempt = $3 RETURNING id",
        claim.task_id, claim.generation, claim.attempt,
    )
    return v is not None


async def report_progress(conn: asyncpg.Connection, claim: Claim, stage: str, progress: float) -> bool:
    """Write the run's ``stage`` and ``progress`` (0..1) — only under our current claim
    ``(RUNNING, generation, attempt)``; also a heartbeat. False means we were fenced out."""
    v = await conn.fetchval(
        "UPDATE index_task SET stage = $4, progress = $5, update_time = now() WHERE id = $1"
        " AND status = 'RUNNING' AND generation = $2 AND attempt = $3 RETURNING id",
        claim.task_id, claim.generation, claim.attempt, stage, progress,
    )
    return v is not None


async def claim_is_current(conn: asyncpg.Connection, claim: Claim) -> bool:
    """The pre-embedding fence check: our claim is still the task's and the document's current one."""
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM index_task t JOIN document_info d ON d.id = t.document_id"
            " WHERE t.id = $1 AND t.status = 'RUNNING' AND t.generation = $2 AND t.attempt = $3"
            " AND d.index_generation = $2)",
            claim.task_id, claim.generation, claim.attempt,
        )
    )


async def finish_unsuccessfully(
    conn: asyncpg.Connection,
    claim: Claim,
    *,
    document_id: int,
    status: TaskStatus,
    error_code: str,
    error_message: str,
    warnings: Sequence[str] = (),
) -> bool:
    """Task FAILED/TIMEOUT, fenced on ``claim``; False if fenced out. A document with a served
    version (INDEXED) keeps it untouched (status, warnings, chunks, object): the failure is the
    pending version's, shown by its task. A document never indexed becomes FAILED with this
    run's ``warnings`` (what its extraction reported before it failed; none if it failed while
    extracting)."""
    assert status in (TaskStatus.FAILED, TaskStatus.TIMEOUT)
    try:
        async with conn.transaction():
            gen = await conn.fetchval(
                "SELECT index_generation FROM document_info WHERE id = $1 FOR UPDATE", document_id
            )
            if gen != claim.generation:
                raise Rollback
            ok = await conn.fetchval(
                "UPDATE index_task SET status = $4, error_code = $5, error_message = $6,"
                " end_time = now(), update_time = now() WHERE id = $1 AND status = 'RUNNING'"
                " AND generation = $2 AND attempt = $3 RETURNING id",
                claim.task_id, claim.generation, claim.attempt, status.value, error_code, error_message[:4000],
            )
            if ok is None:
                raise Rollback
            await conn.execute(
                "UPDATE document_info SET status = 'FAILED', error_message = $2, warnings = $3::jsonb,"
                " update_time = now() WHERE id = $1 AND status <> 'INDEXED'",
                document_id, error_message[:4000], json.dumps(list(warnings)),
            )
    except Rollback:
        return False
    return True


# ------------------------------------------------------------------ scanner and dead letters
async def active_tasks_older_than(conn: asyncpg.Connection, seconds: float, limit: int) -> list[asyncpg.Record]:
    """Active tasks untouched for ``seconds``, with the database's ``now`` (one clock). Tasks
    waiting for a dispatch slot (held outbox row, not dispatched) are left out: they wait in
    PostgreSQL by design and the relay releases them; nothing of theirs is in the broker. Split
    tasks are left out too (their parts are scanned instead)."""
    return list(
        await conn.fetch(
            "SELECT id, document_id, status, generation, attempt, start_time, update_time, now() AS now"
            f" FROM index_task WHERE status IN {ACTIVE_SQL}"
            " AND (status = 'RUNNING' OR dispatched_at IS NOT NULL)"
            # a split task is never timed out as a whole: its parts are watched (repo.parts)
            " AND NOT EXISTS (SELECT 1 FROM index_split s WHERE s.task_id = index_task.id)"
            " AND (update_time < now() - make_interval(secs => $1)"
            "      OR (status = 'RUNNING' AND start_time < now() - make_interval(secs => $1)))"
            " ORDER BY update_time LIMIT $2",
            seconds, limit,
        )
    )


async def requeue_task(
    conn: asyncpg.Connection, task_id: int, status: str, generation: int, seen_update_time: Any
) -> OutboxRow | None:
    """Write a fresh outbox row for the same generation and touch ``update_time`` — only if the
    task is exactly as the scanner saw it (so concurrent scanners re-publish once)."""
    async with conn.transaction():
        r = await conn.fetchrow(
            "UPDATE index_task SET update_time = now() WHERE id = $1 AND status = $2 AND generation = $3"
            " AND update_time = $4 RETURNING id, document_id, kb_id, user_id, generation",
            task_id, status, generation, seen_update_time,
        )
        if r is None:
            return None
        msg = IndexMessage(task_id=r["id"], document_id=r["document_id"], kb_id=r["kb_id"], user_id=r["user_id"],
                           generation=r["generation"])
        return await insert_outbox(conn, msg, None)


async def fail_dead_lettered(
    conn: asyncpg.Connection, task_id: int, generation: int, error_code: str, error_message: str
) -> bool:
    """Task FAILED (document FAILED) for a dead-lettered message of the current generation."""
    async with conn.transaction():
        doc_id = await conn.fetchval(
            "SELECT d.id FROM document_info d JOIN index_task t ON t.document_id = d.id"
            " WHERE t.id = $1 AND d.index_generation = $2 FOR UPDATE OF d",
            task_id, generation,
        )
        if doc_id is None:
            return False
        ok = await conn.fetchval(
            "UPDATE index_task SET status = 'FAILED', error_code = $3, error_message = $4, end_time = now(),"
            " update_time = now() WHERE id = $1 AND generation = $2"
            f" AND status IN {DEAD_LETTER_FAILABLE_SQL} RETURNING id",
            task_id, generation, error_code, error_message,
        )
        if ok is None:
            return False
        await drop_split(conn, task_id)
        await conn.execute(  # a served version stays served (see finish_unsuccessfully)
            "UPDATE document_info SET status = 'FAILED', error_message = $2, update_time = now()"
            " WHERE id = $1 AND status <> 'INDEXED'",
            doc_id, error_message,
        )
    return True


async def drop_split(conn: asyncpg.Connection, task_id: int, *, swapped: bool = False) -> None:
    """Inside a transaction that ends or re-arms the task (new generation, failure, DLQ drain):
    the task's split (parts and staged rows cascade) and its unpublished part outbox rows go.
    Unless the split was just ``swapped`` in (its texts are chunks now), the embedding cache
    entries its parts wrote that no chunk of the owner holds are released (``cache_release``), as
    a delete of the document releases its chunks' entries."""
    keys = [] if swapped else await conn.fetch(
        "SELECT DISTINCT s.text_sha256, d.user_id FROM staged_chunk s JOIN index_task t ON t.id = s.task_id"
        " JOIN document_info d ON d.id = t.document_id WHERE s.task_id = $1", task_id,
    )
    await conn.execute("DELETE FROM index_split WHERE task_id = $1", task_id)
    await delete_part_outbox(conn, task_id)
    if keys:
        await cache_release(conn, int(keys[0]["user_id"]), [bytes(r["text_sha256"]) for r in keys])


#: The transaction-scoped advisory lock serializing one user's new work (``$1``: user id).
IN_FLIGHT_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended('rag:in-flight-user', $1))"


async def reserve_in_flight_slot(
    conn: asyncpg.Connection, user_id: int, limit: int, *, locked: bool = False
) -> bool:
    """Inside the caller's transaction: whether one more in-flight task (WAITING, RETRYING,
    RUNNING) fits under the user's ``limit``.

    Takes a transaction-scoped advisory lock on the user first (:data:`IN_FLIGHT_LOCK_SQL`;
    ``locked``: the caller's transaction already took it), so concurrent uploads / retries of
    one user are serialized until the caller commits the new task: two of them cannot both take
    the last slot. The count runs in a later statement than the lock, so its snapshot sees every
    task committed by the lock's previous holder.
    """
    if not conn.is_in_transaction():
        raise RuntimeError("reserve_in_flight_slot must run inside the transaction that creates the work")
    if not locked:
        await conn.execute(IN_FLIGHT_LOCK_SQL, user_id)
    return await count_in_flight(conn, user_id) < limit
