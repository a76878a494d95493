"""Repository of chunks: reads, and ``commit_chunks``, the one fenced commit transaction.

Every function takes an open ``asyncpg`` connection; functions that form one commit point open
their own transaction. Lock order is always ``document_info`` row, then ``index_task`` row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import asyncpg

from shared.adapters.postgres.repo.objects import queue_object_removal
from shared.adapters.postgres.repo.sql import CLEAR_PENDING, Rollback
from shared.domain.cache_policy import text_key
from shared.domain.records import ChunkCommit, Claim
from shared.faults import fault_point


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


async def commit_chunks(conn: asyncpg.Connection, commit: ChunkCommit) -> bool:
    """The one fenced transaction: replace the document's chunks and vectors, task SUCCESS,
    document INDEXED with this run's ``warnings`` (a JSON array of sentences); a pending version
    becomes the served one and the object it replaces is queued in ``object_removal`` (removed
    from storage only after this commit). ``embeddings`` is ``(len(chunks), 384) float32``.

    Under the document row lock it re-checks the generation and the claim
    ``(RUNNING, generation, attempt)``; if either moved, nothing is written and False is
    returned. Readers see the old version (chunks, name) or the new one, never none (MVCC).
    The old version's embedding-cache entries stay (P3: the owner going back to earlier content
    costs no model call); a delete of the document or its knowledge base releases them.
    """
    if len(commit.chunks) != len(commit.embeddings):
        raise ValueError(f"{len(commit.chunks)} chunks but {len(commit.embeddings)} embeddings")
    try:
        async with conn.transaction():
            doc = await _fence(conn, commit)
            await _replace_chunks(conn, commit)
            await fault_point("in_commit")
            await promote(conn, commit.document_id, len(commit.chunks), commit.claim.generation, commit.warnings)
            if doc["pending_object_key"] is not None:  # the swap released the served object
                await queue_object_removal(conn, doc["object_key"])
    except Rollback:
        return False
    return True


async def _fence(conn: asyncpg.Connection, commit: ChunkCommit) -> asyncpg.Record:
    return await fence_claim(conn, commit.claim, commit.document_id)


async def fence_claim(conn: asyncpg.Connection, claim: Claim, document_id: int) -> asyncpg.Record:
    """Lock the document row, re-check the generation and the claim, and mark the task SUCCESS;
    raises :class:`Rollback` if either moved. The document's ``(object_key, pending_object_key)``.
    Shared by ``commit_chunks`` and the archive's expansion (``repo.archives``)."""
    doc = await conn.fetchrow(
        "SELECT index_generation, object_key, pending_object_key FROM document_info"
        " WHERE id = $1 FOR UPDATE",
        document_id,
    )
    if doc is None or doc["index_generation"] != claim.generation:
        raise Rollback
    ok = await conn.fetchval(
        "UPDATE index_task SET status = 'SUCCESS', end_time = now(), update_time = now(),"
        " stage = 'WRITING', progress = 1,"
        " error_code = NULL, error_message = NULL WHERE id = $1 AND status = 'RUNNING'"
        " AND generation = $2 AND attempt = $3 RETURNING id",
        claim.task_id, claim.generation, claim.attempt,
    )
    if ok is None:
        raise Rollback
    return doc


async def _replace_chunks(conn: asyncpg.Connection, commit: ChunkCommit) -> None:
    """Delete the document's chunks (vectors cascade) and COPY the new chunks (with their text
    keys, ``document_chunk.text_sha256``) and vectors in."""
    document_id = commit.document_id
    await conn.execute("DELETE FROM document_chunk WHERE document_id = $1", document_id)
    keys = [text_key(c.content) for c in commit.chunks]
    ids = [
        r[0]
        for r in await conn.fetch(
            "SELECT nextval('document_chunk_id_seq') FROM generate_series(1, $1)", len(commit.chunks)
        )
    ]
    await conn.copy_records_to_table(
        "document_chunk",
        records=[
            (i, document_id, c.index, c.content, c.token_count, c.page, c.section, k)
            for i, c, k in zip(ids, commit.chunks, keys, strict=True)
        ],
        columns=["id", "document_id", "chunk_index", "content", "token_count", "page", "section", "text_sha256"],
    )
    await conn.copy_records_to_table(
        "document_vector",
        records=[(i, document_id, commit.kb_id, e) for i, e in zip(ids, commit.embeddings, strict=True)],
        columns=["chunk_id", "document_id", "kb_id", "embedding"],
    )


async def promote(
    conn: asyncpg.Connection, document_id: int, chunk_count: int, generation: int, warnings: Sequence[str]
) -> None:
    """Inside the commit's transaction (document row locked, generation checked): document
    INDEXED with ``chunk_count`` chunks and the run's ``warnings``; a pending version becomes the
    served one (the caller queues the object it replaces). Shared by ``commit_chunks`` and the
    swap of a split (``repo.parts``)."""
    await conn.execute(
        "UPDATE document_info SET status = 'INDEXED', chunk_count = $2, error_message = NULL,"
        " warnings = $4::jsonb, update_time = now(),"
        " filename = COALESCE(pending_filename, filename),"
        " content_type = CASE WHEN pending_object_key IS NULL THEN content_type"
        "                     ELSE pending_content_type END,"
        " size_bytes = COALESCE(pending_size_bytes, size_bytes), sha256 = COALESCE(pending_sha256, sha256),"
        # a promoted version's bytes drop the content slot (0011): they must not collide
        " dedup_slot = dedup_slot AND pending_sha256 IS NULL,"
        f" object_key = COALESCE(pending_object_key, object_key), {CLEAR_PENDING}"
        " WHERE id = $1 AND index_generation = $3",
        document_id, chunk_count, generation, json.dumps(list(warnings)),
    )
