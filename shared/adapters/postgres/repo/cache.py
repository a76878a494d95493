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
from shared.domain.records import CacheNamespace


# ------------------------------------------------------------------ embedding cache
# Every entry belongs to a user (sql/0016): ``owner`` is the document's user, and no statement
# here reads or writes another user's entries.
async def cache_lookup(
    conn: asyncpg.Connection, owner: int, ns: CacheNamespace, keys: Sequence[bytes]
) -> dict[bytes, np.ndarray]:
    """``{text sha256: (ns.dim,) float32 vector}`` of ``owner``'s cached keys among ``keys`` in
    namespace ``ns`` (a read: no ``last_used`` write here, see :func:`cache_touch`)."""
    if not keys:
        return {}
    rows = await conn.fetch(
        "SELECT text_sha256, embedding FROM embedding_cache WHERE user_id = $1 AND text_sha256 = ANY($5::bytea[])"
        " AND model = $2 AND revision = $3 AND dim = $4",
        owner, ns.model, ns.revision, ns.dim, list(set(keys)),
    )
    return {bytes(r["text_sha256"]): np.asarray(r["embedding"].to_numpy(), dtype=np.float32) for r in rows}


async def cache_store(
    conn: asyncpg.Connection, owner: int, document_id: int, ns: CacheNamespace, keys: Sequence[bytes],
    vectors: np.ndarray,
) -> int:
    """Add ``vectors[i]`` (``(len(keys), ns.dim)``) under ``(owner, ns, keys[i])`` (ON CONFLICT
    DO NOTHING: a concurrent writer's vector for the same text is as good), in ONE transaction
    holding a key-share lock on the document row: a delete of the document either waits for this
    commit (and its release then sees these rows) or has committed (nothing is added: returns 0).
    Rows are inserted in key order, so two writers of overlapping key sets cannot deadlock.
    Returns the rows added."""
    if len(keys) != len(vectors):
        raise ValueError(f"{len(keys)} keys but {len(vectors)} vectors")
    if not keys:
        return 0
    order = sorted(range(len(keys)), key=lambda i: keys[i])
    async with conn.transaction():
        if await conn.fetchval(
            "SELECT 1 FROM document_info WHERE id = $1 AND user_id = $2 FOR KEY SHARE", document_id, owner
        ) is None:
            return 0
        added = await conn.fetchval(
            "WITH ins AS (INSERT INTO embedding_cache (user_id, model, revision, text_sha256, dim, embedding)"
            " SELECT $1, $2, $3, k, $4, v FROM unnest($5::bytea[], $6::vector[]) WITH ORDINALITY AS u(k, v, n)"
            " ORDER BY n ON CONFLICT DO NOTHING RETURNING 1) SELECT count(*) FROM ins",
            owner, ns.model, ns.revision, ns.dim, [keys[i] for i in order], [Vector(vectors[i]) for i in order],
        )
    return int(added)


async def cache_touch(
    conn: asyncpg.Connection, owner: int, ns: CacheNamespace, keys: Sequence[bytes], min_age_s: float
) -> int:
    """Set ``last_used = now()`` on ``owner``'s cached ``keys`` (namespace ``ns``) last touched more than
    ``min_age_s`` ago (so a hot entry is written at most once per interval, not once per hit);
    rows another transaction holds are skipped, never waited for. Returns the rows touched."""
    if not keys:
        return 0
    touched = await conn.fetchval(
        "WITH t AS (UPDATE embedding_cache SET last_used = now() WHERE (user_id, text_sha256, model, revision) IN ("
        " SELECT user_id, text_sha256, model, revision FROM embedding_cache WHERE user_id = $1"
        " AND text_sha256 = ANY($4::bytea[]) AND model = $2 AND revision = $3"
        " AND last_used < now() - make_interval(secs => $5)"
        " ORDER BY text_sha256 FOR UPDATE SKIP LOCKED) RETURNING 1) SELECT count(*) FROM t",
        owner, ns.model, ns.revision, sorted(set(keys)), float(min_age_s),
    )
    return int(touched)


#: Run inside a transaction that has just deleted chunks of ``$1``'s documents: ``$2`` the texts
#: those chunks had. Every namespace of the user; the probe uses document_chunk_text_sha256_idx.
RELEASE_SQL = (
    "DELETE FROM embedding_cache c WHERE c.user_id = $1 AND c.text_sha256 = ANY($2::bytea[])"
    " AND NOT EXISTS (SELECT 1 FROM document_chunk ch JOIN document_info d ON d.id = ch.document_id"
    " WHERE ch.text_sha256 = c.text_sha256 AND d.user_id = $1)"
)


async def cache_release(conn: asyncpg.Connection, owner: int, keys: Sequence[bytes]) -> int:
    """Delete ``owner``'s entries (every namespace) among ``keys`` that no remaining chunk of
    ``owner`` has. Call it in the transaction that deleted the chunks, after the delete (each
    statement of a READ COMMITTED transaction sees what committed before it started, so entries
    a worker added while the delete waited for the document row are seen and removed). Returns
    the entries deleted."""
    if not keys:
        return 0
    status = await conn.execute(RELEASE_SQL, owner, sorted(set(keys)))
    return int(status.split()[-1])


async def cache_release_unused(conn: asyncpg.Connection, owner: int) -> int:
    """Delete every entry of ``owner`` (every namespace) whose text no chunk of ``owner`` has:
    what earlier versions of their documents left, besides what a delete just released. One
    probe per entry of the owner: for a knowledge-base delete, not for every document delete.
    Returns the entries deleted."""
    status = await conn.execute(
        "DELETE FROM embedding_cache c WHERE c.user_id = $1"
        " AND NOT EXISTS (SELECT 1 FROM document_chunk ch JOIN document_info d ON d.id = ch.document_id"
        " WHERE ch.text_sha256 = c.text_sha256 AND d.user_id = $1)", owner,
    )
    return int(status.split()[-1])


async def chunk_keys(conn: asyncpg.Connection, document_ids: Sequence[int]) -> list[bytes]:
    """The distinct text keys of the chunks of ``document_ids`` and of their splits' staged chunks
    (a big document's parts cache their vectors before the swap): what a delete releases."""
    rows = await conn.fetch(
        "SELECT text_sha256 FROM document_chunk WHERE document_id = ANY($1::bigint[])"
        " UNION SELECT s.text_sha256 FROM staged_chunk s JOIN index_task t ON t.id = s.task_id"
        " WHERE t.document_id = ANY($1::bigint[])", list(document_ids)
    )
    return [bytes(r[0]) for r in rows]


_EVICT_LOCK_KEY = 0x52414745  # "RAGE": one evictor at a time across workers


async def cache_evict(conn: asyncpg.Connection, max_rows: int, low_water: float) -> int | None:
    """One eviction pass (ONE transaction): count the rows, decide (``cache_policy.
    eviction_count``), delete that many least recently used. Returns the rows deleted, or None
    if another worker's pass holds the lock."""
    async with conn.transaction():  # least recently used across all users: the bound is the table's
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
