"""Repository of the ANN index's membership (``document_vector.ann``, sql/0017): which vectors
the partial HNSW index holds. Commits insert vectors with ``ann = false`` (no HNSW maintenance on
the commit's path); the ANN job (``task_service/jobs/ann_indexer.py``) sets ``ann = true`` in short
batches on the vectors of knowledge bases above the exact-search threshold.

Every function takes an open ``asyncpg`` connection; each statement is its own transaction.
"""

from __future__ import annotations

import asyncpg


async def kbs_needing_ann(conn: asyncpg.Connection, exact_max_chunks: int) -> list[int]:
    """Knowledge bases holding more than ``exact_max_chunks`` chunks (searched through HNSW)
    with vectors outside the HNSW index, by id. The size is read from ``document_info.chunk_count``
    (one row per document, written by every commit), not by counting vectors: a pass costs the
    documents plus one index probe per large KB, however many vectors the small KBs hold."""
    rows = await conn.fetch(
        "SELECT k.kb_id FROM (SELECT kb_id FROM document_info GROUP BY kb_id HAVING sum(chunk_count) > $1) k"
        " WHERE EXISTS (SELECT 1 FROM document_vector v WHERE v.kb_id = k.kb_id AND NOT v.ann) ORDER BY k.kb_id",
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
