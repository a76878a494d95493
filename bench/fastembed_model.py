"""The all-MiniLM-L6-v2 folder FastEmbed loads in ``bench.peer`` (issue 30, item 1): made at install, from the
model's local files, nothing downloaded.

``python -m bench.fastembed_model OUT_DIR`` (``make peer-fastembed`` runs it with the build venv, which has
torch): exports the encoder with torch's ONNX exporter *unfused* (what FastEmbed's own download of this model
is: a plain export, ``model.onnx``; FastEmbed's ONNX Runtime session applies its online graph optimizations,
``ORT_ENABLE_ALL``, at load), and writes beside it the tokenizer files FastEmbed reads (``tokenizer.json``,
``config.json``, ``special_tokens_map.json``, ``vocab.txt``, and ``tokenizer_config.json`` with
``model_max_length`` 256, the model's window as sentence-transformers configures it; the packaged file says
512, the size of the position table). ``FastEmbedEmbedding(model_name="sentence-transformers/all-MiniLM-L6-v2",
specific_model_path=OUT_DIR)`` then loads it offline. The export's sentence embeddings of
``onnx_graph.CHECK_TEXTS`` against torch's (max abs difference ≤ ``onnx_graph.MAX_ABS_DIFF``), else nothing
is written.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

#: The model name FastEmbed knows these weights by (its mean pooling + L2 normalization).
FASTEMBED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
COPIED = ("tokenizer.json", "config.json", "special_tokens_map.json", "vocab.txt")
WINDOW = 256  #: tokens, [CLS] and [SEP] included (sentence_bert_config.json: max_seq_length)


def build(out: Path) -> float:
    """Write the folder ``out`` (replaced whole); the max abs difference of its sentence embeddings to
    torch's. Raises ``RuntimeError`` past ``MAX_ABS_DIFF`` (nothing is written then)."""
    import numpy as np
    import onnxruntime as ort
    import torch
    from transformers import AutoModel

    from shared.adapters.embedding.models import minilm_model_dir
    from shared.adapters.embedding.onnx_graph import CHECK_TEXTS, MAX_ABS_DIFF, _export
    from shared.adapters.embedding.onnx_runtime import MiniLMTokenizer, mean_pool_normalize

    model_dir = minilm_model_dir()
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    bert = AutoModel.from_pretrained(str(model_dir), local_files_only=True, attn_implementation="eager").eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        folder = Path(tmp) / "model"
        folder.mkdir()
        _export(torch, bert, folder / "model.onnx")
        for name in COPIED:
            shutil.copy(model_dir / name, folder / name)
        config = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
        (folder / "tokenizer_config.json").write_text(json.dumps({**config, "model_max_length": WINDOW}),
                                                      encoding="utf-8")
        features = MiniLMTokenizer(model_dir)(list(CHECK_TEXTS))
        session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
        (hidden,) = session.run(["last_hidden_state"], dict(features))[:1]
        with torch.inference_mode():
            want = bert(**{k: torch.from_numpy(v) for k, v in features.items()}).last_hidden_state.numpy()
        mask = features["attention_mask"]
        diff = float(np.abs(mean_pool_normalize(hidden, mask) - mean_pool_normalize(want, mask)).max())
        if diff > MAX_ABS_DIFF:
            raise RuntimeError(f"FastEmbed export rejected: max abs diff {diff:.2e} to torch")
        shutil.rmtree(out, ignore_errors=True)
        folder.rename(out)
    return diff


def main() -> int:
    out = Path(sys.argv[1])
    if (out / "model.onnx").is_file() and (out / "tokenizer_config.json").is_file():
        print(f"FastEmbed model folder up to date: {out}")
        return 0
    diff = build(out)
    print(f"FastEmbed model folder written: {out} (max abs diff to torch {diff:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
