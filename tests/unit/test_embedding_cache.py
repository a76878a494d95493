"""The embedding cache's pure decisions (task_service.indexing.embedding_cache): misses, assembly, eviction."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from shared.domain.cache_policy import eviction_count
from shared.domain.records import CacheNamespace
from task_service.indexing.embedding_cache import assemble, plan, text_key

DIM = 4


def _vec(x: float) -> np.ndarray:
    return np.full(DIM, x, dtype=np.float32)


def test_key_is_the_sha256_of_the_utf8_text() -> None:
    assert text_key("café") == hashlib.sha256("café".encode()).digest()
    assert len(text_key("")) == 32
    assert text_key("a") != text_key("a ")


def test_namespace_defaults_the_revision_to_the_dimension() -> None:
    assert CacheNamespace.of("all-MiniLM-L6-v2", 384) == CacheNamespace.of("all-MiniLM-L6-v2", 384, "dim384")
    assert CacheNamespace.of("m", 384, "2024-05").revision == "2024-05"
    assert CacheNamespace.of("m", 384).revision != CacheNamespace.of("m", 768).revision
    with pytest.raises(ValueError):
        CacheNamespace.of("", 384)
    with pytest.raises(ValueError):
        CacheNamespace.of("m", 0)


def test_everything_cached_sends_nothing_to_the_model() -> None:
    texts = ["one", "two", "three"]
    p = plan(texts, {text_key(t) for t in texts})
    assert (p.hits, p.misses, p.miss_texts) == (3, 0, ())


def test_only_the_edited_chunk_misses() -> None:
    old = [f"paragraph {i}" for i in range(200)]
    new = list(old)
    new[57] = "paragraph 57, edited"
    p = plan(new, {text_key(t) for t in old})
    assert (p.hits, p.misses, p.miss_texts) == (199, 1, ("paragraph 57, edited",))


def test_a_text_repeated_in_the_document_is_embedded_once_but_counted_per_chunk() -> None:
    p = plan(["same", "other", "same"], set())
    assert p.miss_texts == ("same", "other")
    assert (p.hits, p.misses) == (0, 3)


def test_assemble_puts_cached_and_fresh_vectors_in_chunk_order() -> None:
    texts = ["a", "b", "a", "c"]
    cached = {text_key("b"): _vec(2)}
    p = plan(texts, cached)
    fresh = np.stack([_vec(1), _vec(3)])  # a, c: the miss order
    out = assemble(p, cached, fresh, DIM)
    assert out.dtype == np.float32 and out.shape == (4, DIM)
    assert [float(row[0]) for row in out] == [1, 2, 1, 3]


def test_assemble_refuses_a_wrong_number_or_size_of_vectors() -> None:
    p = plan(["a", "b"], {text_key("b"): _vec(2)})
    with pytest.raises(ValueError):
        assemble(p, {text_key("b"): _vec(2)}, np.zeros((2, DIM), dtype=np.float32), DIM)
    with pytest.raises(ValueError):
        assemble(p, {text_key("b"): np.zeros(DIM + 1, dtype=np.float32)}, np.zeros((1, DIM), np.float32), DIM)


def test_no_eviction_within_the_bound_then_down_to_the_low_water_mark() -> None:
    assert eviction_count(0, 100) == 0
    assert eviction_count(100, 100) == 0
    assert eviction_count(101, 100) == 11  # down to 90
    assert eviction_count(150, 100, low_water=1.0) == 50
    assert eviction_count(5, 0) == 5  # max 0 keeps nothing
    with pytest.raises(ValueError):
        eviction_count(-1, 10)
    with pytest.raises(ValueError):
        eviction_count(1, 10, low_water=0)
