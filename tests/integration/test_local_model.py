"""The bundled MiniLM model on both runtimes (loads in seconds, a real model: integration tier,
no services). The ONNX graph is the one ``make install`` built."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from shared.adapters.embedding import Embedder, SentenceTransformerEmbedder, build_embedder
from shared.adapters.embedding.models import minilm_model_dir
from shared.adapters.embedding.onnx_runtime import MiniLMTokenizer
from shared.domain.errors import ConfigurationError

#: Texts where two tokenizations or two runtimes could part: blanks around and inside, an empty
#: text, other scripts, ligatures, a text far past the 256-token window, one word of 300 letters.
AWKWARD = [
    "  leading and trailing blanks  ", "\ttab\nnewline\r\n", "", "知识库中的每一个词都应该可以被检索到。",
    "Война и мир", "ﬁne ﬂour Émile ÇA", "word " * 600, "x" * 300, "INV-4821-3fa9c1 reference?",
]


@pytest.fixture(scope="module")
def torch_model() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(batch_size=16, runtime="torch")


@pytest.fixture(scope="module")
def onnx_model() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(batch_size=16, runtime="onnx")


@pytest.fixture(scope="module", params=["onnx", "torch"])
def local(request: pytest.FixtureRequest, torch_model: SentenceTransformerEmbedder,
          onnx_model: SentenceTransformerEmbedder) -> SentenceTransformerEmbedder:
    return onnx_model if request.param == "onnx" else torch_model


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
async def test_local_batches_match_encode_in_input_order(local: SentenceTransformerEmbedder,
                                                          torch_model: SentenceTransformerEmbedder) -> None:
    """Longest-first batching with the next batch tokenized during the forward pass gives the
    vectors sentence-transformers' ``encode()`` gives, row for row in input order (lengths vary
    across batches), on either runtime."""
    texts = [("word " * (1 + (i * 37) % 90)).strip() + f" {i}" for i in range(41)] + AWKWARD
    got = await local.embed(texts)
    want = torch_model._model.encode(texts, batch_size=16, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(got, want, atol=2e-5)


def test_the_onnx_tokenizer_gives_sentence_transformers_features_id_for_id(
        torch_model: SentenceTransformerEmbedder) -> None:
    ours = MiniLMTokenizer(minilm_model_dir())(AWKWARD)
    theirs = torch_model._tokenize(AWKWARD)
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        assert np.array_equal(ours[name], theirs[name].numpy()), name
    assert ours["input_ids"].shape == (len(AWKWARD), 256)  # truncated at the model's window


def test_the_onnx_runtime_loads_without_torch() -> None:
    """The worker and the API on the default runtime never import torch (≈2 s of start-up, ≈0.3 GB)."""
    code = ("import asyncio, sys\n"
            "from shared.adapters.embedding import build_embedder\n"
            "e = build_embedder('sentence-transformers', runtime='onnx', threads=1)\n"
            "m = asyncio.run(e.embed(['a short query']))\n"
            "assert m.shape == (1, 384), m.shape\n"
            "print(sorted(n for n in ('torch', 'sentence_transformers', 'transformers') if n in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


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
    assert embedder.runtime == "onnx"  # the default
    with pytest.raises(ValueError, match="runtime"):
        build_embedder("sentence-transformers", runtime="tensorflow")
    with pytest.raises(ConfigurationError, match="768"):
        build_embedder("sentence-transformers", dim=768)
    with pytest.raises(ConfigurationError, match="unknown embedding provider"):
        build_embedder("word2vec")
