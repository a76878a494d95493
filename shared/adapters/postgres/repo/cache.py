"""Repository of the embedding cache (lookup, store, touch, evict).

Every function takes an open ``asyncpg`` connection; functions that form one commit point open
their own transaction. Lock order is always ``document_info`` row, then ``index_task`` row.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg
import numpy as np
from pgvector import Vector

from shared.domain.cache_policy import eviction_count


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
    """One eviction pass (ONE transaction): count the rows, decide (``cache_policy.
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
