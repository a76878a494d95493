"""Reciprocal rank fusion (pure): several rankings of the same items become one.

Cormack, Clarke and Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and individual rank
learning methods" (SIGIR 2009): ``score(d) = Σ_lists 1 / (k + rank_list(d))`` with 1-based ranks
and ``k = 60``; an item absent from a list adds nothing for it.

Hybrid search fuses with :func:`fuse_hybrid`: RRF, plus a decisive exact keyword hit kept on top
(issue 20). Plain RRF ranks an item that only one list holds, even at rank 1 with a score far
above the runner-up, below items that are middling in both lists; among look-alike documents
(bench/lookalike.py: one template, a unique code each) the vector list is noise. Recall@5 of the
code's document over 120 look-alikes, code alone / inside a question, same two lists (bench
section "fusion", ``python -m bench.retrieval --fusion-only``):

============================================  =======  ==========  ===============
fusion                                         alone    question    self-retrieval
============================================  =======  ==========  ===============
RRF, k = 60 (before)                           0.533    0.542       0.922
weighted RRF, keyword x2 / x3                  0.567    0.650       0.925-0.927
convex, min-max normalised, alpha 0.5          1.000    1.000       0.932
decisive exact hit, 2x ratio only              1.000    0.983       0.932
decisive, 2x ratio or 0.3 gap (this module)    1.000    1.000       0.932
============================================  =======  ==========  ===============

(Run of 2026-12-02 05:00 UTC with the whole corpus, novel included. Self-retrieval counts a hit by
document, and two corpus files hold the same text, which since issue 17 is one hit.)

Weighted RRF is the weighted form and the convex combination of min-max normalised scores the
"TM2C2" of Bruch, Gai and Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval" (ACM
TOIS 42(1), 2023; also Weaviate's ``relativeScoreFusion``). The decisive rule was chosen over the
convex combination, equal here, because it leaves every query without a standout exact hit to
plain RRF (as measured since issue 9), while the convex combination re-weighs every query by
min-max scaled scores (the best keyword hit scales to 1 even when it holds only a common word)
and needs its alpha tuned per collection (Bruch et al.). A keyword hit is decisive when it holds
at least :data:`DECISIVE_MIN_SCORE` of the query's term weight (the rare terms carry nearly all
of it: ``idf²``) and its keyword score is at least :data:`DECISIVE_RATIO` times the best score
below its group, or above it by :data:`DECISIVE_GAP` of the query's term weight (:func:`decisive_keys`).

The gap rule came from a miss of the ratio alone: with a whole corpus in the same table (the
term statistics are table-wide), "when did the shipment INV-5938-40311e arrive?" scored 0.82 on
its document and 0.45 on a look-alike whose code shares "5938" (1.83x, not 2x), and plain RRF then
left the document out of the hybrid top 5 (2 of 120 questions, bench section "peer"). The 0.37 its
rival lacks is the code's unique part: with ``idf²`` weights only rare terms carry that much.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

RRF_K = 60
#: A decisive keyword hit scores at least this many times the best keyword score below its group.
DECISIVE_RATIO = 2.0
#: ... or at least this much more of the query's term weight (keyword scores are shares of it):
#: terms the next hit lacks that weigh this much are rare ones (issue 20, see the module docstring).
DECISIVE_GAP = 0.3
#: ... and at least this keyword score: half of the query's term weight (keyword scores are 0..2).
DECISIVE_MIN_SCORE = 0.5
#: Added to the RRF score of a decisive keyword hit: above every other item (RRF ≤ 2 / (k + 1)).
DECISIVE_BOOST = 1.0
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Fused(Generic[K]):
    """One fused item: its RRF score and its 1-based rank in each list that held it."""

    key: K
    score: float
    sources: dict[str, int] = field(default_factory=dict)


def rrf(rankings: Mapping[str, Sequence[K]], *, k: int = RRF_K, depth: int | None = None) -> list[Fused[K]]:
    """Fuse ``{list name: keys best first}`` into one ranking, best first.

    Each list is cut at ``depth`` items (all if None) before fusing; a key repeated within one
    list counts at its first (best) rank only. Ties in score go to the item with the better best
    rank, then to the list order of ``rankings`` and the position there (deterministic).
    Raises ValueError if ``k`` < 1 or ``depth`` < 1.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    if depth is not None and depth < 1:
        raise ValueError("depth must be >= 1")
    sources: dict[K, dict[str, int]] = {}
    for name, keys in rankings.items():
        for rank, key in enumerate(keys[:depth] if depth is not None else keys, start=1):
            seen = sources.setdefault(key, {})
            seen.setdefault(name, rank)
    fused = [Fused(key, sum(1.0 / (k + r) for r in ranks.values()), ranks) for key, ranks in sources.items()]
    order = {key: i for i, key in enumerate(sources)}  # first appearance: list order, then rank
    fused.sort(key=lambda f: (-f.score, min(f.sources.values()), order[f.key]))
    return fused


def collapse(ranked: Sequence[tuple[K, float]], content_of: Mapping[K, Hashable]) -> list[tuple[K, float]]:
    """Keep the first (best) of the items sharing a content key (``content_of[item]``; an item
    without one is its own key), in order: one result per content (the search uses the chunk
    text's hash)."""
    seen: set[Hashable] = set()
    out: list[tuple[K, float]] = []
    for key, score in ranked:
        content = content_of.get(key, ("item", key))
        if content not in seen:
            seen.add(content)
            out.append((key, score))
    return out


def canonicalize(
    lists: Mapping[str, Sequence[tuple[K, float]]], content_of: Mapping[K, Hashable]
) -> dict[str, list[tuple[K, float]]]:
    """Collapse each list (:func:`collapse`) and name every content by one item across the lists
    (the first seen, lists in order), so that fusion counts the same content once even when
    two lists picked different copies of it."""
    representative: dict[Hashable, K] = {}
    out: dict[str, list[tuple[K, float]]] = {}
    for name, ranked in lists.items():
        kept = collapse(ranked, content_of)
        for key, _ in kept:
            representative.setdefault(content_of.get(key, ("item", key)), key)
        out[name] = [(representative[content_of.get(key, ("item", key))], score) for key, score in kept]
    return out


def decisive_keys(keyword: Sequence[tuple[K, float]], *, max_group: int, ratio: float = DECISIVE_RATIO,
                  gap: float = DECISIVE_GAP, min_score: float = DECISIVE_MIN_SCORE) -> list[K]:
    """The decisive head of a keyword list ``[(key, score)]`` (best first): the shortest prefix of
    at most ``max_group`` items whose last score is at least ``min_score`` and either at least
    ``ratio`` times the next item's score or at least ``gap`` above it (the next is 0 after the last
    item); ``[]`` when there is no such prefix (a flat list: no exact hit stands out). Raises
    ValueError if ``max_group`` < 1, ``ratio`` <= 1 or ``gap`` <= 0."""
    if max_group < 1:
        raise ValueError("max_group must be >= 1")
    if ratio <= 1:
        raise ValueError("ratio must be > 1")
    if gap <= 0:
        raise ValueError("gap must be > 0")
    scores = [score for _, score in keyword[:max_group + 1]]
    for m in range(1, min(max_group, len(scores)) + 1):
        last, after = scores[m - 1], scores[m] if m < len(scores) else 0.0
        if last < min_score:
            return []
        if last >= ratio * after or last - after >= gap:
            return [key for key, _ in keyword[:m]]
    return []


def fuse_hybrid(vector: Sequence[tuple[K, float]], keyword: Sequence[tuple[K, float]], *, k: int = RRF_K,
                depth: int | None = None, max_group: int = 10, gap: float = DECISIVE_GAP) -> list[Fused[K]]:
    """Hybrid ranking of a vector and a keyword list ``[(key, score)]`` (best first), best first.

    Every item scores its RRF score (:func:`rrf` over both lists cut at ``depth``), plus
    :data:`DECISIVE_BOOST` for the decisive keyword hits (:func:`decisive_keys` with
    ``max_group`` and ``gap``): scores are 0..2/(k+1), or 1 more for a decisive exact hit. Ties as in
    :func:`rrf`. Raises ValueError for a bad ``k``, ``depth``, ``max_group`` or ``gap``.
    """
    fused = rrf({"vector": [key for key, _ in vector], "keyword": [key for key, _ in keyword]}, k=k, depth=depth)
    cut = keyword[:depth] if depth is not None else keyword
    decisive = set(decisive_keys(cut, max_group=max_group, gap=gap))
    if not decisive:
        return fused
    boosted = [Fused(f.key, f.score + DECISIVE_BOOST, f.sources) if f.key in decisive else f for f in fused]
    order = {f.key: i for i, f in enumerate(fused)}
    boosted.sort(key=lambda f: (-f.score, order[f.key]))
    return boosted
