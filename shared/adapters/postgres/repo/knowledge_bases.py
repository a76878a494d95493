"""Repository of the knowledge-base lifecycle: rename, and delete with everything in it.

Every function takes an open ``asyncpg`` connection; functions that form one commit point open
their own transaction. Lock order: ``knowledge_base`` row, then its ``document_info`` rows (by
id), then ``index_task`` rows (the order of every other writer after the first lock).
"""

from __future__ import annotations

from typing import Any

import asyncpg

from shared.adapters.postgres.repo.cache import cache_release_unused
from shared.adapters.postgres.repo.objects import queue_object_removals

KB_COLUMNS = "id AS kb_id, name, embedding_model, embedding_dim, create_time"


async def rename_knowledge_base(
    conn: asyncpg.Connection, user_id: int, kb_id: int, name: str
) -> dict[str, Any] | None:
    """The renamed row as a dict (``kb_id, name, embedding_model, embedding_dim, create_time``),
    or None if ``user_id`` has no such knowledge base."""
    row = await conn.fetchrow(
        f"UPDATE knowledge_base SET name = $3 WHERE id = $1 AND user_id = $2 RETURNING {KB_COLUMNS}",
        kb_id, user_id, name,
    )
    return None if row is None else dict(row.items())


async def delete_knowledge_base(conn: asyncpg.Connection, user_id: int, kb_id: int) -> int | None:
    """Delete ``user_id``'s knowledge base with all its documents, versions, tasks, chunks and
    vectors (cascade), in ONE transaction; returns the documents deleted, None if there was no
    such knowledge base (already deleted, or another user's).

    In the same transaction: every object (served and pending) is queued in ``object_removal``
    (removed from storage after commit), messages still held for fair dispatch are dropped from
    the outbox, and every embedding-cache entry of the owner whose text no remaining chunk of
    theirs has is released (also what earlier versions of their documents left).

    Fencing is the document delete's: the knowledge-base row is locked first (an upload creating
    a document waits, then fails its foreign key), then every document row (an in-flight commit
    finishes first; any later one finds no row and is fenced out, so nothing is resurrected by a
    late message).
    """
    async with conn.transaction():
        if await conn.fetchval(
            "SELECT id FROM knowledge_base WHERE id = $1 AND user_id = $2 FOR UPDATE", kb_id, user_id
        ) is None:
            return None
        docs = await conn.fetch(
            "SELECT id, object_key, pending_object_key FROM document_info WHERE kb_id = $1 ORDER BY id FOR UPDATE",
            kb_id,
        )
        ids = [int(r["id"]) for r in docs]
        await conn.execute(
            "DELETE FROM outbox WHERE published_at IS NULL AND task_id IN"
            " (SELECT id FROM index_task WHERE document_id = ANY($1::bigint[]))", ids,
        )
        await conn.execute("DELETE FROM knowledge_base WHERE id = $1", kb_id)  # documents... cascade
        await cache_release_unused(conn, user_id)
        await queue_object_removals(
            conn, [k for r in docs for k in (r["object_key"], r["pending_object_key"]) if k is not None]
        )
    return len(ids)
