"""all-MiniLM-L6-v2 on ONNX Runtime: the tokenizer and the fused encoder, without torch.

:class:`MiniLMTokenizer` gives the features sentence-transformers gives the model (the same
``tokenizer.json``, truncated at 256 tokens, padded to the batch's longest; checked id for id by
the integration tests); :class:`OnnxEncoder` runs the fused graph of :mod:`onnx_graph` and
mean-pools and L2-normalizes as the model's Pooling and Normalize modules do. The worker and the
API import neither torch nor sentence-transformers on this path (start-up ≈2 s shorter).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from shared.adapters.embedding.models import MINILM_DIM, MINILM_MAX_SEQ_LENGTH
from shared.adapters.embedding.vectors import FloatMatrix, l2_normalize
from shared.domain.errors import DependencyMissingError

Features = dict[str, npt.NDArray[np.int64]]


def mean_pool_normalize(hidden: npt.NDArray[Any], mask: npt.NDArray[Any]) -> FloatMatrix:
    """Mean of ``hidden`` (n, seq, dim) over the positions ``mask`` (n, seq) keeps, each row then
    L2-normalized: an (n, dim) float32 matrix (sentence-transformers' Pooling mean + Normalize)."""
    m = mask.astype(np.float32)[:, :, None]
    summed = (hidden.astype(np.float32, copy=False) * m).sum(axis=1)
    return l2_normalize(summed / np.clip(m.sum(axis=1), 1e-9, None))


class MiniLMTokenizer:
    """The model's fast tokenizer (``tokenizer.json``) as sentence-transformers configures it:
    at most :data:`MINILM_MAX_SEQ_LENGTH` tokens ([CLS] and [SEP] included), padded to the
    longest text of the call. Thread-safe for concurrent calls (the Rust tokenizer releases the
    GIL). Raises ``DependencyMissingError`` when the file or the ``tokenizers`` package is missing."""

    def __init__(self, model_dir: Path, max_length: int = MINILM_MAX_SEQ_LENGTH) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise DependencyMissingError(f"install 'tokenizers' to embed locally ({exc})") from exc
        path = model_dir / "tokenizer.json"
        if not path.is_file():
            raise DependencyMissingError(f"no tokenizer at {path}")
        tok = Tokenizer.from_file(str(path))
        tok.enable_truncation(max_length=max_length, strategy="longest_first")
        pad = tok.token_to_id("[PAD]")
        tok.enable_padding(pad_id=0 if pad is None else pad, pad_token="[PAD]")
        self._tok = tok

    def __call__(self, texts: list[str]) -> Features:
        """``input_ids``, ``attention_mask``, ``token_type_ids``: (len(texts), longest) int64."""
        encodings = self._tok.encode_batch(texts)
        return {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }


class OnnxEncoder:
    """An ONNX Runtime session over the fused graph (CPU). ``threads``: intra-op threads (None:
    ONNX Runtime's default, one per core). ``spinning``: whether idle intra-op threads spin-wait
    for work (ONNX Runtime's default, ``session.intra_op.allow_spinning``) or sleep; spinning burns
    the cores other processes wait for on a shared machine. Calls from several threads are safe
    (ONNX Runtime's ``run`` is); the caller serializes them anyway. Raises ``DependencyMissingError``
    without onnxruntime or when the graph cannot be loaded."""

    def __init__(self, graph: Path, threads: int | None, spinning: bool = True) -> None:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise DependencyMissingError(f"install 'onnxruntime' to embed locally ({exc})") from exc
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or 0
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # errors only: no "Removing initializer" chatter
        spin = "1" if spinning else "0"
        options.add_session_config_entry("session.intra_op.allow_spinning", spin)
        options.add_session_config_entry("session.inter_op.allow_spinning", spin)
        # No memory pattern: planned per input shape, it kept a block per batch shape seen (RSS
        # 1,256 MB after 463 novel chunks, peak 1,281). Without it the arena still reuses its
        # blocks: peak 819 MB (torch: 884) at the same 43 texts/s. The arena itself stays on:
        # without it each op's buffers are mmapped and unmapped (our pinned mmap threshold),
        # 28.6 texts/s.
        options.enable_mem_pattern = False
        try:
            self._session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own Fail / InvalidGraph types
            raise DependencyMissingError(f"cannot load the ONNX graph {graph}: {exc}") from exc
        self._inputs = {i.name for i in self._session.get_inputs()}
        last = self._session.get_outputs()[0].shape[-1]
        self.dim = last if isinstance(last, int) else MINILM_DIM

    def __call__(self, features: Features) -> FloatMatrix:
        """Sentence embeddings of ``features``: (n, dim) float32, rows of unit L2 norm."""
        feeds = {k: v for k, v in features.items() if k in self._inputs}
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        return mean_pool_normalize(hidden, features["attention_mask"])
