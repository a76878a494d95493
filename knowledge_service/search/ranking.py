"""Reciprocal rank fusion (pure): several rankings of the same items become one.

Cormack, Clarke and Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and individual rank
learning methods" (SIGIR 2009): ``score(d) = Σ_lists 1 / (k + rank_list(d))`` with 1-based ranks
and ``k = 60``; an item absent from a list adds nothing for it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

RRF_K = 60
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
