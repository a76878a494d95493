"""Issue 17: a document whose chunks the embedding model reads as ``[UNK]`` says so in its warnings."""

from __future__ import annotations

import pytest

from shared.settings import WorkerSettings
from task_service.pipeline.chunk import Chunker, ChunkSettings, load_minilm_tokenizer
from task_service.pipeline.extract import extract
from task_service.pipeline.limits import ParseLimits

THAI = "เมื่อวานฉันไปตลาดและซื้อทุเรียนมาสองลูก " * 30


@pytest.fixture(scope="module")
def chunker() -> Chunker:
    return Chunker(load_minilm_tokenizer())


def test_a_thai_document_warns_that_vector_search_cannot_see_it(chunker: Chunker) -> None:
    got = extract(THAI.encode(), "thai.txt", ParseLimits(), chunker)
    assert got.warnings == (
        "1 of 1 chunks are mostly unknown characters for the embedding model (Thai): vector search will not "
        "find their text, keyword search does (README: a multilingual model through EMBEDDING_PROVIDER=openai)",
    )


def test_only_the_unreadable_chunks_are_counted(chunker: Chunker) -> None:
    text = "Harbour ferries leave at noon every day. " * 120 + "\n\n" + "ខ្ញុំចូលចិត្តរៀនភាសាខ្មែរ " * 60
    got = extract(text.encode(), "mixed.txt", ParseLimits(), chunker)
    assert len(got.chunks) > 2
    assert got.warnings[-1].startswith(f"1 of {len(got.chunks)} chunks are mostly unknown characters")
    assert "(Khmer)" in got.warnings[-1]


@pytest.mark.parametrize("text", ["Crème brûlée et café au lait. " * 40, "Все люди рождаются свободными. " * 40])
def test_text_the_model_reads_has_no_warning(chunker: Chunker, text: str) -> None:
    assert extract(text.encode(), "ok.txt", ParseLimits(), chunker).warnings == ()


def test_unknown_share(chunker: Chunker) -> None:
    run = "ฉันไปตลาด"  # 9 characters, one [UNK] (a lone "ทุเรียน" is readable: its characters are in the vocabulary)
    assert chunker.unknown_share([run, "durian", f"durian {run}", ""]) == [1.0, 0.0, pytest.approx(9 / 15), 0.0]


def test_no_warning_when_another_model_embeds() -> None:
    """With EMBEDDING_PROVIDER=openai the chunks go to a model whose vocabulary is not MiniLM's."""
    settings = ChunkSettings.from_settings(WorkerSettings(embedding_provider="openai"))
    assert settings.warn_unreadable is False
    other = Chunker.from_settings(load_minilm_tokenizer(), settings)
    assert extract(THAI.encode(), "thai.txt", ParseLimits(), other).warnings == ()
    assert ChunkSettings.from_settings(WorkerSettings()).warn_unreadable is True
