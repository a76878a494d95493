"""The bundled MiniLM model (loads in seconds, a real model: integration tier, no services)."""

from __future__ import annotations

import numpy as np
import pytest

from shared.adapters.embedding import Embedder, SentenceTransformerEmbedder, build_embedder
from shared.domain.errors import ConfigurationError


@pytest.fixture(scope="module")
def local() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(batch_size=16)


@pytest.mark.asyncio
async def test_local_model_shape_dtype_and_norm(local: SentenceTransformerEmbedder) -> None:
    assert isinstance(local, Embedder)
    assert (local.model_name, local.dim) == ("all-MiniLM-L6-v2", 384)
    texts = [f"Sentence number {i} about something." for i in range(37)]  # more than one batch
    matrix = await local.embed(texts)
    assert matrix.shape == (37, 384) and matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    again = await local.embed(texts[5:6])
    np.testing.assert_allclose(again[0], matrix[5], atol=1e-5)  # batch composition does not matter


@pytest.mark.asyncio
async def test_local_batches_match_encode_in_input_order(local: SentenceTransformerEmbedder) -> None:
    """Longest-first batching with the next batch tokenized during the forward pass gives the
    vectors ``encode()`` gives, row for row in input order (lengths vary across batches)."""
    texts = [("word " * (1 + (i * 37) % 90)).strip() + f" {i}" for i in range(41)]
    got = await local.embed(texts)
    want = local._model.encode(texts, batch_size=16, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(got, want, atol=2e-5)


@pytest.mark.asyncio
async def test_local_model_semantics(local: SentenceTransformerEmbedder) -> None:
    cat, kitten, stocks, chinese_cat = await local.embed(
        [
            "A cat is sleeping on the sofa.",
            "A kitten naps on the couch.",
            "The central bank raised interest rates again.",
            "猫在沙发上睡觉。",
        ]
    )
    assert float(cat @ kitten) > 0.6
    assert float(cat @ kitten) > float(cat @ stocks) + 0.3
    assert float(kitten @ stocks) < 0.2
    assert np.isfinite(chinese_cat).all()


@pytest.mark.asyncio
async def test_local_model_empty_input(local: SentenceTransformerEmbedder) -> None:
    empty = await local.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_build_embedder_local() -> None:
    embedder = build_embedder("sentence-transformers", batch_size=8, dim=384)
    assert isinstance(embedder, SentenceTransformerEmbedder) and embedder.batch_size == 8
    with pytest.raises(ConfigurationError, match="768"):
        build_embedder("sentence-transformers", dim=768)
    with pytest.raises(ConfigurationError, match="unknown embedding provider"):
        build_embedder("word2vec")
