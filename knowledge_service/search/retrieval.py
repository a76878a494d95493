"""Search over one knowledge base: vector, keyword (full text) and hybrid (RRF of the two).

The ranking only: the statements live in :mod:`shared.adapters.postgres.repo.search` (what
``bench/retrieval.py`` measures), read through the ``SearchReads`` port
(:class:`shared.ports.SearchReads`). Scores, per mode:

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
(``Hit.also_in``, at most ``ALSO_IN_MAX`` of them; ``also_in_total`` counts all): the other
documents sharing a passage stay visible (issue 29).

Vector search is exact (a scan of the KB's vectors) when the KB holds at most
``exact_max_chunks`` vectors, and uses the HNSW index with pgvector's iterative scan above that
(over the vectors the ANN job has added to it, merged with an exact scan of those it has not:
commits insert outside the index, issue 31); the threshold comes from ``bench/retrieval.py``
(see bench/RESULTS.md).
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from knowledge_service.search.modes import SearchMode as Mode
from knowledge_service.search.ranking import RRF_K, canonicalize, collapse, fuse_hybrid
from shared.domain.records import ChunkCopy, ChunkDetails
from shared.ports import SearchReads

if TYPE_CHECKING:
    from shared.settings import KnowledgeSettings

__all__ = ["Hit", "Mode", "SearchParams", "search"]


@dataclass(frozen=True)
class SearchParams:
    """Tuning of one search; the API builds it from the settings (``SEARCH_*``, :meth:`from_settings`).
    The defaults are the settings' defaults, for tests and library callers (a unit test holds
    them equal)."""

    candidate_depth: int = 50  #: items taken from each list before fusing (hybrid)
    rrf_k: int = RRF_K
    exact_max_chunks: int = 40_000  #: KBs with at most this many vectors are searched exactly
    ef_search: int = 400  #: HNSW ef_search above the threshold (pgvector: 1..1000)
    keyword_budget: int = 2000  #: candidates are chunks holding the rarest query terms, up to this many (estimated)
    keyword_max_candidates: int = 5000  #: hard cap on the chunks scored per keyword query

    @classmethod
    def from_settings(cls, s: KnowledgeSettings) -> SearchParams:
        return cls(candidate_depth=s.search_candidate_depth, rrf_k=s.search_rrf_k,
                   exact_max_chunks=s.search_exact_max_chunks, ef_search=s.search_ef_search,
                   keyword_budget=s.search_keyword_budget, keyword_max_candidates=s.search_keyword_max_candidates)


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
    also_in: tuple[ChunkCopy, ...] = ()  #: the other chunks holding the same text (by document, chunk), capped
    also_in_total: int = 0  #: how many there are in all


#: Copies listed per hit (``Hit.also_in``); ``also_in_total`` counts them all.
ALSO_IN_MAX = 50

Ranked = list[tuple[int, float]]  # (chunk id, score), best first
#: The query embedding ``(dim,) float32``, or a future of it: the keyword list starts while the query is embedded.
QueryVector = np.ndarray | asyncio.Future[np.ndarray]
ContentOf = dict[int, str]  # chunk id → MD5 of the chunk text (hex)
DetailsOf = dict[int, ChunkDetails]  # chunk id → its document, text, page, section (the chunks still there)
_REFILL_ROUNDS = 4  # a list short of results after collapsing copies is fetched again, twice as deep


def _hit(d: ChunkDetails, score: float, sources: dict[str, int],
         copies: tuple[list[ChunkCopy], int] = ([], 0)) -> Hit:
    return Hit(d.chunk_id, d.document_id, d.filename, d.chunk_index, d.content, d.page, d.section, score, sources,
               tuple(copies[0]), copies[1])


async def vector_ranking(reads: SearchReads, kb_id: int, embedding: np.ndarray, limit: int,
                         params: SearchParams) -> Ranked:
    """Top ``limit`` chunks of the KB by cosine similarity to ``embedding`` (``(dim,) float32``):
    exact up to ``params.exact_max_chunks`` vectors, HNSW at ``params.ef_search`` above."""
    return await reads.vector(kb_id, embedding, limit, exact_max_chunks=params.exact_max_chunks,
                              ef_search=params.ef_search)


async def keyword_ranking(reads: SearchReads, kb_id: int, text: str, limit: int, params: SearchParams) -> Ranked:
    """Top ``limit`` chunks of the KB by full-text match of ``text`` (score: see the module doc)."""
    return await reads.keyword(kb_id, text, limit, budget=params.keyword_budget,
                               max_candidates=params.keyword_max_candidates)


async def _ranking(reads: SearchReads, name: str, kb_id: int, text: str, embedding: np.ndarray | None, limit: int,
                   params: SearchParams) -> Ranked:
    if name == "vector":
        assert embedding is not None
        return await vector_ranking(reads, kb_id, embedding, limit, params)
    return await keyword_ranking(reads, kb_id, text, limit, params)


async def _one_list(reads: SearchReads, name: str, kb_id: int, text: str, query: QueryVector | None, depth: int,
                    params: SearchParams) -> tuple[Ranked, ContentOf, DetailsOf]:
    """The top ``depth`` of list ``name`` with one chunk per chunk text: copies of a document
    (uploaded with ``allow_duplicate``) and repeated paragraphs hold the same text and would fill the list.
    The details of the list's chunks come in the same read as their content keys (the MD5 of the text, as
    PostgreSQL's ``md5(content)``): one round trip per round, none after the ranking."""
    embedding = None
    if name == "vector":  # the keyword list never waits for the query's embedding
        embedding = await query if isinstance(query, asyncio.Future) else query
    limit = depth
    for round_ in range(_REFILL_ROUNDS):
        raw = await _ranking(reads, name, kb_id, text, embedding, limit, params)
        details = await reads.details([cid for cid, _ in raw])
        content_of = {cid: hashlib.md5(d.content.encode(), usedforsecurity=False).hexdigest()
                      for cid, d in details.items()}
        kept = collapse(raw, content_of)
        if len(kept) >= depth or len(raw) < limit or round_ == _REFILL_ROUNDS - 1:
            return kept[:depth], content_of, details
        limit *= 2
    raise AssertionError("unreachable")


async def rank(
    reads: SearchReads, kb_id: int, mode: Mode, text: str, embedding: QueryVector | None, top_k: int,
    params: SearchParams,
) -> list[tuple[int, float, dict[str, int]]]:
    """``[(chunk id, score, {list: rank})]`` best first, at most ``top_k``, never two chunks with
    the same text.

    Hybrid mode runs its two lists at once when ``reads.parallel``, else one after the other.
    ``embedding`` is required unless ``mode`` is keyword (ValueError otherwise); a future of it lets the
    keyword list run while the query is embedded (only the vector list awaits it).
    """
    return (await _rank(reads, kb_id, mode, text, embedding, top_k, params))[0]


async def _rank(
    reads: SearchReads, kb_id: int, mode: Mode, text: str, embedding: QueryVector | None, top_k: int,
    params: SearchParams,
) -> tuple[list[tuple[int, float, dict[str, int]]], DetailsOf]:
    """:func:`rank`, and the details of the chunks the lists read."""
    names = {Mode.VECTOR: ["vector"], Mode.KEYWORD: ["keyword"], Mode.HYBRID: ["vector", "keyword"]}[mode]
    if embedding is None and "vector" in names:
        raise ValueError("vector and hybrid search need the query embedding")
    depth = max(top_k, params.candidate_depth) if mode is Mode.HYBRID else top_k
    if reads.parallel:
        got = await asyncio.gather(*(_one_list(reads, n, kb_id, text, embedding, depth, params) for n in names))
    else:
        got = [await _one_list(reads, n, kb_id, text, embedding, depth, params) for n in names]
    content_of: ContentOf = {}
    details: DetailsOf = {}
    for _, keys, found in got:
        content_of |= keys
        details |= found
    lists = canonicalize({n: ranked for n, (ranked, _, _) in zip(names, got, strict=True)}, content_of)
    if mode is not Mode.HYBRID:
        ((name, ranked),) = lists.items()
        return [(cid, score, {name: i}) for i, (cid, score) in enumerate(ranked, start=1)], details
    fused = fuse_hybrid(lists["vector"], lists["keyword"], k=params.rrf_k, depth=depth, max_group=top_k)
    return [(f.key, f.score, f.sources) for f in fused[:top_k]], details


async def search(
    reads: SearchReads, kb_id: int, mode: Mode, text: str, embedding: QueryVector | None, top_k: int,
    params: SearchParams,
) -> list[Hit]:
    """Top ``top_k`` hits of the KB, best first, with the chunk's document, page and section (read with
    the lists: a chunk gone by then is left out) and the other chunks holding its text. Raises what ``reads``
    raises (``DatabaseUnavailableError`` from the pooled adapter)."""
    ranked, details = await _rank(reads, kb_id, mode, text, embedding, top_k, params)
    with_copies = [cid for cid, _, _ in ranked if cid in details and details[cid].has_copies]
    copies = await reads.copies(with_copies, ALSO_IN_MAX) if with_copies else {}
    return [_hit(details[cid], score, sources, copies.get(cid, ([], 0)))
            for cid, score, sources in ranked if cid in details]

