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


def test_the_worker_refuses_to_start_when_one_unit_could_outlast_the_consumer_timeout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The start-up guard of issue 31, in the worker's composition root: exit 2, one line that
    names the settings to change; nothing opened."""
    import task_service.__main__ as worker_main

    monkeypatch.setenv("PREFETCH", "2")
    monkeypatch.setenv("TASK_BUDGET_BASE_S", "900")
    opened: list[object] = []
    monkeypatch.setattr(worker_main, "run", lambda settings: opened.append(settings))
    with pytest.raises(SystemExit) as exit_:
        worker_main.start_worker()
    assert exit_.value.code == 2 and opened == []
    err = capsys.readouterr().err.strip()
    assert err.startswith("task_service: refusing to start:") and "CONSUMER_TIMEOUT_S" in err and "\n" not in err
