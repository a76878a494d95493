"""Repository of the ANN index's membership (``document_vector.ann``, sql/0017): which vectors
the partial HNSW index holds. Commits insert vectors with ``ann = false`` (no HNSW maintenance on
the commit's path); the ANN job (``task_service/jobs/ann_indexer.py``) sets ``ann = true`` in short
batches on the vectors of knowledge bases above the exact-search threshold.

Every function takes an open ``asyncpg`` connection; each statement is its own transaction.
"""

from __future__ import annotations

import asyncpg


async def kbs_needing_ann(conn: asyncpg.Connection, exact_max_chunks: int) -> list[int]:
    """Knowledge bases with vectors outside the HNSW index that hold more than
    ``exact_max_chunks`` vectors (searched through HNSW), by id."""
    rows = await conn.fetch(
        "SELECT k.kb_id FROM (SELECT DISTINCT kb_id FROM document_vector WHERE NOT ann) k"
        " WHERE (SELECT count(*) FROM (SELECT 1 FROM document_vector v WHERE v.kb_id = k.kb_id LIMIT $1 + 1) s) > $1"
        " ORDER BY k.kb_id",
        exact_max_chunks,
    )
    return [int(r["kb_id"]) for r in rows]


async def add_to_ann(conn: asyncpg.Connection, kb_id: int, batch: int) -> int:
    """Set ``ann`` on up to ``batch`` vectors of ``kb_id`` not yet in the HNSW index (rows another
    transaction holds, a commit or a delete, are skipped: the next batch takes them); how many."""
    status = await conn.execute(
        "UPDATE document_vector SET ann = true WHERE chunk_id IN (SELECT chunk_id FROM document_vector"
        " WHERE kb_id = $1 AND NOT ann LIMIT $2 FOR UPDATE SKIP LOCKED)",
        kb_id, batch,
    )
    return int(status.rsplit(" ", 1)[1])
