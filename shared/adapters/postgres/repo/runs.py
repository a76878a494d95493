"""Repository of ``embedding_run`` and ``delivery_skip`` records.

Every function takes an open ``asyncpg`` connection; functions that form one commit point open
their own transaction. Lock order is always ``document_info`` row, then ``index_task`` row.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from shared.domain.records import Claim, PartClaim, SkipRecord


async def record_embedding_run(
    conn: asyncpg.Connection, claim: Claim | PartClaim, document_id: int, chunk_count: int, worker: str,
    *, cache_hits: int = 0, cache_misses: int | None = None,
) -> None:
    """One row per embedding step of the run (or part: its ``part``, the part's attempt) holding
    ``claim``: ``chunk_count`` chunks, ``cache_hits`` of them served from the embedding cache,
    ``cache_misses`` (default: all) sent to the model; 0 misses = no model call."""
    misses = chunk_count - cache_hits if cache_misses is None else cache_misses
    part = claim.part if isinstance(claim, PartClaim) else None
    await conn.execute(
        "INSERT INTO embedding_run (task_id, document_id, generation, attempt, chunk_count, worker,"
        " cache_hits, cache_misses, part) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        claim.task_id, document_id, claim.generation, claim.attempt, chunk_count, worker, cache_hits, misses, part,
    )


async def record_skips(conn: asyncpg.Connection, skips: Sequence[SkipRecord], worker: str) -> None:
    """One INSERT of every row (arrays unnested): one round trip however many skips."""
    await conn.execute(
        "INSERT INTO delivery_skip (reason, task_id, document_id, generation, worker)"
        " SELECT r, t, d, g, $5 FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) AS u(r, t, d, g)",
        [s.reason for s in skips], [s.task_id for s in skips], [s.document_id for s in skips],
        [s.generation for s in skips], worker,
    )
