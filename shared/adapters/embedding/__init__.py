"""Text → vectors: the ``Embedder`` port, its two adapters and a factory.

``SentenceTransformerEmbedder`` (``embed_local.py``) runs all-MiniLM-L6-v2 in-process;
``OpenAIEmbedder`` (``embed_openai.py``) calls an OpenAI-compatible ``/v1/embeddings`` endpoint.
Both return (n, dim) float32 matrices with unit-L2-norm rows, so cosine similarity is a dot
product.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from shared.adapters.embedding.local import SentenceTransformerEmbedder
from shared.adapters.embedding.openai_compat import OpenAIEmbedder
from shared.adapters.embedding.vectors import FloatMatrix
from shared.domain.errors import ConfigurationError

__all__ = ["PROVIDERS", "Embedder", "OpenAIEmbedder", "SentenceTransformerEmbedder", "build_embedder"]

PROVIDERS = ("sentence-transformers", "openai")


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into unit-norm float32 vectors of a fixed dimension."""

    model_name: str
    dim: int

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Return an (len(texts), dim) float32 matrix, rows L2-normalized, in input order.

        Raises ``EmbeddingUnavailableError`` / ``EmbeddingTimeoutError`` (transient) or a
        ``PermanentError`` when the input is rejected.
        """
        ...


def build_embedder(provider: str, **kw: Any) -> Embedder:
    """Build the embedder for ``provider``.

    - ``"sentence-transformers"``: kw ``model_path``, ``batch_size``, ``device``, ``runtime``
      (``"onnx"`` or ``"torch"``), ``threads``, ``spinning``, ``precision`` (see
      ``SentenceTransformerEmbedder``), and
      optionally ``dim``, checked against the model.
    - ``"openai"``: kw ``base_url``, ``model``, ``api_key``, ``dim``, ``batch_size``,
      ``timeout_s`` (see ``OpenAIEmbedder``).

    Raises ``ConfigurationError`` for an unknown provider or a ``dim`` the local model does not
    produce, ``DependencyMissingError`` when the local model is not installed, ``TypeError``
    for unknown keywords.
    """
    if provider == "sentence-transformers":
        expected_dim = kw.pop("dim", None)
        local = SentenceTransformerEmbedder(**kw)
        if expected_dim is not None and expected_dim != local.dim:
            raise ConfigurationError(
                f"embedding dim {expected_dim} configured, but {local.model_name} gives {local.dim}"
            )
        return local
    if provider == "openai":
        return OpenAIEmbedder(**kw)
    raise ConfigurationError(f"unknown embedding provider {provider!r}; expected one of {PROVIDERS}")
