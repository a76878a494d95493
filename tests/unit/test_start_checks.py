"""Start-up checks that refuse with one line instead of a traceback (a missing ONNX graph)."""

from __future__ import annotations

from pathlib import Path

import pytest

import knowledge_service.__main__ as api_main
from shared.domain.errors import DependencyMissingError
from shared.settings import KnowledgeSettings


def test_the_api_refuses_to_start_without_the_onnx_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    monkeypatch.setattr(api_main, "minilm_model_dir", lambda: tmp_path)
    settings = KnowledgeSettings.model_construct(embedding_provider="sentence-transformers", embedding_runtime="onnx")
    with pytest.raises(DependencyMissingError, match="onnx_graph"):
        api_main.check_local_model(settings)
    # torch, or an endpoint, needs no graph
    api_main.check_local_model(settings.model_copy(update={"embedding_runtime": "torch"}))
    api_main.check_local_model(settings.model_copy(update={"embedding_provider": "openai"}))
