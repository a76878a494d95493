"""Search over one knowledge base: vector, keyword (full text) and hybrid (RRF of the two).

The SQL the API runs (and ``bench/retrieval.py`` measures). Scores, per mode:

* ``vector``: cosine similarity of query and chunk embeddings, -1..1.
* ``keyword``: the share of the query's term weight the chunk holds, 0..1, plus 1 when the chunk
  holds the whole query as a phrase: 0..2. Only terms some chunk holds count (a word found nowhere,
  a typo, would weigh most and shrink every share; issue 20). A term weighs ``idf²`` with ``idf = ln(1 + 1/df)``
  (squared as in Lucene's ClassicSimilarity, query weight x document weight: one unique
  identifier outweighs two uncommon words of a sentence around it); ``df`` is the share of the
  KB's chunks holding the term, counted inside the KB searched and nowhere else (exact, sql/0018:
  another tenant's documents change no score). Candidates are the KB's chunks holding the rarest
  terms, straight from the ``(kb_id, content_tsv)`` GIN index.
* ``hybrid``: reciprocal rank fusion of the two lists, 0..2/(k+1), plus 1 for a decisive exact keyword hit
  (:func:`knowledge_service.search.ranking.fuse_hybrid`).

Every list keeps one chunk per chunk text (its MD5, a de-duplication key, not a security one):
copies of one file in a KB (uploaded with ``allow_duplicate``), a paragraph a document repeats,
or a boilerplate paragraph several documents share never show the same text twice; the best
ranked (the first) is kept, and the hit names every other chunk of the KB holding that text
(``Hit.also_in``, at most ``ALSO_IN_MAX`` of them, ``also_in_total`` counts all): the other
documents sharing a passage stay visible (issue 29).

Vector search is exact (a scan of the KB's vectors) when the KB holds at most
``exact_max_chunks`` vectors, and uses the HNSW index with pgvector's iterative scan above that;
the threshold comes from ``bench/retrieval.py`` (see bench/RESULTS.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeAlias

import asyncpg
import numpy as np

from knowledge_service.search.ranking import RRF_K, canonicalize, collapse, fuse_hybrid
from shared.adapters.postgres.pool import connection


class Mode(StrEnum):
    VECTOR = "vector"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


@dataclass(frozen=True)
class SearchParams:
    """Tuning of one search; the API fills it from settings (``search_*``)."""

    candidate_depth: int = 50  #: items taken from each list before fusing (hybrid)
    rrf_k: int = RRF_K
    exact_max_chunks: int = 40_000  #: KBs with at most this many vectors are searched exactly
    ef_search: int = 400  #: HNSW ef_search above the threshold (pgvector: 1..1000)
    keyword_budget: int = 2000  #: candidates are chunks holding the rarest query terms, up to this many (estimated)
    keyword_max_candidates: int = 5000  #: hard cap on the chunks scored per keyword query


@dataclass(frozen=True)
class Copy:
    """Another chunk of the KB holding a hit's text, in another document or elsewhere in the same one."""

    chunk_id: int
    document_id: int
    filename: str
    chunk_index: int
    page: int | None
    section: str | None


@dataclass(frozen=True)
class Hit:
    chunk_id: int
    document_id: int
    filename: str
    chunk_index: int
    content: str
    page: int | None
    section: str | None
    score: float
    sources: dict[str, int] = field(default_factory=dict)
    also_in: tuple[Copy, ...] = ()  #: the other chunks holding the same text (by document, chunk), capped
    also_in_total: int = 0  #: how many there are in all


Ranked = list[tuple[int, float]]  # (chunk id, score), best first

_EXACT = (
    "SELECT chunk_id, 1 - d AS score FROM (SELECT chunk_id, embedding <=> $1 AS d FROM document_vector"
    " WHERE kb_id = $2 OFFSET 0) s ORDER BY d, chunk_id LIMIT $3"
)
_HNSW = (
    "SELECT chunk_id, 1 - d AS score FROM (SELECT chunk_id, embedding <=> $1 AS d FROM document_vector"
    " WHERE kb_id = $2 ORDER BY embedding <=> $1 LIMIT $3) s ORDER BY d, chunk_id"
)

# Keyword ranking in one statement. $1 query text (cleaned), $2 kb id, $3 limit, $4 candidate budget (chunks of
# the KB the selecting terms may hold), $5 hard cap on the KB's candidates. Every frequency is the KB's own, exact:
# the folded counts of sql/0018 plus the deltas not yet folded, read in this statement's one snapshot (the term
# '' is the KB's chunk count). Candidates come from the (kb_id, content_tsv) GIN index (sql/0015).
_KEYWORD = r"""
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
), cand AS MATERIALIZED (
    SELECT c.id, c.content_tsv
      FROM document_chunk c
     WHERE c.kb_id = $2 AND c.content_tsv @@ (SELECT q FROM sel)
     LIMIT $5
), copied AS MATERIALIZED (  -- the KB's candidates detoasted once each, not at every @@ below
    SELECT id, content_tsv || ''::tsvector AS tsv FROM cand
)
SELECT c.id AS chunk_id,
       (SELECT sum(t.w) FROM weighted t WHERE c.tsv @@ t.q) / (SELECT nullif(sum(w), 0) FROM weighted WHERE freq > 0)
       + CASE WHEN c.tsv @@ phraseto_tsquery('rag_simple', rag_search_text($1)) THEN 1 ELSE 0 END AS score
  FROM copied c
 ORDER BY score DESC, c.id
 LIMIT $3
"""

_DETAILS = (
    "SELECT c.id AS chunk_id, d.id AS document_id, d.filename, c.chunk_index, c.content, c.page, c.section"
    " FROM document_chunk c JOIN document_info d ON d.id = c.document_id WHERE c.id = ANY($1::bigint[])"
)


async def kb_vector_count_at_most(conn: asyncpg.Connection, kb_id: int, n: int) -> bool:
    """True if the KB holds at most ``n`` vectors (reads at most n + 1 index entries)."""
    got = await conn.fetchval(
        "SELECT count(*) FROM (SELECT 1 FROM document_vector WHERE kb_id = $1 LIMIT $2) s", kb_id, n + 1
    )
    return int(got) <= n


async def vector_ranking(
    conn: asyncpg.Connection, kb_id: int, embedding: np.ndarray, limit: int, params: SearchParams
) -> Ranked:
    """Top ``limit`` chunks of the KB by cosine similarity; ``embedding`` is ``(dim,) float32``.

    Must run inside a transaction (SET LOCAL). Exact below ``params.exact_max_chunks`` vectors;
    above, HNSW with iterative scan (pgvector 0.8 README, "Iterative Index Scans") at
    ``params.ef_search``, re-sorted by distance.
    """
    if await kb_vector_count_at_most(conn, kb_id, params.exact_max_chunks):
        rows = await conn.fetch(_EXACT, embedding, kb_id, limit)
    else:
        ef = max(1, min(int(params.ef_search), 1000))
        await conn.execute(f"SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = {ef}")
        rows = await conn.fetch(_HNSW, embedding, kb_id, limit)
    return [(r["chunk_id"], float(r["score"])) for r in rows]


async def keyword_ranking(conn: asyncpg.Connection, kb_id: int, text: str, limit: int,
                          params: SearchParams) -> Ranked:
    """Top ``limit`` chunks of the KB by full-text match of ``text`` (score: see module doc)."""
    rows = await conn.fetch(_KEYWORD, text, kb_id, limit, params.keyword_budget, params.keyword_max_candidates)
    return [(r["chunk_id"], float(r["score"])) for r in rows]


async def _details(conn: asyncpg.Connection, ids: Sequence[int]) -> dict[int, asyncpg.Record]:
    return {r["chunk_id"]: r for r in await conn.fetch(_DETAILS, list(ids))}


#: Copies listed per hit (``Hit.also_in``); ``also_in_total`` counts them all.
ALSO_IN_MAX = 50

# The other chunks of the KB whose text is a hit's ($1 hit chunk ids, $2 copies listed per hit). A copy holds
# every lexeme of the hit: the hit's four rarest lexemes in its KB (sql/0018's folded counts: an order, not a
# score) select candidates from the (kb_id, content_tsv) GIN index (sql/0015), then the text is compared.
# A chunk without any lexeme (punctuation only) lists no copies.
_ALSO_IN = r"""
SELECT hit_id, chunk_id, document_id, filename, chunk_index, page, section, total FROM (
    SELECT h.id AS hit_id, c.id AS chunk_id, c.document_id, d.filename, c.chunk_index, c.page, c.section,
           count(*) OVER (PARTITION BY h.id) AS total,
           row_number() OVER (PARTITION BY h.id ORDER BY c.document_id, c.chunk_index, c.id) AS n
      FROM document_chunk h
     CROSS JOIN LATERAL (
           SELECT string_agg('''' || replace(replace(r.lexeme, '\', '\\'), '''', '''''') || '''', ' & ')::tsquery AS q
             FROM (SELECT t.lexeme FROM unnest(h.content_tsv) t
                     LEFT JOIN kb_term k ON k.kb_id = h.kb_id AND k.term = t.lexeme
                    ORDER BY coalesce(k.df, 0), t.lexeme LIMIT 4) r
           ) s
      JOIN document_chunk c ON c.kb_id = h.kb_id AND c.content_tsv @@ s.q AND c.id <> h.id AND c.content = h.content
      JOIN document_info d ON d.id = c.document_id
     WHERE h.id = ANY($1::bigint[]) AND s.q IS NOT NULL
) x WHERE n <= $2
ORDER BY hit_id, n
"""


async def _copies(conn: asyncpg.Connection, ids: Sequence[int]) -> dict[int, tuple[tuple[Copy, ...], int]]:
    """Hit chunk id → (its copies, the first ``ALSO_IN_MAX``; how many in all); hits without copies absent."""
    found: dict[int, tuple[list[Copy], int]] = {}
    for r in await conn.fetch(_ALSO_IN, list(ids), ALSO_IN_MAX):
        copies, _ = found.setdefault(r["hit_id"], ([], int(r["total"])))
        copies.append(Copy(r["chunk_id"], r["document_id"], r["filename"], r["chunk_index"], r["page"], r["section"]))
    return {hit: (tuple(copies), total) for hit, (copies, total) in found.items()}


def _hit(r: asyncpg.Record, score: float, sources: dict[str, int],
         copies: tuple[tuple[Copy, ...], int] = ((), 0)) -> Hit:
    return Hit(r["chunk_id"], r["document_id"], r["filename"], r["chunk_index"], r["content"], r["page"],
               r["section"], score, sources, copies[0], copies[1])


Db: TypeAlias = "asyncpg.Connection | asyncpg.Pool"


_CONTENT_KEYS = "SELECT c.id, md5(c.content) AS text_md5 FROM document_chunk c WHERE c.id = ANY($1::bigint[])"
ContentOf = dict[int, str]  # chunk id → MD5 of the chunk text (hex)
_REFILL_ROUNDS = 4  # a list short of results after collapsing copies is fetched again, twice as deep


async def _content_keys(conn: asyncpg.Connection, ids: Sequence[int]) -> ContentOf:
    return {r["id"]: r["text_md5"] for r in await conn.fetch(_CONTENT_KEYS, list(ids))}


async def _one_list(db: Db, name: str, kb_id: int, text: str, embedding: np.ndarray | None, depth: int,
                    params: SearchParams) -> tuple[Ranked, ContentOf]:
    """The top ``depth`` of list ``name`` with one chunk per chunk text: copies of a document
    (uploaded with ``allow_duplicate``) and repeated paragraphs hold the same text and would fill the list."""
    if isinstance(db, asyncpg.Pool):
        async with connection(db) as conn:
            return await _one_list(conn, name, kb_id, text, embedding, depth, params)
    limit = depth
    for round_ in range(_REFILL_ROUNDS):
        async with db.transaction():
            # JIT compiles for 10s of ms (these queries are short); a generic plan ignores the KB and the terms
            await db.execute("SET LOCAL jit = off; SET LOCAL plan_cache_mode = force_custom_plan")
            if name == "vector":
                assert embedding is not None
                raw = await vector_ranking(db, kb_id, embedding, limit, params)
            else:
                raw = await keyword_ranking(db, kb_id, text, limit, params)
        content_of = await _content_keys(db, [cid for cid, _ in raw])
        kept = collapse(raw, content_of)
        if len(kept) >= depth or len(raw) < limit or round_ == _REFILL_ROUNDS - 1:
            return kept[:depth], content_of
        limit *= 2
    raise AssertionError("unreachable")


async def rank(
    db: Db, kb_id: int, mode: Mode, text: str, embedding: np.ndarray | None, top_k: int, params: SearchParams,
) -> list[tuple[int, float, dict[str, int]]]:
    """``[(chunk id, score, {list: rank})]`` best first, at most ``top_k``, never two chunks with
    the same text.

    Given a pool, hybrid mode runs its two lists at once on two connections; given a connection,
    one after the other. ``embedding`` is required unless ``mode`` is keyword (ValueError otherwise).
    """
    names = {Mode.VECTOR: ["vector"], Mode.KEYWORD: ["keyword"], Mode.HYBRID: ["vector", "keyword"]}[mode]
    if embedding is None and "vector" in names:
        raise ValueError("vector and hybrid search need the query embedding")
    depth = max(top_k, params.candidate_depth) if mode is Mode.HYBRID else top_k
    if isinstance(db, asyncpg.Pool):
        got = await asyncio.gather(*(_one_list(db, n, kb_id, text, embedding, depth, params) for n in names))
    else:
        got = [await _one_list(db, n, kb_id, text, embedding, depth, params) for n in names]
    content_of: ContentOf = {}
    for _, keys in got:
        content_of |= keys
    lists = canonicalize({n: ranked for n, (ranked, _) in zip(names, got, strict=True)}, content_of)
    if mode is not Mode.HYBRID:
        ((name, ranked),) = lists.items()
        return [(cid, score, {name: i}) for i, (cid, score) in enumerate(ranked, start=1)]
    fused = fuse_hybrid(lists["vector"], lists["keyword"], k=params.rrf_k, depth=depth, max_group=top_k)
    return [(f.key, f.score, f.sources) for f in fused[:top_k]]


async def search(
    db: Db, kb_id: int, mode: Mode, text: str, embedding: np.ndarray | None, top_k: int, params: SearchParams,
) -> list[Hit]:
    """Top ``top_k`` hits of the KB, best first, with the chunk's document, page and section.

    Given a pool, a connection-level failure raises ``DatabaseUnavailableError``
    (:func:`shared.adapters.postgres.pool.connection`); given a connection, the caller translates."""
    ranked = await rank(db, kb_id, mode, text, embedding, top_k, params)
    ids = [cid for cid, _, _ in ranked]
    if isinstance(db, asyncpg.Pool):
        async with connection(db) as conn:
            rows, copies = await _details(conn, ids), await _copies(conn, ids)
    else:
        rows, copies = await _details(db, ids), await _copies(db, ids)
    return [_hit(rows[cid], score, sources, copies.get(cid, ((), 0))) for cid, score, sources in ranked if cid in rows]
