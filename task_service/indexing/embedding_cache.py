"""Embedding cache decisions (pure): which chunks miss, how the vectors are put together, how
many rows to evict (:func:`shared.domain.cache_policy.eviction_count`, used by the adapter).

A cache entry is keyed by ``(owner, model, revision, SHA-256 of the chunk text)`` (the owner: the
document's user, so tenants never share entries); ``revision`` names
whatever else changes the vectors (the model's revision when known, else its dimension). The
adapter (``shared.adapters.postgres.repo.cache``: ``cache_lookup`` / ``cache_store`` /
``cache_evict``) does the I/O, scoped to one :class:`~shared.domain.records.CacheNamespace`; the
worker (``task_service.indexing.cache``) asks :func:`plan` which texts to send to the model and
:func:`assemble` to build the document's matrix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from shared.adapters.embedding.vectors import FloatMatrix
from shared.domain.cache_policy import text_key

__all__ = ["Plan", "assemble", "plan", "text_key"]


@dataclass(frozen=True)
class Plan:
    """For a document's chunk texts: ``keys[i]`` of text i; ``miss_keys`` the distinct keys not
    in the cache, in first-appearance order, and ``miss_texts`` their texts (what the model
    embeds); ``hits`` chunks served from the cache; ``misses`` chunks not (a text repeated
    within the document is embedded once but counted per chunk)."""

    keys: tuple[bytes, ...]
    miss_keys: tuple[bytes, ...]
    miss_texts: tuple[str, ...]
    hits: int
    misses: int


def plan(texts: Sequence[str], cached: Mapping[bytes, object] | frozenset[bytes] | set[bytes]) -> Plan:
    """Split ``texts`` into cache hits and the distinct texts to embed.

    ``cached``: the keys found in the cache (a mapping or a set of keys).
    """
    keys = tuple(text_key(t) for t in texts)
    miss_keys: list[bytes] = []
    miss_texts: list[str] = []
    seen: set[bytes] = set()
    hits = 0
    for key, text in zip(keys, texts, strict=True):
        if key in cached:
            hits += 1
        elif key not in seen:
            seen.add(key)
            miss_keys.append(key)
            miss_texts.append(text)
    return Plan(keys, tuple(miss_keys), tuple(miss_texts), hits, len(texts) - hits)


def assemble(p: Plan, cached: Mapping[bytes, np.ndarray], embedded: FloatMatrix, dim: int) -> FloatMatrix:
    """The ``(len(p.keys), dim)`` float32 matrix of the document, in chunk order: cached vectors
    for hits, rows of ``embedded`` (one per ``p.miss_keys``, same order) for misses.

    Raises ValueError if ``embedded`` does not have one row of ``dim`` per miss key, or a
    cached vector is not of length ``dim``.
    """
    if embedded.shape != (len(p.miss_keys), dim):
        raise ValueError(f"expected ({len(p.miss_keys)}, {dim}) embeddings, got {embedded.shape}")
    fresh = dict(zip(p.miss_keys, embedded, strict=True))
    out = np.empty((len(p.keys), dim), dtype=np.float32)
    for i, key in enumerate(p.keys):
        row = fresh.get(key)
        if row is None:
            row = np.asarray(cached[key], dtype=np.float32)
            if row.shape != (dim,):
                raise ValueError(f"cached vector of shape {row.shape}, expected ({dim},)")
        out[i] = row
    return out
