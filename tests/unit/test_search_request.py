"""Issue 11: search queries are cleaned like document text; nothing left is a 422, not a 500."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from knowledge_service.schemas import SearchRequest


@pytest.mark.parametrize(("raw", "cleaned"), [
    ("harbour \ud800 ferry", "harbour ferry"),
    ("cafe\u0301  au\tlait\x00", "café au lait"),  # NFC, spaces collapsed, NUL removed
    ("  XK-4471 \n", "XK-4471"),
])
def test_queries_are_cleaned_like_documents(raw: str, cleaned: str) -> None:
    assert SearchRequest(query=raw).query == cleaned


@pytest.mark.parametrize("raw", ["   ", "\x00", "\x00\x01 \t", "\ud800", "\u200b\ufeff"])
def test_a_query_with_nothing_left_is_refused_clearly(raw: str) -> None:
    with pytest.raises(ValidationError, match="no searchable text"):
        SearchRequest(query=raw)


def test_mode_defaults_to_hybrid_and_is_checked() -> None:
    assert SearchRequest(query="x").mode == "hybrid"
    with pytest.raises(ValidationError):
        SearchRequest.model_validate({"query": "x", "mode": "fuzzy"})
