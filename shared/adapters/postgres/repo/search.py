"""Repository of the search statements (vector, keyword, the chunks' details).

The ranking itself (refill after collapsing copies, fusion) is
:mod:`knowledge_service.search.retrieval`, which reads through the ``SearchReads`` port
(:class:`shared.adapters.postgres.reads.PgSearch`); ``bench/retrieval.py`` measures these
statements. Every function takes an open connection; the vector ranking must run inside
:func:`ranking_transaction`, the keyword ranking inside :func:`keyword_transaction`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence

import asyncpg
import numpy as np

from shared.domain.records import ChunkCopy, ChunkDetails

Ranked = list[tuple[int, float]]  # (chunk id, score), best first

_EXACT = (
    "SELECT chunk_id, 1 - d AS score FROM (SELECT chunk_id, embedding <=> $1 AS d FROM document_vector"
    " WHERE kb_id = $2 OFFSET 0) s ORDER BY d, chunk_id LIMIT $3"
)
# Above the threshold: HNSW over the vectors the ANN job has indexed (``ann``, the partial index of
# sql/0017) and an exact scan of the few it has not reached yet (``NOT ann``), merged by distance.
_HNSW = (
    "SELECT chunk_id, 1 - d AS score FROM ("
    "(SELECT chunk_id, embedding <=> $1 AS d FROM document_vector"
    " WHERE kb_id = $2 AND ann ORDER BY embedding <=> $1 LIMIT $3)"
    " UNION ALL (SELECT chunk_id, embedding <=> $1 AS d FROM document_vector"
    " WHERE kb_id = $2 AND NOT ann ORDER BY d LIMIT $3)) s ORDER BY d, chunk_id LIMIT $3"
)

# Keyword ranking in one statement. $1 query text (cleaned), $2 kb id, $3 limit, $4 candidate budget (chunks of
# the KB the selecting terms may hold), $5 hard cap on the KB's candidates. Every frequency is the KB's own, exact:
# the folded counts of sql/0018 plus the deltas not yet folded, read in this statement's one snapshot (the term
# '' is the KB's chunk count). Candidates come from the (kb_id, content_tsv) GIN index (sql/0015), always
# (:func:`keyword_transaction`): the selecting tsquery is known only at run time, so the planner guessed a
# handful of rows and scanned the whole table, detoasting every chunk's tsvector (3x slower on a KB of 3,800
# chunks, bench/RESULTS.md "search-load"). Nothing depends on the literal query: one generic plan per connection.
KEYWORD_SQL = r"""
WITH lexemes AS (
    SELECT t.lexeme, '''' || replace(replace(t.lexeme, '\', '\\'), '''', '''''') || '''' AS lit
      FROM unnest(to_tsvector('rag_simple', rag_search_text($1))) t
), keys AS (
    SELECT array_agg(lexeme) || ''::text AS terms FROM lexemes
), counts AS MATERIALIZED (  -- this KB's document frequencies of the query's lexemes, never another KB's
    SELECT s.term, sum(s.df)::float8 AS df FROM (
        SELECT k.term, k.df FROM kb_term k WHERE k.kb_id = $2 AND k.term = ANY((SELECT terms FROM keys)::text[])
        UNION ALL
        SELECT k.term, k.d FROM kb_term_delta k WHERE k.kb_id = $2 AND k.term = ANY((SELECT terms FROM keys)::text[])
    ) s GROUP BY s.term
), n AS (
    SELECT greatest(coalesce((SELECT df FROM counts WHERE term = ''), 0), 1) AS rows
), terms AS MATERIALIZED (
    SELECT x.lexeme, x.lit, greatest(coalesce(c.df, 0), 0) / (SELECT rows FROM n) AS freq
      FROM lexemes x LEFT JOIN counts c ON c.term = x.lexeme
), weighted AS (
    SELECT lit, lit::tsquery AS q, power(ln(1 + 1 / greatest(freq, 1e-7)), 2) AS w, freq,
           sum(freq) OVER (ORDER BY freq, lit) - freq AS rarer  -- share of the KB's chunks held by the rarer terms
      FROM terms
), sel AS (  -- OR of the rarest term and of the next rarest while all their chunks fit in the budget
    SELECT string_agg(lit, ' | ')::tsquery AS q
      FROM weighted, n
     WHERE rarer = 0 OR (rarer + freq) * n.rows <= $4
), phrase AS MATERIALIZED (  -- once per statement: a generic plan would not fold it
    SELECT phraseto_tsquery('rag_simple', rag_search_text($1)) AS q
), cand AS MATERIALIZED (  -- each candidate read once, cut to the query's lexemes (positions kept): every @@
    -- below gives what it gives on the whole tsvector, on a dozen entries instead of hundreds
    SELECT c.id, ts_filter(setweight(c.content_tsv, 'A', (SELECT terms FROM keys)), '{a}') AS tsv
      FROM document_chunk c
     WHERE c.kb_id = $2 AND c.content_tsv @@ (SELECT q FROM sel)
     LIMIT $5
)
SELECT c.id AS chunk_id,
       (SELECT sum(t.w) FROM weighted t WHERE c.tsv @@ t.q) / (SELECT nullif(sum(w), 0) FROM weighted WHERE freq > 0)
       + CASE WHEN c.tsv @@ (SELECT q FROM phrase) THEN 1 ELSE 0 END AS score
  FROM cand c
 ORDER BY score DESC, c.id
 LIMIT $3
"""

# has_copies: the test of _ALSO_IN below as one probe of the md5(content) index per chunk (sql/0021), so the
# search reads the copies only of the hits that have some (most have none: no round trip after the ranking).
_DETAILS = (
    "SELECT c.id AS chunk_id, d.id AS document_id, d.filename, c.chunk_index, c.content, c.page, c.section,"
    " length(c.content_tsv) > 0 AND EXISTS (SELECT 1 FROM document_chunk o WHERE md5(o.content) = md5(c.content)"
    " AND o.kb_id = c.kb_id AND o.id <> c.id AND o.content = c.content) AS has_copies"
    " FROM document_chunk c JOIN document_info d ON d.id = c.document_id WHERE c.id = ANY($1::bigint[])"
)


@contextlib.asynccontextmanager
async def _local_transaction(conn: asyncpg.Connection, settings: str) -> AsyncIterator[asyncpg.Connection]:
    """A transaction whose ``BEGIN`` and ``SET LOCAL settings`` go in one round trip (asyncpg's
    ``transaction()`` sends them in two). Inside an open transaction: a savepoint, as asyncpg nests."""
    if conn.is_in_transaction():
        async with conn.transaction():
            await conn.execute(settings)
            yield conn
        return
    await conn.execute(f"BEGIN; {settings}")
    try:
        yield conn
    except BaseException:
        if not conn.is_closed():
            with contextlib.suppress(asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
                await conn.execute("ROLLBACK")  # else the pool's reset rolls back; the first error is the one raised
        raise
    await conn.execute("COMMIT")

# The other chunks of the KB whose text is a hit's ($1 hit chunk ids, $2 copies listed per hit): the
# md5(content) index of sql/0021 finds the candidates, then the KB and the text itself are compared. A chunk
# without any lexeme (punctuation only) lists no copies.
_ALSO_IN = r"""
SELECT hit_id, chunk_id, document_id, filename, chunk_index, page, section, total FROM (
    SELECT h.id AS hit_id, c.id AS chunk_id, c.document_id, d.filename, c.chunk_index, c.page, c.section,
           count(*) OVER (PARTITION BY h.id) AS total,
           row_number() OVER (PARTITION BY h.id ORDER BY c.document_id, c.chunk_index, c.id) AS n
      FROM document_chunk h
      JOIN document_chunk c ON c.kb_id = h.kb_id AND md5(c.content) = md5(h.content) AND c.id <> h.id
                           AND c.content = h.content
      JOIN document_info d ON d.id = c.document_id
     WHERE h.id = ANY($1::bigint[]) AND length(h.content_tsv) > 0
) x WHERE n <= $2
ORDER BY hit_id, n
"""


@contextlib.asynccontextmanager
async def ranking_transaction(conn: asyncpg.Connection) -> AsyncIterator[asyncpg.Connection]:
    """A transaction for one ranking statement: no JIT (it compiles for 10s of ms; these queries
    are short) and custom plans (a generic plan ignores the KB and the terms)."""
    async with _local_transaction(conn, "SET LOCAL jit = off; SET LOCAL plan_cache_mode = force_custom_plan"):
        yield conn


@contextlib.asynccontextmanager
async def keyword_transaction(conn: asyncpg.Connection) -> AsyncIterator[asyncpg.Connection]:
    """A transaction for :func:`keyword_ranking`: no JIT, candidates through the GIN index (no sequential scan,
    which reads every chunk's tsvector), and the generic plan (planned once per connection: the statement's
    shape does not depend on its parameters)."""
    async with _local_transaction(conn, "SET LOCAL jit = off; SET LOCAL enable_seqscan = off;"
                                        " SET LOCAL plan_cache_mode = force_generic_plan"):
        yield conn


async def kb_vector_count_at_most(conn: asyncpg.Connection, kb_id: int, n: int) -> bool:
    """True if the KB holds at most ``n`` vectors (reads at most n + 1 index entries)."""
    got = await conn.fetchval(
        "SELECT count(*) FROM (SELECT 1 FROM document_vector WHERE kb_id = $1 LIMIT $2) s", kb_id, n + 1
    )
    return int(got) <= n


async def vector_ranking(
    conn: asyncpg.Connection, kb_id: int, embedding: np.ndarray, limit: int, *, exact_max_chunks: int,
    ef_search: int,
) -> Ranked:
    """Top ``limit`` chunks of the KB by cosine similarity; ``embedding`` is ``(dim,) float32``.

    Must run inside a transaction (SET LOCAL: :func:`ranking_transaction`). Exact below
    ``exact_max_chunks`` vectors; above, HNSW with iterative scan (pgvector 0.8 README, "Iterative
    Index Scans") at ``ef_search`` (clamped to 1..1000), re-sorted by distance.
    """
    if await kb_vector_count_at_most(conn, kb_id, exact_max_chunks):
        rows = await conn.fetch(_EXACT, embedding, kb_id, limit)
    else:
        ef = max(1, min(int(ef_search), 1000))
        await conn.execute(f"SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = {ef}")
        rows = await conn.fetch(_HNSW, embedding, kb_id, limit)
    return [(r["chunk_id"], float(r["score"])) for r in rows]


async def keyword_ranking(conn: asyncpg.Connection, kb_id: int, text: str, limit: int, *, budget: int,
                          max_candidates: int) -> Ranked:
    """Top ``limit`` chunks of the KB by full-text match of ``text`` (score:
    :mod:`knowledge_service.search.retrieval`); candidates: chunks holding the rarest terms, about
    ``budget`` of them, at most ``max_candidates``. Must run inside :func:`keyword_transaction`."""
    rows = await conn.fetch(KEYWORD_SQL, text, kb_id, limit, budget, max_candidates)
    return [(r["chunk_id"], float(r["score"])) for r in rows]


async def details(conn: asyncpg.Connection, ids: Sequence[int]) -> dict[int, ChunkDetails]:
    """``{chunk id: its document, filename, index, text, page, section, has_copies}`` of the chunks still there
    among ``ids`` (``has_copies``: :func:`copies` would list some)."""
    return {r["chunk_id"]: ChunkDetails(r["chunk_id"], r["document_id"], r["filename"], r["chunk_index"],
                                        r["content"], r["page"], r["section"], r["has_copies"])
            for r in await conn.fetch(_DETAILS, list(ids))}


async def copies(conn: asyncpg.Connection, ids: Sequence[int], limit: int) -> dict[int, tuple[list[ChunkCopy], int]]:
    """``{hit chunk id: (the other chunks of its KB holding its text, by document then chunk, at most
    ``limit``; how many there are in all)}``; hits without copies are absent (issue 29)."""
    found: dict[int, tuple[list[ChunkCopy], int]] = {}
    for r in await conn.fetch(_ALSO_IN, list(ids), limit):
        listed, _ = found.setdefault(r["hit_id"], ([], int(r["total"])))
        listed.append(ChunkCopy(r["chunk_id"], r["document_id"], r["filename"], r["chunk_index"], r["page"],
                                r["section"]))
    return found
