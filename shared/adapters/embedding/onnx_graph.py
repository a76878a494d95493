"""The bundled all-MiniLM-L6-v2 as a fused ONNX graph: built once at install, checked at load.

Why: ONNX Runtime runs the same weights 1.76× faster than torch on this machine's 2 cores
(1,536 novel pieces, batch 64: 40.7 vs 23.1 texts/s, median of 3 interleaved rounds; max abs
difference 2.7e-7, every row's cosine to torch's 1.0000000; issue 20), once its BERT optimizer
has fused each layer's attention into one ``Attention`` op. It fuses only the graph of torch's
TorchScript exporter (``dynamo=False``) with the model's *eager* attention: the SDPA attention
of transformers 5 and the dynamo exporter's graph get no fusion (1.22×, twice the memory).

Build (:func:`build`, ``python -m shared.adapters.embedding.onnx_graph [--model-dir DIR]``; ≈6 s):
the only code that needs torch, so it runs apart from the services: ``make install`` runs it in a
build venv (``.venv-build``, the ``build-model`` extra) against the runtime venv's model folder,
the Dockerfile in a build stage whose output the runtime image copies. Export the encoder (inputs ``input_ids``,
``attention_mask``, ``token_type_ids``, (batch, seq) int64; output ``last_hidden_state``,
(batch, seq, 384) float32), fuse it (fp32: no quantization, no fp16), check it against torch on
:data:`CHECK_TEXTS`, then write the graph and a manifest next to the model files
(``onnx/model-fused-fp32.onnx`` + ``.json``); then its int8 copy (:func:`build_quantized`,
``onnx/model-fused-int8-dynamic.onnx`` + ``.json``, selectable with ``EMBEDDING_PRECISION``).
Nothing is downloaded. The manifest records the source weights' SHA-256; :func:`fused_graph`
refuses a graph built from other weights.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.domain.errors import DependencyMissingError

#: Graph precisions built at install (``EMBEDDING_PRECISION``): the fused fp32 graph, and its int8 copy by
#: ONNX Runtime's dynamic quantization (weights int8 per channel, activations quantized per call; bench/precision.py
#: measures it against fp32: section "precision" of bench/RESULTS.md).
PRECISIONS = ("fp32", "int8-dynamic")


def graph_names(precision: str) -> tuple[str, str]:
    """(graph, manifest) paths of ``precision`` relative to the model folder. Raises ValueError if unknown."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown graph precision {precision!r}; expected one of {PRECISIONS}")
    return f"onnx/model-fused-{precision}.onnx", f"onnx/model-fused-{precision}.json"


GRAPH_NAME, MANIFEST_NAME = graph_names("fp32")
#: Lowest cosine to the fp32 graph's sentence embedding of a CHECK_TEXTS text accepted for a quantized graph
#: at build time (int8-dynamic: ≈0.99; a broken quantization gives far less).
MIN_QUANTIZED_COSINE = 0.95
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "last_hidden_state"
#: Largest difference to torch's sentence embedding accepted at build time (the fused fp32
#: graph differs by ≈3e-7; a wrong graph by far more).
MAX_ABS_DIFF = 1e-4
CHECK_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "Reference INV-4821-3fa9c1 was filed by the northern depot on 12 March.",
    "Война и мир — роман-эпопея Льва Николаевича Толстого.",
    "知识库中的每一个词都应该可以被检索到。",
    " ".join(["a long passage of words that runs past the model's window"] * 40),
)


@dataclass(frozen=True)
class Manifest:
    """What a built graph was built from and how it compared to torch."""

    source_sha256: str
    fused_attention: int  # Attention ops after fusion (one per layer when fused)
    max_abs_diff: float  # against torch's sentence embeddings of CHECK_TEXTS
    torch: str
    onnxruntime: str
    precision: str = "fp32"
    min_cosine: float = 1.0  # quantized graphs: lowest cosine to the fp32 graph on CHECK_TEXTS


def source_sha256(model_dir: Path) -> str:
    """SHA-256 (hex) of ``model_dir/model.safetensors`` (90.9 MB, ≈0.2 s)."""
    h = hashlib.sha256()
    with (model_dir / "model.safetensors").open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fused_graph(model_dir: Path, precision: str = "fp32") -> Path:
    """The built graph of ``precision`` for the weights in ``model_dir``.

    Raises ``DependencyMissingError`` (naming the command that builds it) when the graph or its
    manifest is missing, or the manifest names other weights; ValueError for an unknown precision."""
    graph, manifest = (model_dir / name for name in graph_names(precision))
    hint = "build it with `python -m shared.adapters.embedding.onnx_graph` (`make install` does)"
    if not graph.is_file() or not manifest.is_file():
        raise DependencyMissingError(f"no fused ONNX graph at {graph}: {hint}")
    try:
        built = json.loads(manifest.read_text(encoding="utf-8"))["source_sha256"]
    except (OSError, ValueError, KeyError) as exc:
        raise DependencyMissingError(f"unreadable manifest {manifest} ({exc}): {hint}") from exc
    if built != source_sha256(model_dir):
        raise DependencyMissingError(f"{graph} was built from other weights than {model_dir}: {hint}")
    return graph


def is_current(model_dir: Path, precision: str = "fp32") -> bool:
    """True when :func:`fused_graph` would accept the graph of ``precision`` in ``model_dir``."""
    try:
        fused_graph(model_dir, precision)
    except DependencyMissingError:
        return False
    return True


def build(model_dir: Path) -> Manifest:
    """Export, fuse and check the graph for ``model_dir``; write it and its manifest atomically.

    Needs torch, transformers and onnx (the ``build-model`` extra) besides onnxruntime. Raises
    ``RuntimeError`` when the fused graph differs from torch by more than :data:`MAX_ABS_DIFF`
    or fused no attention (it is then not written)."""
    import onnxruntime
    import torch
    from onnxruntime.transformers import optimizer
    from transformers import AutoConfig, AutoModel
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # no "Loading weights" bar

    config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
    bert = AutoModel.from_pretrained(str(model_dir), local_files_only=True, attn_implementation="eager").eval()
    out_dir = model_dir / Path(GRAPH_NAME).parent
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        raw, fused = Path(tmp) / "raw.onnx", Path(tmp) / "fused.onnx"
        _export(torch, bert, raw)
        model = optimizer.optimize_model(str(raw), model_type="bert", num_heads=config.num_attention_heads,
                                         hidden_size=config.hidden_size, opt_level=1, use_gpu=False)
        model.save_model_to_file(str(fused))
        attention = int(model.get_fused_operator_statistics().get("Attention", 0))
        diff = _max_abs_diff(torch, bert, model_dir, fused)
        if attention == 0 or diff > MAX_ABS_DIFF:
            raise RuntimeError(f"fused graph rejected: {attention} Attention ops fused, max abs diff {diff:.2e}")
        manifest = Manifest(source_sha256(model_dir), attention, diff, torch.__version__, onnxruntime.__version__)
        os.replace(fused, model_dir / GRAPH_NAME)
        (model_dir / MANIFEST_NAME).write_text(json.dumps(manifest.__dict__, indent=1), encoding="utf-8")
    return manifest


def quantize_int8_dynamic(fp32: Path, out: Path) -> None:
    """Write ``out``: ``fp32`` with ONNX Runtime's dynamic quantization (``quantize_dynamic``: MatMul and the
    fused Attention's weights int8 per output channel, activations uint8 scaled per call). Per channel
    matters: per tensor, the mean cosine to fp32 over novel windows was 0.935, per channel 0.993 (issue 30).
    Needs the onnx package (the ``build-model`` extra)."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # "please consider pre-processing": the graph is already optimized
    try:
        # DefaultTensorType: the fused ops' outputs have no inferred type; they are float
        quantize_dynamic(str(fp32), str(out), weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"DefaultTensorType": 1})
    finally:
        root.setLevel(level)


def min_cosine(model_dir: Path, graph: Path, reference: Path) -> float:
    """Lowest cosine between ``graph``'s and ``reference``'s sentence embeddings of CHECK_TEXTS."""
    from shared.adapters.embedding.onnx_runtime import MiniLMTokenizer, OnnxEncoder

    features = MiniLMTokenizer(model_dir)(list(CHECK_TEXTS))
    a, b = OnnxEncoder(graph, threads=None)(features), OnnxEncoder(reference, threads=None)(features)
    return float((a * b).sum(axis=1).min())


def build_quantized(model_dir: Path, precision: str) -> Manifest:
    """Quantize the current fp32 graph of ``model_dir`` to ``precision`` and write it and its manifest.

    Raises ``DependencyMissingError`` without a current fp32 graph, ``RuntimeError`` when a CHECK_TEXTS
    embedding's cosine to fp32 is below :data:`MIN_QUANTIZED_COSINE` (nothing is written then)."""
    import onnxruntime

    fp32 = fused_graph(model_dir)
    graph, manifest = (model_dir / name for name in graph_names(precision))
    base = json.loads((model_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(dir=graph.parent) as tmp:
        out = Path(tmp) / "quantized.onnx"
        quantize_int8_dynamic(fp32, out)
        cosine = min_cosine(model_dir, out, fp32)
        if cosine < MIN_QUANTIZED_COSINE:
            raise RuntimeError(f"{precision} graph rejected: min cosine to fp32 {cosine:.4f}")
        m = Manifest(base["source_sha256"], int(base["fused_attention"]), float(base["max_abs_diff"]),
                     str(base["torch"]), onnxruntime.__version__, precision, cosine)
        os.replace(out, graph)
        manifest.write_text(json.dumps(m.__dict__, indent=1), encoding="utf-8")
    return m


def _export(torch: Any, bert: Any, path: Path) -> None:
    class Encoder(torch.nn.Module):  # type: ignore[misc]  # positional inputs, one output
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    ids = torch.ones((2, 8), dtype=torch.int64)
    axes = {name: {0: "batch", 1: "seq"} for name in (*INPUTS, OUTPUT)}
    with warnings.catch_warnings():
        # the TorchScript exporter is deprecated (the dynamo one's graph does not fuse) and
        # traces constants the check below covers: padded and 256-token inputs
        warnings.simplefilter("ignore")
        torch.onnx.export(Encoder().eval(), (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(path),
                          input_names=list(INPUTS), output_names=[OUTPUT], dynamic_axes=axes, opset_version=17,
                          do_constant_folding=True, dynamo=False)


def _max_abs_diff(torch: Any, bert: Any, model_dir: Path, graph: Path) -> float:
    """Largest difference between torch's and the graph's sentence embeddings of CHECK_TEXTS."""
    import numpy as np

    from shared.adapters.embedding.onnx_runtime import MiniLMTokenizer, OnnxEncoder, mean_pool_normalize

    tokenizer = MiniLMTokenizer(model_dir)
    features = tokenizer(list(CHECK_TEXTS))
    ours = OnnxEncoder(graph, threads=None)(features)
    with torch.inference_mode():
        hidden = bert(**{k: torch.from_numpy(v) for k, v in features.items()}).last_hidden_state.numpy()
    theirs = mean_pool_normalize(hidden, features["attention_mask"])
    return float(np.abs(ours - theirs).max())


def main(argv: list[str] | None = None) -> int:
    """``python -m shared.adapters.embedding.onnx_graph [--force] [--model-dir DIR]``: build the
    graph unless a current one exists; prints what it did. Exit 0 when a current graph is there
    afterwards. ``--model-dir``: the model folder read and written (default: this environment's
    installed copy; ``make install`` names the runtime venv's from the build venv)."""
    from shared.adapters.embedding.models import minilm_model_dir

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--force", action="store_true", help="rebuild even if a current graph exists")
    ap.add_argument("--model-dir", type=Path, default=None, help="the model folder (default: the installed one)")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    model_dir = args.model_dir or minilm_model_dir()
    if not args.force and is_current(model_dir):
        print(f"fused ONNX graph up to date: {model_dir / GRAPH_NAME}")
    else:
        started = time.monotonic()
        m = build(model_dir)
        print(f"fused ONNX graph built in {time.monotonic() - started:.1f} s: {model_dir / GRAPH_NAME} "
              f"({m.fused_attention} Attention ops, max abs diff to torch {m.max_abs_diff:.1e})")
    for precision in PRECISIONS[1:]:
        name = model_dir / graph_names(precision)[0]
        if not args.force and is_current(model_dir, precision):
            print(f"{precision} graph up to date: {name}")
            continue
        q = build_quantized(model_dir, precision)
        print(f"{precision} graph built: {name} (min cosine to fp32 on the check texts {q.min_cosine:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
