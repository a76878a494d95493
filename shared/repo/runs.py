"""Repository of ``embedding_run`` and ``delivery_skip`` records.

Every function takes an open ``asyncpg`` connection; functions that form one commit point open
their own transaction. Lock order is always ``document_info`` row, then ``index_task`` row.
"""

from __future__ import annotations

import asyncpg


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


async def record_skip(
    conn: asyncpg.Connection, reason: str, task_id: int | None, document_id: int | None,
    generation: int | None, worker: str,
) -> None:
    await conn.execute(
        "INSERT INTO delivery_skip (reason, task_id, document_id, generation, worker)"
        " VALUES ($1, $2, $3, $4, $5)",
        reason, task_id, document_id, generation, worker,
    )
