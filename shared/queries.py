"""SQL, one function per statement or per commit point (the fence lives in WHERE / RETURNING).

Every function takes an open ``asyncpg`` connection; functions that form one commit point open
their own transaction. Lock order is always ``document_info`` row, then ``index_task`` row.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg
import numpy as np
from pgvector import Vector

from shared.dispatch import HeldRow, choose_releases
from shared.embedding_cache import eviction_count
from shared.faults import fault_point
from shared.fencing import EnqueueDecision, TaskSnapshot
from shared.messages import IndexMessage
from shared.records import ChunkRow as ChunkRow  # re-exported: callers use queries.ChunkRow
from shared.records import NewContent as NewContent
from shared.records import OutboxRow as OutboxRow
from shared.states import ACTIVE, CLAIMABLE, QUEUED, DocumentStatus, TaskStatus, sources_for


def sql_in(statuses: frozenset[TaskStatus] | set[TaskStatus]) -> str:
    """``('A','B')`` for ``status IN ...``: status lists come from :mod:`shared.states`, never
    restated here (the values are enum members, not input)."""
    return "(" + ",".join(f"'{s.value}'" for s in sorted(statuses)) + ")"


_ACTIVE = sql_in(ACTIVE)  # in flight: the per-user cap, the scanner
_CLAIMABLE = sql_in(CLAIMABLE)
_QUEUED = sql_in(QUEUED)  # published, waiting for a worker
#: a dead-lettered message fails its task only while it is in flight (and FAILED is allowed)
_DEAD_LETTER_FAILABLE = sql_in({s for s in ACTIVE if s.value in sources_for(TaskStatus.FAILED)})

EXCHANGE = "rag.index.exchange"
ROUTING_KEY = "rag.index.document"

TASK_COLUMNS = (
    "t.id AS task_id, t.document_id, t.kb_id, t.status, t.generation, t.attempt, t.retry_count,"
    " t.max_retry_count, t.error_code, t.error_message, t.start_time, t.end_time,"
    " t.create_time, t.update_time, t.stage, t.progress,"
    # approximate place in the queue: waiting tasks re-armed or re-published before this one, + 1
    f" CASE WHEN t.status IN {_QUEUED} THEN 1 + (SELECT count(*) FROM index_task w"
    f"  WHERE w.status IN {_QUEUED} AND (w.update_time, w.id) < (t.update_time, t.id))"
    " END AS queue_position"
)
DOCUMENT_COLUMNS = (
    "d.id AS document_id, d.kb_id, d.filename, d.content_type, d.size_bytes, d.sha256, d.status,"
    " d.index_generation, d.chunk_count, d.error_message, d.warnings, d.create_time, d.update_time"
)

# The document's task as one JSON column (avoids clashing column names in a join).
_TASK_JSON = (
    f"(SELECT to_jsonb(x) FROM (SELECT {TASK_COLUMNS} FROM index_task t"
    " WHERE t.document_id = d.id) x) AS task"
)
# The pending version (new content not yet indexed) as one JSON column, NULL when there is none.
_PENDING_JSON = (
    "CASE WHEN d.pending_object_key IS NULL THEN NULL ELSE jsonb_build_object("
    "'filename', d.pending_filename, 'content_type', d.pending_content_type,"
    " 'size_bytes', d.pending_size_bytes, 'sha256', d.pending_sha256,"
    " 'create_time', d.pending_create_time) END AS pending"
)
_CLEAR_PENDING = (
    "pending_filename = NULL, pending_content_type = NULL, pending_size_bytes = NULL,"
    " pending_sha256 = NULL, pending_object_key = NULL, pending_create_time = NULL"
)


# ------------------------------------------------------------------ users, tokens, KBs


async def create_user(conn: asyncpg.Connection, name: str) -> int:
    return int(await conn.fetchval("INSERT INTO app_user (name) VALUES ($1) RETURNING id", name))


async def create_token(conn: asyncpg.Connection, user_id: int, token_sha256: bytes) -> int:
    return int(
        await conn.fetchval(
            "INSERT INTO api_token (user_id, token_sha256) VALUES ($1, $2) RETURNING id",
            user_id, token_sha256,
        )
    )


async def user_for_token(conn: asyncpg.Connection, token_sha256: bytes) -> int | None:
    """The user owning an unrevoked token with this SHA-256 (an index lookup on the digest)."""
    v = await conn.fetchval(
        "SELECT user_id FROM api_token WHERE token_sha256 = $1 AND revoked_at IS NULL", token_sha256
    )
    return None if v is None else int(v)


async def revoke_token(conn: asyncpg.Connection, token_sha256: bytes) -> bool:
    r = await conn.fetchval(
        "UPDATE api_token SET revoked_at = now() WHERE token_sha256 = $1 AND revoked_at IS NULL"
        " RETURNING id",
        token_sha256,
    )
    return r is not None


async def create_kb(conn: asyncpg.Connection, user_id: int, name: str, model: str, dim: int) -> asyncpg.Record:
    """The new row: ``kb_id, name, embedding_model, embedding_dim, create_time``."""
    row = await conn.fetchrow(
        "INSERT INTO knowledge_base (user_id, name, embedding_model, embedding_dim)"
        " VALUES ($1, $2, $3, $4) RETURNING id AS kb_id, name, embedding_model, embedding_dim, create_time",
        user_id, name, model, dim,
    )
    assert row is not None
    return row


async def list_kbs(conn: asyncpg.Connection, user_id: int) -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            "SELECT id AS kb_id, name, embedding_model, embedding_dim, create_time"
            " FROM knowledge_base WHERE user_id = $1 ORDER BY id",
            user_id,
        )
    )


async def kb_owned(conn: asyncpg.Connection, user_id: int, kb_id: int) -> bool:
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM knowledge_base WHERE id = $1 AND user_id = $2)", kb_id, user_id
        )
    )


# ------------------------------------------------------------------ documents and tasks (API)


# Advisory lock serializing every decision that gives a task one of its user's K slots (the
# API's inline release and the relay's round-robin release): counts read under it stay true
# until commit, so no user ever exceeds K, however many API processes and relays run.
DISPATCH_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended('rag:dispatch', 0))"


async def _release_now(conn: asyncpg.Connection, msg: IndexMessage, dispatch_limit: int | None) -> bool:
    """Inside the caller's transaction: whether the new outbox row of ``msg`` may go to the broker
    now. Yes when its task already holds a slot; else, with ``dispatch_limit`` (K) given, when
    the user has fewer than K dispatched tasks and no older held row (then the task takes a
    slot here, under the dispatch lock). Otherwise the row is held for the relay."""
    dispatched = await conn.fetchval(
        f"SELECT dispatched_at IS NOT NULL AND status IN {_ACTIVE} FROM index_task WHERE id = $1",
        msg.task_id,
    )
    if dispatched:
        return True
    if dispatch_limit is None or dispatched is None:
        return False
    await conn.execute(DISPATCH_LOCK_SQL)
    free = await conn.fetchval(
        f"SELECT (SELECT count(*) FROM index_task WHERE user_id = $1 AND dispatched_at IS NOT NULL"
        f"        AND status IN {_ACTIVE}) < $2"
        " AND NOT EXISTS (SELECT 1 FROM outbox WHERE user_id = $1 AND released_at IS NULL)",
        msg.user_id, dispatch_limit,
    )
    if not free:
        return False
    await conn.execute("UPDATE index_task SET dispatched_at = now() WHERE id = $1", msg.task_id)
    return True


async def _insert_outbox(conn: asyncpg.Connection, msg: IndexMessage, dispatch_limit: int | None) -> OutboxRow:
    """Inside the caller's transaction: the outbox row of ``msg``, released or held (see
    :func:`_release_now`)."""
    released = await _release_now(conn, msg, dispatch_limit)
    message_id = uuid.uuid4()
    body = msg.to_json()
    oid = await conn.fetchval(
        "INSERT INTO outbox (task_id, user_id, message_id, exchange, routing_key, body, released_at)"
        " VALUES ($1, $2, $3, $4, $5, $6::jsonb, CASE WHEN $7 THEN now() END) RETURNING id",
        msg.task_id, msg.user_id, message_id, EXCHANGE, ROUTING_KEY, body.decode(), released,
    )
    return OutboxRow(int(oid), message_id, EXCHANGE, ROUTING_KEY, body, released)


async def create_document_with_task(
    conn: asyncpg.Connection,
    *,
    kb_id: int,
    user_id: int,
    filename: str,
    content_type: str | None,
    size_bytes: int,
    sha256: str,
    object_key: str,
    dedup_slot: bool = False,
    dispatch_limit: int | None = None,
) -> tuple[IndexMessage, OutboxRow]:
    """ONE transaction: document (INDEXING, generation 1), task (WAITING, generation 1), outbox row.

    ``dedup_slot``: the document takes its KB's slot for ``sha256`` (unique partial index
    ``document_info_kb_content_uniq``); raises ``asyncpg.UniqueViolationError`` if another
    document holds it (see :func:`is_content_conflict`).
    ``dispatch_limit`` (K): the row is released at once if the user has a free slot (see
    :func:`_insert_outbox`); None holds it for the relay.
    """
    async with conn.transaction():
        doc_id = await conn.fetchval(
            "INSERT INTO document_info (kb_id, user_id, filename, content_type, size_bytes, sha256,"
            " object_key, status, index_generation, dedup_slot)"
            " VALUES ($1,$2,$3,$4,$5,$6,$7,'INDEXING',1,$8) RETURNING id",
            kb_id, user_id, filename, content_type, size_bytes, sha256, object_key, dedup_slot,
        )
        task_id = await conn.fetchval(
            "INSERT INTO index_task (document_id, kb_id, user_id, generation, status)"
            " VALUES ($1, $2, $3, 1, 'WAITING') RETURNING id",
            doc_id, kb_id, user_id,
        )
        msg = IndexMessage(
            task_id=int(task_id), document_id=int(doc_id), kb_id=kb_id, user_id=user_id, generation=1
        )
        row = await _insert_outbox(conn, msg, dispatch_limit)
    return msg, row


CONTENT_CONSTRAINT = "document_info_kb_content_uniq"


def is_content_conflict(exc: BaseException) -> bool:
    """True if ``exc`` is the unique violation of a KB's content slot (a concurrent identical upload)."""
    return isinstance(exc, asyncpg.UniqueViolationError) and exc.constraint_name == CONTENT_CONSTRAINT


async def find_same_content(conn: asyncpg.Connection, kb_id: int, sha256: str) -> asyncpg.Record | None:
    """The oldest document of the KB whose current content has this SHA-256 (hex), with its task
    (``document_id``, ``status``, ``index_generation``, ``task_id``, ``task_status``), or None."""
    return await conn.fetchrow(
        "SELECT d.id AS document_id, d.status, d.index_generation, t.id AS task_id, t.status AS task_status"
        " FROM document_info d JOIN index_task t ON t.document_id = d.id"
        " WHERE d.kb_id = $1 AND d.sha256 = $2 ORDER BY d.id LIMIT 1",
        kb_id, sha256,
    )


async def count_in_flight(conn: asyncpg.Connection, user_id: int) -> int:
    return int(
        await conn.fetchval(
            "SELECT count(*) FROM index_task WHERE user_id = $1"
            f" AND status IN {_ACTIVE}",
            user_id,
        )
    )


async def get_document(conn: asyncpg.Connection, user_id: int, document_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"SELECT {DOCUMENT_COLUMNS}, {_TASK_JSON}, {_PENDING_JSON} FROM document_info d"
        " WHERE d.id = $1 AND d.user_id = $2",
        document_id, user_id,
    )


async def list_documents(conn: asyncpg.Connection, user_id: int, kb_id: int) -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            f"SELECT {DOCUMENT_COLUMNS}, {_TASK_JSON}, {_PENDING_JSON} FROM document_info d"
            " WHERE d.kb_id = $1 AND d.user_id = $2 ORDER BY d.id",
            kb_id, user_id,
        )
    )


async def get_task(conn: asyncpg.Connection, user_id: int, task_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"SELECT {TASK_COLUMNS} FROM index_task t WHERE t.id = $1 AND t.user_id = $2", task_id, user_id
    )


async def document_owned(conn: asyncpg.Connection, user_id: int, document_id: int) -> asyncpg.Record | None:
    """``(id, kb_id, object_key, task_id)`` of a document the user owns, else None."""
    return await conn.fetchrow(
        "SELECT d.id, d.kb_id, d.object_key, t.id AS task_id FROM document_info d"
        " LEFT JOIN index_task t ON t.document_id = d.id WHERE d.id = $1 AND d.user_id = $2",
        document_id, user_id,
    )


async def delete_document(conn: asyncpg.Connection, document_id: int) -> bool:
    """Delete the document with its task, chunks and vectors (cascade) under its row lock, and
    queue its objects (served and pending) in ``object_removal`` in the same transaction.

    Waits for an in-flight commit on the row; a run finishing afterwards finds no row and is
    fenced out (nothing resurrected). False if it was already gone.
    """
    async with conn.transaction():
        r = await conn.fetchrow(
            "SELECT object_key, pending_object_key FROM document_info WHERE id = $1 FOR UPDATE", document_id
        )
        if r is None:
            return False
        await conn.execute("DELETE FROM document_info WHERE id = $1", document_id)
        for key in (r["object_key"], r["pending_object_key"]):
            if key is not None:
                await queue_object_removal(conn, key)
    return True


async def drop_pending(conn: asyncpg.Connection, document_id: int) -> bool:
    """Drop the document's pending version in ONE transaction, under the document row lock:
    clear the pending columns, queue its object for removal, and issue a new generation (a run
    of the pending version in flight is fenced out at its commit). An active task ends FAILED
    ``pending_dropped``; the served version (status, chunks, object) is untouched.

    False (nothing changed) if the document is gone or has no pending version.
    """
    async with conn.transaction():
        key = await conn.fetchval(
            "SELECT pending_object_key FROM document_info WHERE id = $1 FOR UPDATE", document_id
        )
        if key is None:
            return False
        gen = await conn.fetchval(
            f"UPDATE document_info SET index_generation = index_generation + 1, {_CLEAR_PENDING},"
            " update_time = now() WHERE id = $1 RETURNING index_generation",
            document_id,
        )
        await conn.execute(
            "UPDATE index_task SET generation = $2,"
            " status = CASE WHEN status IN ('WAITING','RETRYING','RUNNING') THEN 'FAILED' ELSE status END,"
            " error_code = 'pending_dropped', error_message = 'the pending version was dropped;"
            " the served version is unchanged', end_time = now(), update_time = now()"
            " WHERE document_id = $1",
            document_id, gen,
        )
        await queue_object_removal(conn, key)
    return True


async def list_chunks(
    conn: asyncpg.Connection, document_id: int, offset: int, limit: int
) -> tuple[list[asyncpg.Record], int]:
    rows = await conn.fetch(
        "SELECT chunk_index, content, token_count, page, section FROM document_chunk WHERE document_id = $1"
        " ORDER BY chunk_index OFFSET $2 LIMIT $3",
        document_id, offset, limit,
    )
    total = await conn.fetchval("SELECT count(*) FROM document_chunk WHERE document_id = $1", document_id)
    return list(rows), int(total)


async def load_task_snapshot(conn: asyncpg.Connection, task_id: int) -> TaskSnapshot | None:
    """The task with its document's generation and status; None if the task is gone."""
    r = await conn.fetchrow(
        "SELECT t.id, t.document_id, t.kb_id, t.user_id, t.status, t.generation, t.attempt,"
        " d.index_generation, d.status AS document_status, t.retry_count, t.max_retry_count,"
        " t.update_time FROM index_task t JOIN document_info d ON d.id = t.document_id"
        " WHERE t.id = $1",
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
        update_time=r["update_time"],
    )


async def issue_generation(
    conn: asyncpg.Connection, snap: TaskSnapshot, decision: EnqueueDecision,
    content: NewContent | None = None, dispatch_limit: int | None = None,
) -> tuple[IndexMessage, OutboxRow] | None:
    """Apply an ISSUE decision in ONE transaction: bump the document's generation (the only
    place generations are issued after creation), re-arm the task with it — conditional on the
    status and generation the decision was made on — and write the outbox row.

    A task re-armed from a terminal status gives up its dispatch slot (its new row waits for
    one, see :func:`_insert_outbox` and ``dispatch_limit``); an active task keeps its slot.

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
            f" dispatched_at = CASE WHEN status IN {_ACTIVE} THEN dispatched_at END,"
            " stage = NULL, progress = NULL,"
            " update_time = now() WHERE id = $1 AND status = $4 AND generation = $5 RETURNING id",
            snap.task_id, gen, decision.new_status.value, snap.status.value, snap.generation,
        )
        if task_id is None:
            raise _Rollback
        msg = IndexMessage(
            task_id=snap.task_id, document_id=snap.document_id, kb_id=snap.kb_id,
            user_id=snap.user_id, generation=int(gen),
        )
        row = await _insert_outbox(conn, msg, dispatch_limit)
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


class _Rollback(Exception):
    pass


async def try_issue_generation(
    conn: asyncpg.Connection, snap: TaskSnapshot, decision: EnqueueDecision,
    content: NewContent | None = None, dispatch_limit: int | None = None,
) -> tuple[IndexMessage, OutboxRow] | None:
    """:func:`issue_generation`, with a lost race reported as None (transaction rolled back)."""
    try:
        return await issue_generation(conn, snap, decision, content, dispatch_limit)
    except _Rollback:
        return None


# ------------------------------------------------------------------ outbox


async def mark_published(conn: asyncpg.Connection, outbox_id: int) -> None:
    await conn.execute(
        "UPDATE outbox SET published_at = now(), attempts = attempts + 1 WHERE id = $1"
        " AND published_at IS NULL",
        outbox_id,
    )


async def note_publish_failure(conn: asyncpg.Connection, outbox_id: int, error: str) -> None:
    await conn.execute(
        "UPDATE outbox SET attempts = attempts + 1, last_error = $2 WHERE id = $1", outbox_id, error[:2000]
    )


async def release_held_outbox(
    conn: asyncpg.Connection, dispatch_limit: int, limit: int
) -> list[int]:
    """ONE transaction, under the dispatch lock: release held outbox rows round-robin across
    users, each user up to ``dispatch_limit`` (K) dispatched tasks, at most ``limit`` rows
    (``shared.dispatch.choose_releases`` decides). Returns the released outbox ids (oldest
    first). Task rows locked by another transaction (a worker committing, an API re-arming) are
    skipped this pass (SKIP LOCKED: the relay never waits on a row while holding the lock).
    """
    async with conn.transaction():
        await conn.execute(DISPATCH_LOCK_SQL)
        rows = await conn.fetch(
            "SELECT h.id, h.task_id, h.user_id FROM (SELECT DISTINCT user_id FROM outbox"
            "   WHERE released_at IS NULL) u"
            " CROSS JOIN LATERAL (SELECT o.id, o.task_id, o.user_id FROM outbox o"
            "   WHERE o.released_at IS NULL AND o.user_id = u.user_id ORDER BY o.id LIMIT $1) h",
            dispatch_limit,
        )
        if not rows:
            return []
        task_ids = sorted({r["task_id"] for r in rows})
        tasks = {
            r["id"]: r for r in await conn.fetch(
                "SELECT id, status, dispatched_at FROM index_task WHERE id = ANY($1::bigint[])"
                " ORDER BY id FOR UPDATE SKIP LOCKED",
                task_ids,
            )
        }
        present = {r["id"] for r in await conn.fetch(
            "SELECT id FROM index_task WHERE id = ANY($1::bigint[])", task_ids)}
        users = sorted({r["user_id"] for r in rows})
        counts = {
            r["user_id"]: int(r["n"]) for r in await conn.fetch(
                "SELECT user_id, count(*) AS n FROM index_task WHERE user_id = ANY($1::bigint[])"
                f" AND dispatched_at IS NOT NULL AND status IN {_ACTIVE} GROUP BY user_id",
                users,
            )
        }
        held: list[HeldRow] = []
        for r in rows:
            t = tasks.get(r["task_id"])
            if t is None and r["task_id"] in present:
                continue  # locked elsewhere: next pass
            needs_slot = t is not None and t["status"] in ACTIVE and t["dispatched_at"] is None
            held.append(HeldRow(r["id"], r["task_id"], r["user_id"], needs_slot))
        chosen = choose_releases(held, counts, dispatch_limit, limit)
        if not chosen:
            return []
        await conn.execute(
            "UPDATE outbox SET released_at = now() WHERE id = ANY($1::bigint[]) AND released_at IS NULL",
            [c.outbox_id for c in chosen],
        )
        await conn.execute(
            "UPDATE index_task SET dispatched_at = now() WHERE id = ANY($1::bigint[])"
            " AND dispatched_at IS NULL",
            [c.task_id for c in chosen if c.needs_slot],
        )
    return sorted(c.outbox_id for c in chosen)


async def dispatched_per_user(conn: asyncpg.Connection) -> dict[int, int]:
    """``{user_id: tasks dispatched (in the broker or running)}`` for users with any."""
    return {
        int(r["user_id"]): int(r["n"]) for r in await conn.fetch(
            "SELECT user_id, count(*) AS n FROM index_task"
            f" WHERE dispatched_at IS NOT NULL AND status IN {_ACTIVE} GROUP BY user_id"
        )
    }


async def claim_pending_outbox(
    conn: asyncpg.Connection, grace_s: float, limit: int, ids: Sequence[int] = ()
) -> list[OutboxRow]:
    """Lock released, unpublished rows older than ``grace_s`` seconds, or named in ``ids`` (rows
    this relay released itself: no inline publish is coming for them) — FOR UPDATE SKIP LOCKED:
    several relays may run. Held rows are never returned. Call inside a transaction; the locks
    hold until it ends."""
    rows = await conn.fetch(
        "SELECT id, message_id, exchange, routing_key, body::text AS body FROM outbox"
        " WHERE published_at IS NULL AND released_at IS NOT NULL"
        " AND (create_time < now() - make_interval(secs => $1) OR id = ANY($3::bigint[]))"
        " ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED",
        grace_s, limit, list(ids),
    )
    return [
        OutboxRow(r["id"], r["message_id"], r["exchange"], r["routing_key"], _compact(r["body"]))
        for r in rows
    ]


def _compact(body: str) -> bytes:
    return json.dumps(json.loads(body), separators=(",", ":")).encode()


# ------------------------------------------------------------------ worker


async def claim_task(conn: asyncpg.Connection, task_id: int, generation: int) -> int | None:
    """Claim: RUNNING, attempt + 1 (the claim's fencing token). None if not claimable any more."""
    v = await conn.fetchval(
        "UPDATE index_task SET status = 'RUNNING', attempt = attempt + 1, start_time = now(),"
        " end_time = NULL, stage = 'DOWNLOADING', progress = 0, update_time = now()"
        f" WHERE id = $1 AND generation = $2 AND status IN {_CLAIMABLE} RETURNING attempt",
        task_id, generation,
    )
    return None if v is None else int(v)


async def heartbeat(conn: asyncpg.Connection, task_id: int, generation: int, attempt: int) -> bool:
    """Bump ``update_time`` of our RUNNING claim; False means we were fenced out."""
    v = await conn.fetchval(
        "UPDATE index_task SET update_time = now() WHERE id = $1 AND status = 'RUNNING'"
        " AND generation = $2 AND attempt = $3 RETURNING id",
        task_id, generation, attempt,
    )
    return v is not None


async def report_progress(
    conn: asyncpg.Connection, task_id: int, generation: int, attempt: int, stage: str, progress: float
) -> bool:
    """Write the run's ``stage`` and ``progress`` (0..1) — only under our current claim
    ``(RUNNING, generation, attempt)``; also a heartbeat. False means we were fenced out."""
    v = await conn.fetchval(
        "UPDATE index_task SET stage = $4, progress = $5, update_time = now() WHERE id = $1"
        " AND status = 'RUNNING' AND generation = $2 AND attempt = $3 RETURNING id",
        task_id, generation, attempt, stage, progress,
    )
    return v is not None


async def document_source(conn: asyncpg.Connection, document_id: int) -> tuple[str, str, str | None] | None:
    """``(object_key, filename, content_type)`` of the version to index — the pending one if
    there is one, else the served one — None if the document was deleted.

    ``content_type`` is the type the API detected from the bytes (older rows: the client's header).
    Every change of the pending version issues a new generation, so a run that commits indexed
    the pending version its commit swaps in.
    """
    r = await conn.fetchrow(
        "SELECT COALESCE(pending_object_key, object_key) AS object_key,"
        " COALESCE(pending_filename, filename) AS filename,"
        " CASE WHEN pending_object_key IS NULL THEN content_type ELSE pending_content_type END AS content_type"
        " FROM document_info WHERE id = $1",
        document_id,
    )
    return None if r is None else (r["object_key"], r["filename"], r["content_type"])


async def claim_is_current(conn: asyncpg.Connection, task_id: int, generation: int, attempt: int) -> bool:
    """The pre-embedding fence check: our claim is still the task's and the document's current one."""
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM index_task t JOIN document_info d ON d.id = t.document_id"
            " WHERE t.id = $1 AND t.status = 'RUNNING' AND t.generation = $2 AND t.attempt = $3"
            " AND d.index_generation = $2)",
            task_id, generation, attempt,
        )
    )


async def record_embedding_run(
    conn: asyncpg.Connection, task_id: int, document_id: int, generation: int, attempt: int,
    chunk_count: int, worker: str, *, cache_hits: int = 0, cache_misses: int | None = None,
) -> None:
    """One row per embedding step: ``chunk_count`` chunks, ``cache_hits`` of them served from the
    embedding cache, ``cache_misses`` (default: all) sent to the model; 0 misses = no model call."""
    misses = chunk_count - cache_hits if cache_misses is None else cache_misses
    await conn.execute(
        "INSERT INTO embedding_run (task_id, document_id, generation, attempt, chunk_count, worker,"
        " cache_hits, cache_misses) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        task_id, document_id, generation, attempt, chunk_count, worker, cache_hits, misses,
    )


# ------------------------------------------------------------------ embedding cache


async def cache_lookup(
    conn: asyncpg.Connection, model: str, revision: str, dim: int, keys: Sequence[bytes]
) -> dict[bytes, np.ndarray]:
    """``{text sha256: (dim,) float32 vector}`` of the cached keys among ``keys`` (a read: no
    ``last_used`` write here, see :func:`cache_touch`)."""
    if not keys:
        return {}
    rows = await conn.fetch(
        "SELECT text_sha256, embedding FROM embedding_cache"
        " WHERE model = $1 AND revision = $2 AND dim = $3 AND text_sha256 = ANY($4::bytea[])",
        model, revision, dim, list(set(keys)),
    )
    return {bytes(r["text_sha256"]): np.asarray(r["embedding"].to_numpy(), dtype=np.float32) for r in rows}


async def cache_store(
    conn: asyncpg.Connection, model: str, revision: str, dim: int, keys: Sequence[bytes], vectors: np.ndarray
) -> int:
    """Add ``vectors[i]`` under ``keys[i]`` (ON CONFLICT DO NOTHING: a concurrent writer's vector
    for the same text is as good). Rows are inserted in key order, so two writers of overlapping
    key sets cannot deadlock. Returns the rows added."""
    if len(keys) != len(vectors):
        raise ValueError(f"{len(keys)} keys but {len(vectors)} vectors")
    if not keys:
        return 0
    order = sorted(range(len(keys)), key=lambda i: keys[i])
    added = await conn.fetchval(
        "WITH ins AS (INSERT INTO embedding_cache (model, revision, text_sha256, dim, embedding)"
        " SELECT $1, $2, k, $3, v FROM unnest($4::bytea[], $5::vector[]) WITH ORDINALITY AS u(k, v, n)"
        " ORDER BY n ON CONFLICT DO NOTHING RETURNING 1) SELECT count(*) FROM ins",
        model, revision, dim, [keys[i] for i in order], [Vector(vectors[i]) for i in order],
    )
    return int(added)


async def cache_touch(
    conn: asyncpg.Connection, model: str, revision: str, keys: Sequence[bytes], min_age_s: float
) -> int:
    """Set ``last_used = now()`` on the cached ``keys`` last touched more than ``min_age_s`` ago
    (so a hot entry is written at most once per interval, not once per hit); rows another
    transaction holds are skipped, never waited for. Returns the rows touched."""
    if not keys:
        return 0
    touched = await conn.fetchval(
        "WITH t AS (UPDATE embedding_cache SET last_used = now() WHERE (model, revision, text_sha256) IN ("
        " SELECT model, revision, text_sha256 FROM embedding_cache WHERE model = $1 AND revision = $2"
        " AND text_sha256 = ANY($3::bytea[]) AND last_used < now() - make_interval(secs => $4)"
        " ORDER BY text_sha256 FOR UPDATE SKIP LOCKED) RETURNING 1) SELECT count(*) FROM t",
        model, revision, sorted(set(keys)), float(min_age_s),
    )
    return int(touched)


_EVICT_LOCK_KEY = 0x52414745  # "RAGE": one evictor at a time across workers


async def cache_evict(conn: asyncpg.Connection, max_rows: int, low_water: float) -> int | None:
    """One eviction pass (ONE transaction): count the rows, decide (``embedding_cache.
    eviction_count``), delete that many least recently used. Returns the rows deleted, or None
    if another worker's pass holds the lock."""
    async with conn.transaction():
        if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", _EVICT_LOCK_KEY):
            return None
        rows = int(await conn.fetchval("SELECT count(*) FROM embedding_cache"))
        n = eviction_count(rows, max_rows, low_water)
        if n == 0:
            return 0
        status = await conn.execute(
            "DELETE FROM embedding_cache WHERE ctid IN"
            " (SELECT ctid FROM embedding_cache ORDER BY last_used, text_sha256 LIMIT $1)", n,
        )
        return int(status.split()[-1])


async def record_skip(
    conn: asyncpg.Connection, reason: str, task_id: int | None, document_id: int | None,
    generation: int | None, worker: str,
) -> None:
    await conn.execute(
        "INSERT INTO delivery_skip (reason, task_id, document_id, generation, worker)"
        " VALUES ($1, $2, $3, $4, $5)",
        reason, task_id, document_id, generation, worker,
    )


async def commit_chunks(
    conn: asyncpg.Connection,
    *,
    task_id: int,
    document_id: int,
    kb_id: int,
    generation: int,
    attempt: int,
    chunks: Sequence[ChunkRow],
    embeddings: np.ndarray,
    warnings: Sequence[str] = (),
) -> bool:
    """The one fenced transaction: replace the document's chunks and vectors, task SUCCESS,
    document INDEXED with this run's ``warnings`` (a JSON array of sentences); a pending version
    becomes the served one and the object it replaces is queued in ``object_removal`` (removed
    from storage only after this commit). ``embeddings`` is ``(len(chunks), 384) float32``.

    Under the document row lock it re-checks the generation and our claim
    ``(RUNNING, generation, attempt)``; if either moved, nothing is written and False is
    returned. Readers see the old version (chunks, name) or the new one, never none (MVCC).
    """
    if len(chunks) != len(embeddings):
        raise ValueError(f"{len(chunks)} chunks but {len(embeddings)} embeddings")
    try:
        async with conn.transaction():
            doc = await conn.fetchrow(
                "SELECT index_generation, object_key, pending_object_key FROM document_info"
                " WHERE id = $1 FOR UPDATE",
                document_id,
            )
            if doc is None or doc["index_generation"] != generation:
                raise _Rollback
            ok = await conn.fetchval(
                "UPDATE index_task SET status = 'SUCCESS', end_time = now(), update_time = now(),"
                " stage = 'WRITING', progress = 1,"
                " error_code = NULL, error_message = NULL WHERE id = $1 AND status = 'RUNNING'"
                " AND generation = $2 AND attempt = $3 RETURNING id",
                task_id, generation, attempt,
            )
            if ok is None:
                raise _Rollback
            await conn.execute("DELETE FROM document_chunk WHERE document_id = $1", document_id)
            ids = [
                r[0]
                for r in await conn.fetch(
                    "SELECT nextval('document_chunk_id_seq') FROM generate_series(1, $1)", len(chunks)
                )
            ]
            await conn.copy_records_to_table(
                "document_chunk",
                records=[
                    (i, document_id, c.index, c.content, c.token_count, c.page, c.section)
                    for i, c in zip(ids, chunks, strict=True)
                ],
                columns=["id", "document_id", "chunk_index", "content", "token_count", "page", "section"],
            )
            await conn.copy_records_to_table(
                "document_vector",
                records=[(i, document_id, kb_id, e) for i, e in zip(ids, embeddings, strict=True)],
                columns=["chunk_id", "document_id", "kb_id", "embedding"],
            )
            await fault_point("in_commit")
            await conn.execute(
                "UPDATE document_info SET status = 'INDEXED', chunk_count = $2, error_message = NULL,"
                " warnings = $4::jsonb, update_time = now(),"
                " filename = COALESCE(pending_filename, filename),"
                " content_type = CASE WHEN pending_object_key IS NULL THEN content_type"
                "                     ELSE pending_content_type END,"
                " size_bytes = COALESCE(pending_size_bytes, size_bytes), sha256 = COALESCE(pending_sha256, sha256),"
                # a promoted version's bytes drop the content slot (0011): they must not collide
                " dedup_slot = dedup_slot AND pending_sha256 IS NULL,"
                f" object_key = COALESCE(pending_object_key, object_key), {_CLEAR_PENDING}"
                " WHERE id = $1 AND index_generation = $3",
                document_id, len(chunks), generation, json.dumps(list(warnings)),
            )
            if doc["pending_object_key"] is not None:  # the swap released the served object
                await queue_object_removal(conn, doc["object_key"])
    except _Rollback:
        return False
    return True


async def finish_unsuccessfully(
    conn: asyncpg.Connection,
    *,
    task_id: int,
    document_id: int,
    generation: int,
    attempt: int,
    status: TaskStatus,
    error_code: str,
    error_message: str,
    warnings: Sequence[str] = (),
) -> bool:
    """Task FAILED/TIMEOUT, fenced on our claim; False if fenced out. A document with a served
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
            if gen != generation:
                raise _Rollback
            ok = await conn.fetchval(
                "UPDATE index_task SET status = $4, error_code = $5, error_message = $6,"
                " end_time = now(), update_time = now() WHERE id = $1 AND status = 'RUNNING'"
                " AND generation = $2 AND attempt = $3 RETURNING id",
                task_id, generation, attempt, status.value, error_code, error_message[:4000],
            )
            if ok is None:
                raise _Rollback
            await conn.execute(
                "UPDATE document_info SET status = 'FAILED', error_message = $2, warnings = $3::jsonb,"
                " update_time = now() WHERE id = $1 AND status <> 'INDEXED'",
                document_id, error_message[:4000], json.dumps(list(warnings)),
            )
    except _Rollback:
        return False
    return True


# ------------------------------------------------------------------ scanner and dead letters


async def active_tasks_older_than(conn: asyncpg.Connection, seconds: float, limit: int) -> list[asyncpg.Record]:
    """Active tasks untouched for ``seconds``, with the database's ``now`` (one clock). Tasks
    waiting for a dispatch slot (held outbox row, not dispatched) are left out: they wait in
    PostgreSQL by design and the relay releases them; nothing of theirs is in the broker."""
    return list(
        await conn.fetch(
            "SELECT id, document_id, status, generation, attempt, start_time, update_time, now() AS now"
            f" FROM index_task WHERE status IN {_ACTIVE}"
            " AND (status = 'RUNNING' OR dispatched_at IS NOT NULL)"
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
        return await _insert_outbox(conn, msg, None)


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
            f" AND status IN {_DEAD_LETTER_FAILABLE} RETURNING id",
            task_id, generation, error_code, error_message,
        )
        if ok is None:
            return False
        await conn.execute(  # a served version stays served (see finish_unsuccessfully)
            "UPDATE document_info SET status = 'FAILED', error_message = $2, update_time = now()"
            " WHERE id = $1 AND status <> 'INDEXED'",
            doc_id, error_message,
        )
    return True


async def record_dead_letter(
    conn: asyncpg.Connection, *, message_id: str | None, msg: IndexMessage | None, reason: str, body: bytes,
    headers: dict[str, Any],
) -> int:
    return int(
        await conn.fetchval(
            "INSERT INTO dead_letter (message_id, task_id, document_id, generation, reason, body, headers)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb) RETURNING id",
            message_id, msg.task_id if msg else None, msg.document_id if msg else None,
            msg.generation if msg else None, reason, body, json.dumps(headers, default=str),
        )
    )


async def list_dead_letters(conn: asyncpg.Connection, include_replayed: bool = False) -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            "SELECT id, message_id, task_id, document_id, generation, reason, create_time, replayed_at"
            " FROM dead_letter WHERE $1 OR replayed_at IS NULL ORDER BY id",
            include_replayed,
        )
    )


async def pending_dead_letter(conn: asyncpg.Connection, dead_letter_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "SELECT task_id, body FROM dead_letter WHERE id = $1 AND replayed_at IS NULL", dead_letter_id
    )


async def mark_dead_letter_replayed(conn: asyncpg.Connection, dead_letter_id: int) -> bool:
    return bool(await conn.fetchval(
        "UPDATE dead_letter SET replayed_at = now() WHERE id = $1 AND replayed_at IS NULL RETURNING id",
        dead_letter_id,
    ))


async def reserve_in_flight_slot(conn: asyncpg.Connection, user_id: int, limit: int) -> bool:
    """Inside the caller's transaction: whether one more in-flight task (WAITING, RETRYING,
    RUNNING) fits under the user's ``limit``.

    Takes a transaction-scoped advisory lock on the user first, so concurrent uploads / retries of
    one user are serialized until the caller commits the new task: two of them cannot both take
    the last slot.
    """
    if not conn.is_in_transaction():
        raise RuntimeError("reserve_in_flight_slot must run inside the transaction that creates the work")
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('rag:in-flight-user', $1))", user_id)
    return await count_in_flight(conn, user_id) < limit


# ------------------------------------------------------------------ object removal (after commit)


async def queue_object_removal(conn: asyncpg.Connection, object_key: str) -> None:
    """Inside the transaction that stops referring to ``object_key``: remove it after commit."""
    await conn.execute("INSERT INTO object_removal (object_key) VALUES ($1)", object_key)


async def claim_object_removals(conn: asyncpg.Connection, limit: int) -> list[tuple[int, str]]:
    """``[(id, object_key)]`` queued for removal, locked (FOR UPDATE SKIP LOCKED: several
    cleaners may run). Call inside a transaction; delete the rows with :func:`forget_object_removals`."""
    rows = await conn.fetch(
        "SELECT id, object_key FROM object_removal ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED", limit
    )
    return [(int(r["id"]), str(r["object_key"])) for r in rows]


async def forget_object_removals(conn: asyncpg.Connection, ids: Sequence[int]) -> None:
    await conn.execute("DELETE FROM object_removal WHERE id = ANY($1::bigint[])", list(ids))


async def unreferenced_keys(conn: asyncpg.Connection, keys: Sequence[str]) -> list[str]:
    """The ``keys`` that no document refers to (as its served or its pending object)."""
    rows = await conn.fetch(
        "SELECT k FROM unnest($1::text[]) AS k WHERE NOT EXISTS (SELECT 1 FROM document_info WHERE object_key = k)"
        " AND NOT EXISTS (SELECT 1 FROM document_info WHERE pending_object_key = k)",
        list(keys),
    )
    return [str(r["k"]) for r in rows]
