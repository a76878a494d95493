"""Repository of ``document_info``: create (with its first task), reads, content dedup, pending drop, delete.

Every function takes an open ``asyncpg`` connection; functions that form one commit point open
their own transaction. Lock order is always ``document_info`` row, then ``index_task`` row.
"""

from __future__ import annotations

import asyncpg

from shared.adapters.postgres.repo.cache import cache_release, chunk_keys
from shared.adapters.postgres.repo.objects import queue_object_removal
from shared.adapters.postgres.repo.outbox import insert_outbox
from shared.adapters.postgres.repo.sql import (
    ACTIVE_SQL,
    CLEAR_PENDING,
    DOCUMENT_COLUMNS,
    PENDING_JSON,
    TASK_JSON,
    atomic,
)
from shared.adapters.postgres.repo.tasks import IN_FLIGHT_LOCK_SQL, drop_split
from shared.domain.messages import IndexMessage
from shared.domain.records import DocumentSource, NewContent, OutboxRow
from shared.domain.states import DocumentStatus, TaskStatus


async def create_document_with_task(
    conn: asyncpg.Connection,
    *,
    kb_id: int,
    user_id: int,
    content: NewContent,
    dedup_slot: bool = False,
    dispatch_limit: int | None = None,
) -> tuple[IndexMessage, OutboxRow]:
    """ONE transaction: document (INDEXING, generation 1), task (WAITING, generation 1), outbox row
    (the caller's, when it has one open: no savepoint, no extra round trips).

    ``dedup_slot``: the document takes its KB's slot for ``content.sha256`` (unique partial index
    ``document_info_kb_content_uniq``); raises ``asyncpg.UniqueViolationError`` if another
    document holds it (see :func:`is_content_conflict`).
    ``dispatch_limit`` (K): the row is released at once if the user has a free slot (see
    :func:`insert_outbox`); None holds it for the relay.
    """
    async with atomic(conn):
        doc_id = await conn.fetchval(
            "INSERT INTO document_info (kb_id, user_id, filename, content_type, size_bytes, sha256,"
            " object_key, status, index_generation, dedup_slot)"
            f" VALUES ($1,$2,$3,$4,$5,$6,$7,'{DocumentStatus.INDEXING}',1,$8) RETURNING id",
            kb_id, user_id, content.filename, content.content_type, content.size_bytes, content.sha256,
            content.object_key, dedup_slot,
        )
        task_id = await conn.fetchval(
            "INSERT INTO index_task (document_id, kb_id, user_id, generation, status)"
            f" VALUES ($1, $2, $3, 1, '{TaskStatus.WAITING}') RETURNING id",
            doc_id, kb_id, user_id,
        )
        msg = IndexMessage(
            task_id=int(task_id), document_id=int(doc_id), kb_id=kb_id, user_id=user_id, generation=1
        )
        row = await insert_outbox(conn, msg, dispatch_limit, new_task=True)
    return msg, row


CONTENT_CONSTRAINT = "document_info_kb_content_uniq"


def is_content_conflict(exc: BaseException) -> bool:
    """True if ``exc`` is the unique violation of a KB's content slot (a concurrent identical upload)."""
    return isinstance(exc, asyncpg.UniqueViolationError) and exc.constraint_name == CONTENT_CONSTRAINT


_SAME_CONTENT = (
    "SELECT d.id AS document_id, d.status, d.index_generation, t.id AS task_id, t.status AS task_status"
    " FROM document_info d JOIN index_task t ON t.document_id = d.id"
    " WHERE d.kb_id = $1 AND d.sha256 = $2 ORDER BY d.id LIMIT 1"
)


async def find_same_content(
    conn: asyncpg.Connection, kb_id: int, sha256: str, *, lock_user: int | None = None
) -> asyncpg.Record | None:
    """The oldest document of the KB whose current content has this SHA-256 (hex), with its task
    (``document_id``, ``status``, ``index_generation``, ``task_id``, ``task_status``), or None.

    ``lock_user``: in the same round trip, take that user's in-flight lock
    (:data:`shared.adapters.postgres.repo.tasks.IN_FLIGHT_LOCK_SQL`; the caller then reserves its slot with
    ``locked=True``). The read itself does not depend on the lock: the KB's unique content slot
    settles concurrent identical uploads.
    """
    if lock_user is None:
        return await conn.fetchrow(_SAME_CONTENT, kb_id, sha256)
    row = await conn.fetchrow(
        f"SELECT s.* FROM ({IN_FLIGHT_LOCK_SQL.replace('$1', '$3')}) AS lk"
        f" LEFT JOIN LATERAL ({_SAME_CONTENT}) AS s ON true",
        kb_id, sha256, lock_user,
    )
    return None if row is None or row["document_id"] is None else row


async def get_document(conn: asyncpg.Connection, user_id: int, document_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"SELECT {DOCUMENT_COLUMNS}, {TASK_JSON}, {PENDING_JSON} FROM document_info d"
        " WHERE d.id = $1 AND d.user_id = $2",
        document_id, user_id,
    )


async def list_documents(conn: asyncpg.Connection, user_id: int, kb_id: int) -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            f"SELECT {DOCUMENT_COLUMNS}, {TASK_JSON}, {PENDING_JSON} FROM document_info d"
            " WHERE d.kb_id = $1 AND d.user_id = $2 ORDER BY d.id",
            kb_id, user_id,
        )
    )


async def page_documents(
    conn: asyncpg.Connection, user_id: int, kb_id: int, offset: int, limit: int, status: str | None = None,
    origin: int | None = None,
) -> tuple[list[asyncpg.Record], int]:
    """One page of the knowledge base's documents (as :func:`list_documents`, by id), only those
    of ``status`` and members of the archive ``origin`` when given, and the number that match."""
    where = ("d.kb_id = $1 AND d.user_id = $2 AND ($3::text IS NULL OR d.status = $3)"
             " AND ($4::bigint IS NULL OR d.origin_document_id = $4)")
    rows = await conn.fetch(
        f"SELECT {DOCUMENT_COLUMNS}, {TASK_JSON}, {PENDING_JSON} FROM document_info d"
        f" WHERE {where} ORDER BY d.id OFFSET $5 LIMIT $6",
        kb_id, user_id, status, origin, offset, limit,
    )
    total = await conn.fetchval(f"SELECT count(*) FROM document_info d WHERE {where}", kb_id, user_id, status, origin)
    return list(rows), int(total)


async def document_owned(conn: asyncpg.Connection, user_id: int, document_id: int) -> asyncpg.Record | None:
    """``(id, kb_id, object_key, task_id)`` of a document the user owns, else None."""
    return await conn.fetchrow(
        "SELECT d.id, d.kb_id, d.object_key, t.id AS task_id FROM document_info d"
        " LEFT JOIN index_task t ON t.document_id = d.id WHERE d.id = $1 AND d.user_id = $2",
        document_id, user_id,
    )


async def delete_document(conn: asyncpg.Connection, document_id: int) -> bool:
    """Delete the document with its task, chunks and vectors (cascade) under its row lock, and
    queue its objects (served and pending) in ``object_removal`` and release its texts' embedding
    cache entries no other chunk of the owner has (``cache.cache_release``), in the same transaction.

    Waits for an in-flight commit on the row; a run finishing afterwards finds no row and is
    fenced out (nothing resurrected). False if it was already gone.
    """
    async with conn.transaction():
        r = await conn.fetchrow(
            "SELECT user_id, object_key, pending_object_key FROM document_info WHERE id = $1 FOR UPDATE", document_id
        )
        if r is None:
            return False
        texts = await chunk_keys(conn, [document_id])
        await conn.execute(  # a split's parts not yet published (the split itself cascades)
            "DELETE FROM outbox WHERE part IS NOT NULL AND published_at IS NULL AND task_id IN"
            " (SELECT id FROM index_task WHERE document_id = $1)", document_id,
        )
        await conn.execute("DELETE FROM document_info WHERE id = $1", document_id)
        await cache_release(conn, r["user_id"], texts)
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
            f"UPDATE document_info SET index_generation = index_generation + 1, {CLEAR_PENDING},"
            " update_time = now() WHERE id = $1 RETURNING index_generation",
            document_id,
        )
        task_id = await conn.fetchval(
            "UPDATE index_task SET generation = $2,"
            f" status = CASE WHEN status IN {ACTIVE_SQL} THEN '{TaskStatus.FAILED}' ELSE status END,"
            " error_code = 'pending_dropped', error_message = 'the pending version was dropped;"
            " the served version is unchanged', end_time = now(), update_time = now()"
            " WHERE document_id = $1 RETURNING id",
            document_id, gen,
        )
        if task_id is not None:
            await drop_split(conn, task_id)
        await queue_object_removal(conn, key)
    return True


async def document_source(conn: asyncpg.Connection, document_id: int) -> DocumentSource | None:
    """The object key, filename and content type of the version to index — the pending one if
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
    return None if r is None else DocumentSource(r["object_key"], r["filename"], r["content_type"])
