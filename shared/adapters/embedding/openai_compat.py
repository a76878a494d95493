"""Embeddings from an OpenAI-compatible HTTP endpoint (``POST /v1/embeddings``).

Request body ``{"model": ..., "input": [...]}``; response ``{"data": [{"index": i,
"embedding": [...]}, ...]}`` (OpenAI API reference, "Create embeddings"; served the same way by
vLLM, text-embeddings-inference, Ollama and LiteLLM). Rows may come back in any order and are
put back in input order by ``index``.

Error mapping (httpx exceptions never leave this module):

| failure                                            | raised                                   |
|----------------------------------------------------|------------------------------------------|
| no complete response within ``timeout_s``          | EmbeddingTimeoutError                    |
| connection refused/reset, DNS, protocol error      | EmbeddingUnavailableError                |
| HTTP 5xx, 429 (rate limited), 408                  | EmbeddingUnavailableError                |
| malformed body (not JSON, wrong count/index)       | EmbeddingUnavailableError                |
| other HTTP 4xx (bad model, input too long, auth)   | EmbeddingRejectedError (PermanentError)  |
| vectors of another dimension than ``dim``          | EmbeddingDimensionError (PermanentError) |
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from shared.adapters.embedding.vectors import FloatMatrix, empty_matrix, l2_normalize
from shared.domain.errors import (
    EmbeddingDimensionError,
    EmbeddingRejectedError,
    EmbeddingTimeoutError,
    EmbeddingUnavailableError,
)

_RETRYABLE_4XX = {408, 429}
_DETAIL_CHARS = 300  # how much of an error body goes into the message


class OpenAIEmbedder:
    """``Embedder`` calling an OpenAI-compatible embeddings endpoint over HTTP."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        dim: int,
        batch_size: int = 64,
        timeout_s: float = 60.0,
    ) -> None:
        """``base_url`` is the server root (``http://host:port``); a trailing ``/v1`` is accepted
        too. ``dim`` is the expected vector size, ``batch_size`` the texts per request,
        ``timeout_s`` the deadline in seconds for each request (connect + send + full response).
        Raises ``ValueError`` for a non-positive dim, batch or timeout.
        """
        if dim < 1 or batch_size < 1 or timeout_s <= 0:
            raise ValueError(f"dim, batch_size and timeout_s must be positive: {dim}, {batch_size}, {timeout_s}")
        root = base_url.rstrip("/")
        self.url = f"{root}/embeddings" if root.endswith("/v1") else f"{root}/v1/embeddings"
        self.model_name = model
        self.dim = dim
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(headers=headers, timeout=timeout_s)

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed ``texts`` in batches of ``batch_size`` (sequential requests): returns an
        (len(texts), dim) float32 matrix with unit-L2-norm rows, in input order.
        Raises the errors in the module table.
        """
        if not texts:
            return empty_matrix(self.dim)
        parts = [
            await self._embed_batch(list(texts[i : i + self.batch_size])) for i in range(0, len(texts), self.batch_size)
        ]
        return l2_normalize(np.concatenate(parts, axis=0))

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.aclose()

    async def _embed_batch(self, batch: list[str]) -> FloatMatrix:
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await self._client.post(self.url, json={"model": self.model_name, "input": batch})
                await response.aread()
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise EmbeddingTimeoutError(f"embedding request to {self.url} timed out after {self.timeout_s} s") from exc
        except httpx.TransportError as exc:
            raise EmbeddingUnavailableError(f"embedding endpoint {self.url} unreachable: {exc!r}") from exc
        _raise_for_status(response)
        return self._rows(response, len(batch))

    def _rows(self, response: httpx.Response, expected: int) -> FloatMatrix:
        try:
            data = response.json()["data"]
            by_index = {int(item["index"]): item["embedding"] for item in data}
            matrix = np.array([by_index[i] for i in range(expected)], dtype=np.float64)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingUnavailableError(
                f"malformed embeddings response from {self.url} (expected {expected} rows): {exc!r}"
            ) from exc
        if len(data) != expected:
            raise EmbeddingUnavailableError(f"{self.url} returned {len(data)} embeddings for {expected} inputs")
        if matrix.ndim != 2 or matrix.shape[1] != self.dim:
            raise EmbeddingDimensionError(
                f"{self.url} model {self.model_name!r} returned vectors of shape {matrix.shape}, "
                f"expected dimension {self.dim}"
            )
        try:
            return l2_normalize(matrix)
        except ValueError as exc:
            raise EmbeddingUnavailableError(f"{self.url} returned invalid vectors: {exc}") from exc


def _raise_for_status(response: httpx.Response) -> None:
    status = response.status_code
    if status < 400:
        return
    detail = _detail(response)
    if status >= 500 or status in _RETRYABLE_4XX:
        raise EmbeddingUnavailableError(f"embedding endpoint answered HTTP {status}: {detail}")
    raise EmbeddingRejectedError(f"embedding endpoint rejected the request, HTTP {status}: {detail}")


def _detail(response: httpx.Response) -> str:
    try:
        body: Any = response.json()
        message = body.get("error", body) if isinstance(body, dict) else body
    except ValueError:
        message = response.text
    return str(message)[:_DETAIL_CHARS]
